//! The error type of every task: any error, boxed.

/// Any error, boxed, as the tasks return it.
pub(crate) type BoxError = Box<dyn std::error::Error + Send + Sync>;
