//! The recorder: direct-I/O files, their exact tails, hidden names until whole, rotation
//! with a byte budget, sealed files through the same writer, and a full disk.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::util::{self, u, Lab, Scratch, SmallDisk};

/// Walks a pcapng file block by block: it must end exactly at a block's end.
fn assert_whole_blocks(path: &Path) -> usize {
    let b = std::fs::read(path).expect("read capture");
    let mut at = 0usize;
    let mut blocks = 0;
    while at < b.len() {
        assert!(
            at + 12 <= b.len(),
            "{}: torn block header at {at}",
            path.display()
        );
        let len = u32::from_le_bytes(b[at + 4..at + 8].try_into().expect("4 bytes")) as usize;
        assert!(
            len >= 12 && len.is_multiple_of(4),
            "{}: bad block length",
            path.display()
        );
        assert!(
            at + len <= b.len(),
            "{}: torn block at {at}",
            path.display()
        );
        let trailer = u32::from_le_bytes(b[at + len - 4..at + len].try_into().expect("4"));
        assert_eq!(trailer as usize, len, "{}: block trailer", path.display());
        at += len;
        blocks += 1;
    }
    assert_eq!(at, b.len(), "{}: the file ends on a block", path.display());
    blocks
}

/// Packets as tshark sees them: length and MD5 of each frame, one line each. (Two
/// sockets on one interface stamp the same packet with their own times.)
fn tshark_packets(path: &Path) -> Vec<String> {
    let out = Command::new("tshark")
        .args(["-n", "-r"])
        .arg(path)
        .args(["-o", "frame.generate_md5_hash:TRUE", "-T", "fields"])
        .args(["-e", "frame.len", "-e", "frame.md5_hash"])
        .output()
        .expect("run tshark");
    assert!(
        out.status.success(),
        "tshark -r {}: {}",
        path.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect()
}

/// Two packet lists are equal; says where they first differ.
fn assert_same(a: &[String], b: &[String]) {
    assert_eq!(a.len(), b.len(), "packet counts differ");
    if let Some(i) = (0..a.len()).find(|&i| a[i] != b[i]) {
        panic!("packet {i} differs: {} against {}", a[i], b[i]);
    }
}

/// The names in `dir`, less the folder's own catalog and lease.
/// The pcapng files of a folder, by name.
fn capture_files(dir: &Path) -> Vec<String> {
    names(dir)
        .into_iter()
        .filter(|n| n.ends_with(".pcapng"))
        .collect()
}

fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .expect("read dir")
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| !util::folder_metadata(n))
        .collect();
    v.sort();
    v
}

#[test]
#[ignore = "needs root"]
fn issue16_direct_and_buffered_files_hold_the_same_packets_and_end_exactly() {
    let lab = Lab::new(1);
    let dir = Scratch::new("direct");
    let direct = dir.path("direct.pcapng");
    let buffered = dir.path("buffered.pcapng");
    let a = lab.capture_to(&direct, &["--workers", "1"]);
    let b = lab.capture_to(&buffered, &["--workers", "1", "--no-direct"]);
    // While recording, the file has only its hidden name.
    assert!(
        !direct.exists(),
        "no file under its own name before it is whole"
    );
    assert!(
        dir.path(".direct.pcapng.part").exists(),
        "{:?}",
        names(&dir.0)
    );
    let sent = lab.gen(3000, &["--size", "1514", "--flows", "16"]);
    let (va, vb) = (a.stop(), b.stop());
    assert_eq!(u(&va, "packets"), sent, "{va}");
    assert_eq!(u(&vb, "packets"), sent, "{vb}");
    assert_eq!(va["drops"]["disk"], 0, "{va}");
    // Only the named files, their indexes and their sessions are left: no hidden part
    // files.
    assert_eq!(
        names(&dir.0),
        [
            "buffered.pcapng",
            "buffered.pcapng.idx",
            "buffered.pcapng.sessions",
            "direct.pcapng",
            "direct.pcapng.idx",
            "direct.pcapng.sessions"
        ]
    );
    // The same packets, as tshark reads them; tails exact to the block.
    let (pa, pb) = (tshark_packets(&direct), tshark_packets(&buffered));
    assert_eq!(pa.len() as u64, sent);
    assert_same(&pa, &pb);
    // SHB + IDB + packets + ISB.
    assert_eq!(assert_whole_blocks(&direct), 3 + sent as usize);
    assert_eq!(assert_whole_blocks(&buffered), 3 + sent as usize);
}

#[test]
#[ignore = "needs root"]
fn issue16_pcap_direct_file_is_exact() {
    let lab = Lab::new(1);
    let dir = Scratch::new("pcap");
    let out = dir.path("x.pcap");
    let cap = lab.capture_to(&out, &["--workers", "1", "--pcap"]);
    let sent = lab.gen(1234, &["--size", "700"]);
    assert_eq!(u(&cap.stop(), "packets"), sent);
    // 24-byte header, then 16 + 696 bytes per record (700 on the wire with the FCS):
    // the length is exact.
    let len = std::fs::metadata(&out).expect("file").len();
    assert_eq!(len, 24 + sent * (16 + 696));
    assert_eq!(tshark_packets(&out).len() as u64, sent);
}

#[test]
#[ignore = "needs root"]
fn issue16_rotation_and_retention_keep_the_newest_files_under_the_budget() {
    let lab = Lab::new(1);
    let dir = Scratch::new("retain");
    let base = dir.path("r.pcapng");
    let cap = lab.capture_to(
        &base,
        &["--workers", "1", "-b", "filesize:1000", "--retain", "3M"],
    );
    // 8000 frames of 1000 bytes: about 8.3 MB in files of 1 MB, of which 3 MB are kept.
    let sent = lab.gen(8000, &["--size", "1000"]);
    let v = cap.stop();
    assert_eq!(u(&v, "packets"), sent);
    let files: Vec<PathBuf> = v["files"]
        .as_array()
        .expect("files")
        .iter()
        .map(|f| PathBuf::from(f.as_str().expect("path")))
        .collect();
    let on_disk: Vec<String> = names(&dir.0)
        .into_iter()
        .filter(|n| !corecap_store::names::is_beside(Path::new(n)))
        .collect();
    assert_eq!(
        on_disk.len(),
        files.len(),
        "the summary lists what is kept: {on_disk:?} {files:?}"
    );
    let total: u64 = files
        .iter()
        .map(|f| {
            let idx = corecap_index::sidecar_path(f);
            std::fs::metadata(f).expect("kept file").len()
                + std::fs::metadata(idx).expect("its index").len()
        })
        .sum();
    assert!(total <= 3 << 20, "kept {total} bytes over a 3 MiB budget");
    assert!(files.len() >= 2, "{files:?}");
    let deleted = v["retention"]["deleted_files"].as_u64().expect("retention");
    assert!(deleted >= 4, "{v}");
    assert!(v["retention"]["deleted_bytes"].as_u64().expect("bytes") >= 4 << 20);
    // The newest files are the ones kept: the last numbers of the rotation, each whole.
    let last = files.last().expect("a file");
    let n_last: u32 = last.to_string_lossy()[last.to_string_lossy().len() - 12..][..5]
        .parse()
        .expect("rotation number");
    assert_eq!(n_last as u64, deleted + files.len() as u64);
    let mut kept_packets = 0;
    for f in &files {
        assert_whole_blocks(f);
        kept_packets += tshark_packets(f).len();
    }
    // The newest packets are in the kept files: the last packet sent is among them.
    assert!(kept_packets > 0 && kept_packets < sent as usize);
}

#[test]
#[ignore = "needs root"]
fn issue16_full_disk_ends_with_an_error_and_a_readable_file() {
    let lab = Lab::new(1);
    let disk = SmallDisk::new("2m");
    let out = disk.0.path("full.pcapng");
    let other = Scratch::new("other");
    let ok = other.path("ok.pcapng");
    let cap = lab.capture_to(&out, &["--workers", "1"]);
    let fine = lab.capture_to(&ok, &["--workers", "1"]);
    // 4000 frames of 1514 bytes is 6 MB: the 2 MB disk fills.
    let sent = lab.gen(4000, &["--size", "1514", "--rate", "40000"]);
    let (success, v, err) = cap.stop_any();
    assert!(!success, "a full disk is a failure: {v}");
    assert!(
        err.contains("full.pcapng") && err.contains("No space left on device"),
        "one line naming the file and the OS error: {err}"
    );
    let errors = v["errors"].as_array().expect("errors");
    assert!(!errors.is_empty(), "{v}");
    let delivered = u(&v, "packets");
    let disk_drops = v["drops"]["disk"].as_u64().expect("disk drops");
    assert!(disk_drops > 0 && delivered > 0, "{v}");
    assert_eq!(v["drops"]["app"], 0, "{v}");
    // Every packet the kernel counted is delivered or dropped somewhere.
    assert_eq!(v["balanced"], true, "{v}");
    assert!(u(&v, "kernel_packets") <= sent);
    // The file is named, ends on a whole block and holds exactly the delivered packets.
    assert!(out.exists(), "the cut-back file has its own name");
    assert_whole_blocks(&out);
    assert_eq!(tshark_packets(&out).len() as u64, delivered);
    // Another capture's file is unaffected.
    let w = fine.stop();
    assert_eq!(u(&w, "packets"), sent);
    assert_eq!(tshark_packets(&ok).len() as u64, sent);
}

#[test]
#[ignore = "needs root"]
fn issue16_sealed_files_go_through_the_disk_writer_and_decrypt() {
    let lab = Lab::new(1);
    let dir = Scratch::new("sealed");
    let key = util::keygen(&dir, "k.key");
    let sealed = dir.path("s.pcapng.sealed");
    let plain = dir.path("p.pcapng");
    let cap = lab.capture_to(
        &sealed,
        &["--workers", "1", "--encrypt", "seed", "--key-file", &key],
    );
    let reference = lab.capture_to(&plain, &["--workers", "1"]);
    let sent = lab.gen(5000, &["--size", "1514", "--flows", "8"]);
    assert_eq!(u(&cap.stop(), "packets"), sent);
    assert_eq!(u(&reference.stop(), "packets"), sent);
    let out = dir.path("d.pcapng");
    let d = util::decrypt(&sealed, &out, &key);
    assert!(d.status.success(), "{}", String::from_utf8_lossy(&d.stderr));
    assert_same(&tshark_packets(&out), &tshark_packets(&plain));
}

#[test]
#[ignore = "needs root"]
fn issue16_a_reader_never_sees_a_torn_file() {
    let lab = Lab::new(1);
    let dir = Scratch::new("torn");
    let base = dir.path("t.pcapng");
    let cap = lab.capture_to(&base, &["--workers", "1", "-b", "filesize:1000"]);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reader = {
        let (dir, stop) = (dir.0.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut checked = 0;
            // Relaxed: a flag polled by this reader.
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                for e in std::fs::read_dir(&dir).expect("dir").filter_map(Result::ok) {
                    let name = e.file_name().to_string_lossy().into_owned();
                    if name.starts_with('.') || corecap_store::names::is_beside(Path::new(&name)) {
                        continue;
                    }
                    // A file under its own name is whole: every block complete.
                    assert_whole_blocks(&e.path());
                    checked += 1;
                }
            }
            checked
        })
    };
    let sent = lab.gen(6000, &["--size", "1514", "--rate", "20000"]);
    let v = cap.stop();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let checked = reader.join().expect("the reader found no torn file");
    assert!(checked > 0, "the reader saw files while recording");
    assert_eq!(u(&v, "packets"), sent);
    let total: usize = v["files"]
        .as_array()
        .expect("files")
        .iter()
        .map(|f| tshark_packets(Path::new(f.as_str().expect("path"))).len())
        .sum();
    assert_eq!(total as u64, sent);
}

/// The Uid, NoNewPrivs and CapEff/CapPrm of every thread of `pid`.
fn thread_ids(pid: u32) -> Vec<(String, String, String, String)> {
    crate::util::threads(pid)
        .iter()
        .map(|t| {
            (
                t.field("Uid:"),
                t.field("NoNewPrivs:"),
                t.field("CapEff:"),
                t.field("CapPrm:"),
            )
        })
        .collect()
}

#[test]
#[ignore = "needs root"]
fn issue14_capture_z_user_runs_as_the_user_with_no_capability() {
    use std::os::unix::fs::MetadataExt;
    let lab = Lab::new(1);
    let dir = Scratch::new("user");
    let nobody = 65534;
    std::os::unix::fs::chown(&dir.0, Some(nobody), Some(nobody)).expect("chown");
    let out = dir.path("z.pcapng");
    let cap = lab.capture_to(&out, &["--workers", "1", "-Z", "nobody"]);
    // Every thread runs as nobody, holds no capability and cannot gain any.
    let ids = thread_ids(cap.pid());
    assert!(ids.len() >= 3, "main, worker and disk threads: {ids:?}");
    for (uid, nnp, eff, prm) in &ids {
        assert_eq!(uid, "65534", "{ids:?}");
        assert_eq!(nnp, "1", "{ids:?}");
        assert_eq!(eff, "0000000000000000", "{ids:?}");
        assert_eq!(prm, "0000000000000000", "{ids:?}");
    }
    let sent = lab.gen(2000, &["--size", "600"]);
    assert_eq!(u(&cap.stop(), "packets"), sent);
    // The files are the user's, whole, with their index.
    let m = std::fs::metadata(&out).expect("file");
    assert_eq!((m.uid(), m.mode() & 0o777), (nobody, 0o640));
    let idx = corecap_index::sidecar_path(&out);
    assert_eq!(std::fs::metadata(&idx).expect("index").uid(), nobody);
    assert_eq!(tshark_packets(&out).len() as u64, sent);
}

#[test]
#[ignore = "needs root"]
fn issue14_capture_z_refuses_a_directory_the_user_cannot_write() {
    let lab = Lab::new(1);
    let dir = Scratch::new("user-ro");
    let out = dir.path("z.pcapng");
    let o = lab
        .capture_command()
        .args(["-c", "1", "-Z", "nobody", "-w", out.to_str().expect("utf8")])
        .output()
        .expect("run");
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("nobody") && err.contains("cannot write in"),
        "{err}"
    );
    assert!(!out.exists());
}

#[test]
fn issue22_a_file_source_waits_for_its_writer_and_drops_nothing() {
    // `capture -r` of a file four times the writer's buffers, into a FIFO read slowly: the
    // file source is not live, so it waits for the writer (as `tcpdump -r -w` does) where
    // a ring would count `disk` drops, and every packet comes out, in order, whether one
    // worker writes it or the merge thread does.
    let dir = Scratch::new("file-waits");
    let src = dir.path("src.pcap");
    let n = 90_000u32;
    {
        let f = std::fs::File::create(&src).expect("source file");
        let mut w = corecap_wire::PcapWriter::new(std::io::BufWriter::new(f), 1, 65535)
            .expect("pcap header");
        for i in 0..n {
            let mut frame = util::udp_frame([10, 0, 0, 1], [10, 0, 1, 2], 4000, 53, 1400);
            frame[60..64].copy_from_slice(&i.to_be_bytes());
            w.write_packet(
                1_700_000_000_000_000_000 + u64::from(i) * 1000,
                &frame,
                1400,
                None,
            )
            .expect("write");
        }
        w.into_inner()
            .into_inner()
            .expect("flush")
            .sync_all()
            .expect("sync");
    }
    // One worker writing its own file; two merged into one by the merge thread (which
    // drains what the workers read after the input's end has stopped the capture); and
    // one worker whose last packet is the last `-c` allows (its stop does not drop it).
    for (name, args) in [
        ("own", &["--workers", "1"][..]),
        ("merged", &["--workers", "2", "--merge"][..]),
        ("counted", &["--workers", "1", "-c", "90000"][..]),
    ] {
        let fifo = dir.path(&format!("{name}.fifo"));
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .expect("mkfifo");
        assert!(made.success());
        let copy = dir.path(&format!("{name}.pcapng"));
        let reader = {
            let (fifo, copy) = (fifo.clone(), copy.clone());
            std::thread::spawn(move || {
                use std::io::{Read, Write};
                let mut from = std::fs::File::open(&fifo).expect("open the FIFO");
                let mut to = std::fs::File::create(&copy).expect("copy");
                let mut buf = vec![0u8; 256 << 10];
                // At most a pipe (64 KiB) a millisecond: far slower than a file source
                // formats.
                loop {
                    let k = from.read(&mut buf).expect("read the FIFO");
                    if k == 0 {
                        break;
                    }
                    to.write_all(&buf[..k]).expect("keep");
                    std::thread::sleep(Duration::from_millis(1));
                }
            })
        };
        let mut all = args.to_vec();
        all.extend(["-w", fifo.to_str().unwrap()]);
        let (out, v) = util::replay(&src, &all);
        reader.join().expect("reader");
        assert!(
            out.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(u(&v, "packets"), u64::from(n), "{name}: {v}");
        assert_eq!(v["drops"]["disk"], 0, "{name}: {v}");
        let got = util::packets(&copy);
        assert_eq!(got.len(), n as usize, "{name}");
        for (i, (_, data)) in got.iter().enumerate() {
            assert_eq!(
                data[60..64],
                (i as u32).to_be_bytes(),
                "{name}: packet {i} in order"
            );
        }
    }
}

#[test]
fn issue22_the_start_line_names_the_files_written() {
    // With several workers and no --merge, `-w FILE` writes a file per worker (FILE.wN,
    // FILE.wN_NNNNN when rotated), and with groups a file per member (FILE.gGmI): the
    // start line names them, not FILE alone, and they are the files the folder then
    // holds. One worker rotating writes FILE_NNNNN.
    let dir = Scratch::new("start-line");
    let src = dir.path("src.pcap");
    {
        let f = std::fs::File::create(&src).expect("source file");
        let mut w = corecap_wire::PcapWriter::new(std::io::BufWriter::new(f), 1, 65535)
            .expect("pcap header");
        for i in 0..2000u32 {
            let host = (i % 50) as u8;
            let frame = util::udp_frame([10, 0, 0, host], [10, 0, 1, 2], 4000, 53, 100);
            w.write_packet(
                1_700_000_000_000_000_000 + u64::from(i) * 1000,
                &frame,
                100,
                None,
            )
            .expect("write");
        }
        w.into_inner().into_inner().expect("flush");
    }
    for (name, extra, files, said) in [
        (
            "plain",
            &["--workers", "2", "--per-worker"][..],
            ["rec.w0.pcapng", "rec.w1.pcapng"],
            ["rec.w0.pcapng", "rec.w1.pcapng"],
        ),
        (
            "rotated",
            &["--workers", "2", "-b", "filesize:1000", "--per-worker"][..],
            ["rec.w0_00001.pcapng", "rec.w1_00001.pcapng"],
            ["rec.w0_NNNNN.pcapng", "rec.w1_NNNNN.pcapng"],
        ),
        (
            "groups",
            &["--workers", "2", "--groups", "balance:2"][..],
            ["rec.g0m0.pcapng", "rec.g0m1.pcapng"],
            ["rec.g0m0.pcapng", "rec.g0m1.pcapng"],
        ),
        (
            "one",
            &["--workers", "1", "-b", "filesize:1000"][..],
            ["rec_00001.pcapng", "rec_00001.pcapng"],
            ["rec_NNNNN.pcapng", "rec_NNNNN.pcapng"],
        ),
    ] {
        let out = dir.path(name);
        std::fs::create_dir_all(&out).expect("folder");
        let to = out.join("rec.pcapng");
        let mut args = vec!["-w", to.to_str().expect("utf8")];
        args.extend_from_slice(extra);
        let (o, v) = util::replay(&src, &args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "{name}: {err}");
        assert_eq!(util::u(&v, "packets"), 2000, "{name}");
        let line = err
            .lines()
            .find(|l| l.starts_with("corecap: writing"))
            .unwrap_or_else(|| panic!("{name}: no start line in {err}"));
        for (file, shown) in files.iter().zip(said) {
            assert!(out.join(file).is_file(), "{name}: {file} written");
            let shown = out.join(shown).display().to_string();
            assert!(line.contains(&shown), "{name}: {line:?} names {shown}");
        }
        assert!(!out.join("rec.pcapng").exists(), "{name}: no rec.pcapng");
        assert!(!line.contains("-P writes"), "{name}: {line:?}");
    }
    // A name ending in .pcap: pcapng unless -P (as dumpcap), and the line says so; pcap
    // in microseconds as tcpdump writes it, unless --time-stamp-precision nano.
    for (name, extra, magic, hint) in [
        ("named-pcap", &[][..], [0x0a, 0x0d, 0x0d, 0x0a], true),
        ("pcap", &["--pcap"][..], [0xd4, 0xc3, 0xb2, 0xa1], false),
        (
            "pcap-nano",
            &["-P", "--time-stamp-precision", "nano"][..],
            [0x4d, 0x3c, 0xb2, 0xa1],
            false,
        ),
    ] {
        let out = dir.path(name);
        std::fs::create_dir_all(&out).expect("folder");
        let to = out.join("rec.pcap");
        let mut args = vec!["--workers", "1", "-w", to.to_str().expect("utf8")];
        args.extend_from_slice(extra);
        let (o, v) = util::replay(&src, &args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "{name}: {err}");
        assert_eq!(util::u(&v, "packets"), 2000, "{name}");
        let head = std::fs::read(&to).expect("written");
        assert_eq!(head[..4], magic, "{name}: the file's format");
        let line = err
            .lines()
            .find(|l| l.starts_with("corecap: writing"))
            .unwrap_or_else(|| panic!("{name}: no start line in {err}"));
        assert_eq!(
            line.contains("-P writes classic pcap"),
            hint,
            "{name}: {line:?}"
        );
    }
}

/// A pcapng file of `n` frames of 1000 bytes, one a millisecond from `t0_ns`, as corecap
/// writes it (its section names corecap).
fn earlier_run_file(path: &Path, t0_ns: u64, n: u64) {
    let times = (0..n).map(|i| t0_ns + i * 1_000_000);
    std::fs::write(path, util::udp_pcapng_by("corecap", times, 1000)).expect("write");
}

/// Sets a file's modification time to `secs` after the epoch.
fn set_mtime(path: &Path, secs: u64) {
    let f = std::fs::File::options()
        .write(true)
        .open(path)
        .expect("open");
    f.set_modified(std::time::UNIX_EPOCH + Duration::from_secs(secs))
        .expect("set mtime");
}

/// Issue 40: retention deletes only the capture's own files (not `rec.notes.txt` or
/// `rec_rotate.sh`), oldest packets first even when the clock stepped back (mtimes in the
/// other order), and a start that fails deletes nothing.
#[test]
fn issue40_retention_deletes_only_its_own_files_oldest_packets_first_after_a_good_start() {
    let s = Scratch::new("retain-own");
    let rec = s.path("rec.pcapng");
    let t0 = 1_780_000_000u64;
    for (i, name) in ["rec_00001.pcapng", "rec_00002.pcapng", "rec_00003.pcapng"]
        .into_iter()
        .enumerate()
    {
        let p = s.path(name);
        earlier_run_file(&p, (t0 + 3600 * i as u64) * 1_000_000_000, 100);
        // The clock stepped back between runs: the newest packets have the oldest mtime.
        set_mtime(&p, t0 - 3600 * i as u64);
    }
    for name in ["rec.notes.txt", "rec_rotate.sh"] {
        std::fs::write(s.path(name), "the user's own file\n").expect("write");
        set_mtime(&s.path(name), t0 - 86_400);
    }
    let input = s.path("in.pcapng");
    earlier_run_file(&input, (t0 + 3 * 3600) * 1_000_000_000, 10);
    let rec_s = rec.to_str().expect("utf8");
    let args = [
        "-w",
        rec_s,
        "-b",
        "filesize:1000000",
        "--retain",
        "250K",
        "--workers",
        "1",
    ];
    let before = names(&s.0);

    // Starts that fail (a filter typo, an input that is not there) delete nothing.
    let input_s = input.to_str().expect("utf8");
    for (from, filter) in [(input_s, "tcp port 80 and ((("), ("missing.pcapng", "udp")] {
        let mut a = vec!["capture", "-r", from];
        a.extend(args);
        a.push(filter);
        let o = util::corecap(&a);
        assert!(!o.status.success(), "the start fails");
        assert_eq!(
            names(&s.0),
            before,
            "a failed start deleted files: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }

    let (o, v) = util::replay(&input, &args);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert_eq!(u(&v, "packets"), 10, "{v}");
    let after = names(&s.0);
    for kept in [
        "rec.notes.txt",
        "rec_rotate.sh",
        "rec_00002.pcapng",
        "rec_00003.pcapng",
        "rec_00004.pcapng",
    ] {
        assert!(
            after.iter().any(|n| n == kept),
            "{kept} gone: {after:?}\n{err}"
        );
    }
    assert!(
        !after.iter().any(|n| n == "rec_00001.pcapng"),
        "the oldest packets are deleted: {after:?}\n{err}"
    );
    for left in ["rec.notes.txt", "rec_rotate.sh"] {
        assert!(
            err.lines()
                .any(|l| l.contains("leaves") && l.contains(left) && l.contains("alone")),
            "{left}: {err}"
        );
    }
    assert!(
        err.contains("rec_00001.pcapng"),
        "the deletion is named: {err}"
    );
}

/// `corecap capture -r INPUT -w OUT MORE...`, as it ended.
fn capture_r(input: &Path, out: &Path, more: &[&str]) -> std::process::Output {
    let (i, o) = (input.to_str().expect("utf8"), out.to_str().expect("utf8"));
    util::corecap(&[&["capture", "-r", i, "-w", o][..], more].concat())
}

/// `-w` of a folder says it is a folder (it said the name exists, as of a file it would not
/// write over); and reading files, the start line names no ring, which only an interface has.
#[test]
fn issue40_w_of_a_folder_says_so_and_files_have_no_ring() {
    let s = Scratch::new("w-folder");
    let input = s.path("in.pcapng");
    earlier_run_file(&input, 1_780_000_000 * 1_000_000_000, 10);
    let dir = s.path("out");
    std::fs::create_dir(&dir).expect("dir");
    let o = capture_r(&input, &dir, &[]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("is a directory: -w takes a file's name"),
        "{err}"
    );
    let o = capture_r(&input, &dir.join("x.pcapng"), &[]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    let line = err
        .lines()
        .find(|l| l.contains("capturing on"))
        .expect("the start line");
    assert!(!line.contains("a ring of"), "{line}");
}

/// A ring of files (`-W N` with `-C`) says in its summary how many older files it deleted,
/// and names each in the folder's record of deletions with its packets' times, so a query
/// of their time says the file count took them (it said only that nothing was on record).
#[test]
fn issue40_a_ring_of_files_records_what_it_deleted() {
    let s = Scratch::new("ring-deleted");
    let input = s.path("in.pcapng");
    let t0 = 1_780_000_000u64;
    earlier_run_file(&input, t0 * 1_000_000_000, 4000);
    let dir = s.path("rec");
    std::fs::create_dir(&dir).expect("dir");
    let o = capture_r(&input, &dir.join("r.pcapng"), &["-C", "1", "-W", "2"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    let left = names(&dir)
        .into_iter()
        .filter(|n| n.ends_with(".pcapng"))
        .count();
    assert_eq!(left, 2, "{err}");
    let log = std::fs::read_to_string(dir.join(".corecap-deleted")).expect("the record");
    let lines: Vec<serde_json::Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON"))
        .collect();
    assert!(lines.len() >= 2, "{log}");
    assert!(lines.iter().all(|l| l["rule"] == "files"), "{log}");
    assert_eq!(lines[0]["file"], "r_00001.pcapng", "{log}");
    assert_eq!(lines[0]["first_ns"], t0 * 1_000_000_000, "{log}");
    let said = format!("deleted {} older files of this recording", lines.len());
    assert!(err.contains(&said), "{err}");
    let (from, to) = (t0.to_string(), (t0 + 1).to_string());
    let o = util::corecap(&[
        "query",
        dir.to_str().expect("utf8"),
        "--from",
        &from,
        "--to",
        &to,
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("by the file count (-b files:N)"), "{err}");
}

/// Two files read into one (`-r A -r B`) are read one after the other: the start line says
/// the file is in time order within each input, not across them, where it said "one file
/// in time order" of a file tshark finds out of order.
#[test]
fn issue40_two_inputs_are_not_said_to_be_merged_by_time() {
    let s = Scratch::new("two-inputs");
    let (a, b) = (s.path("a.pcapng"), s.path("b.pcapng"));
    earlier_run_file(&a, 1_780_000_100 * 1_000_000_000, 10);
    earlier_run_file(&b, 1_780_000_000 * 1_000_000_000, 10);
    let out = s.path("out.pcapng");
    let o = capture_r(&a, &out, &["-r", b.to_str().expect("utf8")]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("not across them"), "{err}");
    assert!(!err.contains("one file in time order"), "{err}");
    let o = capture_r(&a, &s.path("one.pcapng"), &[]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("one file in time order"));
}

/// A `--retain` budget given as a bare number (bytes) that is less than one rotated file is
/// refused before anything is written: `-C 2 --retain 500` meant 500 MB, and would have
/// kept one file; with a unit, the same small budget is taken as meant.
#[test]
fn issue40_a_bare_retain_under_one_file_is_refused() {
    let s = Scratch::new("retain-bare");
    let input = s.path("in.pcapng");
    earlier_run_file(&input, 1_780_000_000 * 1_000_000_000, 10);
    let rec = s.path("rec.pcapng");
    let run = |retain: &str| capture_r(&input, &rec, &["-C", "2", "--retain", retain]);
    let o = run("500");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("less than one file (2000000 bytes"), "{err}");
    assert!(err.contains("with its unit"), "{err}");
    assert_eq!(names(&s.0), ["in.pcapng"], "nothing written: {err}");
    let o = run("500K");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// `-r` of a pipe (a FIFO, or a shell's pipe as `/dev/stdin`) is refused at once with a
/// message that says to save the stream to a file: the file is read twice (its interfaces,
/// then its packets), and the reader used to take the pipe's head, find no capture in the
/// rest, and wait for a second writer that never came. Nothing is written.
#[test]
fn issue40_capture_of_a_pipe_is_refused_and_writes_nothing() {
    let s = Scratch::new("pipe-in");
    let fifo = s.path("in.fifo");
    let made = Command::new("mkfifo").arg(&fifo).status().expect("mkfifo");
    assert!(made.success());
    let out = s.path("out.pcapng");
    // Bounded: a reader that waits on the pipe is ended by timeout(1).
    let o = Command::new("timeout")
        .args(["20", util::bin(), "capture", "-r"])
        .arg(&fifo)
        .arg("-w")
        .arg(&out)
        .output()
        .expect("run");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("a pipe or a device, not a file"), "{err}");
    assert_eq!(names(&s.0), ["in.fifo"], "nothing written: {err}");
}

/// Retention deletes only what corecap can tell it wrote, and never a file the capture
/// reads: of three files under the capture's names, the oldest written by another program
/// (its section names another one) and the newest being read (`-r`) are left alone, each
/// with a note saying why, and only corecap's own earlier file goes to fit the budget.
#[test]
fn issue40_retention_leaves_what_another_program_wrote_and_what_the_capture_reads() {
    let s = Scratch::new("retain-foreign");
    let rec = s.path("rec.pcapng");
    let t0 = 1_780_000_000u64;
    let times = |h: u64| (0..100).map(move |i| (t0 + 3600 * h) * 1_000_000_000 + i * 1_000_000);
    std::fs::write(
        s.path("rec_00001.pcapng"),
        util::udp_pcapng_by("Editcap", times(0), 1000),
    )
    .expect("write");
    earlier_run_file(
        &s.path("rec_00002.pcapng"),
        (t0 + 3600) * 1_000_000_000,
        100,
    );
    let input = s.path("rec_00003.pcapng");
    earlier_run_file(&input, (t0 + 7200) * 1_000_000_000, 100);
    let args = [
        "-w",
        rec.to_str().expect("utf8"),
        "-b",
        "filesize:1000000",
        "--retain",
        "50K",
        "--workers",
        "1",
    ];
    let (o, v) = util::replay(&input, &args);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert_eq!(u(&v, "packets"), 100, "{v}");
    let after = names(&s.0);
    for (kept, why) in [
        ("rec_00001.pcapng", "another program wrote it"),
        ("rec_00003.pcapng", "this capture reads it"),
    ] {
        assert!(
            after.iter().any(|n| n == kept),
            "{kept} gone: {after:?}\n{err}"
        );
        assert!(
            err.lines()
                .any(|l| l.contains(kept) && l.contains("alone") && l.contains(why)),
            "{kept}: {err}"
        );
    }
    assert!(
        !after.iter().any(|n| n == "rec_00002.pcapng"),
        "corecap's own earlier file goes: {after:?}\n{err}"
    );
    assert!(after.iter().any(|n| n == "rec_00004.pcapng"), "{after:?}");
}

/// Issue 40: a second writer on a name that a live writer holds is refused at start, with a
/// message that names the holder, and leaves the first one's files alone; a second daemon
/// on a spool is refused the same way.
#[test]
#[ignore = "needs root"]
fn issue40_a_second_writer_on_a_live_name_is_refused_and_names_the_holder() {
    let lab = Lab::new(1);
    let s = Scratch::new("two-writers");
    let rec = s.path("rec.pcapng");
    let first = lab.capture_to(&rec, &["-b", "filesize:1000"]);
    let o = lab
        .capture_command()
        .arg("-w")
        .arg(&rec)
        // Bounded: a second writer that is not refused stops by itself.
        .args([
            "-b",
            "filesize:1000",
            "--stats-interval",
            "0",
            "--duration",
            "5",
        ])
        .output()
        .expect("run the second capture");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains(&format!("pid {}", first.pid())), "{err}");
    assert!(err.contains("rec.pcapng"), "{err}");
    let sent = lab.gen(2000, &["--size", "1000"]);
    let v = first.stop();
    assert_eq!(u(&v, "packets"), sent, "the first writer kept every packet");
    // Once the first has stopped, the name is free again.
    let again = lab.capture_to(&rec, &["-b", "filesize:1000"]);
    again.stop();

    let d = util::Daemon::start(&lab, &s, &[]);
    let o = Command::new(util::bin())
        .args(["serve", "--netns", &lab.netns, "--socket"])
        .arg(s.path("second.sock"))
        .arg("--spool")
        .arg(s.path("spool"))
        .output()
        .expect("run a second daemon");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{err}");
    assert!(err.contains(&format!("pid {}", d.pid())), "{err}");
    assert!(err.contains("spool"), "{err}");
}

/// Issue 40: a full disk is filled with whole packets before the writer reports it full:
/// a 1 MiB filesystem keeps about 1 MiB of packets (it used to keep none) and a 3 MiB one
/// about 3 MiB (it used to keep 2), as tcpdump would; the file ends on a whole block and
/// holds exactly the packets the summary counts as delivered.
#[test]
#[ignore = "needs root"]
fn issue40_a_full_disk_is_filled_before_it_is_reported() {
    let lab = Lab::new(1);
    for (size, mib) in [("1m", 1u64), ("3m", 3)] {
        let disk = SmallDisk::new(size);
        let out = disk.0.path("full.pcapng");
        let cap = lab.capture_to(&out, &["--workers", "1"]);
        // 4000 frames of 1514 bytes is 6 MB: the disk fills.
        lab.gen(4000, &["--size", "1514", "--rate", "40000"]);
        let (success, v, err) = cap.stop_any();
        assert!(!success, "a full disk is a failure: {v}");
        assert!(err.contains("No space left on device"), "{err}");
        assert_eq!(v["balanced"], true, "{v}");
        let delivered = u(&v, "packets");
        assert_whole_blocks(&out);
        assert_eq!(tshark_packets(&out).len() as u64, delivered, "{v}");
        let kept = std::fs::metadata(&out).expect("the file").len();
        // All but a few pages of the filesystem: its own metadata, the catalog, one
        // packet's worth at the end.
        assert!(
            kept + (96 << 10) >= mib << 20,
            "{size}: kept {kept} bytes, {delivered} packets: {v}"
        );
    }
}

/// Issue 40: a disk that stalls (other writers, a slow device) costs memory, not packets.
/// Writes are held to 1 MiB/s while 60 MB arrive in a second: the recorder used to hold
/// 32 MiB for the disk and dropped the rest as `disk` drops; now what waits for the disk
/// grows up to the backlog, said at start and at the end, and every packet is kept.
#[test]
#[ignore = "needs root"]
fn issue40_a_disk_that_stalls_costs_memory_not_packets() {
    let lab = Lab::new(1);
    let disk = util::LoopDisk::ext4(256);
    let out = disk.mnt.path("stall.pcapng");
    let slow = util::Throttle::new(&disk.mnt.0, 1 << 20);
    let cap = lab.capture_to(&out, &["--workers", "1"]);
    let said = cap.stderr_lines().join("\n");
    assert!(said.contains("while the disk is behind, up to"), "{said}");
    slow.add(cap.pid());
    // 40,000 frames of 1514 bytes in about a second: 60 MB, 1 MB of it written meanwhile.
    lab.gen(40_000, &["--size", "1514", "--rate", "40000"]);
    slow.lift();
    let (ok, v, err) = cap.stop_any();
    assert!(ok, "{err}");
    assert!(
        err.contains("the disk fell behind"),
        "the disk did stall: {err}"
    );
    assert_eq!(v["drops"]["disk"], 0, "{v}");
    assert_eq!(v["balanced"], true, "{v}");
    assert_eq!(u(&v, "packets"), 40_000, "{v}");
    assert_eq!(tshark_packets(&out).len(), 40_000);
}

/// Issue 39: dumpcap's `-a filesize:` and `-a files:` and tcpdump's `-G` with `-W` stop the
/// capture by themselves, as in those tools: the file holds the size asked for, or the
/// rotation the number of files; what came after counts as `stop` drops, and the
/// accounting balances.
#[test]
#[ignore = "needs root"]
fn issue39_autostop_by_file_size_and_file_count() {
    let lab = Lab::new(1);
    // -a filesize:200: one file of 200 kB (and the packet that crossed it), then stop.
    let s = Scratch::new("autostop-size");
    let mut cap = lab.capture_to(&s.path("a.pcapng"), &["-a", "filesize:200"]);
    lab.gen(1000, &["--size", "1000", "--rate", "20000"]);
    let v = cap.wait();
    let len = std::fs::metadata(s.path("a.pcapng"))
        .expect("the file")
        .len();
    assert!((200_000..200_000 + 2048).contains(&len), "{len} bytes: {v}");
    assert!(
        u(&v["drops"], "stop") > 0,
        "stopped by the file's size: {v}"
    );
    assert_eq!(
        util::packets(&s.path("a.pcapng")).len() as u64,
        u(&v, "packets")
    );
    // -b filesize:100 -a files:3: three files of a rotation, then stop.
    let s = Scratch::new("autostop-files");
    let mut cap = lab.capture_to(
        &s.path("b.pcapng"),
        &["-b", "filesize:100", "-a", "files:3"],
    );
    lab.gen(1000, &["--size", "1000", "--rate", "20000"]);
    let v = cap.wait();
    let files = capture_files(&s.0);
    assert_eq!(files.len(), 3, "{files:?}: {v}");
    let kept: usize = files.iter().map(|f| util::packets(&s.path(f)).len()).sum();
    assert_eq!(kept as u64, u(&v, "packets"), "{v}");
    assert!(u(&v["drops"], "stop") > 0, "{v}");
    // tcpdump's -G 1 -W 2: two files of a second each, then exit.
    let s = Scratch::new("autostop-g-w");
    let mut cap = lab.capture_to(&s.path("c.pcapng"), &["-G", "1", "-W", "2"]);
    lab.gen(40_000, &["--size", "200", "--rate", "10000"]);
    let v = cap.wait();
    assert_eq!(capture_files(&s.0).len(), 2, "{v}");
}

/// Issue 40: a worker's own file is in time order although its ring is not. Two generator
/// CPUs feed one worker's ring: packets stamped on one CPU take their slots after later ones
/// from the other (670 steps back in 400,000, up to 350 µs, before). One worker writing
/// `-w`, and two writing `--per-worker`, each file strictly in time order, every packet
/// there once.
#[test]
#[ignore = "needs root"]
fn issue40_a_workers_own_file_is_in_time_order() {
    let lab = Lab::new(2);
    for (name, args) in [
        ("one", &["--workers", "1"][..]),
        ("each", &["--workers", "2", "--per-worker"]),
    ] {
        let s = Scratch::new("ring-order");
        let cap = lab.capture_to(&s.path(&format!("{name}.pcapng")), args);
        let sent = lab.gen(
            200_000,
            &["--size", "200", "--threads", "2", "--flows", "256"],
        );
        let v = cap.stop();
        assert_eq!(u(&v, "packets"), sent, "{v}");
        let mut all = 0;
        for f in &capture_files(&s.0) {
            let ts: Vec<u64> = util::packets(&s.path(f)).into_iter().map(|p| p.0).collect();
            let back = ts.windows(2).filter(|w| w[0] > w[1]).count();
            assert_eq!(
                back,
                0,
                "{name}: {f} steps back {back} times in {}",
                ts.len()
            );
            all += ts.len() as u64;
        }
        assert_eq!(all, sent, "{name}: every packet once");
    }
}

/// Issue 39: `-b files:N` keeps N files in all, as dumpcap counts them, also with a file per
/// worker (it kept N per worker: 2N with two workers).
#[test]
#[ignore = "needs root"]
fn issue39_files_n_counts_the_files_of_every_worker() {
    let lab = Lab::new(2);
    let s = Scratch::new("files-in-all");
    let cap = lab.capture_to(
        &s.path("r.pcapng"),
        &[
            "--workers",
            "2",
            "--per-worker",
            "-b",
            "filesize:100,files:3",
        ],
    );
    lab.gen_on_two_queues(6000);
    let v = cap.stop();
    let files = capture_files(&s.0);
    assert_eq!(files.len(), 3, "the newest 3 in all: {files:?}: {v}");
    let said = v["files"].as_array().map_or(0, Vec::len);
    assert_eq!(said, 3, "the summary names the files still there: {v}");
    assert!(
        files.iter().any(|f| f.contains(".w0")) || files.iter().any(|f| f.contains(".w1")),
        "{files:?}"
    );
}

/// Issue 40: `serve --retain` counts the spool's files of earlier runs at start (it used to
/// count only what it wrote itself), deletes the oldest packets first, and leaves a file
/// that is not a capture alone.
#[test]
#[ignore = "needs root"]
fn issue40_serve_retain_counts_the_spool_of_earlier_runs() {
    use std::os::unix::fs::PermissionsExt;
    let lab = Lab::new(1);
    let s = Scratch::new("serve-retain-spool");
    let spool = s.path("spool");
    std::fs::create_dir(&spool).expect("spool");
    std::fs::set_permissions(&spool, std::fs::Permissions::from_mode(0o700)).expect("mode");
    let t0 = 1_780_000_000u64;
    for (i, name) in ["old1.pcapng", "old2.pcapng", "old3.pcapng"]
        .into_iter()
        .enumerate()
    {
        let p = spool.join(name);
        earlier_run_file(&p, (t0 + 3600 * i as u64) * 1_000_000_000, 100);
        set_mtime(&p, t0 - 3600 * i as u64);
    }
    std::fs::write(spool.join("notes.txt"), "the user's own file\n").expect("notes");
    let d = util::Daemon::start(&lab, &s, &["--retain", "250K"]);
    let m = String::from_utf8_lossy(&d.request(&["metrics"]).stdout).into_owned();
    assert!(m.contains("corecap_retain_deleted_files_total 1"), "{m}");
    assert!(
        !spool.join("old1.pcapng").exists(),
        "the oldest packets went"
    );
    for kept in ["old2.pcapng", "old3.pcapng", "notes.txt"] {
        assert!(spool.join(kept).exists(), "{kept} kept");
    }
}

/// Issue 39: a dumpcap command line means what it means in dumpcap: `-w FILE` writes that
/// one file in time order whatever the number of workers, and `-b filesize:N` counts kB.
#[test]
#[ignore = "needs root"]
fn issue39_w_writes_one_file_in_time_order_and_filesize_counts_kb() {
    let lab = Lab::new(2);
    let s = Scratch::new("dumpcap-habits");
    let rec = s.path("rec.pcapng");
    let cap = lab.capture_to(&rec, &["--workers", "2", "-b", "filesize:2000"]);
    let said = cap.stderr_lines().join("\n");
    assert!(said.contains("a new file every 2000 kB"), "{said}");
    // About 6 MB from two generator threads, one per RX queue and worker.
    let sent = lab.gen(6000, &["--size", "1000", "--threads", "2", "--flows", "64"]);
    let v = cap.stop();
    assert_eq!(u(&v, "packets"), sent, "{v}");
    let files = capture_files(&s.0);
    assert!(
        files
            .iter()
            .all(|n| n.starts_with("rec_") && !n.contains(".w")),
        "one series of files, no file per worker: {files:?}"
    );
    let mut all = Vec::new();
    for f in &files {
        let len = std::fs::metadata(s.path(f)).expect("file").len();
        // Cut at the first buffer past 2,000,000 bytes.
        assert!(len < 2_000_000 + (2 << 20), "{f}: {len} bytes");
        all.extend(util::packets(&s.path(f)));
    }
    assert!(files.len() >= 2, "{files:?}");
    assert_eq!(all.len() as u64, sent);
    let back: Vec<(usize, u64)> = all
        .windows(2)
        .enumerate()
        .filter(|(_, w)| w[0].0 > w[1].0)
        .map(|(i, w)| (i, w[0].0 - w[1].0))
        .collect();
    assert!(
        back.is_empty(),
        "the files are in time order, one after the other: {} steps back (index, ns): {:?}",
        back.len(),
        &back[..back.len().min(10)]
    );
}

/// Conversations as tshark counts them in `path`: for each pair of endpoints (ordered
/// text), the frames each way (as an unordered pair) and in all.
fn tshark_conversations(path: &Path) -> Vec<(String, [u64; 2], u64)> {
    let out = Command::new("tshark")
        .arg("-nr")
        .arg(path)
        .args(["-q", "-z", "conv,udp", "-z", "conv,tcp"])
        .output()
        .expect("run tshark");
    assert!(
        out.status.success(),
        "tshark: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut v: Vec<(String, [u64; 2], u64)> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let t: Vec<&str> = l.split_whitespace().collect();
            // A <-> B  frames bytes unit  frames bytes unit  frames bytes unit  start  dur
            (t.len() >= 12 && t[1] == "<->").then(|| {
                let n = |i: usize| t[i].parse::<u64>().expect("frames");
                let mut ends = [t[0], t[2]];
                ends.sort();
                let mut each = [n(3), n(6)];
                each.sort();
                (format!("{} {}", ends[0], ends[1]), each, n(9))
            })
        })
        .collect();
    v.sort();
    v
}

/// The conversations of a file's sessions file, in the same terms.
fn session_conversations(path: &Path) -> Vec<(String, [u64; 2], u64)> {
    let f = corecap_store::session::format::read_sessions(path, None)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .unwrap_or_else(|| panic!("{}: no sessions file", path.display()));
    let mut v: Vec<(String, [u64; 2], u64)> = f
        .sessions
        .iter()
        .map(|s| {
            let end = |ip: std::net::IpAddr, port: u16| format!("{ip}:{port}");
            let mut ends = [
                end(s.key.src_ip(), s.key.sport),
                end(s.key.dst_ip(), s.key.dport),
            ];
            ends.sort();
            let mut each = s.packets;
            each.sort();
            (
                format!("{} {}", ends[0], ends[1]),
                each,
                s.packets[0] + s.packets[1],
            )
        })
        .collect();
    v.sort();
    v
}

/// Issue 35: every file a recording writes keeps its connections beside it, counted as
/// tshark counts that file's conversations, and a file deleted by `-b files:N` takes its
/// sessions file with it.
#[test]
#[ignore = "needs root"]
fn issue35_each_file_keeps_its_sessions_as_tshark_counts_them() {
    util::need("tshark");
    let lab = Lab::new(2);
    let s = Scratch::new("sessions-rotation");
    let cap = lab.capture_to(
        &s.path("r.pcapng"),
        &["--workers", "2", "-b", "filesize:400,files:3"],
    );
    lab.gen_on_two_queues(8000);
    let v = cap.stop();
    let files = capture_files(&s.0);
    assert_eq!(files.len(), 3, "{files:?}: {v}");
    for f in &files {
        let p = s.path(f);
        let theirs = tshark_conversations(&p);
        assert!(!theirs.is_empty(), "{f}: tshark found no conversation");
        assert_eq!(session_conversations(&p), theirs, "{f}");
    }
    // No sessions file outlives its capture file.
    for n in names(&s.0).iter().filter(|n| n.ends_with(".sessions")) {
        let own = n.trim_end_matches(".sessions");
        assert!(
            files.iter().any(|f| f == own),
            "{n} without its file: {files:?}"
        );
    }
    assert_eq!(
        names(&s.0)
            .iter()
            .filter(|n| n.ends_with(".sessions"))
            .count(),
        3
    );
}

/// Issue 35: `corecap index` gives a file written elsewhere (tcpdump's, here) its sessions
/// too, tied to its bytes: once the file is replaced, they are not believed.
#[test]
fn issue35_index_gives_any_capture_file_its_sessions_and_a_replaced_file_loses_them() {
    util::need("tshark");
    let s = Scratch::new("sessions-index");
    let p = s.path("t.pcap");
    let real = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/real/sessions-loopback.pcap");
    std::fs::copy(&real, &p).expect("copy");
    let o = util::corecap(&["index", p.to_str().expect("utf8")]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("connections"),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    assert_eq!(session_conversations(&p), tshark_conversations(&p));
    // The same length, other bytes: the sessions file no longer describes it.
    let mut b = std::fs::read(&p).expect("read");
    let last = b.len() - 1;
    b[last] ^= 0xff;
    std::fs::write(&p, &b).expect("write");
    let e = corecap_store::session::format::read_sessions(&p, None).expect_err("stale");
    assert!(
        matches!(e, corecap_store::session::format::SessionsError::Stale),
        "{e}"
    );
}

/// Issue 37: `--retain-age` deletes at start the files whose packets are older than the
/// age (oldest first, by their packets' time), and keeps the recent ones; `--min-free`
/// deletes the oldest whole files while the filesystem has less free than asked, so the
/// recording goes on where a full disk would have stopped it.
#[test]
#[ignore = "needs root"]
fn issue37_retain_age_and_min_free_delete_the_oldest_files() {
    let lab = Lab::new(1);
    let s = Scratch::new("retain-age");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs();
    // Three days old, two days old, and an hour old.
    for (name, ago) in [
        ("r_00001.pcapng", 3 * 86_400),
        ("r_00002.pcapng", 2 * 86_400),
        ("r_00003.pcapng", 3600),
    ] {
        earlier_run_file(&s.path(name), (now - ago) * 1_000_000_000, 100);
    }
    let cap = lab.capture_to(
        &s.path("r.pcapng"),
        &[
            "--workers",
            "1",
            "-b",
            "filesize:200",
            "--retain-age",
            "36h",
        ],
    );
    lab.gen(300, &[]);
    let v = cap.stop();
    let names = capture_files(&s.0);
    assert!(
        !names.contains(&"r_00001.pcapng".to_owned()),
        "{names:?}: {v}"
    );
    assert!(
        !names.contains(&"r_00002.pcapng".to_owned()),
        "{names:?}: {v}"
    );
    assert!(
        names.contains(&"r_00003.pcapng".to_owned()),
        "{names:?}: {v}"
    );
    assert!(names.len() >= 2, "this run's file is kept too: {names:?}");

    // 24 MB into an 8 MiB filesystem that must keep half of itself free.
    let disk = SmallDisk::new("8m");
    let out = disk.0.path("m.pcapng");
    let cap = lab.capture_to(
        &out,
        &["--workers", "1", "-b", "filesize:512", "--min-free", "50%"],
    );
    lab.gen(16_000, &["--size", "1514", "--rate", "20000"]);
    let (success, v, err) = cap.stop_any();
    assert!(success, "the recording went on: {err}: {v}");
    assert_eq!(v["balanced"], true, "{v}");
    let files = capture_files(&disk.0 .0);
    let (free, size) = util::fs_space(&disk.0 .0);
    // Half free, less what one file being written may take before the next close.
    assert!(
        free + (1 << 20) >= size / 2,
        "{free} of {size} free: {files:?}"
    );
    // The newest packets are kept: the last file holds the last of the traffic.
    let last = files.last().expect("a file");
    assert!(tshark_packets(&disk.0.path(last)).len() > 10, "{files:?}");
    assert!(
        !files.contains(&"m_00001.pcapng".to_owned()),
        "the oldest went first: {files:?}"
    );
}

/// Issue 37: a rotating recording that retention can never trim says so at start: no rule
/// at all (it fills the disk, then stops), or a budget larger than the filesystem; a ring
/// of files that fits is not warned of.
#[test]
fn issue37_a_recording_that_would_fill_its_disk_is_warned_at_start() {
    let s = Scratch::new("reach");
    let input = s.path("in.pcapng");
    earlier_run_file(&input, 1_780_000_000_000_000_000, 50);
    let run = |name: &str, extra: &[&str]| {
        let out = s.path(name);
        let mut a = vec!["capture", "-r", input.to_str().expect("utf8")];
        a.extend(["-w", out.to_str().expect("utf8"), "-b", "filesize:1000"]);
        a.extend_from_slice(extra);
        let o = util::corecap(&a);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stderr).into_owned()
    };
    let none = run("a.pcapng", &[]);
    assert!(none.contains("warning: no retention"), "{none}");
    let huge = run("b.pcapng", &["--retain", "900T"]);
    assert!(huge.contains("is more than the filesystem"), "{huge}");
    let fine = run("c.pcapng", &["--retain", "1G"]);
    assert!(!fine.contains("warning:"), "{fine}");
    // A ring of files (-W, -b files:N) is bounded: no warning; unless its files cannot fit.
    let ring = run("d.pcapng", &["-b", "files:3"]);
    assert!(!ring.contains("warning:"), "{ring}");
    let too_big = run("e.pcapng", &["-b", "files:1000000000"]);
    assert!(too_big.contains("warning: no retention"), "{too_big}");
}

/// Issue 35: `--sessions-log` appends every closed file's connections as JSON lines with the
/// Elastic Common Schema's names and the sensor's `observer.name`: the same connections
/// `corecap flows --json` lists from the file, and a second run appends after the first.
#[test]
fn issue35_the_sessions_log_holds_each_closed_files_connections() {
    let s = Scratch::new("sessions-log");
    let real = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/real/sessions-loopback.pcap");
    let log = s.path("sessions.json");
    let ids = |text: &str| -> Vec<String> {
        let mut v: Vec<String> = text
            .lines()
            .map(|l| {
                let v: serde_json::Value = serde_json::from_str(l).expect("one object a line");
                v["network"]["community_id"]
                    .as_str()
                    .expect("community_id")
                    .to_owned()
            })
            .collect();
        v.sort();
        v
    };
    let mut all = Vec::new();
    for name in ["a.pcapng", "b.pcapng"] {
        let out = s.path(name);
        let o = util::corecap(&[
            "capture",
            "-r",
            real.to_str().expect("utf8"),
            "-w",
            out.to_str().expect("utf8"),
            "--sessions-log",
            log.to_str().expect("utf8"),
        ]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let f = util::corecap(&["flows", out.to_str().expect("utf8"), "--json"]);
        assert!(f.status.success(), "{}", String::from_utf8_lossy(&f.stderr));
        all.extend(ids(&String::from_utf8_lossy(&f.stdout)));
    }
    all.sort();
    let text = std::fs::read_to_string(&log).expect("the log");
    assert!(!all.is_empty());
    assert_eq!(ids(&text), all);
    for l in text.lines() {
        let v: serde_json::Value = serde_json::from_str(l).expect("JSON");
        assert!(v["observer"]["name"].is_string(), "{l}");
        assert!(v["source"]["ip"].is_string(), "{l}");
    }
}

/// Issue 35: a connection that spans rotated files is one line of `--sessions-log`, with
/// its counts over every file: the lines are the connections `corecap flows` joins over
/// the folder, field for field.
#[test]
fn issue35_the_sessions_log_has_one_line_a_connection_across_rotated_files() {
    let s = Scratch::new("sessions-log-rotated");
    let real = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/real/sessions-loopback.pcap");
    let dir = s.path("rec");
    std::fs::create_dir(&dir).expect("dir");
    let log = s.path("sessions.json");
    let o = util::corecap(&[
        "capture",
        "-r",
        real.to_str().expect("utf8"),
        "-w",
        dir.join("rec.pcapng").to_str().expect("utf8"),
        "-b",
        "filesize:2",
        "--sessions-log",
        log.to_str().expect("utf8"),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let files = std::fs::read_dir(&dir).expect("dir").count();
    assert!(files > 6, "rotated into several files: {files}");
    let fields = |text: &str| -> Vec<String> {
        let mut v: Vec<String> = text
            .lines()
            .map(|l| {
                let v: serde_json::Value = serde_json::from_str(l).expect("one object a line");
                format!(
                    "{} {} {} {} {} {}",
                    v["network"]["community_id"],
                    v["source"]["packets"],
                    v["source"]["bytes"],
                    v["destination"]["packets"],
                    v["destination"]["bytes"],
                    v["corecap"]["segments"]
                )
            })
            .collect();
        v.sort();
        v
    };
    let f = util::corecap(&["flows", dir.to_str().expect("utf8"), "--json"]);
    assert!(f.status.success(), "{}", String::from_utf8_lossy(&f.stderr));
    let joined = fields(&String::from_utf8_lossy(&f.stdout));
    assert_eq!(joined.len(), 4, "{joined:?}");
    assert!(
        joined.iter().any(|l| !l.ends_with(" 1")),
        "a connection spans files: {joined:?}"
    );
    let logged = fields(&std::fs::read_to_string(&log).expect("the log"));
    assert_eq!(logged, joined);
}

/// Issue 37: `serve --retain-age` deletes at start the spool's files of earlier runs whose
/// packets are older than the age, keeps the recent ones, and leaves a file that is not a
/// capture alone.
#[test]
#[ignore = "needs root"]
fn issue37_serve_retain_age_deletes_the_spools_old_files_at_start() {
    use std::os::unix::fs::PermissionsExt;
    let lab = Lab::new(1);
    let s = Scratch::new("serve-retain-age");
    let spool = s.path("spool");
    std::fs::create_dir(&spool).expect("spool");
    std::fs::set_permissions(&spool, std::fs::Permissions::from_mode(0o700)).expect("mode");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs();
    for (name, ago) in [("old.pcapng", 3 * 86_400), ("recent.pcapng", 3600)] {
        earlier_run_file(&spool.join(name), (now - ago) * 1_000_000_000, 100);
    }
    std::fs::write(spool.join("notes.txt"), "the user's own file\n").expect("notes");
    let d = util::Daemon::start(&lab, &s, &["--retain-age", "2d"]);
    let m = String::from_utf8_lossy(&d.request(&["metrics"]).stdout).into_owned();
    assert!(m.contains("corecap_retain_deleted_files_total 1"), "{m}");
    assert!(!spool.join("old.pcapng").exists(), "the old packets went");
    for kept in ["recent.pcapng", "notes.txt"] {
        assert!(spool.join(kept).exists(), "{kept} kept");
    }
}
