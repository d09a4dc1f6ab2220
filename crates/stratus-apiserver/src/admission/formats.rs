//! The string `format`s kube-apiserver checks in custom resource schemas
//! (go-openapi's strfmt registry): a value of a known format that does
//! not parse is invalid; unknown formats are not checked.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use base64::Engine as _;

fn all_hex(s: &str) -> bool {
    s.chars().all(|c| c.is_ascii_hexdigit())
}

fn uuid(s: &str) -> bool {
    let groups: Vec<&str> = s.split('-').collect();
    groups.len() == 5
        && groups.iter().map(|g| g.len()).eq([8, 4, 4, 4, 12])
        && groups.iter().all(|g| all_hex(g))
}

fn uuid_version(s: &str, version: char) -> bool {
    uuid(s) && s.chars().nth(14).is_some_and(|c| c == version)
}

fn hostname(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s.trim_end_matches('.').split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
}

fn cidr(s: &str) -> bool {
    let Some((ip, bits)) = s.split_once('/') else {
        return false;
    };
    let Ok(bits) = bits.parse::<u8>() else {
        return false;
    };
    match ip.parse::<IpAddr>() {
        Ok(IpAddr::V4(_)) => bits <= 32,
        Ok(IpAddr::V6(_)) => bits <= 128,
        Err(_) => false,
    }
}

fn date(s: &str) -> bool {
    let parts: Vec<&str> = s.split('-').collect();
    matches!(parts.as_slice(), [y, m, d]
        if y.len() == 4 && m.len() == 2 && d.len() == 2
            && [y, m, d].iter().all(|p| p.chars().all(|c| c.is_ascii_digit()))
            && (1..=12).contains(&m.parse::<u32>().unwrap_or(0))
            && (1..=31).contains(&d.parse::<u32>().unwrap_or(0)))
}

fn duration(s: &str) -> bool {
    // Go's time.ParseDuration: a sign, then numbers with units.
    let s = s.strip_prefix(['-', '+']).unwrap_or(s);
    if s == "0" {
        return true;
    }
    let mut rest = s;
    let mut any = false;
    while !rest.is_empty() {
        let number = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        if number == 0 {
            return false;
        }
        rest = &rest[number..];
        let unit = ["ns", "us", "µs", "ms", "s", "m", "h"]
            .iter()
            .filter(|u| rest.starts_with(**u))
            .max_by_key(|u| u.len());
        let Some(unit) = unit else { return false };
        rest = &rest[unit.len()..];
        any = true;
    }
    any
}

/// Whether `s` is of `format`; `None` for a format that is not checked.
pub(crate) fn conforms(format: &str, s: &str) -> Option<bool> {
    Some(match format {
        "date-time" | "datetime" => s.parse::<k8s_openapi::jiff::Timestamp>().is_ok(),
        "date" => date(s),
        "duration" => duration(s),
        "byte" => base64::engine::general_purpose::STANDARD.decode(s).is_ok(),
        "uuid" => uuid(s),
        "uuid3" => uuid_version(s, '3'),
        "uuid4" => uuid_version(s, '4'),
        "uuid5" => uuid_version(s, '5'),
        "ipv4" => s.parse::<Ipv4Addr>().is_ok(),
        "ipv6" => s.parse::<Ipv6Addr>().is_ok(),
        "cidr" => cidr(s),
        "hostname" => hostname(s),
        "mac" => {
            let parts: Vec<&str> = s.split([':', '-']).collect();
            matches!(parts.len(), 6 | 8 | 20) && parts.iter().all(|p| p.len() == 2 && all_hex(p))
        }
        "email" => s
            .split_once('@')
            .is_some_and(|(user, host)| !user.is_empty() && hostname(host)),
        "hexcolor" => s.len() == 7 && s.starts_with('#') && all_hex(&s[1..]),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::conforms;

    #[test]
    fn known_formats() {
        let good = [
            ("date-time", "2026-11-25T13:00:00Z"),
            ("date", "2026-11-25"),
            ("duration", "1h30m"),
            ("byte", "aGk="),
            ("uuid", "6f1c9a52-3b1e-4c8e-9f7a-0d2b5e8c1a44"),
            ("uuid4", "6f1c9a52-3b1e-4c8e-9f7a-0d2b5e8c1a44"),
            ("ipv4", "10.0.0.1"),
            ("ipv6", "fd00::1"),
            ("cidr", "10.0.0.0/8"),
            ("hostname", "node-1.example.com"),
            ("mac", "00:1a:2b:3c:4d:5e"),
            ("email", "ops@example.com"),
            ("hexcolor", "#a0b1c2"),
        ];
        for (format, value) in good {
            assert_eq!(conforms(format, value), Some(true), "{format} {value}");
        }
        let bad = [
            ("date-time", "yesterday"),
            ("date", "2026-13-01"),
            ("duration", "5 minutes"),
            ("byte", "not base64!"),
            ("uuid", "6f1c9a52"),
            ("uuid3", "6f1c9a52-3b1e-4c8e-9f7a-0d2b5e8c1a44"),
            ("ipv4", "10.0.0.300"),
            ("ipv6", "10.0.0.1"),
            ("cidr", "10.0.0.0/33"),
            ("hostname", "-bad-.example"),
            ("mac", "00:1a"),
            ("email", "nobody"),
            ("hexcolor", "red"),
        ];
        for (format, value) in bad {
            assert_eq!(conforms(format, value), Some(false), "{format} {value}");
        }
        assert_eq!(conforms("int32", "x"), None);
        assert_eq!(conforms("my-format", "x"), None);
    }
}
