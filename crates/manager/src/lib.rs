//! The on-demand manager (paper 004): a daemon that starts and stops captures per
//! request, over HTTP+JSON on a Unix socket (and optionally loopback TCP with a token).
//!
//! - [`server`]: listeners and routes, HTTP/1.1 through hyper on one runtime thread off
//!   the capture cores; [`http`]: the requests and responses the routes see, and the client;
//! - [`manager`]: the captures, in attach mode (a consumer of a running base capture's
//!   workers) or spawn mode (a worker of its own on a free core, see [`cores`]), with their
//!   limits, thread lag and final accounting;
//! - [`opener`]: the one thread that keeps capabilities, opening sockets and live handles
//!   for the threads that read requests, which hold none;
//! - [`spool`]: the one directory files go to, and its quota; [`catalog`]: what the daemon
//!   remembers of its captures across restarts, in a small file in the spool;
//! - [`query`]: `POST /queries`, recorded packets streamed back as pcapng, off the capture
//!   cores and at idle I/O priority;
//! - [`stats`]: what the base captures and their recording did, read while the daemon
//!   runs and after it stopped;
//! - [`keep`]: what the recording keeps (`GET /status`: its reach, retention's budgets and
//!   deletions); [`hold`]: holds made and released (`POST /holds`, `DELETE /holds/NAME`);
//!   [`eve`]: Suricata's alerts followed, their flows held; [`alert`]: `GET /alerts`;
//! - [`api`]: the JSON; [`metrics`]: the Prometheus text;
//! - [`web`]: the analyst's page at `/`, its login and the endpoints only it needs.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod alert;
pub mod api;
pub mod catalog;
pub mod cores;
pub mod download;
pub mod eve;
pub mod flows;
pub mod hold;
pub mod http;
pub mod keep;
pub mod lookback;
pub mod manager;
pub mod metrics;
pub mod opener;
pub mod query;
pub mod server;
pub mod spool;
pub mod stats;
pub mod tls;
pub mod web;

/// A random bearer token: 32 bytes as hex.
pub fn new_token() -> std::io::Result<String> {
    let mut b = [0u8; 32];
    getrandom::getrandom(&mut b).map_err(|e| std::io::Error::other(e.to_string()))?;
    Ok(b.iter().map(|x| format!("{x:02x}")).collect())
}
