//! Any bytes as a sidecar index, with the postings of every key it lists looked up and
//! every region asked: a clear error or an answer, never a panic, a hang or an allocation
//! larger than the input allows. The same bytes are also read as a query reads a version 3
//! sidecar: its trailer and head, then each list from the bytes as its key is looked up.
//! (The pruning read from a filter's program has its own target, `pruning_program`.)
#![no_main]

use corecap_index::format::TRAILER_LEN;
use corecap_index::Index;
use libfuzzer_sys::fuzz_target;

fn ask(ix: &Index, read: &mut dyn FnMut(u64, usize) -> Option<Vec<u8>>) {
    for r in &ix.regions {
        let _ = r.may_have_key(1);
    }
    for k in [0u64, 1, u64::MAX].into_iter().chain(ix.postings.keys().take(64)) {
        let _ = ix.postings.lookup_with(k, &mut *read);
    }
    let _ = ix.time_range();
    let _ = corecap_index::header_linktypes(&ix.header);
}

fuzz_target!(|data: &[u8]| {
    if let Ok(ix) = Index::parse(data) {
        ask(&ix, &mut |_, _| None);
    }
    let Some(t) = data.len().checked_sub(TRAILER_LEN) else {
        return;
    };
    let Ok(head_len) = Index::head_len(&data[t..]) else {
        return;
    };
    let Some(head) = usize::try_from(head_len).ok().and_then(|h| data.get(..h)) else {
        return;
    };
    if let Ok(ix) = Index::parse_head(head, &data[t..]) {
        // As the query reads a list: never past what the sidecar holds.
        ask(&ix, &mut |at, len| {
            let at = usize::try_from(at).ok()?;
            data.get(at..at.checked_add(len)?).map(<[u8]>::to_vec)
        });
    }
});
