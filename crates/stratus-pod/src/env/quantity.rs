//! Exact parsing of Kubernetes resource quantities (`500m`, `1Gi`, `1e3`),
//! enough for the downward API's `resourceFieldRef` arithmetic.

/// Why a quantity did not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$': {0:?}"
)]
pub struct QuantityError(pub String);

/// A parsed quantity: `mantissa × 10^exp10 × 2^exp2`, exactly.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParsedQuantity {
    mantissa: i128,
    exp10: i32,
    exp2: u32,
}

/// Digits kept in the mantissa; further fractional digits are rounded up
/// (away from zero), which never lowers a value rounded up afterwards.
const MAX_DIGITS: usize = 30;

impl ParsedQuantity {
    /// Parse a quantity string.
    ///
    /// ```
    /// use stratus_pod::env::ParsedQuantity;
    ///
    /// assert_eq!(ParsedQuantity::parse("500m").unwrap().milli_value(), 500);
    /// assert_eq!(ParsedQuantity::parse("1Gi").unwrap().value(), 1 << 30);
    /// assert_eq!(ParsedQuantity::parse("1.5").unwrap().value(), 2);
    /// assert_eq!(ParsedQuantity::parse("1e3").unwrap().value(), 1000);
    /// assert!(ParsedQuantity::parse("1Gb").is_err());
    /// ```
    pub fn parse(input: &str) -> Result<Self, QuantityError> {
        let err = || QuantityError(input.to_owned());
        let s = input.trim();
        if s.is_empty() {
            return Err(err());
        }
        let (negative, s) = match s.as_bytes()[0] {
            b'+' => (false, &s[1..]),
            b'-' => (true, &s[1..]),
            _ => (false, s),
        };
        let number_end = s
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(s.len());
        let (number, suffix) = s.split_at(number_end);
        if number.is_empty() || number == "." || number.matches('.').count() > 1 {
            return Err(err());
        }
        let (int_part, frac_part) = number.split_once('.').unwrap_or((number, ""));
        let (exp10_suffix, exp2) = parse_suffix(suffix).ok_or_else(err)?;

        let digits: String = format!("{int_part}{frac_part}");
        let digits = digits.trim_start_matches('0');
        let mut exp10 = exp10_suffix - i32::try_from(frac_part.len()).map_err(|_| err())?;
        let mut kept = digits;
        let mut round_up = false;
        if kept.len() > MAX_DIGITS {
            let (head, tail) = kept.split_at(MAX_DIGITS);
            round_up = tail.bytes().any(|b| b != b'0');
            exp10 += i32::try_from(tail.len()).map_err(|_| err())?;
            kept = head;
        }
        let mut mantissa: i128 = if kept.is_empty() {
            0
        } else {
            kept.parse().map_err(|_| err())?
        };
        if round_up {
            mantissa += 1;
        }
        if negative {
            mantissa = -mantissa;
        }
        Ok(Self {
            mantissa,
            exp10,
            exp2,
        })
    }

    /// The value scaled by `10^scale`, rounded away from zero and saturated
    /// to `i64` (Go: `ScaledValue(-scale)`).
    fn scaled(&self, scale: i32) -> i64 {
        if self.mantissa == 0 {
            return 0;
        }
        let negative = self.mantissa < 0;
        let mut magnitude = self.mantissa.unsigned_abs();
        let saturated = if negative { i64::MIN } else { i64::MAX };
        for _ in 0..self.exp2 {
            magnitude = match magnitude.checked_mul(2) {
                Some(m) => m,
                None => return saturated,
            };
        }
        let exp = i64::from(self.exp10) + i64::from(scale);
        if exp >= 0 {
            for _ in 0..exp {
                magnitude = match magnitude.checked_mul(10) {
                    Some(m) if m <= u128::from(u64::MAX) => m,
                    _ => return saturated,
                };
            }
        } else {
            let mut divisor: u128 = 1;
            for _ in 0..(-exp) {
                divisor = match divisor.checked_mul(10) {
                    Some(d) => d,
                    // The value is below one unit: it rounds to one.
                    None => return if negative { -1 } else { 1 },
                };
            }
            magnitude = magnitude.div_ceil(divisor);
        }
        match i64::try_from(magnitude) {
            Ok(v) if negative => -v,
            Ok(v) => v,
            Err(_) => saturated,
        }
    }

    /// The value in units, rounded up (Go: `Value()`).
    pub fn value(&self) -> i64 {
        self.scaled(0)
    }

    /// The value in thousandths, rounded up (Go: `MilliValue()`).
    pub fn milli_value(&self) -> i64 {
        self.scaled(3)
    }

    /// True if the quantity is zero.
    pub fn is_zero(&self) -> bool {
        self.mantissa == 0
    }
}

/// The decimal and binary exponents of a suffix.
fn parse_suffix(suffix: &str) -> Option<(i32, u32)> {
    Some(match suffix {
        "" => (0, 0),
        "n" => (-9, 0),
        "u" => (-6, 0),
        "m" => (-3, 0),
        "k" => (3, 0),
        "M" => (6, 0),
        "G" => (9, 0),
        "T" => (12, 0),
        "P" => (15, 0),
        "E" => (18, 0),
        "Ki" => (0, 10),
        "Mi" => (0, 20),
        "Gi" => (0, 30),
        "Ti" => (0, 40),
        "Pi" => (0, 50),
        "Ei" => (0, 60),
        _ => {
            let exp = suffix.strip_prefix(['e', 'E'])?;
            let digits = exp.strip_prefix(['+', '-']).unwrap_or(exp);
            if digits.is_empty() || digits.len() > 4 || !digits.bytes().all(|b| b.is_ascii_digit())
            {
                return None;
            }
            (exp.parse().ok()?, 0)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(s: &str) -> ParsedQuantity {
        ParsedQuantity::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    #[test]
    fn values_and_millis() {
        assert_eq!(q("1").milli_value(), 1000);
        assert_eq!(q("250m").milli_value(), 250);
        assert_eq!(q("250m").value(), 1);
        assert_eq!(q("0.1").milli_value(), 100);
        assert_eq!(q(".5").milli_value(), 500);
        assert_eq!(q("1.").value(), 1);
        assert_eq!(q("100n").milli_value(), 1);
        assert_eq!(q("128974848").value(), 128_974_848);
        assert_eq!(q("129e6").value(), 129_000_000);
        assert_eq!(q("129M").value(), 129_000_000);
        assert_eq!(q("123Mi").value(), 123 * 1024 * 1024);
        assert_eq!(q("1Ki").value(), 1024);
        assert_eq!(q("1E").value(), 1_000_000_000_000_000_000);
        assert_eq!(q("1e-3").milli_value(), 1);
        assert_eq!(q("1E3").value(), 1000);
        assert_eq!(q("0").value(), 0);
        assert_eq!(q("-1").value(), -1);
        assert_eq!(q("-1.5").value(), -2);
        assert_eq!(q("+2").value(), 2);
        assert_eq!(q("00001").value(), 1);
    }

    #[test]
    fn saturates_instead_of_overflowing() {
        assert_eq!(q("100Ei").value(), i64::MAX);
        assert_eq!(q("1e300").value(), i64::MAX);
        assert_eq!(q("1e-300").value(), 1);
        assert_eq!(
            q("123456789012345678901234567890123456789").value(),
            i64::MAX
        );
        assert_eq!(
            q("0.0000000000000000000000000000000000001").milli_value(),
            1
        );
    }

    #[test]
    fn garbage_is_an_error() {
        for bad in [
            "", "m", "1.2.3", "1Gb", "1ki", "e3", "1e", "1e+", "--1", "1 Gi", "abc", "1e99999",
        ] {
            assert!(ParsedQuantity::parse(bad).is_err(), "{bad}");
        }
    }
}
