//! `cargo xtask ci`: every check CI runs, one summary line per step:
//! formatting, clippy, no import cycle between a crate's modules, the
//! workspace tests, the docs, the library crates
//! against each supported Kubernetes minor, packaging every
//! library crate as crates.io would build it, the generated provider
//! crates of both kinds and the example kube-rs operator (built and tested
//! outside the workspace), a short
//! fuzzing run of every parser of network and user input, a two-minute
//! soak of the components under churn and faults, the
//! end-to-end runner against the demo cluster, the monitoring rules and
//! dashboard against a real Prometheus, the Helm charts against Helm built
//! from its module, the real control plane
//! (built from its Go modules; the demo, the e2e runner, kubectl and
//! faults on it, and the kubectl, Python and JavaScript client scripts
//! against it), the benchmarks' Go peers built from their modules, the
//! kubectl scripts (one
//! with the newest kubectl against a process node, whose pods are real
//! processes, one against an offload node, whose pods run in a second API
//! server)
//! against the standalone harness API server (the installed kubectl, and
//! every kubectl from 1.27 to 1.33), sessions of the official Python and
//! JavaScript clients, and the protobuf table's freshness.

use std::process::{Command, ExitCode};
use std::time::Instant;

struct Step {
    name: &'static str,
    /// The program: `cargo` (the running one) or another command.
    program: &'static str,
    args: &'static [&'static str],
    env: &'static [(&'static str, &'static str)],
}

const STEPS: &[Step] = &[
    Step {
        name: "fmt",
        program: "cargo",
        args: &["fmt", "--all", "--", "--check"],
        env: &[],
    },
    Step {
        name: "clippy",
        program: "cargo",
        args: &[
            "clippy",
            "--workspace",
            "--all-targets",
            "--all-features",
            "--",
            "-D",
            "warnings",
        ],
        env: &[],
    },
    Step {
        // No two source files of a crate import each other, directly or
        // around a cycle (see xtask/src/module_cycles.rs).
        name: "module-cycles",
        program: "cargo",
        args: &["xtask", "module-cycles"],
        env: &[],
    },
    Step {
        // Every test binary runs even after one fails, so one run shows
        // every failure.
        name: "test",
        program: "cargo",
        args: &["test", "--workspace", "--all-features", "--no-fail-fast"],
        env: &[],
    },
    Step {
        name: "doc",
        program: "cargo",
        args: &["doc", "--workspace", "--no-deps", "--all-features"],
        env: &[("RUSTDOCFLAGS", "-D warnings")],
    },
    Step {
        // The library crates checked against each supported Kubernetes
        // minor (1.34 to 1.37), as a vendor's binary picks one.
        name: "kubernetes-versions",
        program: "cargo",
        args: &["xtask", "kubernetes-versions"],
        env: &[],
    },
    Step {
        // Every library crate packed and built from its packed sources
        // against the other packed crates, as crates.io would see them.
        name: "package",
        program: "cargo",
        args: &[
            "package",
            "--workspace",
            "--exclude",
            "xtask",
            "--exclude",
            "sample-cloud-controller-manager",
            "--exclude",
            "sample-virtual-kubelet",
            "--exclude",
            "stratus-cluster",
            "--exclude",
            "stratus-bench",
            "--exclude",
            "stratus-demo",
            "--allow-dirty",
        ],
        // A target directory of its own: the packed crates are registry
        // crates to Cargo, whose builds are not checked against their
        // sources, so the ones of an earlier run are removed before each
        // run (see `forget_packed_workspace_crates`) without touching the
        // workspace's builds. A packed crate is built as the root of its
        // own build, without the workspace's profile: no debug info there
        // (the step only checks that it compiles; full debug info for
        // every dependency would take gigabytes). In CI (`CI` set) the
        // directory is removed after the step.
        env: &[
            ("CARGO_TARGET_DIR", PACKAGE_TARGET_DIR),
            ("CARGO_PROFILE_DEV_DEBUG", "false"),
        ],
    },
    Step {
        // Both kinds of provider crate, generated outside the workspace
        // (`cargo stratus new` from `cargo install --path cargo-stratus`,
        // and its `cargo xtask new-provider` alias), linted and tested there.
        name: "generated-providers",
        program: "bash",
        args: &["scripts/generated-providers.sh"],
        env: &[],
    },
    Step {
        // The example kube-rs operator, a workspace of its own tested with
        // `stratus-apiserver` as its only Stratus dependency.
        name: "example-operator",
        program: "bash",
        args: &["scripts/example-operator.sh"],
        env: &[],
    },
    Step {
        // Every parser of network and user input fed mutated inputs for a
        // minute in all (about 3 s a target); a panic or a hang fails it.
        name: "fuzz",
        program: "cargo",
        args: &["xtask", "fuzz", "--seconds", "60"],
        env: &[],
    },
    Step {
        // The components as processes under two minutes of churn and API
        // faults (one API server restart): nothing lost, leaked or stuck at
        // the end, no component exited; memory and descriptor slopes in
        // target/bench/soak.json.
        name: "soak",
        program: "cargo",
        args: &["xtask", "soak", "--minutes", "2"],
        env: &[],
    },
    Step {
        // `cargo xtask e2e` against the demo cluster: the manager's and
        // three virtual nodes' end-to-end checks, as against a real cluster.
        name: "e2e-demo",
        program: "bash",
        args: &["scripts/e2e-demo.sh"],
        env: &[],
    },
    Step {
        // The monitoring rules and dashboard of docs/deploy/monitoring:
        // `promtool check rules` and `promtool test rules`, then Debian's
        // Prometheus scraping the sample manager and virtual kubelet: every
        // metric the rules and the dashboard read has samples.
        name: "monitoring",
        program: "bash",
        args: &["scripts/monitoring.sh"],
        env: &[],
    },
    Step {
        // The Helm charts of deploy/charts with Helm built from
        // tools/helm/go.mod: lint, template, a server-side dry run, and an
        // install into the harness whose rendered flags start the sample
        // binaries, then an uninstall that leaves nothing.
        name: "helm",
        program: "bash",
        args: &["scripts/helm.sh"],
        env: &[],
    },
    Step {
        // The real control plane (etcd, kube-apiserver,
        // kube-controller-manager, kube-scheduler) built from the Go
        // modules of tools/kubernetes/go.mod; a no-op while the binaries
        // are newer than go.mod and go.sum, incremental with Go's caches.
        name: "cluster-build",
        program: "cargo",
        args: &["xtask", "cluster", "build"],
        env: &[],
    },
    Step {
        // The benchmarks' Go peers (tools/go-peers/go.mod: the Go virtual
        // kubelet of `cargo xtask bench kubelet-go`, the Go cloud controller
        // manager of `cargo xtask bench ccm-go`), sharing Go's caches with
        // the control plane's build.
        name: "go-peers-build",
        program: "cargo",
        args: &["xtask", "go-peers"],
        env: &[],
    },
    Step {
        // The demo, the e2e runner, kubectl (Deployments, logs, exec,
        // attach, cp, port-forward, stats, drain, namespace deletion) and
        // faults on the real control plane; the manager's 403s counted in
        // its audit log.
        name: "e2e-real",
        program: "bash",
        args: &["scripts/e2e-real.sh"],
        env: &[],
    },
    Step {
        // kubectl 1.27–1.33, the Python and the JavaScript client scripts
        // on the real control plane (the same scripts as on the harness).
        name: "clients-real",
        program: "bash",
        args: &["scripts/clients-real.sh"],
        env: &[],
    },
    Step {
        name: "kubectl",
        program: "bash",
        args: &["scripts/kubectl-harness.sh"],
        env: &[],
    },
    Step {
        name: "kubectl-versions",
        program: "bash",
        args: &["scripts/kubectl-versions.sh"],
        env: &[],
    },
    Step {
        name: "kubectl-process-node",
        program: "bash",
        args: &["scripts/kubectl-process-node.sh"],
        env: &[],
    },
    Step {
        name: "kubectl-offload-node",
        program: "bash",
        args: &["scripts/kubectl-offload-node.sh"],
        env: &[],
    },
    Step {
        name: "python-client",
        program: "bash",
        args: &["scripts/python-client.sh"],
        env: &[],
    },
    Step {
        name: "js-client",
        program: "bash",
        args: &["scripts/js-client.sh"],
        env: &[],
    },
    Step {
        name: "protobuf-schema",
        program: "cargo",
        args: &["xtask", "protobuf-schema", "--check"],
        env: &[],
    },
];

/// How a step ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Passed,
    Failed,
    Skipped,
}

/// The linter a `cargo fmt` or `cargo clippy` step needs, if this machine
/// lacks it.
fn missing_linter(step: &Step, cargo: &str) -> Option<&'static str> {
    let tool = match (step.program, step.args.first()) {
        ("cargo", Some(&"fmt")) => "fmt",
        ("cargo", Some(&"clippy")) => "clippy",
        _ => return None,
    };
    let present = Command::new(cargo)
        .args([tool, "--version"])
        .output()
        .is_ok_and(|o| o.status.success());
    (!present).then_some(if tool == "fmt" { "rustfmt" } else { "clippy" })
}

/// Where the package step builds.
const PACKAGE_TARGET_DIR: &str = "target/package-build";

/// How the build files of the workspace's packed crates start (the
/// library crates and cargo-stratus).
const PACKED_PREFIXES: &[&str] = &[
    "stratus",
    "libstratus",
    "cargo-stratus",
    "cargo_stratus",
    "libcargo_stratus",
];

/// `cargo package` verifies each crate against the others through a
/// temporary local registry. Cargo unpacks a registry crate once per
/// version and never rebuilds a registry crate it built: after a change,
/// the unpacked sources and builds of an earlier run (same version 0.1.0)
/// would be used instead of the new ones. Both are removed first (a fresh
/// machine has neither).
fn forget_packed_workspace_crates() {
    for dir in [".fingerprint", "deps", "build"] {
        let Ok(entries) = std::fs::read_dir(format!("{PACKAGE_TARGET_DIR}/debug/{dir}")) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if PACKED_PREFIXES
                .iter()
                .any(|prefix| name.starts_with(prefix))
            {
                let path = entry.path();
                let _ = if path.is_dir() {
                    std::fs::remove_dir_all(&path)
                } else {
                    std::fs::remove_file(&path)
                };
            }
        }
    }
    let home = std::env::var_os("CARGO_HOME")
        .map(std::path::PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| std::path::PathBuf::from(h).join(".cargo")));
    let Some(sources) = home.map(|h| h.join("registry").join("src")) else {
        return;
    };
    let Ok(registries) = std::fs::read_dir(&sources) else {
        return;
    };
    for registry in registries.flatten() {
        // Local registries are the ones whose directory name has no host
        // (`-<hash>`); crates.io's (`index.crates.io-…`) is left alone.
        if !registry.file_name().to_string_lossy().starts_with('-') {
            continue;
        }
        let Ok(crates) = std::fs::read_dir(registry.path()) else {
            continue;
        };
        for unpacked in crates.flatten() {
            let name = unpacked.file_name();
            let name = name.to_string_lossy();
            if name.starts_with("stratus") || name.starts_with("cargo-stratus") {
                let _ = std::fs::remove_dir_all(unpacked.path());
            }
        }
    }
}

/// Remove the test executables a step left in `<target>/debug/deps` and
/// return how many bytes that freed. Nothing runs them after their step,
/// and together they are most of the target directory (about 45 MB each);
/// on a CI machine with a small disk the later steps need the room. A test
/// executable is told apart by its shape: an executable file without an
/// extension that is not hard-linked anywhere else (Cargo links a
/// binary's copy into `<target>/debug`; build scripts live in `build/`,
/// proc macros are `.so` files). Cargo relinks a removed one if it is
/// asked for again.
fn remove_test_executables(target: &std::path::Path) -> u64 {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let Ok(entries) = std::fs::read_dir(target.join("debug").join("deps")) else {
        return 0;
    };
    let mut freed = 0;
    for entry in entries.flatten() {
        let Ok(meta) = entry.metadata() else {
            continue;
        };
        let name = entry.file_name();
        let is_test = meta.is_file()
            && meta.permissions().mode() & 0o111 != 0
            && meta.nlink() == 1
            && !name.to_string_lossy().contains('.');
        if is_test && std::fs::remove_file(entry.path()).is_ok() {
            freed += meta.len();
        }
    }
    freed
}

/// The free space on the file system of the current directory, as `df`
/// tells it (`12G`); `None` if `df` cannot.
fn free_disk() -> Option<String> {
    let out = Command::new("df").args(["-h", "."]).output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    // `Filesystem Size Used Avail Use% Mounted on`
    text.lines()
        .nth(1)?
        .split_whitespace()
        .nth(3)
        .map(str::to_owned)
}

/// How many of a step's last output lines are kept for the summary.
const TAIL_LINES: usize = 40;

/// Run one step, its output passed through as it comes; whether it
/// succeeded and its last `TAIL_LINES` lines (stdout and stderr).
fn run_step(program: &str, step: &Step) -> std::io::Result<(bool, Vec<String>)> {
    use std::io::{BufRead, BufReader, Write};
    use std::sync::{Arc, Mutex};
    let mut child = Command::new(program)
        .args(step.args)
        .envs(step.env.iter().copied())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()?;
    let tail: Arc<Mutex<std::collections::VecDeque<String>>> = Arc::default();
    let pass = |stream: Box<dyn std::io::Read + Send>, to_stderr: bool| {
        let tail = Arc::clone(&tail);
        std::thread::spawn(move || {
            for line in BufReader::new(stream).split(b'\n').map_while(Result::ok) {
                let text = String::from_utf8_lossy(&line).into_owned();
                let _ = if to_stderr {
                    writeln!(std::io::stderr(), "{text}")
                } else {
                    writeln!(std::io::stdout(), "{text}")
                };
                let mut t = tail.lock().unwrap_or_else(|e| e.into_inner());
                if t.len() == TAIL_LINES {
                    t.pop_front();
                }
                t.push_back(text);
            }
        })
    };
    let readers = [
        child.stdout.take().map(|s| pass(Box::new(s), false)),
        child.stderr.take().map(|s| pass(Box::new(s), true)),
    ];
    let status = child.wait()?;
    // A process the step left running may hold its output open: the
    // readers get a few seconds to finish, then are left behind.
    let deadline = Instant::now() + std::time::Duration::from_secs(5);
    for reader in readers.into_iter().flatten() {
        while !reader.is_finished() && Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        if reader.is_finished() {
            let _ = reader.join();
        }
    }
    let lines = tail
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .drain(..)
        .collect();
    Ok((status.success(), lines))
}

/// Run every step (all of them, even after a failure) and print a summary.
pub(crate) fn run(args: &[String]) -> ExitCode {
    if let Some(arg) = args.first() {
        eprintln!("cargo xtask ci takes no arguments (got {arg:?})");
        return ExitCode::from(2);
    }
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let target_dir = std::env::var("CARGO_TARGET_DIR").unwrap_or_else(|_| "target".to_owned());
    let mut results = Vec::new();
    let mut failed_tails = Vec::new();
    for step in STEPS {
        let program = if step.program == "cargo" {
            cargo.as_str()
        } else {
            step.program
        };
        eprintln!(
            "==> ci step {}: {} {}",
            step.name,
            step.program,
            step.args.join(" ")
        );
        // A linter the machine lacks (and .ci/run could not install) is
        // skipped, and said so; never failed, never skipped silently.
        if let Some(tool) = missing_linter(step, program) {
            eprintln!("ci step {}: SKIPPED: {tool} is not installed", step.name);
            results.push((step.name, Outcome::Skipped, std::time::Duration::ZERO));
            continue;
        }
        let started = Instant::now();
        if step.name == "package" {
            forget_packed_workspace_crates();
        }
        let (ok, tail) = match run_step(program, step) {
            Ok(done) => done,
            Err(e) => {
                eprintln!("could not run {program}: {e}");
                (false, Vec::new())
            }
        };
        if std::env::var_os("CI").is_some() {
            if step.name == "package" {
                let _ = std::fs::remove_dir_all(PACKAGE_TARGET_DIR);
            }
            let freed = remove_test_executables(std::path::Path::new(&target_dir));
            if freed > 0 {
                eprintln!(
                    "ci step {}: removed {:.1} GB of test executables",
                    step.name,
                    freed as f64 / 1e9
                );
            }
        }
        eprintln!(
            "ci step {}: {} after {:.1}s; {} free",
            step.name,
            if ok { "ok" } else { "FAILED" },
            started.elapsed().as_secs_f64(),
            free_disk().unwrap_or_else(|| "unknown space".to_owned())
        );
        let outcome = if ok { Outcome::Passed } else { Outcome::Failed };
        if !ok {
            failed_tails.push((step.name, tail));
        }
        results.push((step.name, outcome, started.elapsed()));
    }
    // What the failed steps printed last, again at the end: a CI log is
    // often read from its end.
    for (name, tail) in &failed_tails {
        println!();
        println!(
            "ci step {name} failed; the last {} lines it printed:",
            tail.len()
        );
        for line in tail {
            println!("  | {line}");
        }
    }
    println!();
    println!("ci summary:");
    for (name, outcome, took) in &results {
        let verdict = match outcome {
            Outcome::Passed => "ok",
            Outcome::Failed => "FAILED",
            Outcome::Skipped => "SKIPPED",
        };
        println!("  {name:<20} {verdict:<7} {:>7.1}s", took.as_secs_f64());
    }
    let failed = results
        .iter()
        .filter(|(_, o, _)| *o == Outcome::Failed)
        .count();
    let skipped = results
        .iter()
        .filter(|(_, o, _)| *o == Outcome::Skipped)
        .count();
    if skipped > 0 {
        println!("ci: {skipped} steps skipped (a linter is not installed)");
    }
    if failed == 0 {
        println!("ci: all {} steps passed", results.len() - skipped);
        ExitCode::SUCCESS
    } else {
        println!("ci: {failed} of {} steps failed", results.len());
        ExitCode::FAILURE
    }
}
