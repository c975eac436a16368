#![forbid(unsafe_code)]
//! The corecap command.
fn main() {}
