//! One line per packet, as tcpdump prints it: what `capture` and `query` show without `-w`.
//!
//! [`run`] reads a pcap or pcapng stream and hands each packet to a [`Printer`], which
//! decodes it by the link type of its interface and writes tcpdump 4.99's line for it with
//! `-n` (corecap never looks names up). The layers, each in its own file:
//!
//! - `link`: Ethernet (802.1Q/802.1ad tags), Linux cooked v1 and v2, raw IP, BSD loopback;
//! - `ip`: IPv4 (options, fragments) and IPv6 (extension headers); `arp`;
//! - `tcp` (flags, relative sequence numbers, options), `udp`, `icmp` (ICMP and ICMPv6);
//! - `dns`: DNS and mDNS messages on their ports (UDP 53 and 5353, TCP 53); `text`: the
//!   text protocols over TCP (HTTP, RTSP, SMTP, FTP, WHOIS);
//! - `time`: the time stamp (`-t` to `-ttttt`); `hex`: the `-x`/`-X` dumps.
//!
//! What it does not decode prints as tcpdump prints a protocol it does not know:
//! `ethertype Unknown (0x88b5), length 60:` and the bytes, or ` ip-proto-47 24`. Where
//! tcpdump goes on into an application corecap does not decode (NTP on 123, SSH on 22),
//! corecap stops at the transport: `UDP, length 32`.
//!
//! Bad input never panics: every read of packet bytes goes through the getters below, which
//! give [`Trunc`] past the end of what was captured. The packet's line then ends as
//! tcpdump ends it, with ` [|tcp]` naming the layer that was cut.

mod arp;
mod cooked;
mod dns;
mod ethertype;
mod hex;
mod icmp;
mod icmp6;
mod ip;
mod ip6;
mod l2;
mod l3;
mod link;
mod llc;
mod nd;
pub(crate) mod pipe;
mod tcp;
mod text;
mod time;
mod transport;
mod udp;

use std::fmt::Write as _;
use std::io::{Read, Write};

use anyhow::{Context, Result};
use corecap_wire::CaptureReader;

pub(crate) use time::Stamp;

/// What to print of each packet: tcpdump's flags.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Options {
    /// The time stamp (`-t` ... `-ttttt`).
    pub(crate) stamp: Stamp,
    /// `-e`: the link-level header.
    pub(crate) link: bool,
    /// `-q`: less protocol detail.
    pub(crate) quick: bool,
    /// `-x` (1) or `-xx` (2, with the link header): the bytes in hex.
    pub(crate) hex: u8,
    /// `-X` (1) or `-XX` (2): the bytes in hex and ASCII.
    pub(crate) hex_ascii: u8,
    /// `-v`: IP header fields and checksums.
    pub(crate) verbose: u8,
}

impl Options {
    /// tcpdump prints the bytes of a protocol it does not know, unless -x, -X or -q.
    fn default_dump(&self) -> bool {
        self.hex == 0 && self.hex_ascii == 0 && !self.quick
    }
}

/// A packet ended inside the layer named: the line ends with ` [|name]`.
///
/// tcpdump notices the end in two ways, and `-x` shows the difference: a field read past
/// it abandons the packet (and the dump then starts at the link header), while a range
/// checked up front ends the layer (and the dump still leaves the link header out).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Trunc {
    layer: &'static str,
    /// A field was read past the end (tcpdump's `GET_` macros), not a range checked.
    abandons: bool,
}

impl Trunc {
    /// A field of `layer` read past the end.
    pub(super) fn read(layer: &'static str) -> Trunc {
        Trunc {
            layer,
            abandons: true,
        }
    }

    /// A range of `layer` checked and found cut.
    pub(super) fn checked(layer: &'static str) -> Trunc {
        Trunc {
            layer,
            abandons: false,
        }
    }
}

/// A decoder's result as its caller sees it when the caller goes on afterwards: a checked
/// range found cut ends that layer's text there (` [|tcp]`) and the caller continues, as
/// tcpdump's printers return to theirs; a field read past the end still abandons the packet.
pub(super) fn ended_here(p: &mut Printer, r: Step) -> Step {
    match r {
        Err(t) if !t.abandons => {
            let _ = write!(p.line, " [|{}]", t.layer);
            Ok(())
        }
        r => r,
    }
}

/// The names of the bits of `v` that `table` names, comma-separated (`none` if none), in
/// the table's order: tcpdump's `bittok2str`.
pub(super) fn bits(v: u32, table: &[(u32, &str)]) -> String {
    let names: Vec<&str> = table
        .iter()
        .filter(|b| v & b.0 == b.0)
        .map(|b| b.1)
        .collect();
    if names.is_empty() {
        "none".into()
    } else {
        names.join(", ")
    }
}

/// What a decoder returns: done, or cut short.
pub(super) type Step<T = ()> = Result<T, Trunc>;

/// The byte at `at`, or [`Trunc::read`] naming `layer`.
pub(super) fn u8_at(b: &[u8], at: usize, layer: &'static str) -> Step<u8> {
    b.get(at).copied().ok_or(Trunc::read(layer))
}

/// The big-endian u16 at `at`.
pub(super) fn u16_at(b: &[u8], at: usize, layer: &'static str) -> Step<u16> {
    let s = bytes_at(b, at, 2, layer)?;
    Ok(u16::from_be_bytes([s[0], s[1]]))
}

/// The big-endian u32 at `at`.
pub(super) fn u32_at(b: &[u8], at: usize, layer: &'static str) -> Step<u32> {
    let s = bytes_at(b, at, 4, layer)?;
    Ok(u32::from_be_bytes([s[0], s[1], s[2], s[3]]))
}

/// `n` bytes from `at`.
pub(super) fn bytes_at<'a>(
    b: &'a [u8],
    at: usize,
    n: usize,
    layer: &'static str,
) -> Step<&'a [u8]> {
    at.checked_add(n)
        .and_then(|end| b.get(at..end))
        .ok_or(Trunc::read(layer))
}

/// Checks that `n` bytes from `at` were captured ([`Trunc::checked`] if not).
pub(super) fn check(b: &[u8], at: usize, n: usize, layer: &'static str) -> Step {
    bytes_at(b, at, n, layer)
        .map(|_| ())
        .map_err(|_| Trunc::checked(layer))
}

/// Writes the lines of packets, keeping what tcpdump keeps between them: the previous time
/// stamp (`-ttt`) and each TCP conversation's first sequence numbers.
#[derive(Debug)]
pub(crate) struct Printer {
    opts: Options,
    clock: time::Clock,
    /// The line being written.
    line: String,
    /// Bytes of link-layer header in the current packet, once the link layer is decoded:
    /// what `-x` and `-X` leave out, even when a higher layer was cut short.
    ll_len: usize,
    tcp: tcp::Conversations,
    names: cooked::IfNames,
    /// The network layer's printers, for the layers above it that hold a network packet
    /// again (IP in IP, the header an ICMP error quotes): handed down here rather than
    /// imported back up.
    net4: Layer,
    net6: Layer,
}

/// A printer of one layer: `length` bytes of it on the wire, `data` of them captured.
type Layer = fn(&mut Printer, &[u8], u32) -> Step;

impl Printer {
    pub(crate) fn new(opts: Options) -> Self {
        Self {
            opts,
            clock: time::Clock::new(opts.stamp),
            line: String::with_capacity(256),
            ll_len: 0,
            tcp: tcp::Conversations::default(),
            names: cooked::IfNames::default(),
            net4: ip::v4,
            net6: ip6::v6,
        }
    }

    /// The line of one packet, without its newline (`-v` and the dumps add lines of their
    /// own). `wire_len` is its length on the wire, `linktype` its interface's LINKTYPE_.
    pub(crate) fn packet(&mut self, ts_ns: u64, data: &[u8], wire_len: u32, linktype: u16) -> &str {
        self.line.clear();
        if invalid_header(&mut self.line, data.len(), wire_len) {
            return &self.line;
        }
        self.clock.write(ts_ns, &mut self.line);
        self.ll_len = 0;
        if let Err(t) = link::print(self, linktype, data, wire_len) {
            let _ = write!(self.line, " [|{}]", t.layer);
            if t.abandons {
                self.ll_len = 0;
            }
        }
        let ll_len = self.ll_len;
        let (level, ascii) = match (self.opts.hex_ascii, self.opts.hex) {
            (0, 0) => return &self.line,
            (0, x) => (x, false),
            (x, _) => (x, true),
        };
        let bytes = if level > 1 {
            data
        } else {
            data.get(ll_len..).unwrap_or_default()
        };
        if ascii {
            hex::hex_ascii(&mut self.line, bytes);
        } else {
            hex::hex(&mut self.line, bytes);
        }
        &self.line
    }
}

/// The longest packet tcpdump prints (its `MAXIMUM_SNAPLEN`).
const MAXIMUM_SNAPLEN: usize = 262_144;

/// tcpdump's checks of a record header: the line is only the complaint.
fn invalid_header(line: &mut String, caplen: usize, wire_len: u32) -> bool {
    let mut bad = Vec::new();
    if caplen == 0 {
        bad.push("caplen==0".to_owned());
    }
    if wire_len == 0 {
        bad.push("len==0".to_owned());
    } else if (wire_len as usize) < caplen {
        bad.push(format!("len({wire_len}) < caplen({caplen})"));
    }
    if caplen > MAXIMUM_SNAPLEN {
        bad.push(format!("caplen({caplen}) > {MAXIMUM_SNAPLEN}"));
    }
    if wire_len as usize > MAXIMUM_SNAPLEN {
        bad.push(format!("len({wire_len}) > {MAXIMUM_SNAPLEN}"));
    }
    if bad.is_empty() {
        return false;
    }
    let _ = write!(line, "[Invalid header: {}]", bad.join(", "));
    true
}

/// Prints every packet of a pcap or pcapng stream, one line each, to `out`; at most
/// `limit` of them. Returns how many it printed. A write error (a closed pipe) ends it.
pub(crate) fn run<R: Read, W: Write>(
    input: R,
    opts: Options,
    mut out: W,
    limit: Option<u64>,
) -> Result<u64> {
    let mut reader = CaptureReader::new(input).context("reading the packets to print")?;
    let mut printer = Printer::new(opts);
    let mut n = 0;
    while limit.is_none_or(|l| n < l) {
        let Some(rec) = reader
            .next_packet()
            .context("reading the packets to print")?
        else {
            break;
        };
        let line = printer.packet(rec.ts_ns, rec.data, rec.orig_len, rec.linktype);
        out.write_all(line.as_bytes())?;
        out.write_all(b"\n")?;
        n += 1;
    }
    out.flush()?;
    Ok(n)
}

/// Standard output as the lines go to it: a line at a time on a terminal or with `-l`
/// (tcpdump's stdio does the same), else in large writes.
pub(crate) fn stdout(line_buffered: bool) -> Box<dyn Write + Send> {
    use std::io::IsTerminal;
    let out = std::io::stdout();
    if line_buffered || out.is_terminal() {
        Box::new(std::io::LineWriter::new(out))
    } else {
        Box::new(std::io::BufWriter::with_capacity(1 << 16, out))
    }
}

#[cfg(test)]
mod tests;
