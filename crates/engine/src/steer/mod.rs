//! Steering: deciding which packets go where.
pub mod filter;
