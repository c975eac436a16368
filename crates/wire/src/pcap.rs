//! Classic pcap writer, for tools that predate pcapng.
//!
//! The file is a 24-byte global header (magic `0xa1b23c4d` = nanosecond
//! timestamps, or `0xa1b2c3d4` = microseconds as tcpdump writes them; version
//! 2.4, snap length, link type) followed by one 16-byte
//! record header and the frame bytes per packet, all little-endian. A VLAN
//! tag the ring stripped is put back as in [`crate::vlan`].

use std::io::{self, Write};

use crate::vlan;

/// Magic of a pcap file with microsecond timestamps.
pub const MAGIC_MICROS: u32 = 0xa1b2_c3d4;
/// Magic of a pcap file with nanosecond timestamps.
pub const MAGIC_NANOS: u32 = 0xa1b2_3c4d;
/// The first time (nanoseconds since the epoch) a record cannot hold: its seconds are 32
/// bits, and [`PcapWriter`] clamps later times to their largest value.
pub const TS_LIMIT_NS: u64 = (u32::MAX as u64 + 1) * 1_000_000_000;
/// Magic of Alexey Kuznetzov's modified pcap (libpcap's `KUZNETZOV_TCPDUMP_MAGIC`):
/// microsecond timestamps, and 8 more bytes after each record header (ifindex u32,
/// protocol u16, pkt_type u8, pad u8).
pub const MAGIC_KUZNETZOV: u32 = 0xa1b2_cd34;
/// Length of the global header.
pub const GLOBAL_HEADER_LEN: usize = 24;
/// Length of a record header.
pub const RECORD_HEADER_LEN: usize = 16;
/// LINKTYPE_ETHERNET.
pub const LINKTYPE_ETHERNET: u32 = 1;

/// Writes a pcap file (nanosecond or microsecond timestamps) to `W`.
pub struct PcapWriter<W: Write> {
    w: W,
    snaplen: u32,
    bytes: u64,
    /// Nanosecond timestamps (else microseconds).
    nanos: bool,
}

impl<W: Write> std::fmt::Debug for PcapWriter<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PcapWriter")
            .field("snaplen", &self.snaplen)
            .field("bytes_written", &self.bytes)
            .field("nanos", &self.nanos)
            .finish_non_exhaustive()
    }
}

impl<W: Write> PcapWriter<W> {
    /// Writes the global header: nanosecond magic, version 2.4, `snaplen`
    /// and `linktype` (LINKTYPE_*, 1 for Ethernet).
    pub fn new(w: W, linktype: u32, snaplen: u32) -> io::Result<Self> {
        Self::with_precision(w, linktype, snaplen, true)
    }

    /// Writes the global header with the nanosecond magic (`nanos`) or the
    /// microsecond one; records then carry that resolution (times are cut, not
    /// rounded, so a packet never moves into the next microsecond).
    pub fn with_precision(mut w: W, linktype: u32, snaplen: u32, nanos: bool) -> io::Result<Self> {
        let magic = if nanos { MAGIC_NANOS } else { MAGIC_MICROS };
        let mut h = [0u8; GLOBAL_HEADER_LEN];
        h[0..4].copy_from_slice(&magic.to_le_bytes());
        h[4..6].copy_from_slice(&2u16.to_le_bytes());
        h[6..8].copy_from_slice(&4u16.to_le_bytes());
        // thiszone and sigfigs stay 0.
        h[16..20].copy_from_slice(&snaplen.to_le_bytes());
        h[20..24].copy_from_slice(&linktype.to_le_bytes());
        w.write_all(&h)?;
        Ok(PcapWriter {
            w,
            snaplen,
            bytes: GLOBAL_HEADER_LEN as u64,
            nanos,
        })
    }

    /// Writes one record.
    ///
    /// With `vlan_tci` set the tag is re-inserted, growing the captured and
    /// original lengths by 4. Captured bytes beyond the snap length
    /// (non-zero) are cut, as a reader would cut them. Seconds past 2106
    /// (u32) saturate.
    pub fn write_packet(
        &mut self,
        ts_ns: u64,
        data: &[u8],
        orig_len: u32,
        vlan_tci: Option<u16>,
    ) -> io::Result<()> {
        let mut caplen = vlan::tagged_len(data.len(), vlan_tci);
        if self.snaplen != 0 {
            caplen = caplen.min(self.snaplen as usize);
        }
        let caplen32 = u32::try_from(caplen)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "frame too long for pcap"))?;
        let orig = vlan::tagged_orig_len(data.len(), orig_len, vlan_tci);
        let secs = u32::try_from(ts_ns / 1_000_000_000).unwrap_or(u32::MAX);
        let frac = (ts_ns % 1_000_000_000) as u32;
        let frac = if self.nanos { frac } else { frac / 1000 };
        let mut h = [0u8; RECORD_HEADER_LEN];
        h[0..4].copy_from_slice(&secs.to_le_bytes());
        h[4..8].copy_from_slice(&frac.to_le_bytes());
        h[8..12].copy_from_slice(&caplen32.to_le_bytes());
        h[12..16].copy_from_slice(&orig.to_le_bytes());
        self.w.write_all(&h)?;
        vlan::write_tagged(&mut self.w, data, vlan_tci, caplen)?;
        self.bytes += (RECORD_HEADER_LEN + caplen) as u64;
        Ok(())
    }

    inner_writer!("Bytes of header and complete records written so far.");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_emit() {
        let mut w = PcapWriter::new(Vec::new(), LINKTYPE_ETHERNET, 100).unwrap();
        let data: Vec<u8> = (0u8..14).collect();
        w.write_packet(1_500_000_123, &data, 60, Some(0x0005))
            .unwrap();
        assert_eq!(w.bytes_written(), 24 + 16 + 18);
        let out = w.into_inner();
        assert_eq!(&out[..4], &[0x4d, 0x3c, 0xb2, 0xa1]);
        assert_eq!(&out[4..8], &[2, 0, 4, 0]);
        assert_eq!(&out[16..20], &100u32.to_le_bytes());
        assert_eq!(&out[20..24], &1u32.to_le_bytes());
        let r = &out[24..];
        assert_eq!(&r[0..4], &1u32.to_le_bytes());
        assert_eq!(&r[4..8], &500_000_123u32.to_le_bytes());
        assert_eq!(&r[8..12], &18u32.to_le_bytes());
        assert_eq!(&r[12..16], &64u32.to_le_bytes());
        assert_eq!(&r[16 + 12..16 + 16], &[0x81, 0, 0, 5]);
        assert_eq!(out.len(), 24 + 16 + 18);
    }

    #[test]
    fn test_emit_micros() {
        let mut w = PcapWriter::with_precision(Vec::new(), LINKTYPE_ETHERNET, 100, false).unwrap();
        w.write_packet(1_500_000_999, &[0u8; 14], 14, None).unwrap();
        let out = w.into_inner();
        assert_eq!(&out[..4], &[0xd4, 0xc3, 0xb2, 0xa1]);
        assert_eq!(&out[24..28], &1u32.to_le_bytes());
        assert_eq!(&out[28..32], &500_000u32.to_le_bytes());
    }

    #[test]
    fn test_emit_snaplen_cut() {
        let mut w = PcapWriter::new(Vec::new(), LINKTYPE_ETHERNET, 14).unwrap();
        w.write_packet(0, &[0u8; 14], 14, Some(1)).unwrap();
        let out = w.into_inner();
        assert_eq!(&out[24 + 8..24 + 12], &14u32.to_le_bytes());
        assert_eq!(&out[24 + 12..24 + 16], &18u32.to_le_bytes());
        assert_eq!(out.len(), 24 + 16 + 14);
    }
}
