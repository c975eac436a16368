//! The smallest HTTP/1.1 the control API needs, server and client: one request per
//! connection (`Connection: close`), bodies only with `Content-Length`, and hard limits on
//! header and body size, so a malformed or hostile client gets a status code and never a
//! stuck or crashed daemon.

use std::io::{self, BufRead, BufReader, Read, Write};

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
    /// `Authorization: Bearer` token, if sent.
    pub bearer: Option<String>,
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

/// Reads one request. An error carries the response to send (or none when the client
/// is gone or silent).
pub fn read_request(stream: impl Read) -> Result<Request, Option<Response>> {
    read_request_checked(stream, |_| true)
}

/// Reads one request, asking `authorized` about its bearer token once the head is in and
/// before any byte of the body is read: a refused client gets 401 without sending it.
pub fn read_request_checked(
    stream: impl Read,
    authorized: impl Fn(Option<&str>) -> bool,
) -> Result<Request, Option<Response>> {
    let mut r = BufReader::new(stream.take((MAX_HEAD + MAX_BODY + 1) as u64));
    let mut head = 0usize;
    let mut line = String::new();
    let mut next_line = |r: &mut BufReader<_>, line: &mut String| -> Result<(), Option<Response>> {
        line.clear();
        match r.read_line(line) {
            Ok(0) => Err(None),
            Ok(n) => {
                head += n;
                if head > MAX_HEAD {
                    return Err(Some(Response::error(431, "request head over 16 KiB")));
                }
                if !line.ends_with('\n') {
                    return Err(None);
                }
                Ok(())
            }
            Err(e) if e.kind() == io::ErrorKind::InvalidData => {
                Err(Some(Response::error(400, "request head is not UTF-8")))
            }
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                Err(Some(Response::error(408, "request not received in time")))
            }
            Err(_) => Err(None),
        }
    };
    next_line(&mut r, &mut line)?;
    let mut parts = line.split_whitespace();
    let (Some(method), Some(target), Some(version)) = (parts.next(), parts.next(), parts.next())
    else {
        return Err(Some(Response::error(400, "malformed request line")));
    };
    if !version.starts_with("HTTP/1.") {
        return Err(Some(Response::error(400, "only HTTP/1.x is spoken here")));
    }
    let mut req = Request {
        method: method.to_owned(),
        path: target.split('?').next().unwrap_or("").to_owned(),
        ..Default::default()
    };
    let mut length: Option<usize> = None;
    loop {
        next_line(&mut r, &mut line)?;
        let l = line.trim_end_matches(['\r', '\n']);
        if l.is_empty() {
            break;
        }
        let Some((k, v)) = l.split_once(':') else {
            return Err(Some(Response::error(400, "malformed header line")));
        };
        let v = v.trim();
        match k.trim().to_ascii_lowercase().as_str() {
            "content-length" => {
                let n: usize = v
                    .parse()
                    .map_err(|_| Some(Response::error(400, "bad Content-Length")))?;
                if n > MAX_BODY {
                    return Err(Some(Response::error(413, "request body over 64 KiB")));
                }
                // Two lengths are how a request is smuggled past a proxy: refused.
                if length.is_some() {
                    return Err(Some(Response::error(400, "repeated Content-Length")));
                }
                length = Some(n);
            }
            "transfer-encoding" => {
                return Err(Some(Response::error(
                    411,
                    "chunked bodies are not accepted; send Content-Length",
                )))
            }
            "authorization" => {
                req.bearer = v.strip_prefix("Bearer ").map(|t| t.trim().to_owned());
            }
            _ => {}
        }
    }
    if !authorized(req.bearer.as_deref()) {
        return Err(Some(Response::error(
            401,
            "this address needs Authorization: Bearer TOKEN (see serve --token-file)",
        )));
    }
    if let Some(n) = length {
        req.body = vec![0; n];
        if let Err(e) = r.read_exact(&mut req.body) {
            return Err(match e.kind() {
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => {
                    Some(Response::error(408, "request body not received in time"))
                }
                _ => None,
            });
        }
    }
    Ok(req)
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
fn read_response_head(r: &mut impl BufRead) -> io::Result<(u16, Option<usize>)> {
    let mut line = String::new();
    r.read_line(&mut line)?;
    let status: u16 = line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "not an HTTP response"))?;
    let mut length = None;
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
            }
        }
    }
    Ok((status, length))
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
    stream.write_all(head.as_bytes())?;
    if let Some(b) = body {
        stream.write_all(b)?;
    }
    stream.flush()?;
    let mut r = BufReader::new(stream);
    let (status, length) = read_response_head(&mut r)?;
    let mut body = Vec::new();
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

/// Sends one request and copies a `200` response's body to `out` as it arrives (a query's
/// pcapng); returns the status, the bytes copied, and for any other status its body.
pub fn call_streaming(
    mut stream: impl Read + Write,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: Option<&[u8]>,
    out: &mut impl Write,
) -> io::Result<(u16, u64, Vec<u8>)> {
    let mut head = request_head(method, path, token);
    let b = body.unwrap_or_default();
    head.push_str(&format!(
        "Content-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        b.len()
    ));
    stream.write_all(head.as_bytes())?;
    stream.write_all(b)?;
    stream.flush()?;
    let mut r = BufReader::with_capacity(1 << 20, stream);
    let (status, _) = read_response_head(&mut r)?;
    if status == 200 {
        let n = io::copy(&mut r, out)?;
        return Ok((status, n, Vec::new()));
    }
    let mut err = Vec::new();
    r.take(MAX_BODY as u64).read_to_end(&mut err)?;
    Ok((status, 0, err))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_repeated_content_length_is_refused() {
        let raw = b"POST /captures HTTP/1.1\r\nContent-Length: 2\r\nContent-Length: 40\r\n\r\n{}";
        let e = read_request(&raw[..]).expect_err("refused");
        assert_eq!(e.map(|r| r.status), Some(400));
    }

    #[test]
    fn test_token_checked_before_the_body() {
        // The head announces a body that never comes: a refused token is answered at once,
        // without waiting for it.
        struct HeadOnly(&'static [u8], bool);
        impl Read for HeadOnly {
            fn read(&mut self, b: &mut [u8]) -> io::Result<usize> {
                if self.0.is_empty() {
                    self.1 = true;
                    return Err(io::ErrorKind::TimedOut.into());
                }
                let n = b.len().min(self.0.len());
                b[..n].copy_from_slice(&self.0[..n]);
                self.0 = &self.0[n..];
                Ok(n)
            }
        }
        let head =
            b"POST /captures HTTP/1.1\r\nAuthorization: Bearer nope\r\nContent-Length: 100\r\n\r\n";
        let mut r = HeadOnly(head, false);
        let e = read_request_checked(&mut r, |b| b == Some("right")).expect_err("refused");
        assert_eq!(e.map(|r| r.status), Some(401));
        assert!(!r.1, "the body was never waited for");
        let mut r = HeadOnly(head, false);
        let e = read_request_checked(&mut r, |_| true).expect_err("no body");
        assert_eq!(e.map(|r| r.status), Some(408));
    }

    fn parse(raw: &[u8]) -> Result<Request, Option<Response>> {
        read_request(raw)
    }

    #[test]
    fn test_request_with_body_and_token() {
        let r = parse(b"POST /captures?x=1 HTTP/1.1\r\nAuthorization: Bearer abc\r\nContent-Length: 2\r\n\r\n{}")
            .expect("valid");
        assert_eq!(
            (r.method.as_str(), r.path.as_str(), r.bearer.as_deref()),
            ("POST", "/captures", Some("abc"))
        );
        assert_eq!(r.body, b"{}");
    }

    #[test]
    fn test_bad_requests_get_a_status() {
        let status = |raw: &[u8]| parse(raw).err().flatten().map(|r| r.status);
        assert_eq!(status(b"GARBAGE\r\n\r\n"), Some(400));
        assert_eq!(
            status(b"POST / HTTP/1.1\r\nContent-Length: 99999999\r\n\r\n"),
            Some(413)
        );
        assert_eq!(
            status(b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"),
            Some(411)
        );
        assert_eq!(
            status(b"GET / HTTP/1.1\r\nContent-Length: x\r\n\r\n"),
            Some(400)
        );
        let mut big = b"GET / HTTP/1.1\r\n".to_vec();
        big.extend(std::iter::repeat_n(b"X-A: b\r\n".as_slice(), 4000).flatten());
        assert_eq!(status(&big), Some(431));
        // A client that goes away mid-request gets no response, and no error is raised.
        assert_eq!(
            status(b"POST / HTTP/1.1\r\nContent-Length: 10\r\n\r\n{"),
            None
        );
        assert_eq!(status(b"GET / HT"), None);
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
