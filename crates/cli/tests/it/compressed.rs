//! Compressed and older captures (issue 17, item 5): gzip, zstd and lz4 files, and
//! Kuznetzov's modified pcap, read wherever corecap reads a capture (`capture -r`,
//! `query`, `index`), chosen by magic number and giving exactly the plain file's packets.
//! A compressed stream cut short or damaged keeps the packets before the damage and says
//! what happened.

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::util::{corecap, need, secs, tshark_count, u, udp_frame, Scratch, T0};
use corecap_wire::{CaptureReader, Epb, InterfaceDesc, PcapWriter, PcapngWriter, ReadError};
use serde_json::Value;

/// Packet `i` of the fixtures: host 10.1.h.1 with h = i / 500, port 53 for every third,
/// 1 ms apart from `t0`; the length varies.
fn packet(i: u32) -> Vec<u8> {
    let dp = if i.is_multiple_of(3) { 53 } else { 6000 };
    let dst = [10, 1, (i / 500) as u8, 1];
    udp_frame([10, 0, 0, 1], dst, 1024, dp, 64 + (i % 200) as usize)
}

/// A pcap (nanoseconds) of `n` packets.
fn pcap_bytes(n: u32, t0: u64) -> Vec<u8> {
    let mut w = PcapWriter::new(Vec::new(), 1, 65535).unwrap();
    for i in 0..n {
        let f = packet(i);
        w.write_packet(t0 + u64::from(i) * 1_000_000, &f, f.len() as u32, None)
            .unwrap();
    }
    w.into_inner()
}

/// A pcapng of `n` packets on two interfaces, with queues and hashes.
fn pcapng_bytes(n: u32, t0: u64) -> Vec<u8> {
    let ifs = [
        InterfaceDesc::ethernet("eth0@0", 0),
        InterfaceDesc::ethernet("eth0@1", 0),
    ];
    let mut w = PcapngWriter::new(Vec::new(), "test", &ifs).unwrap();
    for i in 0..n {
        let f = packet(i);
        w.write_epb(&Epb {
            if_id: i % 2,
            ts_ns: t0 + u64::from(i) * 1_000_000,
            data: &f,
            orig_len: f.len() as u32,
            queue: Some(i % 2),
            hash: Some(i),
            ..Epb::default()
        })
        .unwrap();
    }
    w.into_inner()
}

/// Kuznetzov's modified pcap (magic 0xa1b2cd34, microseconds, 24-byte record headers).
fn kuznetzov_bytes(n: u32, t0: u64, big: bool) -> Vec<u8> {
    let w32 = |v: u32| {
        if big {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        }
    };
    let w16 = |v: u16| {
        if big {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        }
    };
    let mut b = Vec::new();
    b.extend_from_slice(&w32(0xa1b2_cd34));
    b.extend_from_slice(&w16(2));
    b.extend_from_slice(&w16(4));
    b.extend_from_slice(&[0; 8]);
    b.extend_from_slice(&w32(65535));
    b.extend_from_slice(&w32(1));
    for i in 0..n {
        let f = packet(i);
        let ts = t0 + u64::from(i) * 1_000_000;
        b.extend_from_slice(&w32((ts / 1_000_000_000) as u32));
        b.extend_from_slice(&w32((ts % 1_000_000_000 / 1000) as u32));
        b.extend_from_slice(&w32(f.len() as u32));
        b.extend_from_slice(&w32(f.len() as u32));
        b.extend_from_slice(&w32(2)); // ifindex
        b.extend_from_slice(&w16(0x0800)); // protocol
        b.extend_from_slice(&[0, 0]); // pkt_type, pad
        b.extend_from_slice(&f);
    }
    b
}

fn gzip(b: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(b).unwrap();
    e.finish().unwrap()
}

/// With a checksum, as the `zstd` tool writes.
fn zstd(b: &[u8]) -> Vec<u8> {
    let mut e = zstd::stream::write::Encoder::new(Vec::new(), 3).unwrap();
    e.include_checksum(true).unwrap();
    e.write_all(b).unwrap();
    e.finish().unwrap()
}

/// With a content checksum, as the `lz4` tool writes; 64 KiB blocks.
fn lz4(b: &[u8]) -> Vec<u8> {
    let info = lz4_flex::frame::FrameInfo::new()
        .content_checksum(true)
        .block_size(lz4_flex::frame::BlockSize::Max64KB);
    let mut e = lz4_flex::frame::FrameEncoder::with_frame_info(info, Vec::new());
    e.write_all(b).unwrap();
    e.finish().unwrap()
}

fn write(p: &Path, b: &[u8]) -> PathBuf {
    std::fs::write(p, b).unwrap();
    p.to_owned()
}

type Packets = Vec<(u64, Vec<u8>, u32, Option<u32>)>;

/// A compressor of the fixtures.
type Pack = fn(&[u8]) -> Vec<u8>;

/// Every packet of a file, and the error that ended it.
fn read(p: &Path) -> (Packets, Option<ReadError>) {
    let mut r = match CaptureReader::open(p) {
        Ok(r) => r,
        Err(e) => return (Vec::new(), Some(e)),
    };
    let mut v = Vec::new();
    loop {
        match r.next_packet() {
            Ok(Some(x)) => v.push((x.ts_ns, x.data.to_vec(), x.orig_len, x.queue)),
            Ok(None) => return (v, None),
            Err(e) => return (v, Some(e)),
        }
    }
}

#[test]
fn issue17_each_form_reads_as_the_plain_file() {
    let s = Scratch::new("forms");
    let n = 3000;
    let plains = [
        ("a.pcap", pcap_bytes(n, T0)),
        ("a.pcapng", pcapng_bytes(n, T0)),
        ("k-le.pcap", kuznetzov_bytes(n, T0, false)),
        ("k-be.pcap", kuznetzov_bytes(n, T0, true)),
    ];
    let tshark = need("tshark");
    for (name, bytes) in &plains {
        let plain = write(&s.path(name), bytes);
        let (want, err) = read(&plain);
        assert!(err.is_none(), "{name}: {err:?}");
        assert_eq!(want.len(), n as usize, "{name}");
        if name.starts_with('k') {
            // The same packets as the classic pcap (microsecond timestamps).
            let (classic, _) = read(&s.path("a.pcap"));
            assert!(want
                .iter()
                .zip(&classic)
                .all(|(k, c)| (k.0, &k.1, k.2) == (c.0, &c.1, c.2)));
        }
        // The file name says nothing: detection is by magic number.
        for (ext, z) in [
            ("gz", gzip(bytes)),
            ("zst", zstd(bytes)),
            ("lz4", lz4(bytes)),
            ("bin", gzip(bytes)),
        ] {
            let p = write(&s.path(&format!("{name}.{ext}")), &z);
            let (got, err) = read(&p);
            assert!(err.is_none(), "{name}.{ext}: {err:?}");
            assert!(
                got == want,
                "{name}.{ext}: packets differ from the plain file's"
            );
            if tshark && ext == "gz" {
                assert_eq!(tshark_count(&p), Some(n as usize), "tshark -r {name}.{ext}");
            }
        }
        if tshark {
            assert_eq!(tshark_count(&plain), Some(n as usize), "tshark -r {name}");
        }
    }
}

/// `corecap capture -r FILE --json`: the summary.
fn capture_r(files: &[&Path], filter: &[&str]) -> (Value, String, Option<i32>) {
    let mut a = vec![
        "capture",
        "--count-only",
        "--json",
        "--stats-interval",
        "0",
        "--workers",
        "2",
    ];
    for f in files {
        a.extend(["-r", f.to_str().unwrap()]);
    }
    a.extend_from_slice(filter);
    let o = corecap(&a);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(!err.contains("panicked"), "{err}");
    let out = String::from_utf8_lossy(&o.stdout);
    let v: Value = out
        .lines()
        .last()
        .and_then(|l| serde_json::from_str(l).ok())
        .unwrap_or_else(|| panic!("no summary: {out} / {err}"));
    (v, err, o.status.code())
}

#[test]
fn issue17_capture_r_counts_compressed_like_plain() {
    let s = Scratch::new("capture-r");
    let ng = pcapng_bytes(5000, T0);
    let plain = write(&s.path("x.pcapng"), &ng);
    let (want, _, code) = capture_r(&[&plain], &[]);
    assert_eq!(code, Some(0));
    assert_eq!(u(&want, "packets"), 5000, "{want}");
    let (want53, _, _) = capture_r(&[&plain], &["udp", "port", "53"]);
    assert_eq!(u(&want53, "packets"), 1667, "{want53}");
    for (ext, z) in [("gz", gzip(&ng)), ("zst", zstd(&ng)), ("lz4", lz4(&ng))] {
        let p = write(&s.path(&format!("x.pcapng.{ext}")), &z);
        let (v, err, code) = capture_r(&[&p], &[]);
        assert_eq!(code, Some(0), "{ext}: {err}");
        assert_eq!(u(&v, "packets"), u(&want, "packets"), "{ext}: {v}");
        assert!(v["balanced"].as_bool().unwrap_or(false), "{v}");
        let (v, _, _) = capture_r(&[&p], &["udp", "port", "53"]);
        assert_eq!(u(&v, "packets"), u(&want53, "packets"), "{ext}: {v}");
    }
    // Kuznetzov's format, gzipped, as a second input.
    let k = write(&s.path("k.pcap.gz"), &gzip(&kuznetzov_bytes(300, T0, true)));
    let (v, err, code) = capture_r(&[&plain, &k], &[]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(u(&v, "packets"), 5300, "{v}");
}

/// Runs `corecap query --json -w OUT ARGS`: the packets written and the summary.
fn query(args: &[&str], s: &Scratch, tag: &str) -> (Packets, Value, String) {
    let out = s.path(&format!("{tag}.out.pcapng"));
    let mut a = vec!["query", "--force", "--json", "-w", out.to_str().unwrap()];
    a.extend_from_slice(args);
    let o = corecap(&a);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "query {args:?}: {err}");
    let v: Value = serde_json::from_slice(&o.stdout).expect("query prints JSON");
    let (p, e) = read(&out);
    assert!(e.is_none(), "{e:?}");
    assert_eq!(p.len() as u64, u(&v, "packets"), "{v}");
    (p, v, err)
}

#[test]
fn issue17_query_over_compressed_files_equals_plain() {
    let s = Scratch::new("query");
    let (plain, packed) = (s.path("plain"), s.path("packed"));
    std::fs::create_dir_all(&plain).unwrap();
    std::fs::create_dir_all(&packed).unwrap();
    // Four files of 4000 packets, 4 s each, one after the other.
    let files = [
        ("a.pcap", pcap_bytes(4000, T0)),
        ("b.pcapng", pcapng_bytes(4000, T0 + 4_000_000_000)),
        ("c.pcapng", pcapng_bytes(4000, T0 + 8_000_000_000)),
        ("d.pcap", kuznetzov_bytes(4000, T0 + 12_000_000_000, false)),
    ];
    let packs: [(&str, Pack); 4] = [("gz", gzip), ("zst", zstd), ("lz4", lz4), ("gz", gzip)];
    for ((name, bytes), (ext, pack)) in files.iter().zip(packs) {
        write(&plain.join(name), bytes);
        write(&packed.join(format!("{name}.{ext}")), &pack(bytes));
    }
    // The plain files are indexed, as a recording would be; the compressed ones cannot be.
    let o = corecap(&["index", plain.join("b.pcapng").to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let gz = packed.join("a.pcap.gz");
    let o = corecap(&["index", gz.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains("compressed files are not indexed"),
        "index of a .gz: {err}"
    );
    assert!(!corecap_index::sidecar_path(&gz).exists());
    let (from, to) = (secs(T0 + 2_500_000_000), secs(T0 + 13_000_000_000));
    let cases: [&[&str]; 4] = [
        &[],
        &["host 10.1.3.1"],
        &["--from", &from, "--to", &to, "udp port 53"],
        &["--from", &from, "--to", &to],
    ];
    for (k, extra) in cases.iter().enumerate() {
        let mut a = vec![plain.to_str().unwrap()];
        a.extend_from_slice(extra);
        let (want, wv, _) = query(&a, &s, &format!("p{k}"));
        let mut a = vec![packed.to_str().unwrap()];
        a.extend_from_slice(extra);
        let (got, v, err) = query(&a, &s, &format!("c{k}"));
        assert!(!want.is_empty(), "{extra:?}: {wv}");
        assert_eq!(got.len(), want.len(), "{extra:?}: {v}");
        assert!(
            got == want,
            "{extra:?}: packets differ from the plain answer"
        );
        assert_eq!((u(&v, "files"), u(&v, "files_scanned")), (4, 4), "{v}");
        assert_eq!(u(&v, "files_truncated"), 0, "{v}");
        assert!(err.contains("gzip-compressed, scanned whole"), "{err}");
    }
    // A compressed file that holds no capture: skipped in a directory, refused by name.
    let junk = write(&packed.join("notes.txt.gz"), &gzip(b"not a capture\n"));
    let (got, v, err) = query(&[packed.to_str().unwrap()], &s, "junk");
    assert_eq!(got.len(), 16_000, "{v}");
    assert!(
        err.contains("skipped 1 files that are not captures"),
        "{err}"
    );
    let o = corecap(&["query", "-w", "-", junk.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("notes.txt.gz: not a pcap, pcapng or sealed capture file"),
        "{err}"
    );
    let o = corecap(&["capture", "-r", junk.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("notes.txt.gz: malformed record at byte offset 0: not a pcap or pcapng file"),
        "{err}"
    );
}

#[test]
fn issue17_cut_and_damaged_streams_keep_the_packets_before() {
    let s = Scratch::new("damaged");
    let ng = pcapng_bytes(20_000, T0);
    let (all, _) = read(&write(&s.path("x.pcapng"), &ng));
    for (ext, z) in [("gz", gzip(&ng)), ("zst", zstd(&ng)), ("lz4", lz4(&ng))] {
        let cut = write(&s.path(&format!("cut.pcapng.{ext}")), &z[..z.len() * 2 / 3]);
        let mut bad = z.clone();
        let mid = bad.len() / 2;
        for b in &mut bad[mid..mid + 32] {
            *b ^= 0x5a;
        }
        let bad = write(&s.path(&format!("bad.pcapng.{ext}")), &bad);
        for (p, what) in [(&cut, "cut short"), (&bad, "")] {
            let name = p.file_name().unwrap().to_str().unwrap();
            let (kept, err) = read(p);
            let err = err.unwrap_or_else(|| panic!("{name}: no error"));
            assert!(err.to_string().contains(what), "{name}: {err}");
            assert!(!kept.is_empty() && kept.len() <= all.len(), "{name}");
            // The first packets are the file's own (a damaged deflate stream can hand out
            // some bad bytes before its decoder notices).
            let sure = kept.len().min(all.len() / 4);
            assert!(kept[..sure] == all[..sure], "{name}");
            if what == "cut short" {
                assert!(kept[..] == all[..kept.len()], "{name}");
                assert!(matches!(err, ReadError::Decompress { .. }), "{name}: {err}");
            }

            // capture -r: the packets before, then one error naming the file.
            let (v, stderr, code) = capture_r(&[p], &[]);
            assert_eq!(u(&v, "packets"), kept.len() as u64, "{name}: {v}");
            let msg = format!("{}", p.display());
            let errs = v["errors"].to_string() + &stderr;
            assert!(errs.contains(&msg), "{name}: {errs}");
            assert!(code.is_some(), "{name}");

            // query: answered from the readable part, with a note.
            let (got, qv, qerr) = query(&[p.to_str().unwrap()], &s, name);
            assert_eq!(got.len(), kept.len(), "{name}: {qv}");
            assert_eq!(u(&qv, "files_truncated"), 1, "{qv}");
            assert!(qerr.contains("answered from the readable part"), "{qerr}");
        }
    }
}
