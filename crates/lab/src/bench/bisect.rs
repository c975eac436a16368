//! The loss-free rate: the highest offered rate at which a tool captures every packet,
//! found by bisection on the rate (RFC 2544's throughput search).

/// Result of a search.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LossFree {
    /// Highest rate that passed (0 if none did).
    pub rate: f64,
    /// Rates probed.
    pub probes: usize,
}

/// Searches `[lo, hi]` for the highest rate where `probe(rate)` is true (no loss), until the
/// bracket is narrower than `tol` (relative to `hi`) or `max_probes` are spent. `hi` is
/// probed first, so a tool that never loses costs one probe.
pub fn loss_free_rate(
    lo: f64,
    hi: f64,
    tol: f64,
    max_probes: usize,
    mut probe: impl FnMut(f64) -> bool,
) -> LossFree {
    let mut probes = 0;
    if hi <= 0.0 || lo > hi {
        return LossFree { rate: 0.0, probes };
    }
    probes += 1;
    if probe(hi) {
        return LossFree { rate: hi, probes };
    }
    let (mut good, mut bad) = (0.0f64, hi);
    if lo > 0.0 {
        probes += 1;
        if probe(lo) {
            good = lo;
        } else {
            return LossFree { rate: 0.0, probes };
        }
    }
    while probes < max_probes && (bad - good) > tol * hi {
        let mid = (good + bad) / 2.0;
        probes += 1;
        if probe(mid) {
            good = mid;
        } else {
            bad = mid;
        }
    }
    LossFree { rate: good, probes }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_finds_the_knee_of_a_simulated_loss_curve() {
        // A tool that loses nothing up to 412 kpps and drops beyond.
        let knee = 412_000.0;
        let r = loss_free_rate(10_000.0, 1_000_000.0, 0.01, 30, |rate| rate <= knee);
        assert!(r.rate <= knee && r.rate > knee - 10_000.0, "{r:?}");
        assert!(r.probes <= 2 + 7, "about log2(100) probes: {r:?}");
    }

    #[test]
    fn test_edges() {
        assert_eq!(
            loss_free_rate(1.0, 100.0, 0.01, 30, |_| true),
            LossFree {
                rate: 100.0,
                probes: 1
            }
        );
        assert_eq!(
            loss_free_rate(1.0, 100.0, 0.01, 30, |_| false),
            LossFree {
                rate: 0.0,
                probes: 2
            }
        );
        assert_eq!(loss_free_rate(1.0, 0.0, 0.01, 30, |_| true).rate, 0.0);
        let r = loss_free_rate(1.0, 100.0, 0.0, 5, |x| x < 50.0);
        assert_eq!(r.probes, 5, "the probe budget bounds the search");
    }
}
