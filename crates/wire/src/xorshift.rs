//! Marsaglia's xorshift64: a small, fast and reproducible stream of numbers from a seed, for
//! the random inputs of tests that must fail the same way twice. Not for anything an
//! attacker sees.

/// The numbers after `seed` (not zero), one a call.
pub fn xorshift64(mut seed: u64) -> impl FnMut() -> u64 {
    move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    }
}
