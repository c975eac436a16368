//! Linux kernel interfaces used by corecap. This is one of the two crates that use `unsafe`;
//! each use is small and says why it is sound.
//!
//! - [`socket`]: AF_PACKET sockets, socket options, fanout groups, kernel statistics.
//! - [`ring`]: the TPACKET_V3 receive ring (blocks handed between kernel and user space)
//!   and the TPACKET_V2 transmit ring.
//! - [`xsk`]: AF_XDP sockets, UMEM and rings, the XSKMAP redirect program.
//! - [`filter`]: tcpdump expressions compiled by libpcap, and classic BPF built here.
//! - [`ethtool`]: channel counts, ring sizes, pause frames and driver name (SIOCETHTOOL).
//! - [`netdev`]: interface index, RX queues, link type, network namespaces.
//! - [`affinity`]: thread pinning, CPU lists, CPU time.
//! - [`ioprio`]: I/O priority of a thread (queries read at idle priority).
//! - [`bpf`]: maps, XDP programs and live-frame runs for the generator.
//! - [`direct`]: direct-I/O capture files: aligned buffers, `O_DIRECT`, fallocate, io_uring.
//! - [`memory`]: the memory available, checked before a ring is asked for; huge pages and
//!   prefetch hints for large tables.
//! - [`privilege`]: dropping capabilities once the sockets are open.
//! - [`abi`]: the kernel's constants and structures.
#![deny(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]
#![deny(clippy::undocumented_unsafe_blocks)]

pub mod abi;
pub mod affinity;
pub mod bpf;
pub mod cbpf;
pub mod direct;
mod error;
pub mod ethtool;
pub mod filter;
pub mod ioprio;
pub mod memory;
pub mod netdev;
pub mod privilege;
pub mod ring;
pub mod socket;
pub mod xdp_prog;
pub mod xsk;

pub use error::{error_chain, Error, ErrorKind, Result};
pub use ring::{Block, RingConfig, RingPacket, RxRing, TxRing};
pub use socket::{FanoutMode, KernelStats, PacketSocket};
