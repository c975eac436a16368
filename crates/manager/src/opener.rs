//! The opener: the one thread of the daemon that keeps capabilities.
//!
//! A capture started on demand in spawn mode needs a packet socket with a ring (CAP_NET_RAW),
//! and a filter such as `vlan 100` is compiled on a live libpcap handle of the interface
//! (CAP_NET_RAW too). The threads that read requests (HTTP, JSON, filter expressions) hold
//! no capability at all. They ask the opener thread instead, with typed values only: an
//! interface index and a ring geometry, or an interface name and a snap length. The opener
//! never sees a request, a filter expression or a path; it opens, and hands the socket or
//! the handle back. Everything else (the filter swapped into the socket, the compile on the
//! handle) happens in the asking thread. With `serve --spawn-priority`, it also keeps
//! CAP_SYS_NICE and gives the workers kept ready SCHED_FIFO, given their TIDs.
//!
//! Without an opener thread ([`Opener::inline`]) the calling thread opens, for tests and
//! for a process that keeps its capabilities everywhere.

use std::sync::mpsc::{channel, sync_channel, Sender, SyncSender};

use corecap_engine::source::afpacket::Spare;
use corecap_linux::filter::LiveHandle;
use corecap_linux::{Error, ErrorKind, RingConfig};

/// What the opener thread is asked for.
enum Job {
    /// A bound packet socket with a ring that refuses every packet until its capture
    /// swaps in a filter.
    Spare {
        ifindex: u32,
        ring: RingConfig,
        reply: SyncSender<corecap_linux::Result<Spare>>,
    },
    /// Real-time scheduling (SCHED_FIFO) for a thread of the daemon, by its TID.
    Fifo {
        tid: i32,
        priority: i32,
        reply: SyncSender<corecap_linux::Result<()>>,
    },
    /// An activated libpcap handle.
    Live {
        iface: String,
        snaplen: u32,
        reply: SyncSender<corecap_linux::Result<LiveHandle>>,
    },
}

/// Where sockets and live handles are opened: an opener thread, or the calling thread.
#[derive(Clone, Debug)]
pub struct Opener {
    /// The opener thread's queue; None opens in the calling thread.
    jobs: Option<Sender<Job>>,
}

fn gone() -> Error {
    Error::new(
        ErrorKind::Sys,
        "the daemon's opener thread is gone; restart the daemon".to_string(),
    )
}

impl Opener {
    /// Opens in the calling thread.
    pub fn inline() -> Self {
        Self { jobs: None }
    }

    /// Starts the opener thread, `corecap-priv`. It keeps `keep` of the capabilities the
    /// calling thread holds (a mask, see `corecap_linux::privilege`) and no others; the
    /// caller then drops its own. Returns the opener and what the thread kept. The thread
    /// ends when the last clone of the opener is dropped.
    pub fn spawn(keep: u64) -> corecap_linux::Result<(Self, u64)> {
        let (tx, rx) = channel::<Job>();
        let (ready_tx, ready_rx) = sync_channel(1);
        std::thread::Builder::new()
            .name("corecap-priv".into())
            .spawn(move || {
                let kept = corecap_linux::privilege::keep_thread_capabilities(keep);
                let ok = kept.is_ok();
                let _ = ready_tx.send(kept);
                if ok {
                    for job in rx {
                        run(job);
                    }
                }
            })
            .map_err(|e| Error::from_io("starting the opener thread", e))?;
        let kept = ready_rx.recv().map_err(|_| gone())??;
        Ok((Self { jobs: Some(tx) }, kept))
    }

    /// A spare socket on `ifindex` with ring geometry `ring`.
    pub fn spare(&self, ifindex: u32, ring: RingConfig) -> corecap_linux::Result<Spare> {
        let Some(jobs) = &self.jobs else {
            return Spare::open(ifindex, ring);
        };
        ask(jobs, |reply| Job::Spare {
            ifindex,
            ring,
            reply,
        })
    }

    /// Gives thread `tid` of this process SCHED_FIFO at `priority` (CAP_SYS_NICE, which
    /// only the opener thread keeps).
    pub fn fifo(&self, tid: i32, priority: i32) -> corecap_linux::Result<()> {
        let Some(jobs) = &self.jobs else {
            return corecap_linux::affinity::set_fifo(tid, priority);
        };
        ask(jobs, |reply| Job::Fifo {
            tid,
            priority,
            reply,
        })
    }

    /// An activated libpcap handle on `iface`, to compile a filter on.
    pub fn live(&self, iface: &str, snaplen: u32) -> corecap_linux::Result<LiveHandle> {
        let Some(jobs) = &self.jobs else {
            return LiveHandle::open(iface, snaplen);
        };
        ask(jobs, |reply| Job::Live {
            iface: iface.to_owned(),
            snaplen,
            reply,
        })
    }
}

/// Sends the opener thread the job that `job` makes of a reply channel, and waits for
/// its answer.
fn ask<T>(
    jobs: &Sender<Job>,
    job: impl FnOnce(SyncSender<corecap_linux::Result<T>>) -> Job,
) -> corecap_linux::Result<T> {
    let (reply, answer) = sync_channel(1);
    jobs.send(job(reply)).map_err(|_| gone())?;
    answer.recv().map_err(|_| gone())?
}

/// Runs one job in the opener thread. A caller that stopped waiting is no error.
fn run(job: Job) {
    match job {
        Job::Spare {
            ifindex,
            ring,
            reply,
        } => {
            let _ = reply.send(Spare::open(ifindex, ring));
        }
        Job::Fifo {
            tid,
            priority,
            reply,
        } => {
            let _ = reply.send(corecap_linux::affinity::set_fifo(tid, priority));
        }
        Job::Live {
            iface,
            snaplen,
            reply,
        } => {
            let _ = reply.send(LiveHandle::open(&iface, snaplen));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_the_opener_thread_keeps_only_what_it_is_given() {
        // Ask to keep one capability the calling thread may or may not hold: the thread
        // keeps at most that one, never more.
        let want = 1u64 << corecap_linux::privilege::CAP_NET_RAW;
        let (o, kept) = Opener::spawn(want).expect("opener");
        assert_eq!(kept & !want, 0);
        let (_, held) = corecap_linux::privilege::thread_capabilities().expect("capget");
        assert_eq!(kept, want & held);
        // An interface that does not exist is the opener's error, passed back whole.
        let e = o.live("no-such-if0", 128).expect_err("no interface");
        assert!(e.to_string().contains("no-such-if0"), "{e}");
        drop(o);
    }
}
