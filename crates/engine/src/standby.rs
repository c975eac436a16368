//! Workers kept ready for captures started on demand (the manager's spawn mode).
//!
//! A [`Standby`] is a thread made ahead of need, pinned to its CPU, with a spare socket
//! whose ring is already mapped ([`Spare`]), blocked until a capture hands it its work. A
//! spawned capture that takes one makes no thread and no ring on the request's path: its
//! worker runs on the thread that was waiting, after one wake-up.
//!
//! The hand-over is a one-slot `std::sync::mpsc::sync_channel`: the thread blocks in
//! `recv`, which parks it on a futex; [`Standby::launch`] sends the work (one futex wake).
//! Nothing here is on the data path: it runs once per capture.
//!
//! A standby that is dropped without work ends its thread (its `recv` fails) and closes
//! its spare socket.

use std::sync::mpsc::{sync_channel, SyncSender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use crate::source::afpacket::Spare;
use crate::worker::Outcome;

/// The work a standby runs: a worker, to its end.
pub type Work = Box<dyn FnOnce() -> Outcome + Send>;

/// What the standby's thread and the capture taking it share: the sender that wakes the
/// thread, and the thread's handle; taken once, by the capture that launches it.
struct Parked {
    wake: SyncSender<Work>,
    thread: JoinHandle<Outcome>,
}

/// A thread ready to run a spawned capture's worker, with its spare socket. Clones share
/// one thread: the first [`Standby::launch`] takes it.
#[derive(Clone)]
pub struct Standby {
    cpu: u32,
    tid: i32,
    spare: Spare,
    parked: Arc<Mutex<Option<Parked>>>,
}

impl std::fmt::Debug for Standby {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Standby")
            .field("cpu", &self.cpu)
            .field("tid", &self.tid)
            .field("ready", &self.ready())
            .finish()
    }
}

impl Standby {
    /// Starts a thread pinned to `cpu` that waits for work, holding `spare`. Returns once
    /// the thread is pinned and waiting (with its TID, for real-time scheduling).
    pub fn start(cpu: u32, spare: Spare) -> std::io::Result<Self> {
        let (wake, work) = sync_channel::<Work>(1);
        let (told, tid) = sync_channel::<Result<i32, String>>(1);
        let thread = std::thread::Builder::new()
            .name(format!("corecap-sb{cpu}"))
            .spawn(move || {
                let pinned = corecap_linux::affinity::pin_current_thread(cpu)
                    .map(|()| corecap_linux::affinity::current_tid())
                    .map_err(|e| e.to_string());
                let ok = pinned.is_ok();
                let _ = told.send(pinned);
                match work.recv() {
                    Ok(w) if ok => w(),
                    _ => Outcome::default(),
                }
            })?;
        let tid = match tid.recv() {
            Ok(Ok(t)) => t,
            Ok(Err(e)) => return Err(std::io::Error::other(e)),
            Err(_) => return Err(std::io::Error::other("a standby thread ended at start")),
        };
        Ok(Self {
            cpu,
            tid,
            spare,
            parked: Arc::new(Mutex::new(Some(Parked { wake, thread }))),
        })
    }

    /// The CPU its thread waits on.
    pub fn cpu(&self) -> u32 {
        self.cpu
    }

    /// Its thread's TID.
    pub fn tid(&self) -> i32 {
        self.tid
    }

    /// Its spare socket (the capture's worker takes the ring from it).
    pub fn spare(&self) -> &Spare {
        &self.spare
    }

    /// Whether its thread still waits and its spare still holds a socket.
    pub fn ready(&self) -> bool {
        self.spare.ready() && self.parked.lock().map(|g| g.is_some()).unwrap_or(false)
    }

    /// Wakes the thread to run `work`; returns its handle. Gives `work` back when another
    /// capture launched it first (or its thread is gone): the caller starts a thread of
    /// its own.
    pub fn launch(&self, work: Work) -> Result<JoinHandle<Outcome>, Work> {
        let parked = match self.parked.lock() {
            Ok(mut g) => g.take(),
            Err(_) => None,
        };
        let Some(p) = parked else {
            return Err(work);
        };
        match p.wake.send(work) {
            Ok(()) => Ok(p.thread),
            Err(e) => Err(e.0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_a_standby_runs_its_work_once_on_its_cpu() {
        let cpu = corecap_linux::affinity::allowed_cpus()[0];
        let s = Standby::start(cpu, Spare::default()).expect("standby");
        assert!(s.tid() > 0);
        let again = s.clone();
        let h = s
            .launch(Box::new(move || {
                let mut o = Outcome::default();
                o.notes
                    .push(format!("{:?}", corecap_linux::affinity::allowed_cpus()));
                o
            }))
            .unwrap_or_else(|_| panic!("not launched"));
        assert!(again.launch(Box::new(Outcome::default)).is_err(), "once");
        let o = h.join().expect("join");
        assert_eq!(o.notes, [format!("{:?}", [cpu])]);
    }

    #[test]
    fn test_a_dropped_standby_ends_its_thread() {
        let cpu = corecap_linux::affinity::allowed_cpus()[0];
        let s = Standby::start(cpu, Spare::default()).expect("standby");
        let p = s.parked.lock().expect("lock").take().expect("parked");
        drop(p.wake);
        let o = p.thread.join().expect("join");
        assert!(o.error.is_none());
    }
}
