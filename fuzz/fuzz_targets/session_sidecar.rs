//! Any bytes as a sessions file: its records or a clear error, never a panic or an
//! allocation larger than the input allows; what reads back writes back the same. The same
//! bytes as a frame of each link type go through a session table too.
#![no_main]

use corecap_store::session::format::{decode, encode};
use corecap_store::session::{SessionConfig, SessionTable};
use corecap_wire::Link;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(f) = decode(data) {
        let again = encode(&f.sessions, f.seed, f.covered, f.identity);
        assert_eq!(decode(&again).expect("re-encoded"), f);
    }
    let mut t = SessionTable::new(SessionConfig {
        capacity: 4,
        names: 4,
        streams: 1,
        seed: 0,
    });
    for link in Link::ALL {
        t.add(1, data.len() as u32, data, link, None);
        t.add(2, data.len() as u32, data, link, Some(5));
    }
    for s in t.finish() {
        let _ = s.community_id.as_str();
    }
});
