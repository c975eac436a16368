//! Counters and reports.
pub mod ledger;
