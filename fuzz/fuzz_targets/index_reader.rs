//! Any bytes as a sidecar index, with the postings of every key it lists looked up and
//! every region asked: a clear error or an answer, never a panic, a hang or an allocation
//! larger than the input allows. (The pruning read from a filter's program has its own
//! target, `pruning_program`.)
#![no_main]

use corecap_index::Index;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(ix) = Index::parse(data) {
        for r in &ix.regions {
            let _ = r.may_have_key(1);
        }
        for k in [0u64, 1, u64::MAX].into_iter().chain(ix.postings.keys().take(64)) {
            let _ = ix.postings.lookup(k);
        }
        let _ = ix.time_range();
        let _ = corecap_index::header_linktypes(&ix.header);
    }
});
