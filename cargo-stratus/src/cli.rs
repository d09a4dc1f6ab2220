//! The command: `cargo stratus new ...` (Cargo runs `cargo-stratus stratus
//! new ...`).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::{Kind, Stratus, crate_name, files, write};

/// `cargo stratus`.
#[derive(Debug, Parser)]
#[command(name = "cargo stratus", bin_name = "cargo stratus", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Generate a provider crate that builds and passes its tests as
    /// generated.
    New(NewArgs),
}

/// `cargo stratus new`.
#[derive(Debug, clap::Args)]
struct NewArgs {
    /// A cloud controller manager or a virtual kubelet.
    #[arg(long, value_enum)]
    kind: Kind,
    /// The provider's name (`--cloud-provider` / `--provider`, the
    /// provider-ID scheme, the taint's value): a lowercase DNS label.
    #[arg(long)]
    name: String,
    /// Where to write the crate (default: `./<name>-cloud-controller-manager`
    /// or `./<name>-virtual-kubelet`); must not exist or be empty.
    #[arg(long)]
    path: Option<PathBuf>,
    /// Depend on the published Stratus crates of this version (default:
    /// this tool's).
    #[arg(long, conflicts_with = "stratus_path")]
    stratus_version: Option<String>,
    /// Depend on a checkout of the Stratus workspace (its root) by path,
    /// with its lock file.
    #[arg(long)]
    stratus_path: Option<PathBuf>,
    /// The oldest Kubernetes minor the binary serves (`1.34` … `1.37`):
    /// the k8s-openapi feature it enables (`v1_34`, ...). Default: the
    /// newest (`latest`).
    #[arg(long)]
    kubernetes: Option<String>,
}

/// Run the command with `args` (the program's arguments after its name,
/// `stratus` first when Cargo runs it); `default` is where the crate takes
/// Stratus from unless `--stratus-version` or `--stratus-path` says. The
/// crate is written, formatted with `cargo fmt` where it can be, and the
/// next step printed.
pub fn run(args: &[String], default: Stratus) -> ExitCode {
    let args = match args.first().map(String::as_str) {
        Some("stratus") => &args[1..],
        _ => args,
    };
    let cli = match Cli::try_parse_from(
        std::iter::once("cargo stratus").chain(args.iter().map(String::as_str)),
    ) {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() {
                ExitCode::from(2)
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    let Command::New(new) = cli.command;
    let stratus = match (new.stratus_version, new.stratus_path) {
        (Some(version), _) => Stratus::Version(version),
        (None, Some(path)) => Stratus::Path(path),
        (None, None) => default,
    };
    let dir = new
        .path
        .unwrap_or_else(|| PathBuf::from(crate_name(new.kind, &new.name)));
    let made = files(new.kind, &new.name, &stratus, new.kubernetes.as_deref())
        .and_then(|files| write(&dir, &files));
    if let Err(e) = made {
        eprintln!("cargo stratus new: {e}");
        return ExitCode::FAILURE;
    }
    // Formatted for the name it was generated with (line widths depend on
    // it); a machine without rustfmt keeps the templates' layout.
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let formatted = std::process::Command::new(cargo)
        .arg("fmt")
        .current_dir(&dir)
        .status();
    if !formatted
        .as_ref()
        .is_ok_and(std::process::ExitStatus::success)
    {
        eprintln!(
            "cargo stratus new: `cargo fmt` did not run in {} ({formatted:?}); the files keep the templates' layout",
            dir.display()
        );
    }
    println!(
        "cargo stratus new: wrote {}\nnext: cd {} && cargo test   (the conformance test lists the methods left to write)",
        dir.display(),
        dir.display()
    );
    ExitCode::SUCCESS
}
