//! The recording on disk. This crate owns what a recording folder holds: the names of its
//! files (rotated, per worker, recovered, the hidden part a file is written under), the
//! sealed file format, each file's index beside it, retention under a byte budget,
//! recovery of what a killed writer left, the catalog, and the query that reads it all.
//! The engine's disk writers use it to write; the CLI and the daemon use it to read. It
//! imports nothing of the engine, which keeps the data path.
//!
//! Its folders follow a recording's life:
//!
//! - [`write`]: packets formatted into buffers ([`write::output`]) and put on disk by one
//!   thread per file ([`write::disk`]), then the file's index ([`sidecar`]), its sessions and
//!   its catalog entry ([`catalog_update`]); [`write::index_file`] indexes a file after the
//!   fact.
//! - [`session`]: one record per connection of a file segment, with its Community ID and
//!   the names of its first packets, and the sessions file beside the capture file.
//! - [`format`]: the files of a capture and their names ([`names`]), and the encrypted file
//!   format ([`sealed`], AES-256-GCM chunks).
//! - [`keep`]: whole files kept under a budget ([`retention`]), a killed writer's parts made
//!   whole files, never deleted ([`recover`]), one live writer per name ([`lock`]).
//! - [`read`]: what a file holds ([`sniff`]), and filtered, time-ordered reads over many
//!   files, pruned by their indexes ([`query`]).
//! - [`Catalog`]: one small SQLite database per recording folder (`.corecap-catalog`),
//!   naming every capture file with its state (being written, whole, recovered), its time
//!   range, packet and byte counts and its index's bytes, so a query over a window opens
//!   only the files that overlap it. A missing or damaged catalog is rebuilt from the files
//!   by whoever writes the folder next ([`Catalog::open_or_rebuild`]), and one that missed
//!   updates (a full disk) is brought up to date from them
//!   ([`catalog_update::refresh`]). It is an accelerator: a catalog that cannot be written
//!   or read costs a note, never a packet or an answer.
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
pub mod session;
pub mod write;

pub use catalog::{discard as discard_catalog, Catalog, Entry, Error, State, CATALOG};
// The paths other crates use: the folders above are the layout, these are the API.
pub use format::{names, sealed, seekable};
pub use keep::{lock, recover, retention};
pub use read::{query, sniff};
pub use write::{catalog_update, sidecar};
