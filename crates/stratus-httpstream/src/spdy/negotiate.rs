//! Which `X-Stream-Protocol-Version` a SPDY upgrade speaks.

/// The `X-Stream-Protocol-Version`s exec and attach accept, newest first.
pub const REMOTE_COMMAND_VERSIONS: &[&str] = &[
    "v5.channel.k8s.io",
    "v4.channel.k8s.io",
    "v3.channel.k8s.io",
    "v2.channel.k8s.io",
    "channel.k8s.io",
];

/// The `X-Stream-Protocol-Version` of port-forward.
pub const PORT_FORWARD_VERSION: &str = "portforward.k8s.io";

/// Pick the client's first offered version the server supports; `None`
/// when nothing offered is supported. No offer at all means the original
/// protocol (`channel.k8s.io`), answered without a version header.
///
/// ```
/// use stratus_httpstream::spdy::{negotiate, REMOTE_COMMAND_VERSIONS};
/// assert_eq!(negotiate(&["v4.channel.k8s.io,v5.channel.k8s.io"], REMOTE_COMMAND_VERSIONS), Some(Some("v4.channel.k8s.io")));
/// assert_eq!(negotiate(&[], REMOTE_COMMAND_VERSIONS), Some(None));
/// assert_eq!(negotiate(&["v9"], REMOTE_COMMAND_VERSIONS), None);
/// ```
pub fn negotiate(offered: &[&str], supported: &[&'static str]) -> Option<Option<&'static str>> {
    let offers = crate::wsstream::offers(offered);
    if offers.is_empty() {
        return Some(None);
    }
    offers
        .iter()
        .find_map(|o| supported.iter().find(|s| *s == o))
        .map(|s| Some(*s))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_forward_version() {
        assert_eq!(
            negotiate(&["portforward.k8s.io"], &[PORT_FORWARD_VERSION]),
            Some(Some(PORT_FORWARD_VERSION))
        );
        assert_eq!(
            negotiate(&["v4.channel.k8s.io"], &[PORT_FORWARD_VERSION]),
            None
        );
    }
}
