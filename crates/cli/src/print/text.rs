//! Text protocols over TCP, as tcpdump 4.99 prints them (`txtproto_print`): HTTP and RTSP
//! requests and responses, SMTP, FTP and WHOIS lines. Without `-v` the first line:
//! `HTTP: GET /index.html HTTP/1.1`; with `-v` the length and every text line, each on a
//! line of its own after a tab. A segment whose first line is not a request (a method
//! tcpdump knows) or a response (a 3-digit code as the second word) prints only the
//! protocol's name: `HTTP`.

use std::fmt::Write;

use super::{u8_at, Printer, Step};

/// A text protocol: its name (as ` [|http]` says it, and in capitals as the line starts
/// with it), and for HTTP-like ones the request methods.
pub(super) struct Proto {
    name: &'static str,
    caps: &'static str,
    commands: Option<&'static [&'static str]>,
}

pub(super) const SMTP: Proto = Proto {
    name: "smtp",
    caps: "SMTP",
    commands: None,
};
pub(super) const WHOIS: Proto = Proto {
    name: "whois",
    caps: "WHOIS",
    commands: None,
};
pub(super) const FTP: Proto = Proto {
    name: "ftp",
    caps: "FTP",
    commands: None,
};
pub(super) const HTTP: Proto = Proto {
    name: "http",
    caps: "HTTP",
    commands: Some(&[
        "GET",
        "PUT",
        "COPY",
        "HEAD",
        "LOCK",
        "MOVE",
        "POLL",
        "POST",
        "BCOPY",
        "BMOVE",
        "MKCOL",
        "TRACE",
        "LABEL",
        "MERGE",
        "DELETE",
        "SEARCH",
        "UNLOCK",
        "REPORT",
        "UPDATE",
        "NOTIFY",
        "BDELETE",
        "CONNECT",
        "OPTIONS",
        "CHECKIN",
        "PROPFIND",
        "CHECKOUT",
        "CCM_POST",
        "SUBSCRIBE",
        "PROPPATCH",
        "BPROPFIND",
        "BPROPPATCH",
        "UNCHECKOUT",
        "MKACTIVITY",
        "MKWORKSPACE",
        "UNSUBSCRIBE",
        "RPC_CONNECT",
        "VERSION-CONTROL",
        "BASELINE-CONTROL",
    ]),
};
pub(super) const RTSP: Proto = Proto {
    name: "rtsp",
    caps: "RTSP",
    commands: Some(&[
        "DESCRIBE",
        "ANNOUNCE",
        "GET_PARAMETER",
        "OPTIONS",
        "PAUSE",
        "PLAY",
        "RECORD",
        "REDIRECT",
        "SETUP",
        "SET_PARAMETER",
        "TEARDOWN",
    ]),
};

/// The longest token tcpdump reads (`MAX_TOKEN`).
const MAX_TOKEN: usize = 128;

/// `len` bytes of `proto` (by the TCP header), `b` of them captured; after `: `.
pub(super) fn print(p: &mut Printer, proto: &Proto, b: &[u8], len: u32) -> Step {
    let len = len as usize;
    let print_this = match proto.commands {
        None => true,
        Some(cmds) => is_request_or_response(b, len, cmds),
    };
    p.line.push_str(proto.caps);
    if !print_this {
        return Ok(());
    }
    if p.opts.verbose > 0 {
        let _ = write!(p.line, ", length: {len}");
        let mut at = 0;
        while at < len {
            match line(p, proto, "\n\t", b, at, len)? {
                Some(next) => at = next,
                None => break,
            }
        }
    } else {
        line(p, proto, ": ", b, 0, len)?;
    }
    Ok(())
}

/// Whether the first word is a method of `cmds` (any case), or the second a response
/// code of three digits.
fn is_request_or_response(b: &[u8], len: usize, cmds: &[&str]) -> bool {
    let Some((first, at)) = token(b, 0, len) else {
        return false;
    };
    if cmds.iter().any(|c| c.eq_ignore_ascii_case(first)) {
        return true;
    }
    token(b, at, len).is_some_and(|(t, _)| t.len() == 3 && t.bytes().all(|c| c.is_ascii_digit()))
}

/// The word at `at` (`fetch_token`) and where the next begins: `None` for no word, or one
/// that is not printable ASCII or longer than tcpdump reads.
fn token(b: &[u8], mut at: usize, len: usize) -> Option<(&str, usize)> {
    let start = at;
    while at < len {
        let c = *b.get(at)?;
        if !c.is_ascii() {
            return None;
        }
        if matches!(c, b' ' | b'\t' | b'\r' | b'\n') {
            break;
        }
        if !is_print(c) || at - start + 2 > MAX_TOKEN + 1 {
            return None;
        }
        at += 1;
    }
    if at == start {
        return None;
    }
    let word = std::str::from_utf8(&b[start..at]).ok()?;
    // Past the blanks after it, to the next word or the end of the line.
    while at < len {
        let Some(&c) = b.get(at) else { break };
        if c == b'\r' || c == b'\n' || !is_print(c) || (c != b' ' && c != b'\t') {
            break;
        }
        at += 1;
    }
    Some((word, at))
}

/// Printable ASCII, space included (`ND_ASCII_ISPRINT`).
fn is_print(c: u8) -> bool {
    (0x20..0x7f).contains(&c)
}

/// Prints the line at `at` after `prefix` (`print_txt_line`): where the next begins, or
/// `None` when it is not text or has no end in the segment (then it printed the line cut,
/// with ` [|http]`).
fn line(
    p: &mut Printer,
    proto: &Proto,
    prefix: &str,
    b: &[u8],
    start: usize,
    len: usize,
) -> Step<Option<usize>> {
    let mut at = start;
    while at < len {
        let c = u8_at(b, at, proto.name)?;
        let (end, next) = match c {
            b'\n' => (at, at + 1),
            b'\r' => {
                if at + 1 >= len || u8_at(b, at + 1, proto.name)? != b'\n' {
                    return Ok(None);
                }
                (at, at + 2)
            }
            c if !is_print(c) && c != b'\t' => return Ok(None),
            _ => {
                at += 1;
                continue;
            }
        };
        push_text(p, prefix, &b[start..end]);
        return Ok(Some(next));
    }
    push_text(p, prefix, &b[start..at]);
    let _ = write!(p.line, " [|{}]", proto.name);
    Ok(None)
}

/// Printable ASCII and tabs, as they are.
fn push_text(p: &mut Printer, prefix: &str, t: &[u8]) {
    p.line.push_str(prefix);
    p.line.extend(t.iter().map(|&c| char::from(c)));
}
