//! `corecap extcap` against tshark: the link that `install` makes is found by tshark, which
//! lists corecap's interfaces and captures lab traffic through them; the capture stream to
//! a FIFO ends cleanly on SIGTERM and when its reader goes away. tshark runs in the lab's
//! namespace with a private configuration folder (WIRESHARK_CONFIG_DIR), whose `extcap`
//! folder Wireshark 4.0 searches, so the user's own configuration is never touched.

use std::io::Read;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use crate::util::{self, corecap, Lab, Scratch};

/// Waits at most `secs` for `child`; kills it (by its handle) when it runs longer.
fn wait_bounded(child: &mut Child, secs: u64) -> Option<ExitStatus> {
    let end = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < end {
        if let Ok(Some(s)) = child.try_wait() {
            return Some(s);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}

/// Installs the extcap into `conf/extcap`; returns the link's path.
fn install(conf: &Path) -> std::path::PathBuf {
    let dir = conf.join("extcap");
    let o = corecap(&["extcap", "install", "--dir", dir.to_str().expect("utf-8")]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let link = dir.join("corecap-extcap");
    assert_eq!(
        String::from_utf8_lossy(&o.stdout).trim(),
        link.display().to_string()
    );
    link
}

/// `tshark ARGS` inside the lab's namespace, with the private configuration folder.
fn tshark(lab: &Lab, conf: &Path, args: &[&str]) -> Command {
    let mut c = Command::new("ip");
    c.args(["netns", "exec", &lab.netns, "tshark"])
        .args(args)
        .env("WIRESHARK_CONFIG_DIR", conf);
    c
}

#[test]
fn extcap_bad_arguments_exit_1() {
    for args in [
        &["extcap", "--bogus"][..],
        &["extcap"],
        &["extcap", "--extcap-dlts"],
        &["extcap", "--extcap-interface", "eth0", "--extcap-dlts"],
        &[
            "extcap",
            "--extcap-interface",
            "corecap:no-such0",
            "--extcap-config",
        ],
        &["extcap", "--extcap-interface", "corecap:lo", "--capture"],
        &[
            "extcap",
            "--extcap-interface",
            "corecap:lo",
            "--capture",
            "--fifo",
            "/nonexistent/fifo",
        ],
    ] {
        let o = corecap(args);
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!err.trim().is_empty(), "{args:?}: an error on stderr");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}

#[test]
fn extcap_checks_a_capture_filter_as_wireshark_asks() {
    let check = |f: &str| {
        let o = corecap(&[
            "extcap",
            "--extcap-capture-filter",
            f,
            "--extcap-interface",
            "corecap:lo",
        ]);
        assert_eq!(o.status.code(), Some(0), "{f}");
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    assert_eq!(check("udp port 53"), "");
    let e = check("udp port");
    assert_eq!(e.lines().count(), 1, "one line of error: {e}");
}

#[test]
fn extcap_install_links_and_uninstall_removes_only_its_link() {
    let s = Scratch::new("extcap-install");
    let link = install(&s.0);
    let target = std::fs::read_link(&link).expect("a symlink");
    assert_eq!(target.file_name().and_then(|n| n.to_str()), Some("corecap"));
    // Run by the link's name, corecap is the extcap.
    let o = Command::new(&link)
        .args(["--extcap-interfaces", "--extcap-version=4.0"])
        .output()
        .expect("run the link");
    assert!(o.status.success());
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.starts_with("extcap {version="), "{out}");
    // Installing again replaces its own link.
    install(&s.0);
    let dir = s.path("extcap");
    let o = corecap(&["extcap", "uninstall", "--dir", dir.to_str().expect("utf-8")]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(std::fs::symlink_metadata(&link).is_err(), "link removed");
    // Nothing to remove, or a file it did not make: an error, and the file stays.
    let o = corecap(&["extcap", "uninstall", "--dir", dir.to_str().expect("utf-8")]);
    assert_eq!(o.status.code(), Some(1));
    std::fs::write(&link, "#!/bin/sh\n").expect("write");
    for sub in ["uninstall", "install"] {
        let o = corecap(&["extcap", sub, "--dir", dir.to_str().expect("utf-8")]);
        assert_eq!(o.status.code(), Some(1), "{sub}");
        assert!(link.is_file(), "{sub} left the file alone");
    }
}

#[test]
#[ignore = "needs root"]
fn extcap_tshark_lists_corecap_interfaces() {
    assert!(util::have("tshark"), "tshark is installed");
    let lab = Lab::new(2);
    let s = Scratch::new("extcap-list");
    install(&s.0);
    let mut c = tshark(&lab, &s.0, &["-D"]);
    let mut child = c
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("run tshark");
    let mut out = String::new();
    child
        .stdout
        .take()
        .expect("stdout")
        .read_to_string(&mut out)
        .expect("read");
    let st = wait_bounded(&mut child, 60).expect("tshark -D ends");
    assert!(st.success());
    for want in [
        "corecap:cap0 (corecap: cap0 (all queues))",
        "corecap:cap0@0 (corecap: cap0 RX queue 0)",
        "corecap:cap0@1 (corecap: cap0 RX queue 1)",
    ] {
        assert!(out.contains(want), "{want} in:\n{out}");
    }
}

#[test]
#[ignore = "needs root"]
fn extcap_tshark_captures_n_packets() {
    assert!(util::have("tshark"), "tshark is installed");
    const N: usize = 100;
    let lab = Lab::new(1);
    let s = Scratch::new("extcap-capture");
    install(&s.0);
    let out = s.path("out.pcapng");
    let mut child = tshark(
        &lab,
        &s.0,
        &[
            "-i",
            "corecap:cap0",
            "-f",
            "udp and dst port 5001",
            "-c",
            &N.to_string(),
            "-w",
            out.to_str().expect("utf-8"),
        ],
    )
    .stdout(Stdio::null())
    .stderr(Stdio::null())
    .spawn()
    .expect("run tshark");
    // Traffic in small bounded rounds until tshark has its N packets (the extcap starts
    // capturing a moment after tshark does).
    let end = Instant::now() + Duration::from_secs(60);
    let mut sent = 0;
    while Instant::now() < end && matches!(child.try_wait(), Ok(None)) {
        sent += lab.gen(50, &["--rate", "500", "--flows", "2"]);
    }
    let st = wait_bounded(&mut child, 30).expect("tshark ends after -c");
    assert!(st.success(), "tshark: {st}");
    assert!(sent >= N as u64);
    let got = util::read_all(&out);
    assert_eq!(got.len(), N);
    // tshark's -f reached corecap's filter: only port 5001 (even flows) came through.
    for (frame, _) in &got {
        assert_eq!(
            &frame[36..38],
            &5001u16.to_be_bytes(),
            "UDP destination port"
        );
    }
}

/// Lets a reader still waiting in open(2) go (when the extcap never opened the FIFO): a
/// read-write open of a FIFO never waits, and its close is the reader's end of file.
fn release(fifo: &Path) {
    let _ = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(fifo);
}

/// Starts `corecap extcap --capture` on cap0 into a new FIFO, and a reader of it that keeps
/// what it reads (until `limit` bytes, then it closes the FIFO).
fn extcap_capture(
    lab: &Lab,
    s: &Scratch,
    limit: usize,
) -> (Child, std::thread::JoinHandle<Vec<u8>>) {
    let fifo = s.path("fifo");
    let st = Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("run mkfifo");
    assert!(st.success());
    let child = Command::new("ip")
        .args(["netns", "exec", &lab.netns, util::bin()])
        .args([
            "extcap",
            "--extcap-interface",
            "corecap:cap0",
            "--capture",
            "--fifo",
            fifo.to_str().expect("utf-8"),
            "--workers",
            "2",
            "--extcap-capture-filter",
            "udp",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run corecap extcap");
    let reader = std::thread::spawn(move || {
        let mut f = std::fs::File::open(&fifo).expect("open the FIFO");
        let mut v = Vec::new();
        let mut buf = [0u8; 65536];
        while v.len() < limit {
            match f.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => v.extend_from_slice(&buf[..n]),
            }
        }
        v
    });
    (child, reader)
}

#[test]
#[ignore = "needs root"]
fn extcap_capture_stream_holds_every_packet_and_ends_on_sigterm() {
    let lab = Lab::new(1);
    let s = Scratch::new("extcap-term");
    let (mut child, reader) = extcap_capture(&lab, &s, usize::MAX);
    // The workers open their sockets before the merged stream starts; give them time.
    std::thread::sleep(Duration::from_millis(1500));
    let sent = lab.gen(2000, &["--flows", "16", "--rate", "20000"]);
    std::thread::sleep(Duration::from_millis(500));
    let st = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("run kill");
    assert!(st.success());
    let status = wait_bounded(&mut child, 30).expect("the extcap ends on SIGTERM");
    release(&s.path("fifo"));
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut err);
    }
    assert!(status.success(), "{status}: {err}");
    let bytes = reader.join().expect("reader");
    let file = s.path("got.pcapng");
    std::fs::write(&file, &bytes).expect("write");
    assert_eq!(util::read_all(&file).len() as u64, sent, "{err}");
}

#[test]
#[ignore = "needs root"]
fn extcap_capture_ends_with_0_when_the_reader_closes() {
    let lab = Lab::new(1);
    let s = Scratch::new("extcap-epipe");
    // The reader closes the FIFO after the header and a few packets.
    let (mut child, reader) = extcap_capture(&lab, &s, 4096);
    let end = Instant::now() + Duration::from_secs(60);
    while Instant::now() < end && matches!(child.try_wait(), Ok(None)) {
        lab.gen(200, &["--rate", "2000"]);
    }
    let status = wait_bounded(&mut child, 30).expect("the extcap ends on EPIPE");
    release(&s.path("fifo"));
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut err);
    }
    assert_eq!(status.code(), Some(0), "{err}");
    assert!(reader.join().expect("reader").len() >= 4096);
}
