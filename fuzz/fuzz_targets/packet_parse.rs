//! Any bytes as a frame: the L2/L3/L4 views, the flow key and its hash, and the index's
//! region builder (as a pcap file around the frame), never panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let vlan = data.first().map(|&v| u16::from(v) * 16);
    let _ = corecap_wire::flow::parse_l2(data);
    if let Ok(k) = corecap_wire::flow::flow_key(data, vlan) {
        let _ = (k.canonical(), k.reversed(), k.src_ip(), k.dst_ip());
    }
    // The same bytes as a region of a capture file, and as a frame in a pcap file.
    let mut b = corecap_index::IndexBuilder::new();
    b.add_region(0..data.len() as u64, data);
    let _ = b.finish();
    let mut file = vec![0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    file.extend_from_slice(&65535u32.to_le_bytes());
    file.extend_from_slice(&1u32.to_le_bytes());
    for v in [1u32, 0, data.len() as u32, data.len() as u32] {
        file.extend_from_slice(&v.to_le_bytes());
    }
    file.extend_from_slice(data);
    let mut b = corecap_index::IndexBuilder::new();
    b.add_region(0..file.len() as u64, &file);
    let _ = b.finish();
});
