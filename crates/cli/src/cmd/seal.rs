//! `corecap keygen` and `corecap decrypt`: key files and sealed capture files.

use std::path::Path;

use anyhow::{bail, Context, Result};
use corecap_store::sealed::{self, KeyFile};

use crate::config;

pub(crate) fn keygen(out: &Path) -> Result<i32> {
    KeyFile::generate(out)?;
    println!(
        "wrote a 256-bit key to {} (mode 0600); keep a copy: files sealed with it cannot be read without it",
        out.display()
    );
    Ok(0)
}

/// Exit status of `decrypt` for a file that lacks its final chunk (without
/// `--allow-truncated`): the whole chunks before the cut are written, but the file is not
/// whole.
pub(crate) const EXIT_TRUNCATED: i32 = 3;

pub(crate) fn decrypt(
    input: &Path,
    out: Option<&Path>,
    key_file: &Path,
    allow_truncated: bool,
) -> Result<i32> {
    let kek = config::key_file(key_file)?;
    let out = out.map_or_else(|| sealed::plain_name(input), Path::to_owned);
    if out == input {
        bail!("the output would overwrite the input; give -o FILE");
    }
    let r = sealed::unseal_file(input, &kek, &out)
        .with_context(|| format!("decrypting {}", input.display()))?;
    let cipher = r.cipher.map_or("?", |c| c.name());
    println!(
        "decrypted {} ({cipher}, {} chunks, {} bytes) to {}",
        input.display(),
        r.chunks,
        r.bytes,
        out.display()
    );
    if let Some(off) = r.truncated_at {
        let what = if allow_truncated { "warning" } else { "error" };
        eprintln!(
            "corecap: {what}: {} was cut short at byte {off} (no final chunk): decrypted the {} whole chunks before it{}",
            input.display(),
            r.chunks,
            if allow_truncated { "" } else { " (--allow-truncated accepts this)" }
        );
        if !allow_truncated {
            return Ok(EXIT_TRUNCATED);
        }
    }
    Ok(0)
}
