//! Any bytes as a client's first TLS bytes: a ClientHello's names or none, never a panic, the
//! names within their bounds; a hello found in the whole is never other names in a part;
//! and the same bytes pushed through a `Stream` in segments (cut where the data's first
//! byte says) give what the whole gives, or nothing.
#![no_main]

use corecap_wire::name::stream::Push;
use corecap_wire::name::tls::{self, ALPN_MAX};
use corecap_wire::name::{Parse, Stream, NAME_MAX};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let whole = tls::client_hello(data);
    if let Parse::Found(h) = whole {
        assert!(h.sni.len() <= NAME_MAX && h.alpn.len() <= ALPN_MAX);
        let _ = (h.sni.escaped().to_string(), h.alpn.escaped().to_string());
    }
    for i in 0..16 {
        let cut = data.len() * i / 16;
        match (tls::client_hello(&data[..cut]), whole) {
            (Parse::Found(part), Parse::Found(h)) => assert_eq!(part, h, "prefix {cut}"),
            (Parse::Invalid, Parse::Found(_)) => panic!("prefix {cut} of a hello is invalid"),
            _ => {}
        }
    }
    // Segments of a stream: sizes from the first byte, sequence numbers near the wrap.
    let step = usize::from(data.first().copied().unwrap_or(1).max(1));
    let mut s = Stream::new();
    let mut seq = u32::MAX - 100;
    s.expect(seq);
    for seg in data.chunks(step) {
        if s.push(seq, seg, false) == Push::GaveUp {
            break;
        }
        seq = seq.wrapping_add(seg.len() as u32);
        // The stream's bytes are a prefix of the data: what they name, the whole names.
        if let Parse::Found(part) = tls::client_hello(s.bytes()) {
            assert_eq!(Parse::Found(part), whole);
            break;
        }
    }
});
