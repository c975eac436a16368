//! [`Stream`]: the first bytes of one direction of a TCP connection, put together from its
//! segments for a parser that needs more than one segment (a ClientHello or HTTP headers
//! split over segments, DNS over TCP).
//!
//! Its buffer is allocated once, when the stream is made; a table of connections keeps a
//! few of them and lends one to a connection while it waits for a name. A segment is
//! appended only when it starts where the bytes so far end (by TCP sequence number, modulo
//! 2^32). A segment that starts later leaves a gap, and a retransmission whose bytes differ
//! from those held, or a segment cut by the snap length, would put a wrong byte in: each
//! ends the stream ([`Push::GaveUp`]), and its parser gets no more bytes, so no name.

/// Bytes a stream keeps: enough for a ClientHello with post-quantum key shares, or a
/// request line and its headers.
pub const STREAM_MAX: usize = 4096;

/// What [`Stream::push`] did with a segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Push {
    /// New bytes were appended (or the segment repeated bytes already held, the same ones).
    Appended,
    /// The stream is full: bytes past [`STREAM_MAX`] were left out.
    Full,
    /// A gap, a retransmission with other bytes, or a cut segment: the stream is over.
    GaveUp,
}

/// The first bytes of one direction of a TCP connection; see the module doc.
#[derive(Clone)]
pub struct Stream {
    buf: Box<[u8; STREAM_MAX]>,
    len: usize,
    /// Sequence number of `buf[0]`.
    start: u32,
    /// Whether `start` is set (a first segment was pushed, or [`Stream::expect`]).
    started: bool,
    gave_up: bool,
}

impl std::fmt::Debug for Stream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stream")
            .field("len", &self.len)
            .field("start", &self.start)
            .field("started", &self.started)
            .field("gave_up", &self.gave_up)
            .finish()
    }
}

impl Default for Stream {
    fn default() -> Self {
        Stream::new()
    }
}

impl Stream {
    /// An empty stream (its buffer is allocated here, once).
    pub fn new() -> Stream {
        Stream {
            buf: Box::new([0; STREAM_MAX]),
            len: 0,
            start: 0,
            started: false,
            gave_up: false,
        }
    }

    /// Empties the stream for another connection; the buffer stays.
    pub fn clear(&mut self) {
        self.len = 0;
        self.start = 0;
        self.started = false;
        self.gave_up = false;
    }

    /// Says where the data starts: the sequence number after a SYN's. A first segment
    /// pushed after it must start there.
    pub fn expect(&mut self, seq: u32) {
        if !self.started {
            self.start = seq;
            self.started = true;
        }
    }

    /// The bytes so far.
    pub fn bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }

    /// Whether the stream ended with [`Push::GaveUp`].
    pub fn gave_up(&self) -> bool {
        self.gave_up
    }

    /// Adds a segment: `seq` its sequence number, `payload` its captured payload, `cut`
    /// whether the capture cut it short.
    pub fn push(&mut self, seq: u32, payload: &[u8], cut: bool) -> Push {
        if self.gave_up || cut {
            return self.give_up();
        }
        if !self.started {
            self.expect(seq);
        }
        // Where the segment starts relative to the stream's end (sequence arithmetic).
        let end = self.start.wrapping_add(self.len as u32);
        let ahead = seq.wrapping_sub(end) as i32;
        if ahead > 0 {
            return self.give_up();
        }
        let behind = ahead.unsigned_abs() as usize;
        // Bytes already held must be the same bytes.
        let held = behind.min(payload.len());
        if behind > self.len || self.buf[self.len - behind..][..held] != payload[..held] {
            return self.give_up();
        }
        let new = &payload[held..];
        let room = STREAM_MAX - self.len;
        let n = new.len().min(room);
        self.buf[self.len..self.len + n].copy_from_slice(&new[..n]);
        self.len += n;
        if n < new.len() {
            Push::Full
        } else {
            Push::Appended
        }
    }

    fn give_up(&mut self) -> Push {
        self.gave_up = true;
        Push::GaveUp
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_contiguous_and_retransmitted() {
        let mut s = Stream::new();
        s.expect(1000);
        assert_eq!(s.push(1000, b"hello ", false), Push::Appended);
        // A retransmission of the same bytes, and one that overlaps and goes on.
        assert_eq!(s.push(1000, b"hello ", false), Push::Appended);
        assert_eq!(s.push(1003, b"lo world", false), Push::Appended);
        assert_eq!(s.bytes(), b"hello world");
        // Sequence numbers wrap.
        let mut s = Stream::new();
        assert_eq!(s.push(u32::MAX - 1, b"ab", false), Push::Appended);
        assert_eq!(s.push(0, b"cd", false), Push::Appended);
        assert_eq!(s.bytes(), b"abcd");
    }

    #[test]
    fn test_gap_mismatch_and_cut_give_up() {
        let mut s = Stream::new();
        s.expect(1);
        assert_eq!(s.push(5, b"late", false), Push::GaveUp);
        assert_eq!(s.push(1, b"abcd", false), Push::GaveUp);
        let mut s = Stream::new();
        s.push(1, b"abcd", false);
        assert_eq!(s.push(3, b"XY", false), Push::GaveUp);
        let mut s = Stream::new();
        assert_eq!(s.push(1, b"abcd", true), Push::GaveUp);
        assert!(s.gave_up());
        s.clear();
        assert_eq!(s.push(9, b"ok", false), Push::Appended);
    }

    #[test]
    fn test_full() {
        let mut s = Stream::new();
        let big = vec![7u8; STREAM_MAX - 10];
        assert_eq!(s.push(0, &big, false), Push::Appended);
        assert_eq!(s.push(big.len() as u32, &[1; 20], false), Push::Full);
        assert_eq!(s.bytes().len(), STREAM_MAX);
    }
}
