//! Any bytes as an API request: the HTTP reader, then the JSON bodies of POST /captures
//! and POST /queries, then the checks every request goes through (interface, name in the
//! spool, duration, snap length, time window). Errors, never panics.
#![no_main]

use std::sync::OnceLock;

use corecap_manager::api::StartRequest;
use corecap_manager::spool::Spool;
use libfuzzer_sys::fuzz_target;

fn spool() -> &'static Spool {
    static S: OnceLock<Spool> = OnceLock::new();
    S.get_or_init(|| {
        let d = std::env::temp_dir().join(format!("corecap-fuzz-spool-{}", std::process::id()));
        Spool::open(&d, None).expect("spool")
    })
}

fuzz_target!(|data: &[u8]| {
    let Ok(req) = corecap_manager::http::read_request(data) else {
        return;
    };
    if let Ok(r) = serde_json::from_slice::<StartRequest>(&req.body) {
        let _ = corecap_engine::capture::Input::parse(&r.interface);
        if let Some(n) = &r.name {
            let _ = spool().resolve(n);
        }
        if let Some(d) = r.duration {
            let _ = corecap_engine::limits::seconds(d, "duration");
        }
        if let Some(s) = r.snaplen {
            let _ = corecap_engine::limits::snaplen(s, "snaplen");
        }
    }
    if let Ok(q) = serde_json::from_slice::<corecap_manager::query::QueryRequest>(&req.body) {
        for t in [&q.from, &q.to].into_iter().flatten() {
            let _ = corecap_engine::query::parse_time(t, 1_800_000_000_000_000_000);
        }
    }
});
