//! CPU affinity of threads and the list of online CPUs.

use crate::error::{Error, ErrorKind, Result};

/// Pins the calling thread to one CPU.
pub fn pin_current_thread(cpu: u32) -> Result<()> {
    if cpu as usize >= libc::CPU_SETSIZE as usize {
        return Err(Error::new(
            ErrorKind::Sys,
            format!("cpu {cpu} is out of range"),
        ));
    }
    // SAFETY: cpu_set_t is plain data; all-zero is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `cpu` was checked against CPU_SETSIZE above.
    unsafe { libc::CPU_SET(cpu as usize, &mut set) };
    // SAFETY: `set` is a valid cpu_set_t of the size passed; 0 means the calling thread.
    let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if rc < 0 {
        return Err(Error::last(format!("cannot pin thread to cpu {cpu}")));
    }
    Ok(())
}

/// Lets the calling thread run on any of `cpus` (none out of range; at least one).
pub fn pin_current_thread_to(cpus: &[u32]) -> Result<()> {
    if cpus.is_empty()
        || cpus
            .iter()
            .any(|&c| c as usize >= libc::CPU_SETSIZE as usize)
    {
        return Err(Error::new(ErrorKind::Sys, format!("bad cpu set {cpus:?}")));
    }
    // SAFETY: cpu_set_t is plain data; all-zero is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &c in cpus {
        // SAFETY: every cpu was checked against CPU_SETSIZE above.
        unsafe { libc::CPU_SET(c as usize, &mut set) };
    }
    // SAFETY: `set` is a valid cpu_set_t of the size passed; 0 means the calling thread.
    let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if rc < 0 {
        return Err(Error::last(format!("cannot pin thread to cpus {cpus:?}")));
    }
    Ok(())
}

/// CPU the calling thread runs on now.
pub fn current_cpu() -> u32 {
    // SAFETY: plain system call without arguments.
    let c = unsafe { libc::sched_getcpu() };
    c.max(0) as u32
}

/// Parses a kernel CPU list such as `0-3,8,10-11`.
pub fn parse_cpu_list(s: &str) -> Option<Vec<u32>> {
    let mut out = Vec::new();
    for part in s.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (u32, u32) = (a.trim().parse().ok()?, b.trim().parse().ok()?);
                if b < a || b - a > 65536 {
                    return None;
                }
                out.extend(a..=b);
            }
            None => out.push(part.trim().parse().ok()?),
        }
    }
    Some(out)
}

/// CPUs the calling process may run on, in order.
pub fn allowed_cpus() -> Vec<u32> {
    // SAFETY: cpu_set_t is plain data; all-zero is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is writable and of the size passed.
    let rc =
        unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if rc < 0 {
        return online_cpus();
    }
    (0..libc::CPU_SETSIZE as usize)
        // SAFETY: `c` is below CPU_SETSIZE.
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .map(|c| c as u32)
        .collect()
}

/// Online CPUs, from /sys/devices/system/cpu/online.
pub fn online_cpus() -> Vec<u32> {
    std::fs::read_to_string("/sys/devices/system/cpu/online")
        .ok()
        .and_then(|s| parse_cpu_list(&s))
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| vec![0])
}

/// CPU time (user + system) of the calling process, in seconds (getrusage).
pub fn process_cpu_seconds() -> f64 {
    rusage_seconds(libc::RUSAGE_SELF)
}

/// CPU time of every child process waited for so far (getrusage RUSAGE_CHILDREN). Taken
/// before and after waiting for one child, it gives that child's CPU time.
pub fn children_cpu_seconds() -> f64 {
    rusage_seconds(libc::RUSAGE_CHILDREN)
}

fn rusage_seconds(who: libc::c_int) -> f64 {
    // SAFETY: rusage is plain data; all-zero is valid.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is writable for the call.
    unsafe { libc::getrusage(who, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_parse_cpu_list() {
        assert_eq!(
            parse_cpu_list("0-3,8,10-11\n"),
            Some(vec![0, 1, 2, 3, 8, 10, 11])
        );
        assert_eq!(parse_cpu_list("5"), Some(vec![5]));
        assert_eq!(parse_cpu_list("3-1"), None);
        assert_eq!(parse_cpu_list("x"), None);
    }
}

/// The kernel's id of the calling thread (its TID), to name it to another thread
/// ([`set_fifo`] from the daemon's opener thread).
pub fn current_tid() -> i32 {
    // SAFETY: gettid takes no argument and cannot fail.
    unsafe { libc::gettid() }
}

/// Gives thread `tid` (0: the calling thread) real-time scheduling, SCHED_FIFO at
/// `priority` (1..=99): it runs as soon as it is woken, ahead of every normal thread on its
/// CPU. Needs CAP_SYS_NICE (or an RLIMIT_RTPRIO that allows `priority`); without it the
/// error says so.
pub fn set_fifo(tid: i32, priority: i32) -> Result<()> {
    if !(1..=99).contains(&priority) {
        return Err(Error::new(
            ErrorKind::Sys,
            format!("SCHED_FIFO priority {priority} is out of range 1..=99"),
        ));
    }
    let param = libc::sched_param {
        sched_priority: priority,
    };
    // SAFETY: `param` is a valid sched_param that outlives the call; the kernel only reads it.
    let rc = unsafe { libc::sched_setscheduler(tid, libc::SCHED_FIFO, &param) };
    if rc < 0 {
        let e = std::io::Error::last_os_error();
        let hint = if e.raw_os_error() == Some(libc::EPERM) {
            " (needs CAP_SYS_NICE)"
        } else {
            ""
        };
        return Err(Error::new(
            ErrorKind::Sys,
            format!("cannot give thread {tid} SCHED_FIFO priority {priority}: {e}{hint}"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod fifo_tests {
    use super::*;

    #[test]
    fn test_fifo_out_of_range_is_refused() {
        assert!(set_fifo(0, 0).is_err());
        assert!(set_fifo(0, 100).is_err());
        assert!(current_tid() > 0);
    }
}
