//! The Bloom filter of a region's keys.
//!
//! `m` bits (a multiple of 64, at least 512, about 10 per distinct key) and [`HASHES`] probes
//! by double hashing of the key: probe `i` sets bit `((h1 + i * h2) mod 2^32) * m >> 32`, where
//! `h1` is the low and `h2` (made odd) the high half of the 64-bit key. With at least 10 bits
//! per key and 6 probes the false-positive rate is at most 0.85% (`(1 - e^(-6/10))^6`), and
//! lower in regions whose rounding leaves more bits per key.

/// Probes per key.
pub const HASHES: u32 = 6;
/// Bits per distinct key (the lower bound).
pub const BITS_PER_KEY: usize = 10;
/// Smallest filter, in bits.
pub const MIN_BITS: usize = 512;

/// Bits of the filter for `n` distinct keys (0 when there are none).
pub fn bits_for(n: usize) -> usize {
    if n == 0 {
        0
    } else {
        (n.saturating_mul(BITS_PER_KEY).max(MIN_BITS) + 63) & !63
    }
}

#[inline]
fn probes(key: u64, m: u64) -> impl Iterator<Item = usize> {
    let h1 = key as u32;
    let h2 = ((key >> 32) as u32) | 1;
    (0..HASHES).map(move |i| {
        let g = h1.wrapping_add(i.wrapping_mul(h2));
        ((u64::from(g) * m) >> 32) as usize
    })
}

/// Sets the bits of `key` in `words` (a filter of `words.len() * 64` bits).
pub fn insert(words: &mut [u64], key: u64) {
    let m = words.len() as u64 * 64;
    if m == 0 {
        return;
    }
    for b in probes(key, m) {
        words[b / 64] |= 1 << (b % 64);
    }
}

/// Whether `key` may be in the filter (false = certainly not). An empty filter holds nothing.
pub fn contains(words: &[u64], key: u64) -> bool {
    let m = words.len() as u64 * 64;
    if m == 0 {
        return false;
    }
    probes(key, m).all(|b| words[b / 64] & (1 << (b % 64)) != 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::mix;

    #[test]
    fn test_no_false_negatives_and_rate() {
        let n = 5000;
        let mut w = vec![0u64; bits_for(n) / 64];
        for i in 0..n as u64 {
            insert(&mut w, mix(i));
        }
        assert!((0..n as u64).all(|i| contains(&w, mix(i))));
        let fp = (n as u64..n as u64 + 100_000)
            .filter(|&i| contains(&w, mix(i)))
            .count();
        assert!(fp < 1200, "false positives {fp} of 100000");
    }

    #[test]
    fn test_sizes() {
        assert_eq!(bits_for(0), 0);
        assert_eq!(bits_for(1), 512);
        assert_eq!(bits_for(100), 1024);
        assert_eq!(bits_for(103), 1024 + 64);
    }
}
