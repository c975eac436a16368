//! Captures that start in the past (issue 25): `serve --record` keeps every packet of the
//! interface, and a request with `since` a few seconds back gets a file that begins with
//! the recorded packets from then on and continues live, each packet once.

use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::query::tcpdump;
use crate::util::{packets, recording_daemon_args, Daemon, Lab, Scratch};

/// The generator's sequence number of a frame (UDP, untagged: 8 bytes at 42).
fn seq(frame: &[u8]) -> u64 {
    u64::from_be_bytes(frame[42..50].try_into().expect("8 bytes"))
}

fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .as_nanos() as u64
}

#[test]
#[ignore = "needs root"]
fn issue25_since_starts_in_the_past_with_one_seam() {
    let lab = Lab::new(1);
    let s = Scratch::new("lookback");
    let rec = s.path("rec");
    let args = recording_daemon_args(&rec, &[]);
    let d = Daemon::start(
        &lab,
        &s,
        &args.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    // A steady numbered stream: 2000 frames a second for 8 seconds.
    let (v, path) = std::thread::scope(|sc| {
        let gen = sc.spawn(|| lab.gen(16_000, &["--rate", "2000"]));
        std::thread::sleep(Duration::from_secs(4));
        let asked = now_ns();
        let v = d.json(&[
            "start",
            "-i",
            "cap0",
            "--since",
            "-2s",
            "--duration",
            "2",
            "-w",
            "past.pcapng",
            "--wait",
        ]);
        assert!(gen.join().expect("gen") >= 16_000);
        assert!(v["since"].as_f64().expect("since") * 1e9 < asked as f64);
        (v, s.path("spool").join("past.pcapng"))
    });
    assert_eq!(v["state"], "done", "{v}");
    let (recorded, live) = (v["recorded"].as_u64().unwrap(), v["live"].as_u64().unwrap());
    assert!(recorded > 1000 && live > 1000, "both parts: {v}");
    assert_eq!(recorded + live, v["packets"].as_u64().unwrap());

    let got = packets(&path);
    let seqs: Vec<u64> = got.iter().map(|(_, f)| seq(f)).collect();
    assert_eq!(got.len() as u64, recorded + live);
    assert!(
        seqs.windows(2).all(|w| w[1] == w[0] + 1),
        "each number once, none missing, in order (the seam included)"
    );
    // From the start time on: what the recording holds from `since` to the last packet of
    // the answer is exactly the answer.
    let since = (v["since"].as_f64().unwrap() * 1e9) as u64;
    let last = got.last().expect("packets").0;
    drop(d);
    let files: Vec<_> = std::fs::read_dir(&rec)
        .expect("recording")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "pcapng"))
        .collect();
    let want = tcpdump(&files, "", since, last + 1, &s);
    let mut sorted = got.clone();
    sorted.sort();
    assert_eq!(sorted.len(), want.len(), "the recording from since on");
    assert!(sorted == want);
    assert!(Path::new(&path).exists());
}

#[test]
#[ignore = "needs root"]
fn issue25_since_without_a_recording_is_refused() {
    let lab = Lab::new(1);
    let s = Scratch::new("lookback-none");
    let d = Daemon::start(&lab, &s, &["-i", "cap0"]);
    let o = d.request(&["start", "-i", "cap0", "--since", "-5s", "-c", "1"]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("serve --record"), "{err}");
    let o = d.request(&["start", "-i", "cap0", "--since", "+5s", "-c", "1"]);
    assert!(!o.status.success());
}
