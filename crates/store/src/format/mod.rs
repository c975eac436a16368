//! What a recording's files are called and how their bytes are framed: [`names`] holds
//! every name rule (rotated, per worker, recovered, the hidden part, sidecars), [`sealed`]
//! the encrypted file format, and [`seekable`] the seek table that ends a compressed one.
pub mod names;
pub mod sealed;
pub mod seekable;
