//! Compressed capture files: gzip, zstd and lz4, told by their first bytes (as Wireshark
//! does, never by the file name) and decompressed as a stream.
//!
//! [`Decompress`] wraps a `BufRead`: it reads the first four bytes, picks the decoder they
//! name ([`Compression::detect`]) and hands out the decompressed bytes through `Read`, so
//! [`crate::CaptureReader`] reads a `.pcapng.gz` into its own buffer like a plain file, with
//! no copy of the whole file and nothing allocated per packet (the decoders keep their
//! buffers). A stream with none of the three magics passes through unchanged.
//!
//! - gzip (`1f 8b`): every member of a multi-member file (`cat a.gz b.gz`), with each
//!   member's CRC checked.
//! - zstd (`28 b5 2f fd`): every frame, skippable frames skipped.
//! - lz4 (`04 22 4d 18`): the lz4 frame format (`lz4 file`), every frame, with the block
//!   and content checksums the frames carry.
//!
//! A decoder that fails (a stream cut short, a flipped byte) gives an `io::Error` whose
//! payload is a [`DecodeError`]; the capture reader turns it into
//! [`crate::ReadError::Decompress`] after the packets decoded before it.

use std::fmt;
use std::io::{self, BufRead, Chain, Cursor, Read};

/// How a capture file's bytes are compressed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Compression {
    /// Not compressed.
    None,
    /// gzip (RFC 1952), one or more members.
    Gzip,
    /// Zstandard (RFC 8878), one or more frames.
    Zstd,
    /// LZ4 frame format, one or more frames.
    Lz4,
}

/// gzip member magic.
pub const MAGIC_GZIP: [u8; 2] = [0x1f, 0x8b];
/// Zstandard frame magic (0xfd2fb528 little-endian).
pub const MAGIC_ZSTD: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];
/// LZ4 frame magic (0x184d2204 little-endian).
pub const MAGIC_LZ4: [u8; 4] = [0x04, 0x22, 0x4d, 0x18];

impl Compression {
    /// The compression named by the first bytes of a file (at least 4 for zstd and lz4).
    pub fn detect(head: &[u8]) -> Compression {
        if head.starts_with(&MAGIC_GZIP) {
            Compression::Gzip
        } else if head.starts_with(&MAGIC_ZSTD) {
            Compression::Zstd
        } else if head.starts_with(&MAGIC_LZ4) {
            Compression::Lz4
        } else {
            Compression::None
        }
    }

    /// Its usual name: `gzip`, `zstd`, `lz4`, or `none`.
    pub fn name(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Gzip => "gzip",
            Compression::Zstd => "zstd",
            Compression::Lz4 => "lz4",
        }
    }

    /// Whether the bytes are compressed.
    pub fn is_compressed(self) -> bool {
        self != Compression::None
    }
}

impl fmt::Display for Compression {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A decoder's failure, carried as the payload of the `io::Error` that [`Decompress`]
/// returns.
#[derive(Debug)]
pub struct DecodeError {
    /// The stream's compression.
    pub compression: Compression,
    /// What the decoder said.
    pub cause: io::Error,
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.cause.kind() == io::ErrorKind::UnexpectedEof {
            write!(f, "{} stream cut short", self.compression)
        } else {
            write!(f, "corrupt {} stream ({})", self.compression, self.cause)
        }
    }
}

impl std::error::Error for DecodeError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.cause)
    }
}

/// The first bytes, read to find the magic, put back in front of the rest.
type Head<R> = Chain<Cursor<Vec<u8>>, R>;

enum Inner<R: BufRead> {
    Plain(Head<R>),
    Gzip(flate2::bufread::MultiGzDecoder<Head<R>>),
    Zstd(zstd::stream::read::Decoder<'static, Head<R>>),
    Lz4(lz4_flex::frame::FrameDecoder<Head<R>>),
}

/// A stream decompressed as its first bytes say (or passed through when they name no
/// compression).
pub struct Decompress<R: BufRead> {
    inner: Inner<R>,
    compression: Compression,
    /// Set after the decoder's first error: every later read repeats it as end of input.
    failed: bool,
}

impl<R: BufRead> fmt::Debug for Decompress<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Decompress")
            .field("compression", &self.compression)
            .finish_non_exhaustive()
    }
}

impl<R: BufRead> Decompress<R> {
    /// Reads the first bytes of `r` and sets up the decoder they name.
    pub fn new(mut r: R) -> io::Result<Self> {
        let mut head = vec![0u8; 4];
        let mut got = 0;
        while got < head.len() {
            match r.read(&mut head[got..]) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        head.truncate(got);
        let compression = Compression::detect(&head);
        let src = Cursor::new(head).chain(r);
        let inner = match compression {
            Compression::None => Inner::Plain(src),
            Compression::Gzip => Inner::Gzip(flate2::bufread::MultiGzDecoder::new(src)),
            Compression::Zstd => Inner::Zstd(zstd::stream::read::Decoder::with_buffer(src)?),
            Compression::Lz4 => Inner::Lz4(lz4_flex::frame::FrameDecoder::new(src)),
        };
        Ok(Decompress {
            inner,
            compression,
            failed: false,
        })
    }

    /// The stream's compression.
    pub fn compression(&self) -> Compression {
        self.compression
    }
}

impl<R: BufRead> Read for Decompress<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.failed {
            return Ok(0);
        }
        let res = match &mut self.inner {
            Inner::Plain(r) => return r.read(buf),
            Inner::Gzip(d) => d.read(buf),
            Inner::Zstd(d) => d.read(buf),
            Inner::Lz4(d) => lz4_read(d, buf),
        };
        res.map_err(|cause| {
            if cause.kind() == io::ErrorKind::Interrupted {
                return cause;
            }
            self.failed = true;
            let kind = cause.kind();
            io::Error::new(
                kind,
                DecodeError {
                    compression: self.compression,
                    cause,
                },
            )
        })
    }
}

/// Reads from an lz4 frame decoder across frames: the decoder returns 0 at the end of each
/// frame, so more input after it starts the next frame.
fn lz4_read<R: BufRead>(
    d: &mut lz4_flex::frame::FrameDecoder<R>,
    buf: &mut [u8],
) -> io::Result<usize> {
    loop {
        let n = d.read(buf)?;
        if n > 0 || buf.is_empty() || d.get_mut().fill_buf()?.is_empty() {
            return Ok(n);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// 64 KiB that compress well but not to nothing.
    fn sample() -> Vec<u8> {
        (0..65_536u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8 & 0x0f)
            .collect()
    }

    fn gzip(b: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(b).unwrap();
        e.finish().unwrap()
    }

    /// With a content checksum, as the `zstd` tool writes.
    fn zstd(b: &[u8]) -> Vec<u8> {
        let mut e = zstd::stream::write::Encoder::new(Vec::new(), 3).unwrap();
        e.include_checksum(true).unwrap();
        e.write_all(b).unwrap();
        e.finish().unwrap()
    }

    /// With a content checksum, as the `lz4` tool writes.
    fn lz4(b: &[u8]) -> Vec<u8> {
        let info = lz4_flex::frame::FrameInfo::new().content_checksum(true);
        let mut e = lz4_flex::frame::FrameEncoder::with_frame_info(info, Vec::new());
        e.write_all(b).unwrap();
        e.finish().unwrap()
    }

    fn decode(b: &[u8]) -> (Compression, Vec<u8>, Option<io::Error>) {
        let mut d = Decompress::new(b).unwrap();
        let mut out = Vec::new();
        let mut chunk = [0u8; 1000];
        loop {
            match d.read(&mut chunk) {
                Ok(0) => return (d.compression(), out, None),
                Ok(n) => out.extend_from_slice(&chunk[..n]),
                Err(e) => return (d.compression(), out, Some(e)),
            }
        }
    }

    #[test]
    fn test_detect() {
        assert_eq!(Compression::detect(&[0x1f, 0x8b, 8, 0]), Compression::Gzip);
        assert_eq!(Compression::detect(&MAGIC_ZSTD), Compression::Zstd);
        assert_eq!(Compression::detect(&MAGIC_LZ4), Compression::Lz4);
        assert_eq!(
            Compression::detect(&[0xd4, 0xc3, 0xb2, 0xa1]),
            Compression::None
        );
        assert_eq!(Compression::detect(&[0x28, 0xb5]), Compression::None);
        assert_eq!(Compression::detect(&[]), Compression::None);
    }

    #[test]
    fn test_parse_each_form() {
        let s = sample();
        let forms = [
            (Compression::None, s.clone()),
            (Compression::Gzip, gzip(&s)),
            (Compression::Zstd, zstd(&s)),
            (Compression::Lz4, lz4(&s)),
        ];
        for (c, bytes) in forms {
            let (got_c, out, err) = decode(&bytes);
            assert_eq!(got_c, c);
            assert!(err.is_none(), "{c}: {err:?}");
            assert!(out == s, "{c}: {} bytes, want {}", out.len(), s.len());
        }
        // Short inputs pass through.
        assert_eq!(decode(b"ab").1, b"ab");
        assert_eq!(decode(b"").1, b"");
    }

    #[test]
    fn test_parse_concatenated() {
        let s = sample();
        let (a, b) = s.split_at(10_000);
        for (c, bytes) in [
            (Compression::Gzip, [gzip(a), gzip(b)].concat()),
            (Compression::Zstd, [zstd(a), zstd(b)].concat()),
            (Compression::Lz4, [lz4(a), lz4(b)].concat()),
        ] {
            let (_, out, err) = decode(&bytes);
            assert!(err.is_none(), "{c}: {err:?}");
            assert!(out == s, "{c}: {} bytes, want {}", out.len(), s.len());
        }
    }

    #[test]
    fn test_truncated() {
        let s = sample();
        for bytes in [gzip(&s), zstd(&s), lz4(&s)] {
            for cut in [bytes.len() - 1, bytes.len() - 4, bytes.len() / 2, 6] {
                let (c, out, err) = decode(&bytes[..cut]);
                let e = err.unwrap_or_else(|| panic!("{c} cut at {cut}: no error"));
                let d = e.get_ref().and_then(|p| p.downcast_ref::<DecodeError>());
                assert_eq!(d.map(|d| d.compression), Some(c), "{e}");
                assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof, "{c} at {cut}: {e}");
                assert!(e.to_string().contains("cut short"), "{e}");
                assert!(s.starts_with(&out), "{c}: decoded bytes differ");
            }
        }
    }

    #[test]
    fn test_corrupted() {
        let s = sample();
        for bytes in [gzip(&s), zstd(&s), lz4(&s)] {
            let mut bad = bytes.clone();
            let mid = bad.len() / 2;
            for b in &mut bad[mid..mid + 8] {
                *b ^= 0x5a;
            }
            let (c, out, err) = decode(&bad);
            let e = err.unwrap_or_else(|| panic!("{c}: flipped bytes not noticed"));
            assert!(
                e.get_ref()
                    .and_then(|p| p.downcast_ref::<DecodeError>())
                    .is_some(),
                "{e}"
            );
            // What came before the error may itself be damaged (gzip checks its CRC only
            // at the end of a member); the capture reader checks every record.
            let _ = out;
        }
    }
}
