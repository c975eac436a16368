//! Any bytes as a capture file (pcap, pcapng, compressed): the reader ends with packets,
//! a clean end or an error, never a panic or a hang.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(mut r) = corecap_wire::read::CaptureReader::new(std::io::Cursor::new(data)) else {
        return;
    };
    let _ = r.interfaces();
    for _ in 0..100_000 {
        match r.next_packet() {
            Ok(Some(p)) => {
                let _ = (p.data.len(), p.ts_ns);
            }
            _ => break,
        }
    }
});
