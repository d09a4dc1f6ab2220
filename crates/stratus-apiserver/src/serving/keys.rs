//! The server's own keys, which only serving uses: its client identity
//! towards kubelets (whose CA also signs test client certificates and is
//! published as the cluster's client CA) and the key ServiceAccount tokens
//! are signed with. The store, admission and authorization never see them.

use std::sync::Arc;

use crate::auth::service_account_jwt::Signer;
use crate::kubelet_client::KubeletClient;

/// The server's keys, made once per server.
pub(crate) struct Keys {
    /// The harness's client identity towards kubelets.
    pub(crate) kubelet: KubeletClient,
    /// The key ServiceAccount tokens are signed with (TokenRequest), and
    /// whose public half `/openid/v1/jwks` serves.
    pub(crate) token_signer: Signer,
}

impl Keys {
    /// New keys: a new client CA and identity, a new signing key.
    pub(crate) fn new() -> Result<Arc<Self>, String> {
        Ok(Arc::new(Self {
            kubelet: KubeletClient::new()?,
            token_signer: Signer::new()?,
        }))
    }

    /// The client CA (PEM): the kubelets' and the cluster's.
    pub(crate) fn client_ca_pem(&self) -> &str {
        self.kubelet.ca.ca_pem()
    }
}
