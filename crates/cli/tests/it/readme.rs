//! Issue 39: the README's commands, run as they are written, on a lab. The README is read
//! when the test runs; each command line of its `sh` blocks (`\` continuations joined) is
//! run on its lab equivalent or skipped with the place that tests it, and a line that
//! matches no rule fails the test, so a new README command cannot go untested.
//!
//! What stands for what on the lab:
//!
//! | README                          | on the lab                                  | why                                       |
//! |---------------------------------|---------------------------------------------|-------------------------------------------|
//! | `-i eth0`                       | `-i cap0`, and `--netns NS` for capture and serve | the lab's veth end                  |
//! | the link's traffic              | rounds of [`ROUND`] packets, `gen --netns NS -i gen0`, while a command runs | |
//! | `host 10.0.0.7`, `192.0.2.7`    | `host 10.1.0.7`                             | gen sends from 10.0.0.1 to 10.1.0.N only  |
//! | `udp port 53`                   | `udp port 5002`                             | gen's destination ports are 5001 and 5002 |
//! | `tcp port 443`                  | `tcp port 5001` (`gen --proto tcp`)         | the same                                  |
//! | `/data`, `/var/lib/corecap/...` | the same path under a scratch folder        | nothing is written outside it             |
//! | `-w /data/rec.pcapng`           | its folder made first                       | the README's disk is mounted there        |
//! | `out.pcapng`, `incident.pcapng` | in a folder per `sh` block (the working directory) | two blocks write `incident.pcapng` |
//! | (serve's, request's defaults)   | `--socket`, and serve's `--spool`, under the scratch folder | `/run/corecap`, `/var/spool/corecap` are the host's |
//! | `'2026-11-23 10:02:00'`, `'2026-11-23 11:02'` | the same form and zone (`--tz`, else the system's) around the packets recorded (1) | the README's day holds no packets |
//! | `request show c1`               | as written: `c1` must be what `request start` printed | a fresh daemon's first capture  |
//! | `https://sensor1:7443`, `sensor2` | as written, in the lab: two TLS daemons (2) | |
//! | `ca.pem`, `client.pem`, `client.key` | made by `corecap certs DIR --server-name sensor1 --server-name sensor2` | |
//!
//! (1) `--from`: the first packet's second (or minute); `--to`: a second (or minute)
//! after the last one's. The query must show each back in UTC.
//!
//! (2) `serve --record` daemons on 127.0.0.1:7443 and 127.0.0.2:7443 in the lab; there
//! `sensor1` and `sensor2` are those addresses, by `/etc/netns/NS/hosts` (which `ip netns
//! exec` puts on `/etc/hosts`), and the request runs in the lab by `ip netns exec`.
//!
//! Commands that run until stopped (`serve`, `capture` without `-c` or `-a`) get SIGTERM
//! after the traffic and must exit 0: a capture's summary says its accounting is exact,
//! and serve's says its base capture took every packet sent since it started, all of them
//! in its recording, none dropped.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::util::{
    self as util, bin, packets, recording_daemon_args, tcpdump_packets, Background, Daemon, Lab,
    Scratch,
};

/// README filters the generator cannot send, and the lab's filter for each.
const FILTERS: [(&str, &str); 4] = [
    ("tcp port 443", "tcp port 5001"),
    ("udp port 53", "udp port 5002"),
    ("10.0.0.7", "10.1.0.7"),
    ("192.0.2.7", "10.1.0.7"),
];

/// Packets of one round of traffic: `gen --flows 8` sends UDP, then TCP, `ROUND / 2` each,
/// from 10.0.0.1:1024 to 10.1.0.0..7, port 5001 for even flows and 5002 for odd ones.
const ROUND: u64 = 8000;

/// Packets of a round that each lab filter matches (`""`: all).
const PER_ROUND: [(&str, u64); 4] = [
    ("", ROUND),
    ("host 10.1.0.7", ROUND / 8),
    ("udp port 5002", ROUND / 4),
    ("tcp port 5001", ROUND / 4),
];

/// README lines this test does not run, and where they are tested.
const SKIPS: [(&str, &str); 8] = [
    (
        "corecap flows /data",
        "sessions::issue35_flows_equal_tshark_conversations and \
         sessions::issue35_connections_joined_across_rotated_files_equal_tshark list the \
         connections of real captures and of a lab recording (the lab's traffic has no names)",
    ),
    (
        "corecap query /data --community-id",
        "sessions::issue35_query_by_community_id_equals_tshark_conversation queries every \
         connection of five real captures by its Community ID",
    ),
    (
        "corecap query /data --dns",
        "sessions::issue35_names_select_connections_and_their_packets queries by DNS name, SNI \
         and HTTP Host on captures that carry them",
    ),
    (
        "cargo run --release -p corecap -- demo",
        "newcomer::issue23_demo_records_queries_and_cleans_up runs `corecap demo` on a lab of its own",
    ),
    (
        "sudo bash .ci/run",
        "it is CI: .ci/run runs this test among the others, then builds and installs the package",
    ),
    (
        "cargo test --workspace -- --include-ignored",
        "this test is one of them (.ci/run runs that line)",
    ),
    (
        "cargo install --locked --path crates/cli",
        "it writes ~/.cargo/bin; cargo test and clippy --locked build the same crate",
    ),
    (
        "crates/cli/debian/build",
        ".ci/run builds the package with it and installs it (binary, man pages, unit)",
    ),
];

/// One command line of an `sh` block: the block's number and the line as written.
#[derive(Debug)]
struct Line {
    block: usize,
    text: String,
}

/// The command lines of `readme`'s `sh` blocks, `\` continuations joined, comment lines
/// left out.
fn sh_lines(readme: &str) -> Vec<Line> {
    let (mut out, mut block, mut in_sh, mut pending) = (Vec::new(), 0, false, String::new());
    for line in readme.lines() {
        if line.starts_with("```") {
            in_sh = line == "```sh";
            block += usize::from(in_sh);
            continue;
        }
        let joined = format!("{pending}{}", line.trim_start());
        if !in_sh || joined.is_empty() || joined.starts_with('#') {
            continue;
        }
        match joined.strip_suffix('\\') {
            Some(head) => pending = head.to_owned(),
            None => {
                pending.clear();
                out.push(Line {
                    block,
                    text: joined,
                });
            }
        }
    }
    out
}

/// The words of each command of a pipeline, as sh splits these lines: quotes, backslash
/// escapes, `|` between commands, and a `#` that begins a word comments out the rest.
fn pipeline(line: &str) -> Vec<Vec<String>> {
    let (mut cmds, mut cmd, mut word) = (Vec::new(), Vec::new(), None::<String>);
    let (mut quote, mut chars) = (None, line.chars());
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => word.get_or_insert_default().push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                word.get_or_insert_default();
            }
            (None, '\\') => word.get_or_insert_default().extend(chars.next()),
            (None, '#') if word.is_none() => break,
            (None, '|') => {
                cmd.extend(word.take());
                cmds.push(std::mem::take(&mut cmd));
            }
            (None, c) if c.is_whitespace() => cmd.extend(word.take()),
            (None, c) => word.get_or_insert_default().push(c),
        }
    }
    cmd.extend(word);
    if !cmd.is_empty() {
        cmds.push(cmd);
    }
    cmds
}

/// What a README line is run as.
#[derive(Debug, Clone, Copy)]
enum Step {
    /// Not run here; the reason names where it is tested.
    Skip(&'static str),
    /// `capture -D`, as written.
    List,
    /// `capture -i IF ...`, maybe piped to another tool.
    Capture,
    /// `query ...` over the captures' files.
    Query,
    /// `serve ...`: the daemon the request lines talk to.
    Serve,
    /// `request start ...`.
    Start,
    /// `request show ID`.
    Show,
    /// `request query ...`.
    Ask,
    /// `request metrics`.
    Metrics,
    /// `request --sensor ... query ...`: several TLS daemons at once.
    Fleet,
}

/// The rule for a line; None when none fits.
fn step(line: &str, cmds: &[Vec<String>]) -> Option<Step> {
    if let Some((_, why)) = SKIPS.iter().find(|(p, _)| line.starts_with(p)) {
        return Some(Step::Skip(why));
    }
    let w = cmds.first()?;
    if w.first().map(String::as_str) != Some("corecap") || w.len() < 3 {
        return None;
    }
    let piped = cmds.len() > 1;
    Some(match (w[1].as_str(), w[2].as_str()) {
        ("capture", "-D") if w.len() == 3 && !piped => Step::List,
        ("capture", _) if has(w, "-i") => Step::Capture,
        _ if piped => return None,
        ("query", _) => Step::Query,
        ("serve", _) => Step::Serve,
        ("request", _) if has(w, "--sensor") => Step::Fleet,
        ("request", "start") => Step::Start,
        ("request", "show") if w.len() == 4 => Step::Show,
        ("request", "query") => Step::Ask,
        ("request", "metrics") if w.len() == 3 => Step::Metrics,
        _ => return None,
    })
}

fn has(w: &[String], flag: &str) -> bool {
    w.iter().any(|x| x == flag)
}

/// The word after `flag`.
fn value<'a>(w: &'a [String], flag: &str) -> Option<&'a str> {
    let i = w.iter().position(|x| x == flag)?;
    w.get(i + 1).map(String::as_str)
}

/// The words after the subcommand `sub` that are neither flags nor their values: the
/// filter, and a query's paths.
fn operands(w: &[String], sub: &str) -> Vec<String> {
    const VALUED: [&str; 8] = ["--from", "--to", "--tz", "--since", "-w", "-r", "-i", "-c"];
    let mut out = Vec::new();
    let mut i = 1 + w.iter().position(|x| x == sub).expect("subcommand");
    while i < w.len() {
        if VALUED.contains(&w[i].as_str()) {
            i += 1;
        } else if !w[i].starts_with('-') {
            out.push(w[i].clone());
        }
        i += 1;
    }
    out
}

/// Packets of a round that `filter` matches.
fn per_round(filter: &str) -> u64 {
    PER_ROUND
        .iter()
        .find(|(f, _)| *f == filter)
        .unwrap_or_else(|| panic!("no per-round count for the filter {filter:?}"))
        .1
}

/// `cmd`'s output, which must be a success.
fn ok(mut cmd: Command) -> Output {
    let o = cmd.output().unwrap_or_else(|e| panic!("run {cmd:?}: {e}"));
    assert!(
        o.status.success(),
        "{cmd:?} failed ({}): {}{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    o
}

/// The number just after `prefix` in `text`.
fn number_after(text: &str, prefix: &str) -> u64 {
    let at = text
        .find(prefix)
        .unwrap_or_else(|| panic!("no {prefix:?} in:\n{text}"))
        + prefix.len();
    let digits: String = text[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits
        .parse()
        .unwrap_or_else(|_| panic!("no number after {prefix:?} in:\n{text}"))
}

/// The line of `text` that holds `needle`, without its leading blanks.
fn line_with<'a>(text: &'a str, needle: &str) -> &'a str {
    text.lines()
        .find(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("no {needle:?} in:\n{text}"))
        .trim_start()
}

/// The packets a capture's summary says it delivered; its accounting must be exact.
fn delivered(err: &str) -> u64 {
    let line = line_with(err, "packets delivered of");
    assert!(line.ends_with("accounting exact"), "{line}");
    number_after(line, "")
}

/// Words as a shell line (quoted where they hold a blank).
fn shown(w: &[String]) -> String {
    let q: Vec<String> = w
        .iter()
        .map(|x| match x.contains(' ') {
            true => format!("'{x}'"),
            false => x.clone(),
        })
        .collect();
    q.join(" ")
}

/// Whether `w` is a time of day as the README writes one: `YYYY-MM-DD HH:MM[:SS]`.
fn is_date(w: &str) -> bool {
    let shape = "dddd-dd-dd dd:dd:dd";
    (w.len() == 16 || w.len() == 19)
        && w.chars().zip(shape.chars()).all(|(c, s)| match s {
            'd' => c.is_ascii_digit(),
            s => c == s,
        })
}

/// Unix second `secs` as `YYYY-MM-DD HH:MM[:SS]` in `tz` (the system's zone without), by
/// `date`.
fn local_time(secs: u64, tz: Option<&str>, seconds: bool) -> String {
    let fmt = if seconds {
        "+%Y-%m-%d %H:%M:%S"
    } else {
        "+%Y-%m-%d %H:%M"
    };
    date(secs, tz, fmt)
}

/// Unix second `secs` formatted by `date` in `tz` (the system's zone without).
fn date(secs: u64, tz: Option<&str>, fmt: &str) -> String {
    let mut c = Command::new("date");
    if let Some(tz) = tz {
        c.env("TZ", tz);
    }
    c.args(["-d", &format!("@{secs}"), fmt]);
    String::from_utf8_lossy(&ok(c).stdout).trim().to_owned()
}

/// The capture files `p` names: itself, or a folder's (not its hidden files).
fn captures_in(p: &Path) -> Vec<PathBuf> {
    if !p.is_dir() {
        return vec![p.to_owned()];
    }
    let mut v: Vec<PathBuf> = std::fs::read_dir(p)
        .expect("read folder")
        .map(|e| e.expect("entry").path())
        .filter(|f| {
            let name = f.file_name().and_then(|n| n.to_str()).unwrap_or(".");
            !name.starts_with('.') && (name.ends_with(".pcapng") || name.ends_with(".pcap"))
        })
        .collect();
    v.sort();
    v
}

/// Every line of Prometheus text is a comment or `NAME{LABELS} VALUE`, of corecap's.
fn assert_prometheus(text: &str) {
    assert!(text.contains("# TYPE corecap_"), "{text}");
    for l in text
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
    {
        let (name, v) = l.rsplit_once(' ').unwrap_or_else(|| panic!("{l}"));
        assert!(name.starts_with("corecap_"), "{l}");
        assert!(v.parse::<f64>().is_ok(), "{l}");
    }
}

/// `/etc/netns/NS/hosts`, which `ip netns exec NS` puts on `/etc/hosts`; removed on drop.
struct NetnsHosts(PathBuf);

impl NetnsHosts {
    fn new(netns: &str, hosts: &[(String, String)]) -> Self {
        let dir = Path::new("/etc/netns").join(netns);
        std::fs::create_dir_all(&dir).expect("make /etc/netns/NS");
        let text: String = hosts.iter().map(|(a, n)| format!("{a} {n}\n")).collect();
        std::fs::write(dir.join("hosts"), text).expect("write hosts");
        Self(dir)
    }
}

impl Drop for NetnsHosts {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
        // /etc/netns too, when nothing else is in it.
        let _ = std::fs::remove_dir(Path::new("/etc/netns"));
    }
}

/// The README's daemon: `serve` as written, on the lab.
struct Served {
    bg: Background,
    socket: PathBuf,
    /// Rounds of traffic sent before it started.
    rounds_before: u64,
}

/// The walk through the README: the lab, the folders, and what earlier lines left.
struct Walk {
    /// Dropped (killed, if still running) before the lab goes.
    daemon: Option<Served>,
    lab: Lab,
    root: Scratch,
    /// Rounds of traffic sent so far.
    rounds: u64,
    last_traffic: Instant,
    /// First and last packet time (ns) of the files the captures wrote.
    span: Option<(u64, u64)>,
    /// Each file written, with its packets: no later command may change them.
    files: BTreeMap<PathBuf, u64>,
    /// The ids `request start` printed.
    ids: Vec<String>,
}

/// Runs (or skips, saying why) every command line of `readme`; panics at the first that
/// does not do what the README says, or that no rule covers.
pub(crate) fn run_all(readme: &str) {
    let lines = sh_lines(readme);
    assert!(lines.len() >= 20, "{lines:#?}");
    let mut walk = Walk {
        daemon: None,
        lab: Lab::new(1),
        root: Scratch::new("readme"),
        rounds: 0,
        last_traffic: Instant::now(),
        span: None,
        files: BTreeMap::new(),
        ids: Vec::new(),
    };
    for line in &lines {
        let cmds = pipeline(&line.text);
        let Some(step) = step(&line.text, &cmds) else {
            panic!(
                "README line `{}` matches no rule of tests/it/readme.rs: run it on the lab there, or skip it saying where it is tested",
                line.text
            );
        };
        if let Step::Skip(why) = step {
            eprintln!("README: skipped `{}`: {why}", line.text);
            continue;
        }
        let cwd = walk.root.path(&format!("block{}", line.block));
        std::fs::create_dir_all(&cwd).expect("block folder");
        eprintln!("README: `{}`", line.text);
        walk.run(step, &cmds, &cwd);
    }
    walk.stop_daemon();
}

impl Walk {
    fn run(&mut self, step: Step, cmds: &[Vec<String>], cwd: &Path) {
        let w = &cmds[0];
        match step {
            Step::Skip(_) => {}
            Step::List => self.list(w),
            Step::Capture => self.capture(cmds, cwd),
            Step::Query => self.query(w, cwd),
            Step::Serve => self.serve(w, cwd),
            Step::Start => self.start(w, cwd),
            Step::Show => self.show(w, cwd),
            Step::Ask => self.ask(w, cwd),
            Step::Metrics => self.metrics(w, cwd),
            Step::Fleet => self.fleet(w, cwd),
        }
    }

    /// `w` on the lab: `cap0` for `eth0`, the generator's filters, absolute paths under the
    /// scratch folder.
    fn on_lab(&self, w: &[String]) -> Vec<String> {
        w.iter()
            .map(|x| match x.strip_prefix('/') {
                _ if x == "eth0" => "cap0".to_owned(),
                Some(rest) => self.path(rest),
                None => FILTERS.iter().fold(x.clone(), |x, (f, t)| x.replace(f, t)),
            })
            .collect()
    }

    /// `rest` (a path without its leading `/`) under the scratch folder.
    fn path(&self, rest: &str) -> String {
        self.root.path(rest).to_str().expect("utf8").to_owned()
    }

    /// `w` on the lab, with `--netns NS` after the subcommand.
    fn in_lab(&self, w: &[String]) -> Vec<String> {
        let mut v = self.on_lab(w);
        v.splice(2..2, ["--netns".to_owned(), self.lab.netns.clone()]);
        v
    }

    /// A `request` line on the lab, talking to the README's daemon by its socket.
    fn request_words(&self, w: &[String]) -> Vec<String> {
        let d = self.daemon.as_ref().expect("a request line after serve");
        let mut v = self.on_lab(w);
        let socket = d.socket.to_str().expect("utf8").to_owned();
        v.splice(2..2, ["--socket".to_owned(), socket]);
        v
    }

    /// The command for corecap words `w` (`corecap` first), in `cwd`.
    fn command(&self, w: &[String], cwd: &Path) -> Command {
        eprintln!("  as: {}", shown(w));
        let mut c = Command::new(bin());
        c.args(&w[1..]).current_dir(cwd);
        c
    }

    /// One round of traffic on the lab (see [`ROUND`]).
    fn traffic(&mut self) {
        for proto in ["udp", "tcp"] {
            let flags = ["--flows", "8", "--rate", "50000", "--proto", proto];
            assert_eq!(self.lab.gen(ROUND / 2, &flags), ROUND / 2);
        }
        self.rounds += 1;
        self.last_traffic = Instant::now();
    }

    /// `capture -D`: interfaces numbered as tcpdump -D, each with its RX queues.
    fn list(&self, w: &[String]) {
        let o = ok(self.command(w, self.root.0.as_path()));
        let text = String::from_utf8_lossy(&o.stdout);
        assert!(text.starts_with("1. "), "{text}");
        for (i, l) in text.lines().enumerate() {
            assert!(l.starts_with(&format!("{}. ", i + 1)), "{text}");
            assert!(l.contains("RX queue"), "{text}");
        }
    }

    /// A capture on cap0 while a round of traffic passes; SIGTERM unless `-c` or `-a`
    /// ends it. Its summary, files and the next command of the pipeline must agree.
    fn capture(&mut self, cmds: &[Vec<String>], cwd: &Path) {
        let w = self.in_lab(&cmds[0]);
        if let Some(out) = value(&w, "-w").filter(|o| o.starts_with('/')) {
            let dir = Path::new(out).parent().expect("a folder");
            std::fs::create_dir_all(dir).expect("the README's disk");
        }
        let mut c = self.command(&w, cwd);
        c.stdout(if cmds.len() > 1 {
            Stdio::piped()
        } else {
            Stdio::null()
        });
        let mut bg = Background::start(c, "capturing on");
        // The next command of the pipeline, read as it writes (or the pipe would stall).
        let next = cmds.get(1).map(|p| {
            eprintln!("  | {}", p.join(" "));
            let child = Command::new(&p[0])
                .args(&p[1..])
                .stdin(Stdio::from(bg.take_stdout().expect("stdout")))
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap_or_else(|e| panic!("run {p:?} (.ci/run installs it): {e}"));
            std::thread::spawn(move || child.wait_with_output().expect("wait"))
        });
        self.traffic();
        let bounded = has(&w, "-c") || has(&w, "-a");
        let (st, err) = if bounded { bg.wait() } else { bg.term() };
        assert!(st.success(), "capture failed ({st}):\n{err}");
        assert!(err.contains("worker") && err.contains("  w0 "), "{err}");
        let n = delivered(&err);
        assert!(n > 0, "{err}");
        if let Some(c) = value(&w, "-c") {
            assert_eq!(n.to_string(), c, "{err}");
        }
        self.check_written(&err, cwd, n, has(&w, "-P"));
        if let Some(next) = next {
            let o = next.join().expect("the pipeline's reader");
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
            let lines = o.stdout.iter().filter(|&&b| b == b'\n').count() as u64;
            assert_eq!(lines, n, "a line per packet from the tool after `|`");
        }
    }

    /// The files a capture's summary says it wrote hold its `n` packets (classic pcap with
    /// `pcap`), as tcpdump reads them; the files earlier commands wrote are unchanged.
    fn check_written(&mut self, err: &str, cwd: &Path, n: u64, pcap: bool) {
        let wrote: Vec<PathBuf> = err
            .lines()
            .filter_map(|l| l.trim_start().strip_prefix("wrote "))
            .map(|f| cwd.join(f))
            .collect();
        for (earlier, count) in &self.files {
            assert_eq!(
                tcpdump_packets(earlier, ""),
                *count,
                "{}",
                earlier.display()
            );
        }
        let mut total = 0;
        for f in &wrote {
            let bytes = std::fs::read(f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
            if pcap {
                assert_eq!(bytes[..4], [0xd4, 0xc3, 0xb2, 0xa1], "{}", f.display());
            }
            let k = tcpdump_packets(f, "");
            total += k;
            for (ts, _) in packets(f) {
                let (a, b) = self.span.unwrap_or((ts, ts));
                self.span = Some((a.min(ts), b.max(ts)));
            }
            self.files.insert(f.clone(), k);
        }
        if !wrote.is_empty() {
            assert_eq!(total, n, "the files hold the packets delivered");
        }
    }

    /// A query over the captures' files: it finds what tcpdump finds in them.
    fn query(&mut self, w: &[String], cwd: &Path) {
        let mut w = self.on_lab(w);
        let utc = self.dates(&mut w);
        let o = ok(self.command(&w, cwd));
        let err = String::from_utf8_lossy(&o.stderr);
        let n = number_after(line_with(&err, " packets from "), "");
        if has(&w, "--from") || has(&w, "--to") {
            let window = line_with(&err, "(UTC)");
            for t in utc {
                assert!(window.contains(&t), "the window back in UTC, {t}: {err}");
            }
        }
        let mut paths: Vec<String> = value(&w, "-r").map(str::to_owned).into_iter().collect();
        let mut filter = Vec::new();
        for p in operands(&w, "query") {
            if cwd.join(&p).exists() {
                paths.push(p);
            } else {
                filter.push(p);
            }
        }
        let filter = filter.join(" ");
        let expected: u64 = paths
            .iter()
            .flat_map(|p| captures_in(&cwd.join(p)))
            .map(|f| tcpdump_packets(&f, &filter))
            .sum();
        assert!(n > 0, "{err}");
        assert_eq!(n, expected, "what tcpdump finds with `{filter}`: {err}");
        match value(&w, "-w") {
            Some(out) => assert_eq!(tcpdump_packets(&cwd.join(out), ""), n),
            // Without -w, a line per packet on standard output, as tcpdump -r prints.
            None => {
                let lines = String::from_utf8_lossy(&o.stdout).lines().count() as u64;
                assert_eq!(lines, n, "a line per packet: {err}");
            }
        }
    }

    /// The README's times of day, made the window around the packets recorded, in the
    /// same form and zone; returns each as the query must show it back in UTC.
    fn dates(&self, w: &mut [String]) -> Vec<String> {
        let tz = value(w, "--tz").map(str::to_owned);
        let mut utc = Vec::new();
        for i in 1..w.len() {
            if !is_date(&w[i]) {
                continue;
            }
            let (first, last) = self.span.expect("a capture recorded before a date");
            let seconds = w[i].len() == 19;
            let secs = match w[i - 1].as_str() {
                "--from" => first / 1_000_000_000,
                "--to" => last / 1_000_000_000 + if seconds { 1 } else { 60 },
                other => panic!("a date after {other}"),
            };
            // Zones are whole minutes off UTC: a minute there is a minute here.
            let secs = if seconds { secs } else { secs - secs % 60 };
            w[i] = local_time(secs, tz.as_deref(), seconds);
            utc.push(date(secs, Some("UTC"), "+%Y-%m-%dT%H:%M:%S.000000000Z"));
        }
        utc
    }

    /// The README's `serve`, in the lab, its socket and spool under the scratch folder.
    fn serve(&mut self, w: &[String], cwd: &Path) {
        let mut w = self.in_lab(w);
        for (flag, default) in [
            ("--socket", "run/corecap/corecap.sock"),
            ("--spool", "var/spool/corecap"),
        ] {
            if !has(&w, flag) {
                w.extend([flag.to_owned(), self.path(default)]);
            }
        }
        let socket = PathBuf::from(value(&w, "--socket").expect("socket"));
        let bg = Background::start(self.command(&w, cwd), "serving on");
        self.daemon = Some(Served {
            bg,
            socket,
            rounds_before: self.rounds,
        });
    }

    /// The daemon's summary at SIGTERM: every packet its base capture took is in the
    /// recording, none dropped, and it took every packet sent since it started.
    fn stop_daemon(&mut self) {
        let Some(d) = self.daemon.take() else {
            return;
        };
        let (st, err) = d.bg.term();
        assert!(st.success(), "serve failed ({st}):\n{err}");
        let line = err
            .lines()
            .find(|l| l.contains("summary after"))
            .unwrap_or_else(|| panic!("no summary:\n{err}"));
        let took = number_after(line, "cap0: ");
        assert_eq!(took, (self.rounds - d.rounds_before) * ROUND, "{line}");
        assert!(line.contains(", 0 kernel drops;"), "{line}");
        assert_eq!(number_after(line, "recording: "), took, "{line}");
        assert!(
            line.contains("drops: kernel 0, stage full 0, app 0, disk 0"),
            "{line}"
        );
    }

    /// `request --json show ID`.
    fn view(&self, id: &str, cwd: &Path) -> Value {
        let w = ["corecap", "request", "--json", "show", id].map(str::to_owned);
        let o = ok(self.command(&self.request_words(&w), cwd));
        serde_json::from_slice(&o.stdout).expect("show prints JSON")
    }

    /// `request start`: it prints an id; rounds of traffic enough for its count (`-c`)
    /// follow, and its spool file then holds that many packets. With `--since`, a round
    /// first, so the recording's last seconds hold packets it takes.
    fn start(&mut self, w: &[String], cwd: &Path) {
        let w = self.request_words(w);
        let since = has(&w, "--since");
        if since {
            self.traffic();
        }
        let o = ok(self.command(&w, cwd));
        let id = String::from_utf8_lossy(&o.stdout).trim().to_owned();
        assert!(
            id.starts_with('c') && id[1..].parse::<u32>().is_ok(),
            "{id}"
        );
        self.ids.push(id.clone());
        let count: u64 = value(&w, "-c").expect("-c").parse().expect("count");
        let filter = operands(&w, "start").join(" ");
        for _ in 0..count.div_ceil(per_round(&filter)) {
            self.traffic();
        }
        let deadline = Instant::now() + Duration::from_secs(20);
        let v = loop {
            let v = self.view(&id, cwd);
            if v["state"] != "running" || Instant::now() > deadline {
                break v;
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        assert_eq!(v["state"], "done", "{v}");
        assert_eq!(v["packets"], count, "{v}");
        let file = Path::new(v["path"].as_str().expect("path"));
        assert_eq!(tcpdump_packets(file, ""), count);
        if since {
            let w = ["corecap", "request", "show", &id].map(str::to_owned);
            let o = ok(self.command(&self.request_words(&w), cwd));
            let text = String::from_utf8_lossy(&o.stdout);
            let live = number_after(&text, " from the recording, ");
            let recorded = count - live;
            assert!(
                text.contains(&format!(": {recorded} from the recording")),
                "{text}"
            );
            assert!(recorded > 0, "it starts in the past: {text}");
        }
    }

    /// `request show ID`: the id `request start` printed; state, packets, setup, armed
    /// and first packet.
    fn show(&self, w: &[String], cwd: &Path) {
        let id = w.last().expect("id");
        assert!(
            self.ids.contains(id),
            "`request start` printed {:?}",
            self.ids
        );
        let o = ok(self.command(&self.request_words(w), cwd));
        let text = String::from_utf8_lossy(&o.stdout);
        assert!(text.starts_with(&format!("{id}: done")), "{text}");
        for field in ["packets:", "setup:", "armed:", "first packet:"] {
            assert!(text.contains(field), "{field} in:\n{text}");
        }
    }

    /// `request query` over the daemon's recording: whole, and every matching packet sent
    /// since the daemon started.
    fn ask(&self, w: &[String], cwd: &Path) {
        // The recording writes a packet within a second (--flush-interval).
        let flushed = self.last_traffic + Duration::from_millis(1500);
        std::thread::sleep(flushed.saturating_duration_since(Instant::now()));
        let w = self.request_words(w);
        let o = ok(self.command(&w, cwd));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains("(whole)"), "whole or partial, said: {err}");
        let d = self.daemon.as_ref().expect("daemon");
        let filter = operands(&w, "query").join(" ");
        let sent = per_round(&filter) * (self.rounds - d.rounds_before);
        let out = cwd.join(value(&w, "-w").expect("-w"));
        assert_eq!(tcpdump_packets(&out, ""), sent, "{err}");
    }

    /// `request metrics`: Prometheus text, with the captures started.
    fn metrics(&self, w: &[String], cwd: &Path) {
        let o = ok(self.command(&self.request_words(w), cwd));
        let text = String::from_utf8_lossy(&o.stdout);
        assert_prometheus(&text);
        for id in &self.ids {
            let series = format!("corecap_capture_packets_total{{id=\"{id}\"");
            assert!(text.contains(&series), "{series} in:\n{text}");
        }
    }

    /// The fan-out query over two sensors: each a `serve --record` daemon in the lab with
    /// TLS on a loopback address its name resolves to there; the request runs in the lab.
    fn fleet(&mut self, w: &[String], cwd: &Path) {
        let sensors = sensors(w);
        let mut certs = vec!["corecap".to_owned(), "certs".to_owned()];
        certs.push(cwd.to_str().expect("utf8").to_owned());
        for (_, host, _) in &sensors {
            certs.extend(["--server-name".to_owned(), host.clone()]);
        }
        ok(self.command(&certs, cwd));
        let hosts: Vec<(String, String)> = (1..)
            .zip(&sensors)
            .map(|(i, (_, h, _))| (format!("127.0.0.{i}"), h.clone()))
            .collect();
        let _hosts = NetnsHosts::new(&self.lab.netns, &hosts);
        let daemons: Vec<(Daemon, Scratch)> = hosts
            .iter()
            .zip(&sensors)
            .map(|((addr, _), (name, _, port))| self.sensor(name, &format!("{addr}:{port}"), cwd))
            .collect();
        self.traffic();
        std::thread::sleep(Duration::from_millis(800));
        let w = self.on_lab(w);
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.lab.netns, bin()])
            .args(&w[1..])
            .current_dir(cwd);
        eprintln!("  as: ip netns exec {} {}", self.lab.netns, shown(&w));
        let o = ok(c);
        let filter = operands(&w, "query").join(" ");
        check_fleet(
            &o,
            &sensors,
            &cwd.join(value(&w, "-w").expect("-w")),
            &filter,
        );
        for (d, _dir) in daemons {
            assert!(d.stop().0, "a sensor's daemon failed");
        }
    }

    /// A sensor's daemon: records cap0, listens on `listen` with TLS, the certificates
    /// `corecap certs` wrote in `pki`; with its folder.
    fn sensor(&self, name: &str, listen: &str, pki: &Path) -> (Daemon, Scratch) {
        let dir = Scratch::new(name);
        let tls = util::tls_serve_args(listen, pki);
        let tls: Vec<&str> = tls.iter().map(String::as_str).collect();
        let args = recording_daemon_args(&dir.path("rec"), &tls);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        (Daemon::start(&self.lab, &dir, &args), dir)
    }
}

/// The `--sensor NAME=https://HOST:PORT` of a line: (name, host, port).
fn sensors(w: &[String]) -> Vec<(String, String, String)> {
    w.windows(2)
        .filter(|p| p[0] == "--sensor")
        .map(|p| {
            let (name, url) = p[1].split_once('=').expect("NAME=URL");
            let rest = url.strip_prefix("https://").expect("https");
            let (host, port) = rest.split_once(':').expect("HOST:PORT");
            (name.to_owned(), host.to_owned(), port.to_owned())
        })
        .collect()
}

/// The fan-out's answer: a line per sensor, whole, with the round it recorded; one
/// pcapng in time order with each sensor's interface named `NAME:cap0`.
fn check_fleet(o: &Output, sensors: &[(String, String, String)], out: &Path, filter: &str) {
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("answer"), "{err}");
    let mut total = 0;
    for (name, _, _) in sensors {
        let line = err
            .lines()
            .find(|l| l.split_whitespace().next() == Some(name))
            .unwrap_or_else(|| panic!("no line for {name}:\n{err}"));
        assert!(line.ends_with("whole"), "{line}");
        let n: u64 = line
            .split_whitespace()
            .nth(1)
            .and_then(|n| n.parse().ok())
            .expect(line);
        assert_eq!(n, per_round(filter), "{line}");
        total += n;
    }
    let got = packets(out);
    assert_eq!(got.len() as u64, total);
    assert_eq!(tcpdump_packets(out, ""), total);
    assert!(got.windows(2).all(|p| p[0].0 <= p[1].0), "time order");
    let mut r = corecap_wire::CaptureReader::open(out).expect("open");
    while let Ok(Some(_)) = r.next_packet() {}
    let mut names: Vec<String> = r
        .interfaces()
        .iter()
        .filter_map(|i| i.name.clone())
        .collect();
    names.sort();
    let want: Vec<String> = sensors
        .iter()
        .map(|(n, _, _)| format!("{n}:cap0"))
        .collect();
    assert_eq!(names, want);
}

/// Without root too: every command line of the README has a rule (run or skipped), and
/// one that has none is refused.
#[test]
fn test_every_readme_line_has_a_rule() {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md"))
        .expect("read README.md");
    for l in sh_lines(&text) {
        assert!(
            step(&l.text, &pipeline(&l.text)).is_some(),
            "no rule for `{}`",
            l.text
        );
    }
    for l in [
        "corecap bench disk /data",
        "corecap query /data -w - | tshark -r -",
        "make",
    ] {
        assert!(step(l, &pipeline(l)).is_none(), "{l}");
    }
}

#[test]
fn test_pipeline() {
    assert_eq!(
        pipeline("corecap query a 'host 10.0.0.7' -w x  # comment"),
        [["corecap", "query", "a", "host 10.0.0.7", "-w", "x"]]
    );
    assert_eq!(
        pipeline("corecap capture -i eth0 -w - | tshark -r -   # to a tool"),
        [
            vec!["corecap", "capture", "-i", "eth0", "-w", "-"],
            vec!["tshark", "-r", "-"]
        ]
    );
    assert_eq!(pipeline("a b#c \"\" x\\ y"), [["a", "b#c", "", "x y"]]);
}

#[test]
fn test_sh_lines() {
    let md = "x\n```sh\n# c\ncorecap a \\\n    b   # d\n\ncargo x\n```\n```\ncorecap no\n```\n";
    let l = sh_lines(md);
    assert_eq!(l.len(), 2);
    assert_eq!((l[0].block, l[0].text.as_str()), (1, "corecap a b   # d"));
    assert_eq!(l[1].text, "cargo x");
}

#[test]
fn test_is_date() {
    assert!(is_date("2026-11-23 10:02:00"));
    assert!(is_date("2026-11-23 11:02"));
    assert!(!is_date("-15m"));
    assert!(!is_date("2026-11-23T10:02:00"));
}
