//! `stratus-demo [options]`: the demo, as `cargo xtask demo` runs it.

use clap::Parser;

fn main() -> std::process::ExitCode {
    let args = stratus_demo::Args::parse();
    match tokio::runtime::Runtime::new() {
        Ok(rt) => rt.block_on(stratus_demo::run(args)),
        Err(e) => {
            eprintln!("error: could not start the async runtime: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
