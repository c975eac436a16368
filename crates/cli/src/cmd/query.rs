//! `corecap query PATH... [--from T] [--to T] [FILTER] -w OUT`: packets back out of
//! recorded files.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context, Result};
use corecap_engine::query::{expand_paths, run as run_query, QuerySpec};
use corecap_engine::sink::sealed::KeyFile;

use crate::args::QueryArgs;

pub(crate) fn run(a: QueryArgs) -> Result<i32> {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let from = match &a.from {
        Some(t) => parse_time(t, now).with_context(|| format!("--from {t}"))?,
        None => 0,
    };
    let to = match &a.to {
        Some(t) => parse_time(t, now).with_context(|| format!("--to {t}"))?,
        None => u64::MAX,
    };
    let (paths, words) = split_args(&a.args, a.filter.is_some());
    if paths.is_empty() {
        bail!("no capture file or directory given (the first argument is not an existing path)");
    }
    let filter = a
        .filter
        .clone()
        .or_else(|| (!words.is_empty()).then(|| words.join(" ")));
    let (files, skipped) = expand_paths(&paths)?;
    let kek = match &a.key_file {
        Some(k) => {
            let kf = KeyFile::load(k)?;
            if let Some(w) = &kf.warning {
                eprintln!("corecap: warning: {w}");
            }
            Some(Arc::new(kf))
        }
        None => None,
    };
    let spec = QuerySpec {
        files,
        from,
        to,
        filter,
        kek,
    };
    let to_stdout = a.out == Path::new("-");
    let stats = if to_stdout {
        let out = io::stdout().lock();
        run_query(&spec, BufWriter::with_capacity(1 << 20, out))?
    } else {
        let f = File::create(&a.out).with_context(|| format!("creating {}", a.out.display()))?;
        let mut w = BufWriter::with_capacity(1 << 20, f);
        let s = run_query(&spec, &mut w)?;
        w.flush()
            .with_context(|| format!("writing {}", a.out.display()))?;
        s
    };
    for n in &stats.notes {
        eprintln!("corecap: note: {n}");
    }
    if skipped > 0 {
        eprintln!("corecap: note: skipped {skipped} files that are not captures");
    }
    if a.json {
        let mut v = serde_json::to_value(&stats)?;
        v["type"] = serde_json::Value::String("query".into());
        v["files_skipped"] = serde_json::Value::from(skipped);
        if to_stdout {
            eprintln!("{v}");
        } else {
            println!("{v}");
        }
    } else {
        eprintln!(
            "{} packets from {} files: read {} of {} bytes ({} of {} regions; {} files scanned without an index)",
            stats.packets,
            stats.files,
            stats.bytes_read,
            stats.bytes_total,
            stats.regions_read,
            stats.regions_total,
            stats.files_scanned
        );
    }
    Ok(0)
}

/// Leading arguments that exist are paths; the rest is the filter. With `-f`, all are paths.
fn split_args(args: &[String], all_paths: bool) -> (Vec<PathBuf>, Vec<String>) {
    let mut paths = Vec::new();
    let mut i = 0;
    while i < args.len() && (all_paths || Path::new(&args[i]).exists()) {
        paths.push(PathBuf::from(&args[i]));
        i += 1;
    }
    (paths, args[i..].to_vec())
}

/// A time as ns since the epoch: Unix seconds with a fraction, RFC 3339, or relative to
/// `now` (`-15m`, `-2h`, `-30s`, `-1d`).
pub(crate) fn parse_time(s: &str, now: u64) -> Result<u64> {
    let s = s.trim();
    if let Some(rel) = s.strip_prefix('-') {
        let unit = rel.chars().last().unwrap_or(' ');
        let mul: u64 = match unit {
            's' => 1,
            'm' => 60,
            'h' => 3600,
            'd' => 86_400,
            _ => bail!("a relative time needs a unit: s, m, h or d (e.g. -15m)"),
        };
        let n: f64 = rel[..rel.len() - 1]
            .parse()
            .ok()
            .filter(|n: &f64| n.is_finite() && *n >= 0.0)
            .context("not a number before the unit")?;
        let back = (n * mul as f64 * 1e9) as u64;
        return Ok(now.saturating_sub(back));
    }
    if s.bytes().all(|b| b.is_ascii_digit() || b == b'.') && !s.is_empty() {
        return unix_seconds(s);
    }
    rfc3339(s)
}

fn unix_seconds(s: &str) -> Result<u64> {
    let (int, frac) = s.split_once('.').unwrap_or((s, ""));
    if int.is_empty() || frac.contains('.') {
        bail!("not a Unix time in seconds");
    }
    let secs: u64 = int.parse().context("not a Unix time in seconds")?;
    Ok(secs
        .checked_mul(1_000_000_000)
        .context("time out of range")?
        .saturating_add(fraction_ns(frac)?))
}

fn fraction_ns(frac: &str) -> Result<u64> {
    if !frac.bytes().all(|b| b.is_ascii_digit()) {
        bail!("bad fraction of a second");
    }
    let mut ns = 0u64;
    for (i, b) in frac.bytes().take(9).enumerate() {
        ns += u64::from(b - b'0') * 10u64.pow(8 - i as u32);
    }
    Ok(ns)
}

/// Days from 1970-01-01 to a civil date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// `YYYY-MM-DDTHH:MM:SS[.frac](Z|±HH:MM)` (also a space or `t` for the `T`).
fn rfc3339(s: &str) -> Result<u64> {
    let bad =
        || anyhow::anyhow!("not Unix seconds, RFC 3339 (2026-11-23T10:00:00Z) or relative (-15m)");
    let b = s.as_bytes();
    if b.len() < 20
        || b[4] != b'-'
        || b[7] != b'-'
        || !matches!(b[10], b'T' | b't' | b' ')
        || b[13] != b':'
        || b[16] != b':'
    {
        return Err(bad());
    }
    let num = |r: std::ops::Range<usize>| -> Result<i64> {
        s.get(r)
            .filter(|t| t.bytes().all(|c| c.is_ascii_digit()))
            .and_then(|t| t.parse().ok())
            .ok_or_else(bad)
    };
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, sec) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || sec > 60 {
        return Err(bad());
    }
    let mut rest = &s[19..];
    let mut frac_ns = 0;
    if let Some(r) = rest.strip_prefix('.') {
        let n = r.bytes().take_while(u8::is_ascii_digit).count();
        frac_ns = fraction_ns(&r[..n])?;
        rest = &r[n..];
    }
    let offset = match rest {
        "Z" | "z" => 0,
        o if o.len() == 6 && matches!(&o[..1], "+" | "-") && &o[3..4] == ":" => {
            let oh: i64 = o[1..3].parse().map_err(|_| bad())?;
            let om: i64 = o[4..6].parse().map_err(|_| bad())?;
            let v = oh * 3600 + om * 60;
            if o.starts_with('-') {
                -v
            } else {
                v
            }
        }
        _ => return Err(bad()),
    };
    let secs = days_from_civil(y, mo, d) * 86_400 + h * 3600 + mi * 60 + sec - offset;
    if secs < 0 {
        bail!("time before 1970");
    }
    Ok(secs as u64 * 1_000_000_000 + frac_ns)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_parse_times() {
        let now = 1_800_000_000_000_000_000;
        assert_eq!(
            parse_time("1700000000", now).unwrap(),
            1_700_000_000_000_000_000
        );
        assert_eq!(
            parse_time("1700000000.25", now).unwrap(),
            1_700_000_000_250_000_000
        );
        assert_eq!(parse_time("-15m", now).unwrap(), now - 900_000_000_000);
        assert_eq!(parse_time("-2h", now).unwrap(), now - 7_200_000_000_000);
        assert_eq!(parse_time("-30s", now).unwrap(), now - 30_000_000_000);
        assert_eq!(
            parse_time("2023-11-14T22:13:20Z", now).unwrap(),
            1_700_000_000_000_000_000
        );
        assert_eq!(
            parse_time("2023-11-15T00:13:20.5+02:00", now).unwrap(),
            1_700_000_000_500_000_000
        );
        for bad in [
            "",
            "yesterday",
            "-15",
            "2023-13-01T00:00:00Z",
            "1.2.3",
            "-5x",
        ] {
            assert!(parse_time(bad, now).is_err(), "{bad}");
        }
    }
}
