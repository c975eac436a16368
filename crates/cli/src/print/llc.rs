//! The 802.2 LLC header of 802.3 frames (tcpdump 4.99's `print-llc.c`): with `-e`
//! `LLC, dsap STP (0x42) Individual, ssap STP (0x42) Command, ctrl 0x03: `, then the kind
//! of frame. What the SAPs carry (STP, SNAP, NetBIOS) is not decoded: the frame's bytes
//! follow, from the LLC header on, as tcpdump dumps a frame it does not know.

use std::fmt::Write;

use super::l2::{default_dump, mac};
use super::{hex, Printer};

/// tcpdump's names of SAPs (`llc_values`).
fn sap_name(sap: u8) -> Option<&'static str> {
    Some(match sap {
        0x00 => "Null",
        0xff => "Global",
        0x02 => "802.1B I",
        0x03 => "802.1B G",
        0x06 => "IP",
        0x04 => "SNA",
        0x0e => "ProWay NM",
        0x42 => "STP",
        0x4e => "RS511",
        0x7e => "ISO8208",
        0x8e => "ProWay",
        0xaa => "SNAP",
        0xe0 => "IPX",
        0xf0 => "NetBeui",
        0xfe => "OSI",
        _ => return None,
    })
}

/// Unnumbered commands (`llc_cmd_values`).
fn command(c: u16) -> String {
    match c {
        0x03 => "ui".into(),
        0xe3 => "test".into(),
        0xaf => "xid".into(),
        0x63 => "ua".into(),
        0x43 => "disc".into(),
        0x0f => "dm".into(),
        0x6f => "sabme".into(),
        0x87 => "frmr".into(),
        c => format!("{c:02x}"),
    }
}

/// Poll and final bits with the command/response bit (`llc_flag_values`).
fn flags(v: u16) -> &'static str {
    match v {
        0 => "Command",
        1 => "Response",
        0x10 | 0x100 => "Poll",
        0x11 | 0x101 => "Final",
        _ => "?",
    }
}

/// An LLC frame of `length` bytes; `macs` are the Ethernet (source, destination), which
/// tcpdump names without -e. After Ethernet the LLC header counts as link header for -x;
/// after a cooked header only when the frame is not dumped (tcpdump's two callers differ).
pub(super) fn print(p: &mut Printer, b: &[u8], length: u32, macs: Option<(&[u8], &[u8])>) {
    let cut = |p: &mut Printer, need: usize| {
        p.line.push_str(" [|llc]");
        hex::hex_ascii(&mut p.line, b);
        p.ll_len += if b.len() < need {
            b.len()
        } else {
            length as usize
        };
    };
    if b.len() < 3 || length < 3 {
        cut(p, 3);
        return;
    }
    let is_u = b[2] & 3 == 3;
    let (control, hlen) = if is_u {
        (u16::from(b[2]), 3)
    } else if b.len() < 4 || length < 4 {
        cut(p, 4);
        return;
    } else {
        (u16::from_le_bytes([b[2], b[3]]), 4)
    };
    header(p, b, control, is_u, macs);
    if macs.is_some() {
        p.ll_len += hlen;
    }
    let dumped = kind(p, b, control, hlen, length);
    if !dumped && macs.is_none() {
        p.ll_len += hlen;
    }
}

/// The SAPs and the control field: with -e the whole header, else the SAPs' names (and
/// the Ethernet addresses).
fn header(p: &mut Printer, b: &[u8], control: u16, is_u: bool, macs: Option<(&[u8], &[u8])>) {
    let (dsap_field, ssap_field) = (b[0], b[1]);
    let (dsap, ssap) = (dsap_field & !1, ssap_field & !1);
    if p.opts.link {
        let _ = write!(
            p.line,
            "LLC, dsap {} (0x{dsap:02x}) {}, ssap {} (0x{ssap:02x}) {}",
            sap_name(dsap).unwrap_or("Unknown"),
            if dsap_field & 1 != 0 {
                "Group"
            } else {
                "Individual"
            },
            sap_name(ssap).unwrap_or("Unknown"),
            if ssap_field & 1 != 0 {
                "Response"
            } else {
                "Command"
            },
        );
        let _ = if is_u {
            write!(p.line, ", ctrl 0x{control:02x}: ")
        } else {
            write!(p.line, ", ctrl 0x{control:04x}: ")
        };
        return;
    }
    let name = |s: u8| sap_name(s).map_or_else(|| format!("Unknown DSAP 0x{s:02x}"), Into::into);
    let source = sap_name(ssap).map_or_else(|| format!("Unknown SSAP 0x{ssap:02x}"), Into::into);
    let _ = match (ssap == dsap, macs) {
        (true, None) => write!(p.line, "{} ", name(dsap)),
        (true, Some((s, d))) => write!(p.line, "{} > {} {} ", mac(s), mac(d), name(dsap)),
        (false, None) => write!(p.line, "{source} > {} ", name(dsap)),
        (false, Some((s, d))) => write!(p.line, "{} {source} > {} {} ", mac(s), mac(d), name(dsap)),
    };
}

/// The kind of frame (unnumbered, supervisory, information) and, unless it carries none
/// or an XID, its bytes from the LLC header on. Whether the bytes were dumped.
fn kind(p: &mut Printer, b: &[u8], control: u16, hlen: usize, length: u32) -> bool {
    let response = u16::from(b[1] & 1);
    if control & 3 == 3 {
        let _ = write!(
            p.line,
            "Unnumbered, {}, Flags [{}], length {length}",
            command(control & 0xef),
            flags(response | (control & 0x10))
        );
        if control & !0x10 == 0xaf {
            return xid(p, b, hlen, length);
        }
    } else if control & 1 == 1 {
        let _ = write!(
            p.line,
            "Supervisory, {}, rcv seq {}, Flags [{}], length {length}",
            ["Receiver Ready", "Receiver not Ready", "Reject", "?"]
                [usize::from((control >> 2) & 3)],
            (control >> 9) & 0x7f,
            flags(response | (control & 0x100))
        );
        return false;
    } else {
        let _ = write!(
            p.line,
            "Information, send seq {}, rcv seq {}, Flags [{}], length {length}",
            (control >> 1) & 0x7f,
            (control >> 9) & 0x7f,
            flags(response | (control & 0x100))
        );
    }
    default_dump(p, b);
    true
}

/// An XID frame: its format identifier's parameters, not dumped (unless the identifier is
/// not the basic one). Whether the bytes were dumped.
fn xid(p: &mut Printer, b: &[u8], hlen: usize, length: u32) -> bool {
    let rest = &b[hlen..];
    if length as usize > hlen {
        match rest {
            [] => p.line.push_str(" [|llc]"),
            [0x81, x, y, ..] if length as usize >= hlen + 3 => {
                let _ = write!(p.line, ": {x:02x} {y:02x}");
            }
            [0x81, ..] => {
                p.line.push_str(" [|llc]");
                hex::hex_ascii(&mut p.line, rest);
            }
            _ => {
                default_dump(p, b);
                return true;
            }
        }
    }
    false
}
