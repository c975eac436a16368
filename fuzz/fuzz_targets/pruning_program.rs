//! Any bytes as a classic BPF program (8 bytes an instruction) whose predicate the index
//! would prune with, for the link types the pruning reads: a predicate or "read
//! everything", never a panic, a hang or a walk past its bounds.
#![no_main]

use corecap_index::{Insn, Predicate};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let insns: Vec<Insn> = data
        .chunks_exact(8)
        .map(|c| Insn {
            code: u16::from_le_bytes([c[0], c[1]]),
            jt: c[2],
            jf: c[3],
            k: u32::from_le_bytes([c[4], c[5], c[6], c[7]]),
        })
        .collect();
    for lt in [0u16, 1, 101, 113, 276] {
        let _ = Predicate::from_program(lt, &insns);
    }
});
