//! `GET /captures/{id}/pcap`: a capture's packets as one pcapng in time order, streamed as
//! `POST /queries` streams its answer (chunked; an error after the first byte cuts the
//! connection, so a client never takes a short download for a whole one), with a
//! `Content-Disposition` that names the file `ID.pcapng` for a browser.
//!
//! The answer is the query over the capture's own files (the hidden part of one still being
//! written), with no window and no filter: every packet once, whatever the files' format.

use corecap_store::query::QuerySpec;

use crate::http::Response;
use crate::manager::Manager;

/// The capture a download path names: `/captures/{id}/pcap`.
pub fn capture_of(path: &str) -> Option<&str> {
    let rest = path.trim_end_matches('/').strip_prefix("/captures/")?;
    let (id, what) = rest.split_once('/')?;
    (what == "pcap" && !id.is_empty() && !id.contains('/')).then_some(id)
}

/// The query that gives capture `id`'s packets, and the name the download takes; `Err` is
/// the response (404 for no such capture, 409 for one without packets).
pub fn spec(m: &Manager, id: &str) -> Result<(QuerySpec, String), Response> {
    let files = m
        .packet_files(id)
        .map_err(|e| Response::error(e.status, e.message))?;
    let spec = QuerySpec {
        files,
        from: 0,
        to: u64::MAX,
        filter: None,
        kek: m.key().cloned(),
        scan: false,
        once: true,
        sessions: None,
        folders: Vec::new(),
        reach: false,
    };
    Ok((spec, format!("{id}.pcapng")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_capture_of() {
        assert_eq!(capture_of("/captures/c3/pcap"), Some("c3"));
        assert_eq!(capture_of("/captures/c3/pcap/"), Some("c3"));
        assert_eq!(capture_of("/captures/c3"), None);
        assert_eq!(capture_of("/captures//pcap"), None);
        assert_eq!(capture_of("/captures/a/b/pcap"), None);
        assert_eq!(capture_of("/queries"), None);
    }
}
