//! The wire formats of an in-memory Kubernetes API server.
//!
//! [`protobuf`] reads and writes Kubernetes' protobuf encoding
//! (`application/vnd.kubernetes.protobuf`) for every built-in type, as
//! kubectl 1.32 and newer and client-go send it, translating to and from
//! the JSON form of the same object.
//!
//! ```
//! use serde_json::json;
//! use stratus_apiserver::protobuf;
//!
//! let lease = json!({
//!     "apiVersion": "coordination.k8s.io/v1",
//!     "kind": "Lease",
//!     "metadata": {"name": "node-1", "namespace": "kube-node-lease"},
//!     "spec": {"holderIdentity": "node-1", "leaseDurationSeconds": 40,
//!              "renewTime": "2026-11-24T08:00:00.123456Z"},
//! });
//! let wire = protobuf::encode_object(&lease).unwrap();
//! assert_eq!(protobuf::decode_object(&wire).unwrap(), lease);
//! ```

pub mod protobuf;
