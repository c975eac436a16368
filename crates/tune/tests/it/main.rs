//! corecap-tune's integration tests, one binary: plans, warnings, apply and restore on
//! the fixture roots in tests/fixtures.

mod fixtures;
