//! What a recording's files are called and how their bytes are framed: [`names`] holds
//! every name rule (rotated, per worker, recovered, the hidden part, sidecars), [`sealed`]
//! the encrypted file format, [`seekable`] the seek table that ends a compressed one, and
//! [`stored`] the frames of a compressed one that hold bytes that did not compress.
pub mod names;
pub mod sealed;
pub mod seekable;
pub mod stored;
