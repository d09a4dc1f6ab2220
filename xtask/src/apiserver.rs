//! `cargo xtask apiserver`: the harness API server in the foreground.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use stratus_testing::ApiServer;

/// Run the in-memory API server until SIGINT or SIGTERM.
#[derive(Debug, Parser)]
#[command(name = "cargo xtask apiserver")]
pub(crate) struct Args {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:6443")]
    addr: SocketAddr,
    /// Where to write a kubeconfig for kubectl.
    #[arg(long, default_value = "target/stratus.kubeconfig")]
    kubeconfig: PathBuf,
    /// Serve HTTPS with a self-signed CA (written into the kubeconfig).
    #[arg(long)]
    tls: bool,
}

pub(crate) async fn run(args: Args) -> ExitCode {
    let mut builder = ApiServer::builder().bind(args.addr);
    if args.tls {
        builder = builder.tls();
    }
    let server = match builder.start().await {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    if let Some(parent) = args
        .kubeconfig
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        && let Err(e) = std::fs::create_dir_all(parent)
    {
        eprintln!("error: could not create {}: {e}", parent.display());
        return ExitCode::FAILURE;
    }
    if let Err(e) = server.write_kubeconfig(&args.kubeconfig) {
        eprintln!("error: {e}");
        return ExitCode::FAILURE;
    }
    println!("stratus in-memory API server listening on {}", server.url());
    println!("kubeconfig written to {}", args.kubeconfig.display());
    println!(
        "try: kubectl --kubeconfig {} get namespaces",
        args.kubeconfig.display()
    );
    crate::wait_for_signal().await;
    println!("shutting down");
    server.shutdown().await;
    ExitCode::SUCCESS
}
