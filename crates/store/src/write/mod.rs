//! Writing a recording: packets are formatted into buffers ([`output`]), and one thread per
//! file puts the buffers on disk ([`disk`]: direct I/O through io_uring, the hidden part
//! renamed once whole). Beside each file go its index ([`sidecar`], or [`index_file`] after
//! the fact) and its catalog entry ([`catalog_update`]). A compressed recording's frames are
//! made on the disk writer's thread ([`compress`]).
//!
//! The direction is one way: `output` hands filled buffers to `disk`, and `disk` gives
//! emptied ones back over a channel; `disk` records the sidecar and the catalog entry.
pub mod catalog_update;
pub mod compress;
pub mod disk;
pub mod index_file;
pub mod output;
pub mod sessions_log;
pub mod sidecar;
