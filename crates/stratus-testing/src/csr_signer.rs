//! A strict approver and signer of `kubernetes.io/kubelet-serving`
//! certificate requests on the harness (what a cluster runs next to
//! kube-controller-manager's signer): a request is approved only if its
//! subject is `system:node:<name>` in exactly `system:nodes`, its usages are
//! within digital signature, key encipherment and server auth (server auth
//! required), and its alternative names are IP addresses and DNS names
//! only; anything else is denied with the reason. Approved requests are
//! signed by the harness's CA
//! ([`ApiServer::kubelet_client_ca_pem`](crate::ApiServer::kubelet_client_ca_pem))
//! for the requested lifetime, capped by the signer's.
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let server = stratus_testing::ApiServer::start().await?;
//! let signer = stratus_testing::csr_signer::spawn(&server, std::time::Duration::from_secs(3600));
//! // ... a virtual node bootstraps its serving certificate ...
//! signer.abort();
//! # Ok(()) }
//! ```

use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::certificates::v1::{
    CertificateSigningRequest, CertificateSigningRequestCondition,
};
use kube::api::{Api, ListParams, PostParams};
use tokio::task::JoinHandle;

use crate::ApiServer;

/// The signer this approver handles.
pub const KUBELET_SERVING_SIGNER: &str = "kubernetes.io/kubelet-serving";

const ALLOWED_USAGES: &[&str] = &["digital signature", "key encipherment", "server auth"];

/// Why a request is denied, or `Ok` to approve it.
///
/// ```
/// use stratus_testing::csr_signer::review;
/// let usages = vec!["digital signature".to_string(), "server auth".to_string()];
/// assert!(review("not a CSR", &usages).is_err());
/// ```
pub fn review(request_pem: &str, usages: &[String]) -> Result<(), String> {
    if !usages.iter().any(|u| u == "server auth") {
        return Err("usages must include server auth".into());
    }
    if let Some(u) = usages
        .iter()
        .find(|u| !ALLOWED_USAGES.contains(&u.as_str()))
    {
        return Err(format!(
            "usage {u:?} is not allowed for a kubelet serving certificate"
        ));
    }
    let request = stratus_pki::CertificateRequest::from_pem(request_pem)
        .map_err(|e| format!("unreadable request: {e}"))?;
    match request.common_names.as_slice() {
        [name]
            if name
                .strip_prefix("system:node:")
                .is_some_and(|n| !n.is_empty()) => {}
        names => {
            return Err(format!(
                "the subject must be system:node:<name>, not {names:?}"
            ));
        }
    }
    if request.user.groups != ["system:nodes"] {
        return Err(format!(
            "the organization must be exactly system:nodes, not {:?}",
            request.user.groups
        ));
    }
    if let Some(other) = request
        .alt_names
        .iter()
        .find(|name| matches!(name, stratus_pki::AltName::Other(_)))
    {
        return Err(format!(
            "only DNS and IP alternative names are allowed, not {other:?}"
        ));
    }
    Ok(())
}

fn condition(kind: &str, reason: &str, message: String) -> CertificateSigningRequestCondition {
    CertificateSigningRequestCondition {
        type_: kind.into(),
        status: "True".into(),
        reason: Some(reason.into()),
        message: Some(message),
        last_update_time: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            k8s_openapi::jiff::Timestamp::now(),
        )),
        ..Default::default()
    }
}

/// Approve or deny, then sign, every kubelet-serving request on `server`
/// (polling every 100 ms) until the task is aborted. Certificates live at
/// most `validity`.
pub fn spawn(server: &ApiServer, validity: Duration) -> JoinHandle<()> {
    let client = server.client();
    let signer = server.ca_signer();
    tokio::spawn(async move {
        let api: Api<CertificateSigningRequest> = Api::all(client);
        loop {
            if let Ok(list) = api.list(&ListParams::default()).await {
                for mut csr in list.items {
                    if csr.spec.signer_name != KUBELET_SERVING_SIGNER {
                        continue;
                    }
                    let name = csr.metadata.name.clone().unwrap_or_default();
                    let conditions = csr
                        .status
                        .as_ref()
                        .and_then(|s| s.conditions.clone())
                        .unwrap_or_default();
                    let issued = csr
                        .status
                        .as_ref()
                        .and_then(|s| s.certificate.as_ref())
                        .is_some_and(|c| !c.0.is_empty());
                    if issued || conditions.iter().any(|c| c.type_ != "Approved") {
                        continue;
                    }
                    let request = String::from_utf8_lossy(&csr.spec.request.0).into_owned();
                    let usages = csr.spec.usages.clone().unwrap_or_default();
                    let status = csr.status.get_or_insert_with(Default::default);
                    if conditions.is_empty() {
                        let decided = match review(&request, &usages) {
                            Ok(()) => condition(
                                "Approved",
                                "StratusHarnessApproved",
                                "a node's own serving certificate".into(),
                            ),
                            Err(why) => condition("Denied", "StratusHarnessDenied", why),
                        };
                        status.conditions = Some(vec![decided]);
                        match api
                            .replace_subresource("approval", &name, &PostParams::default(), &csr)
                            .await
                        {
                            Ok(updated) => csr = updated,
                            Err(e) => {
                                tracing::debug!(request = %name, error = %e, "approval failed");
                                continue;
                            }
                        }
                    }
                    let approved = csr
                        .status
                        .as_ref()
                        .and_then(|s| s.conditions.as_ref())
                        .is_some_and(|c| c.iter().any(|c| c.type_ == "Approved"));
                    if !approved {
                        continue;
                    }
                    let lifetime = csr
                        .spec
                        .expiration_seconds
                        .map(|s| Duration::from_secs(u64::try_from(s).unwrap_or(0)))
                        .filter(|d| !d.is_zero())
                        .map_or(validity, |d| d.min(validity));
                    let status = csr.status.get_or_insert_with(Default::default);
                    match signer.sign(&request, lifetime) {
                        Ok(cert) => status.certificate = Some(ByteString(cert.into_bytes())),
                        Err(e) => {
                            let failed = condition("Failed", "SignerError", e.to_string());
                            status.conditions.get_or_insert_with(Vec::new).push(failed);
                        }
                    }
                    if let Err(e) = api
                        .replace_status(&name, &PostParams::default(), &csr)
                        .await
                    {
                        tracing::debug!(request = %name, error = %e, "issuing failed");
                    }
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
}

#[cfg(test)]
mod tests {
    use super::review;
    use rcgen::{CertificateParams, DistinguishedName, DnType, KeyPair, SanType};

    fn request(cn: Option<&str>, org: Option<&str>, alt: Vec<SanType>) -> String {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name = DistinguishedName::new();
        if let Some(cn) = cn {
            params.distinguished_name.push(DnType::CommonName, cn);
        }
        if let Some(org) = org {
            params
                .distinguished_name
                .push(DnType::OrganizationName, org);
        }
        params.subject_alt_names = alt;
        params.serialize_request(&key).unwrap().pem().unwrap()
    }

    fn usages(list: &[&str]) -> Vec<String> {
        list.iter().map(|u| (*u).to_owned()).collect()
    }

    #[test]
    fn approves_only_a_node_asking_to_serve_its_names() {
        let serving = usages(&["digital signature", "key encipherment", "server auth"]);
        let node = request(
            Some("system:node:vk-0"),
            Some("system:nodes"),
            vec![
                SanType::DnsName("vk-0".try_into().unwrap()),
                SanType::IpAddress([10, 0, 0, 1].into()),
            ],
        );
        assert_eq!(review(&node, &serving), Ok(()));

        let denied = |pem: &str, usages: &[String], because: &str| {
            let reason = review(pem, usages).unwrap_err();
            assert!(
                reason.contains(because),
                "{reason:?} should say {because:?}"
            );
        };
        denied(&node, &usages(&["digital signature"]), "server auth");
        denied(
            &node,
            &usages(&["server auth", "client auth"]),
            "client auth",
        );
        denied("not a request", &serving, "unreadable request");
        let stranger = request(Some("alice"), Some("system:nodes"), vec![]);
        denied(&stranger, &serving, "system:node:<name>");
        let nameless = request(Some("system:node:"), Some("system:nodes"), vec![]);
        denied(&nameless, &serving, "system:node:<name>");
        let masters = request(Some("system:node:vk-0"), Some("system:masters"), vec![]);
        denied(&masters, &serving, "system:nodes");
        let no_subject = request(None, Some("system:nodes"), vec![]);
        denied(&no_subject, &serving, "common name");
        let mail = request(
            Some("system:node:vk-0"),
            Some("system:nodes"),
            vec![SanType::Rfc822Name("a@b.c".try_into().unwrap())],
        );
        denied(&mail, &serving, "only DNS and IP");
    }
}
