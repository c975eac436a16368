//! What a recording's files are called and how their bytes are framed: [`names`] holds
//! every name rule (rotated, per worker, recovered, the hidden part, sidecars), and
//! [`sealed`] the encrypted file format.
pub mod names;
pub mod sealed;
