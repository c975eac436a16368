//! I/O priority of the calling thread (`ioprio_set(2)`), so work that reads recorded files
//! (queries) yields the disk to the writers of a running capture.

use crate::error::{Error, Result};

/// `IOPRIO_WHO_PROCESS`: `who` is a thread id (0: the calling thread).
const IOPRIO_WHO_PROCESS: libc::c_int = 1;
/// Bits of the class in an I/O priority value.
const IOPRIO_CLASS_SHIFT: u32 = 13;

/// An I/O scheduling class.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IoClass {
    /// `IOPRIO_CLASS_BE` with a level from 0 (highest) to 7 (lowest).
    BestEffort(u8),
    /// `IOPRIO_CLASS_IDLE`: served only when no other I/O wants the disk.
    Idle,
}

impl IoClass {
    /// The kernel's `IOPRIO_PRIO_VALUE(class, data)`.
    pub fn value(self) -> libc::c_int {
        let (class, data) = match self {
            IoClass::BestEffort(l) => (2, u32::from(l.min(7))),
            IoClass::Idle => (3, 0),
        };
        ((class << IOPRIO_CLASS_SHIFT) | data) as libc::c_int
    }
}

/// Sets the I/O priority of the calling thread.
pub fn set_current_thread(class: IoClass) -> Result<()> {
    // SAFETY: ioprio_set takes three integers and touches no memory of ours.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_ioprio_set,
            IOPRIO_WHO_PROCESS,
            0 as libc::c_int,
            class.value(),
        )
    };
    if rc < 0 {
        return Err(Error::last(format!("ioprio_set({class:?})")));
    }
    Ok(())
}

/// The I/O priority value of the calling thread (`ioprio_get(2)`).
pub fn current_thread() -> Result<libc::c_int> {
    // SAFETY: ioprio_get takes two integers and touches no memory of ours.
    let rc = unsafe { libc::syscall(libc::SYS_ioprio_get, IOPRIO_WHO_PROCESS, 0 as libc::c_int) };
    if rc < 0 {
        return Err(Error::last("ioprio_get"));
    }
    Ok(rc as libc::c_int)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_idle_on_a_thread_of_its_own() {
        std::thread::spawn(|| {
            set_current_thread(IoClass::Idle).expect("ioprio_set idle is allowed unprivileged");
            assert_eq!(current_thread().unwrap(), IoClass::Idle.value());
            set_current_thread(IoClass::BestEffort(7)).unwrap();
            assert_eq!(current_thread().unwrap(), (2 << 13) | 7);
        })
        .join()
        .unwrap();
    }
}
