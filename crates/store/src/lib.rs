//! The recording on disk. This crate owns what a recording folder holds beside its capture
//! files; the engine's disk writers keep it true as they write, name, recover and delete
//! files, and queries read it. It imports nothing of the engine.
//!
//! - [`Catalog`]: one small SQLite database per recording folder (`.corecap-catalog`),
//!   naming every capture file with its state (being written, whole, recovered), its time
//!   range, packet and byte counts and its index's bytes, so a query over a window opens
//!   only the files that overlap it. A missing or damaged catalog is rebuilt from the files
//!   by whoever writes the folder next ([`Catalog::open_or_rebuild`]).
//!
//! SQLite (through `rusqlite`, built in) rather than a format of our own: several disk
//! writers update one folder's catalog at once, readers query it while they do, and a
//! crash in the middle of an update must leave the old state or the new one. SQLite's WAL
//! gives all three, tested far beyond what a bespoke file would be.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod catalog;

pub use catalog::{Catalog, Entry, Error, State, CATALOG};
