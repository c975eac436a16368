// SPDX-License-Identifier: MIT OR GPL-2.0
//
// corecap's XDP program: redirects each received frame to an AF_XDP socket through the
// XSKMAP `XSKS`.
//
// - SPREAD == 1: frames of RX queue q go to slot q (one socket per queue).
// - SPREAD == n > 1: frames of queue q go to slot q * n + hash % n, where hash is a
//   symmetric flow hash (both directions of a flow give the same value), so a busy queue
//   is spread over n sockets and workers in the kernel, flow by flow (PFQ's steering on a
//   stock kernel). `corecap_linux::xdp_prog::spread_slot` computes the same in Rust, and
//   a test checks the two agree through BPF_PROG_TEST_RUN.
//
// The hash: for IPv4 (behind at most one 802.1Q tag) saddr ^ daddr ^ proto, and for an
// unfragmented TCP, UDP or SCTP packet with a 20-byte header also sport ^ dport; for IPv6
// the xor of the eight address words and the next header, and the ports when the next
// header is TCP, UDP or SCTP. Words are read as the (little-endian) machine loads them.
// Then h *= 0x9e3779b1; h ^= h >> 16 (32 bits). Other frames go to slot q * n.
//
// A slot with no socket passes the frame to the stack (XDP_PASS), so traffic flows on
// while the sockets are being opened. Built by build.rs with clang when it is present;
// the committed corecap_xdp.o is used otherwise (`bash crates/linux/bpf/build.sh` remakes
// it).

#include <linux/bpf.h>

#define SEC(name) __attribute__((section(name), used))
#define __uint(name, val) int (*name)[val]
#define __type(name, val) typeof(val) *name
#define INLINE static inline __attribute__((always_inline))

static long (*bpf_redirect_map)(void *map, __u64 key, __u64 flags) = (void *)51;

struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__uint(max_entries, 1);	// set by the loader: queues * SPREAD
	__type(key, __u32);
	__type(value, __u32);
} XSKS SEC(".maps");

// Sockets per RX queue; set by the loader.
volatile const __u32 SPREAD = 1;
// For tests: return the slot instead of redirecting.
volatile const __u32 RETURN_SLOT = 0;

INLINE __u32 ld32(const unsigned char *p)
{
	__u32 v;
	__builtin_memcpy(&v, p, 4);
	return v;
}

INLINE __u32 ld16(const unsigned char *p)
{
	__u16 v;
	__builtin_memcpy(&v, p, 2);
	return v;
}

INLINE __u32 ports(const unsigned char *l4, const unsigned char *end, __u32 proto)
{
	if (proto != 6 && proto != 17 && proto != 132)
		return 0;
	if (l4 + 4 > end)
		return 0;
	__u32 w = ld32(l4);
	return (w >> 16) ^ (w & 0xffff);
}

INLINE __u32 flow_hash(const unsigned char *p, const unsigned char *end)
{
	__u32 h = 0;
	if (p + 14 > end)
		goto mix;
	__u32 et = ld16(p + 12);
	if (et == 0x0081) {	// 802.1Q, as loaded
		p += 4;
		if (p + 14 > end)
			goto mix;
		et = ld16(p + 12);
	}
	if (et == 0x0008) {	// IPv4
		if (p + 34 > end)
			goto mix;
		__u32 proto = p[23];
		h = ld32(p + 26) ^ ld32(p + 30) ^ proto;
		// Ports only with a 20-byte header and no fragment (MF or offset, as loaded).
		if (p[14] == 0x45 && (ld16(p + 20) & 0xff3f) == 0 && p + 38 <= end)
			h ^= ports(p + 34, end, proto);
	} else if (et == 0xdd86) {	// IPv6
		if (p + 54 > end)
			goto mix;
		__u32 nh = p[20];
		h = nh;
#pragma unroll
		for (int k = 0; k < 8; k++)
			h ^= ld32(p + 22 + 4 * k);
		h ^= ports(p + 54, end, nh);
	}
mix:
	h *= 0x9e3779b1u;
	h ^= h >> 16;
	return h;
}

SEC("xdp")
int corecap_xdp(struct xdp_md *ctx)
{
	const unsigned char *data = (const unsigned char *)(long)ctx->data;
	const unsigned char *end = (const unsigned char *)(long)ctx->data_end;
	__u32 n = SPREAD;
	__u32 slot = ctx->rx_queue_index;
	if (n > 1)
		slot = slot * n + flow_hash(data, end) % n;
	if (RETURN_SLOT)
		return slot;
	return bpf_redirect_map(&XSKS, slot, XDP_PASS);
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
