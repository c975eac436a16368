//! SEED in modes of operation: SEED-GCM (RFC 5669) via `aes-gcm`'s generic
//! GCM, and SEED-CBC via `cbc` 0.1.
//!
//! No published SEED-GCM known-answer vectors are checked here (see the
//! differential test in `differential.rs`, which compares [`SeedGcm`]
//! against GCM over the independent `kisaseed` implementation).

use aes_gcm::aead::{Aead, AeadInPlace, KeyInit, Payload};
use cbc::cipher::block_padding::{NoPadding, Pkcs7};
use cbc::cipher::{BlockDecryptMut, BlockEncrypt, BlockEncryptMut, KeyIvInit};
use corecap_seed::{Seed, SeedGcm};

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

#[test]
fn seed_gcm_round_trip_with_aad() {
    let key = [0x11u8; 16];
    let nonce = [0x22u8; 12];
    let gcm = SeedGcm::new(&key.into());
    for len in [0usize, 1, 15, 16, 17, 64, 1500] {
        let msg = pattern(len, 7);
        let aad = pattern(20, 9);
        let sealed = gcm
            .encrypt(
                &nonce.into(),
                Payload {
                    msg: &msg,
                    aad: &aad,
                },
            )
            .expect("seal");
        assert_eq!(sealed.len(), len + 16);
        if len > 0 {
            assert_ne!(&sealed[..len], &msg[..], "ciphertext equals plaintext");
        }
        let opened = gcm
            .decrypt(
                &nonce.into(),
                Payload {
                    msg: &sealed,
                    aad: &aad,
                },
            )
            .expect("open");
        assert_eq!(opened, msg);
    }
}

#[test]
fn seed_gcm_detects_tampering() {
    let key = [0x5au8; 16];
    let nonce = [0x01u8; 12];
    let gcm = SeedGcm::new(&key.into());
    let msg = pattern(100, 3);
    let aad = b"header";
    let sealed = gcm
        .encrypt(&nonce.into(), Payload { msg: &msg, aad })
        .expect("seal");

    // Flip one bit in the ciphertext (start, middle, end) and in the tag.
    for idx in [0usize, 50, 99, 100, 115] {
        let mut bad = sealed.clone();
        bad[idx] ^= 0x01;
        let r = gcm.decrypt(&nonce.into(), Payload { msg: &bad, aad });
        assert!(r.is_err(), "tampered byte {idx} accepted");
    }
    // Wrong AAD.
    assert!(gcm
        .decrypt(
            &nonce.into(),
            Payload {
                msg: &sealed,
                aad: b"headeR",
            },
        )
        .is_err());
    // Wrong nonce.
    assert!(gcm
        .decrypt(&[0x02u8; 12].into(), Payload { msg: &sealed, aad },)
        .is_err());
    // Wrong key.
    let other = SeedGcm::new(&[0x5bu8; 16].into());
    assert!(other
        .decrypt(&nonce.into(), Payload { msg: &sealed, aad },)
        .is_err());
}

#[test]
fn seed_gcm_in_place_detached_matches_combined() {
    let gcm = SeedGcm::new(&[0x77u8; 16].into());
    let nonce = [0x99u8; 12].into();
    let msg = pattern(1500, 1);
    let combined = gcm.encrypt(&nonce, msg.as_slice()).expect("seal");
    let mut buf = msg.clone();
    let tag = gcm
        .encrypt_in_place_detached(&nonce, b"", &mut buf)
        .expect("seal in place");
    assert_eq!(&combined[..1500], &buf[..]);
    assert_eq!(&combined[1500..], tag.as_slice());
    gcm.decrypt_in_place_detached(&nonce, b"", &mut buf, &tag)
        .expect("open in place");
    assert_eq!(buf, msg);
}

type SeedCbcEnc = cbc::Encryptor<Seed>;
type SeedCbcDec = cbc::Decryptor<Seed>;

#[test]
fn seed_cbc_round_trip_pkcs7() {
    let key = [0x0fu8; 16];
    let iv = [0xf0u8; 16];
    for len in [0usize, 1, 15, 16, 17, 1500] {
        let msg = pattern(len, 5);
        let ct = SeedCbcEnc::new(&key.into(), &iv.into()).encrypt_padded_vec_mut::<Pkcs7>(&msg);
        assert_eq!(ct.len(), (len / 16 + 1) * 16);
        let pt = SeedCbcDec::new(&key.into(), &iv.into())
            .decrypt_padded_vec_mut::<Pkcs7>(&ct)
            .expect("valid padding");
        assert_eq!(pt, msg);
    }
}

#[test]
fn seed_cbc_matches_manual_chaining() {
    let key = [0x3cu8; 16];
    let iv = [0xc3u8; 16];
    let msg = pattern(64, 11);
    let ct = SeedCbcEnc::new(&key.into(), &iv.into()).encrypt_padded_vec_mut::<NoPadding>(&msg);

    let seed = <Seed as cbc::cipher::KeyInit>::new(&key.into());
    let mut prev = iv;
    let mut expect = Vec::new();
    for chunk in msg.chunks(16) {
        let mut block = [0u8; 16];
        for (b, (m, p)) in block.iter_mut().zip(chunk.iter().zip(prev)) {
            *b = m ^ p;
        }
        let mut ga = block.into();
        seed.encrypt_block(&mut ga);
        prev = ga.into();
        expect.extend_from_slice(&prev);
    }
    assert_eq!(ct, expect);
}
