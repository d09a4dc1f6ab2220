//! `cargo stratus new --kind ccm|virtual-kubelet --name NAME`: write a
//! Stratus provider crate (see the library's docs).

use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    cargo_stratus::run(
        &args,
        cargo_stratus::Stratus::Version(env!("CARGO_PKG_VERSION").to_owned()),
    )
}
