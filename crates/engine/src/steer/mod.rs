//! Steering: deciding which packets go where.
pub mod filter;
pub mod group;
pub mod indirection;
