//! Any bytes as the client's side of an API connection, fed over an in-memory stream to
//! the connection handler the daemon runs (hyper's HTTP/1, the token check, the deadline
//! and size limits, the routes), against a manager with an empty spool of its own and no
//! base captures, that takes no capture (`max_captures` 0: a start is checked in full, then
//! refused). An input of odd length comes in as on the TCP listener, which wants the
//! token `0123456789abcdef`. The answer is nothing (the client's head never ended) or
//! HTTP with a status, and its body JSON when it says so. Then the JSON bodies of POST
//! /captures and POST /queries go through the checks every request goes through (name in
//! the spool, duration, snap length, time window). Errors, never panics or hangs. A query
//! thread the input started is waited for before the next input, so the leak check sees
//! only what outlives a request.
#![no_main]

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use corecap_manager::api::StartRequest;
use corecap_manager::manager::{Config, Manager};
use corecap_manager::spool::Spool;
use libfuzzer_sys::fuzz_target;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const TOKEN: &str = "0123456789abcdef";

fn manager() -> &'static Arc<Manager> {
    static M: OnceLock<Arc<Manager>> = OnceLock::new();
    M.get_or_init(|| {
        let d = std::env::temp_dir().join(format!("corecap-fuzz-spool-{}", std::process::id()));
        // max_captures 0: every start is checked in full, then refused.
        let cfg = Config::new(Spool::open(&d, None, None).expect("spool"));
        Arc::new(Manager::new(cfg, vec![]))
    })
}

fn runtime() -> &'static tokio::runtime::Runtime {
    static R: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    R.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime")
    })
}

/// Sends `data` and shuts the write side; returns all that came back.
fn exchange(data: &[u8]) -> Vec<u8> {
    let token = (data.len() % 2 == 1).then(|| Arc::new(TOKEN.to_owned()));
    let data = data.to_vec();
    runtime().block_on(async move {
        let (client, server) = tokio::io::duplex(1 << 16);
        tokio::spawn(corecap_manager::server::connection(
            server,
            manager().clone(),
            token,
        ));
        let (mut rd, mut wr) = tokio::io::split(client);
        tokio::spawn(async move {
            let _ = wr.write_all(&data).await;
            let _ = wr.shutdown().await;
        });
        let mut out = Vec::new();
        tokio::time::timeout(Duration::from_secs(10), rd.read_to_end(&mut out))
            .await
            .expect("the server answers or closes within its deadline")
            .ok();
        out
    })
}

/// Waits (at most 2 s) until no query thread (`corecap-query`) is left: a query the input
/// started ends at its next write once the connection is gone, and its thread-local state
/// is freed as the thread exits. The leak check after each input must not see it half way.
fn wait_for_query_threads() {
    let deadline = std::time::Instant::now() + Duration::from_secs(2);
    let running = || {
        std::fs::read_dir("/proc/self/task")
            .map(|d| {
                d.flatten().any(|t| {
                    std::fs::read_to_string(t.path().join("comm"))
                        .is_ok_and(|c| c.trim() == "corecap-query")
                })
            })
            .unwrap_or(false)
    };
    while running() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// The answer is HTTP: a status line, a head that ends, JSON where it says so. An answer
/// to HEAD is a head alone (RFC 9110 9.3.2): its Content-Type names the body a GET would
/// get, and no body follows.
fn check_answer(request: &[u8], out: &[u8]) {
    if out.is_empty() {
        return;
    }
    let text = String::from_utf8_lossy(out);
    let (head, body) = text.split_once("\r\n\r\n").expect("a whole head");
    let status = head.lines().next().unwrap_or("");
    assert!(
        status.starts_with("HTTP/1.1 ") || status.starts_with("HTTP/1.0 "),
        "{status}"
    );
    let code: u16 = status
        .get(9..12)
        .and_then(|c| c.parse().ok())
        .expect("a status code");
    assert!((200..600).contains(&code), "{status}");
    if head.contains("Content-Type: application/json") && !request.starts_with(b"HEAD ") {
        serde_json::from_str::<serde_json::Value>(body).expect("a JSON body");
    }
}

fuzz_target!(|data: &[u8]| {
    check_answer(data, &exchange(data));
    wait_for_query_threads();
    let Some(at) = data.windows(4).position(|w| w == b"\r\n\r\n") else {
        return;
    };
    let body = &data[at + 4..];
    if let Ok(r) = serde_json::from_slice::<StartRequest>(body) {
        let _ = corecap_engine::capture::Input::parse(&r.interface);
        if let Some(n) = &r.name {
            let _ = manager().spool().resolve(n);
        }
        if let Some(d) = r.duration {
            let _ = corecap_engine::limits::seconds(d, "duration");
        }
        if let Some(s) = r.snaplen {
            let _ = corecap_engine::limits::snaplen(s, "snaplen");
        }
    }
    if let Ok(q) = serde_json::from_slice::<corecap_manager::query::QueryRequest>(body) {
        for t in [&q.from, &q.to].into_iter().flatten() {
            let _ = corecap_store::query::parse_time(t, 1_800_000_000_000_000_000);
        }
    }
});
