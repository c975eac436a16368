//! Steering: deciding which packets go where, on the workers' data path.
pub mod filter;
pub mod group;
pub mod indirection;
