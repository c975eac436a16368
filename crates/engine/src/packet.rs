//! The packet as the apps see it: bytes plus what the engine knows about them.

use corecap_wire::Link;

/// One captured packet, borrowed from a ring block or a file buffer.
#[derive(Clone, Copy, Debug)]
pub struct Packet<'a> {
    /// Receive timestamp, nanoseconds since the Unix epoch.
    pub ts_ns: u64,
    /// Captured bytes, from the MAC header (without the VLAN tag the kernel stripped).
    pub data: &'a [u8],
    /// Length on the wire (without the stripped VLAN tag).
    pub wire_len: u32,
    /// Index of the interface (input) in the capture.
    pub iface: u32,
    /// RX queue the packet arrived on, when known.
    pub queue: Option<u32>,
    /// VLAN TCI the kernel stripped from the frame, when it did.
    pub vlan: Option<u16>,
    /// How its source frames packets (Ethernet on a live interface; a file's link type):
    /// chosen once per source, it says where the network header is.
    pub link: Link,
}

impl<'a> Packet<'a> {
    /// An Ethernet frame captured whole at `ts_ns` on interface 0: the packet of tests and
    /// of generated traffic.
    pub fn ethernet(ts_ns: u64, data: &'a [u8]) -> Packet<'a> {
        Packet {
            ts_ns,
            data,
            wire_len: data.len() as u32,
            iface: 0,
            queue: None,
            vlan: None,
            link: Link::Ethernet,
        }
    }

    /// Symmetric flow hash of the packet (Toeplitz, the same for both directions).
    pub fn hash(&self) -> u32 {
        self.link
            .frame_hash(self.data, self.vlan.map(|t| t & 0x0fff))
    }
}
