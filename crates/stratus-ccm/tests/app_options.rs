//! The manager flags: Go's names and defaults, validation, selection.

use std::time::Duration;

use clap::Parser;
use stratus_ccm::app::{ManagerOptions, OptionsError, canonicalize, enabled, known_controllers};
use stratus_cloud::helpers::Cidr;

#[derive(Parser)]
struct Command {
    #[command(flatten)]
    options: ManagerOptions,
}

fn parse(args: &[&str]) -> ManagerOptions {
    let mut all = vec!["ccm"];
    all.extend_from_slice(args);
    Command::try_parse_from(all).unwrap().options
}

#[test]
fn defaults_are_go_s_except_where_documented() {
    let o = parse(&["--cloud-provider", "fake"]);
    assert_eq!(o.generic.controllers, ["*"]);
    assert!(o.generic.leader_elect);
    assert_eq!(
        (
            o.generic.leader_elect_lease_duration,
            o.generic.leader_elect_renew_deadline,
            o.generic.leader_elect_retry_period
        ),
        (
            Duration::from_secs(15),
            Duration::from_secs(10),
            Duration::from_secs(2)
        )
    );
    assert_eq!(
        o.generic.leader_elect_resource_name,
        "cloud-controller-manager"
    );
    assert_eq!(o.generic.leader_elect_resource_namespace, "kube-system");
    assert_eq!(o.node_status_update_frequency, Duration::from_secs(300));
    assert_eq!(o.cloud.node_monitor_period, Duration::from_secs(5));
    assert_eq!(o.cloud.route_reconciliation_period, Duration::from_secs(10));
    assert!(o.cloud.configure_cloud_routes && !o.cloud.allocate_node_cidrs);
    assert_eq!(
        (o.generic.kube_api_qps, o.generic.kube_api_burst),
        (20.0, 30)
    );
    assert_eq!(
        (
            o.secure_serving.secure_port,
            o.secure_serving.bind_address.to_string().as_str()
        ),
        (10258, "0.0.0.0")
    );
    assert_eq!(o.cloud.cluster_name, "kubernetes");
    let v4 = stratus_ccm::app::parse_cidr_list("--cluster-cidr", "10.0.0.0/8").unwrap();
    assert_eq!(o.node_cidr_mask_sizes(&v4).unwrap(), (24, 64));
    // Go's concurrency (1 and 1); ours: the two-pass deletion safeguard.
    assert_eq!(
        (
            o.node_controller.concurrent_node_syncs,
            o.service_controller.concurrent_service_syncs
        ),
        (1, 1)
    );
    assert_eq!(o.node_controller.node_gone_confirmations, 2);
    // Webhooks: none enabled, port 10260 on all addresses; exit on a lost
    // Lease.
    assert!(o.webhook.webhooks.is_empty());
    assert_eq!(
        (
            o.webhook_serving.webhook_secure_port,
            o.webhook_serving.webhook_bind_address.to_string().as_str()
        ),
        (10260, "0.0.0.0")
    );
    assert!(!o.generic.leader_elect_recampaign);
    // Batching and classes: ours.
    assert_eq!(
        (
            o.node_controller.node_batch_window,
            o.node_controller.node_max_batch
        ),
        (Duration::from_millis(10), 500)
    );
    assert!(o.load_balancer_classes().is_none(), "the provider decides");
    assert!(o.validate(&known_controllers()).is_empty());
}

#[test]
fn a_repeated_flag_takes_its_last_value_and_lists_append() {
    let o = parse(&[
        "--secure-port=1",
        "--secure-port=2",
        "--controllers=cloud-node",
        "--controllers=service",
        "--webhooks=a",
        "--webhooks=-b",
    ]);
    assert_eq!(o.secure_serving.secure_port, 2);
    assert_eq!(o.generic.controllers, ["cloud-node", "service"]);
    assert_eq!(o.enabled_webhooks(&["a", "b"]).unwrap(), ["a"]);
    let off = parse(&["--webhooks=*", "--webhook-secure-port=0"]);
    assert!(
        off.enabled_webhooks(&["a"]).unwrap().is_empty(),
        "port 0 turns webhooks off"
    );
    let bad = parse(&[
        "--load-balancer-classes=none,internal",
        "--node-max-batch=0",
    ]);
    let problems = bad.validate(&known_controllers());
    assert!(
        problems.contains(&OptionsError::LoadBalancerClass("internal".into())),
        "{problems:?}"
    );
    assert!(
        problems.contains(&OptionsError::NotPositive("--node-max-batch")),
        "{problems:?}"
    );
    let err = parse(&["--webhooks=c"])
        .enabled_webhooks(&["a", "b"])
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "--webhooks: \"c\" is not a registered webhook (registered: a, b)"
    );
}

#[test]
fn go_style_values_parse() {
    let o = parse(&[
        "--cloud-provider=fake",
        "--leader-elect=false",
        "--configure-cloud-routes=false",
        "--allocate-node-cidrs",
        "--cluster-cidr=10.244.0.0/16,fd00::/56",
        "--node-status-update-frequency=1m30s",
        "--controllers=cloud-node,service,-route",
        "-v",
        "4",
    ]);
    assert!(
        !o.generic.leader_elect && !o.cloud.configure_cloud_routes && o.cloud.allocate_node_cidrs
    );
    assert_eq!(o.node_status_update_frequency, Duration::from_secs(90));
    assert_eq!(o.logs.verbosity, 4);
    let known = known_controllers();
    let entries = canonicalize(&o.generic.controllers, &known).unwrap();
    assert_eq!(
        enabled(&known, &entries),
        ["cloud-node-controller", "service-lb-controller"]
    );
    assert!(o.validate(&known).is_empty());
    assert!(Command::try_parse_from(["ccm", "--node-monitor-period=5"]).is_err());
}

#[test]
fn every_problem_is_reported_once() {
    let o = parse(&[
        "--controllers=*,-nope",
        "--leader-elect-resource-lock=endpoints",
        "--leader-elect-renew-deadline=20s",
        "--concurrent-service-syncs=0",
        "--cluster-cidr=10.0.0.0/8,10.1.0.0/16",
        "--service-cluster-ip-range=garbage",
        "--tls-cert-file=/tmp/x.crt",
        "--logging-format=xml",
    ]);
    let problems = o.validate(&known_controllers());
    let text: Vec<String> = problems.iter().map(ToString::to_string).collect();
    assert_eq!(problems.len(), 9, "{text:#?}");
    assert!(problems.contains(&OptionsError::NoCloudProvider));
    assert!(problems.contains(&OptionsError::ResourceLock("endpoints".into())));
    assert!(problems.contains(&OptionsError::NotPositive("--concurrent-service-syncs")));
    assert!(problems.contains(&OptionsError::HalfCertificate));
    assert!(
        text.iter()
            .any(|t| t.contains("\"-nope\" is not a known controller"))
    );
    assert!(
        text.iter()
            .any(|t| t.contains("lease duration (15s) > renew deadline (20s)"))
    );
    assert!(
        text.iter()
            .any(|t| t.starts_with("--cluster-cidr: two CIDRs must be one IPv4 and one IPv6"))
    );
    assert!(
        text.iter()
            .any(|t| t.starts_with("--service-cluster-ip-range: invalid CIDR"))
    );
    assert!(
        text.iter()
            .any(|t| t.contains("--logging-format must be text or json"))
    );
}

#[test]
fn node_cidr_mask_flags_follow_gos_rules() {
    use stratus_ccm::app::parse_cidr_list;
    let v4 = parse_cidr_list("--cluster-cidr", "10.0.0.0/14").unwrap();
    let v6 = parse_cidr_list("--cluster-cidr", "fd00::/48").unwrap();
    let dual = parse_cidr_list("--cluster-cidr", "10.0.0.0/14,fd00::/48").unwrap();
    /// Flags, cluster CIDRs, and the (IPv4, IPv6) masks they give.
    type Case<'a> = (&'a [&'a str], &'a [Cidr], (u8, u8));
    let ok: &[Case] = &[
        (&[], &v4, (24, 64)),
        (&[], &dual, (24, 64)),
        (&["--node-cidr-mask-size=26"], &v4, (26, 26)),
        (&["--node-cidr-mask-size=120"], &v6, (120, 120)),
        (&["--node-cidr-mask-size-ipv4=25"], &v4, (25, 64)),
        (&["--node-cidr-mask-size-ipv6=80"], &v6, (24, 80)),
        (
            &[
                "--node-cidr-mask-size-ipv4=25",
                "--node-cidr-mask-size-ipv6=80",
            ],
            &dual,
            (25, 80),
        ),
        // 0 is "not set" in Go.
        (
            &["--node-cidr-mask-size=0", "--node-cidr-mask-size-ipv4=22"],
            &v4,
            (22, 64),
        ),
    ];
    for (flags, cidrs, want) in ok {
        let o = parse(flags);
        assert_eq!(o.node_cidr_mask_sizes(cidrs).unwrap(), *want, "{flags:?}");
    }
    let refused: &[(&[&str], &[Cidr], &str)] = &[
        (
            &["--node-cidr-mask-size=24"],
            &dual,
            "usage of --node-cidr-mask-size is not allowed with dual-stack clusters",
        ),
        (
            &["--node-cidr-mask-size=24", "--node-cidr-mask-size-ipv4=25"],
            &v4,
            "usage of --node-cidr-mask-size-ipv4 and --node-cidr-mask-size-ipv6 is not allowed if --node-cidr-mask-size is set",
        ),
        (
            &["--node-cidr-mask-size-ipv4=25"],
            &v6,
            "usage of --node-cidr-mask-size-ipv4 is not allowed for a single-stack IPv6 cluster",
        ),
        (
            &["--node-cidr-mask-size-ipv6=80"],
            &v4,
            "usage of --node-cidr-mask-size-ipv6 is not allowed for a single-stack IPv4 cluster",
        ),
    ];
    for (flags, cidrs, message) in refused {
        let err = parse(flags).node_cidr_mask_sizes(cidrs).unwrap_err();
        assert!(err.to_string().starts_with(message), "{flags:?}: {err}");
    }
    // The manager refuses such a command line before it starts anything.
    let o = parse(&[
        "--cloud-provider=fake",
        "--allocate-node-cidrs",
        "--cluster-cidr=10.0.0.0/14,fd00::/48",
        "--node-cidr-mask-size=24",
    ]);
    let problems = o.validate(&known_controllers());
    assert!(
        problems
            .iter()
            .any(|p| matches!(p, OptionsError::NodeCidrMaskSize(_))),
        "{problems:?}"
    );
}
