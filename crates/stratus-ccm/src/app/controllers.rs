//! `--controllers`: which controllers run (`*`, `name`, `-name`, aliases),
//! with Go's `IsControllerEnabled` rule.

use stratus_cloud::names::ControllerNames;

/// A controller the manager knows: its names and whether `*` includes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KnownController {
    /// Its names (canonical, alias).
    pub names: ControllerNames,
    /// Left out of `*` (it must be named to run).
    pub disabled_by_default: bool,
}

/// An unknown name in `--controllers`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("--controllers: {0:?} is not a known controller (known: {1})")]
pub struct UnknownController(pub String, pub String);

/// The `--controllers` entries with aliases replaced by canonical names
/// (`*` and `-name` kept), or the first unknown name.
pub fn canonicalize(
    entries: &[String],
    known: &[KnownController],
) -> Result<Vec<String>, UnknownController> {
    let lookup = |name: &str| {
        known
            .iter()
            .find(|k| k.names.canonical == name || k.names.alias == name)
            .map(|k| k.names.canonical.to_owned())
    };
    let all = || {
        known
            .iter()
            .map(|k| k.names.canonical)
            .collect::<Vec<_>>()
            .join(", ")
    };
    entries
        .iter()
        .map(|e| e.trim())
        .filter(|e| !e.is_empty())
        .map(|entry| {
            if entry == "*" {
                return Ok("*".to_owned());
            }
            let (minus, name) = match entry.strip_prefix('-') {
                Some(n) => ("-", n),
                None => ("", entry),
            };
            lookup(name)
                .map(|c| format!("{minus}{c}"))
                .ok_or_else(|| UnknownController(entry.to_owned(), all()))
        })
        .collect()
}

/// Whether `controller` runs under the canonical `entries` (Go's
/// `IsControllerEnabled`): named → yes; `-named` → no; otherwise `*`
/// includes it unless it is disabled by default.
pub fn is_enabled(controller: &KnownController, entries: &[String]) -> bool {
    let name = controller.names.canonical;
    let mut star = false;
    for entry in entries {
        if entry == name {
            return true;
        }
        if entry.strip_prefix('-') == Some(name) {
            return false;
        }
        if entry == "*" {
            star = true;
        }
    }
    star && !controller.disabled_by_default
}

/// The canonical names of the controllers that run, in `known` order (the
/// start order).
pub fn enabled(known: &[KnownController], entries: &[String]) -> Vec<&'static str> {
    known
        .iter()
        .filter(|k| is_enabled(k, entries))
        .map(|k| k.names.canonical)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use stratus_cloud::names::controllers;

    fn known() -> Vec<KnownController> {
        let mut k: Vec<KnownController> = controllers::DEFAULT
            .iter()
            .map(|n| KnownController {
                names: *n,
                disabled_by_default: false,
            })
            .collect();
        k.push(KnownController {
            names: controllers::NODE_IPAM,
            disabled_by_default: true,
        });
        k
    }

    fn entries(s: &[&str]) -> Vec<String> {
        canonicalize(
            &s.iter().map(|e| e.to_string()).collect::<Vec<_>>(),
            &known(),
        )
        .unwrap()
    }

    #[test]
    fn star_minus_and_aliases() {
        let k = known();
        let all = enabled(&k, &entries(&["*"]));
        assert!(all.contains(&"cloud-node-controller"));
        assert!(!all.contains(&"nodeipam"), "disabled by default");
        let some = enabled(&k, &entries(&["*", "-route", "node-ipam"]));
        assert!(!some.contains(&controllers::NODE_ROUTE.canonical));
        assert!(some.contains(&"nodeipam"));
        assert_eq!(
            enabled(&k, &entries(&["cloud-node"])),
            ["cloud-node-controller"]
        );
        assert!(
            enabled(&k, &entries(&[])).is_empty(),
            "no star, nothing named"
        );
    }

    #[test]
    fn unknown_names_are_errors() {
        let err = canonicalize(&["*".into(), "-nope".into()], &known()).unwrap_err();
        assert_eq!(err.0, "-nope");
        assert!(err.to_string().contains("cloud-node-controller"));
    }
}
