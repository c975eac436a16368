//! corecap engine.
#![forbid(unsafe_code)]
#![deny(missing_docs)]
