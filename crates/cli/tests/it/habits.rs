//! tcpdump's and dumpcap's flags on `corecap capture` (issue 39): `-i any`, `-p`, `-P`
//! with `--time-stamp-precision`, and `-a packets:`, on a veth lab.

use std::path::Path;
use std::process::Command;

use crate::util::{self, corecap, u, Capture, Lab, Scratch};

/// The flags of an interface in the lab's namespace (/sys/class/net/IF/flags).
fn flags(lab: &Lab, iface: &str) -> u32 {
    let out = Command::new("ip")
        .args(["netns", "exec", &lab.netns, "cat"])
        .arg(format!("/sys/class/net/{iface}/flags"))
        .output()
        .expect("run ip netns exec");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s = String::from_utf8_lossy(&out.stdout);
    u32::from_str_radix(s.trim().trim_start_matches("0x"), 16).expect("hex flags")
}

const IFF_PROMISC: u32 = 0x100;

#[test]
#[ignore = "needs root"]
fn issue39_any_captures_the_lab_interface() {
    let lab = Lab::new(1);
    let cap = Capture::start(&["--netns", &lab.netns, "-i", "any"], &[]);
    let ready = cap.stderr_lines().join("\n");
    assert!(ready.contains("cap0"), "-i any opens cap0: {ready}");
    let sent = lab.gen(2000, &[]);
    let v = cap.stop();
    // Every up interface: cap0's packets at least (others may add their own).
    assert!(u(&v, "packets") >= sent, "{v}");
    assert_eq!(v["drops"]["kernel"], 0, "{v}");
}

#[test]
#[ignore = "needs root"]
fn issue39_promiscuous_by_default_and_not_with_p() {
    let lab = Lab::new(1);
    assert_eq!(flags(&lab, "cap0") & IFF_PROMISC, 0, "off before");
    let cap = lab.capture(&[]);
    assert_ne!(flags(&lab, "cap0") & IFF_PROMISC, 0, "on while capturing");
    cap.stop();
    assert_eq!(flags(&lab, "cap0") & IFF_PROMISC, 0, "off after");
    let cap = lab.capture(&["-p"]);
    let ready = cap.stderr_lines().join("\n");
    assert_eq!(flags(&lab, "cap0") & IFF_PROMISC, 0, "-p leaves it off");
    assert!(ready.contains("not promiscuous"), "{ready}");
    cap.stop();
}

#[test]
#[ignore = "needs root"]
fn issue39_pcap_precision_nano_and_micro_read_by_tcpdump() {
    let lab = Lab::new(1);
    let dir = Scratch::new("tsprec");
    for (prec, magic) in [
        (Some("nano"), 0xa1b2_3c4du32),
        (Some("micro"), 0xa1b2_c3d4),
        (None, 0xa1b2_c3d4),
    ] {
        let out = dir.path(&format!("{}.pcap", prec.unwrap_or("default")));
        let mut args = vec!["-P"];
        if let Some(p) = prec {
            args.extend(["--time-stamp-precision", p]);
        }
        let cap = lab.capture_to(&out, &args);
        let sent = lab.gen(100, &[]);
        let v = cap.stop();
        assert_eq!(u(&v, "packets"), sent, "{v}");
        let bytes = std::fs::read(&out).expect("the pcap file");
        let got = u32::from_le_bytes(bytes[..4].try_into().expect("4 bytes"));
        assert_eq!(got, magic, "{prec:?}: magic {got:#x}");
        if util::need("tcpdump") {
            let mut c = Command::new("tcpdump");
            c.args(["-nn", "-r"]).arg(&out);
            if prec == Some("nano") {
                c.args(["--time-stamp-precision", "nano"]);
            }
            let r = c.output().expect("run tcpdump");
            assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
            let lines = String::from_utf8_lossy(&r.stdout).lines().count() as u64;
            assert_eq!(lines, sent, "tcpdump -r reads every packet ({prec:?})");
        }
    }
}

#[test]
#[ignore = "needs root"]
fn issue39_autostop_packets_stops_at_100() {
    let lab = Lab::new(1);
    let mut cap = lab.capture(&["-a", "packets:100"]);
    lab.gen(1000, &[]);
    let v = cap.wait();
    assert_eq!(u(&v, "packets"), 100, "{v}");
}

/// Flags whose edge values tcpdump and dumpcap give a meaning: `-s 0` is the largest snap
/// length (262144), as theirs; `-c 0` is refused as tcpdump refuses it, by capture and by
/// query; `--workers 0` is refused (leaving it out gives one per RX queue), where it ran one
/// worker unsaid.
#[test]
fn issue39_edge_values_of_s_c_and_workers() {
    let s = Scratch::new("edge-flags");
    let input =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/real/sessions-loopback.pcap");
    let input = input.to_str().expect("utf8");
    let out = s.path("o.pcapng");
    let o = corecap(&[
        "capture",
        "-r",
        input,
        "-s",
        "0",
        "-w",
        out.to_str().expect("utf8"),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // The interface's snap length as tcpdump reads it from the file.
    let t = Command::new("tcpdump")
        .args(["-r"])
        .arg(&out)
        .args(["-c", "1"])
        .output();
    if let Ok(t) = t {
        let err = String::from_utf8_lossy(&t.stderr);
        assert!(err.contains("snapshot length 262144"), "{err}");
    }
    for args in [
        &["capture", "-r", input, "-c", "0", "--count-only"][..],
        &["capture", "-r", input, "--workers", "0", "--count-only"],
        &["query", input, "-c", "0"],
    ] {
        let o = corecap(args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains("is not in 1.."), "{args:?}: {err}");
    }
}
