//! The client for the remote cluster: from a kubeconfig file or from a
//! home-cluster Secret holding one, with its own request budget.

use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;
use kube::config::{KubeConfigOptions, Kubeconfig};
use stratus_runtime::client::{ClientOptions, build_client};

use crate::OffloadConfig;

/// Why the remote client could not be made.
#[derive(Debug, thiserror::Error)]
pub enum RemoteClientError {
    /// Neither `kubeconfig` nor `kubeconfigSecret` is set.
    #[error("no remote cluster: set kubeconfig or kubeconfigSecret in the provider configuration")]
    Missing,
    /// The kubeconfig could not be read or parsed.
    #[error("remote kubeconfig {source_name}: {message}")]
    Kubeconfig {
        /// The file or `Secret namespace/name[key]`.
        source_name: String,
        /// Why.
        message: String,
    },
    /// The Secret could not be read.
    #[error("remote kubeconfig Secret {namespace}/{name}: {message}")]
    Secret {
        /// The Secret's namespace.
        namespace: String,
        /// Its name.
        name: String,
        /// Why.
        message: String,
    },
}

/// A client for the remote cluster named by `config` (`home` reads the
/// kubeconfig Secret).
pub async fn remote_client(
    config: &OffloadConfig,
    home: &kube::Client,
) -> Result<kube::Client, RemoteClientError> {
    let (kubeconfig, source_name) = if let Some(path) = &config.kubeconfig {
        let kubeconfig =
            Kubeconfig::read_from(path).map_err(|e| RemoteClientError::Kubeconfig {
                source_name: path.display().to_string(),
                message: e.to_string(),
            })?;
        (kubeconfig, path.display().to_string())
    } else if let Some(r) = &config.kubeconfig_secret {
        let secret_error = |message: String| RemoteClientError::Secret {
            namespace: r.namespace.clone(),
            name: r.name.clone(),
            message,
        };
        let secrets: Api<Secret> = Api::namespaced(home.clone(), &r.namespace);
        let secret = secrets
            .get_opt(&r.name)
            .await
            .map_err(|e| secret_error(e.to_string()))?
            .ok_or_else(|| secret_error("not found".into()))?;
        let data = secret
            .data
            .as_ref()
            .and_then(|d| d.get(&r.key))
            .ok_or_else(|| secret_error(format!("has no key {:?}", r.key)))?;
        let text = std::str::from_utf8(&data.0)
            .map_err(|_| secret_error(format!("key {:?} is not UTF-8", r.key)))?;
        let name = format!("Secret {}/{}[{}]", r.namespace, r.name, r.key);
        let kubeconfig =
            Kubeconfig::from_yaml(text).map_err(|e| RemoteClientError::Kubeconfig {
                source_name: name.clone(),
                message: e.to_string(),
            })?;
        (kubeconfig, name)
    } else {
        return Err(RemoteClientError::Missing);
    };
    let invalid = |message: String| RemoteClientError::Kubeconfig {
        source_name: source_name.clone(),
        message,
    };
    let client_config =
        kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
            .await
            .map_err(|e| invalid(e.to_string()))?;
    let mut options = ClientOptions::new("stratus-offload-node");
    options.qps = config.qps;
    options.burst = config.burst;
    build_client(client_config, &options).map_err(|e| invalid(e.to_string()))
}
