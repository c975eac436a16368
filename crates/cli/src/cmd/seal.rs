//! `corecap keygen` and `corecap decrypt`: key files and sealed capture files.

use std::path::Path;

use anyhow::{bail, Context, Result};
use corecap_engine::sink::sealed::{self, KeyFile};

pub(crate) fn keygen(out: &Path) -> Result<i32> {
    KeyFile::generate(out)?;
    println!(
        "wrote a 256-bit key to {} (mode 0600); keep a copy: files sealed with it cannot be read without it",
        out.display()
    );
    Ok(0)
}

pub(crate) fn decrypt(input: &Path, out: Option<&Path>, key_file: &Path) -> Result<i32> {
    let kek = KeyFile::load(key_file)?;
    if let Some(w) = &kek.warning {
        eprintln!("corecap: warning: {w}");
    }
    let out = out.map_or_else(|| sealed::plain_name(input), Path::to_owned);
    if out == input {
        bail!("the output would overwrite the input; give -o FILE");
    }
    let r = sealed::unseal_file(input, &kek, &out)
        .with_context(|| format!("decrypting {}", input.display()))?;
    let cipher = r.cipher.map_or("?", |c| c.name());
    if let Some(off) = r.truncated_at {
        eprintln!(
            "corecap: warning: {} was cut short at byte {off} (no final chunk): decrypted the {} whole chunks before it",
            input.display(),
            r.chunks
        );
    }
    println!(
        "decrypted {} ({cipher}, {} chunks, {} bytes) to {}",
        input.display(),
        r.chunks,
        r.bytes,
        out.display()
    );
    Ok(0)
}
