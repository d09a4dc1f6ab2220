//! Go's duration syntax (`time.ParseDuration`), which the managers' and
//! the virtual kubelet's flags use: `5m`, `10s`, `1m30s`, `1.5h`, `500ms`, `0`.

use std::time::Duration;

/// Why a duration did not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid duration {0:?}: expected a number and a unit, such as 10s, 5m or 1m30s")]
pub struct DurationError(pub String);

/// Parse a Go duration; negative durations are refused.
///
/// ```
/// use std::time::Duration;
/// use stratus_runtime::duration::parse_go_duration;
///
/// assert_eq!(parse_go_duration("1m30s").unwrap(), Duration::from_secs(90));
/// assert_eq!(parse_go_duration("1.5h").unwrap(), Duration::from_secs(5400));
/// assert_eq!(parse_go_duration("250ms").unwrap(), Duration::from_millis(250));
/// assert_eq!(parse_go_duration("0").unwrap(), Duration::ZERO);
/// assert!(parse_go_duration("10").is_err());
/// assert!(parse_go_duration("-5s").is_err());
/// ```
pub fn parse_go_duration(s: &str) -> Result<Duration, DurationError> {
    let err = || DurationError(s.to_owned());
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    let mut rest = s.strip_prefix('+').unwrap_or(s);
    if rest.is_empty() {
        return Err(err());
    }
    let mut total = 0f64;
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(err)?;
        let (number, tail) = rest.split_at(number_len);
        if number.is_empty() || number == "." {
            return Err(err());
        }
        let value: f64 = number.parse().map_err(|_| err())?;
        let unit_len = tail
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(tail.len());
        let (unit, next) = tail.split_at(unit_len);
        let seconds = match unit {
            "ns" => 1e-9,
            "us" | "µs" | "μs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return Err(err()),
        };
        total += value * seconds;
        rest = next;
    }
    Duration::try_from_secs_f64(total).map_err(|_| err())
}
