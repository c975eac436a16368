//! Kernel ABI for AF_PACKET: constants and structures from `<linux/if_packet.h>` and
//! `<linux/filter.h>`, spelled as the kernel spells them so one grep finds both sides.
#![allow(missing_docs)]

use std::mem::size_of;

pub const SOL_PACKET: libc::c_int = 263;
pub const PACKET_ADD_MEMBERSHIP: libc::c_int = 1;
pub const PACKET_RX_RING: libc::c_int = 5;
pub const PACKET_STATISTICS: libc::c_int = 6;
pub const PACKET_VERSION: libc::c_int = 10;
pub const PACKET_TX_RING: libc::c_int = 13;
pub const PACKET_FANOUT: libc::c_int = 18;
pub const PACKET_QDISC_BYPASS: libc::c_int = 20;
pub const PACKET_IGNORE_OUTGOING: libc::c_int = 23;

pub const PACKET_MR_PROMISC: u16 = 1;

pub const TPACKET_V2: libc::c_int = 1;
pub const TPACKET_V3: libc::c_int = 2;

pub const PACKET_FANOUT_HASH: u16 = 0;
pub const PACKET_FANOUT_LB: u16 = 1;
pub const PACKET_FANOUT_CPU: u16 = 2;
pub const PACKET_FANOUT_ROLLOVER: u16 = 3;
pub const PACKET_FANOUT_RND: u16 = 4;
pub const PACKET_FANOUT_QM: u16 = 5;
pub const PACKET_FANOUT_FLAG_ROLLOVER: u16 = 0x1000;
pub const PACKET_FANOUT_FLAG_UNIQUEID: u16 = 0x2000;
pub const PACKET_FANOUT_FLAG_DEFRAG: u16 = 0x8000;

pub const TP_STATUS_KERNEL: u32 = 0;
pub const TP_STATUS_USER: u32 = 1;
pub const TP_STATUS_LOSING: u32 = 1 << 2;
pub const TP_STATUS_VLAN_VALID: u32 = 1 << 4;
pub const TP_STATUS_VLAN_TPID_VALID: u32 = 1 << 6;

pub const TP_STATUS_AVAILABLE: u32 = 0;
pub const TP_STATUS_SEND_REQUEST: u32 = 1;
pub const TP_STATUS_SENDING: u32 = 1 << 1;
pub const TP_STATUS_WRONG_FORMAT: u32 = 1 << 2;

pub const SO_ATTACH_FILTER: libc::c_int = 26;

/// Ancillary data loads of classic BPF (`SKF_AD_OFF + ...`).
pub const SKF_AD_OFF: i32 = -0x1000;
pub const SKF_AD_PROTOCOL: i32 = 0;
pub const SKF_AD_PKTTYPE: i32 = 4;
pub const SKF_AD_IFINDEX: i32 = 8;
pub const SKF_AD_MARK: i32 = 20;
pub const SKF_AD_QUEUE: i32 = 24;
pub const SKF_AD_HATYPE: i32 = 28;
pub const SKF_AD_RXHASH: i32 = 32;
pub const SKF_AD_CPU: i32 = 36;
pub const SKF_AD_VLAN_TAG: i32 = 44;
pub const SKF_AD_VLAN_TAG_PRESENT: i32 = 48;
pub const SKF_AD_PAY_OFFSET: i32 = 52;
pub const SKF_AD_RANDOM: i32 = 56;
pub const SKF_AD_VLAN_TPID: i32 = 60;

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct tpacket_req3 {
    pub tp_block_size: u32,
    pub tp_block_nr: u32,
    pub tp_frame_size: u32,
    pub tp_frame_nr: u32,
    pub tp_retire_blk_tov: u32,
    pub tp_sizeof_priv: u32,
    pub tp_feature_req_word: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct tpacket_req {
    pub tp_block_size: u32,
    pub tp_block_nr: u32,
    pub tp_frame_size: u32,
    pub tp_frame_nr: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct tpacket_stats_v3 {
    pub tp_packets: u32,
    pub tp_drops: u32,
    pub tp_freeze_q_cnt: u32,
}

/// `struct sock_filter`: one classic BPF instruction.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct sock_filter {
    pub code: u16,
    pub jt: u8,
    pub jf: u8,
    pub k: u32,
}

#[repr(C)]
#[derive(Debug)]
pub struct sock_fprog {
    pub len: u16,
    pub filter: *const sock_filter,
}

/// Offsets in `struct tpacket_block_desc` (version, offset_to_priv, then `tpacket_hdr_v1`).
pub mod block_desc {
    pub const BLOCK_STATUS: usize = 8;
    pub const NUM_PKTS: usize = 12;
    pub const OFFSET_TO_FIRST_PKT: usize = 16;
    pub const BLK_LEN: usize = 20;
    pub const SEQ_NUM: usize = 24;
    pub const SIZE: usize = 48;
}

/// Offsets in `struct tpacket3_hdr` (48 bytes).
pub mod tpacket3_hdr {
    pub const TP_NEXT_OFFSET: usize = 0;
    pub const TP_SEC: usize = 4;
    pub const TP_NSEC: usize = 8;
    pub const TP_SNAPLEN: usize = 12;
    pub const TP_LEN: usize = 16;
    pub const TP_STATUS: usize = 20;
    pub const TP_MAC: usize = 24;
    pub const TP_RXHASH: usize = 28;
    pub const TP_VLAN_TCI: usize = 32;
    pub const TP_VLAN_TPID: usize = 36;
    pub const SIZE: usize = 48;
}

/// Offsets in `struct tpacket2_hdr` (32 bytes), used by the TX ring.
pub mod tpacket2_hdr {
    pub const TP_STATUS: usize = 0;
    pub const TP_LEN: usize = 4;
    pub const SIZE: usize = 32;
    /// Frame data offset for TX: `TPACKET2_HDRLEN - sizeof(struct sockaddr_ll)`.
    pub const TX_DATA_OFFSET: usize = 32;
}

/// `struct packet_mreq`: a membership of the socket (`PACKET_ADD_MEMBERSHIP`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct packet_mreq {
    pub mr_ifindex: libc::c_int,
    pub mr_type: u16,
    pub mr_alen: u16,
    pub mr_address: [u8; 8],
}

const _: () = assert!(size_of::<packet_mreq>() == 16);
const _: () = assert!(size_of::<tpacket_req3>() == 28);
const _: () = assert!(size_of::<tpacket_stats_v3>() == 12);
const _: () = assert!(size_of::<sock_filter>() == 8);
const _: () = assert!(size_of::<libc::sockaddr_ll>() == 20);
