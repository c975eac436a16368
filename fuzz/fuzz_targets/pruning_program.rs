//! Any bytes as a link type (the first byte picks one the pruning reads) and a classic BPF
//! program (8 bytes an instruction) whose predicate the index would prune with: a
//! predicate or "read everything", never a panic, a hang or a walk past its bounds.
#![no_main]

use corecap_index::{Insn, Predicate};
use libfuzzer_sys::fuzz_target;

/// The link types whose headers the pruning reads, and one it does not (Ethernet, SLL, raw
/// IP, SLL2, NULL/LOOP first).
const LINKTYPES: [u16; 6] = [1, 113, 101, 276, 0, 147];

fuzz_target!(|data: &[u8]| {
    let Some((&pick, data)) = data.split_first() else {
        return;
    };
    let lt = LINKTYPES[usize::from(pick) % LINKTYPES.len()];
    let insns: Vec<Insn> = data
        .chunks_exact(8)
        .map(|c| Insn {
            code: u16::from_le_bytes([c[0], c[1]]),
            jt: c[2],
            jf: c[3],
            k: u32::from_le_bytes([c[4], c[5], c[6], c[7]]),
        })
        .collect();
    let _ = Predicate::from_program(lt, &insns);
});
