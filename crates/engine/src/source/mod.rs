//! Sources: where packets come from.
pub mod afpacket;
pub mod replay;
