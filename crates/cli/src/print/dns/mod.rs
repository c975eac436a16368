//! DNS, as tcpdump 4.99 prints it (`print-domain.c`) on UDP port 53 and 5353 (mDNS) and
//! TCP port 53: `4660+ [1au] A? example.com. (40)` for a query, `4660 2/0/1 CNAME
//! www.example.com., A 192.0.2.7 (79)` for a response; `-v` adds each record's owner
//! name and SOA and TSIG details, `-vv` the question of a response and the authority and
//! additional sections, `-vvv` each record's TTL.
//!
//! tcpdump reads a message in two ways, and so does this printer: a name or a record it
//! checks before reading ends the message with ` [|domain]` and leaves the packet's dump
//! as it was ([`Trunc::checked`]); a field read past the captured bytes abandons the
//! packet ([`Trunc::read`]). Names follow compression pointers only backwards, as BIND
//! and tcpdump do, so a pointer loop cannot run for ever.

use std::fmt::Write;
use std::net::{Ipv4Addr, Ipv6Addr};

use super::{u16_at, u32_at, u8_at, Printer, Step, Trunc};

mod names;
use names::{class_text, name_of, type_text, DAU, DHU, N3U, OPS, OPTIONS, RCODES};

const LAYER: &str = "domain";
/// The longest name printed whole (`MAXCDNAME`).
const MAX_NAME: usize = 255;

const T_A: u16 = 1;
const T_NS: u16 = 2;
const T_CNAME: u16 = 5;
const T_SOA: u16 = 6;
const T_PTR: u16 = 12;
const T_MX: u16 = 15;
const T_TXT: u16 = 16;
const T_AAAA: u16 = 28;
const T_SRV: u16 = 33;
const T_A6: u16 = 38;
const T_DNAME: u16 = 39;
const T_OPT: u16 = 41;
const T_UNSPECA: u16 = 104;
const T_TSIG: u16 = 250;
const T_URI: u16 = 256;

/// A DNS message of `length` bytes (by the transport), `b` of them captured; over TCP,
/// after its two-byte length. Called after the transport's addresses and ports.
pub(super) fn print(p: &mut Printer, b: &[u8], length: u32, over_tcp: bool, mdns: bool) -> Step {
    let (mut b, mut length) = (b, length);
    if over_tcp {
        if length < 2 {
            let _ = write!(p.line, " [DNS over TCP: length {length} < 2] (invalid)");
            return Ok(());
        }
        length -= 2;
        let prefix = u16_at(b, 0, LAYER)?;
        if u32::from(prefix) != length {
            let _ = write!(
                p.line,
                " [prefix length({prefix}) != length({length})] (invalid)"
            );
            return Ok(());
        }
        b = &b[2..];
        p.line.push(' ');
    }
    if length < 12 {
        let _ = write!(p.line, "domain [length {length} < 12] (invalid)");
        return Ok(());
    }
    if b.len() < 12 {
        return Err(Trunc::checked(LAYER));
    }
    let m = Message { b, mdns };
    let flags = u16_at(b, 2, LAYER)?;
    let counts = [
        u16_at(b, 4, LAYER)?,
        u16_at(b, 6, LAYER)?,
        u16_at(b, 8, LAYER)?,
        u16_at(b, 10, LAYER)?,
    ];
    let rcode = m.extended_rcode(flags, counts);
    if flags & 0x8000 != 0 {
        m.response(p, flags, rcode, counts)?;
    } else {
        m.query(p, flags, counts)?;
    }
    let _ = write!(p.line, " ({length})");
    Ok(())
}

/// What a step of the message gives: a new position, or `None` where tcpdump's reader
/// returns NULL (the message ends there with ` [|domain]`).
type At = Step<Option<usize>>;

/// One message: its captured bytes (from its header on), and whether it is mDNS.
struct Message<'a> {
    b: &'a [u8],
    mdns: bool,
}

/// Why printing the sections stopped early: the message ends with ` [|domain]`.
fn cut() -> Trunc {
    Trunc::checked(LAYER)
}

impl Message<'_> {
    /// The response code, with the extended bits of an OPT record when it is reached.
    fn extended_rcode(&self, flags: u16, [qd, an, ns, ar]: [u16; 4]) -> u16 {
        let (b, mut rcode) = (self.b, flags & 0xf);
        let mut at = 12;
        for _ in 0..qd {
            match self.skip_name(at) {
                Some(a) if a + 4 < b.len() => at = a + 4,
                _ => return rcode,
            }
        }
        for _ in 0..u32::from(an) + u32::from(ns) {
            let Some(a) = self.skip_name(at).map(|a| a + 8) else {
                return rcode;
            };
            let Some(rdlen) = b.get(a..a + 2) else {
                return rcode;
            };
            at = a + 2 + usize::from(u16::from_be_bytes([rdlen[0], rdlen[1]]));
            if at >= b.len() {
                return rcode;
            }
        }
        for _ in 0..ar {
            let Some(a) = self.skip_name(at) else {
                return rcode;
            };
            let Some(t) = b.get(a..a + 2) else {
                return rcode;
            };
            let Some(&ext) = b.get(a + 4) else {
                return rcode;
            };
            if u16::from_be_bytes([t[0], t[1]]) == T_OPT {
                rcode |= u16::from(ext) << 4;
                return rcode;
            }
            let Some(rdlen) = b.get(a + 8..a + 10) else {
                return rcode;
            };
            at = a + 10 + usize::from(u16::from_be_bytes([rdlen[0], rdlen[1]]));
            if at >= b.len() {
                return rcode;
            }
        }
        rcode
    }

    /// A response: `4660*- q: A? example.com. 1/0/0 A 192.0.2.7`.
    fn response(
        &self,
        p: &mut Printer,
        flags: u16,
        rcode: u16,
        [qd, an, ns, ar]: [u16; 4],
    ) -> Step {
        let id = u16_at(self.b, 0, LAYER)?;
        let code = RCODES
            .get(usize::from(rcode))
            .map_or_else(|| format!(" Resp{}", rcode & 0xfff), |s| (*s).to_owned());
        let _ = write!(
            p.line,
            "{id}{}{code}{}{}{}{}",
            OPS[usize::from(flags >> 11 & 0xf)],
            if flags & 0x0400 != 0 { "*" } else { "" },
            if flags & 0x0080 != 0 { "" } else { "-" },
            if flags & 0x0200 != 0 { "|" } else { "" },
            if flags & 0x0020 != 0 { "$" } else { "" },
        );
        if qd != 1 {
            let _ = write!(p.line, " [{qd}q]");
        }
        let mut at = 12;
        for i in 0..qd {
            if i != 0 {
                p.line.push(',');
            }
            at = if p.opts.verbose > 1 {
                p.line.push_str(" q:");
                self.question(p, at)?.ok_or_else(cut)?
            } else {
                self.skip_name(at).ok_or_else(cut)? + 4
            };
        }
        let _ = write!(p.line, " {an}/{ns}/{ar}");
        at = self.records(p, at, an, "")?;
        if p.opts.verbose > 1 {
            at = self.records(p, at, ns, " ns:")?;
            self.records(p, at, ar, " ar:")?;
        }
        Ok(())
    }

    /// A query: `4660+ [1au] A? example.com.`.
    fn query(&self, p: &mut Printer, flags: u16, [qd, an, ns, ar]: [u16; 4]) -> Step {
        let id = u16_at(self.b, 0, LAYER)?;
        let opcode = flags >> 11 & 0xf;
        let _ = write!(
            p.line,
            "{id}{}{}{}",
            OPS[usize::from(opcode)],
            if flags & 0x0100 != 0 { "+" } else { "" },
            if flags & 0x0010 != 0 { "%" } else { "" },
        );
        if flags & 0x6cf != 0 {
            let _ = write!(p.line, " [b2&3=0x{flags:x}]");
        }
        if opcode == 1 {
            if qd != 0 {
                let _ = write!(p.line, " [{qd}q]");
            }
            if an != 1 {
                let _ = write!(p.line, " [{an}a]");
            }
        } else {
            if an != 0 {
                let _ = write!(p.line, " [{an}a]");
            }
            if qd != 1 {
                let _ = write!(p.line, " [{qd}q]");
            }
        }
        if ns != 0 {
            let _ = write!(p.line, " [{ns}n]");
        }
        if ar != 0 {
            let _ = write!(p.line, " [{ar}au]");
        }
        let mut at = 12;
        let mut left = qd;
        if left > 0 {
            at = self.question(p, at)?.ok_or_else(cut)?;
            left -= 1;
            while at < self.b.len() && left > 0 {
                at = self.question(p, at)?.ok_or_else(cut)?;
                left -= 1;
            }
        }
        if left > 0 {
            return Err(cut());
        }
        if p.opts.verbose > 1 {
            at = self.records(p, at, an, "")?;
            at = self.records(p, at, ns, " ns:")?;
            self.records(p, at, ar, " ar:")?;
        }
        Ok(())
    }

    /// `n` records from `at`, comma-separated after `head` (when there is one to print);
    /// where they end.
    fn records(&self, p: &mut Printer, mut at: usize, n: u16, head: &str) -> Step<usize> {
        let mut left = n;
        if left > 0 && (head.is_empty() || at < self.b.len()) {
            p.line.push_str(head);
            at = self.record(p, at)?.ok_or_else(cut)?;
            left -= 1;
            while at < self.b.len() && left > 0 {
                p.line.push(',');
                at = self.record(p, at)?.ok_or_else(cut)?;
                left -= 1;
            }
        }
        if left > 0 {
            return Err(cut());
        }
        Ok(at)
    }

    /// Past the name at `at` (`ns_nskip`); `None` when it is cut or of a reserved kind.
    fn skip_name(&self, mut at: usize) -> Option<usize> {
        let b = self.b;
        let mut i = *b.get(at)?;
        at += 1;
        while i != 0 {
            match i & 0xc0 {
                0xc0 => return Some(at + 1),
                0x40 => {
                    if i & 0x3f != 1 {
                        return None;
                    }
                    let bits = bit_len(*b.get(at)?);
                    at += 1 + bits.div_ceil(8);
                }
                0x80 => return None,
                _ => at += usize::from(i),
            }
            i = *b.get(at)?;
            at += 1;
        }
        Some(at)
    }

    /// The length of the label at `at` (`labellen`), or `None` (with tcpdump's complaint).
    fn label_len(&self, p: &mut Printer, at: usize) -> Option<usize> {
        let i = *self.b.get(at)?;
        match i & 0xc0 {
            0x40 => {
                let elt = i & 0x3f;
                if elt != 1 {
                    let _ = write!(p.line, "<ELT {elt}>");
                    return None;
                }
                Some(bit_len(*self.b.get(at + 1)?).div_ceil(8) + 1)
            }
            0x80 => {
                p.line.push_str("<BAD LABEL TYPE>");
                None
            }
            _ => Some(usize::from(i)),
        }
    }

    /// The label at `at`: its first byte and its length ([`Message::label_len`]).
    fn label(&self, p: &mut Printer, at: usize) -> Option<(u8, usize)> {
        let l = self.label_len(p, at)?;
        Some((self.b[at], l))
    }

    /// Prints the name at `at` (`fqdn_print`); pointers are offsets from `base`. Where the
    /// name ends in the message (after its first pointer, if it has one).
    fn name(&self, p: &mut Printer, mut at: usize, base: usize) -> At {
        let Some((mut i, mut l)) = self.label(p, at) else {
            return Ok(None);
        };
        // Pointers must go backwards: each below the one before, the first below the name.
        let mut max_offset = (at as u32).wrapping_sub(base as u32);
        at += 1;
        let mut compressed = false;
        let mut rp = (i & 0xc0 != 0xc0).then_some(at + l);
        if i == 0 {
            p.line.push('.');
            return Ok(rp);
        }
        let mut chars = 0usize;
        while i != 0 && at < self.b.len() {
            if i & 0xc0 == 0xc0 {
                if !compressed {
                    rp = Some(at + 1);
                    compressed = true;
                }
                let offset = (u32::from(i) << 8 | u32::from(self.b[at])) & 0x3fff;
                if offset >= max_offset {
                    p.line.push_str("<BAD PTR>");
                    return Ok(None);
                }
                max_offset = offset;
                at = base.wrapping_add(offset as usize);
                let Some(next) = self.label(p, at) else {
                    return Ok(None);
                };
                (i, l) = next;
                at += 1;
                continue;
            }
            if !self.label_text(p, at, (i, l), &mut chars)? {
                return Ok(None);
            }
            at += l;
            if chars <= MAX_NAME {
                p.line.push('.');
            }
            chars += 1;
            let Some(next) = self.label(p, at) else {
                return Ok(None);
            };
            (i, l) = next;
            at += 1;
            if !compressed {
                rp = rp.map(|r| r + l + 1);
            }
        }
        if chars > MAX_NAME {
            p.line.push_str("<DOMAIN NAME TOO LONG>");
        }
        Ok(rp)
    }

    /// Prints a label that is not a pointer: its text (as far as a name's 255 characters
    /// go, counted in `chars`) or its bit string. Whether it was whole.
    fn label_text(
        &self,
        p: &mut Printer,
        at: usize,
        (i, l): (u8, usize),
        chars: &mut usize,
    ) -> Step<bool> {
        match i & 0xc0 {
            0x40 if i & 0x3f != 1 => {
                let _ = write!(p.line, "<ELT {}>", i & 0x3f);
                Ok(false)
            }
            0x40 => Ok(self.bit_label(p, at)?.is_some()),
            0x80 => {
                p.line.push_str("<BAD LABEL TYPE>");
                Ok(false)
            }
            _ => {
                let room = if *chars + l <= MAX_NAME {
                    Some(l)
                } else {
                    MAX_NAME.checked_sub(*chars).filter(|&r| r > 0)
                };
                *chars += l;
                Ok(room.is_none_or(|n| text(p, self.b, at, n)))
            }
        }
    }

    /// An RFC 2673 bit-string label (`\[x0a/12]`); its data starts at `at`.
    fn bit_label(&self, p: &mut Printer, at: usize) -> At {
        let Some(&len) = self.b.get(at) else {
            return Ok(None);
        };
        let bits = bit_len(len);
        let end = at + 1 + bits.div_ceil(4);
        p.line.push_str("\\[x");
        let (mut at, mut left) = (at + 1, bits);
        while at < end && left > 7 {
            let _ = write!(p.line, "{:02x}", u8_at(self.b, at, LAYER)?);
            left -= 8;
            at += 1;
        }
        if left > 4 {
            let tc = u8_at(self.b, at, LAYER)?;
            let _ = write!(p.line, "{:02x}", u32::from(tc) & (0xff << (8 - left)));
        } else if left > 0 {
            let tc = u32::from(u8_at(self.b, at, LAYER)?);
            let _ = write!(p.line, "{:x}", (tc >> 4 & 0x0f) & (0x0f << (4 - left)));
        }
        let _ = write!(p.line, "/{bits}]");
        Ok(Some(end))
    }

    /// A question (`ns_qprint`): ` A? example.com.`.
    fn question(&self, p: &mut Printer, at: usize) -> At {
        let Some(q) = self.skip_name(at).filter(|q| q + 4 <= self.b.len()) else {
            return Ok(None);
        };
        let t = u16_at(self.b, q, LAYER)?;
        let _ = write!(p.line, " {}", type_text(t));
        let raw = u16_at(self.b, q + 2, LAYER)?;
        let class = if self.mdns { raw & 0x7fff } else { raw };
        if class != 1 {
            let _ = write!(p.line, " {}", class_text(class));
        }
        if self.mdns {
            p.line
                .push_str(if raw & 0x8000 != 0 { " (QU)" } else { " (QM)" });
        }
        p.line.push_str("? ");
        Ok(self.name(p, at, 0)?.map(|r| r + 4))
    }

    /// A resource record (`ns_rprint`): ` A 192.0.2.7`, with `-v` its owner first.
    fn record(&self, p: &mut Printer, at: usize) -> At {
        let b = self.b;
        let at = if p.opts.verbose > 0 {
            p.line.push(' ');
            let Some(at) = self.name(p, at, 0)? else {
                return Ok(None);
            };
            Some(at)
        } else {
            self.skip_name(at)
        };
        let Some(mut at) = at.filter(|a| a + 10 <= b.len()) else {
            return Ok(Some(b.len()));
        };
        let t = u16_at(b, at, LAYER)?;
        let raw = u16_at(b, at + 2, LAYER)?;
        at += 4;
        let class = if self.mdns { raw & 0x7fff } else { raw };
        if class != 1 && t != T_OPT {
            let _ = write!(p.line, " {}", class_text(class));
        }
        if self.mdns && raw & 0x8000 != 0 {
            p.line.push_str(" (Cache flush)");
        }
        let mut opt_flags = 0;
        if t == T_OPT {
            opt_flags = u16_at(b, at + 2, LAYER)?;
        } else if p.opts.verbose > 2 {
            p.line.push_str(" [");
            relative_time(p, u32_at(b, at, LAYER)?);
            p.line.push(']');
        }
        at += 4;
        let len = usize::from(u16_at(b, at, LAYER)?);
        at += 2;
        let end = at + len;
        let _ = write!(p.line, " {}", type_text(t));
        if end > b.len() {
            return Ok(None);
        }
        let data = RecordData {
            at,
            end,
            class,
            opt_flags,
        };
        Ok(self.record_data(p, t, data)?.map(|()| end))
    }

    /// What a record holds, by its type; `None` where it is cut.
    fn record_data(&self, p: &mut Printer, t: u16, d: RecordData) -> Step<Option<()>> {
        let (b, at) = (self.b, d.at);
        let some = |x: Option<usize>| x.map(|_| ());
        match t {
            T_A => {
                let Some(a) = b.get(at..at + 4) else {
                    return Ok(None);
                };
                let _ = write!(p.line, " {}", Ipv4Addr::new(a[0], a[1], a[2], a[3]));
            }
            T_NS | T_CNAME | T_PTR | T_DNAME => {
                p.line.push(' ');
                return Ok(some(self.name(p, at, 0)?));
            }
            T_SOA if p.opts.verbose > 0 => return self.soa(p, at),
            T_MX => {
                p.line.push(' ');
                if at + 2 > b.len() || self.name(p, at + 2, 0)?.is_none() {
                    return Ok(None);
                }
                let _ = write!(p.line, " {}", u16_at(b, at, LAYER)?);
            }
            T_TXT => {
                let mut at = at;
                while at < d.end {
                    p.line.push_str(" \"");
                    let Some(next) = self.string(p, at) else {
                        return Ok(None);
                    };
                    at = next;
                    p.line.push('"');
                }
            }
            T_SRV => {
                p.line.push(' ');
                if at + 6 > b.len() || self.name(p, at + 6, 0)?.is_none() {
                    return Ok(None);
                }
                let _ = write!(
                    p.line,
                    ":{} {} {}",
                    u16_at(b, at + 4, LAYER)?,
                    u16_at(b, at, LAYER)?,
                    u16_at(b, at + 2, LAYER)?
                );
            }
            T_AAAA => {
                let Some(a) = b.get(at..at + 16) else {
                    return Ok(None);
                };
                let a: [u8; 16] = a.try_into().expect("16 bytes");
                let _ = write!(p.line, " {}", Ipv6Addr::from(a));
            }
            T_A6 => return self.a6(p, at),
            T_URI => {
                let len = d.end - at;
                let _ = write!(
                    p.line,
                    " {} {} ",
                    u16_at(b, at, LAYER)?,
                    u16_at(b, at + 2, LAYER)?
                );
                if !text(p, b, at + 4, len.wrapping_sub(4)) {
                    return Ok(None);
                }
            }
            T_OPT => return self.opt(p, d),
            T_UNSPECA => return Ok(text(p, b, at, d.end - at).then_some(())),
            T_TSIG if p.opts.verbose > 0 => return self.tsig(p, at),
            _ => {}
        }
        Ok(Some(()))
    }

    /// An SOA record's names and numbers (`-v`).
    fn soa(&self, p: &mut Printer, at: usize) -> Step<Option<()>> {
        p.line.push(' ');
        let Some(at) = self.name(p, at, 0)? else {
            return Ok(None);
        };
        p.line.push(' ');
        let Some(at) = self.name(p, at, 0)? else {
            return Ok(None);
        };
        if at + 20 > self.b.len() {
            return Ok(None);
        }
        for k in 0..5 {
            let _ = write!(p.line, " {}", u32_at(self.b, at + 4 * k, LAYER)?);
        }
        Ok(Some(()))
    }

    /// An A6 record: prefix length, address suffix, prefix name.
    fn a6(&self, p: &mut Printer, at: usize) -> Step<Option<()>> {
        let Some(&bits) = self.b.get(at) else {
            return Ok(None);
        };
        let skip = usize::from(bits & !7) / 8;
        if bits > 128 {
            let _ = write!(p.line, " {bits}(bad plen)");
            return Ok(Some(()));
        }
        if bits < 128 {
            let mut a = [0u8; 16];
            let n = 16 - skip;
            let Some(suffix) = self.b.get(at + 1..at + 1 + n) else {
                return Err(Trunc::read(LAYER));
            };
            a[skip..].copy_from_slice(suffix);
            let _ = write!(p.line, " {bits} {}", Ipv6Addr::from(a));
        }
        if bits > 0 {
            p.line.push(' ');
            if self.name(p, at + 1 + 16 - skip, 0)?.is_none() {
                return Ok(None);
            }
        }
        Ok(Some(()))
    }

    /// An OPT pseudo-record: ` UDPsize=1232 DO [COOKIE 0102030405060708]`.
    fn opt(&self, p: &mut Printer, d: RecordData) -> Step<Option<()>> {
        let _ = write!(p.line, " UDPsize={}", d.class);
        if d.opt_flags & 0x8000 != 0 {
            p.line.push_str(" DO");
        }
        let mut at = d.at;
        if at < d.end {
            p.line.push_str(" [");
            while at < d.end {
                let Some(next) = self.option(p, at)? else {
                    return Ok(None);
                };
                at = next;
                if at < d.end {
                    p.line.push(',');
                }
            }
            p.line.push(']');
        }
        Ok(Some(()))
    }

    /// One EDNS option (`eopt_print`).
    fn option(&self, p: &mut Printer, at: usize) -> At {
        let b = self.b;
        if at + 2 > b.len() {
            return Ok(None);
        }
        let code = u16_at(b, at, LAYER)?;
        match name_of(OPTIONS, code) {
            Some(n) => p.line.push_str(n),
            None => {
                let _ = write!(p.line, "Opt{code}");
            }
        }
        if at + 4 > b.len() {
            return Ok(None);
        }
        let len = usize::from(u16_at(b, at + 2, LAYER)?);
        let at = at + 4;
        let Some(data) = b.get(at..at + len) else {
            return Ok(None);
        };
        if len > 0 {
            p.line.push(' ');
            match code {
                8 => client_subnet(p, data),
                10 if len < 8 || (len > 8 && len < 16) || len > 40 => invalid(p),
                10 => {
                    for (k, x) in data.iter().enumerate() {
                        if k == 8 {
                            p.line.push(' ');
                        }
                        let _ = write!(p.line, "{x:02x}");
                    }
                }
                11 if len != 2 => invalid(p),
                11 => {
                    let v = u16::from_be_bytes([data[0], data[1]]);
                    let _ = write!(p.line, "{:.1} sec", f64::from(v) / 10.0);
                }
                9 if len != 4 => invalid(p),
                9 => {
                    let v = u32::from_be_bytes([data[0], data[1], data[2], data[3]]);
                    let _ = write!(p.line, "{v} sec");
                }
                12 => {
                    let _ = write!(p.line, "({len})");
                }
                14 if len % 2 != 0 => invalid(p),
                14 => {
                    let tags: Vec<String> = data
                        .chunks(2)
                        .map(|c| u16::from_be_bytes([c[0], c[1]]).to_string())
                        .collect();
                    p.line.push_str(&tags.join(" "));
                }
                5..=7 => {
                    let table = [DAU, DHU, N3U][usize::from(code - 5)];
                    let names: Vec<String> = data
                        .iter()
                        .map(|&x| {
                            name_of(table, u16::from(x))
                                .map_or_else(|| format!("Alg_{x}"), str::to_owned)
                        })
                        .collect();
                    p.line.push_str(&names.join(" "));
                }
                // CHAIN: a name whose pointers count from the option's end, as tcpdump
                // reads it.
                13 => {
                    self.name(p, at, at + len)?;
                }
                _ => {
                    for x in data {
                        let _ = write!(p.line, "{x:02x}");
                    }
                }
            }
        }
        Ok(Some(at + len))
    }

    /// A TSIG record's fields (`-v`).
    fn tsig(&self, p: &mut Printer, at: usize) -> Step<Option<()>> {
        let b = self.b;
        p.line.push(' ');
        let Some(mut at) = self.name(p, at, 0)? else {
            return Ok(None);
        };
        at += 6;
        for (k, label) in ["fudge", "maclen", "origid", "error", "otherlen"]
            .into_iter()
            .enumerate()
        {
            if at + 2 > b.len() {
                return Ok(None);
            }
            let v = u16_at(b, at, LAYER)?;
            let _ = write!(p.line, " {label}={v}");
            // The MAC follows its length.
            at += 2 + if k == 1 { usize::from(v) } else { 0 };
        }
        Ok(Some(()))
    }

    /// A character-string (`ns_cprint`), its bytes as text; where it ends.
    fn string(&self, p: &mut Printer, at: usize) -> Option<usize> {
        let n = usize::from(*self.b.get(at)?);
        text(p, self.b, at + 1, n).then_some(at + 1 + n)
    }
}

/// Where a record's data is, and the fields of its header an OPT record uses.
struct RecordData {
    at: usize,
    end: usize,
    class: u16,
    opt_flags: u16,
}

/// The bits of a bit-string label (0 means 256).
fn bit_len(b: u8) -> usize {
    if b == 0 {
        256
    } else {
        usize::from(b)
    }
}

fn invalid(p: &mut Printer) {
    p.line.push_str(" (invalid)");
}

/// The EDNS client subnet: `192.0.2.0/24/0`.
fn client_subnet(p: &mut Printer, d: &[u8]) {
    if d.len() < 4 {
        return invalid(p);
    }
    let family = u16::from_be_bytes([d[0], d[1]]);
    let (source, scope) = (usize::from(d[2]), usize::from(d[3]));
    let bits = match family {
        1 => 32,
        2 => 128,
        _ => return invalid(p),
    };
    let addr = &d[4..];
    if addr.len() > bits / 8 || source > bits || scope > bits || source.div_ceil(8) != addr.len() {
        return invalid(p);
    }
    let mut full = [0u8; 16];
    full[..addr.len()].copy_from_slice(addr);
    let _ = if family == 1 {
        write!(
            p.line,
            "{}/{source}/{scope}",
            Ipv4Addr::new(full[0], full[1], full[2], full[3])
        )
    } else {
        write!(p.line, "{}/{source}/{scope}", Ipv6Addr::from(full))
    };
}

/// Prints `n` bytes from `at` as tcpdump prints text from a packet (`M-` for the high
/// bit, `^` for control characters), as far as they were captured; whether all were.
fn text(p: &mut Printer, b: &[u8], at: usize, n: usize) -> bool {
    let avail = b.len().saturating_sub(at);
    for &c in b.iter().skip(at).take(n) {
        let mut c = c;
        if c >= 0x80 {
            c &= 0x7f;
            p.line.push_str("M-");
        }
        if !(0x20..0x7f).contains(&c) {
            c ^= 0x40;
            p.line.push('^');
        }
        p.line.push(char::from(c));
    }
    n <= avail
}

/// A TTL as tcpdump writes a span of seconds: `1h2m3s`, `0s`.
fn relative_time(p: &mut Printer, mut secs: u32) {
    if secs == 0 {
        p.line.push_str("0s");
        return;
    }
    for (unit, name) in [
        (31_536_000, "y"),
        (604_800, "w"),
        (86_400, "d"),
        (3_600, "h"),
        (60, "m"),
        (1, "s"),
    ] {
        if secs >= unit {
            let _ = write!(p.line, "{}{name}", secs / unit);
            secs %= unit;
        }
    }
}
