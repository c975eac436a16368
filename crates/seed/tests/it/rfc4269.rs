//! Known-answer tests from RFC 4269 Appendix B (B.1 to B.4), read from
//! `tests/data/rfc4269.txt`.

use cipher::{Block, BlockDecrypt, BlockEncrypt, KeyInit};
use corecap_seed::Seed;

fn hex16(s: &str) -> [u8; 16] {
    assert_eq!(s.len(), 32, "bad hex length: {s}");
    let mut out = [0u8; 16];
    for (i, b) in out.iter_mut().enumerate() {
        *b = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).expect("hex digit");
    }
    out
}

struct Vector {
    name: String,
    key: [u8; 16],
    plaintext: [u8; 16],
    ciphertext: [u8; 16],
}

fn vectors() -> Vec<Vector> {
    let text = include_str!("../data/rfc4269.txt");
    let v: Vec<Vector> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            assert_eq!(f.len(), 4, "bad line: {l}");
            Vector {
                name: f[0].to_owned(),
                key: hex16(f[1]),
                plaintext: hex16(f[2]),
                ciphertext: hex16(f[3]),
            }
        })
        .collect();
    assert_eq!(v.len(), 4, "RFC 4269 Appendix B has four vectors");
    v
}

#[test]
fn rfc4269_appendix_b_encrypt() {
    for v in vectors() {
        let seed = Seed::new(&v.key.into());
        let mut block = Block::<Seed>::from(v.plaintext);
        seed.encrypt_block(&mut block);
        assert_eq!(block.as_slice(), &v.ciphertext, "encrypt {}", v.name);
    }
}

#[test]
fn rfc4269_appendix_b_decrypt() {
    for v in vectors() {
        let seed = Seed::new(&v.key.into());
        let mut block = Block::<Seed>::from(v.ciphertext);
        seed.decrypt_block(&mut block);
        assert_eq!(block.as_slice(), &v.plaintext, "decrypt {}", v.name);
    }
}

#[test]
fn rfc4269_appendix_b_block_to_block_and_multi_block() {
    for v in vectors() {
        let seed = Seed::new_from_slice(&v.key).expect("16-byte key");
        let input = Block::<Seed>::from(v.plaintext);
        let mut out = Block::<Seed>::default();
        seed.encrypt_block_b2b(&input, &mut out);
        assert_eq!(out.as_slice(), &v.ciphertext, "b2b {}", v.name);

        let mut blocks = [input; 5];
        seed.encrypt_blocks(&mut blocks);
        assert!(blocks.iter().all(|b| b.as_slice() == v.ciphertext));
        seed.decrypt_blocks(&mut blocks);
        assert!(blocks.iter().all(|b| b.as_slice() == v.plaintext));
    }
}

#[test]
fn rejects_wrong_key_length() {
    assert!(Seed::new_from_slice(&[0u8; 15]).is_err());
    assert!(Seed::new_from_slice(&[0u8; 32]).is_err());
}
