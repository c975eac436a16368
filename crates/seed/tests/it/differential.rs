//! Differential tests against the independent `kisaseed` crate (crates.io).

use aes_gcm::aead::AeadInPlace;
use cipher::consts::U12;
use cipher::{Block, BlockDecrypt, BlockEncrypt, KeyInit};
use corecap_seed::{Seed, SeedGcm};

/// xorshift64* — small deterministic PRNG, no `rand` dependency.
struct XorShift(u64);

impl XorShift {
    fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn fill(&mut self, buf: &mut [u8]) {
        for chunk in buf.chunks_mut(8) {
            let v = self.next_u64().to_le_bytes();
            chunk.copy_from_slice(&v[..chunk.len()]);
        }
    }

    fn bytes16(&mut self) -> [u8; 16] {
        let mut b = [0u8; 16];
        self.fill(&mut b);
        b
    }
}

const KEYS: usize = 100;
const BLOCKS_PER_KEY: usize = 100; // 10_000 blocks in total

#[test]
fn matches_kisaseed_on_10k_random_blocks() {
    let mut rng = XorShift(0x00c0_ffee_d00d_f00d);
    let mut checked = 0usize;
    for _ in 0..KEYS {
        let key = rng.bytes16();
        let ours = Seed::new(&key.into());
        let theirs = kisaseed::SEED::new(&key.into());
        for _ in 0..BLOCKS_PER_KEY {
            let pt = Block::<Seed>::from(rng.bytes16());

            let mut a = pt;
            ours.encrypt_block(&mut a);
            let mut b = pt;
            theirs.encrypt_block(&mut b);
            assert_eq!(a, b, "key {key:02x?} block {pt:02x?}");

            let mut back = a;
            ours.decrypt_block(&mut back);
            assert_eq!(back, pt, "decrypt did not invert encrypt");
            checked += 1;
        }
    }
    assert_eq!(checked, 10_000);
}

#[test]
fn batched_blocks_match_kisaseed() {
    // encrypt_blocks/decrypt_blocks go through the interleaved
    // multi-block backend path.
    let mut rng = XorShift(0x0bad_5eed_0000_0001);
    for n in [1usize, 3, 4, 5, 8, 13, 100] {
        let key = rng.bytes16();
        let ours = Seed::new(&key.into());
        let theirs = kisaseed::SEED::new(&key.into());
        let pt: Vec<Block<Seed>> = (0..n).map(|_| rng.bytes16().into()).collect();
        let mut a = pt.clone();
        ours.encrypt_blocks(&mut a);
        let mut b = pt.clone();
        for blk in b.iter_mut() {
            theirs.encrypt_block(blk);
        }
        assert_eq!(a, b, "{n} blocks");
        ours.decrypt_blocks(&mut a);
        assert_eq!(a, pt, "{n} blocks round trip");
    }
}

#[test]
fn seed_gcm_matches_gcm_over_kisaseed() {
    type KisaGcm = aes_gcm::AesGcm<kisaseed::SEED, U12>;
    let mut rng = XorShift(0x5eed_6c4a_1234_5678);
    for len in [0usize, 1, 16, 31, 64, 200, 1500] {
        let key = rng.bytes16();
        let mut nonce = [0u8; 12];
        rng.fill(&mut nonce);
        let mut aad = vec![0u8; len % 37];
        rng.fill(&mut aad);
        let mut msg = vec![0u8; len];
        rng.fill(&mut msg);

        let mut ours = msg.clone();
        let tag_ours = SeedGcm::new(&key.into())
            .encrypt_in_place_detached(&nonce.into(), &aad, &mut ours)
            .expect("seal");
        let mut theirs = msg.clone();
        let tag_theirs = KisaGcm::new(&key.into())
            .encrypt_in_place_detached(&nonce.into(), &aad, &mut theirs)
            .expect("seal");
        assert_eq!(ours, theirs, "ciphertext, len {len}");
        assert_eq!(tag_ours, tag_theirs, "tag, len {len}");
    }
}
