//! The served resources: the built-in table plus the resources that
//! CustomResourceDefinitions add and remove while the server runs.
//!
//! A resource keeps its index for the life of the server (the store's
//! buckets and watch events refer to resources by index): a removed custom
//! resource is marked unserved, and creating its definition again serves the
//! same index.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, RwLock};

use serde_json::Value;

use crate::resources::ResourceDef;
use crate::storage::store::Store;

/// A printer column of a custom resource (`additionalPrinterColumns`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PrinterColumn {
    pub(crate) name: String,
    pub(crate) type_: String,
    pub(crate) format: String,
    pub(crate) description: String,
    pub(crate) priority: i64,
    /// The column's JSON path, split into field names (`.spec.size` →
    /// `["spec", "size"]`).
    pub(crate) path: Vec<String>,
}

/// What a served custom resource version has beyond its names.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct CustomVersion {
    /// The CustomResourceDefinition's name (`<plural>.<group>`).
    pub(crate) crd: String,
    /// The structural schema (`openAPIV3Schema`), if the version has one.
    pub(crate) schema: Option<Value>,
    pub(crate) columns: Vec<PrinterColumn>,
    /// The list kind (`names.listKind`).
    pub(crate) list_kind: String,
    /// The scale subresource's paths, if the version declares one.
    pub(crate) scale: Option<ScalePaths>,
    /// For a version that is not the storage version, the storage
    /// version's name: requests are carried out there.
    pub(crate) storage_version: Option<&'static str>,
    /// `selectableFields`: the field selector name (the JSON path without
    /// its leading dot) and the path.
    pub(crate) selectable: Vec<(&'static str, Vec<String>)>,
}

#[derive(Default)]
struct Defs {
    defs: Vec<ResourceDef>,
    custom: HashMap<usize, Arc<CustomVersion>>,
}

/// The served resources.
pub(crate) struct Registry {
    inner: RwLock<Defs>,
}

fn read(lock: &RwLock<Defs>) -> std::sync::RwLockReadGuard<'_, Defs> {
    lock.read().unwrap_or_else(|e| e.into_inner())
}

impl Registry {
    pub(crate) fn new(defs: Vec<ResourceDef>) -> Self {
        Self {
            inner: RwLock::new(Defs {
                defs,
                custom: HashMap::new(),
            }),
        }
    }

    /// The resource at `index` (served or not).
    pub(crate) fn get(&self, index: usize) -> ResourceDef {
        read(&self.inner).defs[index]
    }

    /// Every resource, served or not, with its index.
    pub(crate) fn all(&self) -> Vec<(usize, ResourceDef)> {
        read(&self.inner).defs.iter().copied().enumerate().collect()
    }

    /// The served resources, in discovery order.
    pub(crate) fn served(&self) -> Vec<ResourceDef> {
        read(&self.inner)
            .defs
            .iter()
            .filter(|d| d.served)
            .copied()
            .collect()
    }

    /// The served resource with this group, version and plural.
    pub(crate) fn find(&self, group: &str, version: &str, plural: &str) -> Option<usize> {
        read(&self.inner).defs.iter().position(|d| {
            d.served && d.group == group && d.version == version && d.plural == plural
        })
    }

    /// Whether any resource of `group`/`version` is served.
    pub(crate) fn serves_group_version(&self, group: &str, version: &str) -> bool {
        read(&self.inner)
            .defs
            .iter()
            .any(|d| d.served && d.group == group && d.version == version)
    }

    /// The served resource whose objects carry this `apiVersion` and `kind`.
    pub(crate) fn find_kind(&self, api_version: &str, kind: &str) -> Option<usize> {
        read(&self.inner)
            .defs
            .iter()
            .position(|d| d.served && d.kind == kind && d.api_version() == api_version)
    }

    /// The served core (`""` group) resource with this plural.
    pub(crate) fn core(&self, plural: &str) -> Option<usize> {
        self.find("", "v1", plural)
    }

    /// The custom resource data of `index`, if it is a custom resource.
    pub(crate) fn custom(&self, index: usize) -> Option<Arc<CustomVersion>> {
        read(&self.inner).custom.get(&index).cloned()
    }

    /// The list kind of the resource at `index` (`names.listKind` for a
    /// custom resource).
    pub(crate) fn list_kind(&self, index: usize) -> String {
        let defs = read(&self.inner);
        match defs.custom.get(&index) {
            Some(c) => c.list_kind.clone(),
            None => defs.defs[index].list_kind(),
        }
    }

    /// Serve `def` (a custom resource): at the index it had before if it was
    /// ever served, else at a new index, for which the store gets a bucket
    /// first.
    pub(crate) fn serve(&self, def: ResourceDef, custom: CustomVersion, store: &Store) -> usize {
        let mut defs = self.inner.write().unwrap_or_else(|e| e.into_inner());
        let existing = defs.defs.iter().position(|d| {
            d.custom && d.group == def.group && d.version == def.version && d.plural == def.plural
        });
        let index = match existing {
            Some(i) => {
                defs.defs[i] = def;
                i
            }
            None => {
                store.add_resources(defs.defs.len() + 1);
                defs.defs.push(def);
                defs.defs.len() - 1
            }
        };
        defs.custom.insert(index, Arc::new(custom));
        index
    }

    /// Stop serving the custom resources of the CustomResourceDefinition
    /// `crd` (their indexes stay reserved).
    pub(crate) fn unserve(&self, crd: &str) -> Vec<usize> {
        let mut defs = self.inner.write().unwrap_or_else(|e| e.into_inner());
        let indexes: Vec<usize> = defs
            .custom
            .iter()
            .filter(|(_, c)| c.crd == crd)
            .map(|(i, _)| *i)
            .collect();
        for &i in &indexes {
            defs.defs[i].served = false;
            defs.custom.remove(&i);
        }
        indexes
    }

    /// Stop serving the versions of `crd` not in `keep`.
    pub(crate) fn unserve_versions(&self, crd: &str, keep: &[&str]) {
        let mut defs = self.inner.write().unwrap_or_else(|e| e.into_inner());
        let gone: Vec<usize> = defs
            .custom
            .iter()
            .filter(|(i, c)| c.crd == crd && !keep.contains(&defs.defs[**i].version))
            .map(|(i, _)| *i)
            .collect();
        for i in gone {
            defs.defs[i].served = false;
            defs.custom.remove(&i);
        }
    }

    /// The index a custom resource had, served or not (its bucket may still
    /// hold objects while its definition terminates).
    pub(crate) fn custom_index(&self, group: &str, plural: &str) -> Vec<usize> {
        read(&self.inner)
            .defs
            .iter()
            .enumerate()
            .filter(|(_, d)| d.custom && d.group == group && d.plural == plural)
            .map(|(i, _)| i)
            .collect()
    }
}

/// A string that lives as long as the program, stored once per distinct
/// value: the names of custom resources come from CustomResourceDefinitions
/// at run time, while [`ResourceDef`] (copied into every request) holds
/// `&'static str`s. Interning bounds the memory by the number of distinct
/// names, however often definitions are created and deleted.
pub(crate) fn intern(s: &str) -> &'static str {
    static STRINGS: Mutex<Option<HashSet<&'static str>>> = Mutex::new(None);
    let mut guard = STRINGS.lock().unwrap_or_else(|e| e.into_inner());
    let set = guard.get_or_insert_with(HashSet::new);
    if let Some(existing) = set.get(s) {
        return existing;
    }
    let leaked: &'static str = Box::leak(s.to_owned().into_boxed_str());
    set.insert(leaked);
    leaked
}

/// A list of strings that lives as long as the program, stored once per
/// distinct list (see [`intern`]).
pub(crate) fn intern_list(items: &[String]) -> &'static [&'static str] {
    static LISTS: Mutex<Option<HashMap<Vec<String>, &'static [&'static str]>>> = Mutex::new(None);
    let mut guard = LISTS.lock().unwrap_or_else(|e| e.into_inner());
    let map = guard.get_or_insert_with(HashMap::new);
    if let Some(existing) = map.get(items) {
        return existing;
    }
    let interned: Vec<&'static str> = items.iter().map(|s| intern(s)).collect();
    let leaked: &'static [&'static str] = Box::leak(interned.into_boxed_slice());
    map.insert(items.to_vec(), leaked);
    leaked
}

/// Where a resource keeps what its Scale shows.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ScalePaths {
    /// `specReplicasPath`, split into fields.
    pub(crate) spec: Vec<String>,
    /// `statusReplicasPath`.
    pub(crate) status: Vec<String>,
    /// `labelSelectorPath` (a string field); built-in workloads render
    /// `spec.selector` instead.
    pub(crate) selector: Option<Vec<String>>,
}

/// Split a simple JSON path (`.spec.replicas`) into fields.
pub(crate) fn split_path(json_path: &str) -> Vec<String> {
    json_path
        .trim_start_matches('.')
        .split('.')
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interning_returns_the_same_string() {
        let a = intern("widgets");
        let b = intern(&String::from("widgets"));
        assert!(std::ptr::eq(a, b));
        let l1 = intern_list(&["wd".to_owned()]);
        let l2 = intern_list(&["wd".to_owned()]);
        assert!(std::ptr::eq(l1, l2));
    }
}
