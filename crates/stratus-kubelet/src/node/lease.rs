//! The node Lease: `kube-node-lease/<node>`, held by the node, owned by its
//! Node, renewed with an optimistic update from the last written copy (one
//! write per renewal; a GET only after a conflict or when it is missing).

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, OwnerReference};
use kube::Resource;
use kube::api::{Api, PostParams};

use super::NodeConfig;

/// Where node Leases live.
pub const NODE_LEASE_NAMESPACE: &str = "kube-node-lease";

pub(super) struct NodeLease {
    api: Api<Lease>,
    name: String,
    duration_seconds: i32,
    owner: OwnerReference,
    /// The copy last written (its resourceVersion fences the next update).
    latest: Option<Lease>,
}

impl NodeLease {
    pub(super) fn new(client: kube::Client, config: &NodeConfig, node_uid: String) -> Self {
        Self {
            api: Api::namespaced(client, NODE_LEASE_NAMESPACE),
            name: config.name.clone(),
            duration_seconds: i32::try_from(config.lease_duration.as_secs()).unwrap_or(40),
            owner: OwnerReference {
                api_version: Node::api_version(&()).into_owned(),
                kind: Node::kind(&()).into_owned(),
                name: config.name.clone(),
                uid: node_uid,
                ..Default::default()
            },
            latest: None,
        }
    }

    fn spec(&self) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(self.name.clone()),
            lease_duration_seconds: Some(self.duration_seconds),
            renew_time: Some(MicroTime(k8s_openapi::jiff::Timestamp::now())),
            ..Default::default()
        }
    }

    /// Renew (or create) the Lease.
    pub(super) async fn renew(&mut self) -> Result<(), kube::Error> {
        for _ in 0..3 {
            let current = match self.latest.take() {
                Some(l) => Some(l),
                None => self.api.get_opt(&self.name).await?,
            };
            let result = match current {
                None => {
                    let lease = Lease {
                        metadata: ObjectMeta {
                            name: Some(self.name.clone()),
                            namespace: Some(NODE_LEASE_NAMESPACE.into()),
                            owner_references: Some(vec![self.owner.clone()]),
                            ..Default::default()
                        },
                        spec: Some(self.spec()),
                    };
                    self.api.create(&PostParams::default(), &lease).await
                }
                Some(mut lease) => {
                    lease.spec = Some(self.spec());
                    // A Lease left by an earlier Node of this name is
                    // re-owned by the current one.
                    lease.metadata.owner_references = Some(vec![self.owner.clone()]);
                    self.api
                        .replace(&self.name, &PostParams::default(), &lease)
                        .await
                }
            };
            match result {
                Ok(written) => {
                    self.latest = Some(written);
                    return Ok(());
                }
                Err(kube::Error::Api(s)) if s.code == 409 || s.code == 404 => continue,
                Err(e) => return Err(e),
            }
        }
        Err(kube::Error::Api(Box::new(
            kube::core::Status::failure("the node lease kept changing", "Conflict").with_code(409),
        )))
    }
}
