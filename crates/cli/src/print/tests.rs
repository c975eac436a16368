//! The printer on byte fixtures: whole packets, every cut of them, and random bytes under
//! every link type (the comparison with tcpdump itself is in `tests/it/print.rs`).

use super::*;

/// Ethernet, IPv4 (DF, id 0x1234, ttl 64), UDP 4000 > 5000 with 18 bytes of data.
const UDP: [u8; 60] = [
    2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00, // Ethernet
    0x45, 0, 0, 46, 0x12, 0x34, 0x40, 0, 64, 17, 0x14, 0x89, 10, 0, 0, 1, 10, 0, 0, 2, // IPv4
    0x0f, 0xa0, 0x13, 0x88, 0, 26, 0, 0, // UDP
    b'x', b'x', b'x', b'x', b'x', b'x', b'x', b'x', b'x', b'x', b'x', b'x', b'x', b'x', b'x', b'x',
    b'x', b'x',
];

/// Ethernet, IPv4, TCP 40000 > 23456 SYN, seq 1000, with an MSS option.
const SYN: [u8; 58] = [
    2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00, // Ethernet
    0x45, 0, 0, 44, 0x12, 0x34, 0x40, 0, 64, 6, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2, // IPv4
    0x9c, 0x40, 0x5b, 0xa0, 0, 0, 0x03, 0xe8, 0, 0, 0, 0, 0x60, 0x02, 0xfa, 0xf0, 0, 0, 0, 0, 2, 4,
    5, 0xb4, // mss 1460
];

fn opts() -> Options {
    Options {
        stamp: Stamp::Off,
        ..Options::default()
    }
}

fn line(o: Options, link: u16, b: &[u8]) -> String {
    Printer::new(o)
        .packet(1_700_000_000_123_456_789, b, b.len() as u32, link)
        .to_owned()
}

#[test]
fn test_parse() {
    assert_eq!(
        line(opts(), 1, &UDP),
        "IP 10.0.0.1.4000 > 10.0.0.2.5000: UDP, length 18"
    );
    let e = Options {
        link: true,
        ..opts()
    };
    assert_eq!(
        line(e, 1, &UDP),
        "02:00:00:00:00:01 > 02:00:00:00:00:02, ethertype IPv4 (0x0800), length 60: \
         10.0.0.1.4000 > 10.0.0.2.5000: UDP, length 18"
    );
    let v = Options {
        verbose: 1,
        ..opts()
    };
    assert_eq!(
        line(v, 1, &UDP),
        "IP (tos 0x0, ttl 64, id 4660, offset 0, flags [DF], proto UDP (17), length 46)\n    \
         10.0.0.1.4000 > 10.0.0.2.5000: UDP, length 18"
    );
    assert_eq!(
        line(opts(), 1, &SYN),
        "IP 10.0.0.1.40000 > 10.0.0.2.23456: Flags [S], seq 1000, win 64240, \
         options [mss 1460], length 0"
    );
    let q = Options {
        quick: true,
        ..opts()
    };
    assert_eq!(
        line(q, 1, &SYN),
        "IP 10.0.0.1.40000 > 10.0.0.2.23456: tcp 0"
    );
    // Raw IP: the same packet without its Ethernet header.
    assert_eq!(
        line(opts(), 101, &UDP[14..]),
        "IP 10.0.0.1.4000 > 10.0.0.2.5000: UDP, length 18"
    );
}

#[test]
fn test_emit_hex() {
    let x = Options { hex: 1, ..opts() };
    let l = line(x, 1, &UDP);
    let dump: Vec<&str> = l.lines().skip(1).collect();
    assert_eq!(
        dump[0],
        "\t0x0000:  4500 002e 1234 4000 4011 1489 0a00 0001"
    );
    assert_eq!(dump.len(), 3, "46 bytes after the Ethernet header: {l}");
    let xx = Options {
        hex_ascii: 2,
        ..opts()
    };
    let l = line(xx, 1, &UDP);
    assert!(
        l.lines()
            .nth(1)
            .is_some_and(|d| d.starts_with("\t0x0000:  0200 0000 0002")),
        "{l}"
    );
    assert_eq!(l.lines().count(), 1 + 4, "60 bytes, 16 a line: {l}");
}

#[test]
fn test_relative_sequence_numbers() {
    // SYN, SYN-ACK, ACK of one conversation: the third prints `ack 1`, as tcpdump.
    let mut p = Printer::new(opts());
    let mut syn_ack = SYN;
    syn_ack[26..30].copy_from_slice(&[10, 0, 0, 2]);
    syn_ack[30..34].copy_from_slice(&[10, 0, 0, 1]);
    syn_ack[34..38].copy_from_slice(&[0x5b, 0xa0, 0x9c, 0x40]);
    syn_ack[38..42].copy_from_slice(&5000u32.to_be_bytes());
    syn_ack[42..46].copy_from_slice(&1001u32.to_be_bytes());
    syn_ack[47] = 0x12;
    let mut ack = SYN;
    ack[38..42].copy_from_slice(&1001u32.to_be_bytes());
    ack[42..46].copy_from_slice(&5001u32.to_be_bytes());
    ack[47] = 0x10;
    p.packet(0, &SYN, 58, 1);
    assert!(p.packet(0, &syn_ack, 58, 1).contains("seq 5000, ack 1001"));
    assert!(p.packet(0, &ack, 58, 1).contains("Flags [.], ack 1, win"));
}

#[test]
fn test_truncated() {
    // Every cut of the SYN (by the snap length: the wire length is whole): a line that
    // ends as tcpdump ends a cut packet, never a panic.
    let cut = |keep: usize| {
        Printer::new(opts())
            .packet(0, &SYN[..keep], SYN.len() as u32, 1)
            .to_owned()
    };
    for keep in 1..SYN.len() {
        let l = cut(keep);
        assert!(l.contains("[|"), "{keep} bytes: {l}");
    }
    assert_eq!(cut(13), " [|ether]");
    assert_eq!(cut(16), "IP  [|ip]");
    assert_eq!(cut(40), "IP 10.0.0.1.40000 > 10.0.0.2.23456:  [|tcp]");
    assert_eq!(
        cut(56),
        "IP 10.0.0.1.40000 > 10.0.0.2.23456: Flags [S], seq 1000, win 64240, options [mss [|tcp]"
    );
    // A record whose length on the wire is less than what it holds.
    let l = Printer::new(opts()).packet(0, &UDP, 10, 1).to_owned();
    assert_eq!(l, "[Invalid header: len(10) < caplen(60)]");
}

/// A small xorshift generator: the same bytes on every run.
struct Bytes(u64);

impl Bytes {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

#[test]
fn test_random_bytes_never_panic() {
    let mut r = Bytes(0x9e37_79b9_7f4a_7c15);
    let variants = [
        opts(),
        Options {
            verbose: 2,
            link: true,
            hex_ascii: 1,
            ..opts()
        },
        Options {
            quick: true,
            hex: 2,
            ..opts()
        },
    ];
    let mut printers: Vec<Printer> = variants.into_iter().map(Printer::new).collect();
    for i in 0..30_000 {
        let len = (r.next() % 160) as usize;
        let mut b: Vec<u8> = (0..len).map(|_| r.next() as u8).collect();
        // Mostly well-formed starts, so the higher layers are reached too.
        let start = [&UDP[..], &SYN[..]][i % 2];
        let keep = b.len().min(start.len()).min((r.next() % 60) as usize);
        b[..keep].copy_from_slice(&start[..keep]);
        for link in [0, 1, 12, 101, 108, 113, 228, 229, 276, 147] {
            for p in &mut printers {
                let wire = b.len() as u32 + (r.next() % 3) as u32;
                p.packet(r.next(), &b, wire, link);
            }
        }
    }
}

/// A DNS response over UDP 53 > 4000: `www.example.com` (a pointer back to it), a CNAME
/// and an A record, and an OPT record with a cookie. The lines expected are tcpdump
/// 4.99.3's of the same frame.
fn dns_frame(payload: &[u8]) -> Vec<u8> {
    let mut f = UDP[..42].to_vec();
    f[34..36].copy_from_slice(&53u16.to_be_bytes());
    f[16..18].copy_from_slice(&((28 + payload.len()) as u16).to_be_bytes());
    f[38..40].copy_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
    f.extend_from_slice(payload);
    f
}

const DNS_ANSWER: &[u8] = &[
    0x12, 0x34, 0x81, 0x80, 0, 1, 0, 2, 0, 0, 0,
    1, // header: 1 question, 2 answers, 1 additional
    3, b'w', b'w', b'w', 7, b'e', b'x', b'a', b'm', b'p', b'l', b'e', 3, b'c', b'o', b'm', 0, 0, 1,
    0, 1, // question
    0xc0, 12, 0, 5, 0, 1, 0, 0, 0x0e, 0x10, 0, 6, 3, b'c', b'd', b'n', 0xc0, 16, // CNAME
    3, b'c', b'd', b'n', 0xc0, 16, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 192, 0, 2, 7, // A
    0, 0, 41, 0x04, 0xd0, 0, 0, 0x80, 0, 0, 12, 0, 10, 0, 8, 1, 2, 3, 4, 5, 6, 7, 8, // OPT
];

#[test]
fn test_dns_lines() {
    let f = dns_frame(DNS_ANSWER);
    assert_eq!(
        line(opts(), 1, &f),
        "IP 10.0.0.1.53 > 10.0.0.2.5000: 4660 2/0/1 CNAME cdn.example.com., A 192.0.2.7 (94)"
    );
    let vv = Options {
        verbose: 3,
        ..opts()
    };
    let l = line(vv, 1, &f);
    assert!(
        l.ends_with(
            "4660 q: A? www.example.com. 2/0/1 www.example.com. [1h] CNAME cdn.example.com., \
             cdn.example.com. [1m] A 192.0.2.7 ar: . OPT UDPsize=1232 DO [COOKIE 0102030405060708] (94)"
        ),
        "{l}"
    );
    // Every cut of the message ends the line as tcpdump ends it, never in a panic.
    for cut in 42..f.len() {
        let l = line(vv, 1, &f[..cut]);
        assert!(l.contains("[|domain]") || l.contains("(94)"), "{cut}: {l}");
    }
}

#[test]
fn test_random_applications_never_panic() {
    let mut r = Bytes(0x2545_f491_4f6c_dd1d);
    let mut printers: Vec<Printer> = (0..4)
        .map(|v| {
            Printer::new(Options {
                verbose: v,
                ..opts()
            })
        })
        .collect();
    for _ in 0..20_000 {
        let mut m = DNS_ANSWER.to_vec();
        for _ in 0..1 + r.next() % 6 {
            let at = (r.next() as usize) % m.len();
            m[at] = r.next() as u8;
        }
        m.truncate(12 + (r.next() as usize) % (m.len() - 11));
        let udp = dns_frame(&m);
        // The same message over TCP: its length first.
        let mut tcp = SYN[..34].to_vec();
        tcp[23] = 6;
        let mut seg = vec![
            0xc3, 0x50, 0, 53, 0, 0, 0, 1, 0, 0, 0, 1, 0x50, 0x18, 0xff, 0xff, 0, 0, 0, 0,
        ];
        seg.extend_from_slice(&(m.len() as u16).to_be_bytes());
        seg.extend_from_slice(&m);
        tcp[16..18].copy_from_slice(&((20 + seg.len()) as u16).to_be_bytes());
        tcp.extend_from_slice(&seg);
        // And as text: the same bytes to port 80 (HTTP) and 25 (SMTP).
        let mut http = tcp.clone();
        http[37] = 80;
        let mut smtp = tcp.clone();
        smtp[37] = 25;
        smtp[34 + 22..34 + 26].copy_from_slice(b"GET ");
        for p in &mut printers {
            for f in [&udp, &tcp, &http, &smtp] {
                p.packet(1, f, f.len() as u32, 1);
                p.packet(1, &f[..f.len() - 3], f.len() as u32, 1);
            }
        }
    }
}
