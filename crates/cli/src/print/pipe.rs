//! Printing what a capture or a query writes: they write their pcapng stream into a pipe,
//! and a thread of its own reads it and prints the lines. A capture's merged stream is in
//! time order across its workers, so the lines are too.
//!
//! The capture engine opens its output by path, so the pipe's writing end is also named by
//! path: `/proc/self/fd/N`, which the engine writes as it writes a FIFO. Once the engine has
//! opened its own, [`Pipe::close_writer`] closes this one, so the printer sees the end of
//! the stream when the engine closes it.

use std::io::{self, BufReader, PipeWriter};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::thread::JoinHandle;

use anyhow::Result;

use super::Options;

/// A printing thread and the writing end of its pipe.
#[derive(Debug)]
pub(crate) struct Pipe {
    writer: Option<PipeWriter>,
    /// The writing end as `/proc/self/fd/N`.
    path: PathBuf,
    thread: JoinHandle<Result<u64>>,
}

impl Pipe {
    /// Starts a thread that prints, one line each, the packets written into the pipe: at
    /// most `limit` of them, then it stops reading.
    pub(crate) fn start(
        opts: Options,
        line_buffered: bool,
        limit: Option<u64>,
    ) -> io::Result<Pipe> {
        let (reader, writer) = io::pipe()?;
        let thread = std::thread::Builder::new()
            .name("print".into())
            .spawn(move || {
                let input = BufReader::with_capacity(1 << 16, reader);
                super::run(input, opts, super::stdout(line_buffered), limit)
            })?;
        let path = PathBuf::from(format!("/proc/self/fd/{}", writer.as_raw_fd()));
        Ok(Pipe {
            writer: Some(writer),
            path,
            thread,
        })
    }

    /// The writing end as a path the engine can open (while this end is open).
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The writing end itself, for a writer in this process; the printer sees the end of
    /// the stream when it is dropped.
    pub(crate) fn take_writer(&mut self) -> Option<PipeWriter> {
        self.writer.take()
    }

    /// Closes this process's own writing end, once the engine has opened its own.
    pub(crate) fn close_writer(&mut self) {
        self.writer = None;
    }

    /// Whether the printer has stopped (the stream ended, it printed `limit` packets, or its
    /// output was closed).
    pub(crate) fn finished(&self) -> bool {
        self.thread.is_finished()
    }

    /// Waits for the printer to print what was written; how many packets it printed.
    pub(crate) fn join(mut self) -> Result<u64> {
        self.writer = None;
        self.thread
            .join()
            .unwrap_or_else(|_| Err(anyhow::anyhow!("the printing thread panicked")))
    }
}

/// Prints `line` and a newline on standard output. Unlike `println!`, which panics on a
/// closed output (`| head -c 100`), it gives the error back, and `main` takes it for the
/// reader's choice (exit 0).
pub(crate) fn out_line(line: impl std::fmt::Display) -> io::Result<()> {
    use std::io::Write;
    writeln!(io::stdout().lock(), "{line}")
}

/// Whether an error is a closed standard output (`| head`): the reader's choice, not a
/// failure.
pub(crate) fn is_broken_pipe(e: &anyhow::Error) -> bool {
    use corecap_store::query::QueryError;
    e.chain().any(|c| {
        let io = c
            .downcast_ref::<io::Error>()
            .or_else(|| match c.downcast_ref() {
                Some(QueryError::Output(io)) => Some(io),
                _ => None,
            });
        io.is_some_and(|io| io.kind() == io::ErrorKind::BrokenPipe)
    })
}
