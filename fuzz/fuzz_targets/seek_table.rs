//! Any bytes as the end of a compressed recording: the seek table's footer and table are
//! refused or parsed, never a panic, a read past the input or an allocation of what a
//! damaged count claims; a table parsed fills the file before it exactly.
#![no_main]

use corecap_store::seekable::SeekTable;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&before, tail)) = data.split_first() else {
        return;
    };
    // The bytes of frames before the table, as the file's length says.
    let file_len = tail.len() as u64 + u64::from(before) * 97;
    if let Ok(Some(len)) = SeekTable::table_len(tail, file_len) {
        assert!(len <= file_len);
        if let Some(table) = tail.get(tail.len().saturating_sub(len as usize)..) {
            if let Ok(t) = SeekTable::parse(table, file_len) {
                assert_eq!(t.frames_len() + len, file_len);
                let _ = t.frame_at(t.plain_len() / 2);
            }
        }
    }
});
