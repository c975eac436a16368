//! `corecap request --sensor ...`: one request to many daemons at once.
//!
//! A query goes to every sensor at the same time, each on a thread of its own that reads
//! its answer (pcapng, chunked) into a bounded channel as fast as the sensor sends it. The
//! calling thread merges the answers into one pcapng in timestamp order, each sensor's
//! interfaces named `SENSOR:IF`, and then reports per sensor: packets, bytes, time and
//! error. A sensor that fails (refused, unreachable, an error status, an answer cut short
//! or silent for `--timeout`) makes the exit non-zero and is named, unless `--partial`
//! accepts what the others sent. `list` and `show` ask every sensor and answer per sensor.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::io::{self, Read, Write};
use std::path::Path;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use corecap_manager::api::CaptureView;
use corecap_manager::http;
use corecap_wire::{CaptureReader, Epb, InterfaceDesc, PcapngWriter};
use serde::Serialize;

use super::client::{connect, error_message, is_timeout, refused, timed_out};
use crate::config::Sensor;

/// Bytes a sensor's reader thread hands over at once.
const CHUNK: usize = 256 << 10;
/// Chunks a sensor may have waiting for the merge (16 MiB), so a fast sensor runs ahead
/// of a slow one without holding its whole answer in memory.
const DEPTH: usize = 64;

/// What a sensor's reader thread sends.
enum Msg {
    Data(Vec<u8>),
    /// The answer ended, with what the sensor told of it; or cut, with why.
    End(std::result::Result<Told, String>),
}

/// What a sensor told of its answer (its query's trailer).
#[derive(Debug, Default)]
struct Told {
    /// Its notes, one line each.
    notes: Vec<String>,
    /// Why it is not whole, when it is not.
    partial: Option<String>,
    /// Which part of the window it has on record, and why not the rest.
    reach: Option<serde_json::Value>,
}

/// Writes a sensor's body into its channel in chunks.
struct ChanWriter {
    tx: SyncSender<Msg>,
    buf: Vec<u8>,
}

impl ChanWriter {
    fn send(&mut self) -> io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let full = std::mem::replace(&mut self.buf, Vec::with_capacity(CHUNK));
        self.tx
            .send(Msg::Data(full))
            .map_err(|_| io::Error::new(io::ErrorKind::BrokenPipe, "the merge stopped"))
    }
}

impl Write for ChanWriter {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        self.buf.extend_from_slice(b);
        if self.buf.len() >= CHUNK {
            self.send()?;
        }
        Ok(b.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.send()
    }
}

/// Reads a sensor's body from its channel; an answer that ended badly is a read error, so
/// the pcapng reader stops there.
struct ChanReader {
    rx: Receiver<Msg>,
    cur: Vec<u8>,
    at: usize,
    /// Why the answer ended badly, once known.
    failed: Arc<Mutex<Option<String>>>,
    /// What the sensor told of its answer, once it ended whole.
    told: Arc<Mutex<Told>>,
}

impl Read for ChanReader {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        while self.at == self.cur.len() {
            match self.rx.recv() {
                Ok(Msg::Data(d)) => (self.cur, self.at) = (d, 0),
                Ok(Msg::End(Ok(told))) => {
                    *self.told.lock().unwrap_or_else(|p| p.into_inner()) = told;
                    return Ok(0);
                }
                Ok(Msg::End(Err(e))) => {
                    *self.failed.lock().unwrap_or_else(|p| p.into_inner()) = Some(e.clone());
                    return Err(io::Error::other(e));
                }
                Err(_) => return Err(io::Error::other("the sensor's reader ended")),
            }
        }
        let n = out.len().min(self.cur.len() - self.at);
        out[..n].copy_from_slice(&self.cur[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

/// What one sensor gave.
#[derive(Debug, Default, Serialize)]
struct SensorReport {
    sensor: String,
    packets: u64,
    bytes: u64,
    seconds: f64,
    error: Option<String>,
    /// Why the sensor's answer is not whole though it came to its end.
    partial: Option<String>,
    /// The sensor's notes on its answer.
    notes: Vec<String>,
    /// Which part of the window the sensor has on record, and why not the rest.
    #[serde(skip_serializing_if = "Option::is_none")]
    reach: Option<serde_json::Value>,
    /// Packets that came earlier in time than the sensor's packet before them: the merge
    /// checks each sensor's order and says so, instead of trusting it.
    out_of_order: u64,
}

/// Runs one sensor's query on a thread of its own: connects, sends, and copies the answer
/// into the channel; the last message says how it ended.
fn ask(s: &Sensor, body: Arc<Vec<u8>>, timeout: Duration, tx: SyncSender<Msg>) {
    let endpoint = s.endpoint.clone();
    let _ = std::thread::Builder::new()
        .name("corecap-sensor".into())
        .spawn(move || {
            let mut w = ChanWriter {
                tx: tx.clone(),
                buf: Vec::with_capacity(CHUNK),
            };
            let end = (|| -> Result<Told> {
                let (c, token) = connect(&endpoint, timeout)?;
                let got = http::call_streaming(c, "POST", "/queries", token, Some(&body), &mut w)
                    .map_err(refused)?;
                if got.status != 200 {
                    bail!("{} (HTTP {})", error_message(&got.error), got.status);
                }
                w.flush()?;
                Ok(Told {
                    notes: got.notes(),
                    partial: got.partial(),
                    reach: got.query.as_ref().and_then(|q| q.get("reach").cloned()),
                })
            })();
            // The sensor's line names it: the error says what happened.
            let end = end.map_err(|e| {
                if is_timeout(&e) {
                    timed_out(timeout)
                } else {
                    format!("{e:#}")
                }
            });
            let _ = tx.send(Msg::End(end));
        });
}

/// One sensor's answer being merged: its reader, the packet at its head and where its
/// interfaces went in the output.
struct Feed {
    reader: Option<CaptureReader<ChanReader>>,
    /// The head packet: time, interface and length on the wire; its bytes are in `data`.
    head: Option<(u64, u32, u32)>,
    /// The head packet's captured bytes (one buffer, reused).
    data: Vec<u8>,
    ifaces: HashMap<u32, u32>,
    report: SensorReport,
    failed: Arc<Mutex<Option<String>>>,
    told: Arc<Mutex<Told>>,
    /// Time of the sensor's packet before the head.
    last_ts: u64,
    started: Instant,
    /// The sensor's next packets, read ahead: the head is the earliest of them, so a
    /// sensor whose answer steps back by fewer than [`REORDER`] packets is put in order.
    ahead: BinaryHeap<Reverse<Ahead>>,
    /// Packets read so far (the order of equal times), and the latest time among them.
    read: u64,
    latest: u64,
    /// Packets that came after a later one and were put back in order.
    reordered: u64,
    /// How the sensor's answer ended, once it has (None: whole; Some: the error).
    ended: Option<Option<String>>,
}

/// How many packets of a sensor's answer the merge reads ahead to put it in time order.
const REORDER: usize = 4096;

/// A packet read ahead: ordered by time, then by arrival.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Ahead {
    ts_ns: u64,
    seq: u64,
    if_id: u32,
    orig_len: u32,
    data: Vec<u8>,
}

impl Feed {
    /// Puts the next packet in time order into `head`: the earliest of those read ahead.
    /// One that is still earlier than a packet already given (it came more than
    /// [`REORDER`] packets late) is counted out of order. The feed ends once the answer has
    /// and every packet read ahead is given, with the answer's error if it had one.
    fn advance(&mut self) {
        self.head = None;
        self.fill();
        let Some(Reverse(p)) = self.ahead.pop() else {
            if let Some(e) = self.ended.take() {
                self.finish(e);
            }
            return;
        };
        if p.ts_ns < self.last_ts {
            self.report.out_of_order += 1;
        }
        self.last_ts = self.last_ts.max(p.ts_ns);
        self.head = Some((p.ts_ns, p.if_id, p.orig_len));
        self.data = p.data;
    }

    /// Reads ahead until [`REORDER`] packets wait or the answer has ended.
    fn fill(&mut self) {
        while self.ahead.len() < REORDER && self.ended.is_none() {
            let Some(r) = self.reader.as_mut() else {
                self.ended = Some(None);
                return;
            };
            match r.next_packet() {
                Ok(Some(p)) => {
                    if p.ts_ns < self.latest {
                        self.reordered += 1;
                    }
                    self.latest = self.latest.max(p.ts_ns);
                    self.read += 1;
                    self.ahead.push(Reverse(Ahead {
                        ts_ns: p.ts_ns,
                        seq: self.read,
                        if_id: p.if_id,
                        orig_len: p.orig_len,
                        data: p.data.to_vec(),
                    }));
                }
                Ok(None) => self.ended = Some(None),
                Err(e) => self.ended = Some(Some(e.to_string())),
            }
        }
    }

    /// Ends the feed: the answer's own error if the channel carried one, else `e`.
    fn finish(&mut self, e: Option<String>) {
        self.reader = None;
        self.report.seconds = self.started.elapsed().as_secs_f64();
        let carried = self.failed.lock().unwrap_or_else(|p| p.into_inner()).take();
        self.report.error = carried.or(e);
        let told = std::mem::take(&mut *self.told.lock().unwrap_or_else(|p| p.into_inner()));
        self.report.notes = told.notes;
        self.report.partial = told.partial;
        self.report.reach = told.reach;
        if self.reordered > 0 {
            self.report.notes.push(format!(
                "{} packets came after later ones and were put back in time order",
                self.reordered
            ));
        }
        if self.report.out_of_order > 0 {
            let order = format!("{} packets out of time order", self.report.out_of_order);
            self.report.partial = Some(match self.report.partial.take() {
                Some(p) => format!("{p}, {order}"),
                None => format!("partial: {order}"),
            });
        }
    }

    /// The output interface of this sensor's interface `if_id`, added on first use.
    fn interface<W: Write>(&mut self, if_id: u32, w: &mut PcapngWriter<W>) -> io::Result<u32> {
        if let Some(o) = self.ifaces.get(&if_id) {
            return Ok(*o);
        }
        let d = self
            .reader
            .as_ref()
            .and_then(|r| r.interfaces().get(if_id as usize).cloned())
            .ok_or_else(|| io::Error::other(format!("interface {if_id} not described")))?;
        let name = format!(
            "{}:{}",
            self.report.sensor,
            d.name.as_deref().unwrap_or("if")
        );
        let o = w.add_interface(&InterfaceDesc {
            name,
            description: d.description,
            linktype: d.linktype,
            snaplen: d.snaplen,
        })?;
        self.ifaces.insert(if_id, o);
        Ok(o)
    }
}

/// `request query --sensor ...`: every sensor's answer, merged in time order into `out`.
/// The file is made first, before any sensor is asked, and never over a file (unless
/// `force`); when the query fails (a sensor failed without `--partial`), the file this run
/// made goes, so that no short answer stays under its name and the command can be given
/// again.
pub(crate) fn query(
    sensors: &[Sensor],
    body: &serde_json::Value,
    (out, force, print): (Option<&Path>, bool, &crate::config::Printing),
    partial: bool,
    timeout: Duration,
    json: bool,
) -> Result<i32> {
    let Some(out) = out else {
        let printed = super::query::into_printer(print, |file| {
            answer(sensors, body, (None, Some(file)), partial, timeout, json)
        })?;
        return Ok(printed.unwrap_or(0));
    };
    super::query::into_new_file(out, force, |file| {
        answer(sensors, body, (Some(out), file), partial, timeout, json)
    })
}

/// [`query`] once its file is made (`None`: standard output).
fn answer(
    sensors: &[Sensor],
    body: &serde_json::Value,
    (out, file): (Option<&Path>, Option<std::fs::File>),
    partial: bool,
    timeout: Duration,
    json: bool,
) -> Result<i32> {
    let to_stdout = file.is_none() || out.is_none();
    let body = Arc::new(serde_json::to_vec(body)?);
    let t0 = Instant::now();
    // Every sensor is asked before any answer is waited for.
    let answers: Vec<Receiver<Msg>> = sensors
        .iter()
        .map(|s| {
            let (tx, rx) = sync_channel(DEPTH);
            ask(s, body.clone(), timeout, tx);
            rx
        })
        .collect();
    let mut feeds: Vec<Feed> = sensors
        .iter()
        .zip(answers)
        .map(|(s, rx)| Feed::of(s, rx, t0))
        .collect();
    let sink: Box<dyn Write> = match file {
        None => Box::new(io::stdout().lock()),
        Some(f) => Box::new(f),
    };
    let mut w = PcapngWriter::new(io::BufWriter::with_capacity(1 << 20, sink), "corecap", &[])?;
    merge(&mut feeds, &mut w)?;
    w.ensure_interface("corecap")?;
    w.into_inner().flush()?;
    let reports: Vec<SensorReport> = feeds.into_iter().map(|f| f.report).collect();
    report(&reports, t0.elapsed(), json)?;
    let failed: Vec<&str> = reports
        .iter()
        .filter(|r| r.error.is_some())
        .map(|r| r.sensor.as_str())
        .collect();
    let hint = if partial {
        ""
    } else {
        " (--partial accepts the others' answers)"
    };
    enough_answered(&failed, reports.len(), partial, hint)?;
    if let (false, Some(out)) = (to_stdout, out) {
        let packets: u64 = reports.iter().map(|r| r.packets).sum();
        eprintln!("wrote {packets} packets of pcapng to {}", out.display());
    }
    Ok(0)
}

/// Whether a fleet's answer stands: every sensor answered, or (`--partial`) at least one
/// did. Otherwise an error that names the sensors that failed, followed by `hint`.
pub(crate) fn enough_answered<S: std::borrow::Borrow<str>>(
    failed: &[S],
    sensors: usize,
    partial: bool,
    hint: &str,
) -> Result<()> {
    if failed.is_empty() || (partial && failed.len() < sensors) {
        return Ok(());
    }
    bail!(
        "{} of {} sensors failed: {}{hint}",
        failed.len(),
        sensors,
        failed.join(", ")
    )
}

impl Feed {
    /// The feed of `sensor`'s answer, coming in over `rx` since `t0`, its reader open.
    fn of(sensor: &Sensor, rx: Receiver<Msg>, t0: Instant) -> Feed {
        let failed = Arc::new(Mutex::new(None));
        let told = Arc::new(Mutex::new(Told::default()));
        let feed = Feed {
            reader: None,
            head: None,
            data: Vec::new(),
            ifaces: HashMap::new(),
            report: SensorReport {
                sensor: sensor.name.clone(),
                ..SensorReport::default()
            },
            failed: failed.clone(),
            told: told.clone(),
            last_ts: 0,
            started: t0,
            ahead: BinaryHeap::new(),
            read: 0,
            latest: 0,
            reordered: 0,
            ended: None,
        };
        feed.with_reader(ChanReader {
            rx,
            cur: Vec::new(),
            at: 0,
            failed,
            told,
        })
    }

    /// Opens the feed's pcapng reader (which waits for the sensor's section header) and
    /// reads its first packet.
    fn with_reader(mut self, r: ChanReader) -> Feed {
        match CaptureReader::new(r) {
            Ok(r) => {
                self.reader = Some(r);
                self.advance();
            }
            Err(e) => self.finish(Some(e.to_string())),
        }
        self
    }
}

/// Writes the feeds' packets in timestamp order (ties by sensor order).
fn merge<W: Write>(feeds: &mut [Feed], w: &mut PcapngWriter<W>) -> Result<()> {
    let mut heap: BinaryHeap<Reverse<(u64, usize)>> = feeds
        .iter()
        .enumerate()
        .filter_map(|(i, f)| f.head.as_ref().map(|h| Reverse((h.0, i))))
        .collect();
    while let Some(Reverse((_, i))) = heap.pop() {
        let f = &mut feeds[i];
        let Some((ts_ns, if_id, orig_len)) = f.head.take() else {
            continue;
        };
        let if_id = match f.interface(if_id, w) {
            Ok(o) => o,
            Err(e) => {
                f.finish(Some(e.to_string()));
                continue;
            }
        };
        w.write_epb(&Epb {
            if_id,
            ts_ns,
            data: &f.data,
            orig_len,
            ..Epb::default()
        })?;
        f.report.packets += 1;
        f.report.bytes += f.data.len() as u64;
        f.advance();
        if let Some(h) = &f.head {
            heap.push(Reverse((h.0, i)));
        }
    }
    Ok(())
}

/// The per-sensor lines (or JSON) on stderr.
fn report(reports: &[SensorReport], total: Duration, json: bool) -> Result<()> {
    if json {
        eprintln!(
            "{}",
            serde_json::to_string(&serde_json::json!({
                "seconds": total.as_secs_f64(),
                "sensors": reports,
            }))?
        );
        return Ok(());
    }
    eprintln!(
        "{:<20} {:>10} {:>12} {:>8}  answer",
        "sensor", "packets", "bytes", "seconds"
    );
    for r in reports {
        eprintln!(
            "{:<20} {:>10} {:>12} {:>8.3}  {}",
            r.sensor,
            r.packets,
            r.bytes,
            r.seconds,
            r.error
                .as_deref()
                .or(r.partial.as_deref())
                .unwrap_or("whole")
        );
    }
    for r in reports {
        for n in &r.notes {
            eprintln!("{}: {n}", r.sensor);
        }
    }
    Ok(())
}

/// The same GET to every sensor at once, each on a thread of its own: per sensor, its name
/// and what `answer` makes of the status and body (a timeout says "timed out after N s",
/// to be printed after the sensor's name).
pub(crate) fn get_each<T: Send>(
    sensors: &[Sensor],
    path: &str,
    timeout: Duration,
    answer: impl Fn(u16, Vec<u8>) -> Result<T> + Sync,
) -> Vec<(String, Result<T>)> {
    std::thread::scope(|sc| {
        let jobs: Vec<_> = sensors
            .iter()
            .map(|s| {
                let answer = &answer;
                sc.spawn(move || {
                    let r = connect(&s.endpoint, timeout).and_then(|(c, token)| {
                        let (status, body) =
                            http::call(c, "GET", path, token, None).map_err(refused)?;
                        answer(status, body)
                    });
                    let r = r.map_err(|e| {
                        if is_timeout(&e) {
                            anyhow::anyhow!(timed_out(timeout))
                        } else {
                            e
                        }
                    });
                    (s.name.clone(), r)
                })
            })
            .collect();
        jobs.into_iter()
            .map(|j| {
                j.join()
                    .unwrap_or_else(|_| (String::new(), Err(anyhow::anyhow!("panicked"))))
            })
            .collect()
    })
}

/// `request list|show --sensor ...`: the same GET to every sensor at once, each answer
/// under its sensor's name.
pub(crate) fn get(
    sensors: &[Sensor],
    path: &str,
    partial: bool,
    timeout: Duration,
    json: bool,
) -> Result<i32> {
    let answers = get_each(sensors, path, timeout, |status, body| {
        // An id is a sensor's own: the others do not have it.
        if status == 404 && path != "/captures" {
            return Ok(None);
        }
        if status >= 300 {
            bail!("{} (HTTP {status})", error_message(&body));
        }
        Ok(Some(body))
    });
    let mut failed = Vec::new();
    let mut all = serde_json::Map::new();
    for (name, r) in answers {
        match r {
            Ok(None) => {}
            Ok(Some(b)) => {
                let v: serde_json::Value = serde_json::from_slice(&b)
                    .with_context(|| format!("{name}: the answer is not JSON"))?;
                if !json {
                    print_views(&name, &v)?;
                }
                all.insert(name, v);
            }
            Err(e) => {
                eprintln!("corecap: {name}: {e:#}");
                failed.push(name);
            }
        }
    }
    if json {
        println!("{}", serde_json::to_string_pretty(&all)?);
    }
    enough_answered(&failed, sensors.len(), partial, "")?;
    Ok(0)
}

/// A sensor's captures (a list, or one), one line each under the sensor's name.
fn print_views(name: &str, v: &serde_json::Value) -> Result<()> {
    let views: Vec<CaptureView> = match v {
        serde_json::Value::Array(_) => serde_json::from_value(v.clone())?,
        _ => vec![serde_json::from_value(v.clone())?],
    };
    for c in views {
        println!(
            "{:<16} {:<6} {:<9} {:<7} {:<12} {:>10}  {}",
            name,
            c.id,
            c.state.name(),
            c.mode.name(),
            c.interface,
            c.packets,
            c.path.as_deref().unwrap_or("-"),
        );
    }
    Ok(())
}
