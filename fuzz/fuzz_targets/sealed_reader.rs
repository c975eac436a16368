//! Any bytes as a sealed file: decrypt refuses or reads it, never panics. The first byte
//! picks whether the input is sealed for real (under a fixed key) before being fuzzed, so
//! the fuzzer also reaches the chunk reader past the header.
#![no_main]

use corecap_store::sealed::{seal_bytes, unseal, Cipher, KeyFile, SealConfig};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let kek = std::sync::Arc::new(KeyFile::from_bytes([7u8; 32]));
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let input = if mode & 1 == 1 {
        let cfg = SealConfig {
            cipher: if mode & 2 == 0 {
                Cipher::Aes256Gcm
            } else {
                Cipher::SeedGcm
            },
            kek: kek.clone(),
        };
        let Ok(mut sealed) = seal_bytes(&cfg, rest) else {
            return;
        };
        // Flip or cut by the next bytes, as damage would.
        if let [a, b, ..] = rest {
            let at = usize::from(*a) * 7 % sealed.len().max(1);
            if mode & 4 != 0 {
                sealed.truncate(at);
            } else if let Some(x) = sealed.get_mut(at) {
                *x ^= *b | 1;
            }
        }
        sealed
    } else {
        rest.to_vec()
    };
    let mut out = Vec::new();
    let _ = unseal(&mut std::io::Cursor::new(&input), &kek, &mut out);
});
