//! Building the components from the Go modules pinned in
//! `tools/kubernetes/go.mod`.

use std::process::Command;
use std::time::{Instant, SystemTime};

use crate::BoxError;

use super::layout::{COMPONENTS, bin_dir, binary, go_module};

/// The Kubernetes version `go.mod` pins (`v1.37.2`).
pub(crate) fn pinned_version() -> Result<String, BoxError> {
    let path = go_module().join("go.mod");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    text.lines()
        .find_map(|l| {
            let l = l.trim();
            l.strip_prefix("require ")
                .unwrap_or(l)
                .strip_prefix("k8s.io/kubernetes ")
        })
        .map(|v| v.trim().to_owned())
        .ok_or_else(|| format!("{} requires no k8s.io/kubernetes version", path.display()).into())
}

/// Linker flags: no symbol tables, and the version stamped as Kubernetes'
/// release builds stamp it (a module build has no git tree to read it
/// from, so it would say `v0.0.0-master`).
pub(crate) fn ldflags() -> Result<String, BoxError> {
    let version = pinned_version()?;
    let mut parts = version.trim_start_matches('v').split('.');
    let (major, minor) = (parts.next().unwrap_or("1"), parts.next().unwrap_or("0"));
    let mut flags = "-s -w".to_owned();
    for package in [
        "k8s.io/component-base/version",
        "k8s.io/client-go/pkg/version",
    ] {
        flags.push_str(&format!(
            " -X {package}.gitVersion={version} -X {package}.gitMajor={major} \
             -X {package}.gitMinor={minor} -X {package}.gitTreeState=clean"
        ));
    }
    Ok(flags)
}

pub(crate) fn newest_input() -> Option<SystemTime> {
    ["go.mod", "go.sum"]
        .iter()
        .filter_map(|f| std::fs::metadata(go_module().join(f)).ok()?.modified().ok())
        .max()
}

/// Build the binaries unless they are newer than the module files; the
/// answer says which happened and how long it took.
pub fn build() -> Result<String, BoxError> {
    let inputs = newest_input().ok_or("tools/kubernetes/go.mod is missing")?;
    let fresh = COMPONENTS.iter().all(|c| {
        std::fs::metadata(binary(c))
            .and_then(|m| m.modified())
            .is_ok_and(|built| built >= inputs)
    });
    if fresh {
        return Ok("binaries up to date".into());
    }
    let started = Instant::now();
    std::fs::create_dir_all(bin_dir())?;
    let ldflags = ldflags()?;
    // The three Kubernetes commands in one build (the compiler runs their
    // shared packages once), etcd's server after it.
    let builds: [(&[&str], &str); 2] = [
        (
            &[
                "k8s.io/kubernetes/cmd/kube-apiserver",
                "k8s.io/kubernetes/cmd/kube-controller-manager",
                "k8s.io/kubernetes/cmd/kube-scheduler",
            ],
            "",
        ),
        (&["go.etcd.io/etcd/server/v3"], "etcd"),
    ];
    for (packages, output) in builds {
        let out = bin_dir().join(output);
        let mut out = out.into_os_string();
        if output.is_empty() {
            out.push("/");
        }
        let wait =
            crate::progress::Wait::start("cluster", format!("go build {}", packages.join(" ")));
        let one = Instant::now();
        let status = Command::new("go")
            .current_dir(go_module())
            .env("GOFLAGS", "-mod=mod")
            .arg("build")
            .args(["-trimpath", &format!("-ldflags={ldflags}"), "-o"])
            .arg(&out)
            .args(packages)
            .status()
            .map_err(|e| format!("could not run go (is Go installed?): {e}"))?;
        if !status.success() {
            return Err(format!("go build {} failed", packages.join(" ")).into());
        }
        wait.done(&format!("built in {:.0} s", one.elapsed().as_secs_f64()));
    }
    Ok(format!("built in {:.0}s", started.elapsed().as_secs_f64()))
}
