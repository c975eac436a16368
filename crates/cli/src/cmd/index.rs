//! `corecap index FILE...`: builds the sidecar index of capture files.

use anyhow::{Context, Result};
use corecap_store::query::build_index;

use crate::args::IndexArgs;
use crate::config;

pub(crate) fn run(a: IndexArgs) -> Result<i32> {
    let kek = a.key_file.as_deref().map(config::key_file).transpose()?;
    for f in &a.files {
        let r =
            build_index(f, kek.as_ref()).with_context(|| format!("indexing {}", f.display()))?;
        if let Some(why) = &r.not_indexed {
            eprintln!("corecap: note: {why}");
            if a.json {
                let mut v = serde_json::to_value(&r)?;
                v["file"] = serde_json::Value::String(f.display().to_string());
                println!("{v}");
            }
            continue;
        }
        let side = corecap_index::sidecar_path(f);
        if let Some(at) = r.cut_short {
            eprintln!(
                "corecap: warning: {} is cut short or damaged at byte {at} of {}: indexed its readable part ({} packets)",
                f.display(),
                r.size,
                r.packets
            );
        }
        if a.json {
            let mut v = serde_json::to_value(&r)?;
            v["file"] = serde_json::Value::String(f.display().to_string());
            v["index"] = serde_json::Value::String(side.display().to_string());
            println!("{v}");
        } else {
            println!(
                "{}: {} packets in {} regions, index {} bytes ({:.2}% of {} bytes){}",
                side.display(),
                r.packets,
                r.regions,
                r.index_bytes,
                100.0 * r.index_bytes as f64 / r.size.max(1) as f64,
                r.size,
                if r.sealed { ", sealed" } else { "" }
            );
            match (r.sessions, &r.no_sessions) {
                (Some(n), _) => println!(
                    "{}: {n} connections",
                    corecap_store::names::sessions_path(f).display()
                ),
                (None, Some(why)) => eprintln!("corecap: note: no sessions file: {why}"),
                (None, None) => {}
            }
        }
    }
    Ok(0)
}
