//! Indexing a whole capture file read from a stream (`corecap index`): the stream is cut
//! into regions of about a target size at block boundaries.

use std::io::{self, Read};

use crate::builder::{u32_at, SHB};
use crate::IndexBuilder;

/// What [`index_reader`] built.
#[derive(Debug)]
pub struct Built {
    /// The serialized sidecar.
    pub sidecar: Vec<u8>,
    /// Packets indexed.
    pub packets: u64,
    /// Regions written.
    pub regions: u32,
    /// Bytes of the file covered by the regions.
    pub covered: u64,
    /// Offset of the first byte that is not a whole block (the file was cut short or
    /// damaged there), if any.
    pub cut_short: Option<u64>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Fmt {
    Start,
    /// `head`: record header length (16, or 24 for Kuznetzov's modified pcap).
    Pcap {
        be: bool,
        head: usize,
    },
    Pcapng {
        be: bool,
    },
}

enum Cut {
    /// Whole blocks to take.
    Take(usize),
    /// Bytes needed in the buffer before a block can be measured.
    Need(usize),
    /// This many whole bytes, then a bad block.
    Bad(usize),
}

/// Length of the block at the start of `b`, in the format `f` (updated by a pcapng SHB).
fn block_len(f: &mut Fmt, b: &[u8]) -> Result<Option<usize>, ()> {
    match *f {
        Fmt::Start => {
            if b.len() < 4 {
                return Ok(None);
            }
            if b[..4] == SHB {
                *f = Fmt::Pcapng { be: false };
                return block_len(f, b);
            }
            let m = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
            let (be, head) = match m {
                0xa1b2_c3d4 | 0xa1b2_3c4d => (false, 16),
                0xd4c3_b2a1 | 0x4d3c_b2a1 => (true, 16),
                0xa1b2_cd34 => (false, 24),
                0x34cd_b2a1 => (true, 24),
                _ => return Err(()),
            };
            if b.len() < 24 {
                return Ok(None);
            }
            *f = Fmt::Pcap { be, head };
            Ok(Some(24))
        }
        Fmt::Pcap { be, head } => {
            if b.len() < head {
                return Ok(None);
            }
            let caplen = u32_at(b, 8, be) as usize;
            if caplen > 256 * 1024 {
                return Err(());
            }
            Ok(Some(head + caplen))
        }
        Fmt::Pcapng { mut be } => {
            if b.len() < 12 {
                return Ok(None);
            }
            if b[..4] == SHB {
                let bom = [b[8], b[9], b[10], b[11]];
                be = match u32::from_le_bytes(bom) {
                    0x1a2b_3c4d => false,
                    0x4d3c_2b1a => true,
                    _ => return Err(()),
                };
                *f = Fmt::Pcapng { be };
            }
            let len = u32_at(b, 4, be) as usize;
            if len < 12 || !len.is_multiple_of(4) || len > 16 * 1024 * 1024 {
                return Err(());
            }
            Ok(Some(len))
        }
    }
}

/// Whole blocks at the start of `buf`, about `region` bytes (at least one block).
fn cut(f: &mut Fmt, buf: &[u8], region: usize) -> Cut {
    let mut pos = 0;
    loop {
        let mut g = *f;
        match block_len(&mut g, &buf[pos..]) {
            Err(()) => return Cut::Bad(pos),
            Ok(None) => {
                return if pos > 0 {
                    Cut::Take(pos)
                } else {
                    Cut::Need(buf.len() + 24)
                }
            }
            Ok(Some(n)) => {
                if pos > 0 && pos + n > region {
                    return Cut::Take(pos);
                }
                if pos + n > buf.len() {
                    return if pos > 0 {
                        Cut::Take(pos)
                    } else {
                        Cut::Need(n)
                    };
                }
                *f = g;
                pos += n;
            }
        }
    }
}

/// Reads a whole pcap or pcapng stream and builds its index, with regions of about
/// `region` bytes at block boundaries. A stream cut short (or damaged) is indexed up to
/// its last whole block, and `cut_short` says where it ended. The index has no identity
/// (see [`index_file`]).
pub fn index_reader(r: impl Read, region: usize) -> io::Result<Built> {
    index_stream(r, region, None)
}

/// [`index_reader`] over a whole file, with the identity of the bytes it covers.
pub fn index_file(file: &std::fs::File, region: usize) -> io::Result<Built> {
    index_stream(
        io::BufReader::with_capacity(1 << 20, file),
        region,
        Some(&|covered| crate::Identity::of_file(file, covered)),
    )
}

/// [`index_reader`] with an identity that `identity` computes from the covered length (a
/// compressed file's, of its decompressed stream).
pub fn index_reader_identified(
    r: impl Read,
    region: usize,
    identity: &dyn Fn(u64) -> io::Result<crate::Identity>,
) -> io::Result<Built> {
    index_stream(r, region, Some(identity))
}

fn index_stream(
    mut r: impl Read,
    region: usize,
    identity: Option<&dyn Fn(u64) -> io::Result<crate::Identity>>,
) -> io::Result<Built> {
    let region = region.max(4096);
    let mut b = IndexBuilder::new();
    let mut f = Fmt::Start;
    let mut buf: Vec<u8> = Vec::with_capacity(2 * region);
    let mut base = 0u64;
    let mut eof = false;
    let mut want = 2 * region;
    let mut regions = 0u32;
    let mut cut_short = None;
    let mut chunk = vec![0u8; 256 * 1024];
    loop {
        while !eof && buf.len() < want {
            match r.read(&mut chunk) {
                Ok(0) => eof = true,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        if buf.is_empty() {
            break;
        }
        match cut(&mut f, &buf, region) {
            Cut::Take(n) => {
                b.add_region(base..base + n as u64, &buf[..n]);
                regions += 1;
                buf.drain(..n);
                base += n as u64;
                want = 2 * region;
            }
            Cut::Need(n) if !eof => want = n.max(2 * region),
            Cut::Need(_) => {
                cut_short = Some(base);
                break;
            }
            Cut::Bad(n) => {
                if n > 0 {
                    b.add_region(base..base + n as u64, &buf[..n]);
                    regions += 1;
                    base += n as u64;
                }
                cut_short = Some(base);
                break;
            }
        }
    }
    if let (Some(id), true) = (identity, base > 0) {
        b.set_identity(id(base)?);
    }
    let packets = b.packets();
    Ok(Built {
        sidecar: b.finish(),
        packets,
        regions,
        covered: base,
        cut_short,
    })
}
