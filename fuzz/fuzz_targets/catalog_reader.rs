//! Any bytes as a recording folder's catalog (`.corecap-catalog`, a SQLite database): read
//! as a query reads it, every entry and one by name. A clear error or entries, never a
//! panic (a negative count, a text where a number goes, an unknown state).
#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;

/// One folder per fuzzing process, written again for each input.
fn folder() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let d = std::env::temp_dir().join(format!("corecap-fuzz-catalog-{}", std::process::id()));
        std::fs::create_dir_all(&d).expect("fuzz folder");
        d
    })
}

fuzz_target!(|data: &[u8]| {
    let dir = folder();
    let path = dir.join(corecap_store::CATALOG);
    for side in ["-wal", "-shm", "-journal"] {
        let _ = std::fs::remove_file(dir.join(format!("{}{side}", corecap_store::CATALOG)));
    }
    if std::fs::write(&path, data).is_err() {
        return;
    }
    if let Some(c) = corecap_store::Catalog::read(dir) {
        if let Ok(entries) = c.entries() {
            for e in entries.iter().take(4) {
                let _ = c.get(&e.name);
                let _ = e.overlaps(0, u64::MAX);
            }
        }
        let _ = c.get("x.pcapng");
    }
});
