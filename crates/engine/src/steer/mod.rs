//! Steering: deciding which packets go where.
pub mod consumers;
pub mod filter;
pub mod group;
pub mod indirection;
