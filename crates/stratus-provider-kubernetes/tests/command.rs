//! The vendor path: `stratus-offload-node`'s command (Go virtual-kubelet's
//! flags, `--provider-config` naming the remote cluster) offloads a pod;
//! the remote client comes from a kubeconfig file or a home Secret, and a
//! missing or broken one is a typed error naming it.

mod common;

use std::time::Duration;

use common::*;
use k8s_openapi::api::core::v1::{Pod, Secret};
use kube::api::{Api, ListParams, PostParams};
use stratus_kubelet::app::{Command, register_provider};
use stratus_provider_kubernetes::{
    OffloadConfig, PROVIDER_NAME, RemoteClientError, SecretKeyRef, providers_from_init,
    remote_client,
};
use stratus_testing::ApiServer;
use tokio::sync::watch;

fn temp(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("offload-command-{}-{name}", std::process::id()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_command_offloads_from_its_flags() {
    let remote = Remote::start().await;
    let api = ApiServer::start().await.unwrap();
    let (home_kubeconfig, remote_kubeconfig, config) =
        (temp("home"), temp("remote"), temp("config.yaml"));
    api.write_kubeconfig(&home_kubeconfig).unwrap();
    remote
        .cluster
        .server()
        .write_kubeconfig(&remote_kubeconfig)
        .unwrap();
    std::fs::write(
        &config,
        format!(
            "kubeconfig: {}\nnamespaces: {{mode: prefix, value: burst-}}\n",
            remote_kubeconfig.display()
        ),
    )
    .unwrap();
    register_provider(PROVIDER_NAME, providers_from_init).unwrap();
    let (stop, stopped) = watch::channel(false);
    let args = vec![
        "stratus-offload-node".to_string(),
        "--nodename=vk-command".into(),
        format!("--kubeconfig={}", home_kubeconfig.display()),
        format!("--provider-config={}", config.display()),
        "--listen-address=127.0.0.1".into(),
        "--kubelet-port=0".into(),
        "--authorization-mode=AlwaysAllow".into(),
        "--startup-timeout=20s".into(),
        "--metrics-addr=127.0.0.1:0".into(),
    ];
    let task = tokio::spawn(
        Command::new()
            .default_provider(PROVIDER_NAME)
            .run_with_args(args, stopped),
    );
    let pods: Api<Pod> = Api::namespaced(api.client(), "default");
    let mut pod = simple("from-flags");
    pod.spec.as_mut().unwrap().node_name = Some("vk-command".into());
    // The node registers first; the pod waits for it.
    eventually("the node registered", Duration::from_secs(20), async || {
        Api::<k8s_openapi::api::core::v1::Node>::all(api.client())
            .get_opt("vk-command")
            .await
            .unwrap()
            .is_some()
    })
    .await;
    create(&pods, pod).await;
    running(&pods, "from-flags").await;
    let remote_pods = Api::<Pod>::namespaced(remote.client(), "burst-default")
        .list(&ListParams::default())
        .await
        .unwrap()
        .items;
    assert_eq!(
        remote_pods.len(),
        1,
        "one remote pod in the mapped namespace"
    );
    stop.send_replace(true);
    tokio::time::timeout(Duration::from_secs(30), task)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    for f in [home_kubeconfig, remote_kubeconfig, config] {
        let _ = std::fs::remove_file(f);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_remote_kubeconfig_comes_from_a_file_or_a_secret_or_a_named_error() {
    let remote = Remote::start().await;
    let api = ApiServer::start().await.unwrap();
    let home = api.client();
    let reach = async |config: &OffloadConfig| {
        let client = remote_client(config, &home).await?;
        let listed = Api::<Pod>::all(client)
            .list(&ListParams::default())
            .await
            .is_ok();
        Ok::<_, RemoteClientError>(listed)
    };

    // A file.
    let file = temp("file");
    remote.cluster.server().write_kubeconfig(&file).unwrap();
    let from_file = OffloadConfig {
        kubeconfig: Some(file.clone()),
        ..Default::default()
    };
    assert!(reach(&from_file).await.unwrap());

    // A Secret of the home cluster.
    let secrets: Api<Secret> = Api::namespaced(home.clone(), "default");
    let secret: Secret = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "remote-cluster"},
        "stringData": {"kubeconfig": remote.cluster.server().kubeconfig(), "broken": "clusters: [oops"},
    }))
    .unwrap();
    secrets
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
    let from_secret = |name: &str, key: &str| OffloadConfig {
        kubeconfig_secret: Some(SecretKeyRef {
            namespace: "default".into(),
            name: name.into(),
            key: key.into(),
        }),
        ..Default::default()
    };
    assert!(
        reach(&from_secret("remote-cluster", "kubeconfig"))
            .await
            .unwrap()
    );

    // Errors, each naming what is wrong.
    let err = reach(&OffloadConfig::default()).await.unwrap_err();
    assert!(matches!(err, RemoteClientError::Missing), "{err}");
    let err = reach(&from_secret("absent", "kubeconfig"))
        .await
        .unwrap_err();
    assert!(
        matches!(err, RemoteClientError::Secret { ref name, .. } if name == "absent"),
        "{err}"
    );
    assert!(err.to_string().contains("not found"), "{err}");
    let err = reach(&from_secret("remote-cluster", "nokey"))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("has no key \"nokey\""), "{err}");
    let err = reach(&from_secret("remote-cluster", "broken"))
        .await
        .unwrap_err();
    assert!(matches!(err, RemoteClientError::Kubeconfig { .. }), "{err}");
    assert!(
        err.to_string()
            .contains("Secret default/remote-cluster[broken]"),
        "{err}"
    );
    let err = reach(&OffloadConfig {
        kubeconfig: Some(temp("absent")),
        ..Default::default()
    })
    .await
    .unwrap_err();
    assert!(matches!(err, RemoteClientError::Kubeconfig { .. }), "{err}");
    let _ = std::fs::remove_file(file);
}
