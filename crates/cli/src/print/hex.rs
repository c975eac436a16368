//! tcpdump's dumps of packet bytes: `-x` in hex, `-X` (and the bytes of an unknown
//! protocol) in hex and ASCII. Each line starts with a newline, a tab and the offset, then
//! sixteen bytes as eight groups of four hex digits (the tab shown as spaces here):
//!
//! ```text
//!     0x0000:  4500 0054 1234 4000 4001 1478 0a00 0001  E..T.4@.@..x....
//! ```

use std::fmt::Write;

/// `-x`: the bytes in hex (`hex_print` in tcpdump).
pub(super) fn hex(line: &mut String, b: &[u8]) {
    hex_indented(line, "\n\t", b);
}

/// The bytes in hex, each line starting with `indent`.
pub(super) fn hex_indented(line: &mut String, indent: &str, b: &[u8]) {
    for (i, row) in b.chunks(16).enumerate() {
        let _ = write!(line, "{indent}0x{:04x}: ", i * 16);
        for pair in row.chunks(2) {
            line.push(' ');
            for byte in pair {
                let _ = write!(line, "{byte:02x}");
            }
        }
    }
}

/// `-X`: the bytes in hex and ASCII (`hex_and_ascii_print`): the hex column is padded to
/// 40 characters, and bytes other than 0x21..=0x7e show as `.`.
pub(super) fn hex_ascii(line: &mut String, b: &[u8]) {
    for (i, row) in b.chunks(16).enumerate() {
        let mut hexes = String::with_capacity(40);
        for pair in row.chunks(2) {
            hexes.push(' ');
            for byte in pair {
                let _ = write!(hexes, "{byte:02x}");
            }
        }
        let ascii: String = row
            .iter()
            .map(|&c| {
                if (0x21..=0x7e).contains(&c) {
                    c as char
                } else {
                    '.'
                }
            })
            .collect();
        let _ = write!(line, "\n\t0x{:04x}: {hexes:<40}  {ascii}", i * 16);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_emit() {
        let b: Vec<u8> = (0x40..0x40 + 19).collect();
        let mut s = String::new();
        hex(&mut s, &b);
        assert_eq!(
            s,
            "\n\t0x0000:  4041 4243 4445 4647 4849 4a4b 4c4d 4e4f\n\t0x0010:  5051 52"
        );
        let mut s = String::new();
        hex_ascii(&mut s, &b[..3]);
        assert_eq!(
            s,
            "\n\t0x0000:  4041 42                                  @AB"
        );
        let mut s = String::new();
        hex_ascii(&mut s, b" \x00~");
        assert!(s.ends_with("  ..~"), "{s:?}");
    }
}
