//! Admission and validation: defaulting, validation of the built-in kinds
//! and of custom resources against their schemas, unknown and duplicate
//! fields, and CustomResourceDefinitions. It does not write: the REST
//! operations (the `rest` folder) call it, and carry out what it decides.

pub(crate) mod crd;
pub(crate) mod defaults;
pub(crate) mod duplicates;
pub(crate) mod field_validation;
pub(crate) mod formats;
pub(crate) mod schema;
pub(crate) mod validation;
pub(crate) mod validation_groups;
pub(crate) mod workloads;
