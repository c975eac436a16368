//! Write capture files with both writers, read them back, and attack the
//! reader with cut, corrupted and random files.

use std::io::Cursor;

use corecap_wire::pcapng::{
    BLOCK_EPB, BLOCK_IDB, BLOCK_ISB, BLOCK_PB, BLOCK_SHB, BLOCK_SPB, BYTE_ORDER_MAGIC,
    EPB_DROPCOUNT, EPB_HASH, EPB_QUEUE, IF_NAME, IF_TSOFFSET, IF_TSRESOL, ISB_IFDROP, ISB_IFRECV,
    ISB_STARTTIME,
};
use corecap_wire::read::MAX_CAPLEN;
use corecap_wire::{
    CaptureReader, Epb, Format, InterfaceDesc, Isb, PcapWriter, PcapngWriter, ReadError,
};
use proptest::prelude::*;

/// A frame of `len` bytes whose content depends on `seed`.
fn frame(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31) ^ seed)
        .collect()
}

/// The frame as it must read back: tag re-inserted after the MACs.
fn tagged(data: &[u8], tci: Option<u16>) -> Vec<u8> {
    match tci {
        Some(t) if data.len() >= 12 => {
            let mut v = data[..12].to_vec();
            v.extend_from_slice(&[0x81, 0x00]);
            v.extend_from_slice(&t.to_be_bytes());
            v.extend_from_slice(&data[12..]);
            v
        }
        _ => data.to_vec(),
    }
}

/// One block or record of a written file: byte range and whether it is a packet.
#[derive(Clone, Copy, Debug)]
struct Span {
    start: u64,
    end: u64,
    packet: bool,
}

struct Written {
    bytes: Vec<u8>,
    /// End of the part `CaptureReader::new` reads (global header or first SHB).
    header_end: u64,
    spans: Vec<Span>,
    packets: Vec<Epb<'static>>,
    isbs: Vec<(u32, Isb)>,
}

fn leak(v: Vec<u8>) -> &'static [u8] {
    Box::leak(v.into_boxed_slice())
}

fn sample_packets() -> Vec<Epb<'static>> {
    let mut v = Vec::new();
    for i in 0..12u32 {
        let len = [60usize, 64, 1514, 13, 11, 0, 99, 1500, 61, 62, 63, 200][i as usize];
        v.push(Epb {
            if_id: i % 2,
            ts_ns: 1_700_000_000_123_456_789 + u64::from(i) * 1_000_003,
            data: leak(frame(len, i as u8)),
            orig_len: len as u32 + (i % 3) * 100,
            vlan_tci: (i % 3 == 0).then_some(0x2000 | (100 + i as u16)),
            queue: (i % 2 == 1).then_some(i),
            hash: (i % 4 != 2).then_some(0x9e37_79b9u32.wrapping_mul(i + 1)),
            dropcount: (i % 5 == 4).then_some(u64::from(i) << 33),
        });
    }
    v
}

/// Appends the span that ends at `end`, starting where the last one ended.
fn push(spans: &mut Vec<Span>, end: u64, packet: bool) {
    let start = spans.last().map_or(0, |s| s.end);
    spans.push(Span { start, end, packet });
}

fn write_pcapng() -> Written {
    let ifaces = [
        InterfaceDesc {
            name: "eth1@0".into(),
            description: Some("queue 0".into()),
            linktype: 1,
            snaplen: 262_144,
        },
        InterfaceDesc::ethernet("eth1@1", 0),
    ];
    let mut w = PcapngWriter::new(Vec::new(), "corecap test", &ifaces).unwrap();
    let header_end = {
        // new() wrote the SHB then the IDBs; the reader's new() stops after the SHB.
        let b = w.get_ref();
        u64::from(u32::from_le_bytes([b[4], b[5], b[6], b[7]]))
    };
    let first_idb_len = {
        let b = w.get_ref();
        let s = header_end as usize;
        u64::from(u32::from_le_bytes([b[s + 4], b[s + 5], b[s + 6], b[s + 7]]))
    };
    let mut spans = vec![Span {
        start: header_end,
        end: header_end + first_idb_len,
        packet: false,
    }];
    push(&mut spans, w.bytes_written(), false);
    let packets = sample_packets();
    let mut isbs = Vec::new();
    for (i, p) in packets.iter().enumerate() {
        w.write_epb(p).unwrap();
        push(&mut spans, w.bytes_written(), true);
        if i == 5 {
            let s = Isb {
                ifrecv: Some(6),
                ..Isb::default()
            };
            w.write_isb(0, p.ts_ns, &s).unwrap();
            push(&mut spans, w.bytes_written(), false);
        }
    }
    let late = Isb {
        start_ns: Some(1_700_000_000_000_000_001),
        end_ns: Some(1_700_000_009_999_999_999),
        ifrecv: Some(1000),
        ifdrop: Some(1),
        filteraccept: Some(990),
        osdrop: Some(7),
        usrdeliv: Some(12),
    };
    w.write_isb(1, 42, &late).unwrap();
    push(&mut spans, w.bytes_written(), false);
    let zero = Isb {
        ifdrop: Some(0),
        ..Isb::default()
    };
    w.write_isb(0, 43, &zero).unwrap();
    push(&mut spans, w.bytes_written(), false);
    isbs.push((0, zero));
    isbs.push((1, late));
    w.flush().unwrap();
    let bytes = w.into_inner();
    assert_eq!(spans.last().unwrap().end, bytes.len() as u64);
    Written {
        bytes,
        header_end,
        spans,
        packets,
        isbs,
    }
}

fn write_pcap() -> Written {
    let mut w = PcapWriter::new(Vec::new(), 1, 65535).unwrap();
    let header_end = w.bytes_written();
    let mut spans = Vec::new();
    let packets: Vec<Epb<'static>> = sample_packets()
        .into_iter()
        .map(|p| Epb {
            if_id: 0,
            queue: None,
            hash: None,
            dropcount: None,
            ..p
        })
        .collect();
    for p in &packets {
        let start = w.bytes_written();
        w.write_packet(p.ts_ns, p.data, p.orig_len, p.vlan_tci)
            .unwrap();
        spans.push(Span {
            start,
            end: w.bytes_written(),
            packet: true,
        });
    }
    w.flush().unwrap();
    assert_eq!(w.get_ref().len() as u64, w.bytes_written());
    Written {
        bytes: w.into_inner(),
        header_end,
        spans,
        packets,
        isbs: Vec::new(),
    }
}

/// Reads everything, checking each packet against what was written.
fn check_read_back(wr: &Written, format: Format) {
    let mut r = CaptureReader::new(Cursor::new(&wr.bytes)).unwrap();
    assert_eq!(r.format(), format);
    let mut n = 0;
    while let Some(rec) = r.next_packet().unwrap() {
        let p = &wr.packets[n];
        assert_eq!(rec.ts_ns, p.ts_ns, "packet {n}");
        assert_eq!(rec.data, &tagged(p.data, p.vlan_tci)[..], "packet {n}");
        let grow = if p.vlan_tci.is_some() && p.data.len() >= 12 {
            4
        } else {
            0
        };
        assert_eq!(rec.orig_len, p.orig_len + grow, "packet {n}");
        assert_eq!(rec.if_id, p.if_id, "packet {n}");
        assert_eq!(rec.linktype, 1);
        assert_eq!(rec.queue, p.queue, "packet {n}");
        assert_eq!(rec.hash, p.hash, "packet {n}");
        assert_eq!(rec.dropcount, p.dropcount, "packet {n}");
        n += 1;
    }
    assert_eq!(n, wr.packets.len());
    assert_eq!(r.stats(), &wr.isbs[..]);
    assert!(r.next_packet().unwrap().is_none());
}

#[test]
fn test_pcapng_round_trip() {
    let wr = write_pcapng();
    check_read_back(&wr, Format::Pcapng);
    let r = CaptureReader::new(Cursor::new(&wr.bytes)).unwrap();
    let mut r = r;
    while r.next_packet().unwrap().is_some() {}
    let ifs = r.interfaces();
    assert_eq!(ifs.len(), 2);
    assert_eq!(ifs[0].name.as_deref(), Some("eth1@0"));
    assert_eq!(ifs[0].description.as_deref(), Some("queue 0"));
    assert_eq!(
        (ifs[0].linktype, ifs[0].snaplen, ifs[0].tsresol),
        (1, 262_144, 9)
    );
    assert_eq!(ifs[1].name.as_deref(), Some("eth1@1"));
    assert_eq!(ifs[1].description, None);
}

#[test]
fn test_pcap_round_trip() {
    let wr = write_pcap();
    check_read_back(&wr, Format::Pcap);
    let r = CaptureReader::new(Cursor::new(&wr.bytes)).unwrap();
    assert_eq!(r.interfaces().len(), 1);
    assert_eq!(
        (r.interfaces()[0].snaplen, r.interfaces()[0].tsresol),
        (65535, 9)
    );
}

#[test]
fn test_open_file() {
    let wr = write_pcapng();
    let path =
        std::env::temp_dir().join(format!("corecap-wire-open-{}.pcapng", std::process::id()));
    std::fs::write(&path, &wr.bytes).unwrap();
    let mut r = CaptureReader::open(&path).unwrap();
    let mut n = 0;
    while r.next_packet().unwrap().is_some() {
        n += 1;
    }
    std::fs::remove_file(&path).unwrap();
    assert_eq!(n, wr.packets.len());
    let missing = CaptureReader::open(&path).unwrap_err();
    assert!(matches!(missing, ReadError::Io(_)), "{missing}");
}

/// Cuts the file at every byte offset: all packets that end before the cut
/// come out, then a clean end (at a boundary) or exactly one error.
fn check_every_cut(wr: &Written) {
    for cut in 0..=wr.bytes.len() as u64 {
        let data = &wr.bytes[..cut as usize];
        let mut r = match CaptureReader::new(Cursor::new(data)) {
            Ok(r) => r,
            Err(e) => {
                assert!(cut < wr.header_end, "cut {cut}: {e}");
                assert!(
                    matches!(e, ReadError::Truncated { offset: 0 }),
                    "cut {cut}: {e}"
                );
                continue;
            }
        };
        assert!(
            cut >= wr.header_end,
            "cut {cut} inside the header was accepted"
        );
        let want = wr.spans.iter().filter(|s| s.packet && s.end <= cut).count();
        let mut got = 0;
        let end = loop {
            match r.next_packet() {
                Ok(Some(_)) => got += 1,
                Ok(None) => break None,
                Err(e) => break Some(e),
            }
        };
        assert_eq!(got, want, "cut {cut}");
        let at_boundary = cut == wr.header_end || wr.spans.iter().any(|s| s.end == cut);
        match end {
            None => assert!(at_boundary, "cut {cut}: clean end inside a block"),
            Some(ReadError::Truncated { offset }) => {
                assert!(!at_boundary, "cut {cut}: error at a boundary");
                let span = wr
                    .spans
                    .iter()
                    .find(|s| s.start <= cut && cut < s.end)
                    .unwrap();
                assert_eq!(offset, span.start, "cut {cut}");
                let msg = ReadError::Truncated { offset }.to_string();
                assert_eq!(msg, format!("truncated record at byte offset {offset}"));
            }
            Some(e) => panic!("cut {cut}: {e}"),
        }
        // Finished for good.
        assert!(r.next_packet().unwrap().is_none());
    }
}

#[test]
fn test_truncated_pcapng_at_every_offset() {
    check_every_cut(&write_pcapng());
}

#[test]
fn test_truncated_pcap_at_every_offset() {
    check_every_cut(&write_pcap());
}

/// Builds pcapng blocks by hand, in either byte order.
struct Ng {
    big: bool,
    out: Vec<u8>,
}

impl Ng {
    fn u16(&self, v: u16) -> [u8; 2] {
        if self.big {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        }
    }
    fn u32(&self, v: u32) -> [u8; 4] {
        if self.big {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        }
    }
    fn u64(&self, v: u64) -> [u8; 8] {
        if self.big {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        }
    }
    fn opt(&self, body: &mut Vec<u8>, code: u16, v: &[u8]) {
        body.extend_from_slice(&self.u16(code));
        body.extend_from_slice(&self.u16(v.len() as u16));
        body.extend_from_slice(v);
        body.resize(body.len().div_ceil(4) * 4, 0);
    }
    fn block(&mut self, btype: u32, mut body: Vec<u8>) -> u64 {
        let start = self.out.len() as u64;
        body.resize(body.len().div_ceil(4) * 4, 0);
        let len = body.len() as u32 + 12;
        let (t, l) = (self.u32(btype), self.u32(len));
        self.out.extend_from_slice(&t);
        self.out.extend_from_slice(&l);
        self.out.extend_from_slice(&body);
        self.out.extend_from_slice(&l);
        start
    }
    fn shb(&mut self) -> u64 {
        let mut b = self.u32(BYTE_ORDER_MAGIC).to_vec();
        b.extend_from_slice(&self.u16(1));
        b.extend_from_slice(&self.u16(0));
        b.extend_from_slice(&self.u64(u64::MAX));
        self.block(BLOCK_SHB, b)
    }
    fn idb(&mut self, name: &str, tsresol: Option<u8>, tsoffset: i64, snaplen: u32) -> u64 {
        let mut b = self.u16(1).to_vec();
        b.extend_from_slice(&[0, 0]);
        b.extend_from_slice(&self.u32(snaplen));
        self.opt(&mut b, IF_NAME, name.as_bytes());
        if let Some(r) = tsresol {
            self.opt(&mut b, IF_TSRESOL, &[r]);
        }
        if tsoffset != 0 {
            let v = self.u64(tsoffset as u64);
            self.opt(&mut b, IF_TSOFFSET, &v);
        }
        self.opt(&mut b, 0, &[]);
        self.block(BLOCK_IDB, b)
    }
    #[allow(clippy::too_many_arguments)]
    fn epb(
        &mut self,
        if_id: u32,
        ts: u64,
        data: &[u8],
        orig: u32,
        queue: Option<u32>,
        hash: Option<u32>,
        drops: Option<u64>,
    ) -> u64 {
        let mut b = self.u32(if_id).to_vec();
        b.extend_from_slice(&self.u32((ts >> 32) as u32));
        b.extend_from_slice(&self.u32(ts as u32));
        b.extend_from_slice(&self.u32(data.len() as u32));
        b.extend_from_slice(&self.u32(orig));
        b.extend_from_slice(data);
        b.resize(b.len().div_ceil(4) * 4, 0);
        if let Some(h) = hash {
            let mut v = vec![5];
            v.extend_from_slice(&h.to_be_bytes());
            self.opt(&mut b, EPB_HASH, &v);
        }
        if let Some(d) = drops {
            let v = self.u64(d);
            self.opt(&mut b, EPB_DROPCOUNT, &v);
        }
        if let Some(q) = queue {
            let v = self.u32(q);
            self.opt(&mut b, EPB_QUEUE, &v);
        }
        self.block(BLOCK_EPB, b)
    }
}

/// Two sections: a big-endian one written by hand (power-of-two and
/// microsecond resolutions, a time offset, SPB, obsolete PB, an unknown
/// block, an ISB), then a little-endian one from the writer.
#[test]
fn test_multiple_sections_and_byte_orders() {
    let mut ng = Ng {
        big: true,
        out: Vec::new(),
    };
    ng.shb();
    ng.idb("be0", Some(0x80 | 10), 0, 0); // 2^-10 s units
    ng.idb("be1", None, 3, 4); // microseconds (default), +3 s, snaplen 4
    ng.epb(
        0,
        3 << 10,
        &[1, 2, 3],
        3,
        Some(7),
        Some(0xa1b2c3d4),
        Some(2),
    );
    ng.block(0x0BAD_0000, vec![0xee; 10]); // unknown: skipped
                                           // obsolete Packet Block on interface 1: if_id u16, drops u16
    let mut pb = ng.u16(1).to_vec();
    pb.extend_from_slice(&ng.u16(9));
    pb.extend_from_slice(&ng.u32(0));
    pb.extend_from_slice(&ng.u32(5));
    pb.extend_from_slice(&ng.u32(2));
    pb.extend_from_slice(&ng.u32(2));
    pb.extend_from_slice(&[0xab, 0xcd]);
    ng.block(BLOCK_PB, pb);
    // SPB: interface 0 of the section, orig_len 6 but snaplen 0 -> 6 bytes
    let mut spb = ng.u32(6).to_vec();
    spb.extend_from_slice(&[9, 8, 7, 6, 5, 4]);
    ng.block(BLOCK_SPB, spb);
    // ISB for interface 1
    let mut isb = ng.u32(1).to_vec();
    isb.extend_from_slice(&ng.u32(0));
    isb.extend_from_slice(&ng.u32(0));
    let v = ng.u64(77);
    ng.opt(&mut isb, ISB_IFRECV, &v);
    let v = ng.u64(5);
    ng.opt(&mut isb, ISB_IFDROP, &v);
    let mut st = ng.u32(0).to_vec();
    st.extend_from_slice(&ng.u32(2_000_000));
    ng.opt(&mut isb, ISB_STARTTIME, &st);
    ng.opt(&mut isb, 0, &[]);
    ng.block(BLOCK_ISB, isb);

    let mut w = PcapngWriter::new(Vec::new(), "", &[InterfaceDesc::ethernet("le0", 0)]).unwrap();
    w.write_epb(&Epb {
        if_id: 0,
        ts_ns: 99,
        data: &[4, 4],
        orig_len: 2,
        queue: Some(1),
        ..Epb::default()
    })
    .unwrap();
    let mut file = ng.out;
    file.extend_from_slice(&w.into_inner());

    let mut r = CaptureReader::new(&file[..]).unwrap();
    let p = r.next_packet().unwrap().unwrap();
    assert_eq!(
        (p.ts_ns, p.data, p.orig_len, p.if_id),
        (3_000_000_000, &[1, 2, 3][..], 3, 0)
    );
    assert_eq!(
        (p.queue, p.hash, p.dropcount),
        (Some(7), Some(0xa1b2c3d4), Some(2))
    );
    let p = r.next_packet().unwrap().unwrap();
    assert_eq!(
        (p.ts_ns, p.data, p.if_id, p.dropcount),
        (3_000_005_000, &[0xab, 0xcd][..], 1, Some(9))
    );
    let p = r.next_packet().unwrap().unwrap();
    assert_eq!(
        (p.ts_ns, p.data, p.orig_len, p.if_id),
        (0, &[9, 8, 7, 6, 5, 4][..], 6, 0)
    );
    let p = r.next_packet().unwrap().unwrap();
    // Second section: its interface 0 is the third interface of the file.
    assert_eq!(
        (p.ts_ns, p.data, p.if_id, p.queue),
        (99, &[4, 4][..], 2, Some(1))
    );
    assert!(r.next_packet().unwrap().is_none());
    let names: Vec<_> = r
        .interfaces()
        .iter()
        .map(|i| i.name.clone().unwrap())
        .collect();
    assert_eq!(names, ["be0", "be1", "le0"]);
    assert_eq!(r.interfaces()[1].tsoffset, 3);
    assert_eq!(
        r.stats(),
        &[(
            1,
            Isb {
                ifrecv: Some(77),
                ifdrop: Some(5),
                start_ns: Some(5_000_000_000),
                ..Isb::default()
            }
        )]
    );
}

fn shb_le() -> Ng {
    let mut ng = Ng {
        big: false,
        out: Vec::new(),
    };
    ng.shb();
    ng.idb("x", Some(9), 0, 0);
    ng
}

fn first_error(file: &[u8]) -> ReadError {
    let mut r = match CaptureReader::new(file) {
        Ok(r) => r,
        Err(e) => return e,
    };
    loop {
        match r.next_packet() {
            Ok(Some(_)) => {}
            Ok(None) => panic!("no error"),
            Err(e) => return e,
        }
    }
}

#[test]
fn test_malformed_blocks() {
    // block length < 12
    let mut ng = shb_le();
    let at = ng.out.len();
    ng.out.extend_from_slice(&[6, 0, 0, 0, 8, 0, 0, 0]);
    let e = first_error(&ng.out);
    assert_eq!(
        e.to_string(),
        format!("malformed record at byte offset {at}: block length < 12")
    );

    // not a multiple of 4
    let mut ng = shb_le();
    ng.out.extend_from_slice(&[0x55, 0, 0, 0, 13, 0, 0, 0]);
    ng.out.extend_from_slice(&[0; 16]);
    assert!(matches!(
        first_error(&ng.out),
        ReadError::Malformed {
            what: "block length not a multiple of 4",
            ..
        }
    ));

    // trailing length mismatch, in a known and in an unknown block
    for btype in [BLOCK_EPB, 0x55] {
        let mut ng = shb_le();
        let at = ng.block(btype, vec![0; 20]);
        let n = ng.out.len();
        ng.out[n - 4] ^= 4;
        match first_error(&ng.out) {
            ReadError::Malformed { offset, what } => {
                assert_eq!((offset, what), (at, "trailing block length mismatch"));
            }
            e => panic!("{e}"),
        }
    }

    // EPB for an interface that has no IDB
    let mut ng = shb_le();
    let at = ng.epb(1, 0, &[1], 1, None, None, None);
    assert_eq!(
        first_error(&ng.out).to_string(),
        format!("malformed record at byte offset {at}: packet for an undefined interface")
    );

    // captured length above the cap (the block itself claims less)
    let mut ng = shb_le();
    let at = ng.epb(0, 0, &[1, 2, 3, 4], 4, None, None, None) as usize;
    ng.out[at + 20..at + 24].copy_from_slice(&(MAX_CAPLEN + 1).to_le_bytes());
    assert!(matches!(
        first_error(&ng.out),
        ReadError::Malformed {
            what: "captured length above 256 KiB",
            ..
        }
    ));

    // captured length past the end of the block
    let mut ng = shb_le();
    let at = ng.epb(0, 0, &[1, 2, 3, 4], 4, None, None, None) as usize;
    ng.out[at + 20..at + 24].copy_from_slice(&9u32.to_le_bytes());
    assert!(matches!(
        first_error(&ng.out),
        ReadError::Malformed {
            what: "captured length overruns its block",
            ..
        }
    ));

    // an option that runs past its block
    let mut ng = shb_le();
    let at = ng.epb(0, 0, &[1, 2, 3, 4], 4, Some(1), None, None) as usize;
    ng.out[at + 32 + 2] = 200;
    assert!(matches!(
        first_error(&ng.out),
        ReadError::Malformed {
            what: "option overruns its block",
            ..
        }
    ));

    // a huge block length is refused before anything is read or allocated
    let mut ng = shb_le();
    ng.out
        .extend_from_slice(&[6, 0, 0, 0, 0xfc, 0xff, 0xff, 0xff]);
    assert!(matches!(
        first_error(&ng.out),
        ReadError::Malformed {
            what: "block longer than 16 MiB",
            ..
        }
    ));

    // a huge unknown block is skipped by reading, and is just truncated here
    let mut ng = shb_le();
    let at = ng.out.len() as u64;
    ng.out
        .extend_from_slice(&[0x55, 0, 0, 0, 0xfc, 0xff, 0xff, 0xff, 1, 2, 3]);
    assert!(matches!(first_error(&ng.out), ReadError::Truncated { offset } if offset == at));

    // bad byte-order magic in a later section
    let mut ng = shb_le();
    let at = ng.out.len();
    ng.shb();
    ng.out[at + 8] = 0;
    assert!(matches!(
        first_error(&ng.out),
        ReadError::Malformed {
            what: "bad byte-order magic in section header",
            ..
        }
    ));

    // pcapng major version 2
    let mut ng = Ng {
        big: false,
        out: Vec::new(),
    };
    ng.shb();
    ng.out[12] = 2;
    assert!(matches!(
        first_error(&ng.out),
        ReadError::Malformed {
            offset: 0,
            what: "unsupported pcapng major version"
        }
    ));
}

/// A valid file with a few bytes overwritten must never make the reader
/// panic or loop.
fn read_all_no_panic(bytes: &[u8]) {
    if let Ok(mut r) = CaptureReader::new(bytes) {
        let mut n = 0u64;
        while let Ok(Some(p)) = r.next_packet() {
            assert!(p.data.len() <= MAX_CAPLEN as usize);
            n += 1;
            assert!(n <= bytes.len() as u64);
        }
        let _ = r.stats();
        assert!(r.next_packet().unwrap().is_none());
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn prop_random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        read_all_no_panic(&bytes);
        // Behind each valid magic too, so the block parsers see the noise.
        for magic in [&[0x0a, 0x0d, 0x0d, 0x0a][..], &[0xd4, 0xc3, 0xb2, 0xa1], &[0xa1, 0xb2, 0x3c, 0x4d]] {
            let mut f = magic.to_vec();
            f.extend_from_slice(&bytes);
            read_all_no_panic(&f);
        }
    }

    #[test]
    fn prop_corrupted_files_never_panic(
        pcapng in any::<bool>(),
        edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
    ) {
        let mut bytes = if pcapng { write_pcapng().bytes } else { write_pcap().bytes };
        for (at, v) in edits {
            let i = at.index(bytes.len());
            bytes[i] = v;
        }
        read_all_no_panic(&bytes);
    }
}
