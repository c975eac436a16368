//! TCP (tcpdump 4.99's `print-tcp.c`): `Flags [S.], seq 5000, ack 1001, win 64240,
//! options [mss 1460,nop,wscale 7], length 0`.
//!
//! As tcpdump without `-S`, sequence numbers are relative to the first ones seen of a
//! conversation: the first segment with ACK set (or any with SYN and ACK) records them, and
//! later segments print their distance from them.

use std::collections::HashMap;
use std::fmt::Write;

use super::l3::{cksum, should_be, words, Net, PROTO_TCP};
use super::{check, u16_at, u32_at, u8_at, Printer, Step, Trunc};

/// Flag letters in tcpdump's order (`tcp_flag_values`).
const FLAGS: [(u8, char); 8] = [
    (0x01, 'F'),
    (0x02, 'S'),
    (0x04, 'R'),
    (0x08, 'P'),
    (0x10, '.'),
    (0x20, 'U'),
    (0x40, 'E'),
    (0x80, 'W'),
];
const SYN: u8 = 0x02;
const FIN: u8 = 0x01;
const RST: u8 = 0x04;
const ACK: u8 = 0x10;
const URG: u8 = 0x20;

/// A conversation's key, the same for both directions: addresses and ports in tcpdump's
/// order (the lower port first).
type Key = (Vec<u8>, Vec<u8>, u32);

/// The first sequence numbers of each conversation, by key: (seq, ack) of the direction
/// the key is written in.
#[derive(Debug, Default)]
pub(super) struct Conversations(HashMap<Key, (u32, u32)>);

impl Conversations {
    /// The relative (seq, ack), and the recorded (seq, ack) of the key's direction, and
    /// whether this segment goes the other way.
    fn relative(
        &mut self,
        net: &Net<'_>,
        ports: (u16, u16),
        seq: u32,
        ack: u32,
        syn: bool,
    ) -> ((u32, u32), (u32, u32), bool) {
        let (sport, dport) = ports;
        let rev = sport > dport || (sport == dport && net.src > net.dst);
        let key = if rev {
            (
                net.dst.to_vec(),
                net.src.to_vec(),
                u32::from(dport) << 16 | u32::from(sport),
            )
        } else {
            (
                net.src.to_vec(),
                net.dst.to_vec(),
                u32::from(sport) << 16 | u32::from(dport),
            )
        };
        let fresh = if rev {
            (ack.wrapping_sub(1), seq)
        } else {
            (seq, ack.wrapping_sub(1))
        };
        match self.0.get(&key).copied() {
            Some(th) if !syn => {
                let rel = if rev {
                    (seq.wrapping_sub(th.1), ack.wrapping_sub(th.0))
                } else {
                    (seq.wrapping_sub(th.0), ack.wrapping_sub(th.1))
                };
                (rel, th, rev)
            }
            _ => {
                self.0.insert(key, fresh);
                ((seq, ack), fresh, rev)
            }
        }
    }
}

/// `src.port > dst.port: ` when the IP header's protocol is TCP, else the ports alone.
fn endpoints(p: &mut Printer, net: &Net<'_>, sport: u16, dport: u16) {
    let _ = if net.proto == PROTO_TCP {
        write!(
            p.line,
            "{}.{sport} > {}.{dport}: ",
            net.src_text(),
            net.dst_text()
        )
    } else {
        write!(p.line, "{sport} > {dport}: ")
    };
}

/// A TCP segment of `length` bytes (by the IP header).
pub(super) fn print(p: &mut Printer, net: &Net<'_>, b: &[u8], length: u32) -> Step {
    if b.len() < 4 {
        let _ = write!(p.line, "{} > {}:", net.src_text(), net.dst_text());
        return Err(Trunc::checked("tcp"));
    }
    let (sport, dport) = (u16_at(b, 0, "tcp")?, u16_at(b, 2, "tcp")?);
    endpoints(p, net, sport, dport);
    check(b, 0, 20, "tcp")?;
    let hlen = usize::from(u8_at(b, 12, "tcp")? >> 4) * 4;
    if hlen < 20 {
        let _ = write!(
            p.line,
            " tcp {} [bad hdr length {hlen} - too short, < 20]",
            length.wrapping_sub(hlen as u32)
        );
        return Ok(());
    }
    let h = Header {
        ports: (sport, dport),
        hlen,
        seq: u32_at(b, 4, "tcp")?,
        ack: u32_at(b, 8, "tcp")?,
        win: u16_at(b, 14, "tcp")?,
        urp: u16_at(b, 18, "tcp")?,
        flags: 0,
    };
    if p.opts.quick {
        let _ = write!(p.line, "tcp {}", length.wrapping_sub(hlen as u32));
        if hlen as u32 > length {
            let _ = write!(p.line, " [bad hdr length {hlen} - too long, > {length}]");
        }
        return Ok(());
    }
    let h = Header {
        flags: u8_at(b, 13, "tcp")?,
        ..h
    };
    segment(p, net, b, length, &h)
}

/// The fields of a TCP header that its line shows.
struct Header {
    ports: (u16, u16),
    hlen: usize,
    seq: u32,
    ack: u32,
    win: u16,
    urp: u16,
    flags: u8,
}

/// The line after the ports, without `-q`: flags, numbers, options, length, payload.
fn segment(p: &mut Printer, net: &Net<'_>, b: &[u8], length: u32, h: &Header) -> Step {
    let letters: String = FLAGS
        .iter()
        .filter(|f| h.flags & f.0 != 0)
        .map(|f| f.1)
        .collect();
    let _ = write!(
        p.line,
        "Flags [{}]",
        if letters.is_empty() { "none" } else { &letters }
    );
    let ((seq, ack), th, rev) = if h.flags & ACK != 0 {
        p.tcp
            .relative(net, h.ports, h.seq, h.ack, h.flags & SYN != 0)
    } else {
        ((h.seq, h.ack), (0, 0), false)
    };
    let hlen = h.hlen;
    if hlen as u32 > length {
        let _ = write!(p.line, " [bad hdr length {hlen} - too long, > {length}]");
        return Ok(());
    }
    if p.opts.verbose > 0 && !net.fragmented {
        checksum(p, net, b, length);
    }
    let data_len = length - hlen as u32;
    if p.opts.verbose > 1 || data_len > 0 || h.flags & (SYN | FIN | RST) != 0 {
        let _ = write!(p.line, ", seq {seq}");
        if data_len > 0 {
            let _ = write!(p.line, ":{}", seq.wrapping_add(data_len));
        }
    }
    if h.flags & ACK != 0 {
        let _ = write!(p.line, ", ack {ack}");
    }
    let _ = write!(p.line, ", win {}", h.win);
    if h.flags & URG != 0 {
        let _ = write!(p.line, ", urg {}", h.urp);
    }
    if hlen > 20 && !options_text(p, b, hlen, if rev { th.0 } else { th.1 })? {
        return Ok(());
    }
    let _ = write!(p.line, ", length {data_len}");
    payload(p, b, h, data_len)
}

/// `, options [...]`; whether they were whole (else the line ends with them).
fn options_text(p: &mut Printer, b: &[u8], hlen: usize, first_seq: u32) -> Step<bool> {
    p.line.push_str(", options [");
    let opts = &b[20..b.len().min(hlen)];
    match options(p, opts, hlen - 20, first_seq)? {
        OptionsEnd::Whole => {
            p.line.push(']');
            Ok(true)
        }
        OptionsEnd::Bad { first } => {
            p.line
                .push_str(if first { "[bad opt]" } else { "[bad opt]]" });
            Ok(false)
        }
        OptionsEnd::Cut { first } => {
            p.line.push_str(if first { " [|tcp]" } else { " [|tcp]>" });
            Ok(false)
        }
    }
}

/// The payload of `data_len` bytes after the header: what tcpdump decodes of it.
fn payload(p: &mut Printer, b: &[u8], h: &Header, data_len: u32) -> Step {
    let hlen = h.hlen;
    if data_len > 0 && b.len() < hlen {
        let _ = write!(
            p.line,
            " [remaining caplen({}) < header length({hlen})]",
            b.len()
        );
        return Err(Trunc::read("tcp"));
    }
    if data_len == 0 || (h.flags & RST != 0 && p.opts.verbose > 0) {
        return Ok(());
    }
    let payload = &b[hlen..];
    match application(h.ports.0, h.ports.1) {
        Some(App::Text(proto)) => {
            p.line.push_str(": ");
            super::text::print(p, proto, payload, data_len)
        }
        Some(App::Dns) => super::dns::print(p, payload, data_len, true, false),
        None => Ok(()),
    }
}

/// An application tcpdump decodes over TCP that corecap decodes too.
enum App {
    Text(&'static super::text::Proto),
    Dns,
}

/// What tcpdump decodes a segment between these ports as: the first of its ports that
/// either end uses, in tcpdump's order. `None` also for the ports whose decoders corecap
/// does not have (telnet, BGP, PPTP, Redis, SSH, NetBIOS, SMB, BEEP, OpenFlow): their
/// payloads are not printed.
fn application(sport: u16, dport: u16) -> Option<App> {
    use super::text::{FTP, HTTP, RTSP, SMTP, WHOIS};
    let order: [(&[u16], Option<App>); 15] = [
        (&[23], None),
        (&[25], Some(App::Text(&SMTP))),
        (&[43], Some(App::Text(&WHOIS))),
        (&[179], None),
        (&[1723], None),
        (&[6379], None),
        (&[22], None),
        (&[139], None),
        (&[445], None),
        (&[10288], None),
        (&[6633, 6653], None),
        (&[21], Some(App::Text(&FTP))),
        (&[80, 8080], Some(App::Text(&HTTP))),
        (&[554, 8554], Some(App::Text(&RTSP))),
        (&[super::udp::DNS_PORT], Some(App::Dns)),
    ];
    order
        .into_iter()
        .find(|(ports, _)| ports.iter().any(|&x| x == sport || x == dport))
        .and_then(|(_, app)| app)
}

/// `-v`: `, cksum 0x3d43 (correct)` or `(incorrect -> 0x3d43)`, when the whole segment
/// was captured.
fn checksum(p: &mut Printer, net: &Net<'_>, b: &[u8], length: u32) {
    let Some(seg) = b.get(..length as usize) else {
        return;
    };
    let sum = cksum(words(seg, net.pseudo_sum(PROTO_TCP, length)));
    let field = u16::from_be_bytes([seg[16], seg[17]]);
    let _ = write!(p.line, ", cksum 0x{field:04x}");
    if sum != 0 {
        let _ = write!(p.line, " (incorrect -> 0x{:04x})", should_be(field, sum));
    } else {
        p.line.push_str(" (correct)");
    }
}

/// How the options ended.
enum OptionsEnd {
    Whole,
    /// A length that does not fit: tcpdump prints `[bad opt]` (and `]` after the first
    /// option) and ends the line.
    Bad {
        first: bool,
    },
    /// Past what was captured: ` [|tcp]` (and `>` after the first option).
    Cut {
        first: bool,
    },
}

/// The options (`hlen` bytes by the header, `o` what was captured of them),
/// comma-separated; SACK blocks relative to `base` (the other side's first sequence
/// number).
fn options(p: &mut Printer, o: &[u8], hlen: usize, base: u32) -> Step<OptionsEnd> {
    let mut at = 0;
    let mut sep = "";
    while at < hlen {
        let first = sep.is_empty();
        p.line.push_str(sep);
        sep = ",";
        // The kind and length bytes are read (a cut there abandons the packet); the data
        // is checked first (a cut there ends the list).
        let kind = u8_at(o, at, "tcp")?;
        let len = if kind <= 1 {
            1
        } else {
            match u8_at(o, at + 1, "tcp")? {
                l if l >= 2 && usize::from(l) <= hlen - at => usize::from(l),
                _ => return Ok(OptionsEnd::Bad { first }),
            }
        };
        p.line.push_str(&name(kind));
        // The option's data: what its length says, or for a kind of fixed size, that size
        // (tcpdump reads it, and goes on after it, whatever the length said).
        let start = at + if kind <= 1 { 1 } else { 2 };
        let size = fixed_size(kind).unwrap_or(len.saturating_sub(2));
        if start + size > hlen {
            return Ok(OptionsEnd::Bad { first });
        }
        let Some(data) = o.get(start..start + size) else {
            if kind == 5 && size.is_multiple_of(8) {
                // The count of SACK blocks comes before the blocks are checked.
                let _ = write!(p.line, " {} ", size / 8);
            }
            return Ok(OptionsEnd::Cut { first });
        };
        if !value(p, kind, data, base) {
            return Ok(OptionsEnd::Bad { first });
        }
        if start - at + size != len {
            let _ = write!(p.line, "[len {len}]");
        }
        at = start + size;
        if kind == 0 {
            break;
        }
    }
    Ok(OptionsEnd::Whole)
}

/// The data bytes of an option kind of fixed size.
fn fixed_size(kind: u8) -> Option<usize> {
    match kind {
        0 | 1 | 4 => Some(0),
        3 => Some(1),
        2 | 20 | 28 => Some(2),
        6 | 7 | 11 | 12 | 13 => Some(4),
        8 => Some(8),
        19 => Some(16),
        _ => None,
    }
}

/// tcpdump's name of an option kind.
fn name(kind: u8) -> String {
    match kind {
        0 => "eol".into(),
        1 => "nop".into(),
        2 => "mss".into(),
        3 => "wscale".into(),
        4 => "sackOK".into(),
        5 => "sack".into(),
        6 => "echo".into(),
        7 => "echoreply".into(),
        8 => "TS".into(),
        11 => "cc".into(),
        12 => "ccnew".into(),
        13 => "ccecho".into(),
        19 => "md5".into(),
        20 => "scps".into(),
        28 => "uto".into(),
        29 => "tcp-ao".into(),
        30 => "mptcp".into(),
        34 => "tfo".into(),
        254 => "exp".into(),
        k => format!("unknown-{k}"),
    }
}

/// The value of one option, from its data bytes; false when they are too few for it.
fn value(p: &mut Printer, kind: u8, d: &[u8], base: u32) -> bool {
    let be16 = |d: &[u8]| u16::from_be_bytes([d[0], d[1]]);
    let be32 = |d: &[u8]| u32::from_be_bytes([d[0], d[1], d[2], d[3]]);
    let _ = match kind {
        0 | 1 | 4 => Ok(()),
        2 => write!(p.line, " {}", be16(d)),
        3 => write!(p.line, " {}", d[0]),
        6 | 7 | 11 | 12 | 13 => write!(p.line, " {}", be32(d)),
        8 => write!(p.line, " val {} ecr {}", be32(d), be32(&d[4..])),
        20 => write!(p.line, " cap {:02x} id {}", d[0], d[1]),
        28 => {
            let v = u32::from(be16(d));
            let mins = if v & 1 != 0 { (v >> 1) * 60 } else { v >> 1 };
            write!(p.line, " 0x{v:x} {mins}")
        }
        5 if !d.len().is_multiple_of(8) => write!(p.line, " invalid sack"),
        5 => {
            let _ = write!(p.line, " {} ", d.len() / 8);
            for blk in d.chunks_exact(8) {
                let s = be32(blk).wrapping_sub(base);
                let e = be32(&blk[4..]).wrapping_sub(base);
                let _ = write!(p.line, "{{{s}:{e}}}");
            }
            Ok(())
        }
        19 => {
            p.line.push_str(" can't check - ");
            hex_bytes(p, d);
            Ok(())
        }
        // RFC 6994: the experiment's 16-bit ExID (0xf989 is TCP Fast Open).
        254 if d.len() < 2 => return false,
        254 if be16(d) == 0xf989 => {
            p.line.push_str("-tfo");
            fast_open(p, &d[2..]);
            Ok(())
        }
        254 => write!(p.line, "-{:04x}", be16(d)),
        34 => {
            p.line.push(' ');
            fast_open(p, d);
            Ok(())
        }
        _ if d.is_empty() => Ok(()),
        _ => {
            p.line.push_str(" 0x");
            hex_bytes(p, d);
            Ok(())
        }
    };
    true
}

/// A TCP Fast Open option: ` cookiereq`, or ` cookie` and its bytes.
fn fast_open(p: &mut Printer, d: &[u8]) {
    if d.is_empty() {
        p.line.push_str(" cookiereq");
    } else if !d.len().is_multiple_of(2) || d.len() < 4 || d.len() > 16 {
        p.line.push_str(" (invalid)");
    } else {
        p.line.push_str(" cookie ");
        hex_bytes(p, d);
    }
}

/// Bytes as hex digits, no separator.
fn hex_bytes(p: &mut Printer, d: &[u8]) {
    for x in d {
        let _ = write!(p.line, "{x:02x}");
    }
}
