//! A fleet of sensors (issue 24): `serve --record` on three labs, each daemon reachable
//! only over TLS with client certificates on an address of a veth pair this test makes
//! between the host and the lab's namespace; one `request query --sensor ...` over the
//! three answers what `tcpdump -r` finds in the union of their recordings, in time order.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::query::tcpdump;
use crate::util::{self, bin, corecap, packets, recording_daemon_args, Daemon, Lab, Scratch};
use corecap_wire::CaptureReader;

/// A veth pair from the host into a lab's namespace, with a /30 on each end; removed on
/// drop (the namespace's end goes with it).
struct Link {
    host_if: String,
    sensor_ip: String,
}

impl Link {
    fn new(lab: &Lab, n: u32) -> Self {
        let tag = std::process::id() % 100_000;
        let host_if = format!("cf{tag}h{n}");
        let peer = format!("cf{tag}s{n}");
        let (host_ip, sensor_ip) = (format!("10.213.{n}.1"), format!("10.213.{n}.2"));
        let ok = |args: &[&str]| {
            let st = Command::new(args[0])
                .args(&args[1..])
                .status()
                .expect("run ip");
            assert!(st.success(), "{args:?}");
        };
        ok(&[
            "ip", "link", "add", &host_if, "type", "veth", "peer", "name", &peer, "netns",
            &lab.netns,
        ]);
        let link = Self {
            host_if: host_if.clone(),
            sensor_ip: sensor_ip.clone(),
        };
        ok(&[
            "ip",
            "addr",
            "add",
            &format!("{host_ip}/30"),
            "dev",
            &host_if,
        ]);
        ok(&["ip", "link", "set", &host_if, "up"]);
        let ns = ["ip", "netns", "exec", lab.netns.as_str()];
        ok(&[
            &ns[..],
            &[
                "ip",
                "addr",
                "add",
                &format!("{sensor_ip}/30"),
                "dev",
                &peer,
            ],
        ]
        .concat());
        ok(&[&ns[..], &["ip", "link", "set", &peer, "up"]].concat());
        ok(&[&ns[..], &["ip", "link", "set", "lo", "up"]].concat());
        link
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["link", "del", &self.host_if])
            .status();
    }
}

/// One sensor: its lab, link, scratch folder and daemon.
struct Sensor {
    lab: Lab,
    _link: Link,
    dir: Scratch,
    daemon: Option<Daemon>,
    url: String,
}

impl Sensor {
    fn start(n: u32, pki: &Path) -> Self {
        let lab = Lab::new(1);
        let link = Link::new(&lab, n);
        let dir = Scratch::new(&format!("sensor{n}"));
        let listen = format!("{}:7443", link.sensor_ip);
        let rec = dir.path("rec");
        let tls = util::tls_serve_args(&listen, pki);
        let tls: Vec<&str> = tls.iter().map(String::as_str).collect();
        let args = recording_daemon_args(&rec, &tls);
        let daemon = Daemon::start(
            &lab,
            &dir,
            &args.iter().map(String::as_str).collect::<Vec<_>>(),
        );
        Self {
            url: format!("s{n}=https://{listen}"),
            lab,
            _link: link,
            dir,
            daemon: Some(daemon),
        }
    }

    /// The whole files of the recording (after the daemon stopped).
    fn files(&self) -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = std::fs::read_dir(self.dir.path("rec"))
            .expect("recording folder")
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "pcapng"))
            .collect();
        v.sort();
        v
    }
}

/// `corecap request` with the client certificate of `pki`, to `sensors`.
fn request(pki: &Path, client: &Path, sensors: &[&str], args: &[&str]) -> Output {
    let mut c = Command::new(bin());
    c.arg("request")
        .arg("--tls-ca")
        .arg(pki.join("ca.pem"))
        .arg("--tls-cert")
        .arg(client.join("client.pem"))
        .arg("--tls-key")
        .arg(client.join("client.key"))
        .args(["--timeout", "20"]);
    for s in sensors {
        c.args(["--sensor", s]);
    }
    c.args(args).output().expect("run corecap request")
}

/// The output's packets in file order, and its interfaces' names.
fn answer(p: &Path) -> (Vec<(u64, Vec<u8>)>, Vec<String>) {
    let names = CaptureReader::open(p)
        .map(|mut r| {
            while let Ok(Some(_)) = r.next_packet() {}
            r.interfaces()
                .iter()
                .map(|i| i.name.clone().unwrap_or_default())
                .collect()
        })
        .unwrap_or_default();
    (packets(p), names)
}

#[test]
#[ignore = "needs root"]
fn issue24_one_query_over_three_tls_sensors_equals_their_recordings() {
    let s = Scratch::new("fleet");
    let pki = s.path("pki");
    let names = ["10.213.1.2", "10.213.2.2", "10.213.3.2"];
    let mut a = vec!["certs", pki.to_str().expect("utf8")];
    for n in &names {
        a.extend(["--server-name", n]);
    }
    let o = corecap(&a);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let mut sensors: Vec<Sensor> = (1..=3).map(|n| Sensor::start(n, &pki)).collect();
    // The three labs send at once, so their packets interleave in time.
    std::thread::scope(|sc| {
        for (i, x) in sensors.iter().enumerate() {
            let count = 1500 + 500 * i as u64;
            let lab = &x.lab;
            sc.spawn(move || lab.gen(count, &["--rate", "20000", "--flows", "64"]));
        }
    });
    // Older than the flush interval: on disk, in the files being written.
    std::thread::sleep(Duration::from_millis(1500));
    let owned: Vec<String> = sensors.iter().map(|x| x.url.clone()).collect();
    let urls: Vec<&str> = owned.iter().map(String::as_str).collect();
    let out = s.path("all.pcapng");
    let o = request(
        &pki,
        &pki,
        &urls,
        &["query", "-w", out.to_str().unwrap(), "udp"],
    );
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "{err}");
    for n in ["s1", "s2", "s3"] {
        assert!(err.contains(n), "each sensor reported: {err}");
    }
    let (got, ifaces) = answer(&out);
    assert!(got.windows(2).all(|w| w[0].0 <= w[1].0), "in time order");
    for i in &ifaces {
        assert!(
            ["s1:", "s2:", "s3:"].iter().any(|p| i.starts_with(p)),
            "{i}"
        );
    }

    // list and show ask every sensor: a capture started on s2 is listed under its name.
    let one = ["--url", owned[1].split_once('=').expect("url").1];
    let o = request(
        &pki,
        &pki,
        &[],
        &[&one[..], &["start", "-i", "cap0", "-c", "5"]].concat(),
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let id = String::from_utf8_lossy(&o.stdout).trim().to_owned();
    let o = request(&pki, &pki, &urls, &["list"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let listed = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        listed
            .lines()
            .any(|l| l.starts_with("s2 ") && l.contains(&id)),
        "{listed}"
    );
    let o = request(&pki, &pki, &urls, &["show", &id]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stdout).contains("s2"));

    // A client whose certificate another CA signed is refused, and gets nothing.
    let other = s.path("other");
    assert!(corecap(&["certs", other.to_str().unwrap()])
        .status
        .success());
    let refused = s.path("refused.pcapng");
    let o = request(
        &pki,
        &other,
        &urls[..1],
        &["query", "-w", refused.to_str().unwrap()],
    );
    assert!(!o.status.success(), "a foreign certificate must be refused");
    assert!(packets(&refused).is_empty());
    // A client with no certificate at all is refused in the handshake too.
    let bare = Command::new(bin())
        .arg("request")
        .arg("--tls-ca")
        .arg(pki.join("ca.pem"))
        .args(["--timeout", "20", "--sensor", urls[0], "list"])
        .output()
        .expect("run corecap request");
    assert!(!bare.status.success(), "no certificate must be refused");
    assert!(
        bare.stdout.is_empty(),
        "nothing listed without a certificate"
    );
    // Neither reached a handler: the daemon counted both as refused handshakes.
    let d = sensors[0].daemon.as_ref().expect("daemon");
    let m = String::from_utf8_lossy(&d.request(&["metrics"]).stdout).into_owned();
    let refused_handshakes: u64 = m
        .lines()
        .find_map(|l| l.strip_prefix("corecap_api_tls_handshakes_refused_total "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    assert_eq!(refused_handshakes, 2, "{m}");

    // A stopped sensor fails the query by name; --partial takes the others.
    let (ok, _) = sensors[2].daemon.take().expect("daemon").stop();
    assert!(ok);
    let part = s.path("part.pcapng");
    let o = request(
        &pki,
        &pki,
        &urls,
        &["query", "-w", part.to_str().unwrap(), "udp"],
    );
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(!o.status.success(), "a stopped sensor fails the query");
    assert!(err.contains("s3"), "the stopped sensor is named: {err}");
    let o = request(
        &pki,
        &pki,
        &urls,
        &["--partial", "query", "-w", part.to_str().unwrap(), "udp"],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let (partial, _) = answer(&part);

    for x in &mut sensors {
        if let Some(d) = x.daemon.take() {
            assert!(d.stop().0);
        }
    }
    let files: Vec<Vec<PathBuf>> = sensors.iter().map(Sensor::files).collect();
    let union = tcpdump(&files.concat(), "udp", 0, u64::MAX, &s);
    let two = tcpdump(&files[..2].concat(), "udp", 0, u64::MAX, &s);
    assert!(union.len() >= 3000, "traffic recorded: {}", union.len());
    let mut sorted = got.clone();
    sorted.sort();
    assert_eq!(
        sorted.len(),
        union.len(),
        "the merged answer holds the union"
    );
    assert!(sorted == union, "packet for packet");
    let mut p = partial;
    p.sort();
    assert!(
        p == two,
        "--partial: the answering sensors' packets, {} of {}",
        p.len(),
        two.len()
    );
}

/// Runs `corecap ARGS` for at most 30 s (killed then); returns its exit code (none when it
/// had to be killed) and its stderr.
fn run_bounded(args: &[&str]) -> (Option<i32>, String) {
    use std::io::Read;
    let mut child = Command::new(bin())
        .args(args)
        .env_remove("CORECAP_TOKEN")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run corecap");
    let deadline = Instant::now() + Duration::from_secs(30);
    let code = loop {
        if let Some(st) = child.try_wait().expect("wait") {
            break st.code();
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut err);
    }
    (code, err)
}

/// Issue 40: a daemon that takes the connection and never answers. With `--url` the client
/// waited for it forever (`--timeout` was only for several sensors), and a sensor of
/// several was reported as "Resource temporarily unavailable (os error 11)". Every
/// connection has a timeout now, and running out of it says so, naming the daemon.
#[test]
fn issue40_a_silent_daemon_times_out_and_is_named() {
    let s = Scratch::new("silent");
    // The kernel completes the handshakes into the backlog; nothing ever accepts or answers.
    let tcp = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!(
        "http://127.0.0.1:{}",
        tcp.local_addr().expect("address").port()
    );
    let socket = s.path("silent.sock");
    let _unix = std::os::unix::net::UnixListener::bind(&socket).expect("bind");
    let socket = socket.to_str().expect("utf8");
    let sensor = format!("s1={url}");
    let out = s.path("out.pcapng");
    let out = out.to_str().expect("utf8");
    for (args, who) in [
        (
            vec!["request", "--url", &url, "--timeout", "2", "list"],
            url.as_str(),
        ),
        (
            vec![
                "request",
                "--url",
                &url,
                "--timeout",
                "2",
                "query",
                "-w",
                out,
            ],
            &url,
        ),
        (
            vec![
                "request",
                "--socket",
                socket,
                "--timeout",
                "2",
                "show",
                "c1",
            ],
            socket,
        ),
        (
            vec!["request", "--sensor", &sensor, "--timeout", "2", "list"],
            "s1",
        ),
    ] {
        let (code, err) = run_bounded(&args);
        assert!(code.is_some(), "{args:?} still waited after 30 s: {err}");
        assert_eq!(code, Some(2), "{args:?}: {err}");
        assert!(
            err.contains(&format!("{who}: timed out after 2 s")),
            "{args:?}: {err}"
        );
        assert!(!err.contains("os error 11"), "{args:?}: {err}");
    }
    // A query to several sensors names the silent one on its line and in the failure.
    let (code, err) = run_bounded(&[
        "request",
        "--sensor",
        &sensor,
        "--timeout",
        "2",
        "query",
        "-w",
        out,
    ]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.lines()
            .any(|l| l.starts_with("s1 ") && l.contains("timed out after 2 s")),
        "{err}"
    );
    assert!(err.contains("1 of 1 sensors failed: s1"), "{err}");
}

/// A pcapng file of UDP frames, one at each of `ms` milliseconds past a fixed time.
fn udp_pcapng(ms: &[u64]) -> Vec<u8> {
    let times = ms.iter().map(|t| 1_780_000_000_000_000_000 + t * 1_000_000);
    crate::util::udp_pcapng(times, 100)
}

/// A sensor that answers one query with `body` (chunked) and the trailer `trailer`.
fn fake_sensor(body: Vec<u8>, trailer: String) -> (String, std::thread::JoinHandle<()>) {
    use std::io::{BufRead, BufReader, Write};
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://127.0.0.1:{}", l.local_addr().expect("addr").port());
    let h = std::thread::spawn(move || {
        let Ok((s, _)) = l.accept() else { return };
        let mut r = BufReader::new(s.try_clone().expect("clone"));
        let mut len = 0usize;
        let mut line = String::new();
        while r.read_line(&mut line).is_ok_and(|n| n > 0) && line != "\r\n" {
            if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                len = v.trim().parse().unwrap_or(0);
            }
            line.clear();
        }
        let mut req = vec![0u8; len];
        let _ = std::io::Read::read_exact(&mut r, &mut req);
        let mut w = s;
        let _ = write!(
            w,
            "HTTP/1.1 200 OK\r\nContent-Type: application/x-pcapng\r\n\
             Transfer-Encoding: chunked\r\nTrailer: corecap-query\r\nConnection: close\r\n\r\n\
             {:x}\r\n",
            body.len()
        );
        let _ = w.write_all(&body);
        let _ = write!(w, "\r\n0\r\ncorecap-query: {trailer}\r\n\r\n");
    });
    (url, h)
}

/// Issue 40: the fan-out says what each sensor said of its answer. A sensor's notes and a
/// file it read cut short reach the per-sensor lines (it read "whole"), and a sensor whose
/// packets come out of time order is checked, not trusted: put back in order when it steps
/// back by fewer than the merge reads ahead (4,096 packets), said to be out of order when
/// it steps back further.
#[test]
fn issue40_the_fan_out_carries_each_sensors_notes_and_checks_its_order() {
    let s = Scratch::new("fake-sensor");
    let body = udp_pcapng(&[3, 1, 2]);
    let note = "rec_00007.pcapng: cut short after 3 packets (a torn block)";
    let trailer = serde_json::json!({"packets": 3, "files_truncated": 1, "notes": [note]});
    let (url, h) = fake_sensor(body, trailer.to_string());
    let out = s.path("out.pcapng");
    let o = Command::new(bin())
        .args(["request", "--timeout", "20", "--sensor"])
        .arg(format!("s1={url}"))
        .args(["query", "-w"])
        .arg(&out)
        .output()
        .expect("run corecap request");
    h.join().expect("sensor");
    let err = String::from_utf8_lossy(&o.stderr);
    let line = err
        .lines()
        .find(|l| l.starts_with("s1 "))
        .unwrap_or_else(|| panic!("no line for s1: {err}"));
    assert!(!line.contains("whole"), "{err}");
    assert!(line.contains("1 files cut short"), "{err}");
    assert!(!line.contains("out of time order"), "{err}");
    assert!(err.contains(&format!("s1: {note}")), "{err}");
    // 1 and 2 each come after 3, and are put back in order.
    assert!(
        err.contains("s1: 2 packets came after later ones and were put back in time order"),
        "{err}"
    );
    let times = |p: &std::path::Path| -> Vec<u64> {
        let mut r = corecap_wire::CaptureReader::open(p).expect("open");
        let mut v = Vec::new();
        while let Some(p) = r.next_packet().expect("read") {
            v.push(p.ts_ns);
        }
        v
    };
    let got = times(&out);
    assert_eq!(got.len(), 3);
    assert!(got.windows(2).all(|w| w[0] <= w[1]), "{got:?}");

    // One packet 5,000 packets late: past what the merge reads ahead.
    let mut ms: Vec<u64> = (10..5010).collect();
    ms.push(1);
    let trailer = serde_json::json!({"packets": ms.len()});
    let (url, h) = fake_sensor(udp_pcapng(&ms), trailer.to_string());
    let out2 = s.path("out2.pcapng");
    let o = Command::new(bin())
        .args(["request", "--timeout", "20", "--sensor"])
        .arg(format!("s1={url}"))
        .args(["query", "-w"])
        .arg(&out2)
        .output()
        .expect("run corecap request");
    h.join().expect("sensor");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("partial: 1 packets out of time order"),
        "{err}"
    );
    assert_eq!(times(&out2).len(), ms.len());
}

/// Issue 40: `request query` to one daemon carries the query's notes: a file of the spool
/// cut short is named, and the answer is said to be partial, not whole.
#[test]
#[ignore = "needs root"]
fn issue40_request_query_carries_the_daemons_notes() {
    let lab = Lab::new(1);
    let s = Scratch::new("query-notes");
    let spool = s.path("spool");
    std::fs::create_dir(&spool).expect("spool");
    std::fs::set_permissions(&spool, std::os::unix::fs::PermissionsExt::from_mode(0o700))
        .expect("mode");
    let mut bytes = udp_pcapng(&[0, 1, 2, 3, 4]);
    bytes.truncate(bytes.len() - 30);
    std::fs::write(spool.join("cut.pcapng"), &bytes).expect("cut file");
    let d = Daemon::start(&lab, &s, &[]);
    let out = s.path("out.pcapng");
    let o = d.request_ok(&["query", "-w", out.to_str().expect("utf8")]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("cut.pcapng"), "the note names the file: {err}");
    assert!(err.contains("partial: 1 files cut short"), "{err}");
    assert!(!err.contains("(whole)"), "{err}");
    assert_eq!(packets(&out).len(), 4, "the whole packets before the cut");
}

/// Issue 39: `request query` without -w prints the daemon's answer one line a packet, the
/// lines `tcpdump -r` prints of the same packets, and stops at -c as tcpdump does.
#[test]
#[ignore = "needs root"]
fn issue39_request_query_without_w_prints_what_tcpdump_prints() {
    assert!(
        util::have("tcpdump"),
        "tcpdump is installed (.ci/run installs it)"
    );
    let lab = Lab::new(1);
    let s = Scratch::new("request-print");
    let spool = s.path("spool");
    std::fs::create_dir(&spool).expect("spool");
    std::fs::set_permissions(&spool, std::os::unix::fs::PermissionsExt::from_mode(0o700))
        .expect("mode");
    let file = spool.join("five.pcapng");
    std::fs::write(&file, udp_pcapng(&[0, 1, 2, 3, 4])).expect("spool file");
    let d = Daemon::start(&lab, &s, &[]);
    // -q: tcpdump decodes port 53 as DNS, which corecap's printer does not yet.
    let o = d.request_ok(&["query", "-tt", "-n", "-q"]);
    let ours = String::from_utf8_lossy(&o.stdout).into_owned();
    let o = Command::new("tcpdump")
        .args(["-tt", "-n", "-q", "-r"])
        .arg(&file)
        .output()
        .expect("tcpdump");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let theirs = String::from_utf8_lossy(&o.stdout).into_owned();
    assert_eq!(theirs.lines().count(), 5, "{theirs}");
    assert_eq!(ours, theirs);
    // -c stops the printing (and the answer) after that many packets, with exit 0.
    let o = d.request_ok(&["query", "-tt", "-q", "-c", "2"]);
    let two = String::from_utf8_lossy(&o.stdout).into_owned();
    assert_eq!(
        two.lines().collect::<Vec<_>>(),
        theirs.lines().take(2).collect::<Vec<_>>()
    );
    // Printing flags without printing are refused, as `query` refuses them.
    let o = d.request(&[
        "query",
        "-X",
        "-w",
        s.path("x.pcapng").to_str().expect("utf8"),
    ]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("-X"));
}
