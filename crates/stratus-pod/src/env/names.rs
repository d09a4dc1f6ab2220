//! Environment variable name validation.

/// True if `name` is a valid environment variable name under the strict
/// rules the virtual-kubelet applies (`[-._a-zA-Z][-._a-zA-Z0-9]*`, and not
/// `.`, `..` or starting with `..`).
///
/// ```
/// use stratus_pod::env::is_env_var_name;
///
/// assert!(is_env_var_name("MY_VAR"));
/// assert!(is_env_var_name("my.var-1"));
/// assert!(!is_env_var_name("1VAR"));
/// assert!(!is_env_var_name("..hidden"));
/// assert!(!is_env_var_name("A B"));
/// ```
pub fn is_env_var_name(name: &str) -> bool {
    let mut chars = name.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || matches!(c, '-' | '.' | '_'));
    first_ok
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_'))
        && name != "."
        && !name.starts_with("..")
}

/// True if `name` is valid under the relaxed rules Kubernetes 1.34+ applies
/// by default: any printable ASCII characters except `=`, at least one.
pub fn is_relaxed_env_var_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| (b' '..=b'~').contains(&b) && b != b'=')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strict_and_relaxed() {
        for ok in ["A", "_", "-", "a.b", ".a", "A_1-2.3"] {
            assert!(is_env_var_name(ok), "{ok}");
        }
        for bad in ["", ".", "..", "..a", "1A", "A=B", "A B", "é"] {
            assert!(!is_env_var_name(bad), "{bad}");
        }
        assert!(is_relaxed_env_var_name("1 A"));
        assert!(!is_relaxed_env_var_name("A=B"));
        assert!(!is_relaxed_env_var_name(""));
        assert!(!is_relaxed_env_var_name("é"));
    }
}
