//! Sinks: where packets end up. The files they write, and how those are named, indexed,
//! sealed, recovered and kept, are `corecap_store`'s.
pub mod file;
pub mod ipfix;
pub mod merge;
