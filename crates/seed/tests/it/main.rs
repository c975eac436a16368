//! corecap-seed's integration tests, one binary: RFC 4269 known answers, SEED in modes of
//! operation (GCM, CBC), and differential tests against an independent implementation.

mod differential;
mod modes;
mod rfc4269;
