//! Sources: where packets come from.
pub mod afpacket;
pub mod afxdp;
pub mod replay;
pub mod ring_mark;
pub mod ring_order;
