//! `$(VAR)` expansion, as Kubernetes expands `command`, `args` and `env`
//! values.
//!
//! - `$(NAME)` is replaced by the value of `NAME` if it is defined, and left
//!   as written otherwise;
//! - `$$` is an escaped `$`: `$$(NAME)` yields the literal `$(NAME)`;
//! - a `$` followed by anything else, an unterminated `$(`, or a trailing `$`
//!   is kept as written.
//!
//! Unlike Go's byte-wise implementation, a `$` followed by a multi-byte
//! character keeps that character intact (Go turns its first byte into a
//! separate character and corrupts the text).

/// Expand `$(VAR)` references in `input`, looking names up with `lookup`.
///
/// ```
/// use stratus_pod::env::expand;
///
/// let lookup = |name: &str| (name == "HOME").then(|| "/root".to_string());
/// assert_eq!(expand("$(HOME)/bin", lookup), "/root/bin");
/// assert_eq!(expand("$$(HOME)", lookup), "$(HOME)");
/// assert_eq!(expand("$(UNDEFINED)", lookup), "$(UNDEFINED)");
/// assert_eq!(expand("cost: $5", lookup), "cost: $5");
/// ```
pub fn expand(input: &str, lookup: impl Fn(&str) -> Option<String>) -> String {
    let mut out = String::with_capacity(input.len());
    let mut rest = input;
    while let Some(pos) = rest.find('$') {
        out.push_str(&rest[..pos]);
        let after = &rest[pos + 1..];
        let mut chars = after.chars();
        match chars.next() {
            None => {
                // A trailing `$` is kept.
                out.push('$');
                rest = after;
            }
            Some('$') => {
                out.push('$');
                rest = &after[1..];
            }
            Some('(') => match after[1..].find(')') {
                Some(close) => {
                    let name = &after[1..1 + close];
                    match lookup(name) {
                        Some(value) => out.push_str(&value),
                        None => {
                            out.push_str("$(");
                            out.push_str(name);
                            out.push(')');
                        }
                    }
                    rest = &after[close + 2..];
                }
                None => {
                    out.push_str("$(");
                    rest = &after[1..];
                }
            },
            Some(c) => {
                out.push('$');
                out.push(c);
                rest = &after[c.len_utf8()..];
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    fn vars() -> BTreeMap<String, String> {
        BTreeMap::from([
            ("VAR_A".to_owned(), "A".to_owned()),
            ("VAR_B".to_owned(), "B".to_owned()),
            ("VAR_C".to_owned(), "C".to_owned()),
            ("VAR_REF".to_owned(), "$(VAR_A)".to_owned()),
            ("VAR_EMPTY".to_owned(), String::new()),
        ])
    }

    fn exp(input: &str) -> String {
        let v = vars();
        expand(input, |n| v.get(n).cloned())
    }

    // The cases of the Kubernetes expansion test table.
    #[test]
    fn kubernetes_table() {
        for (input, want) in [
            ("$(VAR_A)", "A"),
            ("___$(VAR_B)___", "___B___"),
            ("___$(VAR_C)", "___C"),
            ("$(VAR_A)-$(VAR_A)", "A-A"),
            ("$(VAR_A)-1", "A-1"),
            ("$(VAR_A)_$(VAR_B)_$(VAR_C)", "A_B_C"),
            ("$$(VAR_B)_$(VAR_A)", "$(VAR_B)_A"),
            ("$$(VAR_B)_$$(VAR_A)", "$(VAR_B)_$(VAR_A)"),
            ("f000-$$VAR_A", "f000-$VAR_A"),
            ("foo\\$(VAR_C)bar", "foo\\Cbar"),
            ("foo\\\\$(VAR_C)bar", "foo\\\\Cbar"),
            ("foo\\\\\\\\$(VAR_A)bar", "foo\\\\\\\\Abar"),
            ("$(VAR_A$(VAR_B))", "$(VAR_A$(VAR_B))"),
            ("$(VAR_A$(VAR_B)", "$(VAR_A$(VAR_B)"),
            ("$(VAR_REF)", "$(VAR_A)"),
            ("foo$$$(VAR_A)", "foo$A"),
            ("foo$$$$(VAR_A)", "foo$$(VAR_A)"),
            ("$$$$$$(BIG_MONEY)", "$$$(BIG_MONEY)"),
            ("$$$(VAR_A)", "$A"),
            ("$$$$", "$$"),
            ("$", "$"),
            ("$$", "$"),
            ("$(", "$("),
            ("$()", "$()"),
            ("$)", "$)"),
            ("$(VAR_EMPTY)", ""),
            ("$(UNKNOWN)", "$(UNKNOWN)"),
            ("foo$(", "foo$("),
            ("foo$(bar", "foo$(bar"),
            ("$(VAR_A)$", "A$"),
            ("$é", "$é"),
            ("", ""),
        ] {
            assert_eq!(exp(input), want, "input {input:?}");
        }
    }

    proptest! {
        #[test]
        fn text_without_dollar_is_unchanged(s in "[^$]*") {
            prop_assert_eq!(exp(&s), s);
        }

        #[test]
        fn never_panics_and_never_grows_without_definitions(s in "\\PC*") {
            let out = expand(&s, |_| None);
            prop_assert!(out.len() <= s.len());
        }

        #[test]
        fn escaped_references_are_literal(name in "[A-Z_]{1,12}") {
            let input = format!("$$({name})");
            prop_assert_eq!(exp(&input), format!("$({name})"));
        }

        #[test]
        fn defined_references_are_replaced(prefix in "[a-z ]{0,8}", value in "[^$]{0,16}") {
            let input = format!("{prefix}$(X){prefix}");
            let out = expand(&input, |n| (n == "X").then(|| value.clone()));
            prop_assert_eq!(out, format!("{prefix}{value}{prefix}"));
        }
    }
}
