//! Any bytes as a sidecar index (with the postings of every key it lists looked up), and as
//! a classic BPF program whose predicate the index would prune with: a clear error or an
//! answer, never a panic, a hang or an allocation larger than the input allows.
#![no_main]

use corecap_index::{Index, Insn, Predicate};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(ix) = Index::parse(data) {
        for r in &ix.regions {
            let _ = r.may_have_key(1);
        }
        for k in [0u64, 1, u64::MAX] {
            let _ = ix.postings.lookup(k);
        }
        let _ = corecap_index::header_linktypes(&ix.header);
    }
    let insns: Vec<Insn> = data
        .chunks_exact(8)
        .map(|c| Insn {
            code: u16::from_le_bytes([c[0], c[1]]),
            jt: c[2],
            jf: c[3],
            k: u32::from_le_bytes([c[4], c[5], c[6], c[7]]),
        })
        .collect();
    for lt in [1u16, 101, 113] {
        let _ = Predicate::from_program(lt, &insns);
    }
});
