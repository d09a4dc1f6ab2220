//! Factories by name: the one registry type of the manager and
//! virtual-kubelet commands (Go's `RegisterCloudProvider` and
//! virtual-kubelet's provider registry). A vendor's `main` registers its
//! provider under a name; the command builds the one its flags name.
//!
//! A second registration of a name is an error (Go exits the process), as
//! is an empty or reserved name; an unknown name is an error listing the
//! registered ones.
//!
//! ```
//! use stratus_runtime::registry::{Registry, RegistryError};
//!
//! let registry: Registry<fn() -> u32> = Registry::new("widget", &["external"]);
//! registry.register("small", || 1).unwrap();
//! assert!(matches!(registry.register("small", || 2), Err(RegistryError::Duplicate { .. })));
//! assert!(matches!(registry.register("external", || 3), Err(RegistryError::ReservedName { .. })));
//! assert_eq!(registry.get("small").unwrap()(), 1);
//! let unknown = registry.get("large").unwrap_err();
//! assert_eq!(unknown.to_string(), "unknown widget \"large\" (registered: small)");
//! ```

use std::collections::BTreeMap;
use std::sync::{PoisonError, RwLock, RwLockReadGuard};

/// Why a registration or a lookup failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RegistryError {
    /// The name is already registered.
    #[error("{kind} {name:?} was registered twice")]
    Duplicate {
        /// What the registry holds (`cloud provider`, `pod provider`).
        kind: &'static str,
        /// The name.
        name: String,
    },
    /// The name cannot be registered: it is empty or reserved.
    #[error("{name:?} cannot be registered as a {kind} name")]
    ReservedName {
        /// What the registry holds.
        kind: &'static str,
        /// The name.
        name: String,
    },
    /// Nothing is registered under the name.
    #[error("unknown {kind} {name:?} (registered: {})", listed(.registered))]
    Unknown {
        /// What the registry holds.
        kind: &'static str,
        /// The name asked for.
        name: String,
        /// The registered names, sorted.
        registered: Vec<String>,
    },
}

fn listed(names: &[String]) -> String {
    if names.is_empty() {
        "none".to_owned()
    } else {
        names.join(", ")
    }
}

/// Factories (or anything cheap to clone) by name.
pub struct Registry<T> {
    kind: &'static str,
    reserved: &'static [&'static str],
    entries: RwLock<BTreeMap<String, T>>,
}

impl<T> std::fmt::Debug for Registry<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field("kind", &self.kind)
            .field("names", &self.names())
            .finish()
    }
}

impl<T> Registry<T> {
    /// An empty registry of `kind` (named in its errors), where the empty
    /// name and the `reserved` ones cannot be registered.
    pub const fn new(kind: &'static str, reserved: &'static [&'static str]) -> Self {
        Self {
            kind,
            reserved,
            entries: RwLock::new(BTreeMap::new()),
        }
    }

    /// What the registry holds, as its errors name it.
    pub fn kind(&self) -> &'static str {
        self.kind
    }

    /// Register `entry` under `name`.
    pub fn register(&self, name: &str, entry: T) -> Result<(), RegistryError> {
        if name.trim().is_empty() || self.reserved.contains(&name) {
            return Err(RegistryError::ReservedName {
                kind: self.kind,
                name: name.to_owned(),
            });
        }
        let mut entries = self.entries.write().unwrap_or_else(PoisonError::into_inner);
        if entries.contains_key(name) {
            return Err(RegistryError::Duplicate {
                kind: self.kind,
                name: name.to_owned(),
            });
        }
        entries.insert(name.to_owned(), entry);
        Ok(())
    }

    /// True if something is registered under `name`.
    pub fn contains(&self, name: &str) -> bool {
        self.read().contains_key(name)
    }

    /// The registered names, sorted.
    pub fn names(&self) -> Vec<String> {
        self.read().keys().cloned().collect()
    }

    fn read(&self) -> RwLockReadGuard<'_, BTreeMap<String, T>> {
        self.entries.read().unwrap_or_else(PoisonError::into_inner)
    }
}

impl<T: Clone> Registry<T> {
    /// What is registered under `name`, or an error listing the names.
    pub fn get(&self, name: &str) -> Result<T, RegistryError> {
        let entries = self.read();
        entries
            .get(name)
            .cloned()
            .ok_or_else(|| RegistryError::Unknown {
                kind: self.kind,
                name: name.to_owned(),
                registered: entries.keys().cloned().collect(),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked_and_listed() {
        let registry: Registry<u8> = Registry::new("thing", &["external"]);
        assert_eq!(
            registry.get("a").unwrap_err().to_string(),
            "unknown thing \"a\" (registered: none)"
        );
        for bad in ["", "  ", "external"] {
            assert!(matches!(
                registry.register(bad, 1),
                Err(RegistryError::ReservedName { .. })
            ));
        }
        registry.register("b", 2).unwrap();
        registry.register("a", 1).unwrap();
        assert_eq!(
            registry.register("a", 3).unwrap_err().to_string(),
            "thing \"a\" was registered twice"
        );
        assert_eq!(registry.names(), ["a", "b"]);
        assert!(registry.contains("b") && !registry.contains("c"));
        assert_eq!(registry.get("a"), Ok(1));
        assert_eq!(
            registry.get("c").unwrap_err().to_string(),
            "unknown thing \"c\" (registered: a, b)"
        );
    }
}
