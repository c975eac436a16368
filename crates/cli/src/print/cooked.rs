//! Linux cooked captures, v1 and v2 (tcpdump 4.99's `print-sll.c`): what `-e` prints of
//! the cooked header (`In 02:00:00:00:00:01 ethertype IPv4 (0x0800), length 98: `), and
//! the packet after it.

use std::collections::HashMap;
use std::fmt::Write;

use super::l2::{default_dump, ethertype_name, mac, tci_text, MAX_ETHERNET_LENGTH_VAL};
use super::{ethertype, llc, u16_at, u32_at, Printer, Step};

/// 802.1Q in a cooked header's protocol field.
const ETHERTYPE_8021Q: u16 = 0x8100;

/// Linux cooked direction names (`sll_pkttype_values`).
fn direction(t: u16) -> &'static str {
    match t {
        0 => "In",
        1 => "B",
        2 => "M",
        3 => "P",
        4 => "Out",
        _ => "?",
    }
}

/// `-e`'s text of a cooked header's protocol and length.
fn cooked_type(p: &mut Printer, t: u16, wire: u32) {
    if p.opts.quick {
        return;
    }
    let _ = match t {
        1 => write!(p.line, "802.3"),
        4 => write!(p.line, "802.2"),
        t if t <= MAX_ETHERNET_LENGTH_VAL => write!(p.line, "ethertype Unknown (0x{t:04x})"),
        t => write!(
            p.line,
            "ethertype {} (0x{t:04x})",
            ethertype_name(t).unwrap_or("Unknown")
        ),
    };
    let _ = write!(p.line, ", length {wire}: ");
}

/// Linux cooked capture v1: `In 02:00:00:00:00:01 ethertype IPv4 (0x0800), length 98: `.
pub(super) fn sll(p: &mut Printer, data: &[u8], wire: u32) -> Step {
    super::bytes_at(data, 0, 16, "sll")?;
    let head = |p: &mut Printer, wire: u32| {
        let _ = write!(
            p.line,
            "{:>3} ",
            direction(u16::from_be_bytes([data[0], data[1]]))
        );
        if u16::from_be_bytes([data[4], data[5]]) == 6 {
            let _ = write!(p.line, "{} ", mac(&data[6..12]));
        }
        cooked_type(p, u16::from_be_bytes([data[14], data[15]]), wire);
    };
    headed(p, data, 16, wire, head)
}

/// Linux cooked capture v2: the interface's name and the direction, then as v1 with -e.
pub(super) fn sll2(p: &mut Printer, data: &[u8], wire: u32) -> Step {
    super::bytes_at(data, 0, 20, "sll2")?;
    let ifindex = u32_at(data, 4, "sll2")?;
    let name = p.names.name(ifindex);
    let _ = write!(p.line, "{name:<5} {:<3} ", direction(u16::from(data[10])));
    let head = |p: &mut Printer, wire: u32| {
        let _ = write!(p.line, "ifindex {ifindex} ");
        if data[11] == 6 {
            let _ = write!(p.line, "{} ", mac(&data[12..18]));
        }
        cooked_type(p, u16::from_be_bytes([data[0], data[1]]), wire);
    };
    headed(p, data, 20, wire, head)
}

/// A cooked header of `hlen` bytes and its payload: `head` prints the header's `-e` text
/// first with -e, or before the bytes of a protocol not decoded here.
fn headed(
    p: &mut Printer,
    data: &[u8],
    hlen: usize,
    wire: u32,
    head: impl Fn(&mut Printer, u32),
) -> Step {
    if p.opts.link {
        head(p, wire);
    }
    let unknown = cooked_payload(p, data, hlen, wire)?;
    if let Some(at) = unknown {
        if !p.opts.link {
            // tcpdump's length here leaves out the VLAN tags.
            head(p, wire - (at - hlen) as u32);
        }
        default_dump(p, &data[at..]);
    }
    Ok(())
}

/// The payload of a cooked header of `hlen` bytes, whose protocol is at 14 (v1) or 0 (v2);
/// returns where the bytes start when the protocol is not one decoded here.
fn cooked_payload(p: &mut Printer, data: &[u8], hlen: usize, wire: u32) -> Step<Option<usize>> {
    let mut t = u16_at(data, if hlen == 16 { 14 } else { 0 }, "sll")?;
    let mut at = hlen;
    p.ll_len = at;
    let mut length = wire.saturating_sub(hlen as u32);
    while t == ETHERTYPE_8021Q {
        if data.len() < at + 4 {
            p.line.push_str(" [|vlan]");
            p.ll_len = data.len();
            return Ok(None);
        }
        if p.opts.link {
            tci_text(p, u16_at(data, at, "vlan")?);
            p.line.push_str(", ");
        }
        t = u16_at(data, at + 2, "vlan")?;
        if t <= MAX_ETHERNET_LENGTH_VAL {
            t = 4;
        }
        if !p.opts.quick {
            let _ = write!(
                p.line,
                "ethertype {}, ",
                ethertype_name(t).unwrap_or("Unknown")
            );
        }
        at += 4;
        p.ll_len = at;
        length = length.saturating_sub(4);
    }
    if t == 4 {
        llc::print(p, &data[at..], length, None);
        return Ok(None);
    }
    if t <= MAX_ETHERNET_LENGTH_VAL {
        default_dump(p, &data[at..]);
        return Ok(None);
    }
    Ok((!ethertype::network(p, t, &data[at..], length)?).then_some(at))
}

/// The names of interfaces by index, for Linux cooked v2 lines: tcpdump prints the name
/// the index has on the machine that reads the file (`?` when it has none).
#[derive(Debug, Default)]
pub(super) struct IfNames(HashMap<u32, String>);

impl IfNames {
    fn name(&mut self, index: u32) -> String {
        self.0
            .entry(index)
            .or_insert_with(|| lookup_ifname(index).unwrap_or_else(|| "?".into()))
            .clone()
    }
}

/// The interface whose `/sys/class/net/*/ifindex` is `index`.
fn lookup_ifname(index: u32) -> Option<String> {
    std::fs::read_dir("/sys/class/net")
        .ok()?
        .flatten()
        .find_map(|e| {
            let text = std::fs::read_to_string(e.path().join("ifindex")).ok()?;
            (text.trim().parse() == Ok(index)).then(|| e.file_name().to_string_lossy().into_owned())
        })
}
