//! The manager's connections: its API client's configuration
//! (`--kubeconfig`, `--master`), and the delegated authentication and
//! authorization of its admin server.

use super::*;

pub(super) async fn load_config(o: &ManagerOptions) -> Result<kube::Config, ManagerError> {
    let mut config = load_kubeconfig(&o.kubeconfig).await?;
    if !o.master.is_empty() {
        config.cluster_url = o
            .master
            .parse()
            .map_err(|e| ManagerError::Kubeconfig(format!("--master {:?}: {e}", o.master)))?;
    }
    Ok(config)
}

/// The configuration in the kubeconfig at `path`, or the inferred one
/// (in-cluster, `KUBECONFIG`) when `path` is empty.
async fn load_kubeconfig(path: &str) -> Result<kube::Config, ManagerError> {
    let err = |e: &dyn std::fmt::Display| ManagerError::Kubeconfig(format!("{path}: {e}"));
    if path.is_empty() {
        return kube::Config::infer().await.map_err(|e| err(&e));
    }
    let kubeconfig = kube::config::Kubeconfig::read_from(path).map_err(|e| err(&e))?;
    kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .map_err(|e| err(&e))
}

/// The delegated authentication and authorization of the admin server (Go's
/// `--authentication-*` / `--authorization-*` flags), and the client CA:
/// `--client-ca-file`, else the `client-ca-file` of
/// `kube-system/extension-apiserver-authentication` (unless
/// `--authentication-skip-lookup`; when it cannot be read, client
/// certificates are not accepted, as Go warns and goes on).
pub(super) async fn delegated_auth(
    o: &ManagerOptions,
    client: &kube::Client,
) -> Result<(DelegatedAuth, Option<String>), ManagerError> {
    let client_for = |path: &str| {
        let path = path.to_owned();
        let client = client.clone();
        async move {
            if path.is_empty() {
                return Ok(client);
            }
            let options = ClientOptions::new("cloud-controller-manager");
            Ok::<_, ManagerError>(build_client(load_kubeconfig(&path).await?, &options)?)
        }
    };
    let config = DelegatedAuthConfig {
        always_allow_paths: o.authorization.authorization_always_allow_paths.clone(),
        authentication_cache_ttl: o.authentication.authentication_token_webhook_cache_ttl,
        authorized_cache_ttl: o.authorization.authorization_webhook_cache_authorized_ttl,
        unauthorized_cache_ttl: o.authorization.authorization_webhook_cache_unauthorized_ttl,
        ..Default::default()
    };
    let authn_client = client_for(&o.authentication.authentication_kubeconfig).await?;
    let mut auth = DelegatedAuth::new(
        client_for(&o.authorization.authorization_kubeconfig).await?,
        config,
    )
    .with_authentication_client(authn_client.clone());
    let read = |flag: &str, path: &std::path::Path| {
        std::fs::read_to_string(path)
            .map_err(|e| ManagerError::ClientCa(format!("{flag} {}: {e}", path.display())))
    };
    let mut client_ca = o
        .authentication
        .client_ca_file
        .as_deref()
        .map(|p| read("--client-ca-file", p))
        .transpose()?;
    let mut proxy_ca = o
        .authentication
        .requestheader_client_ca_file
        .as_deref()
        .map(|p| read("--requestheader-client-ca-file", p))
        .transpose()?;
    let mut proxy_names = o.authentication.requestheader_allowed_names.clone();
    let (mut user_headers, mut group_headers, mut extra_prefixes, mut uid_headers) = (
        o.authentication.requestheader_username_headers.clone(),
        o.authentication.requestheader_group_headers.clone(),
        o.authentication.requestheader_extra_headers_prefix.clone(),
        o.authentication.requestheader_uid_headers.clone(),
    );
    // Go's `lookupMissingConfigInCluster`: what the flags leave out comes
    // from kube-system/extension-apiserver-authentication.
    if !o.authentication.authentication_skip_lookup && (client_ca.is_none() || proxy_ca.is_none()) {
        let maps: kube::Api<ConfigMap> = kube::Api::namespaced(authn_client, "kube-system");
        match maps.get_opt("extension-apiserver-authentication").await {
            Ok(found) => {
                let data = found.and_then(|m| m.data).unwrap_or_default();
                let pem = |key: &str| data.get(key).filter(|p| !p.trim().is_empty()).cloned();
                let list = |key: &str| {
                    data.get(key)
                        .and_then(|v| serde_json::from_str::<Vec<String>>(v).ok())
                        .filter(|l| !l.is_empty())
                };
                if client_ca.is_none() {
                    client_ca = pem("client-ca-file");
                }
                if proxy_ca.is_none()
                    && let Some(ca) = pem("requestheader-client-ca-file")
                {
                    proxy_ca = Some(ca);
                    proxy_names = list("requestheader-allowed-names").unwrap_or_default();
                    user_headers = list("requestheader-username-headers").unwrap_or(user_headers);
                    group_headers = list("requestheader-group-headers").unwrap_or(group_headers);
                    extra_prefixes =
                        list("requestheader-extra-headers-prefix").unwrap_or(extra_prefixes);
                    uid_headers = list("requestheader-uid-headers").unwrap_or(uid_headers);
                }
            }
            Err(e) if o.authentication.authentication_tolerate_lookup_failure => {
                tracing::warn!(error = %e, "cannot read kube-system/extension-apiserver-authentication; continuing without its client CAs (--authentication-tolerate-lookup-failure)");
            }
            Err(e) => {
                return Err(ManagerError::ClientCa(format!(
                    "cannot read kube-system/extension-apiserver-authentication: {e} (set --authentication-tolerate-lookup-failure to go on without it, or --authentication-skip-lookup)"
                )));
            }
        }
    }
    if let Some(ca) = &proxy_ca {
        let mut header = RequestHeader::new(ca, proxy_names)
            .map_err(|e| ManagerError::ClientCa(format!("the request-header CA: {e}")))?;
        header.username_headers = user_headers;
        header.group_headers = group_headers;
        header.extra_headers_prefix = extra_prefixes;
        header.uid_headers = uid_headers;
        if let Some(clients) = &client_ca {
            header = header
                .with_client_ca(clients)
                .map_err(|e| ManagerError::ClientCa(format!("the client CA: {e}")))?;
        }
        auth = auth.with_request_header(header);
        // The TLS layer asks for and verifies certificates of both CAs.
        client_ca = Some(match client_ca {
            Some(pem) => format!("{}\n{ca}", pem.trim_end()),
            None => ca.clone(),
        });
    }
    Ok((auth, client_ca))
}
