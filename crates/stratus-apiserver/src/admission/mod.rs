//! Admission and validation: defaulting, validation of the built-in kinds
//! and of custom resources against their schemas, unknown and duplicate
//! fields, CustomResourceDefinitions, and admission webhooks.

pub(crate) mod crd;
pub(crate) mod defaults;
pub(crate) mod duplicates;
pub(crate) mod field_validation;
pub(crate) mod formats;
pub(crate) mod schema;
pub(crate) mod validation;
pub(crate) mod validation_groups;
pub(crate) mod webhooks;
pub(crate) mod workloads;
