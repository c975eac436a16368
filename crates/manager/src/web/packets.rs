//! `GET /packets`: one page of a search's packets as JSON rows, for the page's packet list;
//! with `bytes=N`, packet N's bytes too.
//!
//! The parameters are those of `GET /queries` (`from`, `to`, `filter`, `community_id`,
//! `sni`, `dns`, `http_host`), plus `offset` (the first row, from 0), `limit` (rows, at
//! most [`MAX_ROWS`]) and `bytes`. The query is the one `POST /queries` runs, streamed
//! through a pipe from a thread of its own and read back here packet by packet: only the
//! page's rows are kept, so memory is one page whatever the answer's size; `total` counts
//! every packet of the answer.
//!
//! Each row: `n`, `ts_ns`, `src`, `dst` (address, and port where the protocol has one),
//! `proto`, `len` (on the wire), `caplen` and `summary`, a short line in tcpdump's words
//! (`Flags [S.], seq 1, length 0`; `UDP, length 32`). The daemon does not link the CLI's
//! full printer: the page needs the fields of a list, and Wireshark, a click away, the rest.

use std::io::{BufReader, Write};
use std::net::IpAddr;

use corecap_wire::transport::{TCP_ACK, TCP_FIN, TCP_PSH, TCP_RST, TCP_SYN};
use corecap_wire::{CaptureReader, Link, ParseError, Record, Transport};
use serde::Serialize;

use crate::http::Response;
use crate::manager::Manager;

/// Rows given when `limit` is not.
pub const DEFAULT_ROWS: usize = 100;
/// The most rows one page holds.
pub const MAX_ROWS: usize = 1000;

/// One packet of the list.
#[derive(Debug, Serialize)]
pub struct Row {
    /// Its place in the answer, from 0.
    pub n: u64,
    /// Its timestamp, ns since the epoch.
    pub ts_ns: u64,
    /// Source (`10.0.0.1:80`, `[fe80::1]:80`, `10.0.0.1`).
    pub src: String,
    /// Destination.
    pub dst: String,
    /// Protocol (`TCP`, `UDP`, `ICMP`, `ARP`, `0x88b5`).
    pub proto: String,
    /// Length on the wire.
    pub len: u32,
    /// Bytes captured.
    pub caplen: usize,
    /// A short line about it.
    pub summary: String,
}

/// What `GET /packets` answers.
#[derive(Debug, Default, Serialize)]
pub struct Page {
    /// Packets in the whole answer.
    pub total: u64,
    /// The first row's place.
    pub offset: u64,
    /// The page's rows.
    pub rows: Vec<Row>,
    /// Packet `bytes`' bytes in hex, when asked and there.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hex: Option<String>,
}

/// What the request asks beside the query.
#[derive(Debug)]
struct Ask {
    offset: u64,
    limit: usize,
    bytes: Option<u64>,
}

/// Splits the page's parameters from the query's; `Err` is the message of a 400.
fn ask(pairs: Vec<(String, String)>) -> Result<(Ask, Vec<(String, String)>), String> {
    let mut a = Ask {
        offset: 0,
        limit: DEFAULT_ROWS,
        bytes: None,
    };
    let mut rest = Vec::new();
    for (k, v) in pairs {
        let num = |v: &str| v.parse::<u64>().map_err(|e| format!("{k} {v}: {e}"));
        match k.as_str() {
            "offset" => a.offset = num(&v)?,
            "limit" => {
                a.limit = num(&v)? as usize;
                if a.limit == 0 || a.limit > MAX_ROWS {
                    return Err(format!("limit {v}: from 1 to {MAX_ROWS}"));
                }
            }
            "bytes" => a.bytes = Some(num(&v)?),
            _ => rest.push((k, v)),
        }
    }
    Ok((a, rest))
}

/// Answers `GET /packets` (see the module doc).
pub fn answer(m: &Manager, query: &str) -> Response {
    let pairs = match crate::flows::query_pairs(query) {
        Ok(p) => p,
        Err(e) => return Response::error(400, e),
    };
    let (ask, rest) = match ask(pairs) {
        Ok(x) => x,
        Err(e) => return Response::error(400, e),
    };
    let spec = match super::query_spec(m, rest) {
        Ok(s) => s,
        Err(r) => return r,
    };
    match read_page(m, spec, &ask) {
        Ok(p) => match serde_json::to_value(&p) {
            Ok(v) => Response::json(200, &v),
            Err(e) => Response::error(500, e.to_string()),
        },
        Err(e) => Response::error(500, format!("the packets could not be read: {e}")),
    }
}

/// Runs the query into a pipe on a thread of its own and keeps the asked page.
fn read_page(
    m: &Manager,
    spec: corecap_store::query::QuerySpec,
    ask: &Ask,
) -> std::io::Result<Page> {
    let (r, mut w) = std::io::pipe()?;
    let page = std::thread::scope(|s| {
        let writer = s.spawn(move || {
            let done = crate::query::stream(m, &spec, &mut w).map(|_| ());
            let _ = w.flush();
            drop(w);
            done
        });
        let page = collect(BufReader::with_capacity(1 << 16, r), ask);
        let wrote = writer
            .join()
            .unwrap_or_else(|_| Err(std::io::Error::other("the query failed")));
        wrote.and(page)
    })?;
    Ok(page)
}

/// Reads a pcapng stream and keeps the rows of the page.
fn collect(r: impl std::io::Read, ask: &Ask) -> std::io::Result<Page> {
    let io = |e: corecap_wire::ReadError| std::io::Error::other(e.to_string());
    let mut reader = CaptureReader::new(r).map_err(io)?;
    let mut page = Page {
        offset: ask.offset,
        ..Page::default()
    };
    let end = ask.offset.saturating_add(ask.limit as u64);
    let mut n = 0u64;
    while let Some(p) = reader.next_packet().map_err(io)? {
        if (ask.offset..end).contains(&n) {
            page.rows.push(row(n, &p));
        }
        if ask.bytes == Some(n) {
            page.hex = Some(p.data.iter().map(|b| format!("{b:02x}")).collect());
        }
        n += 1;
    }
    page.total = n;
    Ok(page)
}

fn end(ip: IpAddr, port: Option<u16>) -> String {
    match (ip, port) {
        (IpAddr::V4(a), Some(p)) => format!("{a}:{p}"),
        (IpAddr::V6(a), Some(p)) => format!("[{a}]:{p}"),
        (a, None) => a.to_string(),
    }
}

/// tcpdump's letters for TCP flags: `F S R P .` (ACK) then `U E W`.
fn tcp_flags(f: u8) -> String {
    let letters = [
        (TCP_FIN, 'F'),
        (TCP_SYN, 'S'),
        (TCP_RST, 'R'),
        (TCP_PSH, 'P'),
        (TCP_ACK, '.'),
        (0x20, 'U'),
        (0x40, 'E'),
        (0x80, 'W'),
    ];
    letters
        .iter()
        .filter(|(bit, _)| f & bit != 0)
        .map(|(_, c)| *c)
        .collect()
}

/// One row: the addresses, protocol and summary of packet `n`.
pub fn row(n: u64, p: &Record<'_>) -> Row {
    let link = Link::of(p.linktype);
    let mut r = Row {
        n,
        ts_ns: p.ts_ns,
        src: String::new(),
        dst: String::new(),
        proto: String::new(),
        len: p.orig_len,
        caplen: p.data.len(),
        summary: String::new(),
    };
    let t = match Transport::parse(link, p.data, None) {
        Ok(t) => t,
        Err(ParseError::NotIp) => {
            let ethertype = link.network(p.data).map(|l| l.ethertype).unwrap_or(0);
            r.proto = match ethertype {
                0x0806 => "ARP".into(),
                e => format!("0x{e:04x}"),
            };
            r.summary = format!("ethertype 0x{ethertype:04x}, length {}", p.orig_len);
            return r;
        }
        Err(e) => {
            r.proto = "?".into();
            r.summary = format!("cut short or malformed ({e:?}), length {}", p.orig_len);
            return r;
        }
    };
    let k = t.key;
    let ports = matches!(k.proto, 6 | 17 | 132) && t.fragment != corecap_wire::Fragment::Later;
    let port = |p: u16| ports.then_some(p);
    r.src = end(k.src_ip(), port(k.sport));
    r.dst = end(k.dst_ip(), port(k.dport));
    (r.proto, r.summary) = match (k.proto, t.tcp, t.icmp) {
        (6, Some(tcp), _) => (
            "TCP".into(),
            format!(
                "Flags [{}], seq {}, length {}",
                tcp_flags(tcp.flags),
                tcp.seq,
                t.payload_len
            ),
        ),
        (17, _, _) => ("UDP".into(), format!("UDP, length {}", t.payload_len)),
        (1 | 58, _, Some((ty, code))) => (
            if k.proto == 1 { "ICMP" } else { "ICMPv6" }.into(),
            format!("type {ty}, code {code}, length {}", t.payload_len),
        ),
        (p, _, _) => (format!("ip-proto-{p}"), format!("length {}", t.payload_len)),
    };
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_tcp_flags_as_tcpdump() {
        assert_eq!(tcp_flags(TCP_SYN), "S");
        assert_eq!(tcp_flags(TCP_SYN | TCP_ACK), "S.");
        assert_eq!(tcp_flags(TCP_PSH | TCP_ACK), "P.");
        assert_eq!(tcp_flags(TCP_FIN | TCP_ACK), "F.");
    }

    #[test]
    fn test_rows_of_a_stream() {
        // Two UDP packets 10.0.0.1:1024 -> 10.0.0.2:53, and an ARP frame.
        let ifs = [corecap_wire::InterfaceDesc::ethernet("e", 262144)];
        let mut w = corecap_wire::PcapngWriter::new(Vec::new(), "t", &ifs).unwrap();
        let mut udp = vec![0u8; 12];
        udp.extend_from_slice(&[0x08, 0x00, 0x45, 0, 0, 32, 0, 0, 0, 0, 64, 17, 0, 0]);
        udp.extend_from_slice(&[
            10, 0, 0, 1, 10, 0, 0, 2, 0x04, 0x00, 0x00, 0x35, 0, 12, 0, 0,
        ]);
        udp.extend_from_slice(b"abcd");
        let mut arp = vec![0u8; 12];
        arp.extend_from_slice(&[0x08, 0x06]);
        arp.extend_from_slice(&[0; 28]);
        for (i, f) in [&udp, &udp, &arp].iter().enumerate() {
            let e = corecap_wire::Epb {
                if_id: 0,
                ts_ns: 1_000 + i as u64,
                data: f,
                orig_len: f.len() as u32,
                ..corecap_wire::Epb::default()
            };
            w.write_epb(&e).unwrap();
        }
        let bytes = w.into_inner();
        let ask = Ask {
            offset: 1,
            limit: 5,
            bytes: Some(0),
        };
        let page = collect(&bytes[..], &ask).unwrap();
        assert_eq!(page.total, 3);
        assert_eq!(page.rows.len(), 2);
        let r = &page.rows[0];
        assert_eq!((r.n, r.ts_ns), (1, 1001));
        assert_eq!(
            (r.src.as_str(), r.dst.as_str()),
            ("10.0.0.1:1024", "10.0.0.2:53")
        );
        assert_eq!(
            (r.proto.as_str(), r.summary.as_str()),
            ("UDP", "UDP, length 4")
        );
        assert_eq!(page.rows[1].proto, "ARP");
        assert_eq!(page.hex.as_deref().map(str::len), Some(udp.len() * 2));
        // A bad page parameter is the client's error.
        let e = ask_of("limit=0").unwrap_err();
        assert!(e.contains("from 1 to"), "{e}");
    }

    fn ask_of(q: &str) -> Result<(Ask, Vec<(String, String)>), String> {
        ask(crate::flows::query_pairs(q).unwrap())
    }
}
