//! Encrypted capture files (issue 4): SEED-GCM and AES-256-GCM sealing in the pipeline
//! and in workers mode, `corecap decrypt` read back by tshark, truncation, tampering,
//! wrong keys and bad key files.

use std::os::unix::fs::PermissionsExt;

use crate::util::{self, corecap, decrypt, keygen, tshark_count, u, Lab, Scratch};

#[test]
#[ignore = "needs root"]
fn issue4_pipeline_seed_capture_decrypts_to_the_same_packets() {
    let lab = Lab::new(1);
    let s = Scratch::new("seal");
    let key = keygen(&s, "k.key");
    let sealed = s.path("c.pcapng.sealed");
    let plain = s.path("p.pcapng");
    // Two captures of the same traffic: sealed on a stage core, and plain.
    let enc = lab.capture_to(
        &sealed,
        &[
            "--workers",
            "1",
            "--mode",
            "pipeline",
            "--encrypt",
            "seed",
            "--key-file",
            &key,
        ],
    );
    let pc = lab.capture_to(&plain, &["--workers", "1"]);
    let sent = lab.gen(6000, &["--flows", "64", "--size", "512", "--rate", "50000"]);
    let v = enc.stop();
    let w = pc.stop();
    assert_eq!(u(&v, "packets"), sent, "{v}");
    assert_eq!(u(&w, "packets"), sent, "{w}");
    assert_eq!(u(&v["groups"][0]["members"][0], "delivered"), sent, "{v}");

    let file = s.path("c.g0m0.pcapng.sealed");
    let raw = std::fs::read(&file).unwrap();
    assert_eq!(&raw[..8], b"CORECAPS");
    let first = &util::read_all(&plain)[0].0[..40];
    assert!(
        !raw.windows(first.len()).any(|r| r == first),
        "the first packet's headers do not appear in the sealed file"
    );
    let out = s.path("d.pcapng");
    let r = decrypt(&file, &out, &key);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let got = util::read_all(&out);
    let want = util::read_all(&plain);
    assert_eq!(got.len() as u64, sent);
    let bytes = |v: &Vec<(Vec<u8>, Option<u32>)>| v.iter().map(|p| p.0.clone()).collect::<Vec<_>>();
    assert_eq!(
        bytes(&got),
        bytes(&want),
        "decrypted packets equal the plain capture"
    );
    if let Some(n) = tshark_count(&out) {
        assert_eq!(n as u64, sent);
    }
}

#[test]
#[ignore = "needs root"]
fn issue4_workers_aes_truncated_tampered_and_wrong_key() {
    let lab = Lab::new(1);
    let s = Scratch::new("seal");
    let key = keygen(&s, "k.key");
    let sealed = s.path("a.pcapng.sealed");
    let cap = lab.capture_to(
        &sealed,
        &["--workers", "1", "--encrypt", "aes", "--key-file", &key],
    );
    let sent = lab.gen(
        5000,
        &["--flows", "16", "--size", "1024", "--rate", "50000"],
    );
    let v = cap.stop();
    assert_eq!(u(&v, "packets"), sent, "{v}");
    let raw = std::fs::read(&sealed).unwrap();
    assert!(raw.len() > 4 << 20, "several chunks: {}", raw.len());

    // Whole file.
    let out = s.path("a.pcapng");
    let r = decrypt(&sealed, &out, &key);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    assert_eq!(util::read_all(&out).len() as u64, sent);
    if let Some(n) = tshark_count(&out) {
        assert_eq!(n as u64, sent);
    }

    // Cut short as by a crash: the whole chunks before the cut decrypt, but the file is not
    // whole: exit status 3, or 0 with --allow-truncated.
    let cut = s.path("cut.sealed");
    std::fs::write(&cut, &raw[..raw.len() / 2 + 777]).unwrap();
    let out = s.path("cut.pcapng");
    let r = decrypt(&cut, &out, &key);
    assert_eq!(
        r.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&r.stderr)
    );
    assert!(String::from_utf8_lossy(&r.stderr).contains("cut short"));
    let out2 = s.path("cut2.pcapng");
    let r = corecap(&[
        "decrypt",
        cut.to_str().unwrap(),
        "-o",
        out2.to_str().unwrap(),
        "--key-file",
        &key,
        "--allow-truncated",
    ]);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    assert_eq!(std::fs::read(&out2).unwrap(), std::fs::read(&out).unwrap());
    // The output is the owner's alone, and is never written through a link or over a file.
    assert_eq!(
        std::fs::metadata(&out).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let r = decrypt(&sealed, &out, &key);
    assert_eq!(
        r.status.code(),
        Some(2),
        "an existing output is not replaced"
    );
    let link = s.path("link.pcapng");
    let target = s.path("target-of-link");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let r = decrypt(&sealed, &link, &key);
    assert_eq!(r.status.code(), Some(2));
    assert!(!target.exists(), "the link was not followed");
    let n = util::read_all(&out).len() as u64;
    assert!(n > 0 && n < sent, "{n} of {sent}");
    if let Some(t) = tshark_count(&out) {
        assert_eq!(t as u64, n);
    }

    // One flipped byte in the middle: an error naming the chunk's offset, and only the
    // verified chunks before it written.
    let mut bad = raw.clone();
    let at = raw.len() / 2;
    bad[at] ^= 0x01;
    let tampered = s.path("bad.sealed");
    std::fs::write(&tampered, &bad).unwrap();
    let out = s.path("bad.pcapng");
    let r = decrypt(&tampered, &out, &key);
    assert_eq!(r.status.code(), Some(2));
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(
        err.contains("failed authentication") && err.contains("at offset"),
        "{err}"
    );
    let off: u64 = err
        .split("at offset ")
        .nth(1)
        .and_then(|t| t.split_whitespace().next())
        .and_then(|t| t.parse().ok())
        .expect("offset in the message");
    assert!(
        off <= at as u64 && at as u64 - off < 1 << 20,
        "{off} vs {at}"
    );
    let kept = util::read_all(&out).len() as u64;
    assert!(kept < sent);
    let len = std::fs::metadata(&out).unwrap().len();
    assert!(len < off, "no plaintext past the verified chunks");

    // Another key.
    let other = keygen(&s, "other.key");
    let r = decrypt(&sealed, &s.path("x.pcapng"), &other);
    assert_eq!(r.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&r.stderr).contains("key does not match this file"));
}

#[test]
fn issue4_bad_key_files() {
    let s = Scratch::new("keys");
    let short = s.path("short.key");
    std::fs::write(&short, "00112233\n").unwrap();
    std::fs::set_permissions(&short, std::fs::Permissions::from_mode(0o600)).unwrap();
    let plain = s.path("x.sealed");
    std::fs::write(&plain, b"not sealed").unwrap();
    let r = decrypt(&plain, &s.path("o"), short.to_str().unwrap());
    assert_eq!(r.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&r.stderr).contains("expected 64 hex digits"),
        "{}",
        String::from_utf8_lossy(&r.stderr)
    );
    let r = decrypt(
        &plain,
        &s.path("o"),
        s.path("missing.key").to_str().unwrap(),
    );
    assert_eq!(r.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&r.stderr).contains("cannot read key file"));

    // Readable by others: a warning, and the not-sealed input is refused clearly.
    let open = s.path("open.key");
    std::fs::write(&open, "ab".repeat(32)).unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o644)).unwrap();
    let r = decrypt(&plain, &s.path("o"), open.to_str().unwrap());
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(err.contains("readable by others"), "{err}");
    assert!(err.contains("not a sealed capture file"), "{err}");
    assert_eq!(r.status.code(), Some(2));

    // keygen does not replace a key.
    let r = corecap(&["keygen", "-o", open.to_str().unwrap()]);
    assert_eq!(r.status.code(), Some(2));
    // --encrypt without a key file.
    let r = corecap(&["capture", "-i", "lo", "-w", "/tmp/x", "--encrypt", "aes"]);
    assert_eq!(r.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&r.stderr).contains("--key-file"));
}
