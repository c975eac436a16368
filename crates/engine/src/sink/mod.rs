//! Sinks: where packets end up.
pub(crate) mod catalog;
pub mod disk;
pub mod file;
pub mod ipfix;
pub mod merge;
pub mod output;
pub mod recover;
pub mod sealed;
pub mod sidecar;
