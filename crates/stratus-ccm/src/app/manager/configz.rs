//! The manager's `/configz`: its effective flags by Go's names, and
//! whether each controller started.

use super::*;

/// Record in `/configz` whether the controller `name` started (`None`) or
/// why not.
pub(super) fn record_status(configz: &Configz, name: &str, not_started: Option<&str>) {
    let status = match not_started {
        None => serde_json::json!({"Started": true}),
        Some(reason) => serde_json::json!({"Started": false, "Reason": reason}),
    };
    configz.update(|doc| {
        doc[crate::names::manager::CONFIGZ_NAME]["ControllerStatus"][name] = status;
    });
}

/// The `/configz` document: the effective flags, by Go's names.
pub(super) fn configz(o: &ManagerOptions) -> serde_json::Value {
    serde_json::json!({
        "Generic": {
            "Controllers": o.controllers,
            "ClientConnection": {"QPS": o.kube_api_qps, "Burst": o.kube_api_burst},
            "LeaderElection": {
                "LeaderElect": o.leader_elect,
                "LeaseDuration": format!("{:?}", o.leader_elect_lease_duration),
                "RenewDeadline": format!("{:?}", o.leader_elect_renew_deadline),
                "RetryPeriod": format!("{:?}", o.leader_elect_retry_period),
                "ResourceName": o.leader_elect_resource_name,
                "ResourceNamespace": o.leader_elect_resource_namespace,
            },
        },
        "KubeCloudShared": {
            "CloudProvider": {"Name": o.cloud_provider, "CloudConfigFile": o.cloud_config},
            "ClusterName": o.cluster_name,
            "ClusterCIDR": o.cluster_cidr,
            "AllocateNodeCIDRs": o.allocate_node_cidrs,
            "ConfigureCloudRoutes": o.configure_cloud_routes,
            "NodeMonitorPeriod": format!("{:?}", o.node_monitor_period),
            "RouteReconciliationPeriod": format!("{:?}", o.route_reconciliation_period),
        },
        "NodeController": {"ConcurrentNodeSyncs": o.concurrent_node_syncs},
        "ServiceController": {"ConcurrentServiceSyncs": o.concurrent_service_syncs},
        "NodeStatusUpdateFrequency": format!("{:?}", o.node_status_update_frequency),
    })
}
