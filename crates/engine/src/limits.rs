//! The checked parsers and ranges that the CLI and the daemon's API share, so that both
//! apply the same rules to durations, sizes and snap lengths, and no number a user types
//! can panic or overflow.

use std::time::Duration;

/// Longest duration accepted anywhere: ten years.
pub const MAX_SECONDS: f64 = 10.0 * 365.0 * 86_400.0;
/// Snap lengths accepted by capture and by requests.
pub const SNAPLEN: std::ops::RangeInclusive<u32> = 16..=262_144;

/// A value outside its range, with a message for the user.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct LimitError(pub String);

/// Seconds (with a fraction) as a duration: finite, above 0 and at most ten years.
pub fn seconds(v: f64, what: &str) -> Result<Duration, LimitError> {
    if !(v.is_finite() && v > 0.0) {
        return Err(LimitError(format!(
            "{what} must be a number of seconds above 0 (got {v})"
        )));
    }
    if v > MAX_SECONDS {
        return Err(LimitError(format!(
            "{what} of {v} s is more than ten years"
        )));
    }
    Duration::try_from_secs_f64(v).map_err(|e| LimitError(format!("{what}: {e}")))
}

/// A size such as `500M`, `20G`, `1048576` (K, M, G, T are powers of 1024).
pub fn size(s: &str, what: &str) -> Result<u64, LimitError> {
    let t = s.trim();
    let bad = || LimitError(format!("{what}: bad size '{s}' (e.g. 500M, 20G)"));
    let (num, mult) = match t.chars().last().map(|c| c.to_ascii_uppercase()) {
        Some('K') => (&t[..t.len() - 1], 1u64 << 10),
        Some('M') => (&t[..t.len() - 1], 1 << 20),
        Some('G') => (&t[..t.len() - 1], 1 << 30),
        Some('T') => (&t[..t.len() - 1], 1 << 40),
        _ => (t, 1),
    };
    let n: u64 = num.parse().map_err(|_| bad())?;
    n.checked_mul(mult)
        .ok_or_else(|| LimitError(format!("{what}: size '{s}' is too large")))
}

/// A snap length in [`SNAPLEN`].
pub fn snaplen(v: u32, what: &str) -> Result<u32, LimitError> {
    if SNAPLEN.contains(&v) {
        Ok(v)
    } else {
        Err(LimitError(format!(
            "{what} {v} is out of range ({}..{} bytes)",
            SNAPLEN.start(),
            SNAPLEN.end()
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_seconds() {
        assert_eq!(seconds(1.5, "x"), Ok(Duration::from_millis(1500)));
        for bad in [0.0, -1.0, f64::INFINITY, f64::NAN, 1e20] {
            assert!(seconds(bad, "--duration").is_err(), "{bad}");
        }
    }

    #[test]
    fn test_size() {
        assert_eq!(size("5M", "x"), Ok(5 << 20));
        assert_eq!(size("7", "x"), Ok(7));
        assert!(size("99999999999T", "x").is_err());
        assert!(size("", "x").is_err());
        assert!(size("M", "x").is_err());
        assert!(size("1.5G", "x").is_err());
    }

    #[test]
    fn test_snaplen() {
        assert!(snaplen(15, "-s").is_err());
        assert_eq!(snaplen(16, "-s"), Ok(16));
        assert!(snaplen(262_145, "-s").is_err());
    }
}
