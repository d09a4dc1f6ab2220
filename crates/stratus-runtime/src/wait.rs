//! Randomized waits, as apimachinery's `wait.Jitter`.
//!
//! ```
//! use std::time::Duration;
//! use stratus_runtime::wait::jitter;
//!
//! // Go's informer resync: between the minimum and twice it.
//! let period = jitter(Duration::from_secs(60), 1.0);
//! assert!(period >= Duration::from_secs(60) && period < Duration::from_secs(120));
//! ```
//!
//! Several managers started together (a DaemonSet, a rollout) should not
//! wake in step; a random stretch of each period keeps them apart. The
//! randomness is the standard library's per-process hash keys, which is
//! plenty for spreading timers and needs no random-number dependency.

use std::hash::{BuildHasher, RandomState};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// `period` stretched by a random factor in `[1, 1 + max_factor)`; a
/// `max_factor` of zero or less (or not a number) leaves it as it is.
///
/// ```
/// use std::time::Duration;
/// let d = stratus_runtime::wait::jitter(Duration::from_secs(2), 1.2);
/// assert!(d >= Duration::from_secs(2) && d < Duration::from_millis(4400));
/// assert_eq!(stratus_runtime::wait::jitter(Duration::from_secs(2), 0.0), Duration::from_secs(2));
/// ```
pub fn jitter(period: Duration, max_factor: f64) -> Duration {
    if max_factor.is_nan() || max_factor <= 0.0 {
        return period;
    }
    period.mul_f64(1.0 + max_factor * unit_random())
}

/// A number in `[0, 1)`, from a freshly keyed hasher (each
/// `RandomState::new()` has keys of its own) over the clock.
fn unit_random() -> f64 {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let bits = RandomState::new().hash_one(nanos);
    // The top 53 bits, as a double's mantissa holds them.
    (bits >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jitter_stays_in_range_and_varies() {
        let base = Duration::from_secs(10);
        let values: Vec<Duration> = (0..200).map(|_| jitter(base, 1.0)).collect();
        assert!(
            values
                .iter()
                .all(|d| *d >= base && *d < Duration::from_secs(20))
        );
        let distinct: std::collections::HashSet<_> = values.iter().collect();
        assert!(distinct.len() > 100, "{} distinct values", distinct.len());
    }

    #[test]
    fn no_or_bad_factor_leaves_the_period() {
        let base = Duration::from_millis(1500);
        for factor in [0.0, -1.0, f64::NAN] {
            assert_eq!(jitter(base, factor), base);
        }
    }
}
