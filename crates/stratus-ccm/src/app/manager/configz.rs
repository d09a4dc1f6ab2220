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
            "Controllers": o.generic.controllers,
            "ClientConnection": {"QPS": o.generic.kube_api_qps, "Burst": o.generic.kube_api_burst},
            "LeaderElection": {
                "LeaderElect": o.generic.leader_elect,
                "LeaseDuration": format!("{:?}", o.generic.leader_elect_lease_duration),
                "RenewDeadline": format!("{:?}", o.generic.leader_elect_renew_deadline),
                "RetryPeriod": format!("{:?}", o.generic.leader_elect_retry_period),
                "ResourceName": o.generic.leader_elect_resource_name,
                "ResourceNamespace": o.generic.leader_elect_resource_namespace,
            },
        },
        "KubeCloudShared": {
            "CloudProvider": {"Name": o.cloud.cloud_provider, "CloudConfigFile": o.cloud.cloud_config},
            "ClusterName": o.cloud.cluster_name,
            "ClusterCIDR": o.cloud.cluster_cidr,
            "AllocateNodeCIDRs": o.cloud.allocate_node_cidrs,
            "ConfigureCloudRoutes": o.cloud.configure_cloud_routes,
            "NodeMonitorPeriod": format!("{:?}", o.cloud.node_monitor_period),
            "RouteReconciliationPeriod": format!("{:?}", o.cloud.route_reconciliation_period),
        },
        "NodeController": {"ConcurrentNodeSyncs": o.node_controller.concurrent_node_syncs},
        "ServiceController": {"ConcurrentServiceSyncs": o.service_controller.concurrent_service_syncs},
        "NodeStatusUpdateFrequency": format!("{:?}", o.node_status_update_frequency),
    })
}
