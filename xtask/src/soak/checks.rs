//! Waiting for the soak's state to settle, what is left of it, and what a failed check prints (the request log and the log lines of the object it names).

use super::*;

/// Poll every 250 ms until `check` answers `None`, or fail with what it
/// last said; an API error counts as pending (the soak's faults make some).
pub(super) async fn settle<F, Fut>(what: &str, wait: Duration, mut check: F) -> Result<(), String>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<Option<String>, kube::Error>>,
{
    stratus_apiserver::poll(what, wait)
        .every(Duration::from_millis(250))
        .until(|| {
            let look = check();
            async move { look.await.unwrap_or_else(|e| Some(e.to_string())) }
        })
        .await
        .map(drop)
        .map_err(|e| e.to_string())
}

/// Delete every object `params` selects in `api` (failures are left to
/// the checks that follow).
pub(super) async fn delete_all<K>(api: &Api<K>, params: &ListParams) -> Result<(), kube::Error>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    for object in api.list(params).await?.items {
        if let Some(name) = object.meta().name.as_deref() {
            let _ = api.delete(name, &DeleteParams::default()).await;
        }
    }
    Ok(())
}

/// `None` when `params` selects nothing in `api`, else how many `what` are
/// left and the first one's name, deletion time, finalizers and
/// resourceVersion (what a stuck object's diagnosis starts from).
pub(super) async fn left<K>(
    api: &Api<K>,
    params: &ListParams,
    what: &str,
) -> Result<Option<String>, kube::Error>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let list = api.list(params).await?;
    Ok(list.items.first().map(|o| {
        let m = o.meta();
        format!(
            "{} {what} left, e.g. {} (deletionTimestamp {:?}, finalizers {:?}, resourceVersion {:?})",
            list.items.len(),
            m.name.as_deref().unwrap_or_default(),
            m.deletion_timestamp.as_ref().map(|t| t.0.to_string()),
            m.finalizers.clone().unwrap_or_default(),
            m.resource_version.as_deref().unwrap_or_default(),
        )
    }))
}

/// The object a failed check's report names (`... e.g. NAME ...`).
fn named_in(report: &str) -> Option<&str> {
    report
        .split("e.g. ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
}

/// The request log's entries for the object named in a failed check's
/// report, as lines to print when the soak fails.
pub(super) fn requests_for(server: &ApiServer, report: &str) -> Vec<String> {
    let Some(name) = named_in(report) else {
        return Vec::new();
    };
    server
        .requests()
        .iter()
        .filter(|r| r.name.as_deref() == Some(name))
        .map(|r| {
            format!(
                "  {:?} {} {} {} ({})",
                r.verb, r.resource, name, r.status, r.user_agent
            )
        })
        .collect()
}

/// The last 20 lines of the components' logs (in `dir`) that name the
/// object a failed check's report names.
pub(super) fn log_lines_for(dir: &Path, report: &str) -> Vec<String> {
    let Some(name) = named_in(report) else {
        return Vec::new();
    };
    let mut lines = Vec::new();
    for component in [
        "cloud-controller-manager",
        "virtual-kubelet",
        "process-node",
    ] {
        let Ok(text) = std::fs::read_to_string(dir.join(format!("{component}.log"))) else {
            continue;
        };
        for line in text.lines() {
            // The name as a whole word (`soak-proc-23` is not in
            // `soak-proc-239`).
            let named = line.match_indices(name).any(|(at, _)| {
                !line[at + name.len()..]
                    .starts_with(|c: char| c.is_ascii_alphanumeric() || c == '-')
            });
            if named {
                lines.push(format!("  {component}: {line}"));
            }
        }
    }
    let skip = lines.len().saturating_sub(20);
    lines.split_off(skip)
}

/// Processes whose working directory is under `dir`.
pub(super) fn processes_under(dir: &Path) -> Vec<u32> {
    let Ok(root) = dir.canonicalize() else {
        return Vec::new();
    };
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_link(format!("/proc/{pid}/cwd")).is_ok_and(|cwd| cwd.starts_with(&root))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_check_s_object_is_found_in_the_logs_by_its_whole_name() {
        let dir = std::env::temp_dir().join(format!("stratus-soak-logs-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("process-node.log"),
            "sync failed key=default/soak-proc-23 error=x\n\
             sync failed key=default/soak-proc-239 error=y\n\
             created soak-proc-23\n",
        )
        .unwrap();
        let report = "2 pods not Running, e.g. soak-proc-23 (phase Some(\"Pending\"))";
        assert_eq!(named_in(report), Some("soak-proc-23"));
        assert_eq!(
            log_lines_for(&dir, report),
            [
                "  process-node: sync failed key=default/soak-proc-23 error=x",
                "  process-node: created soak-proc-23",
            ]
        );
        assert!(log_lines_for(&dir, "no object named").is_empty());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
