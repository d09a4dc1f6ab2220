//! Pure helpers with the Go library's exact semantics: load-balancer names,
//! provider IDs, node addresses, source ranges, health checks, status
//! equality, backend predicates and label filtering. None does I/O.

mod labels;
mod load_balancer_name;
mod net;
mod node_address;
mod provider_id;
mod service;

pub use labels::{
    AdditionalLabels, filter_additional_labels, is_kubernetes_namespaced_label, is_label_value,
};
pub use load_balancer_name::{MAX_DEFAULT_LOAD_BALANCER_NAME, default_load_balancer_name};
pub use net::{Cidr, CidrError, ip_equal, is_ipv6, parse_ip_sloppy};
pub use node_address::{
    NodeIpError, add_to_node_addresses, node_address_problem, node_addresses_equal,
    node_addresses_from_node_ip, parse_node_ip_annotation,
};
pub use provider_id::{ProviderId, ProviderIdError};
pub use service::{
    DEFAULT_LOAD_BALANCER_SOURCE_RANGE, EXTERNAL_TRAFFIC_POLICY_LOCAL, HEALTH_CHECK_PATH,
    SERVICE_TYPE_LOAD_BALANCER, SERVICE_TYPE_NODE_PORT, SourceRanges, SourceRangesError,
    has_load_balancer_finalizer, health_check_path_port, ingress_ip, is_load_balancer_backend,
    load_balancer_source_ranges, load_balancer_status_equal, needs_cleanup, needs_health_check,
    parse_go_bool, requests_only_local_traffic, wants_load_balancer,
};
