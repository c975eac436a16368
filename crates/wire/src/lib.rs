//! Packet parsing, flow keys, the symmetric flow hash, and capture files.
//!
//! This crate holds everything corecap knows about bytes on the wire and on
//! disk. It has no unsafe code and no I/O of its own beyond `Read`/`Write`;
//! the engine calls it on the capture hot path, so parsing, hashing and
//! writing allocate nothing per packet.
//!
//! The modules, in the order a packet meets them:
//!
//! - [`flow`]: [`flow_key`] reads an Ethernet frame (VLAN tags, IPv4 with
//!   options and fragments, IPv6 with extension headers, TCP/UDP/SCTP
//!   ports) into a [`FlowKey`]. A frame it cannot use gives a `Copy`
//!   [`ParseError`] that indexes a drop counter.
//! - [`link`]: [`Link`] says where each link type a file may hold (Ethernet, Linux
//!   cooked v1 and v2, raw IP, BSD NULL/LOOP, NFLOG) keeps its network header; chosen once
//!   per source, it gives the flow key and the steering hash of any of them.
//! - [`transport`]: [`Transport`] reads a frame's transport layer through the same walk:
//!   fragment state, TCP flags and sequence number, ICMP type and code, and the payload,
//!   bounded by the IP length (padding is never payload).
//! - [`community_id`](mod@community_id): [`community_id()`] gives a flow's Community ID (v1), as Zeek, Suricata
//!   and Arkime compute it.
//! - [`name`]: names from a connection's first bytes: the DNS question, a TLS ClientHello's
//!   server name and ALPN, an HTTP request's method, Host and path, and [`name::Stream`], the
//!   bounded accumulator of a TCP stream's first segments.
//! - [`hash`]: the Toeplitz hash of Microsoft RSS with the symmetric key
//!   `0x6d5a` (Woo and Park), so both directions of a flow get the same
//!   [`flow_hash`] and the same worker. [`frame_hash`] hashes a raw frame,
//!   non-IP frames by their MAC pair. [`toeplitz`] is the bit-by-bit
//!   reference, checked against Microsoft's verification suite.
//! - [`vlan`]: the kernel strips the 802.1Q tag and reports it in the ring
//!   header; both writers put it back with [`vlan::write_tagged`].
//! - [`pcapng`]: [`PcapngWriter`] writes a section with one IDB per
//!   interface, Enhanced Packet Blocks carrying `epb_queue`, `epb_hash` and
//!   `epb_dropcount`, and Interface Statistics Blocks.
//! - [`pcap`]: [`PcapWriter`], classic nanosecond pcap for older tools.
//! - [`read`]: [`CaptureReader`] reads either format back (any byte order,
//!   several sections, statistics), for replay and for tests, and turns
//!   every malformed or cut file into a one-line [`ReadError`] naming the
//!   byte offset. It reads Kuznetzov's modified pcap too.
//! - [`compression`]: [`Decompress`] reads gzip, zstd and lz4 compressed
//!   files as a stream, told by their magic number; [`CaptureReader::open`]
//!   uses it, so a `.pcapng.gz` reads like the plain file.
//!
//! ```
//! use corecap_wire::{flow_key, frame_hash, CaptureReader, Epb, InterfaceDesc, PcapngWriter};
//!
//! // An IPv4/UDP frame as the ring hands it over (its VLAN tag stripped).
//! let mut frame = vec![0u8; 12];
//! frame.extend_from_slice(&[0x08, 0x00, 0x45, 0, 0, 28, 0, 0, 0, 0, 64, 17, 0, 0]);
//! frame.extend_from_slice(&[10, 0, 0, 1, 10, 0, 0, 2, 0x0f, 0xa0, 0x00, 0x35, 0, 8, 0, 0]);
//! let key = flow_key(&frame, Some(100)).unwrap();
//! assert_eq!((key.vlan, key.sport, key.dport), (100, 4000, 53));
//! let hash = frame_hash(&frame, Some(100));
//!
//! let mut w = PcapngWriter::new(Vec::new(), "corecap", &[InterfaceDesc::ethernet("eth1@2", 0)])?;
//! w.write_epb(&Epb {
//!     ts_ns: 1_700_000_000_000_000_000,
//!     data: &frame,
//!     orig_len: frame.len() as u32,
//!     vlan_tci: Some(100),
//!     queue: Some(2),
//!     hash: Some(hash),
//!     ..Epb::default()
//! })?;
//! let file = w.into_inner();
//!
//! let mut r = CaptureReader::new(&file[..])?;
//! let rec = r.next_packet()?.unwrap();
//! assert_eq!(rec.data.len(), frame.len() + 4); // the 802.1Q tag is back
//! assert_eq!((rec.queue, rec.hash), (Some(2), Some(hash)));
//! assert_eq!(flow_key(rec.data, None)?, key);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]

/// The methods both file writers have over their fields `w` (the inner writer) and `bytes`
/// (what was written so far): `flush`, `get_ref`, `get_mut`, `into_inner`, and
/// `bytes_written` with the given doc.
macro_rules! inner_writer {
    ($bytes_written:literal) => {
        /// Flushes the inner writer.
        pub fn flush(&mut self) -> std::io::Result<()> {
            self.w.flush()
        }

        /// The inner writer.
        pub fn get_ref(&self) -> &W {
            &self.w
        }

        /// The inner writer, mutably: for committing or flushing it between whole blocks.
        /// Writing to it directly would corrupt the file.
        pub fn get_mut(&mut self) -> &mut W {
            &mut self.w
        }

        /// Unwraps the inner writer (without flushing it).
        pub fn into_inner(self) -> W {
            self.w
        }

        #[doc = $bytes_written]
        pub fn bytes_written(&self) -> u64 {
            self.bytes
        }
    };
}

pub mod community_id;
pub mod compression;
pub mod flow;
pub mod hash;
pub mod link;
pub mod name;
pub mod pcap;
pub mod pcapng;
pub mod read;
pub mod transport;
pub mod vlan;
pub mod xorshift;

pub use community_id::{community_id, CommunityId};
pub use compression::{Compression, Decompress};
pub use flow::{flow_key, FlowKey, Fragment, IpFamily, ParseError};
pub use hash::{flow_hash, frame_hash, toeplitz, ToeplitzTable, HASH_ALGORITHM_TOEPLITZ};
pub use link::Link;
pub use pcap::PcapWriter;
pub use pcapng::{Epb, InterfaceDesc, Isb, PcapngWriter};
pub use read::{CaptureReader, Format, ReadError, ReadInterface, Record};
pub use transport::{Tcp, Transport};
