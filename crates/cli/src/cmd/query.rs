//! `corecap query PATH... [--from T] [--to T] [FILTER] [-w OUT]`: packets back out of
//! recorded files, printed one line each as tcpdump -r prints them, or written as pcapng.

use std::fs::File;
use std::io::{self, BufWriter};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{anyhow, bail, Context, Result};
use corecap_store::query::{
    expand_paths, parse_time_in, run as run_query, run_into, time_zone, utc_text, QuerySpec,
    QueryStats,
};

use corecap_store::read::flow_match::Selectors;

use crate::args::QueryArgs;
use crate::config::{self, Printing};
use crate::flow_args::{SelectArgs, WindowArgs};
use crate::print::pipe::{is_broken_pipe, out_line, Pipe};

pub(crate) fn run(a: QueryArgs) -> Result<i32> {
    config::check_print_flags(&a.print, a.out.is_none() && !a.stats, "-w or --stats")?;
    let (from, to, window) = window(&a.window)?;
    let (files, skipped, filter) = files_and_filter(&a.args, &a.read, &a.filter)?;
    if let Some(out) = a.out.as_deref().filter(|o| *o != Path::new("-")) {
        check_output(out, &files, a.force)?;
    }
    let kek = a.key_file.as_deref().map(config::key_file).transpose()?;
    let folders = folders_of(&a.args, &a.read);
    let spec = QuerySpec {
        files,
        from,
        to,
        filter,
        kek,
        scan: a.scan,
        once: false,
        sessions: None,
        // The reach is a recording's: told when a folder is given, not over files named
        // alone (another tool's capture has no record of what was deleted around it).
        reach: !folders.is_empty(),
        folders,
    };
    let spec = if a.select.any() {
        by_sessions(spec, &a.select)?
    } else {
        spec
    };
    if a.stats {
        // --stats (--count-only): counts from the catalogs and indexes, no packet read.
        let c = corecap_store::query::count(&spec)?;
        for n in &c.notes {
            eprintln!("corecap: note: {n}");
        }
        let mut v = serde_json::to_value(&c)?;
        v["type"] = serde_json::Value::String("stats".into());
        out_line(v)?;
        return Ok(0);
    }
    let to_stdout = a.out.as_deref().is_none_or(|o| o == Path::new("-"));
    let mut code = 0;
    let stats = match a.out.as_deref() {
        None => match print_packets(&a, &spec)? {
            Some(s) => s,
            None => return Ok(0),
        },
        Some(out) if out == Path::new("-") => {
            let w = io::stdout().lock();
            run_query(&spec, BufWriter::with_capacity(1 << 20, w))?
        }
        Some(out) => match write_file(&spec, out, a.force)? {
            Written::Whole(s) => s,
            Written::Stopped(s, signal) => {
                eprintln!(
                    "corecap: note: stopped by {}: the answer is cut short; {} holds the {} packets written before it",
                    signal_name(signal),
                    out.display(),
                    s.packets
                );
                code = 128 + signal;
                s
            }
            Written::Nothing(signal) => {
                eprintln!(
                    "corecap: note: stopped by {} before the answer began; nothing was written",
                    signal_name(signal)
                );
                return Ok(128 + signal);
            }
        },
    };
    summary(&a, &stats, skipped, window.as_ref(), to_stdout)?;
    Ok(code)
}

/// What a query wrote to its `-w` file.
enum Written {
    /// The whole answer.
    Whole(QueryStats),
    /// The answer up to the signal (its number), whole as a file.
    Stopped(QueryStats, i32),
    /// No file: the signal (its number) came before the answer began.
    Nothing(i32),
}

/// Refuses, before anything is read, a `-w` file the query must not write: one of its
/// inputs (the same file by device and inode, under any name: the answer would be written
/// over the packets it is read from), or an existing file without `force`.
fn check_output(out: &Path, inputs: &[PathBuf], force: bool) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    let Ok(m) = std::fs::symlink_metadata(out) else {
        return Ok(());
    };
    let target = std::fs::metadata(out).unwrap_or(m);
    let same = |f: &PathBuf| {
        std::fs::metadata(f).is_ok_and(|i| i.dev() == target.dev() && i.ino() == target.ino())
    };
    if let Some(f) = inputs.iter().find(|f| same(f)) {
        let which = if f.as_path() == out {
            "one of the query's inputs".to_owned()
        } else {
            format!("the same file as the input {}", f.display())
        };
        bail!(
            "{} is {which}; corecap does not write an answer over a file it reads",
            out.display()
        );
    }
    if !force {
        return Err(exists(out));
    }
    Ok(())
}

/// Writes the answer to `-w OUT`: under a hidden part (`.OUT.part`) in the same folder,
/// made only once the query can answer (its files planned, its filter compiled), then
/// renamed to OUT, never over a file unless `force`. A query that fails removes its part,
/// so that no short answer is left under either name and the same command can be given
/// again. SIGINT or SIGTERM ends the answer at the next packet, whole: as tcpdump -w, the
/// file keeps what was written, and the caller says it was cut short.
fn write_file(spec: &QuerySpec, out: &Path, force: bool) -> Result<Written> {
    let signal = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register_usize(sig, signal.clone(), sig as usize)
            .context("installing signal handlers")?;
        signal_hook::flag::register(sig, stop.clone()).context("installing signal handlers")?;
    }
    let part = corecap_store::names::part_path(out);
    let made = std::cell::Cell::new(false);
    let open = || {
        // Relaxed: a flag set by the signal handlers, read here and once a packet.
        if stop.load(Ordering::Relaxed) {
            return Err(io::Error::new(
                io::ErrorKind::Interrupted,
                "stopped before the answer began",
            ));
        }
        let f = create_part(&part, out)?;
        made.set(true);
        Ok(BufWriter::with_capacity(1 << 20, f))
    };
    let written = run_into(spec, open, Some(&stop))
        .map_err(anyhow::Error::from)
        .and_then(|s| publish(&part, out, force).map(|()| s));
    if written.is_err() && made.get() {
        let _ = std::fs::remove_file(&part);
    }
    // Relaxed: as above; the answer has ended.
    let sig = signal.load(Ordering::Relaxed) as i32;
    match written {
        Ok(s) if s.stopped => Ok(Written::Stopped(s, sig)),
        Ok(s) => Ok(Written::Whole(s)),
        Err(_) if sig != 0 && !made.get() => Ok(Written::Nothing(sig)),
        Err(e) => Err(e),
    }
}

/// Makes the hidden part (`part`) an answer to `out` is written under, never over one: a
/// part already there is another answer being written, or one killed before it ended.
fn create_part(part: &Path, out: &Path) -> io::Result<File> {
    File::create_new(part).map_err(|e| {
        let why = match e.kind() {
            io::ErrorKind::AlreadyExists => format!(
                "{} exists: another answer is being written to {} (or one was killed before \
                 it ended: remove it)",
                part.display(),
                out.display()
            ),
            _ => format!("creating {}: {e}", part.display()),
        };
        io::Error::new(e.kind(), why)
    })
}

/// Gives the whole part its name: renamed to `out`, over a file there only with `force`.
fn publish(part: &Path, out: &Path, force: bool) -> Result<()> {
    if force {
        std::fs::rename(part, out)
    } else {
        corecap_linux::direct::rename_noreplace(part, out)
    }
    .map_err(|e| match e.kind() {
        io::ErrorKind::AlreadyExists => exists(out),
        _ => anyhow::Error::new(e).context(format!(
            "renaming {} to {}",
            part.display(),
            out.display()
        )),
    })
}

/// The signal's name, as a user sends it.
fn signal_name(sig: i32) -> &'static str {
    match sig {
        signal_hook::consts::SIGINT => "SIGINT",
        signal_hook::consts::SIGTERM => "SIGTERM",
        _ => "a signal",
    }
}

/// The query narrowed to the packets of the connections `select` picks, from the files'
/// sessions; the notes of files whose sessions could not be read go to stderr first.
fn by_sessions(spec: QuerySpec, select: &SelectArgs) -> Result<QuerySpec> {
    let sel = selectors(select, None, None);
    let (narrowed, stats) = corecap_store::read::narrow::narrow(&spec, &sel)?;
    for n in &stats.notes {
        eprintln!("corecap: note: {n}");
    }
    eprintln!(
        "{} connections matched, from the sessions of {} of {} files",
        stats.matched,
        stats.files_read + stats.files_scanned,
        stats.files
    );
    Ok(narrowed)
}

/// The store's selectors of what was typed.
pub(crate) fn selectors(
    s: &SelectArgs,
    host: Option<std::net::IpAddr>,
    port: Option<u16>,
) -> Selectors {
    Selectors {
        community_id: s.community_id.clone(),
        sni: s.sni.clone(),
        dns: s.dns.clone(),
        http_host: s.http_host.clone(),
        host,
        port,
        filter: None,
    }
}

/// The notes and the figures of a query that read packets: a table on stderr, or with
/// --json one line (on stderr when the packets went to stdout).
fn summary(
    a: &QueryArgs,
    stats: &QueryStats,
    skipped: u64,
    window: Option<&Shown>,
    to_stdout: bool,
) -> Result<()> {
    for n in &stats.notes {
        eprintln!("corecap: note: {n}");
    }
    if skipped > 0 {
        eprintln!("corecap: note: skipped {skipped} files that are not captures");
    }
    if a.json {
        let mut v = serde_json::to_value(stats)?;
        v["type"] = serde_json::Value::String("query".into());
        v["files_skipped"] = serde_json::Value::from(skipped);
        if let Some((f, t)) = window {
            v["from"] = serde_json::json!(f);
            v["to"] = serde_json::json!(t);
        }
        if to_stdout {
            eprintln!("{v}");
        } else {
            out_line(v)?;
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
        if let Some((f, t)) = window {
            eprintln!(
                "window: {} to {} (UTC)",
                f.as_deref().unwrap_or("the first packet"),
                t.as_deref().unwrap_or("the last packet")
            );
        }
    }
    Ok(())
}

/// Prints the packets of the query, one line each, as tcpdump -r prints them; the query's
/// figures, or `None` when the printing stopped first (-c, or standard output closed).
fn print_packets(a: &QueryArgs, spec: &QuerySpec) -> Result<Option<QueryStats>> {
    let printing = Printing {
        opts: config::print_options(&a.print, a.quick),
        line_buffered: a.print.line_buffered,
        count: a.count,
    };
    into_printer(&printing, |file| {
        Ok(run_query(spec, BufWriter::with_capacity(1 << 16, file))?)
    })
}

/// Prints, one line each as tcpdump -r prints them, the pcapng stream that `answer`
/// writes into the file it is given (the writing end of the printer's pipe, closed when
/// `answer` returns). `None` when the printing stopped first (-c, or standard output
/// closed), so that the rest of the stream had nowhere to go.
pub(crate) fn into_printer<T>(
    p: &Printing,
    answer: impl FnOnce(File) -> Result<T>,
) -> Result<Option<T>> {
    let mut printer =
        Pipe::start(p.opts, p.line_buffered, p.count).context("starting the packet printer")?;
    let writer = printer
        .take_writer()
        .context("starting the packet printer")?;
    let answered = answer(File::from(OwnedFd::from(writer)));
    let printed = printer.join();
    match (answered, printed) {
        (_, Err(e)) if is_broken_pipe(&e) => Ok(None),
        (_, Err(e)) => Err(e.context("printing the packets")),
        (Ok(v), Ok(_)) => Ok(Some(v)),
        (Err(e), Ok(n)) if p.count == Some(n) && is_broken_pipe(&e) => Ok(None),
        (Err(e), Ok(_)) => Err(e),
    }
}

/// A window's ends as the summary shows them (RFC 3339 in UTC), each when it was given.
pub(crate) type Shown = (Option<String>, Option<String>);

/// The window of `--from` and `--to` in ns (times of day without an offset in `--tz`, else
/// in TZ or the system's zone), and the same as the summary shows it back: exact, in UTC.
pub(crate) fn window(w: &WindowArgs) -> Result<(u64, u64, Option<Shown>)> {
    window_of(w.from.as_deref(), w.to.as_deref(), w.tz.as_deref())
}

/// The window of `from` and `to` (see [`window`]).
pub(crate) fn window_of(
    from: Option<&str>,
    to: Option<&str>,
    tz: Option<&str>,
) -> Result<(u64, u64, Option<Shown>)> {
    let (from_text, to_text) = (from, to);
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let zone = time_zone(tz).map_err(|e| anyhow!("--tz: {e}"))?;
    let from = match from_text {
        Some(t) => parse_time_in(t, now, &zone).map_err(|e| anyhow!("--from {t}: {e}"))?,
        None => 0,
    };
    let to = match to_text {
        Some(t) => parse_time_in(t, now, &zone).map_err(|e| anyhow!("--to {t}: {e}"))?,
        None => u64::MAX,
    };
    if from > to {
        bail!(
            "--from {} is after --to {}: the window is empty (the two swapped?)",
            utc_text(from),
            utc_text(to)
        );
    }
    // The window as it was understood, exact and in UTC.
    let window = (from_text.is_some() || to_text.is_some()).then(|| {
        (
            from_text.map(|_| utc_text(from)),
            to_text.map(|_| utc_text(to)),
        )
    });
    Ok((from, to, window))
}
/// Writes an answer to `-w OUT` through `answer`, which gets the file, made first (None
/// for `-`, standard output): never over a file unless `force`. The answer is written
/// under a hidden part name (`.OUT.part`) and named `OUT` only when it is whole, so a
/// failed or killed answer never stands under its name, and a file it was to replace
/// stays as it was until then. When `answer` fails, the part goes, so the same command can
/// be given again.
pub(crate) fn into_new_file<T>(
    out: &Path,
    force: bool,
    answer: impl FnOnce(Option<File>) -> Result<T>,
) -> Result<T> {
    if out == Path::new("-") {
        return answer(None);
    }
    if !force && std::fs::symlink_metadata(out).is_ok() {
        return Err(exists(out));
    }
    let part = corecap_store::names::part_path(out);
    let file = create_part(&part, out)?;
    let r = answer(Some(file)).and_then(|t| publish(&part, out, force).map(|()| t));
    if r.is_err() {
        let _ = std::fs::remove_file(&part);
    }
    r
}

/// The refusal of a `-w` file that exists.
fn exists(out: &Path) -> anyhow::Error {
    anyhow!(
        "{} exists; corecap does not write over a file (--force to replace it)",
        out.display()
    )
}

/// The files of a command that takes `PATH... [FILTER]` (folders expanded; and how many
/// names were skipped), and its filter: `-f`'s, else the words after the paths. With `-r`
/// (`read`), as tcpdump -r, the paths are given and every argument is the filter.
pub(crate) fn files_and_filter(
    args: &[String],
    read: &[PathBuf],
    given: &Option<String>,
) -> Result<(Vec<PathBuf>, u64, Option<String>)> {
    let (paths, words) = if read.is_empty() {
        split_args(args, given.is_some())
    } else {
        (read.to_vec(), args.to_vec())
    };
    if paths.is_empty() {
        bail!(
            "{}: no such file or directory (give capture files or directories, then the filter)",
            args.first().map_or("", String::as_str)
        );
    }
    // A path that is not there reads as the filter's first word: said as a missing file
    // when it looks like one (a capture's name, or a path from / or .), not as a syntax
    // error of the filter.
    if let Some(w) = words
        .first()
        .filter(|w| given.is_none() && looks_like_a_path(w))
    {
        bail!("{w}: no such file or directory");
    }
    let filter = given
        .clone()
        .or_else(|| (!words.is_empty()).then(|| words.join(" ")));
    let (files, skipped) = expand_paths(&paths)?;
    Ok((files, skipped, filter))
}

/// The recording folders given (the reach is told over their files, and over the records
/// of deletions of theirs and of the files' own folders).
pub(crate) fn folders_of(args: &[String], read: &[PathBuf]) -> Vec<PathBuf> {
    let given = if read.is_empty() {
        split_args(args, false).0
    } else {
        read.to_vec()
    };
    given.into_iter().filter(|p| p.is_dir()).collect()
}

/// Whether `word` reads as a path rather than a filter's word: it begins with `/`, `./`,
/// `../` or `~`, or ends as a capture file's name does (no filter word does either).
fn looks_like_a_path(word: &str) -> bool {
    let lower = word.to_ascii_lowercase();
    ["/", "./", "../", "~"].iter().any(|p| lower.starts_with(p))
        || [".pcap", ".pcapng", ".cap", ".gz", ".zst", ".lz4"]
            .iter()
            .any(|e| lower.ends_with(e))
}

/// Leading arguments that exist are paths; the rest is the filter. With `-f`, all are paths.
pub(crate) fn split_args(args: &[String], all_paths: bool) -> (Vec<PathBuf>, Vec<String>) {
    let mut paths = Vec::new();
    let mut i = 0;
    while i < args.len() && (all_paths || Path::new(&args[i]).exists()) {
        paths.push(PathBuf::from(&args[i]));
        i += 1;
    }
    (paths, args[i..].to_vec())
}
