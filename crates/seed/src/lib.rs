//! SEED block cipher (RFC 4269) for corecap's encryption stage.
//!
//! SEED is a 128-bit block cipher with a 128-bit key and a 16-round
//! Feistel structure, designed by KISA and adopted as a Korean national
//! standard (TTAS.KO-12.0004, also ISO/IEC 18033-3). The pipeline's
//! encryption stage uses it, mostly as SEED-GCM ([`SeedGcm`], RFC 5669)
//! and SEED-CBC.
//!
//! This implementation is table-driven: the four 256-entry `u32` tables
//! `SS0..SS3` (the two 8-bit S-boxes composed with the masks and byte
//! placement of the G function, RFC 4269 section 2.1) are generated at
//! compile time by `const fn` from the S-boxes S1 and S2, so that
//! `G(x) = SS0[x0] ^ SS1[x1] ^ SS2[x2] ^ SS3[x3]`. Encryption and
//! decryption do not allocate and do not branch on data; note that table
//! lookups are not constant-time with respect to cache timing.
//!
//! [`Seed`] implements the RustCrypto `cipher` 0.4 traits ([`KeyInit`],
//! [`BlockEncrypt`], [`BlockDecrypt`], …), so it plugs into generic modes
//! such as `cbc` 0.1 and `aes-gcm` 0.10:
//!
//! ```
//! use corecap_seed::aes_gcm::aead::{Aead, KeyInit};
//! use corecap_seed::SeedGcm;
//!
//! let key = [0x42u8; 16];
//! let nonce = [0x24u8; 12];
//! let gcm = SeedGcm::new(&key.into());
//! let sealed = gcm.encrypt(&nonce.into(), &b"packet"[..]).unwrap();
//! let opened = gcm.decrypt(&nonce.into(), sealed.as_slice()).unwrap();
//! assert_eq!(opened, b"packet");
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]

use core::fmt;

/// Re-export of `aes-gcm` 0.10 (for the `aead` traits used with [`SeedGcm`]).
pub use aes_gcm;
/// Re-export of `cipher` 0.4 (for the block cipher traits of [`Seed`]).
pub use cipher;

use cipher::consts::{U12, U16, U4};
use cipher::generic_array::GenericArray;
use cipher::inout::InOut;
use cipher::zeroize::{Zeroize, ZeroizeOnDrop};
use cipher::{
    AlgorithmName, Block, BlockBackend, BlockCipher, BlockClosure, BlockDecrypt, BlockEncrypt,
    BlockSizeUser, Key, KeyInit, KeySizeUser, ParBlocks, ParBlocksSizeUser,
};

/// SEED-GCM (RFC 5669): GCM over [`Seed`] with a 96-bit nonce and a
/// 128-bit tag, using the generic GCM of the `aes-gcm` crate.
pub type SeedGcm = aes_gcm::AesGcm<Seed, U12>;

/// Number of rounds.
const ROUNDS: usize = 16;

/// Expanded key: Ki,0 and Ki,1 for rounds 1..=16.
type RoundKeys = [u32; 2 * ROUNDS];

/// A block as four big-endian words L0, L1, R0, R1.
type Words = [u32; 4];

/// S-box S1, RFC 4269 Appendix A.
const S1: [u8; 256] = [
    0xa9, 0x85, 0xd6, 0xd3, 0x54, 0x1d, 0xac, 0x25, 0x5d, 0x43, 0x18, 0x1e, 0x51, 0xfc, 0xca, 0x63,
    0x28, 0x44, 0x20, 0x9d, 0xe0, 0xe2, 0xc8, 0x17, 0xa5, 0x8f, 0x03, 0x7b, 0xbb, 0x13, 0xd2, 0xee,
    0x70, 0x8c, 0x3f, 0xa8, 0x32, 0xdd, 0xf6, 0x74, 0xec, 0x95, 0x0b, 0x57, 0x5c, 0x5b, 0xbd, 0x01,
    0x24, 0x1c, 0x73, 0x98, 0x10, 0xcc, 0xf2, 0xd9, 0x2c, 0xe7, 0x72, 0x83, 0x9b, 0xd1, 0x86, 0xc9,
    0x60, 0x50, 0xa3, 0xeb, 0x0d, 0xb6, 0x9e, 0x4f, 0xb7, 0x5a, 0xc6, 0x78, 0xa6, 0x12, 0xaf, 0xd5,
    0x61, 0xc3, 0xb4, 0x41, 0x52, 0x7d, 0x8d, 0x08, 0x1f, 0x99, 0x00, 0x19, 0x04, 0x53, 0xf7, 0xe1,
    0xfd, 0x76, 0x2f, 0x27, 0xb0, 0x8b, 0x0e, 0xab, 0xa2, 0x6e, 0x93, 0x4d, 0x69, 0x7c, 0x09, 0x0a,
    0xbf, 0xef, 0xf3, 0xc5, 0x87, 0x14, 0xfe, 0x64, 0xde, 0x2e, 0x4b, 0x1a, 0x06, 0x21, 0x6b, 0x66,
    0x02, 0xf5, 0x92, 0x8a, 0x0c, 0xb3, 0x7e, 0xd0, 0x7a, 0x47, 0x96, 0xe5, 0x26, 0x80, 0xad, 0xdf,
    0xa1, 0x30, 0x37, 0xae, 0x36, 0x15, 0x22, 0x38, 0xf4, 0xa7, 0x45, 0x4c, 0x81, 0xe9, 0x84, 0x97,
    0x35, 0xcb, 0xce, 0x3c, 0x71, 0x11, 0xc7, 0x89, 0x75, 0xfb, 0xda, 0xf8, 0x94, 0x59, 0x82, 0xc4,
    0xff, 0x49, 0x39, 0x67, 0xc0, 0xcf, 0xd7, 0xb8, 0x0f, 0x8e, 0x42, 0x23, 0x91, 0x6c, 0xdb, 0xa4,
    0x34, 0xf1, 0x48, 0xc2, 0x6f, 0x3d, 0x2d, 0x40, 0xbe, 0x3e, 0xbc, 0xc1, 0xaa, 0xba, 0x4e, 0x55,
    0x3b, 0xdc, 0x68, 0x7f, 0x9c, 0xd8, 0x4a, 0x56, 0x77, 0xa0, 0xed, 0x46, 0xb5, 0x2b, 0x65, 0xfa,
    0xe3, 0xb9, 0xb1, 0x9f, 0x5e, 0xf9, 0xe6, 0xb2, 0x31, 0xea, 0x6d, 0x5f, 0xe4, 0xf0, 0xcd, 0x88,
    0x16, 0x3a, 0x58, 0xd4, 0x62, 0x29, 0x07, 0x33, 0xe8, 0x1b, 0x05, 0x79, 0x90, 0x6a, 0x2a, 0x9a,
];

/// S-box S2, RFC 4269 Appendix A.
const S2: [u8; 256] = [
    0x38, 0xe8, 0x2d, 0xa6, 0xcf, 0xde, 0xb3, 0xb8, 0xaf, 0x60, 0x55, 0xc7, 0x44, 0x6f, 0x6b, 0x5b,
    0xc3, 0x62, 0x33, 0xb5, 0x29, 0xa0, 0xe2, 0xa7, 0xd3, 0x91, 0x11, 0x06, 0x1c, 0xbc, 0x36, 0x4b,
    0xef, 0x88, 0x6c, 0xa8, 0x17, 0xc4, 0x16, 0xf4, 0xc2, 0x45, 0xe1, 0xd6, 0x3f, 0x3d, 0x8e, 0x98,
    0x28, 0x4e, 0xf6, 0x3e, 0xa5, 0xf9, 0x0d, 0xdf, 0xd8, 0x2b, 0x66, 0x7a, 0x27, 0x2f, 0xf1, 0x72,
    0x42, 0xd4, 0x41, 0xc0, 0x73, 0x67, 0xac, 0x8b, 0xf7, 0xad, 0x80, 0x1f, 0xca, 0x2c, 0xaa, 0x34,
    0xd2, 0x0b, 0xee, 0xe9, 0x5d, 0x94, 0x18, 0xf8, 0x57, 0xae, 0x08, 0xc5, 0x13, 0xcd, 0x86, 0xb9,
    0xff, 0x7d, 0xc1, 0x31, 0xf5, 0x8a, 0x6a, 0xb1, 0xd1, 0x20, 0xd7, 0x02, 0x22, 0x04, 0x68, 0x71,
    0x07, 0xdb, 0x9d, 0x99, 0x61, 0xbe, 0xe6, 0x59, 0xdd, 0x51, 0x90, 0xdc, 0x9a, 0xa3, 0xab, 0xd0,
    0x81, 0x0f, 0x47, 0x1a, 0xe3, 0xec, 0x8d, 0xbf, 0x96, 0x7b, 0x5c, 0xa2, 0xa1, 0x63, 0x23, 0x4d,
    0xc8, 0x9e, 0x9c, 0x3a, 0x0c, 0x2e, 0xba, 0x6e, 0x9f, 0x5a, 0xf2, 0x92, 0xf3, 0x49, 0x78, 0xcc,
    0x15, 0xfb, 0x70, 0x75, 0x7f, 0x35, 0x10, 0x03, 0x64, 0x6d, 0xc6, 0x74, 0xd5, 0xb4, 0xea, 0x09,
    0x76, 0x19, 0xfe, 0x40, 0x12, 0xe0, 0xbd, 0x05, 0xfa, 0x01, 0xf0, 0x2a, 0x5e, 0xa9, 0x56, 0x43,
    0x85, 0x14, 0x89, 0x9b, 0xb0, 0xe5, 0x48, 0x79, 0x97, 0xfc, 0x1e, 0x82, 0x21, 0x8c, 0x1b, 0x5f,
    0x77, 0x54, 0xb2, 0x1d, 0x25, 0x4f, 0x00, 0x46, 0xed, 0x58, 0x52, 0xeb, 0x7e, 0xda, 0xc9, 0xfd,
    0x30, 0x95, 0x65, 0x3c, 0xb6, 0xe4, 0xbb, 0x7c, 0x0e, 0x50, 0x39, 0x26, 0x32, 0x84, 0x69, 0x93,
    0x37, 0xe7, 0x24, 0xa4, 0xcb, 0x53, 0x0a, 0x87, 0xd9, 0x4c, 0x83, 0x8f, 0xce, 0x3b, 0x4a, 0xb7,
];

/// G function masks m0..m3, RFC 4269 section 2.1.
const M0: u8 = 0xfc;
const M1: u8 = 0xf3;
const M2: u8 = 0xcf;
const M3: u8 = 0x3f;

/// Builds one SS table: entry `x` is `sbox[x]` masked into each of the four
/// output bytes Z3, Z2, Z1, Z0 (most significant first) by `masks`.
const fn ss_table(sbox: &[u8; 256], masks: [u8; 4]) -> [u32; 256] {
    let mut table = [0u32; 256];
    let mut x = 0;
    while x < 256 {
        let s = sbox[x];
        table[x] = ((s & masks[0]) as u32) << 24
            | ((s & masks[1]) as u32) << 16
            | ((s & masks[2]) as u32) << 8
            | (s & masks[3]) as u32;
        x += 1;
    }
    table
}

// RFC 4269 section 2.1, with X = X3||X2||X1||X0 and G(X) = Z3||Z2||Z1||Z0:
//   Z0 = S1(X0)&m0 ^ S2(X1)&m1 ^ S1(X2)&m2 ^ S2(X3)&m3
//   Z1 = S1(X0)&m1 ^ S2(X1)&m2 ^ S1(X2)&m3 ^ S2(X3)&m0
//   Z2 = S1(X0)&m2 ^ S2(X1)&m3 ^ S1(X2)&m0 ^ S2(X3)&m1
//   Z3 = S1(X0)&m3 ^ S2(X1)&m0 ^ S1(X2)&m1 ^ S2(X3)&m2
/// SS0[x] = contribution of X0 = x to G.
const SS0: [u32; 256] = ss_table(&S1, [M3, M2, M1, M0]);
/// SS1[x] = contribution of X1 = x to G.
const SS1: [u32; 256] = ss_table(&S2, [M0, M3, M2, M1]);
/// SS2[x] = contribution of X2 = x to G.
const SS2: [u32; 256] = ss_table(&S1, [M1, M0, M3, M2]);
/// SS3[x] = contribution of X3 = x to G.
const SS3: [u32; 256] = ss_table(&S2, [M2, M1, M0, M3]);

/// Key schedule constants KC0..KC15 (RFC 4269 section 2.2):
/// KC0 = 0x9e3779b9 (from the golden ratio), KCi = KC0 <<< i.
const KC: [u32; ROUNDS] = {
    let mut kc = [0u32; ROUNDS];
    let mut i = 0;
    while i < ROUNDS {
        kc[i] = 0x9e37_79b9u32.rotate_left(i as u32);
        i += 1;
    }
    kc
};

/// The G function: four table lookups.
#[inline(always)]
fn g(x: u32) -> u32 {
    SS0[(x & 0xff) as usize]
        ^ SS1[((x >> 8) & 0xff) as usize]
        ^ SS2[((x >> 16) & 0xff) as usize]
        ^ SS3[(x >> 24) as usize]
}

/// The round function F (RFC 4269 section 2.1) on the right half R0||R1
/// with round key Ki0||Ki1.
#[inline(always)]
fn f(r0: u32, r1: u32, k0: u32, k1: u32) -> (u32, u32) {
    let mut c = r0 ^ k0;
    let mut d = r1 ^ k1;
    d ^= c;
    d = g(d);
    c = c.wrapping_add(d);
    c = g(c);
    d = d.wrapping_add(c);
    d = g(d);
    c = c.wrapping_add(d);
    (c, d)
}

/// Reads big-endian word `i` (0..4) of a 16-byte key or block.
#[inline(always)]
fn word(b: &[u8; 16], i: usize) -> u32 {
    u32::from_be_bytes([b[4 * i], b[4 * i + 1], b[4 * i + 2], b[4 * i + 3]])
}

/// Splits a block into its four big-endian words.
#[inline(always)]
fn load(b: &[u8; 16]) -> Words {
    [word(b, 0), word(b, 1), word(b, 2), word(b, 3)]
}

/// Joins four words into a big-endian block.
#[inline(always)]
fn store(w: Words) -> [u8; 16] {
    let mut out = [0u8; 16];
    for (chunk, v) in out.chunks_exact_mut(4).zip(w) {
        chunk.copy_from_slice(&v.to_be_bytes());
    }
    out
}

/// Encrypts `N` independent blocks (given as words L0, L1, R0, R1) with
/// their rounds interleaved, so the table lookups of different blocks can
/// overlap in the pipeline. `N = 1` is the plain single-block cipher.
#[inline(always)]
fn encrypt_lanes<const N: usize>(rk: &RoundKeys, mut x: [Words; N]) -> [Words; N] {
    for k in rk.chunks_exact(4) {
        for w in x.iter_mut() {
            let (a, b) = f(w[2], w[3], k[0], k[1]);
            w[0] ^= a;
            w[1] ^= b;
        }
        for w in x.iter_mut() {
            let (a, b) = f(w[0], w[1], k[2], k[3]);
            w[2] ^= a;
            w[3] ^= b;
        }
    }
    // No swap after the last round: output is R16 || L16.
    for w in x.iter_mut() {
        *w = [w[2], w[3], w[0], w[1]];
    }
    x
}

/// Decrypts `N` independent blocks: the same network with the round keys
/// in reverse order.
#[inline(always)]
fn decrypt_lanes<const N: usize>(rk: &RoundKeys, mut x: [Words; N]) -> [Words; N] {
    for k in rk.chunks_exact(4).rev() {
        for w in x.iter_mut() {
            let (a, b) = f(w[2], w[3], k[2], k[3]);
            w[0] ^= a;
            w[1] ^= b;
        }
        for w in x.iter_mut() {
            let (a, b) = f(w[0], w[1], k[0], k[1]);
            w[2] ^= a;
            w[3] ^= b;
        }
    }
    for w in x.iter_mut() {
        *w = [w[2], w[3], w[0], w[1]];
    }
    x
}

/// Expands a 128-bit key into the 32 round-key words (RFC 4269 section 2.2).
fn key_schedule(key: &[u8; 16]) -> RoundKeys {
    let mut k0 = word(key, 0);
    let mut k1 = word(key, 1);
    let mut k2 = word(key, 2);
    let mut k3 = word(key, 3);
    let mut rk = [0u32; 2 * ROUNDS];
    for (i, (pair, kc)) in rk.chunks_exact_mut(2).zip(KC).enumerate() {
        pair[0] = g(k0.wrapping_add(k2).wrapping_sub(kc));
        pair[1] = g(k1.wrapping_sub(k3).wrapping_add(kc));
        // The RFC numbers rounds from 1: odd rounds rotate K0||K1 right
        // by 8, even rounds rotate K2||K3 left by 8.
        if i.is_multiple_of(2) {
            let t = ((u64::from(k0) << 32) | u64::from(k1)).rotate_right(8);
            k0 = (t >> 32) as u32;
            k1 = t as u32;
        } else {
            let t = ((u64::from(k2) << 32) | u64::from(k3)).rotate_left(8);
            k2 = (t >> 32) as u32;
            k3 = t as u32;
        }
    }
    rk
}

/// SEED block cipher (RFC 4269): 128-bit key, 128-bit block.
///
/// Holds only the expanded round keys, which are zeroized on drop.
/// Implements the RustCrypto `cipher` 0.4 traits; see [`SeedGcm`] for the
/// AEAD.
#[derive(Clone)]
pub struct Seed {
    /// Round keys K1,0, K1,1, …, K16,0, K16,1.
    rk: RoundKeys,
}

impl KeySizeUser for Seed {
    type KeySize = U16;
}

impl KeyInit for Seed {
    #[inline]
    fn new(key: &Key<Self>) -> Self {
        Self {
            rk: key_schedule(&(*key).into()),
        }
    }
}

impl BlockSizeUser for Seed {
    type BlockSize = U16;
}

impl BlockCipher for Seed {}

impl AlgorithmName for Seed {
    fn write_alg_name(f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SEED")
    }
}

impl fmt::Debug for Seed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Seed { ... }")
    }
}

impl Drop for Seed {
    fn drop(&mut self) {
        self.rk.zeroize();
    }
}

impl ZeroizeOnDrop for Seed {}

/// Number of blocks the backends process interleaved (CTR/GCM keystream,
/// CBC decryption, ECB).
type ParSize = U4;
const PAR: usize = 4;

/// Runs `op` over one block given as bytes.
#[inline(always)]
fn proc_one(
    rk: &RoundKeys,
    mut block: InOut<'_, '_, Block<Seed>>,
    op: impl Fn(&RoundKeys, [Words; 1]) -> [Words; 1],
) {
    let input: [u8; 16] = (*block.get_in()).into();
    let [out] = op(rk, [load(&input)]);
    *block.get_out() = store(out).into();
}

/// Runs `op` over [`PAR`] blocks given as bytes.
#[inline(always)]
fn proc_par(
    rk: &RoundKeys,
    mut blocks: InOut<'_, '_, GenericArray<Block<Seed>, ParSize>>,
    op: impl Fn(&RoundKeys, [Words; PAR]) -> [Words; PAR],
) {
    let input = blocks.get_in();
    let mut words = [[0u32; 4]; PAR];
    for (w, b) in words.iter_mut().zip(input.iter()) {
        *w = load(&(*b).into());
    }
    let words = op(rk, words);
    for (b, w) in blocks.get_out().iter_mut().zip(words) {
        *b = store(w).into();
    }
}

/// Encryption backend handed to `cipher`'s block closures.
struct EncBackend<'a>(&'a Seed);

impl BlockSizeUser for EncBackend<'_> {
    type BlockSize = U16;
}

impl ParBlocksSizeUser for EncBackend<'_> {
    type ParBlocksSize = ParSize;
}

impl BlockBackend for EncBackend<'_> {
    #[inline(always)]
    fn proc_block(&mut self, block: InOut<'_, '_, Block<Self>>) {
        proc_one(&self.0.rk, block, encrypt_lanes::<1>);
    }

    #[inline(always)]
    fn proc_par_blocks(&mut self, blocks: InOut<'_, '_, ParBlocks<Self>>) {
        proc_par(&self.0.rk, blocks, encrypt_lanes::<PAR>);
    }
}

/// Decryption backend handed to `cipher`'s block closures.
struct DecBackend<'a>(&'a Seed);

impl BlockSizeUser for DecBackend<'_> {
    type BlockSize = U16;
}

impl ParBlocksSizeUser for DecBackend<'_> {
    type ParBlocksSize = ParSize;
}

impl BlockBackend for DecBackend<'_> {
    #[inline(always)]
    fn proc_block(&mut self, block: InOut<'_, '_, Block<Self>>) {
        proc_one(&self.0.rk, block, decrypt_lanes::<1>);
    }

    #[inline(always)]
    fn proc_par_blocks(&mut self, blocks: InOut<'_, '_, ParBlocks<Self>>) {
        proc_par(&self.0.rk, blocks, decrypt_lanes::<PAR>);
    }
}

impl BlockEncrypt for Seed {
    #[inline]
    fn encrypt_with_backend(&self, f: impl BlockClosure<BlockSize = U16>) {
        f.call(&mut EncBackend(self));
    }
}

impl BlockDecrypt for Seed {
    #[inline]
    fn decrypt_with_backend(&self, f: impl BlockClosure<BlockSize = U16>) {
        f.call(&mut DecBackend(self));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// G straight from the RFC 4269 section 2.1 formula, without tables.
    fn g_reference(x: u32) -> u32 {
        let [x3, x2, x1, x0] = x.to_be_bytes();
        let (a, b, c, d) = (
            S1[usize::from(x0)],
            S2[usize::from(x1)],
            S1[usize::from(x2)],
            S2[usize::from(x3)],
        );
        let z0 = (a & M0) ^ (b & M1) ^ (c & M2) ^ (d & M3);
        let z1 = (a & M1) ^ (b & M2) ^ (c & M3) ^ (d & M0);
        let z2 = (a & M2) ^ (b & M3) ^ (c & M0) ^ (d & M1);
        let z3 = (a & M3) ^ (b & M0) ^ (c & M1) ^ (d & M2);
        u32::from_be_bytes([z3, z2, z1, z0])
    }

    #[test]
    fn sboxes_are_permutations() {
        for sbox in [&S1, &S2] {
            let mut seen = [false; 256];
            for &v in sbox.iter() {
                assert!(!seen[usize::from(v)]);
                seen[usize::from(v)] = true;
            }
        }
    }

    #[test]
    fn tables_match_reference_g() {
        // Every single-byte input position, plus a pseudo-random sample.
        for shift in [0, 8, 16, 24] {
            for v in 0..=255u32 {
                let x = v << shift;
                assert_eq!(g(x), g_reference(x), "x = {x:#010x}");
            }
        }
        let mut s = 0x1234_5678u32;
        for _ in 0..100_000 {
            s ^= s << 13;
            s ^= s >> 17;
            s ^= s << 5;
            assert_eq!(g(s), g_reference(s), "x = {s:#010x}");
        }
    }

    #[test]
    fn tables_match_published_ss_values() {
        // First entries of the SS tables as published in the KISA
        // reference implementation.
        assert_eq!(SS0[..4], [0x2989a1a8, 0x05858184, 0x16c6d2d4, 0x13c3d3d0]);
        assert_eq!(SS1[0], 0x38380830);
        assert_eq!(SS2[0], 0xa1a82989);
        assert_eq!(SS3[0], 0x08303838);
    }

    #[test]
    fn kc_constants() {
        assert_eq!(KC[0], 0x9e3779b9);
        assert_eq!(KC[1], 0x3c6ef373);
        assert_eq!(KC[15], 0xbcdccf1b);
    }

    #[test]
    fn trait_bounds() {
        fn zeroize_on_drop<T: ZeroizeOnDrop + Clone + fmt::Debug>() {}
        fn gcm_block_cipher<
            T: BlockCipher + BlockSizeUser<BlockSize = U16> + BlockEncrypt + KeyInit,
        >() {
        }
        zeroize_on_drop::<Seed>();
        gcm_block_cipher::<Seed>();
    }

    #[test]
    fn debug_hides_key() {
        let seed = Seed::new(&[0xaa; 16].into());
        assert_eq!(format!("{seed:?}"), "Seed { ... }");
    }
}
