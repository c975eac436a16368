//! Rough throughput of SEED-CBC encryption, SEED-GCM sealing and (for
//! comparison) AES-256-GCM sealing (aes-gcm and ring) over 1500-byte buffers, about one second
//! each. Run with `cargo run --release -p corecap-seed --example seed_speed`.

use std::hint::black_box;
use std::time::{Duration, Instant};

use aes_gcm::aead::{AeadInPlace, KeyInit};
use aes_gcm::Aes256Gcm;
use cbc::cipher::block_padding::Pkcs7;
use cbc::cipher::{BlockEncryptMut, InnerIvInit};
use corecap_seed::{Seed, SeedGcm};

const LEN: usize = 1500;
const RUN: Duration = Duration::from_secs(1);

/// Calls `op` repeatedly for about [`RUN`] and prints the rate in MB/s
/// (10^6 bytes of 1500-byte input per second).
fn measure(name: &str, mut op: impl FnMut()) {
    // Warm up caches and tables.
    for _ in 0..100 {
        op();
    }
    let start = Instant::now();
    let mut iters = 0u64;
    loop {
        for _ in 0..64 {
            op();
        }
        iters += 64;
        if start.elapsed() >= RUN {
            break;
        }
    }
    let secs = start.elapsed().as_secs_f64();
    let mb = (iters as f64) * (LEN as f64) / 1e6;
    println!("{name} {LEN}B: {:.1} MB/s", mb / secs);
}

fn main() {
    let input: Vec<u8> = (0..LEN).map(|i| i as u8).collect();

    let key16 = [0x42u8; 16];
    let iv = [0x24u8; 16];
    let mut out = vec![0u8; LEN + 16];
    // Key schedule once, as the pipeline does; a fresh CBC state per packet.
    let seed = Seed::new(&key16.into());
    measure("seed-cbc", || {
        let enc = cbc::Encryptor::<Seed>::inner_iv_init(seed.clone(), &iv.into());
        let ct = enc
            .encrypt_padded_b2b_mut::<Pkcs7>(black_box(&input), &mut out)
            .expect("output buffer large enough");
        black_box(ct);
    });

    let nonce = [0x11u8; 12].into();
    let seed_gcm = SeedGcm::new(&key16.into());
    let mut buf = input.clone();
    measure("seed-gcm", || {
        let tag = seed_gcm
            .encrypt_in_place_detached(&nonce, b"", black_box(&mut buf))
            .expect("seal");
        black_box(tag);
    });

    let aes_gcm = Aes256Gcm::new(&[0x42u8; 32].into());
    let mut buf = input.clone();
    measure("aes256-gcm", || {
        let tag = aes_gcm
            .encrypt_in_place_detached(&nonce, b"", black_box(&mut buf))
            .expect("seal");
        black_box(tag);
    });

    let ring_key = ring::aead::LessSafeKey::new(
        ring::aead::UnboundKey::new(&ring::aead::AES_256_GCM, &[0x42u8; 32]).expect("key"),
    );
    let mut buf = input.clone();
    measure("aes256-gcm (ring)", || {
        let n = ring::aead::Nonce::assume_unique_for_key([0x11u8; 12]);
        let tag = ring_key
            .seal_in_place_separate_tag(n, ring::aead::Aad::empty(), black_box(&mut buf))
            .expect("seal");
        let _ = black_box(tag);
    });
}
