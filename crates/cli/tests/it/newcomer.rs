//! Issue 23: the README's first command on a fresh machine. corecap does not link
//! libpcap; the demo records, queries one host back and cleans up.

use std::path::Path;
use std::process::Command;

use crate::util::{self, Scratch};

/// The number in `text` just before `word` on the line starting with `prefix`.
fn count_before(text: &str, prefix: &str, word: &str) -> u64 {
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with(prefix))
        .unwrap_or_else(|| panic!("no line starting with {prefix:?} in:\n{text}"));
    let head = &line[..line.find(word).expect("word on the line")];
    head.split_whitespace()
        .last()
        .and_then(|w| w.parse().ok())
        .unwrap_or_else(|| panic!("no count before {word:?} in {line:?}"))
}

/// Packets of `dir`'s capture files that `tcpdump -r` matches with `filter`.
fn tcpdump_count(dir: &Path, filter: &str) -> u64 {
    let mut total = 0;
    for e in std::fs::read_dir(dir).expect("recording folder") {
        let p = e.expect("entry").path();
        if p.extension().is_some_and(|x| x == "pcapng") {
            let o = Command::new("tcpdump")
                .args(["-nn", "-r"])
                .arg(&p)
                .arg(filter)
                .output()
                .expect("run tcpdump");
            assert!(o.status.success(), "tcpdump -r {}", p.display());
            total += o.stdout.iter().filter(|&&b| b == b'\n').count() as u64;
        }
    }
    total
}

#[test]
#[ignore = "needs root"]
fn issue23_demo_records_queries_and_cleans_up() {
    let s = Scratch::new("demo");
    let dir = s.path("gone");
    let ns = format!("cc-demo{}", std::process::id());
    let out = Command::new(util::bin())
        .args(["demo", "--packets", "20000", "--netns", &ns, "--dir"])
        .arg(&dir)
        .output()
        .expect("run the demo");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("20000 packets delivered of 20000 counted"),
        "{text}"
    );
    assert!(text.contains("accounting exact"), "{text}");
    let found = count_before(&text, "query host 10.1.0.7:", "packets");
    let scanned = count_before(&text, "full scan", "packets");
    assert!(found > 0, "{text}");
    assert_eq!(found, scanned, "{text}");
    assert!(text.contains("corecap query DIR"), "{text}");
    assert!(!dir.exists(), "the demo removed its folder");
    assert!(
        !Path::new("/run/netns").join(&ns).exists(),
        "the demo removed its lab"
    );

    // With --keep the files stay, and tcpdump finds what the query found.
    let kept = s.path("kept");
    let out = Command::new(util::bin())
        .args([
            "demo",
            "--packets",
            "20000",
            "--netns",
            &ns,
            "--keep",
            "--dir",
        ])
        .arg(&kept)
        .output()
        .expect("run the demo");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    let found = count_before(&text, "query host 10.1.0.7:", "packets");
    assert_eq!(found, tcpdump_count(&kept.join("rec"), "host 10.1.0.7"));
    assert!(text.contains("(kept)"), "{text}");
}

/// The demo on a machine with Rust, the base system and iproute2 only: `PATH` holds `ip`
/// and nothing else (no ethtool, tshark, tcpdump, sysctl), libpcap cannot be loaded, and the
/// lab is multi-queue, so the offloads it sets go through the kernel's ethtool ioctl.
#[test]
#[ignore = "needs root"]
fn issue39_demo_runs_without_ethtool_or_libpcap() {
    let s = Scratch::new("demo-bare");
    let bin = s.path("bin");
    std::fs::create_dir(&bin).expect("bin folder");
    let ip = ["/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .expect("iproute2's ip");
    std::os::unix::fs::symlink(ip, bin.join("ip")).expect("link ip");
    let dir = s.path("gone");
    let ns = format!("cc-bare{}", std::process::id());
    let out = Command::new(util::bin())
        .env("PATH", &bin)
        .env("CORECAP_LIBPCAP", s.path("no-such-libpcap.so"))
        .args(["demo", "--packets", "5000", "--queues", "2", "--netns", &ns])
        .arg("--dir")
        .arg(&dir)
        .output()
        .expect("run the demo");
    let text = String::from_utf8_lossy(&out.stdout);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}{err}");
    assert!(!err.contains("ethtool"), "{err}");
    assert!(text.contains("libpcap is not installed"), "{text}");
    assert!(
        text.contains("5000 packets delivered of 5000 counted"),
        "{text}"
    );
    assert!(text.contains("accounting exact"), "{text}");
    assert!(
        !Path::new("/run/netns").join(&ns).exists(),
        "the demo removed its lab"
    );
}

/// Issue 39: every command of the README's `sh` blocks, read from the README as it is now,
/// runs on a lab and does what the README says (or is skipped, naming where it is tested);
/// `readme.rs` says what stands for what.
#[test]
#[ignore = "needs root"]
fn issue39_every_readme_command_runs_on_the_lab() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md");
    let text = std::fs::read_to_string(path).expect("read README.md");
    crate::readme::run_all(&text);
}

#[test]
fn issue23_corecap_does_not_link_libpcap() {
    let o = Command::new("readelf")
        .args(["-d", util::bin()])
        .output()
        .expect("run readelf");
    assert!(o.status.success());
    let dynamic = String::from_utf8_lossy(&o.stdout);
    assert!(dynamic.contains("(NEEDED)"), "{dynamic}");
    assert!(!dynamic.contains("libpcap"), "{dynamic}");
}

#[test]
fn issue23_without_libpcap_a_filter_names_the_package_and_the_rest_works() {
    let s = Scratch::new("nolibpcap");
    let p = s.path("a.pcap");
    {
        let f = std::fs::File::create(&p).unwrap();
        let mut w = corecap_wire::PcapWriter::new(std::io::BufWriter::new(f), 1, 65535).unwrap();
        for i in 0..10u16 {
            let fr = util::udp_frame([10, 0, 0, 1], [10, 0, 0, 2], 1000 + i, 53, 100);
            w.write_packet(u64::from(i) * 1_000_000, &fr, 100, None)
                .unwrap();
        }
        w.flush().unwrap();
    }
    let run = |args: &[&str]| {
        Command::new(util::bin())
            .env("CORECAP_LIBPCAP", s.path("no-such-libpcap.so"))
            .args(args)
            .output()
            .expect("run corecap")
    };
    let out_file = s.path("q.pcapng");
    let q = |filter: Option<&str>| {
        let mut a = vec![
            "query",
            "--force",
            p.to_str().unwrap(),
            "-w",
            out_file.to_str().unwrap(),
        ];
        a.extend(filter);
        run(&a)
    };
    let o = q(Some("udp port 53"));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("libpcap0.8"), "{err}");
    // No filter: no libpcap needed.
    let o = q(None);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = run(&[
        "capture",
        "--count-only",
        "-r",
        p.to_str().unwrap(),
        "--json",
        "--stats-interval",
        "0",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let summary = String::from_utf8_lossy(&o.stdout);
    assert!(summary.contains("\"packets\":10"), "{summary}");
}
