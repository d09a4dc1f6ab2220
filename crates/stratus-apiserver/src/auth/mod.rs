//! Authentication and authorization: tokens (TokenRequest and its JWTs),
//! RBAC with escalation prevention, impersonation, and the access and token
//! reviews.

pub(crate) mod escalation;
pub(crate) mod impersonation;
pub(crate) mod rbac;
pub(crate) mod reviews;
pub(crate) mod service_account_jwt;
pub(crate) mod token_request;
