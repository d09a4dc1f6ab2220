//! The default load-balancer name.

use k8s_openapi::api::core::v1::Service;

/// The longest name [`default_load_balancer_name`] returns, in bytes.
pub const MAX_DEFAULT_LOAD_BALANCER_NAME: usize = 32;

/// The default cloud name of a Service's load balancer (Go:
/// `DefaultLoadBalancerName`): `"a"` followed by the Service UID with its
/// dashes removed, cut to 32 bytes. The `"a"` makes the name start with a
/// letter (GCE); the cut keeps it under AWS's limit.
///
/// Go cuts at exactly 32 bytes. For the ASCII UIDs Kubernetes issues the
/// result is identical; a UID with multi-byte characters (never issued by a
/// real API server) is cut at the last character boundary at or below 32
/// bytes instead of splitting a character.
///
/// ```
/// use k8s_openapi::api::core::v1::Service;
/// use stratus_cloud::default_load_balancer_name;
///
/// let mut svc = Service::default();
/// svc.metadata.uid = Some("2f3b5c6e-1d2a-4b8f-9c0d-7e6f5a4b3c2d".into());
/// assert_eq!(default_load_balancer_name(&svc), "a2f3b5c6e1d2a4b8f9c0d7e6f5a4b3c2");
/// ```
pub fn default_load_balancer_name(service: &Service) -> String {
    let uid = service.metadata.uid.as_deref().unwrap_or_default();
    let mut name = String::with_capacity(1 + uid.len());
    name.push('a');
    name.extend(uid.chars().filter(|&c| c != '-'));
    if name.len() > MAX_DEFAULT_LOAD_BALANCER_NAME {
        let mut cut = MAX_DEFAULT_LOAD_BALANCER_NAME;
        while !name.is_char_boundary(cut) {
            cut -= 1;
        }
        name.truncate(cut);
    }
    name
}

#[cfg(test)]
mod tests {
    use super::*;

    fn svc(uid: Option<&str>) -> Service {
        let mut s = Service::default();
        s.metadata.uid = uid.map(str::to_owned);
        s
    }

    #[test]
    fn go_edge_cases() {
        // A standard UID: 32 hex digits + "a" = 33 bytes, cut to 32.
        assert_eq!(
            default_load_balancer_name(&svc(Some("12345678-1234-1234-1234-123456789abc"))),
            "a12345678123412341234123456789ab"
        );
        // No UID: just "a".
        assert_eq!(default_load_balancer_name(&svc(None)), "a");
        assert_eq!(default_load_balancer_name(&svc(Some(""))), "a");
        // Short UIDs are not padded.
        assert_eq!(default_load_balancer_name(&svc(Some("ab-cd"))), "aabcd");
        // Exactly 31 characters after removing dashes: 32 with the "a", kept whole.
        let uid31 = "x".repeat(31);
        assert_eq!(default_load_balancer_name(&svc(Some(&uid31))).len(), 32);
        // Only dashes.
        assert_eq!(default_load_balancer_name(&svc(Some("----"))), "a");
    }

    #[test]
    fn multibyte_uid_never_panics() {
        let uid = "é".repeat(40);
        let name = default_load_balancer_name(&svc(Some(&uid)));
        assert!(name.len() <= 32);
        assert_eq!(name.len(), 31);
        assert!(name.starts_with('a'));
    }
}
