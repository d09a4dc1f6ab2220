//! Authentication and authorization: service-account tokens (the JWTs a
//! TokenRequest is issued), RBAC with escalation prevention, impersonation,
//! and the access and token reviews.

pub(crate) mod escalation;
pub(crate) mod impersonation;
pub(crate) mod rbac;
pub(crate) mod reviews;
pub(crate) mod service_account_jwt;
