//! What `up` leaves in `state.json`: each component and how to reach the
//! cluster.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::BoxError;

use super::layout::{COMPONENTS, DEFAULT_NODE_ADDRESS, cluster_dir};

/// One running component: how it was started (so that it can be restarted
/// identically), its process and its health endpoint.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Component {
    /// `etcd`, `kube-apiserver`, ...
    pub name: String,
    /// The binary.
    pub program: PathBuf,
    /// Its arguments.
    pub args: Vec<String>,
    /// Its process ID (0 while stopped).
    pub pid: u32,
    /// Its log file.
    pub log: PathBuf,
    /// The URL that answers `ok` when it is healthy.
    pub health: String,
}

/// What `up` leaves in `state.json` for the other commands and tasks.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct State {
    /// kube-apiserver's URL.
    pub server: String,
    /// The administrator's kubeconfig (`system:masters`).
    pub kubeconfig: PathBuf,
    /// The cluster CA (it signs the serving and client certificates; the
    /// kubelet client certificate too, so it is the CA a kubelet API
    /// trusts).
    pub ca: PathBuf,
    /// The address added to the loopback device for kubelet APIs, if any.
    pub node_address: Option<String>,
    /// Whether `up` added it (then `down` removes it).
    pub node_address_added: bool,
    /// kube-apiserver's audit log (JSON lines).
    pub audit_log: PathBuf,
    /// The components.
    pub components: Vec<Component>,
    /// When kube-apiserver was stopped and when it was ready again (unix
    /// microseconds; no end while it is down), from `stop` / `restart`.
    /// While it starts, its authorizer's caches are not yet synced and it
    /// may answer 403 to anyone; the audit count tells those apart.
    #[serde(default)]
    pub apiserver_outages: Vec<(i64, Option<i64>)>,
}

/// Now, in unix microseconds.
pub(crate) fn now_micros() -> i64 {
    k8s_openapi::jiff::Timestamp::now().as_microsecond()
}

impl State {
    /// The state of the cluster `up` started, if one is.
    pub fn load() -> Option<Self> {
        let text = std::fs::read_to_string(cluster_dir().join("state.json")).ok()?;
        serde_json::from_str(&text).ok()
    }

    /// Write the state where [`State::load`] reads it.
    pub fn save(&self) -> Result<(), BoxError> {
        let path = cluster_dir().join("state.json");
        std::fs::write(&path, serde_json::to_vec_pretty(self)?)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(())
    }

    /// The component called `name`.
    pub fn component(&mut self, name: &str) -> Result<&mut Component, BoxError> {
        self.components
            .iter_mut()
            .find(|c| c.name == name)
            .ok_or_else(|| {
                format!("no component {name:?} (one of {})", COMPONENTS.join(", ")).into()
            })
    }

    /// A client as the administrator.
    pub async fn client(&self) -> Result<kube::Client, BoxError> {
        client_from(&self.kubeconfig).await
    }

    /// Where virtual nodes serve kubelet APIs that kube-apiserver proxies
    /// to: the node address ([`DEFAULT_NODE_ADDRESS`] if `up` had none)
    /// and the cluster CA, which signs kube-apiserver's kubelet client
    /// certificate.
    pub async fn kubelet_api_site(
        &self,
    ) -> Result<stratus_testing::kubelet_api::KubeletApiSite, BoxError> {
        Ok(stratus_testing::kubelet_api::KubeletApiSite {
            client: self.client().await?,
            kubelet_client_ca_pem: std::fs::read_to_string(&self.ca)
                .map_err(|e| format!("{}: {e}", self.ca.display()))?,
            address: self
                .node_address
                .as_deref()
                .unwrap_or(DEFAULT_NODE_ADDRESS)
                .parse()?,
        })
    }
}

/// A client from a kubeconfig file.
pub(crate) async fn client_from(path: &Path) -> Result<kube::Client, BoxError> {
    Ok(kube::Client::try_from(config_from(path).await?)?)
}

/// A client configuration from a kubeconfig file.
pub async fn config_from(path: &Path) -> Result<kube::Config, BoxError> {
    let file = kube::config::Kubeconfig::read_from(path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(kube::Config::from_custom_kubeconfig(file, &Default::default()).await?)
}
