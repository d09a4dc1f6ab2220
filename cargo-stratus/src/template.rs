//! The templates of each kind (`templates/<kind>/` and `templates/common/`,
//! built into the binary), and how they are filled.

use crate::{Kind, NewError};

/// The template files of `kind`, as `(path in the new crate, text)`: its
/// own, then those of both kinds. A template manifest is
/// `Cargo.toml.template`, so that Cargo does not take the templates'
/// folders for packages of their own.
pub(crate) fn templates(kind: Kind) -> Vec<(&'static str, &'static str)> {
    macro_rules! files {
        ($dir:literal: $($file:literal),* $(,)?) => {
            [$(($file, include_str!(concat!("../templates/", $dir, "/", $file)))),*]
        };
    }
    let mut all: Vec<(&str, &str)> = match kind {
        Kind::Ccm => {
            let mut own = vec![(
                "Cargo.toml",
                include_str!("../templates/ccm/Cargo.toml.template"),
            )];
            own.extend(files!("ccm":
                "README.md", "src/main.rs", "src/lib.rs", "src/instances.rs",
                "src/load_balancer.rs", "src/routes.rs", "tests/conformance.rs", "tests/manager.rs",
                "tests/e2e.rs",
            ));
            own
        }
        Kind::VirtualKubelet => {
            let mut own = vec![(
                "Cargo.toml",
                include_str!("../templates/virtual-kubelet/Cargo.toml.template"),
            )];
            own.extend(files!("virtual-kubelet":
                "README.md", "src/main.rs", "src/lib.rs", "tests/conformance.rs",
                "tests/node.rs", "tests/e2e.rs",
            ));
            own
        }
    };
    all.extend(files!("common":
        "src/config.rs", "Dockerfile", ".gitignore", ".github/workflows/ci.yml",
    ));
    all
}

/// Why a name cannot be a provider's.
pub(crate) fn check_name(name: &str) -> Result<(), NewError> {
    let ok = (2..=40).contains(&name.len())
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name.ends_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !name.contains("--");
    if ok {
        Ok(())
    } else {
        Err(NewError::Name(name.to_owned()))
    }
}

/// `acme-cloud` → `AcmeCloud`.
pub(crate) fn type_name(name: &str) -> String {
    name.split('-')
        .map(|part| {
            let mut chars = part.chars();
            chars.next().map_or_else(String::new, |first| {
                first.to_ascii_uppercase().to_string() + chars.as_str()
            })
        })
        .collect()
}

/// Replace every `{{key}}`; a placeholder left over is an error.
pub(crate) fn render(
    template: &str,
    values: &[(&str, String)],
    file: &str,
) -> Result<String, NewError> {
    let mut text = template.to_owned();
    for (key, value) in values {
        text = text.replace(&format!("{{{{{key}}}}}"), value);
    }
    match text.find("{{") {
        Some(at) => Err(NewError::Placeholder {
            file: file.to_owned(),
            at: text[at..].chars().take(30).collect(),
        }),
        None => Ok(text),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_dns_labels() {
        for good in ["acme", "acme-cloud", "a1"] {
            assert!(check_name(good).is_ok(), "{good}");
        }
        for bad in [
            "",
            "a",
            "Acme",
            "1acme",
            "acme-",
            "ac--me",
            "acme_cloud",
            "acme.cloud",
        ] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
        assert_eq!(type_name("acme-cloud"), "AcmeCloud");
        assert_eq!(type_name("x1"), "X1");
    }

    #[test]
    fn a_placeholder_nothing_fills_is_an_error() {
        assert!(matches!(
            render("a {{nope}} b", &[], "x"),
            Err(NewError::Placeholder { .. })
        ));
        assert_eq!(
            render("{{a}}-{{a}}", &[("a", "b".into())], "x").unwrap(),
            "b-b"
        );
    }
}
