//! A member of a consumer group, running on a stage core: it drains one pipe per capture
//! worker and runs its app on every packet, until every worker has ended.

use std::path::PathBuf;
use std::time::Duration;

use crate::sink::file::FileSink;
use crate::stage::pipe::PipeRx;

/// What a member ended with.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct MemberOutcome {
    /// Packets the app took.
    pub delivered: u64,
    /// Wire bytes of those packets.
    pub bytes: u64,
    /// Packets the app could not take (write errors, and packets cut from a file).
    pub app_drops: u64,
    /// Files written.
    pub files: Vec<PathBuf>,
    /// A file error, if any.
    pub error: Option<String>,
    /// Flow accounting, when it ran.
    pub flows: Option<crate::stage::flows::FlowStats>,
}

/// Runs the member's apps on one packet.
fn deliver(
    p: &crate::packet::Packet<'_>,
    flows: &mut Option<crate::stage::flows::FlowTable>,
    sink: &mut Option<FileSink>,
    o: &mut MemberOutcome,
) {
    if let Some(t) = flows {
        t.packet(p);
    }
    if sink.as_mut().is_none_or(|s| s.write(p).is_ok()) {
        o.delivered += 1;
        o.bytes += u64::from(p.wire_len);
    } else {
        o.app_drops += 1;
    }
}

/// Runs a member to its end.
pub fn run(
    cpu: Option<u32>,
    mut rx: Vec<PipeRx>,
    mut sink: Option<FileSink>,
    mut flows: Option<crate::stage::flows::FlowTable>,
) -> MemberOutcome {
    if let Some(c) = cpu {
        let _ = corecap_linux::affinity::pin_current_thread(c);
    }
    let _ = corecap_linux::privilege::drop_thread_capabilities();
    let mut o = MemberOutcome::default();
    let mut idle = 0u32;
    loop {
        let mut got = false;
        for r in rx.iter_mut() {
            let n = r.drain(|p, _hash| deliver(p, &mut flows, &mut sink, &mut o));
            got |= n > 0;
        }
        if got {
            idle = 0;
            continue;
        }
        if rx.iter().all(|r| r.closed()) {
            // The last producers may have pushed between our drain and their exit.
            let mut rest = 0;
            for r in rx.iter_mut() {
                rest += r.drain(|p, _| deliver(p, &mut flows, &mut sink, &mut o));
            }
            if rest == 0 {
                break;
            }
            continue;
        }
        // Back off while idle: spin briefly, then sleep, so an idle stage costs nothing.
        idle += 1;
        if idle < 64 {
            std::hint::spin_loop();
        } else {
            std::thread::sleep(Duration::from_micros(200));
        }
    }
    if let Some(t) = flows {
        match t.finish() {
            Ok(st) => o.flows = Some(st),
            Err(e) => o.error = Some(format!("writing flow records: {e}")),
        }
    }
    if let Some(s) = sink {
        let (files, lost, err) = s.finish(&[]);
        o.files = files;
        o.delivered -= lost.min(o.delivered);
        o.app_drops += lost;
        if let Some(e) = err {
            o.error = Some(format!("closing the output file: {e}"));
        }
    }
    o
}
