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
    let (_, pem) = x509_parser::pem::parse_x509_pem(request_pem.as_bytes())
        .map_err(|e| format!("unreadable request: {e}"))?;
    use x509_parser::prelude::FromDer;
    let (_, csr) =
        x509_parser::certification_request::X509CertificationRequest::from_der(&pem.contents)
            .map_err(|e| format!("unreadable request: {e}"))?;
    let subject = &csr.certification_request_info.subject;
    let cn: Vec<&str> = subject
        .iter_common_name()
        .filter_map(|c| c.as_str().ok())
        .collect();
    let orgs: Vec<&str> = subject
        .iter_organization()
        .filter_map(|o| o.as_str().ok())
        .collect();
    match cn.as_slice() {
        [name]
            if name
                .strip_prefix("system:node:")
                .is_some_and(|n| !n.is_empty()) => {}
        _ => {
            return Err(format!(
                "the subject must be system:node:<name>, not {cn:?}"
            ));
        }
    }
    if orgs != ["system:nodes"] {
        return Err(format!(
            "the organization must be exactly system:nodes, not {orgs:?}"
        ));
    }
    for extension in csr.requested_extensions().into_iter().flatten() {
        if let x509_parser::extensions::ParsedExtension::SubjectAlternativeName(san) = extension {
            for name in &san.general_names {
                match name {
                    x509_parser::extensions::GeneralName::DNSName(_)
                    | x509_parser::extensions::GeneralName::IPAddress(_) => {}
                    other => {
                        return Err(format!(
                            "only DNS and IP alternative names are allowed, not {other:?}"
                        ));
                    }
                }
            }
        }
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
