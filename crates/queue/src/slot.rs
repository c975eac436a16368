//! The per-packet header that travels with each record.

/// What the engine knows about one packet, copied into the queue in front of
/// its bytes.
///
/// The layout is fixed (`repr(C)`, 24 bytes, no padding), so a record can be
/// written and read as plain bytes in native byte order.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct SlotHeader {
    /// Capture time, nanoseconds since the Unix epoch.
    pub ts_ns: u64,
    /// Capture source: the engine's interface/RX queue id.
    pub queue: u32,
    /// Flow hash used for steering.
    pub hash: u32,
    /// Length of the packet on the wire (the copied bytes may be shorter).
    pub orig_len: u32,
    /// 802.1Q tag control information, valid when [`SlotHeader::VLAN_VALID`] is set.
    pub vlan_tci: u16,
    /// Bit flags: [`SlotHeader::VLAN_VALID`]; other bits are free for the engine.
    pub flags: u16,
}

const _: () = assert!(size_of::<SlotHeader>() == SlotHeader::LEN);

impl SlotHeader {
    /// Size of the header in a record, in bytes.
    pub const LEN: usize = 24;

    /// `vlan_tci` holds a tag the kernel stripped (`TP_STATUS_VLAN_VALID`).
    pub const VLAN_VALID: u16 = 1;

    /// The header as bytes in native byte order.
    pub fn to_bytes(&self) -> [u8; Self::LEN] {
        let mut b = [0u8; Self::LEN];
        b[0..8].copy_from_slice(&self.ts_ns.to_ne_bytes());
        b[8..12].copy_from_slice(&self.queue.to_ne_bytes());
        b[12..16].copy_from_slice(&self.hash.to_ne_bytes());
        b[16..20].copy_from_slice(&self.orig_len.to_ne_bytes());
        b[20..22].copy_from_slice(&self.vlan_tci.to_ne_bytes());
        b[22..24].copy_from_slice(&self.flags.to_ne_bytes());
        b
    }

    /// Reads a header written by [`SlotHeader::to_bytes`].
    pub fn from_bytes(b: &[u8; Self::LEN]) -> Self {
        let u32_at = |i: usize| u32::from_ne_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let u16_at = |i: usize| u16::from_ne_bytes([b[i], b[i + 1]]);
        let mut ts = [0u8; 8];
        ts.copy_from_slice(&b[0..8]);
        SlotHeader {
            ts_ns: u64::from_ne_bytes(ts),
            queue: u32_at(8),
            hash: u32_at(12),
            orig_len: u32_at(16),
            vlan_tci: u16_at(20),
            flags: u16_at(22),
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn test_emit_parse_roundtrip() {
        let h = SlotHeader {
            ts_ns: 0x0102_0304_0506_0708,
            queue: 7,
            hash: 0xdead_beef,
            orig_len: 1518,
            vlan_tci: 100,
            flags: SlotHeader::VLAN_VALID,
        };
        let b = h.to_bytes();
        assert_eq!(&b[0..8], &0x0102_0304_0506_0708u64.to_ne_bytes());
        assert_eq!(&b[16..20], &1518u32.to_ne_bytes());
        assert_eq!(SlotHeader::from_bytes(&b), h);
    }
}
