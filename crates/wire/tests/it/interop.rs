//! Files from both writers, read by the tools users open them with:
//! tshark (Wireshark) for pcapng, tcpdump and tshark for pcap. Each test is
//! skipped, with a note, when its tool is not installed.

use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::process::Command;

use corecap_wire::{frame_hash, Epb, InterfaceDesc, Isb, PcapWriter, PcapngWriter};

/// Path of `name` on PATH, if any.
fn tool(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

fn temp(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("corecap-wire-{}-{name}", std::process::id()))
}

/// Runs a tool and returns its standard output; fails on a non-zero exit
/// or on a complaint about the file.
fn run(cmd: &Path, args: &[&str]) -> String {
    let out = Command::new(cmd).args(args).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{} {args:?}: {stderr}", cmd.display());
    for bad in ["damaged", "corrupt", "truncated", "invalid", "cut short"] {
        assert!(
            !stderr.contains(bad),
            "{} {args:?}: {stderr}",
            cmd.display()
        );
    }
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `tshark -r FILE ARGS -T fields -E separator=; -e FIELD...`: one line a packet, the
/// fields separated by `;`.
fn tshark_fields(tshark: &Path, file: &str, args: &[&str], fields: &[&str]) -> String {
    let mut a = vec!["-r", file];
    a.extend_from_slice(args);
    a.extend(["-T", "fields", "-E", "separator=;"]);
    for f in fields {
        a.extend(["-e", f]);
    }
    run(tshark, &a)
}

const MAC_A: [u8; 6] = [0x02, 0, 0, 0, 0, 0x0a];
const MAC_B: [u8; 6] = [0x02, 0, 0, 0, 0, 0x0b];

fn ipv4_udp(src: [u8; 4], dst: [u8; 4], sport: u16, dport: u16) -> Vec<u8> {
    let mut f = [MAC_B, MAC_A].concat();
    f.extend_from_slice(&[0x08, 0x00]);
    let mut ip = vec![0x45, 0, 0, 28 + 4, 0, 1, 0x40, 0, 64, 17, 0, 0];
    ip.extend_from_slice(&src);
    ip.extend_from_slice(&dst);
    let sum = !ip.chunks(2).fold(0u32, |a, w| {
        let s = a + u32::from(u16::from_be_bytes([w[0], w[1]]));
        (s & 0xffff) + (s >> 16)
    }) as u16;
    ip[10..12].copy_from_slice(&sum.to_be_bytes());
    f.extend_from_slice(&ip);
    f.extend_from_slice(&sport.to_be_bytes());
    f.extend_from_slice(&dport.to_be_bytes());
    f.extend_from_slice(&[0, 12, 0, 0, b'p', b'i', b'n', b'g']);
    f.resize(60, 0);
    f
}

fn ipv6_udp() -> Vec<u8> {
    let mut f = [MAC_A, MAC_B].concat();
    f.extend_from_slice(&[0x86, 0xdd]);
    f.extend_from_slice(&[0x60, 0, 0, 0, 0, 12, 17, 64]);
    let mut a = [0u8; 16];
    a[..2].copy_from_slice(&[0x20, 0x01]);
    a[15] = 1;
    f.extend_from_slice(&a);
    a[15] = 2;
    f.extend_from_slice(&a);
    f.extend_from_slice(&[0x13, 0x88, 0x00, 0x35, 0, 12, 0, 0, 1, 2, 3, 4]);
    f
}

fn frames() -> [Vec<u8>; 3] {
    [
        ipv4_udp([10, 0, 0, 1], [10, 0, 0, 2], 4000, 53),
        ipv4_udp([10, 0, 0, 2], [10, 0, 0, 1], 53, 4000),
        ipv6_udp(),
    ]
}

const TS0: u64 = 1_700_000_000_123_456_789;

#[test]
fn test_tshark_reads_pcapng() {
    let Some(tshark) = tool("tshark") else {
        eprintln!("tshark not on PATH: skipping the pcapng interoperability test");
        return;
    };
    let path = temp("interop.pcapng");
    let [f1, f2, f3] = frames();
    let h1 = frame_hash(&f1, Some(100));
    {
        let file = BufWriter::new(File::create(&path).unwrap());
        let mut w = PcapngWriter::new(
            file,
            "corecap",
            &[InterfaceDesc::ethernet("veth0@1", 262_144)],
        )
        .unwrap();
        let packets = [
            Epb {
                if_id: 0,
                ts_ns: TS0,
                data: &f1,
                orig_len: f1.len() as u32,
                vlan_tci: Some(100),
                queue: Some(1),
                hash: Some(h1),
                dropcount: Some(2),
            },
            Epb {
                ts_ns: TS0 + 1,
                data: &f2,
                orig_len: f2.len() as u32,
                queue: Some(0),
                ..Epb::default()
            },
            Epb {
                ts_ns: TS0 + 2,
                data: &f3,
                orig_len: f3.len() as u32,
                queue: Some(1),
                ..Epb::default()
            },
        ];
        for p in &packets {
            w.write_epb(p).unwrap();
        }
        let s = Isb {
            ifrecv: Some(5),
            ifdrop: Some(2),
            osdrop: Some(0),
            usrdeliv: Some(3),
            ..Isb::default()
        };
        w.write_isb(0, TS0 + 3, &s).unwrap();
        w.flush().unwrap();
    }
    let p = path.to_str().unwrap();
    let fields = tshark_fields(
        &tshark,
        p,
        &[],
        &[
            "frame.number",
            "vlan.id",
            "frame.interface_queue",
            "frame.drop_count",
            "frame.time_epoch",
            "frame.interface_name",
            "udp.srcport",
            "frame.len",
        ],
    );
    let lines: Vec<&str> = fields.lines().collect();
    assert_eq!(
        lines,
        [
            "1;100;1;2;1700000000.123456789;veth0@1;4000;64",
            "2;;0;;1700000000.123456790;veth0@1;53;60",
            "3;;1;;1700000000.123456791;veth0@1;5000;66",
        ],
        "{fields}"
    );
    // epb_hash is shown by the file-format dissector, not in the frame tree.
    let blocks = tshark_fields(
        &tshark,
        p,
        &["-X", "read_format:MIME Files Format"],
        &[
            "pcapng.options.option.data.packet.hash.algorithm",
            "pcapng.options.option.data.packet.hash.data",
            "pcapng.options.option.data.interface.received",
            "pcapng.options.option.data.interface.dropped",
            "pcapng.options.option.data.interface.delivered_to_user",
        ],
    );
    assert_eq!(blocks.trim(), format!("5;{h1:08x};5;2;3"), "{blocks}");
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn test_tcpdump_and_tshark_read_pcap() {
    let path = temp("interop.pcap");
    let [f1, f2, f3] = frames();
    {
        let file = BufWriter::new(File::create(&path).unwrap());
        let mut w = PcapWriter::new(file, 1, 65535).unwrap();
        w.write_packet(TS0, &f1, f1.len() as u32, Some(0x2064))
            .unwrap();
        w.write_packet(TS0 + 1, &f2, f2.len() as u32, None).unwrap();
        w.write_packet(TS0 + 2, &f3, f3.len() as u32, None).unwrap();
        w.flush().unwrap();
    }
    let p = path.to_str().unwrap();
    match tool("tcpdump") {
        Some(tcpdump) => {
            let text = run(
                &tcpdump,
                &["-r", p, "-nn", "-e", "--time-stamp-precision=nano"],
            );
            let lines: Vec<&str> = text.lines().collect();
            assert_eq!(lines.len(), 3, "{text}");
            assert!(
                lines[0].contains("ethertype 802.1Q (0x8100), length 64: vlan 100, p 1"),
                "{text}"
            );
            assert!(lines[0].contains("10.0.0.1.4000 > 10.0.0.2.53"), "{text}");
            assert!(lines[0].contains(".123456789 "), "{text}");
            assert!(lines[1].contains("10.0.0.2.53 > 10.0.0.1.4000"), "{text}");
            assert!(lines[2].contains("2001::1.5000 > 2001::2.53"), "{text}");
        }
        None => eprintln!("tcpdump not on PATH: skipping the tcpdump part of the pcap test"),
    }
    match tool("tshark") {
        Some(tshark) => {
            let text = tshark_fields(
                &tshark,
                p,
                &[],
                &["frame.number", "vlan.id", "vlan.priority"],
            );
            assert_eq!(
                text.lines().collect::<Vec<_>>(),
                ["1;100;1", "2;;", "3;;"],
                "{text}"
            );
        }
        None => eprintln!("tshark not on PATH: skipping the tshark part of the pcap test"),
    }
    std::fs::remove_file(&path).unwrap();
}
