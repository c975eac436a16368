//! The recording on disk. This crate owns what a recording folder holds: the names of its
//! files (rotated, per worker, recovered, the hidden part a file is written under), the
//! sealed file format, each file's index beside it, retention under a byte budget,
//! recovery of what a killed writer left, the catalog, and the query that reads it all.
//! The engine's disk writers use it to write; the CLI and the daemon use it to read. It
//! imports nothing of the engine, which keeps the data path.
//!
//! - [`names`]: the files of a capture and their names.
//! - [`sealed`]: the encrypted file format (AES-256-GCM chunks).
//! - [`sidecar`]: writing a file's index beside it.
//! - [`retention`]: whole files kept under a byte budget.
//! - [`recover`]: a killed writer's parts made whole files, never deleted.
//! - [`lock`]: one live writer per capture name and per spool.
//! - [`Catalog`]: one small SQLite database per recording folder (`.corecap-catalog`),
//!   naming every capture file with its state (being written, whole, recovered), its time
//!   range, packet and byte counts and its index's bytes, so a query over a window opens
//!   only the files that overlap it. A missing or damaged catalog is rebuilt from the files
//!   by whoever writes the folder next ([`Catalog::open_or_rebuild`]), and one that missed
//!   updates (a full disk) is brought up to date from them
//!   ([`catalog_update::refresh`]). It is an accelerator: a catalog that cannot be written
//!   or read costs a note, never a packet or an answer.
//! - [`sniff`]: what a file holds, from its first bytes.
//! - [`query`]: filtered, time-ordered reads over many files, pruned by their indexes.
//!
//! SQLite (through `rusqlite`, built in) rather than a format of our own: several disk
//! writers update one folder's catalog at once, readers query it while they do, and a
//! crash in the middle of an update must leave the old state or the new one. SQLite's
//! rollback journal gives all three, tested far beyond what a bespoke file would be; not
//! its WAL, whose mapped index kills a process with SIGBUS on a full disk (the reasons are
//! in [`Catalog`]'s module).
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod catalog;
pub mod format;
pub mod keep;
pub mod read;
pub mod write;

pub use catalog::{discard as discard_catalog, Catalog, Entry, Error, State, CATALOG};
// The paths other crates use: the folders above are the layout, these are the API.
pub use format::{names, sealed};
pub use keep::{lock, recover, retention};
pub use read::{query, sniff};
pub use write::{catalog_update, sidecar};
