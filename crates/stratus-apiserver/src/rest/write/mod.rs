//! Writes: create, update, patch, delete, and the write subresources.
//!
//! The checks and update rules every write shares are in `object`; each
//! verb has a module of its own above it. Server-side apply (`apply`,
//! beside this folder) builds on `object` and `create`, and `update`'s
//! PATCH hands apply patches to it.

pub(crate) mod create;
pub(crate) mod delete;
pub(crate) mod object;
pub(crate) mod pod;
pub(crate) mod update;

pub(crate) use create::create;
pub(crate) use delete::{delete, delete_collection};
pub(crate) use object::{Answer, SYSTEM_NAMESPACES, bump_generation};
pub(crate) use pod::{bind, evict};
pub(crate) use update::{patch, update};
