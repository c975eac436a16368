//! The control API's requests and responses as the routes see them, and the small
//! HTTP/1.1 client of `corecap request`: one request per connection (`Connection: close`),
//! a body with `Content-Length`. The daemon side speaks HTTP through hyper (see
//! [`crate::server`]); [`write_response`] is left for the one answer it writes itself (503
//! when every connection slot is taken).

use std::io::{self, BufRead, BufReader, Read, Write};

/// The trailer that follows a query's answer (`POST /queries`): the query's statistics
/// and notes as JSON (`corecap_store::query::QueryStats`). Sent to a client that asks for
/// trailers (`TE: trailers`), as `corecap request query` does.
pub const QUERY_TRAILER: &str = "corecap-query";

/// Largest request head (request line and headers) accepted.
pub const MAX_HEAD: usize = 16 * 1024;
/// Largest request body accepted.
pub const MAX_BODY: usize = 64 * 1024;

/// A parsed request.
#[derive(Debug, Default)]
pub struct Request {
    /// `GET`, `POST`, `DELETE`...
    pub method: String,
    /// Path without the query string.
    pub path: String,
    /// Body bytes.
    pub body: Vec<u8>,
}

/// A response to send.
#[derive(Debug)]
pub struct Response {
    /// Status code.
    pub status: u16,
    /// Content type.
    pub content_type: &'static str,
    /// Body.
    pub body: Vec<u8>,
}

impl Response {
    /// A JSON response.
    pub fn json(status: u16, v: &serde_json::Value) -> Self {
        let mut body = serde_json::to_vec_pretty(v).unwrap_or_default();
        body.push(b'\n');
        Self {
            status,
            content_type: "application/json",
            body,
        }
    }

    /// A JSON error: `{"error": message}`.
    pub fn error(status: u16, message: impl Into<String>) -> Self {
        Self::json(status, &serde_json::json!({ "error": message.into() }))
    }

    /// A plain-text response (Prometheus metrics).
    pub fn text(status: u16, body: String) -> Self {
        Self {
            status,
            content_type: "text/plain; version=0.0.4",
            body: body.into_bytes(),
        }
    }
}

/// Reason phrase of a status code.
pub fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        201 => "Created",
        400 => "Bad Request",
        401 => "Unauthorized",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        409 => "Conflict",
        411 => "Length Required",
        413 => "Content Too Large",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        _ => "Unknown",
    }
}

/// Writes a response and flushes it.
pub fn write_response(mut w: impl Write, r: &Response) -> io::Result<()> {
    let head = format!(
        "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        r.status,
        reason(r.status),
        r.content_type,
        r.body.len()
    );
    w.write_all(head.as_bytes())?;
    w.write_all(&r.body)?;
    w.flush()
}

/// The first lines of a client request: request line, host, `Connection: close` and the
/// token; the caller adds the body's headers and the blank line.
fn request_head(method: &str, path: &str, token: Option<&str>) -> String {
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: corecap\r\nConnection: close\r\n");
    if let Some(t) = token {
        head.push_str(&format!("Authorization: Bearer {t}\r\n"));
    }
    head
}

/// Reads a response's status line and headers, up to the blank line (or the end):
/// the status and the Content-Length, if one was given.
/// What a response's head says: its status, its length, and whether its body is chunked.
struct Head {
    status: u16,
    length: Option<usize>,
    chunked: bool,
}

fn read_response_head(r: &mut impl BufRead) -> io::Result<Head> {
    let mut line = String::new();
    r.read_line(&mut line)?;
    let status: u16 = line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "not an HTTP response"))?;
    let mut length = None;
    let mut chunked = false;
    loop {
        line.clear();
        if r.read_line(&mut line)? == 0 {
            break;
        }
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        if let Some((k, v)) = l.split_once(':') {
            if k.eq_ignore_ascii_case("content-length") {
                length = v.trim().parse::<usize>().ok();
            } else if k.eq_ignore_ascii_case("transfer-encoding") {
                chunked = v.trim().eq_ignore_ascii_case("chunked");
            }
        }
    }
    Ok(Head {
        status,
        length,
        chunked,
    })
}

/// Copies a chunked body to `out`; an error when it ends before its last (empty) chunk: the
/// sender stopped in the middle, and what came is less than the answer. Returns the bytes
/// copied and the trailers (names in lower case).
fn copy_chunked(
    r: &mut impl BufRead,
    out: &mut impl Write,
) -> io::Result<(u64, Vec<(String, String)>)> {
    let cut = || {
        io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "the answer was cut short: the daemon ended it before its end (see its log)",
        )
    };
    let mut line = String::new();
    let mut total = 0u64;
    loop {
        line.clear();
        if r.read_line(&mut line)? == 0 {
            return Err(cut());
        }
        let size = line.trim_end().split(';').next().unwrap_or("");
        let n = u64::from_str_radix(size.trim(), 16)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "bad chunk size"))?;
        if n == 0 {
            // Trailers, then the blank line.
            let mut trailers = Vec::new();
            loop {
                line.clear();
                if r.read_line(&mut line)? == 0 || line.trim_end().is_empty() {
                    return Ok((total, trailers));
                }
                if let Some((k, v)) = line.split_once(':') {
                    trailers.push((k.trim().to_ascii_lowercase(), v.trim().to_owned()));
                }
            }
        }
        let copied = io::copy(&mut r.by_ref().take(n), out)?;
        if copied < n {
            return Err(cut());
        }
        total += n;
        line.clear();
        if r.read_line(&mut line)? == 0 {
            return Err(cut());
        }
    }
}

/// Sends one request and reads the response: `(status, body)`.
pub fn call(
    mut stream: impl Read + Write,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: Option<&[u8]>,
) -> io::Result<(u16, Vec<u8>)> {
    let mut head = request_head(method, path, token);
    if let Some(b) = body {
        head.push_str(&format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n",
            b.len()
        ));
    }
    head.push_str("\r\n");
    // One write, head and body: two small ones wait for the first's ACK (Nagle), which
    // the daemon delays (40 ms).
    let mut req = head.into_bytes();
    req.extend_from_slice(body.unwrap_or_default());
    stream.write_all(&req)?;
    stream.flush()?;
    let mut r = BufReader::new(stream);
    let head = read_response_head(&mut r)?;
    let (status, length) = (head.status, head.length);
    let mut body = Vec::new();
    if head.chunked {
        copy_chunked(&mut r, &mut body)?;
        return Ok((status, body));
    }
    match length {
        Some(n) => {
            body.resize(n, 0);
            r.read_exact(&mut body)?;
        }
        None => {
            r.read_to_end(&mut body)?;
        }
    }
    Ok((status, body))
}

/// What [`call_streaming`] got.
#[derive(Debug, Default)]
pub struct Streamed {
    /// The status.
    pub status: u16,
    /// Bytes of a `200` body copied out.
    pub bytes: u64,
    /// Any other status's body.
    pub error: Vec<u8>,
    /// The query's statistics and notes ([`QUERY_TRAILER`]), when the daemon sent them.
    pub query: Option<serde_json::Value>,
}

impl Streamed {
    /// The notes of the query, each a line for the user.
    pub fn notes(&self) -> Vec<String> {
        self.query
            .as_ref()
            .and_then(|q| q["notes"].as_array())
            .map(|a| {
                a.iter()
                    .filter_map(|n| n.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Why the answer is not whole (files cut short, files the filter does not apply to),
    /// or None when it is whole, or when the daemon did not say.
    pub fn partial(&self) -> Option<String> {
        let q = self.query.as_ref()?;
        let count = |k: &str| q[k].as_u64().unwrap_or(0);
        let mut why = Vec::new();
        if count("files_truncated") > 0 {
            why.push(format!("{} files cut short", count("files_truncated")));
        }
        if count("files_refused") > 0 {
            why.push(format!(
                "{} files whose link type the filter does not fit",
                count("files_refused")
            ));
        }
        (!why.is_empty()).then(|| format!("partial: {}", why.join(", ")))
    }
}

/// Sends one request and copies a `200` response's body to `out` as it arrives (a query's
/// pcapng); returns what came: the status, the bytes copied, the query's trailer, and for
/// any other status its body.
pub fn call_streaming(
    mut stream: impl Read + Write,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: Option<&[u8]>,
    out: &mut impl Write,
) -> io::Result<Streamed> {
    let mut head = request_head(method, path, token);
    let b = body.unwrap_or_default();
    head.push_str(&format!(
        "TE: trailers\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        b.len()
    ));
    let mut req = head.into_bytes();
    req.extend_from_slice(b);
    stream.write_all(&req)?;
    stream.flush()?;
    let mut r = BufReader::with_capacity(1 << 20, stream);
    // A query that fails at once may end the connection before hyper has written the head.
    if r.fill_buf()?.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "the answer was cut short: the daemon closed the connection before answering (see its log)",
        ));
    }
    let head = read_response_head(&mut r)?;
    let status = head.status;
    if status == 200 {
        let (bytes, trailers) = if head.chunked {
            copy_chunked(&mut r, out)?
        } else {
            (io::copy(&mut r, out)?, Vec::new())
        };
        let query = trailers
            .iter()
            .find(|(k, _)| k == QUERY_TRAILER)
            .and_then(|(_, v)| serde_json::from_str(v).ok());
        return Ok(Streamed {
            status,
            bytes,
            query,
            ..Streamed::default()
        });
    }
    let mut error = Vec::new();
    r.take(MAX_BODY as u64).read_to_end(&mut error)?;
    Ok(Streamed {
        status,
        error,
        ..Streamed::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_chunked_bodies_whole_and_cut() {
        let mut out = Vec::new();
        let whole = b"4\r\nabcd\r\n2;x=y\r\nef\r\n0\r\n\r\n";
        assert_eq!(copy_chunked(&mut &whole[..], &mut out).expect("whole").0, 6);
        assert_eq!(out, b"abcdef");
        for cut in [&whole[..9], &whole[..12], &whole[..whole.len() - 5]] {
            let e = copy_chunked(&mut &cut[..], &mut Vec::new()).expect_err("cut");
            assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof, "{cut:?}");
        }
    }

    #[test]
    fn test_round_trip_through_call() {
        let resp = Response::error(429, "too many");
        let mut out = Vec::new();
        write_response(&mut out, &resp).expect("write");
        // `call` writes its request into the same buffer before reading; emulate a stream.
        struct Duplex(std::io::Cursor<Vec<u8>>, Vec<u8>);
        impl Read for Duplex {
            fn read(&mut self, b: &mut [u8]) -> io::Result<usize> {
                self.0.read(b)
            }
        }
        impl Write for Duplex {
            fn write(&mut self, b: &[u8]) -> io::Result<usize> {
                self.1.write(b)
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        let mut d = Duplex(std::io::Cursor::new(out), Vec::new());
        let (status, body) = call(&mut d, "GET", "/x", Some("t"), None).expect("call");
        assert_eq!(status, 429);
        let v: serde_json::Value = serde_json::from_slice(&body).expect("json");
        assert_eq!(v["error"], "too many");
        let sent = String::from_utf8(d.1).expect("utf8");
        assert!(sent.starts_with("GET /x HTTP/1.1\r\n"));
        assert!(sent.contains("Authorization: Bearer t\r\n"));
    }
}
