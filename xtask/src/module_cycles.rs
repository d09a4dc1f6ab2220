//! `cargo xtask module-cycles`: fails when the source files of a crate
//! import each other in a cycle.
//!
//! Each file under a crate's `src/` is a module (`mod.rs`, `lib.rs` and
//! `main.rs` stand for their folder; `src/bin/` is left out). A module
//! depends on another when its text names it by a path from the crate root
//! (`crate::storage::store::Store`, or `use crate::{a, b::c}`) or from a
//! parent (`super::plan::Launch`); a path names the longest module it
//! starts with, and a module's own children are not counted as
//! dependencies. Inline test modules (from the first `#[cfg(test)]` before a
//! `mod`) are left out: tests may reach anywhere. Doc links count, as rustdoc
//! resolves them.
//!
//! Every strongly connected set of more than one module is a cycle; the task
//! prints each (its modules, and each module's arrows inside it) and fails
//! if there is any. It reads the workspace's crates (`crates/*`,
//! `examples/*`, `xtask` and `cargo-stratus`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// A module: its path from the crate root (empty for the root).
type Module = Vec<String>;

/// A cycle: each of its modules, and the modules of the cycle it imports.
type Cycle = Vec<(Module, Vec<String>)>;

/// Where the crates are, relative to the workspace root.
const CRATE_FOLDERS: &[&str] = &["crates", "examples", "tools"];

/// `cargo xtask module-cycles [ROOT]`.
pub(crate) fn run(args: &[String]) -> ExitCode {
    let root = match args {
        [] => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".."),
        [root] => PathBuf::from(root),
        _ => {
            eprintln!("usage: cargo xtask module-cycles [WORKSPACE_ROOT]");
            return ExitCode::from(2);
        }
    };
    let crates = match crate_sources(&root) {
        Ok(crates) => crates,
        Err(e) => {
            eprintln!("module-cycles: cannot read {}: {e}", root.display());
            return ExitCode::FAILURE;
        }
    };
    let mut total = 0;
    for (name, src) in &crates {
        let cycles = match crate_cycles(src) {
            Ok(cycles) => cycles,
            Err(e) => {
                eprintln!("module-cycles: cannot read {}: {e}", src.display());
                return ExitCode::FAILURE;
            }
        };
        for cycle in &cycles {
            println!("{name}: a cycle of {} modules", cycle.len());
            for (module, targets) in cycle {
                println!("  {} -> {}", show(module), targets.join(", "));
            }
        }
        total += cycles.len();
    }
    println!("module-cycles: {total} cycle(s) in {} crates", crates.len());
    if total == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

fn show(module: &Module) -> String {
    if module.is_empty() {
        "(root)".to_owned()
    } else {
        module.join("/")
    }
}

/// Each crate of the workspace with a `src/` folder: its folder's name and
/// its `src/`.
fn crate_sources(root: &Path) -> std::io::Result<Vec<(String, PathBuf)>> {
    let mut out = Vec::new();
    for folder in CRATE_FOLDERS {
        let dir = root.join(folder);
        if !dir.is_dir() {
            continue;
        }
        for entry in std::fs::read_dir(&dir)? {
            let path = entry?.path();
            if path.join("src").is_dir() {
                out.push((file_name(&path), path.join("src")));
            }
        }
    }
    for tool in ["xtask", "cargo-stratus"] {
        if root.join(tool).join("src").is_dir() {
            out.push((tool.to_owned(), root.join(tool).join("src")));
        }
    }
    out.sort();
    Ok(out)
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// A crate's cycles: for each, its modules and each one's targets inside it.
pub(crate) fn crate_cycles(src: &Path) -> std::io::Result<Vec<Cycle>> {
    let files = modules(src)?;
    let mut graph: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
    for (module, path) in &files {
        let text = std::fs::read_to_string(path)?;
        graph.insert(module.clone(), edges(module, without_tests(&text), &files));
    }
    let mut cycles = Vec::new();
    for component in strongly_connected(&graph) {
        if component.len() < 2 {
            continue;
        }
        let members: BTreeSet<&Module> = component.iter().collect();
        let mut cycle: Cycle = component
            .iter()
            .map(|m| {
                let targets = graph[m]
                    .iter()
                    .filter(|t| members.contains(t))
                    .map(show)
                    .collect();
                (m.clone(), targets)
            })
            .collect();
        cycle.sort();
        cycles.push(cycle);
    }
    Ok(cycles)
}

/// Every `.rs` file under `src` as a module, `src/bin/` left out.
fn modules(src: &Path) -> std::io::Result<BTreeMap<Module, PathBuf>> {
    let mut out = BTreeMap::new();
    let mut folders = vec![src.to_path_buf()];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder)? {
            let path = entry?.path();
            if path.is_dir() {
                folders.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let Ok(relative) = path
                .with_extension("")
                .strip_prefix(src)
                .map(Path::to_path_buf)
            else {
                continue;
            };
            let mut module: Module = relative
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            if module
                .last()
                .is_some_and(|last| matches!(last.as_str(), "mod" | "lib" | "main"))
            {
                module.pop();
            }
            if module.first().is_some_and(|first| first == "bin") {
                continue;
            }
            out.insert(module, path);
        }
    }
    Ok(out)
}

/// `text` before its first `#[cfg(test)]` that opens a `mod`.
fn without_tests(text: &str) -> &str {
    match text.find("#[cfg(test)]\nmod ") {
        Some(at) => &text[..at],
        None => text,
    }
}

/// The longest prefix of `path` that is a module.
fn resolve(path: &[String], files: &BTreeMap<Module, PathBuf>) -> Option<Module> {
    (1..=path.len())
        .rev()
        .map(|n| path[..n].to_vec())
        .find(|prefix| files.contains_key(prefix))
}

/// The identifier characters from the start of `text`.
fn ident(text: &str) -> &str {
    let end = text
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(text.len());
    &text[..end]
}

/// The path `a::b::c` at the start of `text` (after a leading `::`), as
/// its segments.
fn path_after(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(after) = rest.strip_prefix("::") {
        let segment = ident(after);
        if segment.is_empty() {
            break;
        }
        out.push(segment.to_owned());
        rest = &after[segment.len()..];
    }
    out
}

/// Whether the byte before `at` can end an identifier (then `at` does not
/// start a word).
fn in_word(text: &str, at: usize) -> bool {
    text[..at]
        .chars()
        .next_back()
        .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The modules `module`'s text depends on.
fn edges(module: &Module, text: &str, files: &BTreeMap<Module, PathBuf>) -> BTreeSet<Module> {
    let mut out = BTreeSet::new();
    let add = |target: Option<Module>, out: &mut BTreeSet<Module>| {
        if let Some(t) = target
            && !t.is_empty()
            && t != *module
        {
            out.insert(t);
        }
    };
    // `crate::a::b`, and `use crate::{a, b::c}`.
    for (at, _) in text.match_indices("crate::") {
        if in_word(text, at) {
            continue;
        }
        let after = &text[at + "crate".len()..];
        let path = path_after(after);
        if !path.is_empty() {
            add(resolve(&path, files), &mut out);
        } else if let Some(group) = after.strip_prefix("::{") {
            let group = &group[..group.find("};").unwrap_or(group.len())];
            for part in group.split(',') {
                let part = part.split(" as ").next().unwrap_or_default();
                let part = part.trim_matches(|c: char| c == '{' || c == '}' || c.is_whitespace());
                let path: Vec<String> = part.split("::").map(str::to_owned).collect();
                if !part.is_empty() {
                    add(resolve(&path, files), &mut out);
                }
            }
        }
    }
    // `super::x`, `super::super::x`: relative to the module's parents; the
    // module's own children are not dependencies.
    for (at, _) in text.match_indices("super::") {
        if in_word(text, at) || text[..at].ends_with("super::") {
            continue;
        }
        let mut rest = &text[at..];
        let mut ups = 0;
        while let Some(after) = rest.strip_prefix("super::") {
            ups += 1;
            rest = after;
        }
        let path = path_after(&format!("::{rest}"));
        if path.is_empty() {
            continue;
        }
        let base = module[..module.len().saturating_sub(ups)].to_vec();
        let target = resolve(&[base, path].concat(), files);
        if target.as_ref().is_some_and(|t| t.starts_with(module)) {
            continue;
        }
        add(target, &mut out);
    }
    out
}

/// The strongly connected components of `graph` (Tarjan's algorithm,
/// iterative).
fn strongly_connected(graph: &BTreeMap<Module, BTreeSet<Module>>) -> Vec<Vec<Module>> {
    let nodes: Vec<&Module> = graph.keys().collect();
    let index_of: BTreeMap<&Module, usize> =
        nodes.iter().enumerate().map(|(i, m)| (*m, i)).collect();
    let successors: Vec<Vec<usize>> = nodes
        .iter()
        .map(|m| {
            graph[*m]
                .iter()
                .filter_map(|t| index_of.get(t).copied())
                .collect()
        })
        .collect();
    let n = nodes.len();
    let mut index = vec![usize::MAX; n];
    let mut low = vec![0; n];
    let mut on_stack = vec![false; n];
    let mut stack = Vec::new();
    let mut next = 0;
    let mut out = Vec::new();
    for start in 0..n {
        if index[start] != usize::MAX {
            continue;
        }
        // (node, position in its successors)
        let mut work = vec![(start, 0)];
        index[start] = next;
        low[start] = next;
        next += 1;
        stack.push(start);
        on_stack[start] = true;
        while let Some(top) = work.last_mut() {
            let v = top.0;
            if let Some(&w) = successors[v].get(top.1) {
                top.1 += 1;
                if index[w] == usize::MAX {
                    index[w] = next;
                    low[w] = next;
                    next += 1;
                    stack.push(w);
                    on_stack[w] = true;
                    work.push((w, 0));
                } else if on_stack[w] {
                    low[v] = low[v].min(index[w]);
                }
                continue;
            }
            work.pop();
            if let Some(&(parent, _)) = work.last() {
                low[parent] = low[parent].min(low[v]);
            }
            if low[v] == index[v] {
                let mut component = Vec::new();
                while let Some(w) = stack.pop() {
                    on_stack[w] = false;
                    component.push(nodes[w].clone());
                    if w == v {
                        break;
                    }
                }
                out.push(component);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A crate's `src/` in a temporary folder, removed when dropped.
    struct Tree(PathBuf);

    impl Drop for Tree {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    /// A tree of `(path, text)` files.
    fn crate_of(files: &[(&str, &str)]) -> Tree {
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("module-cycles-{}-{n}", std::process::id()));
        for (path, text) in files {
            let path = dir.join(path);
            std::fs::create_dir_all(path.parent().expect("a parent")).expect("folders");
            std::fs::write(path, text).expect("a file");
        }
        Tree(dir)
    }

    fn cycle_names(tree: &Tree) -> Vec<Vec<String>> {
        crate_cycles(&tree.0)
            .expect("readable")
            .into_iter()
            .map(|c| c.into_iter().map(|(m, _)| show(&m)).collect())
            .collect()
    }

    #[test]
    fn modules_that_import_each_other_are_a_cycle() {
        let dir = crate_of(&[
            ("lib.rs", "mod a;\nmod b;\n"),
            ("a.rs", "use crate::b::Thing;\n"),
            ("b/mod.rs", "pub struct Thing;\nuse super::a::Other;\n"),
        ]);
        assert_eq!(
            cycle_names(&dir),
            vec![vec!["a".to_owned(), "b".to_owned()]]
        );
    }

    #[test]
    fn grouped_uses_and_super_paths_are_arrows() {
        let dir = crate_of(&[
            ("lib.rs", "mod store;\nmod net;\n"),
            ("store/mod.rs", "mod disk;\n"),
            ("store/disk.rs", "fn f() { super::super::net::send(); }\n"),
            ("net.rs", "use crate::{store::disk, other};\n"),
        ]);
        assert_eq!(
            cycle_names(&dir),
            vec![vec!["net".to_owned(), "store/disk".to_owned()]]
        );
    }

    #[test]
    fn one_way_arrows_children_and_tests_are_no_cycle() {
        let dir = crate_of(&[
            ("lib.rs", "mod a;\nmod b;\n"),
            (
                "a/mod.rs",
                "mod inner;\nuse crate::b::X;\nfn f() { self::inner::g(); }\n",
            ),
            ("a/inner.rs", "use super::super::b::Y;\n"),
            (
                "b.rs",
                "pub struct X;\nmy_crate::a::nothing();\n#[cfg(test)]\nmod tests {\n    use crate::a::inner;\n}\n",
            ),
        ]);
        assert!(cycle_names(&dir).is_empty());
    }
}
