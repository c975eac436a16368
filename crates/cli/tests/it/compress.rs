//! Issue 38, item 2: recordings compressed as independent zstd frames with the seekable
//! format's seek table (`--compress zstd`). The same traffic is recorded plain and
//! compressed: `zstd -dc` of each compressed file is the plain file, tcpdump reads it, a
//! query answers from the index through the frames exactly as tcpdump over the plain
//! recording, retention counts the compressed bytes, and a recorder killed mid-write leaves
//! a part that the next start recovers with its whole frames. Compressed and sealed, each
//! file unseals to the compressed file and answers queries as the plain recording.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::Value;

use crate::cutoff::write_mix;
use crate::util::{self, u, Lab, Scratch};

/// The seekable format's footer magic, the last four bytes of a whole compressed file.
const SEEKABLE_FOOTER: [u8; 4] = [0xb1, 0xea, 0x92, 0x8f];

/// A TCP connection of more than 20 packets that `flows` lists in `folder`: its Community
/// ID and its two ports.
fn long_tcp_flow(folder: &Path) -> (String, u64, u64) {
    let o = util::corecap(&["flows", s(folder), "--json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let flow: Value = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).expect("JSON"))
        .find(|v| v["network"]["transport"] == "tcp" && u(&v["network"], "packets") > 20)
        .expect("a long TCP flow");
    let cid = flow["network"]["community_id"]
        .as_str()
        .expect("community_id");
    (
        cid.to_owned(),
        u(&flow["source"], "port"),
        u(&flow["destination"], "port"),
    )
}

fn s(p: &Path) -> &str {
    p.to_str().expect("utf8")
}

/// The capture files in `dir` (no index, sessions file or folder file), by name.
fn captures(dir: &Path) -> BTreeMap<String, PathBuf> {
    std::fs::read_dir(dir)
        .expect("read dir")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            let n = p
                .file_name()
                .map_or(String::new(), |n| n.to_string_lossy().into());
            (n.ends_with(".pcapng") || n.ends_with(".zst")) && !n.starts_with('.')
        })
        .map(|p| (p.file_name().unwrap().to_string_lossy().into_owned(), p))
        .collect()
}

/// `zstd -dc` of `f`.
fn zstd_dc(f: &Path) -> Vec<u8> {
    let o = Command::new("zstd")
        .args(["-dc", "--no-progress"])
        .arg(f)
        .output()
        .expect("run zstd");
    assert!(
        o.status.success(),
        "zstd -dc {}: {}",
        f.display(),
        String::from_utf8_lossy(&o.stderr)
    );
    o.stdout
}

/// tcpdump's lines (times, headers and bytes) for `f` and `filter`; tcpdump must read it
/// without complaint.
fn tcpdump_lines(f: &Path, filter: &str) -> String {
    let mut c = Command::new("tcpdump");
    c.args(["-tt", "-nn", "-xx", "-r"]).arg(f);
    if !filter.is_empty() {
        c.arg(filter);
    }
    let o = c.output().expect("run tcpdump");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        o.status.success() && !err.contains("truncated"),
        "tcpdump -r {}: {err}",
        f.display()
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Runs a query; its JSON summary.
fn query(out: &Path, args: &[&str]) -> Value {
    let mut a = vec!["query", "--force", "--json", "-w", s(out)];
    a.extend_from_slice(args);
    let o = util::corecap(&a);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8_lossy(&o.stdout);
    serde_json::from_str(text.lines().last().expect("summary")).expect("json")
}

/// Records `mix` plain and compressed, rotated at 400 kB, into two folders.
fn record_both(sc: &Scratch, mix: &Path, extra: &[&str]) -> (PathBuf, PathBuf) {
    record_both_saying(sc, mix, extra).0
}

/// [`record_both`], and what the compressing recorder said on its standard error.
fn record_both_saying(sc: &Scratch, mix: &Path, extra: &[&str]) -> ((PathBuf, PathBuf), String) {
    let (plain, comp) = (sc.path("plain"), sc.path("comp"));
    let mut said = String::new();
    for (dir, more) in [(&plain, &[][..]), (&comp, &["--compress", "zstd"][..])] {
        std::fs::create_dir_all(dir).expect("mkdir");
        let rec = dir.join("rec.pcapng");
        let mut a = vec!["-w", s(&rec), "-b", "filesize:400"];
        a.extend_from_slice(more);
        a.extend_from_slice(extra);
        let (o, v) = util::replay(mix, &a);
        said = String::from_utf8_lossy(&o.stderr).into_owned();
        assert!(o.status.success(), "{said}");
        assert_eq!(v["balanced"], true, "{v}");
    }
    ((plain, comp), said)
}

#[test]
fn issue38_a_compressed_recording_is_the_plain_one_in_seekable_zstd_frames() {
    if !util::need("zstd") || !util::need("tcpdump") {
        return;
    }
    let sc = Scratch::new("compress-replay");
    let (mix, n) = write_mix(&sc, 400);
    let (plain, comp) = record_both(&sc, &mix, &[]);
    let (p, c) = (captures(&plain), captures(&comp));
    assert!(p.len() >= 3, "rotated: {p:?}");
    assert_eq!(p.len(), c.len(), "{p:?} {c:?}");
    let (mut plain_bytes, mut comp_bytes, mut packets) = (0u64, 0u64, 0u64);
    for ((pn, pf), (cn, cf)) in p.iter().zip(&c) {
        assert_eq!(format!("{pn}.zst"), *cn);
        let bytes = std::fs::read(cf).expect("read");
        assert_eq!(&bytes[..4], &[0x28, 0xb5, 0x2f, 0xfd], "{cn} is zstd");
        assert_eq!(
            &bytes[bytes.len() - 4..],
            &SEEKABLE_FOOTER,
            "{cn} ends in a seek table"
        );
        // The decompressed stream is the plain recording, byte for byte, and tcpdump reads
        // it as it reads the plain one.
        let d = zstd_dc(cf);
        assert!(
            d == std::fs::read(pf).expect("read"),
            "{cn} decompresses to {pn}"
        );
        let dfile = sc.path(&format!("{pn}.dc"));
        std::fs::write(&dfile, &d).expect("write");
        assert_eq!(tcpdump_lines(&dfile, ""), tcpdump_lines(pf, ""), "{cn}");
        packets += util::packets(cf).len() as u64;
        plain_bytes += std::fs::metadata(pf).unwrap().len();
        comp_bytes += bytes.len() as u64;
        // Its index and sessions file are there, tied to the decompressed stream.
        assert!(
            comp.join(format!("{cn}.idx")).exists() && comp.join(format!("{cn}.sessions")).exists()
        );
    }
    assert_eq!(packets, n);
    assert!(comp_bytes < plain_bytes, "{comp_bytes} of {plain_bytes}");

    // `tshark -r -` reads the stream from zstdcat too.
    if util::need("tshark") {
        let first = c.values().next().expect("a file");
        let o = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "zstdcat '{}' | tshark -r - | wc -l",
                first.display()
            ))
            .output()
            .expect("run tshark");
        let lines: u64 = String::from_utf8_lossy(&o.stdout)
            .trim()
            .parse()
            .expect("count");
        assert_eq!(lines, util::tcpdump_packets(p.values().next().unwrap(), ""));
    }

    // A query (filter and time window) over the compressed folder answers from the indexes
    // as tcpdump over the plain recording, reading no more than it reads of the plain one.
    let (lo, hi, window) = middle_half(&mix);
    let filter = "tcp port 80 or udp port 53";
    let answers: Vec<_> = [&plain, &comp]
        .into_iter()
        .map(|dir| indexed_query(&sc, dir, &window, &[], filter, p.len()))
        .collect();
    let want: Vec<(u64, Vec<u8>)> = util::packets(&mix)
        .into_iter()
        .filter(|(t, _)| (lo..hi).contains(t))
        .collect();
    let (_, by_tcpdump) = plain_by_tcpdump(&sc, &plain, &window, filter);
    assert!(!want.is_empty() && by_tcpdump > 0);
    assert_eq!(answers[0].0.len() as u64, by_tcpdump);
    assert!(
        answers[1].0 == answers[0].0,
        "the compressed recording answers as the plain one"
    );
    assert!(
        answers[1].1 * 10 <= answers[0].1 * 12,
        "bytes read: compressed {} against plain {}",
        answers[1].1,
        answers[0].1
    );

    // By Community ID: the flow's packets, from the compressed recording's sessions files.
    assert_flow_answers(&sc, long_tcp_flow(&comp), &["-r", s(&comp)], &plain);
}

/// A flush at every batch (`--flush-interval 0`) writes the frames made so far padded to
/// 4 KiB (direct I/O), and the next write starts at that unit again with its tail and the
/// frames after it: every file still decompresses to the plain recording, byte for byte.
#[test]
fn issue38_frames_flushed_at_every_batch_are_written_again_whole() {
    if !util::need("zstd") {
        return;
    }
    let sc = Scratch::new("compress-flush");
    let (mix, n) = write_mix(&sc, 300);
    let (plain, comp) = record_both(&sc, &mix, &["--flush-interval", "0"]);
    let (p, c) = (captures(&plain), captures(&comp));
    assert!(p.len() >= 2, "rotated: {p:?}");
    assert_eq!(p.len(), c.len(), "{p:?} {c:?}");
    let mut packets = 0;
    for ((pn, pf), (cn, cf)) in p.iter().zip(&c) {
        assert!(
            zstd_dc(cf) == std::fs::read(pf).expect("read"),
            "{cn} decompresses to {pn}"
        );
        packets += util::packets(cf).len() as u64;
    }
    assert_eq!(packets, n);
}

/// The middle half of the mix's packets in time: its bounds, and the `--from` and `--to`
/// words that ask for it.
fn middle_half(mix: &Path) -> (u64, u64, [String; 4]) {
    let times: Vec<u64> = util::packets(mix).iter().map(|(t, _)| *t).collect();
    let (lo, hi) = (times[times.len() / 4], times[3 * times.len() / 4]);
    let window = [
        "--from".to_owned(),
        format!("{}.{:09}", lo / 1_000_000_000, lo % 1_000_000_000),
        "--to".to_owned(),
        format!("{}.{:09}", hi / 1_000_000_000, hi % 1_000_000_000),
    ];
    (lo, hi, window)
}

/// A query of `window` and `filter` over the recording in `dir` (with the words `more`
/// before `-r`), every one of its `files` answered from its index or left out by the
/// catalog's times, none read whole. Returns the packets and the bytes read.
fn indexed_query(
    sc: &Scratch,
    dir: &Path,
    window: &[String],
    more: &[&str],
    filter: &str,
    files: usize,
) -> (Vec<(u64, Vec<u8>)>, u64) {
    let out = sc.path(&format!(
        "q-{}.pcapng",
        dir.file_name().unwrap().to_string_lossy()
    ));
    let mut a: Vec<&str> = window.iter().map(String::as_str).collect();
    a.extend(more);
    a.extend(["-r", s(dir), filter]);
    let v = query(&out, &a);
    assert_eq!(u(&v, "files_scanned"), 0, "{v}");
    assert!(u(&v, "files_indexed") > 0, "{v}");
    assert_eq!(
        u(&v, "files_indexed") + u(&v, "files_pruned"),
        files as u64,
        "{v}"
    );
    (util::packets(&out), u(&v, "bytes_read"))
}

/// The packets of `window` in the plain recording (`all-plain.pcapng`), and how many of
/// them tcpdump's `filter` takes.
fn plain_by_tcpdump(sc: &Scratch, plain: &Path, window: &[String], filter: &str) -> (PathBuf, u64) {
    let all = sc.path("all-plain.pcapng");
    let mut a: Vec<&str> = window.iter().map(String::as_str).collect();
    a.extend(["-r", s(plain)]);
    query(&all, &a);
    let n = util::tcpdump_packets(&all, filter);
    (all, n)
}

/// A query by the Community ID of a long TCP connection (`long_tcp_flow`) with the words
/// `args` answers its packets as tcpdump finds them, by its ports, in the plain recording:
/// more than 20.
fn assert_flow_answers(
    sc: &Scratch,
    (cid, sport, dport): (String, u64, u64),
    args: &[&str],
    plain: &Path,
) {
    let out = sc.path("q-cid.pcapng");
    let mut a = vec!["--community-id", cid.as_str()];
    a.extend(args);
    query(&out, &a);
    let all = sc.path("all.pcapng");
    query(&all, &["-r", s(plain)]);
    let f = format!("tcp and port {sport} and port {dport}");
    assert_eq!(
        util::packets(&out).len() as u64,
        util::tcpdump_packets(&all, &f)
    );
    assert!(util::tcpdump_packets(&all, &f) > 20);
}

/// Payload that does not compress (random, as encrypted traffic is to a compressor) is
/// kept in stored frames: each file still decompresses to the plain recording, with a few
/// bytes a frame more than it, and a query reads its packets where they are, no more bytes
/// than from the plain recording.
#[test]
fn issue38_payload_that_does_not_compress_is_stored_and_read_in_place() {
    if !util::need("zstd") || !util::need("tcpdump") {
        return;
    }
    let sc = Scratch::new("compress-stored");
    let mix = sc.path("random.pcap");
    let o = util::corecap(&[
        "lab",
        "mix",
        "-w",
        s(&mix),
        "--connections",
        "300",
        "--max-bytes",
        "1M",
        "--seed",
        "38",
        "--random-payload",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let ((plain, comp), said) = record_both_saying(&sc, &mix, &[]);
    // The recorder says how many frames it stored: most of them.
    let note = said
        .lines()
        .find(|l| l.contains("frames stored as they were"))
        .unwrap_or_else(|| panic!("a note on the frames: {said}"));
    let words: Vec<&str> = note.split_whitespace().collect();
    let at = words.iter().rposition(|w| *w == "frames").expect("frames");
    let (stored, all): (u64, u64) = (
        words[at - 3].parse().expect("stored"),
        words[at - 1].parse().expect("all"),
    );
    assert!(stored * 2 > all && all > 10, "{note}");
    let (p, c) = (captures(&plain), captures(&comp));
    assert_eq!(p.len(), c.len(), "{p:?} {c:?}");
    let (mut plain_bytes, mut comp_bytes) = (0u64, 0u64);
    for ((pn, pf), cf) in p.iter().zip(c.values()) {
        let d = zstd_dc(cf);
        assert!(d == std::fs::read(pf).expect("read"), "{pn}");
        plain_bytes += std::fs::metadata(pf).unwrap().len();
        comp_bytes += std::fs::metadata(cf).unwrap().len();
    }
    assert!(
        comp_bytes * 100 <= plain_bytes * 101 && comp_bytes * 10 > plain_bytes * 8,
        "compressed {comp_bytes} of plain {plain_bytes}"
    );
    // One connection, by its Community ID, and a filter: the same packets as from the
    // plain recording, as tcpdump sees them, for no more bytes read.
    let (cid, sport, dport) = long_tcp_flow(&comp);
    let all = sc.path("all.pcapng");
    query(&all, &["-r", s(&plain)]);
    let by_tcpdump = util::tcpdump_packets(&all, &format!("tcp and port {sport} and port {dport}"));
    for args in [
        vec!["--community-id", cid.as_str()],
        vec!["tcp port 8443 and tcp[tcpflags] & tcp-syn != 0"],
    ] {
        let mut answers = Vec::new();
        for dir in [&plain, &comp] {
            let out = sc.path("q.pcapng");
            let mut a = args.clone();
            a.extend(["-r", s(dir)]);
            let v = query(&out, &a);
            answers.push((util::packets(&out), u(&v, "bytes_read")));
        }
        assert!(!answers[0].0.is_empty(), "{args:?}");
        assert!(
            answers[1].0 == answers[0].0,
            "{args:?}: as the plain recording"
        );
        assert!(
            answers[1].1 <= answers[0].1 + answers[0].1 / 20,
            "{args:?}: bytes read compressed {} against plain {}",
            answers[1].1,
            answers[0].1
        );
    }
    let out = sc.path("q.pcapng");
    query(&out, &["--community-id", cid.as_str(), "-r", s(&comp)]);
    assert_eq!(util::packets(&out).len() as u64, by_tcpdump);
}

#[test]
fn issue38_retention_counts_the_compressed_bytes() {
    let sc = Scratch::new("compress-retain");
    let (mix, _) = write_mix(&sc, 400);
    // A budget under the plain recording's size.
    let (plain, comp) = record_both(&sc, &mix, &["--retain", "900k"]);
    let on_disk = |dir: &Path| -> u64 {
        std::fs::read_dir(dir)
            .unwrap()
            .filter_map(Result::ok)
            .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
            .map(|e| e.metadata().unwrap().len())
            .sum()
    };
    let (p, c) = (captures(&plain), captures(&comp));
    assert!(on_disk(&plain) <= 900 << 10 && on_disk(&comp) <= 900 << 10);
    // The same budget keeps more of the compressed recording: its files are counted by
    // their bytes on disk.
    assert!(
        c.len() > p.len(),
        "kept {} compressed, {} plain",
        c.len(),
        p.len()
    );
}

#[test]
fn issue38_compress_refuses_what_it_cannot_do() {
    let sc = Scratch::new("compress-refuse");
    let f = sc.path("r.pcapng");
    for (args, says) in [
        (vec!["--compress", "gzip"], "the only compression is zstd"),
        (vec!["--compress", "zstd:99"], "the level is a number"),
    ] {
        let mut a = vec!["capture", "-r", "/dev/null", "-w", s(&f)];
        a.extend(args);
        let o = util::corecap(&a);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success() && err.contains(says), "{err}");
    }
    let o = util::corecap(&["capture", "-r", "/dev/null", "--compress", "zstd"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("need -w FILE"), "{err}");
}

/// 200 packets a second of 4 UDP flows from the lab's generator, for at most 60 s.
fn slow_traffic(lab: &Lab) -> std::process::Child {
    lab.gen_for("60", &["--rate", "200", "--flows", "4", "--size", "256"])
}

/// The time now, in Unix seconds.
fn now_s() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// A recovered capture (decompressed into `d`) holds every packet older than the flush
/// interval before the kill at `killed` (1 s, one more for a loaded machine).
fn assert_holds_up_to_the_flush(d: &Path, killed: f64) {
    let last = tcpdump_lines(d, "")
        .lines()
        .filter(|l| !l.starts_with('\t'))
        .filter_map(|l| l.split_whitespace().next()?.parse::<f64>().ok())
        .fold(0.0, f64::max);
    assert!(
        last >= killed - 2.0,
        "the last packet recovered is {:.3} s before the kill",
        killed - last
    );
}

#[test]
#[ignore = "needs root"]
fn issue38_a_killed_compressed_recorder_leaves_a_part_the_next_start_recovers() {
    if !util::need("zstd") || !util::need("tcpdump") {
        return;
    }
    let lab = Lab::new(1);
    let sc = Scratch::new("compress-kill");
    let rec = sc.path("rec.pcapng");
    let args = [
        "--compress",
        "zstd",
        "--flush-interval",
        "1",
        "-b",
        "filesize:100000",
    ];
    let mut gen = slow_traffic(&lab);
    let cap = lab.capture_to(&rec, &args);
    std::thread::sleep(Duration::from_millis(3500));
    // The file being written answers queries and lists its connections: its frames up to
    // the last flush.
    assert_live_answers(&sc, &[]);
    let o = util::corecap(&["flows", s(&sc.0), "--json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stdout).lines().count() >= 4);
    let killed = now_s();
    cap.kill();
    let _ = gen.kill();
    let _ = gen.wait();
    let part = sc.path(".rec_00001.pcapng.zst.part");
    assert!(part.exists(), "the killed recorder left its part");
    // The part is frames with no seek table yet; zstd reads its whole frames.
    let bytes = std::fs::read(&part).expect("read part");
    assert_ne!(&bytes[bytes.len() - 4..], &SEEKABLE_FOOTER);
    // The next start recovers it under a name of its own.
    let cap = lab.capture_to(&rec, &args);
    let _ = cap.stop();
    assert!(!part.exists(), "the part was recovered");
    let recovered: Vec<PathBuf> = captures(&sc.0)
        .into_values()
        .filter(|p| p.to_string_lossy().contains(".recovered-"))
        .collect();
    assert_eq!(recovered.len(), 1, "{:?}", captures(&sc.0));
    let r = &recovered[0];
    assert!(
        r.to_string_lossy().ends_with(".pcapng.zst"),
        "{}",
        r.display()
    );
    let bytes = std::fs::read(r).expect("read");
    assert_eq!(
        &bytes[bytes.len() - 4..],
        &SEEKABLE_FOOTER,
        "a seek table was added"
    );
    let d = sc.path("recovered.pcapng");
    std::fs::write(&d, zstd_dc(r)).expect("write");
    assert_holds_up_to_the_flush(&d, killed);
    // It is indexed, and a query reads it through its frames as tcpdump reads it.
    assert_recovered_answers(&sc, r, &d, &[]);
}

/// The file being written in `sc` answers a query for UDP (with the words `more` before
/// `-r`): more than 50 packets, up to the last flush.
fn assert_live_answers(sc: &Scratch, more: &[&str]) {
    let live = sc.path("live.pcapng");
    let mut a = more.to_vec();
    a.extend(["-r", s(&sc.0), "udp"]);
    let v = query(&live, &a);
    assert_eq!(u(&v, "files_live"), 1, "{v}");
    assert!(u(&v, "packets") > 50, "{v}");
}

/// The recovered file `r` is indexed, and a query of it for UDP (with the words `more`
/// before `-r`) answers what tcpdump reads of `d`, its capture decoded: more than 100
/// packets.
fn assert_recovered_answers(sc: &Scratch, r: &Path, d: &Path, more: &[&str]) {
    assert!(sc
        .path(&format!("{}.idx", r.file_name().unwrap().to_string_lossy()))
        .exists());
    let out = sc.path("q.pcapng");
    let mut a = more.to_vec();
    a.extend(["-r", s(r), "udp"]);
    let v = query(&out, &a);
    assert_eq!(u(&v, "files_indexed"), 1, "{v}");
    assert_eq!(
        util::packets(&out).len() as u64,
        util::tcpdump_packets(d, "udp")
    );
    assert!(util::tcpdump_packets(d, "udp") > 100);
}

#[test]
#[ignore = "needs root"]
fn issue38_serve_records_compressed_from_its_config_key() {
    if !util::need("tcpreplay") || !util::need("zstd") || !util::need("tcpdump") {
        return;
    }
    let sc = Scratch::new("compress-serve");
    let (mix, n) = write_mix(&sc, 200);
    let lab = Lab::new(1);
    let rec = sc.path("rec");
    std::fs::create_dir(&rec).expect("recording folder");
    // The config key has the flag's name.
    let conf = sc.path("serve.toml");
    std::fs::write(&conf, "compress = \"zstd\"\n").expect("write config");
    let args = util::recording_daemon_args(&rec, &["--config", s(&conf)]);
    let d = util::Daemon::start(
        &lab,
        &sc,
        &args.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    let sent = crate::cutoff::replay_into(&lab, &mix);
    assert!(sent > 0 && sent <= n);
    let series = "corecap_recording_packets_total{interface=\"cap0\"}";
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let o = d.request_ok(&["metrics"]);
        let t = String::from_utf8_lossy(&o.stdout).into_owned();
        if crate::cutoff::sample(&t, series).unwrap_or(0) >= sent {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the recording never took the mix:\n{t}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let (ok, _) = d.stop();
    assert!(ok, "serve stops cleanly");
    let files = captures(&rec);
    assert!(files.len() >= 2, "rotated: {files:?}");
    let mut packets = 0;
    for (name, f) in &files {
        assert!(name.ends_with(".pcapng.zst"), "{name}");
        let bytes = std::fs::read(f).expect("read");
        assert_eq!(&bytes[bytes.len() - 4..], &SEEKABLE_FOOTER, "{name}");
        let d = sc.path("dc.pcapng");
        std::fs::write(&d, zstd_dc(f)).expect("write");
        let n = util::tcpdump_packets(&d, "");
        assert_eq!(n, util::packets(f).len() as u64, "{name}");
        packets += n;
    }
    assert_eq!(
        packets, sent,
        "every packet sent is in the compressed files"
    );
    // A query over the folder reads the frames through the indexes.
    let out = sc.path("q.pcapng");
    let v = query(&out, &["-r", s(&rec), "tcp port 443"]);
    assert_eq!(u(&v, "files_scanned"), 0, "{v}");
    assert_eq!(
        util::packets(&out).len() as u64,
        util::tcpdump_packets(&mix, "tcp port 443")
    );
}

#[test]
#[ignore = "needs root"]
fn issue38_a_full_disk_ends_a_compressed_file_on_a_whole_frame() {
    if !util::need("zstd") || !util::need("tcpdump") {
        return;
    }
    let sc = Scratch::new("compress-full");
    let (mix, n) = write_mix(&sc, 1500);
    let disk = util::SmallDisk::new("3m");
    let rec = disk.0.path("rec.pcapng");
    // The least compression zstd has: the disk fills well before the mix ends.
    let v = replay_to_a_full_disk(&mix, &["-w", s(&rec), "--compress", "zstd:-131072"]);
    let f = disk.0.path("rec.pcapng.zst");
    let bytes = std::fs::read(&f).expect("the file is named");
    // Cut back to its last whole frame on disk: a zstd stream that decompresses whole, and
    // holds exactly the packets the summary says were written.
    let kept = assert_keeps_what_was_written(&sc, &f, &v, n);
    if bytes.ends_with(&SEEKABLE_FOOTER) {
        // With its seek table, it is read by frames.
        let out = sc.path("q.pcapng");
        let q = query(&out, &["-r", s(&f)]);
        assert_eq!(u(&q, "packets"), kept, "{q}");
    }
}

/// Replays `mix` with `args` onto a disk too small for it: the capture fails as the disk
/// is full. Returns its summary.
fn replay_to_a_full_disk(mix: &Path, args: &[&str]) -> Value {
    let (o, v) = util::replay(mix, args);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success() && err.contains("No space left on device"),
        "{err}"
    );
    v
}

/// The zstd stream `zst` decompresses whole and holds exactly the packets the summary `v`
/// says were written: some of the `n` sent, and no more. Returns how many.
fn assert_keeps_what_was_written(sc: &Scratch, zst: &Path, v: &Value, n: u64) -> u64 {
    let d = sc.path("dc.pcapng");
    std::fs::write(&d, zstd_dc(zst)).expect("write");
    let kept = util::tcpdump_packets(&d, "");
    assert!(kept > 0 && kept < n, "{kept} of {n}");
    assert_eq!(u(v, "packets"), kept, "{v}");
    assert_eq!(u(v, "kernel_packets"), kept + u(&v["drops"], "disk"), "{v}");
    kept
}

/// The capture files in `dir` whose names end in `ext`, by name (no parts).
fn files_ending(dir: &Path, ext: &str) -> BTreeMap<String, PathBuf> {
    std::fs::read_dir(dir)
        .expect("read dir")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            let n = p.file_name().unwrap().to_string_lossy().into_owned();
            n.ends_with(ext) && !n.starts_with('.')
        })
        .map(|p| (p.file_name().unwrap().to_string_lossy().into_owned(), p))
        .collect()
}

#[test]
fn issue38_compress_then_seal_answers_as_the_plain_recording() {
    if !util::need("zstd") || !util::need("tcpdump") {
        return;
    }
    let sc = Scratch::new("compress-seal");
    let (mix, n) = write_mix(&sc, 400);
    let key = util::keygen(&sc, "k.key");
    let (plain, _) = record_both(&sc, &mix, &[]);
    let (sealed, both) = (sc.path("sealed"), sc.path("both"));
    let seal = ["--encrypt", "aes", "--key-file", &key];
    for (dir, more) in [(&sealed, &[][..]), (&both, &["--compress", "zstd"][..])] {
        std::fs::create_dir_all(dir).expect("mkdir");
        let rec = dir.join("rec.pcapng.sealed");
        let mut a = vec!["-w", s(&rec), "-b", "filesize:400"];
        a.extend_from_slice(&seal);
        a.extend_from_slice(more);
        let (o, v) = util::replay(&mix, &a);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        assert_eq!(v["balanced"], true, "{v}");
    }
    let (sf, bf) = (
        files_ending(&sealed, ".sealed"),
        files_ending(&both, ".sealed"),
    );
    assert!(sf.len() >= 3, "rotated: {sf:?}");
    assert_eq!(sf.len(), bf.len(), "{sf:?} {bf:?}");
    let (mut sealed_bytes, mut both_bytes, mut packets) = (0u64, 0u64, 0u64);
    for (i, ((_, s_file), (bn, b_file))) in sf.iter().zip(&bf).enumerate() {
        // Named by the store's rules: rotated before the three extensions.
        assert_eq!(*bn, format!("rec_{:05}.pcapng.zst.sealed", i + 1));
        assert!(both.join(format!("{bn}.idx")).exists(), "{bn} is indexed");
        let bytes = std::fs::read(b_file).expect("read");
        assert_eq!(&bytes[..8], b"CORECAPS", "{bn} is sealed");
        // Unsealed, it is a compressed recording: zstd frames ended by a seek table, which
        // decompress to the capture the sealed recording holds.
        let (zst, pcapng) = (
            sc.path(&format!("{bn}.zst")),
            sc.path(&format!("{bn}.pcapng")),
        );
        let o = util::decrypt(b_file, &zst, &key);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let z = std::fs::read(&zst).expect("read");
        assert_eq!(&z[..4], &[0x28, 0xb5, 0x2f, 0xfd], "{bn} holds zstd");
        assert_eq!(
            &z[z.len() - 4..],
            &SEEKABLE_FOOTER,
            "{bn} ends in a seek table"
        );
        let o = util::decrypt(s_file, &pcapng, &key);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let d = zstd_dc(&zst);
        assert!(
            d == std::fs::read(&pcapng).expect("read"),
            "{bn} is the sealed file's capture, compressed"
        );
        let dfile = sc.path(&format!("{bn}.dc"));
        std::fs::write(&dfile, &d).expect("write");
        packets += util::tcpdump_packets(&dfile, "");
        sealed_bytes += std::fs::metadata(s_file).unwrap().len();
        both_bytes += bytes.len() as u64;
    }
    assert_eq!(packets, n);
    assert!(
        both_bytes * 2 < sealed_bytes,
        "compressed and sealed {both_bytes} of sealed {sealed_bytes}"
    );

    // A query (filter and window) answers from the indexes, decrypting and decompressing
    // the chunks it reads, as tcpdump over the plain recording.
    let (_, _, window) = middle_half(&mix);
    let filter = "tcp port 80 or udp port 53";
    let (all, by_tcpdump) = plain_by_tcpdump(&sc, &plain, &window, filter);
    assert!(by_tcpdump > 0);
    // Each file's chunks are decrypted, then their frames decompressed.
    let (answers, read): (Vec<_>, Vec<_>) = [&sealed, &both]
        .into_iter()
        .map(|dir| indexed_query(&sc, dir, &window, &["--key-file", &key], filter, bf.len()))
        .unzip();
    assert!(
        read[1] * 2 < read[0],
        "bytes read: compressed and sealed {}, sealed {}",
        read[1],
        read[0]
    );
    assert_eq!(answers[0].len() as u64, by_tcpdump);
    assert!(
        answers[1] == answers[0],
        "the compressed and sealed recording answers as the sealed one"
    );
    let tcpdump_out = sc.path("tcpdump-window.pcap");
    let o = Command::new("tcpdump")
        .args(["-r", s(&all), "-w", s(&tcpdump_out), filter])
        .output()
        .expect("run tcpdump");
    assert!(o.status.success());
    assert!(
        answers[1] == util::packets(&tcpdump_out),
        "the compressed and sealed recording answers as tcpdump over the plain one"
    );

    // By Community ID: one long flow's packets.
    let args = ["--key-file", &key, "-r", s(&both)];
    assert_flow_answers(&sc, long_tcp_flow(&plain), &args, &plain);
}

#[test]
#[ignore = "needs root"]
fn issue38_a_killed_compressed_and_sealed_recorder_leaves_a_part_the_next_start_recovers() {
    if !util::need("zstd") || !util::need("tcpdump") {
        return;
    }
    let lab = Lab::new(1);
    let sc = Scratch::new("compress-seal-kill");
    let key = util::keygen(&sc, "k.key");
    let rec = sc.path("rec.pcapng.sealed");
    let args = [
        "--compress",
        "zstd",
        "--encrypt",
        "aes",
        "--key-file",
        &key,
        "--flush-interval",
        "1",
        "-b",
        "filesize:100000",
    ];
    let mut gen = slow_traffic(&lab);
    let cap = lab.capture_to(&rec, &args);
    std::thread::sleep(Duration::from_millis(3500));
    // The file being written answers queries: its sealed chunks up to the last flush,
    // decrypted, then decompressed.
    assert_live_answers(&sc, &["--key-file", &key]);
    let killed = now_s();
    cap.kill();
    let _ = gen.kill();
    let _ = gen.wait();
    let part = sc.path(".rec_00001.pcapng.zst.sealed.part");
    assert!(part.exists(), "the killed recorder left its part");
    // The next start recovers it under a name of its own, its whole chunks kept.
    let cap = lab.capture_to(&rec, &args);
    let _ = cap.stop();
    assert!(!part.exists(), "the part was recovered");
    let recovered: Vec<PathBuf> = files_ending(&sc.0, ".sealed")
        .into_values()
        .filter(|p| p.to_string_lossy().contains(".recovered-"))
        .collect();
    assert_eq!(recovered.len(), 1, "{:?}", files_ending(&sc.0, ""));
    let r = &recovered[0];
    assert!(
        r.to_string_lossy().ends_with(".pcapng.zst.sealed"),
        "{}",
        r.display()
    );
    // Unsealed, it is whole zstd frames: the capture up to the last flush.
    let zst = sc.path("recovered.pcapng.zst");
    let o = util::decrypt(r, &zst, &key);
    assert!(
        std::fs::metadata(&zst).is_ok_and(|m| m.len() > 0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let d = sc.path("recovered.pcapng");
    std::fs::write(&d, zstd_dc(&zst)).expect("write");
    assert_holds_up_to_the_flush(&d, killed);
    // It is indexed, and a query reads it by its chunks as tcpdump reads it.
    assert_recovered_answers(&sc, r, &d, &["--key-file", &key]);
}

#[test]
#[ignore = "needs root"]
fn issue38_a_full_disk_ends_a_compressed_and_sealed_file_on_a_whole_chunk() {
    if !util::need("zstd") || !util::need("tcpdump") {
        return;
    }
    let sc = Scratch::new("compress-seal-full");
    let (mix, n) = write_mix(&sc, 1500);
    let key = util::keygen(&sc, "k.key");
    let disk = util::SmallDisk::new("3m");
    let rec = disk.0.path("rec.pcapng.sealed");
    let v = replay_to_a_full_disk(
        &mix,
        &[
            "-w",
            s(&rec),
            "--compress",
            "zstd:-131072",
            "--encrypt",
            "aes",
            "--key-file",
            &key,
        ],
    );
    let f = disk.0.path("rec.pcapng.zst.sealed");
    assert!(f.exists(), "the file is named");
    // Cut back to its last whole chunk: it unseals (without a final chunk) to whole zstd
    // frames that hold exactly the packets the summary says were written.
    let zst = sc.path("full.pcapng.zst");
    let o = util::decrypt(&f, &zst, &key);
    assert!(
        std::fs::metadata(&zst).is_ok_and(|m| m.len() > 0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let kept = assert_keeps_what_was_written(&sc, &zst, &v, n);
    // A query reads it whole, decrypted and decompressed.
    let out = sc.path("q.pcapng");
    let q = query(&out, &["--key-file", &key, "-r", s(&f)]);
    assert_eq!(u(&q, "packets"), kept, "{q}");
}
