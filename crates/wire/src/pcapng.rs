//! pcapng writer (draft-ietf-opsawg-pcapng), little-endian.
//!
//! A file is one section: a Section Header Block (SHB, section length -1 =
//! unknown), one Interface Description Block (IDB) per capture interface,
//! then Enhanced Packet Blocks (EPB) and Interface Statistics Blocks (ISB).
//! Every block is `type, total length, body, options, total length`, padded
//! to 32 bits.
//!
//! What the engine knows about a packet goes into EPB options that
//! Wireshark shows: the RX queue (`epb_queue`), the flow hash
//! (`epb_hash`, algorithm 5 = Toeplitz) and the drops since the previous
//! packet (`epb_dropcount`). Timestamps are nanoseconds (`if_tsresol` = 9).
//! When the ring reported a VLAN tag, the tag goes back into the frame
//! ([`crate::vlan`]).
//!
//! Writing a packet builds the block header and trailer in one reusable
//! scratch buffer and streams the frame bytes straight to the inner writer:
//! no allocation per packet. Wrap files in a `BufWriter`.

use std::io::{self, Write};

use crate::hash::HASH_ALGORITHM_TOEPLITZ;
use crate::vlan;

/// Block type of the Section Header Block.
pub const BLOCK_SHB: u32 = 0x0A0D_0D0A;
/// Block type of the Interface Description Block.
pub const BLOCK_IDB: u32 = 0x0000_0001;
/// Block type of the obsolete Packet Block.
pub const BLOCK_PB: u32 = 0x0000_0002;
/// Block type of the Simple Packet Block.
pub const BLOCK_SPB: u32 = 0x0000_0003;
/// Block type of the Interface Statistics Block.
pub const BLOCK_ISB: u32 = 0x0000_0005;
/// Block type of the Enhanced Packet Block.
pub const BLOCK_EPB: u32 = 0x0000_0006;
/// Byte-order magic of the SHB, as written in the section's byte order.
pub const BYTE_ORDER_MAGIC: u32 = 0x1A2B_3C4D;

/// `opt_endofopt`: ends an option list.
pub const OPT_ENDOFOPT: u16 = 0;
/// `opt_comment`: UTF-8 comment, valid in any block.
pub const OPT_COMMENT: u16 = 1;
/// `shb_hardware`.
pub const SHB_HARDWARE: u16 = 2;
/// `shb_os`.
pub const SHB_OS: u16 = 3;
/// `shb_userappl`: the application that wrote the section.
pub const SHB_USERAPPL: u16 = 4;
/// `if_name`.
pub const IF_NAME: u16 = 2;
/// `if_description`.
pub const IF_DESCRIPTION: u16 = 3;
/// `if_tsresol`: timestamp resolution (10^-n, or 2^-n when the top bit is set).
pub const IF_TSRESOL: u16 = 9;
/// `if_tsoffset`: seconds added to every timestamp of the interface.
pub const IF_TSOFFSET: u16 = 14;
/// `epb_flags`.
pub const EPB_FLAGS: u16 = 2;
/// `epb_hash`: algorithm byte, then the hash value.
pub const EPB_HASH: u16 = 3;
/// `epb_dropcount`: u64, packets lost between this packet and the previous one.
pub const EPB_DROPCOUNT: u16 = 4;
/// `epb_packetid`.
pub const EPB_PACKETID: u16 = 5;
/// `epb_queue`: u32, the receive queue of the packet.
pub const EPB_QUEUE: u16 = 6;
/// `isb_starttime`: two u32, high then low, in the interface's time units.
pub const ISB_STARTTIME: u16 = 2;
/// `isb_endtime`: like `isb_starttime`.
pub const ISB_ENDTIME: u16 = 3;
/// `isb_ifrecv`: u64, packets received by the interface.
pub const ISB_IFRECV: u16 = 4;
/// `isb_ifdrop`: u64, packets dropped by the interface (lack of resources).
pub const ISB_IFDROP: u16 = 5;
/// `isb_filteraccept`: u64, packets accepted by the filter.
pub const ISB_FILTERACCEPT: u16 = 6;
/// `isb_osdrop`: u64, packets dropped by the operating system.
pub const ISB_OSDROP: u16 = 7;
/// `isb_usrdeliv`: u64, packets delivered to the user.
pub const ISB_USRDELIV: u16 = 8;

/// LINKTYPE_ETHERNET.
pub const LINKTYPE_ETHERNET: u16 = 1;
/// `if_tsresol` value written for every interface: nanoseconds.
pub const TSRESOL_NANOS: u8 = 9;

/// Rounds `n` up to a multiple of 4.
#[inline]
pub const fn pad4(n: usize) -> usize {
    (n + 3) & !3
}

/// A capture interface, written as an IDB.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InterfaceDesc {
    /// `if_name`, e.g. `eth1` or `eth1@2`.
    pub name: String,
    /// `if_description`, if any.
    pub description: Option<String>,
    /// Link type (LINKTYPE_*), 1 for Ethernet.
    pub linktype: u16,
    /// Most bytes kept per packet; 0 = no limit.
    pub snaplen: u32,
}

impl InterfaceDesc {
    /// An Ethernet interface with no description.
    pub fn ethernet(name: &str, snaplen: u32) -> InterfaceDesc {
        InterfaceDesc {
            name: name.to_owned(),
            description: None,
            linktype: LINKTYPE_ETHERNET,
            snaplen,
        }
    }
}

/// One packet to write as an EPB.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Epb<'a> {
    /// Interface id, as returned by [`PcapngWriter::add_interface`] (the
    /// interfaces given to [`PcapngWriter::new`] are 0, 1, ...).
    pub if_id: u32,
    /// Timestamp in nanoseconds since the Unix epoch.
    pub ts_ns: u64,
    /// Captured bytes, as the ring gave them (VLAN tag stripped).
    pub data: &'a [u8],
    /// Length of the packet on the wire (without the stripped tag).
    pub orig_len: u32,
    /// TCI the ring reported; the tag is re-inserted into the frame.
    pub vlan_tci: Option<u16>,
    /// `epb_queue`: the RX queue the packet came from.
    pub queue: Option<u32>,
    /// `epb_hash`: the Toeplitz flow hash.
    pub hash: Option<u32>,
    /// `epb_dropcount`: packets lost since the previous one written.
    pub dropcount: Option<u64>,
}

/// Interface statistics, written as an ISB. Counters that are `None` are
/// left out of the block.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Isb {
    /// `isb_starttime`, nanoseconds.
    pub start_ns: Option<u64>,
    /// `isb_endtime`, nanoseconds.
    pub end_ns: Option<u64>,
    /// `isb_ifrecv`.
    pub ifrecv: Option<u64>,
    /// `isb_ifdrop`.
    pub ifdrop: Option<u64>,
    /// `isb_filteraccept`.
    pub filteraccept: Option<u64>,
    /// `isb_osdrop`.
    pub osdrop: Option<u64>,
    /// `isb_usrdeliv`.
    pub usrdeliv: Option<u64>,
}

/// Largest frame the writer accepts, so every block length fits in a u32.
const MAX_FRAME: usize = (u32::MAX as usize) - 1024;

/// Writes a pcapng section to `W`.
pub struct PcapngWriter<W: Write> {
    w: W,
    /// Block header/trailer under construction; reused for every block.
    scratch: Vec<u8>,
    /// Snap length of each interface, indexed by interface id.
    snaplens: Vec<u32>,
    bytes: u64,
}

impl<W: Write> std::fmt::Debug for PcapngWriter<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PcapngWriter")
            .field("interfaces", &self.snaplens.len())
            .field("bytes_written", &self.bytes)
            .finish_non_exhaustive()
    }
}

/// The `shb_userappl` of the Section Header Block that `head` (a file's first bytes)
/// begins with: the application that wrote the section, as it said; None when `head` is
/// not a whole SHB, or the SHB does not say. Every length is checked against `head`.
pub fn shb_userappl(head: &[u8]) -> Option<&[u8]> {
    let word = |at: usize| -> Option<[u8; 4]> { head.get(at..at + 4)?.try_into().ok() };
    if u32::from_le_bytes(word(0)?) != BLOCK_SHB {
        return None;
    }
    let magic = word(8)?;
    let be = match magic {
        m if u32::from_le_bytes(m) == BYTE_ORDER_MAGIC => false,
        m if u32::from_be_bytes(m) == BYTE_ORDER_MAGIC => true,
        _ => return None,
    };
    let u32_at = |at: usize| {
        word(at).map(|w| {
            if be {
                u32::from_be_bytes(w)
            } else {
                u32::from_le_bytes(w)
            }
        })
    };
    let u16_at = |at: usize| -> Option<u16> {
        let w: [u8; 2] = head.get(at..at + 2)?.try_into().ok()?;
        Some(if be {
            u16::from_be_bytes(w)
        } else {
            u16::from_le_bytes(w)
        })
    };
    // Options run from after the fixed fields (24 bytes) to the trailing length.
    let end = usize::try_from(u32_at(4)?).ok()?.checked_sub(4)?;
    let mut at = 24;
    while at + 4 <= end {
        let (code, len) = (u16_at(at)?, usize::from(u16_at(at + 2)?));
        if code == OPT_ENDOFOPT {
            return None;
        }
        let value = head.get(at + 4..at + 4 + len)?;
        if code == SHB_USERAPPL {
            return Some(value);
        }
        at += 4 + len.next_multiple_of(4);
    }
    None
}

/// Appends a little-endian u16.
#[inline]
fn put16(b: &mut Vec<u8>, v: u16) {
    b.extend_from_slice(&v.to_le_bytes());
}

/// Appends a little-endian u32.
#[inline]
fn put32(b: &mut Vec<u8>, v: u32) {
    b.extend_from_slice(&v.to_le_bytes());
}

/// Appends a little-endian u64.
#[inline]
fn put64(b: &mut Vec<u8>, v: u64) {
    b.extend_from_slice(&v.to_le_bytes());
}

/// Appends zero bytes up to the next multiple of 4 of `len`.
#[inline]
fn put_pad(b: &mut Vec<u8>, len: usize) {
    b.extend_from_slice(&[0u8; 3][..pad4(len) - len]);
}

/// Appends one option (code, length, value, padding).
fn put_opt(b: &mut Vec<u8>, code: u16, value: &[u8]) -> io::Result<()> {
    let len = u16::try_from(value.len()).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "pcapng option longer than 65535 bytes",
        )
    })?;
    put16(b, code);
    put16(b, len);
    b.extend_from_slice(value);
    put_pad(b, value.len());
    Ok(())
}

/// Appends a 64-bit timestamp as the two u32 halves pcapng uses (high first).
#[inline]
fn put_ts(b: &mut Vec<u8>, ts: u64) {
    put32(b, (ts >> 32) as u32);
    put32(b, ts as u32);
}

/// Patches the total length at offset 4 and appends it as the trailer.
fn finish_block(b: &mut Vec<u8>) -> io::Result<()> {
    let total = u32::try_from(b.len() + 4)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "pcapng block too long"))?;
    b[4..8].copy_from_slice(&total.to_le_bytes());
    put32(b, total);
    Ok(())
}

impl<W: Write> PcapngWriter<W> {
    /// Starts a section: writes the SHB (with `shb_userappl` unless empty)
    /// and one IDB for each of `ifaces` (interface ids 0, 1, ...).
    pub fn new(w: W, userappl: &str, ifaces: &[InterfaceDesc]) -> io::Result<Self> {
        let mut this = PcapngWriter {
            w,
            scratch: Vec::with_capacity(256),
            snaplens: Vec::with_capacity(ifaces.len()),
            bytes: 0,
        };
        let b = &mut this.scratch;
        put32(b, BLOCK_SHB);
        put32(b, 0);
        put32(b, BYTE_ORDER_MAGIC);
        put16(b, 1);
        put16(b, 0);
        put64(b, u64::MAX); // section length -1: unknown
        if !userappl.is_empty() {
            put_opt(b, SHB_USERAPPL, userappl.as_bytes())?;
            put_opt(b, OPT_ENDOFOPT, &[])?;
        }
        finish_block(b)?;
        this.emit_scratch()?;
        for d in ifaces {
            this.add_interface(d)?;
        }
        Ok(this)
    }

    /// Writes an IDB for `d` and returns its interface id.
    pub fn add_interface(&mut self, d: &InterfaceDesc) -> io::Result<u32> {
        let id = u32::try_from(self.snaplens.len())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "too many interfaces"))?;
        let b = &mut self.scratch;
        b.clear();
        put32(b, BLOCK_IDB);
        put32(b, 0);
        put16(b, d.linktype);
        put16(b, 0);
        put32(b, d.snaplen);
        if !d.name.is_empty() {
            put_opt(b, IF_NAME, d.name.as_bytes())?;
        }
        if let Some(desc) = &d.description {
            put_opt(b, IF_DESCRIPTION, desc.as_bytes())?;
        }
        put_opt(b, IF_TSRESOL, &[TSRESOL_NANOS])?;
        put_opt(b, OPT_ENDOFOPT, &[])?;
        finish_block(b)?;
        self.emit_scratch()?;
        self.snaplens.push(d.snaplen);
        Ok(id)
    }

    /// Writes one packet as an EPB.
    ///
    /// With `vlan_tci` set, the 802.1Q tag is re-inserted and captured and
    /// original length grow by 4. Captured bytes beyond the interface's
    /// snap length (non-zero) are cut, so the tag never pushes a packet past
    /// the snap length the IDB announced. Errors with `InvalidInput` for an
    /// interface id that has no IDB.
    #[inline]
    pub fn write_epb(&mut self, e: &Epb<'_>) -> io::Result<()> {
        let snaplen = match self.snaplens.get(e.if_id as usize) {
            Some(&s) => s,
            None => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "EPB for an interface without IDB",
                ))
            }
        };
        if e.data.len() > MAX_FRAME {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "frame too long for pcapng",
            ));
        }
        let mut caplen = vlan::tagged_len(e.data.len(), e.vlan_tci);
        if snaplen != 0 {
            caplen = caplen.min(snaplen as usize);
        }
        let orig_len = vlan::tagged_orig_len(e.data.len(), e.orig_len, e.vlan_tci);

        // Header and tail are assembled in fixed arrays (no Vec growth per packet): the
        // header is 28 bytes; the tail holds the data padding (0..3), the options
        // (hash 12, dropcount 12, queue 8, end 4) and the trailing length, 43 at most.
        let mut tail = [0u8; 48];
        let mut t = pad4(caplen) - caplen;
        let mut opt = |code: u16, value: &[u8], t: &mut usize| {
            tail[*t..*t + 2].copy_from_slice(&code.to_le_bytes());
            tail[*t + 2..*t + 4].copy_from_slice(&(value.len() as u16).to_le_bytes());
            tail[*t + 4..*t + 4 + value.len()].copy_from_slice(value);
            *t += 4 + pad4(value.len());
        };
        let mut any = false;
        if let Some(h) = e.hash {
            let mut v = [0u8; 5];
            v[0] = HASH_ALGORITHM_TOEPLITZ;
            v[1..].copy_from_slice(&h.to_be_bytes());
            opt(EPB_HASH, &v, &mut t);
            any = true;
        }
        if let Some(d) = e.dropcount {
            opt(EPB_DROPCOUNT, &d.to_le_bytes(), &mut t);
            any = true;
        }
        if let Some(q) = e.queue {
            opt(EPB_QUEUE, &q.to_le_bytes(), &mut t);
            any = true;
        }
        if any {
            opt(OPT_ENDOFOPT, &[], &mut t);
        }
        let total = 28 + caplen + t + 4;
        let total32 = u32::try_from(total)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "pcapng block too long"))?;
        tail[t..t + 4].copy_from_slice(&total32.to_le_bytes());
        t += 4;
        let mut head = [0u8; 28];
        head[0..4].copy_from_slice(&BLOCK_EPB.to_le_bytes());
        head[4..8].copy_from_slice(&total32.to_le_bytes());
        head[8..12].copy_from_slice(&e.if_id.to_le_bytes());
        head[12..16].copy_from_slice(&((e.ts_ns >> 32) as u32).to_le_bytes());
        head[16..20].copy_from_slice(&(e.ts_ns as u32).to_le_bytes());
        head[20..24].copy_from_slice(&(caplen as u32).to_le_bytes());
        head[24..28].copy_from_slice(&orig_len.to_le_bytes());

        self.w.write_all(&head)?;
        vlan::write_tagged(&mut self.w, e.data, e.vlan_tci, caplen)?;
        self.w.write_all(&tail[..t])?;
        self.bytes += total as u64;
        Ok(())
    }

    /// Writes an ISB for interface `if_id` at time `ts_ns`.
    pub fn write_isb(&mut self, if_id: u32, ts_ns: u64, s: &Isb) -> io::Result<()> {
        if self.snaplens.get(if_id as usize).is_none() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "ISB for an interface without IDB",
            ));
        }
        let b = &mut self.scratch;
        b.clear();
        put32(b, BLOCK_ISB);
        put32(b, 0);
        put32(b, if_id);
        put_ts(b, ts_ns);
        let mut any = false;
        for (code, ts) in [(ISB_STARTTIME, s.start_ns), (ISB_ENDTIME, s.end_ns)] {
            if let Some(ts) = ts {
                let mut v = [0u8; 8];
                v[..4].copy_from_slice(&((ts >> 32) as u32).to_le_bytes());
                v[4..].copy_from_slice(&(ts as u32).to_le_bytes());
                put_opt(b, code, &v)?;
                any = true;
            }
        }
        for (code, n) in [
            (ISB_IFRECV, s.ifrecv),
            (ISB_IFDROP, s.ifdrop),
            (ISB_FILTERACCEPT, s.filteraccept),
            (ISB_OSDROP, s.osdrop),
            (ISB_USRDELIV, s.usrdeliv),
        ] {
            if let Some(n) = n {
                put_opt(b, code, &n.to_le_bytes())?;
                any = true;
            }
        }
        if any {
            put_opt(b, OPT_ENDOFOPT, &[])?;
        }
        finish_block(b)?;
        self.emit_scratch()
    }

    /// Writes the scratch buffer out as one block.
    fn emit_scratch(&mut self) -> io::Result<()> {
        self.w.write_all(&self.scratch)?;
        self.bytes += self.scratch.len() as u64;
        Ok(())
    }

    /// Number of interfaces (IDBs) written so far.
    pub fn interface_count(&self) -> u32 {
        self.snaplens.len() as u32
    }

    /// Writes an Ethernet interface named `name` if none was written: a stream that got no
    /// packet (an empty answer) still has one, which tcpdump needs to read it as empty
    /// ("the capture file has no Interface Description Blocks").
    pub fn ensure_interface(&mut self, name: &str) -> io::Result<()> {
        if self.snaplens.is_empty() {
            self.add_interface(&InterfaceDesc::ethernet(name, 262_144))?;
        }
        Ok(())
    }

    inner_writer!("Bytes of complete blocks written so far.");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn u32le(b: &[u8], at: usize) -> u32 {
        u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
    }

    /// The application a writer names is read back from its SHB; a section that names
    /// none, another tool's, a big-endian one and every cut of the block give what they
    /// hold or None, never a panic.
    #[test]
    fn test_shb_userappl_read_back() {
        let ours = PcapngWriter::new(Vec::new(), "corecap", &[])
            .unwrap()
            .into_inner();
        assert_eq!(shb_userappl(&ours), Some(&b"corecap"[..]));
        let none = PcapngWriter::new(Vec::new(), "", &[]).unwrap().into_inner();
        assert_eq!(shb_userappl(&none), None);
        let other = PcapngWriter::new(Vec::new(), "Editcap (Wireshark) 4.0", &[])
            .unwrap()
            .into_inner();
        assert_eq!(shb_userappl(&other), Some(&b"Editcap (Wireshark) 4.0"[..]));
        // The same SHB in big-endian order.
        let mut be = Vec::new();
        be.extend_from_slice(&BLOCK_SHB.to_be_bytes());
        be.extend_from_slice(&40u32.to_be_bytes());
        be.extend_from_slice(&BYTE_ORDER_MAGIC.to_be_bytes());
        be.extend_from_slice(&[0, 1, 0, 0]);
        be.extend_from_slice(&u64::MAX.to_be_bytes());
        be.extend_from_slice(&SHB_USERAPPL.to_be_bytes());
        be.extend_from_slice(&7u16.to_be_bytes());
        be.extend_from_slice(b"corecap\0");
        be.extend_from_slice(&40u32.to_be_bytes());
        assert_eq!(shb_userappl(&be), Some(&b"corecap"[..]));
        for n in 0..ours.len() {
            let got = shb_userappl(&ours[..n]);
            assert!(got.is_none() || got == Some(&b"corecap"[..]), "{n}");
        }
        assert_eq!(shb_userappl(&[0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0]), None);
    }

    #[test]
    fn test_emit_shb_idb() {
        let w = PcapngWriter::new(
            Vec::new(),
            "corecap",
            &[InterfaceDesc::ethernet("eth1@2", 65535)],
        )
        .unwrap();
        let out = w.into_inner();
        // SHB: 28 fixed + "corecap" option (4 + 8) + end (4) = 44
        assert_eq!(u32le(&out, 0), BLOCK_SHB);
        assert_eq!(u32le(&out, 4), 44);
        assert_eq!(u32le(&out, 8), BYTE_ORDER_MAGIC);
        assert_eq!(&out[16..24], &[0xff; 8]);
        assert_eq!(&out[24..28], &[4, 0, 7, 0]);
        assert_eq!(&out[28..35], b"corecap");
        assert_eq!(u32le(&out, 40), 44);
        let idb = &out[44..];
        assert_eq!(u32le(idb, 0), BLOCK_IDB);
        let len = u32le(idb, 4) as usize;
        // 16 fixed + if_name (4 + 8) + tsresol (4 + 4) + end (4) + trailer 4 = 44
        assert_eq!(len, 44);
        assert_eq!(idb.len(), len);
        assert_eq!(&idb[8..10], &[1, 0]);
        assert_eq!(u32le(idb, 12), 65535);
        assert_eq!(&idb[28..36], &[9, 0, 1, 0, 9, 0, 0, 0]);
        assert_eq!(u32le(idb, len - 4), 44);
    }

    #[test]
    fn test_emit_epb() {
        let mut w = PcapngWriter::new(Vec::new(), "", &[InterfaceDesc::ethernet("x", 0)]).unwrap();
        let start = w.bytes_written() as usize;
        let data: Vec<u8> = (0u8..21).collect();
        w.write_epb(&Epb {
            if_id: 0,
            ts_ns: 0x1_0000_0002,
            data: &data,
            orig_len: 60,
            vlan_tci: Some(0x0064),
            queue: Some(3),
            hash: Some(0xdeadbeef),
            dropcount: Some(7),
        })
        .unwrap();
        let out = w.into_inner();
        let epb = &out[start..];
        let total = u32le(epb, 4) as usize;
        assert_eq!(epb.len(), total);
        assert_eq!(total % 4, 0);
        assert_eq!(u32le(epb, 12), 1);
        assert_eq!(u32le(epb, 16), 2);
        assert_eq!(u32le(epb, 20), 25); // caplen with the tag
        assert_eq!(u32le(epb, 24), 64);
        assert_eq!(&epb[40..44], &[0x81, 0x00, 0x00, 0x64]);
        let opts = &epb[28 + 28..];
        assert_eq!(&opts[..4], &[3, 0, 5, 0]);
        assert_eq!(&opts[4..9], &[5, 0xde, 0xad, 0xbe, 0xef]);
        assert_eq!(&opts[12..16], &[4, 0, 8, 0]);
        assert_eq!(&opts[16..24], &7u64.to_le_bytes());
        assert_eq!(&opts[24..28], &[6, 0, 4, 0]);
        assert_eq!(&opts[28..32], &3u32.to_le_bytes());
        assert_eq!(&opts[32..36], &[0, 0, 0, 0]);
        assert_eq!(u32le(epb, total - 4) as usize, total);
    }

    #[test]
    fn test_emit_snaplen_cut_and_bad_interface() {
        let mut w = PcapngWriter::new(Vec::new(), "", &[InterfaceDesc::ethernet("x", 16)]).unwrap();
        let start = w.bytes_written() as usize;
        let data = [0u8; 16];
        w.write_epb(&Epb {
            data: &data,
            orig_len: 16,
            vlan_tci: Some(1),
            ..Epb::default()
        })
        .unwrap();
        let err = w
            .write_epb(&Epb {
                if_id: 1,
                data: &data,
                ..Epb::default()
            })
            .unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
        assert!(w.write_isb(5, 0, &Isb::default()).is_err());
        let out = w.into_inner();
        assert_eq!(u32le(&out, start + 20), 16);
        assert_eq!(u32le(&out, start + 24), 20);
        assert_eq!(out.len() - start, 28 + 16 + 4);
    }
}
