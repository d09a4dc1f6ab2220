//! Files the tasks generate into the repository: written, or with
//! `--check` compared with what is committed (CI fails on a difference).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// The workspace root, whatever directory the task runs from.
pub(crate) fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The files (relative to the workspace root) whose content differs from
/// `files`.
pub(crate) fn stale(files: &[(PathBuf, String)]) -> Vec<String> {
    let root = root();
    files
        .iter()
        .filter(|(path, text)| std::fs::read_to_string(root.join(path)).ok().as_ref() != Some(text))
        .map(|(path, _)| path.display().to_string())
        .collect()
}

/// `cargo xtask <task> [--check]`: write the files `render` makes, or check
/// them.
pub(crate) fn write_or_check(
    task: &str,
    args: &[String],
    render: impl FnOnce() -> Result<Vec<(PathBuf, String)>, String>,
) -> ExitCode {
    let check = match args {
        [] => false,
        [flag] if flag == "--check" => true,
        _ => {
            eprintln!("usage: cargo xtask {task} [--check]");
            return ExitCode::from(2);
        }
    };
    let files = match render() {
        Ok(files) => files,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    if check {
        let stale = stale(&files);
        if stale.is_empty() {
            println!("{task}: up to date");
            return ExitCode::SUCCESS;
        }
        eprintln!("stale: {}; run `cargo xtask {task}`", stale.join(", "));
        return ExitCode::FAILURE;
    }
    let root = root();
    for (path, text) in &files {
        let full = root.join(path);
        let written = full
            .parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|()| std::fs::write(&full, text));
        if let Err(e) = written {
            eprintln!("error: {}: {e}", path.display());
            return ExitCode::FAILURE;
        }
        println!("wrote {}", path.display());
    }
    ExitCode::SUCCESS
}
