//! The optional refresh of a Node's cloud labels after initialization (Go
//! never refreshes them): instance type, zone and region (GA and beta keys),
//! and the provider's additional labels.
//!
//! Pure logic, unit tested without IO. The additional labels the controller
//! set are listed in the [`MANAGED_LABELS_ANNOTATION`] annotation, so a
//! label the cloud stops reporting is removed only if the controller set it,
//! and a label someone else set is never overwritten.

use std::collections::{BTreeMap, BTreeSet};

use stratus_cloud::InstanceMetadata;
use stratus_cloud::helpers::is_kubernetes_namespaced_label;
use stratus_cloud::names::labels;

/// The Node annotation listing (comma-separated, sorted) the additional
/// labels the cloud-node controller set and therefore may change or remove.
pub const MANAGED_LABELS_ANNOTATION: &str = "node.stratus.dev/cloud-managed-labels";

/// The well-known label pairs (GA, beta) and where their value comes from.
pub(crate) fn well_known(meta: &InstanceMetadata) -> [((&'static str, &'static str), &str); 3] {
    [
        (
            (labels::INSTANCE_TYPE, labels::INSTANCE_TYPE_BETA),
            &meta.instance_type,
        ),
        (
            (labels::TOPOLOGY_ZONE, labels::FAILURE_DOMAIN_BETA_ZONE),
            &meta.zone,
        ),
        (
            (labels::TOPOLOGY_REGION, labels::FAILURE_DOMAIN_BETA_REGION),
            &meta.region,
        ),
    ]
}

/// The keys listed in the annotation value.
pub(crate) fn parse_managed(annotation: Option<&str>) -> BTreeSet<String> {
    annotation
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|k| !k.is_empty())
        .map(str::to_owned)
        .collect()
}

/// The annotation value for `keys`.
pub(crate) fn render_managed(keys: &BTreeSet<String>) -> String {
    keys.iter().cloned().collect::<Vec<_>>().join(",")
}

/// What a refresh changes on one Node.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct LabelChanges {
    /// Labels to add or change.
    pub(crate) set: BTreeMap<String, String>,
    /// Labels to remove (additional labels the controller set that the
    /// cloud no longer reports).
    pub(crate) remove: Vec<String>,
    /// The managed additional labels after the change.
    pub(crate) managed: BTreeSet<String>,
    /// Whether the annotation must be rewritten.
    pub(crate) managed_changed: bool,
    /// Additional labels not applied: set by someone else to another value.
    pub(crate) conflicts: Vec<String>,
    /// Additional labels refused: in a Kubernetes namespace.
    pub(crate) rejected: Vec<String>,
}

impl LabelChanges {
    /// True if nothing is to be written.
    pub(crate) fn is_empty(&self) -> bool {
        self.set.is_empty() && self.remove.is_empty() && !self.managed_changed
    }
}

/// The changes that bring a Node's `current` labels (with its
/// `managed` annotation) in line with the cloud's `meta`.
///
/// - Instance type, zone and region: set (both keys) when the cloud reports
///   a non-empty value that differs; never removed (Go's rule: empty means
///   unknown).
/// - Additional labels: added when absent; changed or removed only when
///   managed; a label in a Kubernetes namespace is refused; a label with
///   another value that the controller does not manage is left alone (a
///   conflict). An existing label with the cloud's value becomes managed.
pub(crate) fn refresh(
    current: &BTreeMap<String, String>,
    managed_annotation: Option<&str>,
    meta: &InstanceMetadata,
) -> LabelChanges {
    let mut out = LabelChanges::default();
    for ((ga, beta), value) in well_known(meta) {
        if value.is_empty() {
            continue;
        }
        for key in [ga, beta] {
            if current.get(key).map(String::as_str) != Some(value) {
                out.set.insert(key.to_owned(), value.to_owned());
            }
        }
    }
    let before = parse_managed(managed_annotation);
    let mut managed = BTreeSet::new();
    for (key, value) in &meta.additional_labels {
        if is_kubernetes_namespaced_label(key) {
            out.rejected.push(key.clone());
            continue;
        }
        match current.get(key) {
            Some(v) if v == value => {
                managed.insert(key.clone());
            }
            Some(_) if !before.contains(key) => out.conflicts.push(key.clone()),
            _ => {
                out.set.insert(key.clone(), value.clone());
                managed.insert(key.clone());
            }
        }
    }
    for key in before.difference(&managed) {
        let reported = meta.additional_labels.contains_key(key);
        if !reported && current.contains_key(key) {
            out.remove.push(key.clone());
        }
    }
    out.managed_changed = managed != before;
    out.managed = managed;
    out
}

/// Go's `reconcileNodeLabels`, run for initialized Nodes: for each beta →
/// GA pair (zone, region, instance type), the GA label is set to the beta
/// label's value when it is missing or differs. A pair whose beta label is
/// absent is left alone. Returns the labels to set (empty: nothing to do).
pub(crate) fn mirror_beta_labels(current: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    [
        (labels::FAILURE_DOMAIN_BETA_ZONE, labels::TOPOLOGY_ZONE),
        (labels::FAILURE_DOMAIN_BETA_REGION, labels::TOPOLOGY_REGION),
        (labels::INSTANCE_TYPE_BETA, labels::INSTANCE_TYPE),
    ]
    .into_iter()
    .filter_map(|(beta, ga)| {
        let value = current.get(beta)?;
        (current.get(ga) != Some(value)).then(|| (ga.to_owned(), value.clone()))
    })
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(instance_type: &str, extra: &[(&str, &str)]) -> InstanceMetadata {
        InstanceMetadata {
            instance_type: instance_type.into(),
            zone: "z1".into(),
            region: "r1".into(),
            additional_labels: extra
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..Default::default()
        }
    }

    fn labels_of(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn a_resized_instance_gets_its_new_type_on_both_keys() {
        let current = labels_of(&[
            (labels::INSTANCE_TYPE, "small"),
            (labels::INSTANCE_TYPE_BETA, "small"),
            (labels::TOPOLOGY_ZONE, "z1"),
            (labels::FAILURE_DOMAIN_BETA_ZONE, "z1"),
            (labels::TOPOLOGY_REGION, "r1"),
            (labels::FAILURE_DOMAIN_BETA_REGION, "r1"),
        ]);
        let changes = refresh(&current, None, &meta("large", &[]));
        assert_eq!(
            changes.set,
            labels_of(&[
                (labels::INSTANCE_TYPE, "large"),
                (labels::INSTANCE_TYPE_BETA, "large")
            ])
        );
        assert!(changes.remove.is_empty());
        assert!(!changes.managed_changed);
        assert!(refresh(&current, None, &meta("small", &[])).is_empty());
    }

    #[test]
    fn an_unknown_value_never_removes_a_well_known_label() {
        let current = labels_of(&[(labels::INSTANCE_TYPE, "small")]);
        let mut m = meta("", &[]);
        m.zone.clear();
        m.region.clear();
        assert!(refresh(&current, None, &m).is_empty());
    }

    #[test]
    fn additional_labels_are_added_changed_and_removed_only_when_managed() {
        // First refresh: the pool label is new, the team label is someone
        // else's, the rack label already has the cloud's value.
        let current = labels_of(&[("example.com/team", "a"), ("example.com/rack", "r2")]);
        let m = meta(
            "",
            &[
                ("example.com/pool", "gpu"),
                ("example.com/team", "b"),
                ("example.com/rack", "r2"),
                ("kubernetes.io/arch", "x"),
            ],
        );
        let changes = refresh(&current, None, &m);
        assert_eq!(
            changes.set.get("example.com/pool").map(String::as_str),
            Some("gpu")
        );
        assert!(!changes.set.contains_key("example.com/team"));
        assert_eq!(changes.conflicts, ["example.com/team"]);
        assert_eq!(changes.rejected, ["kubernetes.io/arch"]);
        let managed = render_managed(&changes.managed);
        assert_eq!(managed, "example.com/pool,example.com/rack");

        // Later the cloud moves the pool and drops the rack: both managed,
        // so the pool changes and the rack is removed; the team label stays.
        let current = labels_of(&[
            ("example.com/team", "a"),
            ("example.com/rack", "r2"),
            ("example.com/pool", "gpu"),
        ]);
        let m = meta("", &[("example.com/pool", "cpu")]);
        let changes = refresh(&current, Some(&managed), &m);
        assert_eq!(
            changes.set.get("example.com/pool").map(String::as_str),
            Some("cpu")
        );
        assert_eq!(changes.remove, ["example.com/rack"]);
        assert_eq!(render_managed(&changes.managed), "example.com/pool");
        assert!(changes.managed_changed);
    }

    #[test]
    fn beta_labels_are_mirrored_to_their_ga_keys_as_go_s_reconcile() {
        let node = labels_of(&[
            ("failure-domain.beta.kubernetes.io/zone", "z1"),
            ("topology.kubernetes.io/zone", "z0"),
            ("failure-domain.beta.kubernetes.io/region", "r1"),
            ("node.kubernetes.io/instance-type", "only-ga"),
        ]);
        assert_eq!(
            mirror_beta_labels(&node),
            labels_of(&[
                ("topology.kubernetes.io/zone", "z1"),
                ("topology.kubernetes.io/region", "r1"),
            ]),
            "a differing and a missing GA label; a GA label without its beta one is left"
        );
        let done = labels_of(&[
            ("failure-domain.beta.kubernetes.io/zone", "z1"),
            ("topology.kubernetes.io/zone", "z1"),
        ]);
        assert!(mirror_beta_labels(&done).is_empty());
    }

    #[test]
    fn the_annotation_parses_leniently() {
        assert_eq!(
            parse_managed(Some(" a, ,b,")),
            ["a", "b"].map(String::from).into_iter().collect()
        );
        assert!(parse_managed(None).is_empty());
    }
}
