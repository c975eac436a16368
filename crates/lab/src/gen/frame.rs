//! Test frames: Ethernet, optional 802.1Q tag, IPv4, UDP or TCP, with a sequence number in
//! the payload.
//!
//! Frame `i` belongs to flow `(i / d) % flows` where `d` is 2 when both directions are sent
//! and 1 otherwise; with both directions, odd frames go from the flow's destination back to
//! its source. Flow `f` runs from 10.0.0.1:1024 to 10.1.(f/256).(f%256), port 5001 for
//! even flows and 5002 for odd ones, so `port 5001` selects exactly half of the flows.

/// Transport protocol of generated frames.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Proto {
    /// UDP.
    Udp,
    /// TCP (ACK|PSH segments).
    Tcp,
}

/// What frames to make.
#[derive(Clone, Copy, Debug)]
pub struct FrameSpec {
    /// Frame size on the wire, FCS included (64..=1518 as in RFC 2544).
    pub size: u16,
    /// Number of flows.
    pub flows: u32,
    /// UDP or TCP.
    pub proto: Proto,
    /// 802.1Q VLAN id to tag frames with.
    pub vlan: Option<u16>,
    /// Send both directions of each flow.
    pub bidir: bool,
    /// Number of the first flow (flows are `base..base + flows`), so successive runs can
    /// bring new hosts.
    pub base: u32,
    /// Packets a flow sends in a row before the next flow's turn (at least 1): bursts, as
    /// real hosts send.
    pub burst: u32,
}

/// Source MAC of forward frames.
pub const MAC_A: [u8; 6] = [0x02, 0, 0, 0, 0, 0x01];
/// Destination MAC of forward frames.
pub const MAC_B: [u8; 6] = [0x02, 0, 0, 0, 0, 0x02];
/// Source port of every flow.
pub const SPORT: u16 = 1024;

impl FrameSpec {
    /// Length of the frame handed to the device (the size without the 4-byte FCS).
    pub fn len(&self) -> usize {
        (usize::from(self.size).saturating_sub(4)).max(60)
    }

    /// Whether the frame length is zero (never).
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Flow number and direction (true = reverse) of frame `i`.
    pub fn flow_of(&self, i: u64) -> (u32, bool) {
        let d = if self.bidir { 2 } else { 1 };
        let turn = i / d / u64::from(self.burst.max(1));
        let f = (turn % u64::from(self.flows.max(1))) as u32;
        (self.base.wrapping_add(f), self.bidir && i % 2 == 1)
    }

    /// Destination port of flow `f`.
    pub fn dport(f: u32) -> u16 {
        if f.is_multiple_of(2) {
            5001
        } else {
            5002
        }
    }

    /// Destination address of flow `f`: 10.1.0.0/16 for the first 65536 flows, then
    /// 10.2.0.0/16 and on.
    pub fn daddr(f: u32) -> [u8; 4] {
        [
            10,
            1u8.wrapping_add((f >> 16) as u8),
            (f >> 8) as u8,
            f as u8,
        ]
    }

    /// Writes frame `i` into `buf` (at least [`len`](Self::len) bytes); returns its length.
    pub fn fill(&self, i: u64, buf: &mut [u8]) -> usize {
        let len = self.len();
        if buf.len() < len {
            return 0;
        }
        let (f, rev) = self.flow_of(i);
        let (smac, dmac) = if rev { (MAC_B, MAC_A) } else { (MAC_A, MAC_B) };
        let a = [10, 0, 0, 1];
        let b = Self::daddr(f);
        let (saddr, daddr, sport, dport) = if rev {
            (b, a, Self::dport(f), SPORT)
        } else {
            (a, b, SPORT, Self::dport(f))
        };
        let frame = &mut buf[..len];
        frame.fill(0);
        frame[0..6].copy_from_slice(&dmac);
        frame[6..12].copy_from_slice(&smac);
        let mut o = 12;
        if let Some(v) = self.vlan {
            frame[12..14].copy_from_slice(&0x8100u16.to_be_bytes());
            frame[14..16].copy_from_slice(&(v & 0x0fff).to_be_bytes());
            o = 16;
        }
        frame[o..o + 2].copy_from_slice(&0x0800u16.to_be_bytes());
        let ip = o + 2;
        let ip_len = (len - ip) as u16;
        let (proto, l4len) = match self.proto {
            Proto::Udp => (17u8, 8usize),
            Proto::Tcp => (6u8, 20usize),
        };
        {
            let h = &mut frame[ip..ip + 20];
            h[0] = 0x45;
            h[2..4].copy_from_slice(&ip_len.to_be_bytes());
            h[4..6].copy_from_slice(&(i as u16).to_be_bytes());
            h[6] = 0x40; // DF
            h[8] = 64;
            h[9] = proto;
            h[12..16].copy_from_slice(&saddr);
            h[16..20].copy_from_slice(&daddr);
            let c = checksum(h);
            h[10..12].copy_from_slice(&c.to_be_bytes());
        }
        let l4 = ip + 20;
        frame[l4..l4 + 2].copy_from_slice(&sport.to_be_bytes());
        frame[l4 + 2..l4 + 4].copy_from_slice(&dport.to_be_bytes());
        match self.proto {
            Proto::Udp => {
                frame[l4 + 4..l4 + 6].copy_from_slice(&(ip_len - 20).to_be_bytes());
            }
            Proto::Tcp => {
                frame[l4 + 4..l4 + 8].copy_from_slice(&(i as u32).to_be_bytes());
                frame[l4 + 12] = 0x50;
                frame[l4 + 13] = 0x18; // ACK|PSH
                frame[l4 + 14..l4 + 16].copy_from_slice(&65535u16.to_be_bytes());
            }
        }
        let pay = l4 + l4len;
        if pay + 8 <= len {
            frame[pay..pay + 8].copy_from_slice(&i.to_be_bytes());
        }
        len
    }
}

/// The Internet checksum of `b`.
pub fn checksum(b: &[u8]) -> u16 {
    let mut s: u32 = 0;
    for c in b.chunks(2) {
        s += u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]));
    }
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    !(s as u16)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_emit_sizes_and_flows() {
        for size in [64u16, 128, 256, 512, 1024, 1280, 1518] {
            let s = FrameSpec {
                size,
                flows: 4,
                proto: Proto::Udp,
                vlan: None,
                bidir: true,
                base: 0,
                burst: 1,
            };
            let mut buf = vec![0u8; 2048];
            let n = s.fill(3, &mut buf);
            assert_eq!(n, usize::from(size) - 4);
            assert_eq!(checksum(&buf[14..34]), 0, "ip checksum verifies");
            let fwd = corecap_wire::flow::flow_key(&buf[..n], None).expect("parses");
            s.fill(2, &mut buf);
            let rev = corecap_wire::flow::flow_key(&buf[..n], None).expect("parses");
            assert_eq!(
                fwd.reversed(),
                rev,
                "frames 2 and 3 are the two directions of flow 1"
            );
        }
    }

    #[test]
    fn test_base_and_burst() {
        let s = FrameSpec {
            size: 64,
            flows: 3,
            proto: Proto::Udp,
            vlan: None,
            bidir: false,
            base: 70_000,
            burst: 4,
        };
        let flows: Vec<u32> = (0..14).map(|i| s.flow_of(i).0).collect();
        let want = [70_000, 70_001, 70_002, 70_000];
        for (i, f) in flows.iter().enumerate() {
            assert_eq!(*f, want[i / 4 % 4], "frame {i}");
        }
        assert_eq!(FrameSpec::daddr(70_000), [10, 2, 0x11, 0x70]);
        assert_eq!(FrameSpec::daddr(258), [10, 1, 1, 2]);
    }

    #[test]
    fn test_emit_vlan_tcp() {
        let s = FrameSpec {
            size: 64,
            flows: 1,
            proto: Proto::Tcp,
            vlan: Some(100),
            bidir: false,
            base: 0,
            burst: 1,
        };
        let mut buf = vec![0u8; 128];
        let n = s.fill(0, &mut buf);
        assert_eq!(n, 60);
        assert_eq!(&buf[12..16], &[0x81, 0x00, 0x00, 100]);
        let k = corecap_wire::flow::flow_key(&buf[..n], None).expect("parses");
        assert_eq!((k.vlan, k.proto, k.dport), (100, 6, 5001));
    }
}
