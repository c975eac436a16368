//! What a filter lets the index prune on, read from the classic BPF program that libpcap
//! compiled for it: the same parse as the filter itself, so the index and the filter never
//! disagree on what a packet is (octal and hex numbers, `vlan`, `ip6`, `proto`, byte
//! offsets: libpcap has read them all already).
//!
//! [`Predicate::from_program`] walks every path from the first instruction to a `ret` that
//! accepts, keeping the tests that path passed (`jeq` taken, on a value the path loaded),
//! then reads each test it can name as a key of the index:
//!
//! | test on the path (link header of `L` bytes) | key |
//! |---|---|
//! | IPv4 (ethertype 0x0800, or version 4 on raw IP) and `ld [L+12]`/`ld [L+16]` == a | `Host4(a)` |
//! | the same under a mask of 24 bits or more (`net a/24`) | `Host4` of each address |
//! | ARP or RARP and `ld [L+14]`/`ld [L+24]` == a | `Host4(a)` |
//! | IPv4 and `ldb [L+9]` == p, IPv6 and `ldb [L+6]` == p | `Proto(p)` |
//! | IPv4, TCP/UDP/SCTP and `ldh [x+L]`/`ldh [x+L+2]` (x = IP header length) == p | `Port(p)` |
//! | IPv6, TCP/UDP/SCTP and `ldh [L+40]`/`ldh [L+42]` == p | `Port(p)` |
//! | IPv6 and the four words of a source or destination address | `Host6(a)` |
//! | an 802.1Q/802.1ad tag and `ldh [14]` & 0xfff == v | `Vlan(v)` |
//!
//! A test it cannot name (a range, a negation, a load at another offset, an ancillary load)
//! is left out of its path's conjunction, which only makes the path match more: never less.
//! A path that keeps no test makes the whole predicate [`Predicate::Any`]. The link types
//! read are Ethernet (one VLAN tag deep), Linux cooked v1 and v2 (SLL, SLL2: the protocol
//! at 14 or 0, the network header at 16 or 20), raw IPv4/IPv6, and BSD NULL and LOOP
//! (`ld [0]` equal to AF_INET or a BSD AF_INET6 value, in either byte order, the network
//! header at 4); for any other the predicate is `Any`. NFLOG stays `Any` too: libpcap
//! reaches its payload through a TLV walk the index does not model, so an NFLOG query reads
//! everything. Each key it names is one the index's parser records for
//! every packet whose bytes the test read (see [`crate::key`]), so a region without it holds
//! no packet that path accepts.

use crate::Predicate;

/// One classic BPF instruction (`struct sock_filter`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Insn {
    /// Opcode.
    pub code: u16,
    /// Jump offset when true.
    pub jt: u8,
    /// Jump offset when false.
    pub jf: u8,
    /// Operand.
    pub k: u32,
}

/// Accepting paths kept before the program counts as too branchy to read (then `Any`).
const MAX_PATHS: usize = 4096;
/// Instructions walked over all paths before the program counts as too branchy to read: a
/// program of many branches to `ret #0` has exponentially many paths too.
const MAX_STEPS: usize = 1 << 16;

/// What a register holds, as far as the walk can tell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Val {
    /// A constant.
    Const(u32),
    /// `size` bytes of the packet at `off`, under `mask` (all ones: none).
    Pkt { off: u32, size: u8, mask: u32 },
    /// `4 * (pkt[at] & 0xf)`: an IPv4 header length (`ldxb 4*([at]&0xf)`).
    Msh(u32),
    /// `size` bytes at `off` past an IPv4 header whose first byte is at `msh`.
    Ind { msh: u32, off: u32, size: u8 },
    /// Anything else.
    Other,
}

/// A test a path passed: `val == k`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Fact {
    val: Val,
    k: u32,
}

/// The walk's registers and scratch memory, and the last test of its path (an index into
/// [`Facts`]): copied at each branch without an allocation.
#[derive(Clone, Copy)]
struct State {
    a: Val,
    x: Val,
    mem: [Val; 16],
    facts: u32,
}

/// No test yet.
const NO_FACT: u32 = u32::MAX;

/// The tests of every path walked so far, each with the test before it on its path: the
/// paths share their common prefixes.
#[derive(Default)]
struct Facts(Vec<(Fact, u32)>);

impl Facts {
    /// The path ending at `last` with `f` added; its new end.
    fn push(&mut self, last: u32, f: Fact) -> u32 {
        self.0.push((f, last));
        (self.0.len() - 1) as u32
    }

    /// The tests of the path ending at `last`, first to last.
    fn path(&self, mut last: u32) -> Vec<Fact> {
        let mut out = Vec::new();
        while let Some(&(f, prev)) = self.0.get(last as usize) {
            out.push(f);
            last = prev;
        }
        out.reverse();
        out
    }
}

/// What a walk shares over all its paths.
struct Walk<'p> {
    prog: &'p [Insn],
    facts: Facts,
    /// The last test of each accepting path.
    paths: Vec<u32>,
    steps: usize,
}

/// Where a link type puts the network header.
#[derive(Clone, Copy)]
enum Link {
    /// Ethernet: ethertype at 12, network header at 14.
    Ethernet,
    /// Linux cooked capture v1: protocol at 14, network header at 16.
    Sll,
    /// Linux cooked capture v2: protocol at 0, network header at 20.
    Sll2,
    /// BSD NULL and LOOP: the AF_ value in the first word, network header at 4.
    Loopback,
    /// Raw IP (101, 228, 229): the network header at 0, its version in the top nibble.
    Raw,
}

impl Link {
    fn of(linktype: u16) -> Option<Self> {
        match linktype {
            1 => Some(Link::Ethernet),
            113 => Some(Link::Sll),
            276 => Some(Link::Sll2),
            0 | 108 => Some(Link::Loopback),
            101 | 228 | 229 | 12 | 14 => Some(Link::Raw),
            _ => None,
        }
    }
}

impl Predicate {
    /// The predicate of a program libpcap compiled for frames of `linktype` (see the module
    /// doc). `Any` when the program cannot be read.
    pub fn from_program(linktype: u16, prog: &[Insn]) -> Predicate {
        let Some(link) = Link::of(linktype) else {
            return Predicate::Any;
        };
        let start = State {
            a: Val::Const(0),
            x: Val::Const(0),
            mem: [Val::Other; 16],
            facts: NO_FACT,
        };
        let mut w = Walk {
            prog,
            facts: Facts::default(),
            paths: Vec::new(),
            steps: 0,
        };
        if !w.walk(0, start) {
            return Predicate::Any;
        }
        if w.paths.is_empty() {
            // Nothing is accepted: no region can match.
            return Predicate::Or(Vec::new());
        }
        let mut ors = Vec::with_capacity(w.paths.len());
        for &last in &w.paths {
            let keys = path_keys(link, &w.facts.path(last));
            if keys.is_empty() {
                return Predicate::Any;
            }
            ors.push(if keys.len() == 1 {
                keys.into_iter().next().unwrap_or(Predicate::Any)
            } else {
                Predicate::And(keys)
            });
        }
        ors.sort_unstable();
        ors.dedup();
        crate::predicate::simplify(if ors.len() == 1 {
            ors.pop().unwrap_or(Predicate::Any)
        } else {
            Predicate::Or(ors)
        })
    }
}

impl Walk<'_> {
    /// Walks from `pc` with `st`; records the last test of each accepting path. False: too
    /// many paths or steps, or a program that does not end (a jump out of it).
    /// Branches wait on a stack of their own, not the thread's: a program's depth is
    /// bounded by its length, which a caller's thread stack need not fit.
    fn walk(&mut self, pc: usize, st: State) -> bool {
        let mut todo = vec![(pc, st)];
        while let Some((pc, st)) = todo.pop() {
            if !self.path(pc, st, &mut todo) {
                return false;
            }
        }
        true
    }

    /// Walks one path from `pc` with `st` to its `ret`; the other side of each branch goes
    /// on `todo`.
    fn path(&mut self, mut pc: usize, mut st: State, todo: &mut Vec<(usize, State)>) -> bool {
        let prog = self.prog;
        loop {
            self.steps += 1;
            if self.steps > MAX_STEPS {
                return false;
            }
            let Some(i) = prog.get(pc) else {
                return false;
            };
            let class = i.code & 0x07;
            match class {
                // LD
                0x00 => st.a = load(i, &st),
                // LDX
                0x01 => st.x = load_x(i, &st),
                // ST, STX
                0x02 | 0x03 => {
                    let v = if class == 0x02 { st.a } else { st.x };
                    if let Some(m) = st.mem.get_mut(i.k as usize) {
                        *m = v;
                    }
                }
                // ALU
                0x04 => st.a = alu(i, &st),
                // JMP
                0x05 => {
                    pc = self.jump(pc, i, &mut st, todo);
                    continue;
                }
                // RET
                0x06 => return self.ret(i, &st),
                // MISC: tax, txa
                _ => {
                    if i.code & 0xf8 == 0x80 {
                        st.a = st.x;
                    } else {
                        st.x = st.a;
                    }
                }
            }
            pc += 1;
        }
    }

    /// The next instruction after the jump `i` at `pc`. Of a conditional jump, the path goes
    /// on along the true branch and the false one goes on `todo`; a `jeq` adds its equality
    /// to the true branch's facts, and one between constants takes its one branch.
    fn jump(
        &mut self,
        pc: usize,
        i: &Insn,
        st: &mut State,
        todo: &mut Vec<(usize, State)>,
    ) -> usize {
        let op = i.code & 0xf0;
        if op == 0x00 {
            return pc + 1 + i.k as usize;
        }
        let rhs = operand(i, st);
        let t = pc + 1 + usize::from(i.jt);
        let f = pc + 1 + usize::from(i.jf);
        if op == 0x10 {
            if let (Val::Const(a), Some(k)) = (st.a, rhs) {
                return if a == k { t } else { f };
            }
            todo.push((f, *st));
            if let Some(k) = rhs {
                st.facts = self.facts.push(st.facts, Fact { val: st.a, k });
            }
            return t;
        }
        todo.push((f, *st));
        t
    }

    /// The end of a path at the `ret` `i`: one that accepts keeps its facts. False when the
    /// paths are too many to keep.
    fn ret(&mut self, i: &Insn, st: &State) -> bool {
        let accepts = match i.code & 0x18 {
            0x00 => i.k != 0,
            0x10 => st.a != Val::Const(0),
            _ => st.x != Val::Const(0),
        };
        if accepts {
            if self.paths.len() >= MAX_PATHS {
                return false;
            }
            self.paths.push(st.facts);
        }
        true
    }
}

/// What `ldx` `i` puts in X: a constant, a scratch word, or the IP header length (`msh`).
fn load_x(i: &Insn, st: &State) -> Val {
    match i.code & 0xe0 {
        0x00 => Val::Const(i.k),
        0x60 => st.mem.get(i.k as usize).copied().unwrap_or(Val::Other),
        0xa0 => Val::Msh(i.k),
        _ => Val::Other,
    }
}

fn size_of(code: u16) -> u8 {
    match code & 0x18 {
        0x00 => 4,
        0x08 => 2,
        _ => 1,
    }
}

fn full_mask(size: u8) -> u32 {
    match size {
        1 => 0xff,
        2 => 0xffff,
        _ => 0xffff_ffff,
    }
}

fn load(i: &Insn, st: &State) -> Val {
    let size = size_of(i.code);
    match i.code & 0xe0 {
        0x00 => Val::Const(i.k),
        // Ancillary loads (SKF_AD_OFF and up) read metadata, not packet bytes.
        0x20 if i.k < 0xffff_f000 => Val::Pkt {
            off: i.k,
            size,
            mask: full_mask(size),
        },
        0x40 => match st.x {
            Val::Msh(at) => Val::Ind {
                msh: at,
                off: i.k,
                size,
            },
            Val::Const(c) => Val::Pkt {
                off: c.wrapping_add(i.k),
                size,
                mask: full_mask(size),
            },
            _ => Val::Other,
        },
        0x60 => st.mem.get(i.k as usize).copied().unwrap_or(Val::Other),
        _ => Val::Other,
    }
}

/// The operand of an ALU or jump instruction: `k`, or X when X is a known constant.
fn operand(i: &Insn, st: &State) -> Option<u32> {
    if i.code & 0x08 == 0 {
        Some(i.k)
    } else if let Val::Const(c) = st.x {
        Some(c)
    } else {
        None
    }
}

fn alu(i: &Insn, st: &State) -> Val {
    let rhs = operand(i, st);
    match (i.code & 0xf0, st.a, rhs) {
        (0x50, Val::Pkt { off, size, mask }, Some(k)) => Val::Pkt {
            off,
            size,
            mask: mask & k,
        },
        (0x50, Val::Const(a), Some(k)) => Val::Const(a & k),
        _ => Val::Other,
    }
}

/// What the path's tests say `size` bytes at `off`, under `mask`, equal.
fn masked(facts: &[Fact], off: u32, size: u8, mask: u32) -> impl Iterator<Item = u32> + '_ {
    facts.iter().filter_map(move |f| match f.val {
        Val::Pkt {
            off: o,
            size: s,
            mask: m,
        } if o == off && s == size && m == mask => Some(f.k),
        _ => None,
    })
}

/// What the path's tests say `size` bytes at `off`, unmasked, equal.
fn eq(facts: &[Fact], off: u32, size: u8) -> impl Iterator<Item = u32> + '_ {
    masked(facts, off, size, full_mask(size))
}

/// Whether the path passed an 802.1Q, 802.1ad or 0x9100 tag at the Ethernet type.
fn tagged(facts: &[Fact]) -> bool {
    [0x8100, 0x88a8, 0x9100]
        .iter()
        .any(|t| has(facts, 12, 2, *t))
}

fn has(facts: &[Fact], off: u32, size: u8, k: u32) -> bool {
    eq(facts, off, size).any(|v| v == k)
}

/// The network layers a path established: (offset of the network header, IPv4, IPv6, ARP).
fn network(link: Link, facts: &[Fact]) -> Vec<(u32, u32)> {
    // (network header offset, ethertype or 4/6 for a raw IP version)
    let mut out = Vec::new();
    match link {
        Link::Ethernet => {
            for et in eq(facts, 12, 2) {
                out.push((14, et));
            }
            if tagged(facts) {
                for et in eq(facts, 16, 2) {
                    out.push((18, et));
                }
            }
        }
        Link::Sll => {
            for et in eq(facts, 14, 2) {
                out.push((16, et));
            }
        }
        Link::Sll2 => {
            for et in eq(facts, 0, 2) {
                out.push((20, et));
            }
        }
        Link::Loopback => {
            for af in eq(facts, 0, 4) {
                if let Some(et) = crate::key::loopback_family(af) {
                    out.push((4, u32::from(et)));
                }
            }
        }
        Link::Raw => {
            for version in masked(facts, 0, 1, 0xf0) {
                match version {
                    0x40 => out.push((0, 0x0800)),
                    0x60 => out.push((0, 0x86dd)),
                    _ => {}
                }
            }
        }
    }
    out
}

/// The keys one accepting path requires.
fn path_keys(link: Link, facts: &[Fact]) -> Vec<Predicate> {
    let mut keys = Vec::new();
    if matches!(link, Link::Ethernet) && tagged(facts) {
        keys.extend(masked(facts, 14, 2, 0x0fff).map(|v| Predicate::Vlan(v as u16)));
    }
    for (l, et) in network(link, facts) {
        match et {
            0x0800 => ipv4_keys(l, facts, &mut keys),
            0x86dd => ipv6_keys(l, facts, &mut keys),
            0x0806 | 0x8035 => {
                for off in [l + 14, l + 24] {
                    keys.extend(eq(facts, off, 4).map(|a| Predicate::Host4(a.to_be_bytes())));
                }
            }
            _ => {}
        }
    }
    keys.dedup();
    keys
}

const PORT_PROTOS: [u32; 3] = [6, 17, 132];

fn ipv4_keys(l: u32, facts: &[Fact], keys: &mut Vec<Predicate>) {
    for f in facts {
        match f.val {
            Val::Pkt { off, size: 4, mask } if off == l + 12 || off == l + 16 => {
                keys.extend(masked_hosts(mask, f.k));
            }
            _ => {}
        }
    }
    let protos: Vec<u32> = eq(facts, l + 9, 1).collect();
    keys.extend(protos.iter().map(|p| Predicate::Proto(*p as u8)));
    if protos.iter().any(|p| PORT_PROTOS.contains(p)) {
        for f in facts {
            if let Val::Ind { msh, off, size: 2 } = f.val {
                if msh == l && (off == l || off == l + 2) {
                    keys.push(Predicate::Port(f.k as u16));
                }
            }
        }
    }
}

/// The addresses `a` under `mask` stands for: one, or each of a /24 or longer prefix.
fn masked_hosts(mask: u32, a: u32) -> Vec<Predicate> {
    let bits = mask.leading_ones();
    if mask != u32::MAX.checked_shl(32 - bits).unwrap_or(0) || bits < 24 {
        return Vec::new();
    }
    let n = 1u32 << (32 - bits);
    let alts: Vec<Predicate> = (0..n)
        .map(|i| Predicate::Host4(((a & mask) | i).to_be_bytes()))
        .collect();
    if alts.len() == 1 {
        alts
    } else {
        vec![Predicate::Or(alts)]
    }
}

fn ipv6_keys(l: u32, facts: &[Fact], keys: &mut Vec<Predicate>) {
    let protos: Vec<u32> = eq(facts, l + 6, 1).collect();
    keys.extend(protos.iter().map(|p| Predicate::Proto(*p as u8)));
    for base in [l + 8, l + 24] {
        let words: Vec<Option<u32>> = (0..4).map(|w| eq(facts, base + 4 * w, 4).next()).collect();
        if words.iter().all(Option::is_some) {
            let mut a = [0u8; 16];
            for (w, v) in words.iter().enumerate() {
                a[4 * w..4 * w + 4].copy_from_slice(&v.unwrap_or(0).to_be_bytes());
            }
            keys.push(Predicate::Host6(a));
        }
    }
    if protos.iter().any(|p| PORT_PROTOS.contains(p)) {
        for off in [l + 40, l + 42] {
            keys.extend(eq(facts, off, 2).map(|p| Predicate::Port(p as u16)));
        }
    }
}

/// The link types of a capture file's header (the pcap header, or the pcapng section
/// header and interface descriptions), as an index keeps it. None when it cannot be read.
pub fn header_linktypes(header: &[u8]) -> Option<Vec<u16>> {
    let magic = u32::from_le_bytes(header.get(..4)?.try_into().ok()?);
    let u32_at = |at: usize, be: bool| -> Option<u32> {
        let b: [u8; 4] = header.get(at..at + 4)?.try_into().ok()?;
        Some(if be {
            u32::from_be_bytes(b)
        } else {
            u32::from_le_bytes(b)
        })
    };
    match magic {
        0xa1b2_c3d4 | 0xa1b2_3c4d | 0xa1b2_cd34 => Some(vec![(u32_at(20, false)? & 0xffff) as u16]),
        0xd4c3_b2a1 | 0x4d3c_b2a1 | 0x34cd_b2a1 => Some(vec![(u32_at(20, true)? & 0xffff) as u16]),
        0x0a0d_0d0a => {
            let be = match u32_at(8, false)? {
                0x1a2b_3c4d => false,
                0x4d3c_2b1a => true,
                _ => return None,
            };
            let mut out = Vec::new();
            let mut at = 0usize;
            while at + 12 <= header.len() {
                let ty = u32_at(at, be)?;
                let len = u32_at(at + 4, be)? as usize;
                if len < 12 || at + len > header.len() {
                    return None;
                }
                if ty == 1 {
                    let lt = u32_at(at + 8, be)?;
                    out.push(if be {
                        (lt >> 16) as u16
                    } else {
                        (lt & 0xffff) as u16
                    });
                }
                at += len;
            }
            out.sort_unstable();
            out.dedup();
            (!out.is_empty()).then_some(out)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_header_linktypes() {
        let mut pcap = vec![0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0];
        pcap.extend_from_slice(&[0; 8]);
        pcap.extend_from_slice(&65535u32.to_le_bytes());
        pcap.extend_from_slice(&113u32.to_le_bytes());
        assert_eq!(header_linktypes(&pcap), Some(vec![113]));
        let mut ng = vec![0x0a, 0x0d, 0x0d, 0x0a];
        ng.extend_from_slice(&28u32.to_le_bytes());
        ng.extend_from_slice(&0x1a2b_3c4du32.to_le_bytes());
        ng.extend_from_slice(&[1, 0, 0, 0]);
        ng.extend_from_slice(&u64::MAX.to_le_bytes());
        ng.extend_from_slice(&28u32.to_le_bytes());
        for lt in [1u16, 101, 1] {
            ng.extend_from_slice(&1u32.to_le_bytes());
            ng.extend_from_slice(&20u32.to_le_bytes());
            ng.extend_from_slice(&lt.to_le_bytes());
            ng.extend_from_slice(&[0, 0]);
            ng.extend_from_slice(&65535u32.to_le_bytes());
            ng.extend_from_slice(&20u32.to_le_bytes());
        }
        assert_eq!(header_linktypes(&ng), Some(vec![1, 101]));
        assert_eq!(header_linktypes(b"nonsense"), None);
    }

    fn i(code: u16, jt: u8, jf: u8, k: u32) -> Insn {
        Insn { code, jt, jf, k }
    }

    /// `tcpdump -d 'host 10.0.0.1'` on Ethernet (libpcap 1.10).
    fn host() -> Vec<Insn> {
        vec![
            i(0x28, 0, 0, 12),
            i(0x15, 0, 4, 0x0800),
            i(0x20, 0, 0, 26),
            i(0x15, 8, 0, 0x0a00_0001),
            i(0x20, 0, 0, 30),
            i(0x15, 6, 7, 0x0a00_0001),
            i(0x15, 1, 0, 0x0806),
            i(0x15, 0, 5, 0x8035),
            i(0x20, 0, 0, 28),
            i(0x15, 2, 0, 0x0a00_0001),
            i(0x20, 0, 0, 38),
            i(0x15, 0, 1, 0x0a00_0001),
            i(0x06, 0, 0, 262_144),
            i(0x06, 0, 0, 0),
        ]
    }

    #[test]
    fn test_host_is_one_key() {
        assert_eq!(
            Predicate::from_program(1, &host()),
            Predicate::Host4([10, 0, 0, 1])
        );
    }

    /// `udp port 53` on Ethernet: IPv6 and IPv4 branches, the fragment test, both ports.
    #[test]
    fn test_udp_port() {
        let p = vec![
            i(0x28, 0, 0, 12),
            i(0x15, 0, 6, 0x86dd),
            i(0x30, 0, 0, 20),
            i(0x15, 0, 15, 17),
            i(0x28, 0, 0, 54),
            i(0x15, 12, 0, 53),
            i(0x28, 0, 0, 56),
            i(0x15, 10, 11, 53),
            i(0x15, 0, 10, 0x0800),
            i(0x30, 0, 0, 23),
            i(0x15, 0, 8, 17),
            i(0x28, 0, 0, 20),
            i(0x45, 6, 0, 0x1fff),
            i(0xb1, 0, 0, 14),
            i(0x48, 0, 0, 14),
            i(0x15, 2, 0, 53),
            i(0x48, 0, 0, 16),
            i(0x15, 0, 1, 53),
            i(0x06, 0, 0, 262_144),
            i(0x06, 0, 0, 0),
        ];
        let pred = Predicate::from_program(1, &p);
        let want = Predicate::And(vec![Predicate::Proto(17), Predicate::Port(53)]);
        assert_eq!(pred, want, "{pred:?}");
    }

    fn prog(raw: &[(u16, u8, u8, u32)]) -> Vec<Insn> {
        raw.iter().map(|&(c, t, f, k)| i(c, t, f, k)).collect()
    }

    /// `tcpdump -r simple_http_sll2.pcap -dd 'host 10.0.0.1 and udp port 53'` (libpcap 1.10).
    #[test]
    fn test_sll2_host_and_port() {
        let p = prog(&[
            (0x28, 0, 0, 0),
            (0x15, 0, 14, 0x0800),
            (0x20, 0, 0, 0x20),
            (0x15, 2, 0, 0x0a00_0001),
            (0x20, 0, 0, 0x24),
            (0x15, 0, 10, 0x0a00_0001),
            (0x30, 0, 0, 0x1d),
            (0x15, 0, 8, 17),
            (0x28, 0, 0, 0x1a),
            (0x45, 6, 0, 0x1fff),
            (0xb1, 0, 0, 0x14),
            (0x48, 0, 0, 0x14),
            (0x15, 2, 0, 53),
            (0x48, 0, 0, 0x16),
            (0x15, 0, 1, 53),
            (0x06, 0, 0, 0x40000),
            (0x06, 0, 0, 0),
        ]);
        let want = Predicate::And(vec![
            Predicate::Host4([10, 0, 0, 1]),
            Predicate::Proto(17),
            Predicate::Port(53),
        ]);
        assert_eq!(Predicate::from_program(276, &p), want);
    }

    /// `tcpdump -r dns-badcookie.pcap -dd 'host 127.0.0.1'`: BSD NULL written little-endian,
    /// so libpcap tests AF_INET as 0x02000000.
    #[test]
    fn test_null_host_either_byte_order() {
        let host = |af: u32| {
            prog(&[
                (0x20, 0, 0, 0),
                (0x15, 0, 5, af),
                (0x20, 0, 0, 0x10),
                (0x15, 2, 0, 0x7f00_0001),
                (0x20, 0, 0, 0x14),
                (0x15, 0, 1, 0x7f00_0001),
                (0x06, 0, 0, 0x40000),
                (0x06, 0, 0, 0),
            ])
        };
        for (lt, af) in [(0, 0x0200_0000), (0, 2), (108, 2)] {
            assert_eq!(
                Predicate::from_program(lt, &host(af)),
                Predicate::Host4([127, 0, 0, 1]),
                "{lt} {af:#x}"
            );
        }
        // An AF_ value that is not IP names no key: read everything.
        assert_eq!(Predicate::from_program(0, &host(7)), Predicate::Any);
        // NFLOG is not modelled: read everything.
        assert_eq!(Predicate::from_program(239, &host(2)), Predicate::Any);
    }

    #[test]
    fn test_unknown_link_type_and_unnamed_tests_read_everything() {
        assert_eq!(Predicate::from_program(147, &host()), Predicate::Any);
        // `greater 100`: a length test names no key.
        let p = vec![
            i(0x80, 0, 0, 0),
            i(0x35, 0, 1, 100),
            i(0x06, 0, 0, 1),
            i(0x06, 0, 0, 0),
        ];
        assert_eq!(Predicate::from_program(1, &p), Predicate::Any);
    }

    #[test]
    fn test_net_24_is_its_hosts_and_a_shorter_net_reads_everything() {
        let net = |mask: u32| {
            vec![
                i(0x28, 0, 0, 12),
                i(0x15, 0, 4, 0x0800),
                i(0x20, 0, 0, 26),
                i(0x54, 0, 0, mask),
                i(0x15, 0, 1, 0x0a00_0100),
                i(0x06, 0, 0, 1),
                i(0x06, 0, 0, 0),
            ]
        };
        match Predicate::from_program(1, &net(0xffff_ff00)) {
            Predicate::Or(v) => assert_eq!(v.len(), 256),
            p => panic!("{p:?}"),
        }
        assert_eq!(
            Predicate::from_program(1, &net(0xffff_0000)),
            Predicate::Any
        );
    }

    #[test]
    fn test_reject_all_and_loops_and_jumps_out() {
        assert_eq!(
            Predicate::from_program(1, &[i(0x06, 0, 0, 0)]),
            Predicate::Or(vec![])
        );
        // Twenty branches in a row, each to `ret #0` or on: a million paths, read as Any.
        let mut many: Vec<Insn> = (0..20).map(|_| i(0x15, 0, 0, 1)).collect();
        many.push(i(0x06, 0, 0, 1));
        assert_eq!(Predicate::from_program(1, &many), Predicate::Any);
        // A jump past the end is not a program libpcap makes: read everything.
        assert_eq!(
            Predicate::from_program(1, &[i(0x05, 0, 0, 5)]),
            Predicate::Any
        );
    }
}
