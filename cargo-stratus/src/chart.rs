//! The Helm chart of a provider binary: the templates of
//! `templates/chart/<kind>/` (Helm's own `{{ }}` kept; this tool's values
//! as `@@key@@`), and its `templates/rbac.yaml` from the same declarations
//! as the deploy manifests, in the release's namespace. The Stratus
//! workspace's `deploy/charts/` are this for its sample binaries (`cargo
//! xtask manifests`), and every crate `cargo stratus new` writes has its
//! own under `chart/`.

use serde_json::Value;

use crate::{Kind, NewError, manifests::documents};

/// What a chart is made for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChartNames {
    /// The chart's name (`Chart.yaml`).
    pub chart: String,
    /// Its one-line description (`Chart.yaml`).
    pub description: String,
    /// The ServiceAccount, and the name of the workload and its roles.
    pub account: String,
    /// The image's repository (the tag is `latest` until set).
    pub image: String,
    /// The provider's name (`--cloud-provider` or `--provider`).
    pub provider: String,
    /// A virtual kubelet's default node name (unused for a manager).
    pub node: String,
}

/// A namespace the RBAC is rendered with, then replaced by Helm's
/// `{{ .Release.Namespace }}` (the objects that must live in `kube-system`
/// name it themselves).
const RELEASE_NAMESPACE: &str = "stratus-release-namespace";

/// The chart's files for `kind`, as `(path in the chart, text)`.
///
/// ```
/// use cargo_stratus::{ChartNames, Kind, chart};
///
/// let names = ChartNames {
///     chart: "acme-virtual-kubelet".into(),
///     description: "Acme's virtual kubelet".into(),
///     account: "acme-virtual-kubelet".into(),
///     image: "registry.example.com/acme-virtual-kubelet".into(),
///     provider: "acme".into(),
///     node: "vk-acme".into(),
/// };
/// let files = chart(Kind::VirtualKubelet, &names).unwrap();
/// let values = &files.iter().find(|(path, _)| path == "values.yaml").unwrap().1;
/// assert!(values.contains("provider: acme"));
/// let rbac = &files.iter().find(|(path, _)| path == "templates/rbac.yaml").unwrap().1;
/// assert!(rbac.contains("namespace: {{ .Release.Namespace }}"));
/// ```
pub fn chart(kind: Kind, names: &ChartNames) -> Result<Vec<(String, String)>, NewError> {
    let values = [
        ("chart", names.chart.as_str()),
        ("description", names.description.as_str()),
        ("account", names.account.as_str()),
        ("image", names.image.as_str()),
        ("provider", names.provider.as_str()),
        ("node", names.node.as_str()),
    ];
    let mut out = Vec::new();
    for (file, text) in templates(kind) {
        let mut text = text.to_owned();
        for (key, value) in values {
            text = text.replace(&format!("@@{key}@@"), value);
        }
        if let Some(at) = text.find("@@") {
            return Err(NewError::Placeholder {
                file: format!("chart/{file}"),
                at: text[at..].chars().take(30).collect(),
            });
        }
        out.push((file.to_owned(), text));
    }
    out.push(("templates/rbac.yaml".to_owned(), rbac(kind, names)?));
    Ok(out)
}

/// The chart templates of `kind`, built into the binary.
fn templates(kind: Kind) -> Vec<(&'static str, &'static str)> {
    macro_rules! files {
        ($dir:literal: $($file:literal),* $(,)?) => {
            vec![$(($file, include_str!(concat!("../templates/chart/", $dir, "/", $file)))),*]
        };
    }
    match kind {
        Kind::Ccm => files!("ccm":
            "Chart.yaml", "values.yaml", "templates/_helpers.tpl", "templates/deployment.yaml",
            "templates/service.yaml", "templates/servicemonitor.yaml", "templates/pdb.yaml",
            "templates/NOTES.txt",
        ),
        Kind::VirtualKubelet => files!("virtual-kubelet":
            "Chart.yaml", "values.yaml", "templates/_helpers.tpl", "templates/deployment.yaml",
            "templates/service.yaml", "templates/servicemonitor.yaml", "templates/configmap.yaml",
            "templates/NOTES.txt",
        ),
    }
}

/// `templates/rbac.yaml`: the least access the binary's controllers (or
/// its node) declare, for the chart's ServiceAccount.
fn rbac(kind: Kind, names: &ChartNames) -> Result<String, NewError> {
    let objects: Vec<Value> = match kind {
        Kind::Ccm => {
            let config = stratus_ccm::app::deploy::DeployConfig {
                name: names.account.clone(),
                namespace: RELEASE_NAMESPACE.into(),
                ..stratus_ccm::app::deploy::DeployConfig::new(&names.provider, &names.image)
            };
            stratus_ccm::app::deploy::rbac(&config, &stratus_ccm::app::default_controllers())
        }
        Kind::VirtualKubelet => stratus_kubelet::app::rbac::rbac(RELEASE_NAMESPACE, &names.account),
    };
    let header = "# Generated from the declared API access (stratus_ccm::app::deploy,\n# stratus_kubelet::app::rbac) by `cargo stratus new` or `cargo xtask manifests`;\n# do not edit.\n";
    Ok(header.to_owned()
        + &documents(&objects)?.replace(RELEASE_NAMESPACE, "{{ .Release.Namespace }}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(kind: Kind) -> ChartNames {
        let account = crate::crate_name(kind, "acme");
        ChartNames {
            chart: account.clone(),
            description: "Acme".into(),
            account: account.clone(),
            image: format!("registry.example.com/{account}"),
            provider: "acme".into(),
            node: "vk-acme".into(),
        }
    }

    #[test]
    fn every_placeholder_is_filled_and_helm_is_left_alone() {
        for kind in [Kind::Ccm, Kind::VirtualKubelet] {
            let files = chart(kind, &names(kind)).unwrap();
            assert!(files.iter().all(|(_, text)| !text.contains("@@")));
            let helpers = &files
                .iter()
                .find(|(p, _)| p == "templates/_helpers.tpl")
                .unwrap()
                .1;
            assert!(helpers.contains(&names(kind).account), "{helpers}");
            let deployment = &files
                .iter()
                .find(|(p, _)| p == "templates/deployment.yaml")
                .unwrap()
                .1;
            assert!(deployment.contains("{{ .Release.Namespace }}"));
        }
    }

    #[test]
    fn the_rbac_is_the_declared_one_for_the_account() {
        let files = chart(Kind::Ccm, &names(Kind::Ccm)).unwrap();
        let rbac = &files
            .iter()
            .find(|(p, _)| p == "templates/rbac.yaml")
            .unwrap()
            .1;
        assert!(rbac.contains("name: stratus:acme-cloud-controller-manager:cloud-node-controller"));
        assert!(!rbac.contains(RELEASE_NAMESPACE));
        // Delegated authentication's reader binding stays in kube-system.
        assert!(rbac.contains("namespace: kube-system"));
    }
}
