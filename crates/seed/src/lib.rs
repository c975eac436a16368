//! SEED block cipher (RFC 4269).
#![forbid(unsafe_code)]
#![deny(missing_docs)]
