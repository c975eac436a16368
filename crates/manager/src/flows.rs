//! `GET /flows`: the connections of the spool's files, and of the recording's with
//! `serve --record`, from their sessions files, as `corecap flows --json` prints them.
//!
//! The parameters are a URL query: `from`, `to` (as `POST /queries` takes them),
//! `community_id`, `sni`, `dns`, `http_host`, `host`, `port`, `filter` and `limit`
//! (default [`DEFAULT_LIMIT`], at most [`MAX_LIMIT`]), each optional, percent-encoded. A
//! bad parameter gets 400 before anything is read. The answer is `200` with
//! `Content-Type: application/x-ndjson`, chunked: one JSON object per connection and line
//! (`corecap_store::read::flow_doc`, Elastic Common Schema names), sorted by first packet,
//! then one last line `{"type":"end","truncated":...,"matched":...,...}` with the listing's
//! figures and notes (files without sessions). A client that lacks that line has a cut
//! answer.

use std::io::{self, BufWriter, Write};
use std::time::{SystemTime, UNIX_EPOCH};

use corecap_store::query::{expand_paths, parse_time};
use corecap_store::read::flow_doc::FlowDoc;
use corecap_store::read::flows::{list, FlowSort, FlowSpec};

use crate::http::Response;
use crate::manager::Manager;

/// Connections given when `limit` is not: the answer says whether there were more.
pub const DEFAULT_LIMIT: usize = 10_000;
/// The largest `limit` taken.
pub const MAX_LIMIT: usize = 1_000_000;

/// Decodes a URL query into its pairs (`+` a space, `%XX` a byte); a bad escape or bytes
/// that are not UTF-8 are an error.
pub fn query_pairs(q: &str) -> Result<Vec<(String, String)>, String> {
    let decode = |s: &str| -> Result<String, String> {
        let b = s.as_bytes();
        let mut out = Vec::with_capacity(b.len());
        let mut i = 0;
        while i < b.len() {
            match b[i] {
                b'+' => out.push(b' '),
                b'%' => {
                    let hex = b
                        .get(i + 1..i + 3)
                        .and_then(|h| std::str::from_utf8(h).ok());
                    let v = hex.and_then(|h| u8::from_str_radix(h, 16).ok());
                    out.push(v.ok_or_else(|| format!("bad escape in {s:?}"))?);
                    i += 2;
                }
                c => out.push(c),
            }
            i += 1;
        }
        String::from_utf8(out).map_err(|_| format!("{s:?} is not UTF-8"))
    };
    q.split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            Ok((decode(k)?, decode(v)?))
        })
        .collect()
}

/// Checks the parameters and turns them into a listing over the spool and the recording;
/// `Err` is the response.
pub fn spec(m: &Manager, query: &str) -> Result<FlowSpec, Response> {
    let bad = |e: String| Response::error(400, e);
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let mut spec = FlowSpec {
        to: u64::MAX,
        limit: Some(DEFAULT_LIMIT),
        sort: FlowSort::First,
        kek: m.key().cloned(),
        ..FlowSpec::default()
    };
    let s = &mut spec.select;
    for (k, v) in query_pairs(query).map_err(bad)? {
        let time = |v: &str| parse_time(v, now).map_err(|e| bad(format!("{k} {v}: {e}")));
        match k.as_str() {
            "from" => spec.from = time(&v)?,
            "to" => spec.to = time(&v)?,
            "community_id" => match corecap_wire::CommunityId::parse(v.trim().as_bytes()) {
                Some(_) => s.community_id = Some(v.trim().to_owned()),
                None => {
                    return Err(bad(format!(
                    "community_id {v:?}: not a Community ID (v1 is `1:` then 28 base64 characters)"
                )))
                }
            },
            "sni" => s.sni = Some(v),
            "dns" => s.dns = Some(v),
            "http_host" => s.http_host = Some(v),
            "host" => s.host = Some(v.parse().map_err(|e| bad(format!("host {v}: {e}")))?),
            "port" => s.port = Some(v.parse().map_err(|e| bad(format!("port {v}: {e}")))?),
            "filter" => s.filter = Some(v).filter(|f| !f.trim().is_empty()),
            "limit" => {
                let n: usize = v.parse().map_err(|e| bad(format!("limit {v}: {e}")))?;
                if n == 0 || n > MAX_LIMIT {
                    return Err(bad(format!("limit {n}: from 1 to {MAX_LIMIT}")));
                }
                spec.limit = Some(n);
            }
            _ => return Err(bad(format!("unknown parameter {k:?}"))),
        }
    }
    if spec.from > spec.to {
        return Err(bad("from is after to: the window is empty".into()));
    }
    if let Some(f) = &spec.select.filter {
        corecap_store::read::flow_match::SessionFilter::new(Some(f))
            .map_err(|e| bad(e.to_string()))?;
    }
    let mut folders = vec![m.spool().dir().to_owned()];
    folders.extend(m.record().map(|d| d.to_owned()));
    let (files, _) = expand_paths(&folders).map_err(|e| Response::error(500, e.to_string()))?;
    spec.files = files;
    spec.folders = folders;
    spec.reach = true;
    Ok(spec)
}

/// Lists the connections of `spec` and writes them to `w` as JSON lines, then the end
/// line (see the module doc).
pub fn stream<W: Write>(m: &Manager, spec: &FlowSpec, w: &mut W) -> io::Result<()> {
    crate::query::step_aside(m);
    let (flows, stats) = list(spec).map_err(|e| io::Error::other(e.to_string()))?;
    let mut w = BufWriter::with_capacity(64 << 10, w);
    for f in &flows {
        serde_json::to_writer(&mut w, &FlowDoc::of(f))?;
        w.write_all(b"\n")?;
    }
    let mut end = serde_json::to_value(&stats)?;
    end["type"] = serde_json::Value::from("end");
    end["given"] = serde_json::Value::from(flows.len());
    serde_json::to_writer(&mut w, &end)?;
    w.write_all(b"\n")?;
    w.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_query_pairs() {
        let p = query_pairs("sni=%2A.example.com&filter=tcp+port+443&x=&y").unwrap();
        assert_eq!(
            p,
            [
                ("sni".into(), "*.example.com".into()),
                ("filter".into(), "tcp port 443".into()),
                ("x".into(), String::new()),
                ("y".into(), String::new())
            ]
        );
        assert!(query_pairs("a=%zz").is_err());
        assert!(query_pairs("a=%ff").is_err());
    }
}
