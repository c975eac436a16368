//! Changing the consumers of a running capture, through the steering matrix (the protocol
//! is described in [`crate::steer::group`]).
//!
//! - [`Capture::join`] and [`Capture::leave`] change the members of a configured group
//!   (`--control`'s `join G` and `leave G I`), in [`join`];
//! - [`Capture::attach`] adds a consumer with a filter and apps of its own, as a copy group
//!   of one member, and [`Capture::detach`] removes it and returns what it did: the
//!   on-demand manager's attach mode, in [`attach`]. No socket or ring is made; the workers
//!   copy the packets that pass its filter from their next block on.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::capture::spawn::StageCtx;
use crate::capture::Capture;
use crate::steer::group::{Control, Matrix};

pub mod attach;
pub mod join;

pub use attach::{AttachSpec, Attached, Detached};

impl Capture {
    fn wait_acks(&self, epoch: u64) -> Result<(), String> {
        let deadline = Instant::now() + Duration::from_secs(5);
        for ((_, ack), h) in self.controls.iter().zip(&self.handles) {
            // Acquire: pairs with the worker's Release store after it applied the message.
            while ack.load(Ordering::Acquire) < epoch && !h.is_finished() {
                if Instant::now() > deadline {
                    return Err("a worker did not take the change within 5 s".into());
                }
                std::thread::sleep(Duration::from_micros(100));
            }
        }
        Ok(())
    }

    fn steering(&self) -> Result<(Arc<arc_swap::ArcSwap<Matrix>>, StageCtx), String> {
        self.matrix
            .clone()
            .ok_or_else(|| "no groups: start with --groups".to_string())
    }

    /// Sends a message to every worker (built per worker by `msg`), all or none: a full
    /// control ring is refused before anything is sent.
    fn tell_workers(&mut self, mut msg: impl FnMut(usize) -> Control) -> Result<(), String> {
        if self.controls.iter().any(|(c, _)| c.slots() == 0) {
            return Err("a worker's control ring is full; try again".into());
        }
        for (w, (ctl, _)) in self.controls.iter_mut().enumerate() {
            // Cannot fail: checked for room above, and only this thread pushes.
            let _ = ctl.push(msg(w));
        }
        Ok(())
    }

    /// The smallest member id no stage thread uses (ids are reused, so the workers'
    /// per-member tables stay as small as the number of live members).
    fn free_member_id(&self) -> usize {
        (0..)
            .find(|m| !self.stages.iter().any(|s| s.member == *m))
            .unwrap_or(0)
    }

    /// Publishes `next` (which no longer names member `m`), then tells the workers to let
    /// `m` go. Once they have, `m`'s stage thread ends. Its id may be given to a new member
    /// at once: each worker takes the `Leave` before any later `Join` (one ring, in order).
    fn unpublish(
        &mut self,
        shared: &arc_swap::ArcSwap<Matrix>,
        next: Matrix,
        m: usize,
    ) -> Result<(), String> {
        shared.store(Arc::new(next));
        self.epoch += 1;
        let epoch = self.epoch;
        self.tell_workers(|_| Control::Leave { member: m, epoch })
    }
}
