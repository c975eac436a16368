//! `corecap extcap`: Wireshark's extcap protocol, so that corecap's interfaces appear in
//! Wireshark and tshark (`extcap(4)`; Wireshark's `doc/extcap_example.py`).
//!
//! Wireshark runs each program of its extcap folder with `--extcap-interfaces`, then per
//! interface `--extcap-dlts` and `--extcap-config`, and to capture `--capture --fifo PATH`
//! with the interface's options. `corecap extcap install` puts a link named
//! [`LINK_NAME`] to the corecap binary in that folder; run under that name, corecap is the
//! extcap (see `main.rs`). A capture is `corecap capture -i IF[@Q] -w FIFO --merge`: one
//! pcapng stream in timestamp order, through corecap's workers.

use std::io::ErrorKind;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::{Parser, ValueEnum};

use crate::args::{Cli, Cmd, ExtcapArgs, ExtcapCmd};

/// The name of the link in Wireshark's extcap folder; corecap run under it is the extcap.
pub(crate) const LINK_NAME: &str = "corecap-extcap";

/// The prefix of corecap's interfaces in Wireshark.
const PREFIX: &str = "corecap:";

/// The capture arguments of `--extcap-config`: (option, display, type and values, tooltip).
const CONFIG: &str = "\
arg {number=0}{call=--workers}{display=Workers}{type=integer}{range=0,1024}{default=0}\
{tooltip=Capture workers (0: one per RX queue, at most one per CPU)}{group=Capture}
arg {number=1}{call=--snaplen}{display=Snap length}{type=integer}{range=64,262144}\
{default=262144}{tooltip=Bytes to keep of each packet}{group=Capture}
arg {number=2}{call=--balance}{display=Balance}{type=selector}\
{tooltip=How packets are spread over the workers}{group=Capture}
value {arg=2}{value=flow}{display=Flow (both directions on one worker)}{default=true}
value {arg=2}{value=queue}{display=RX queue}{default=false}
value {arg=2}{value=cpu}{display=CPU that received it}{default=false}
value {arg=2}{value=round-robin}{display=Round robin}{default=false}
value {arg=2}{value=rollover}{display=Rollover}{default=false}
";

/// What `--extcap-interfaces` prints for interfaces given as (name, RX queues).
pub(crate) fn interfaces_text(ifaces: &[(String, u32)]) -> String {
    let mut s = format!(
        "extcap {{version={}}}{{help={}}}\n",
        env!("CARGO_PKG_VERSION"),
        env!("CARGO_PKG_REPOSITORY")
    );
    for (name, queues) in ifaces {
        s += &format!(
            "interface {{value={PREFIX}{name}}}{{display=corecap: {name} (all queues)}}\n"
        );
        for q in 0..*queues {
            s += &format!(
                "interface {{value={PREFIX}{name}@{q}}}{{display=corecap: {name} RX queue {q}}}\n"
            );
        }
    }
    s
}

/// What `--extcap-dlts` prints: corecap captures Ethernet frames.
pub(crate) fn dlts_text() -> &'static str {
    "dlt {number=1}{name=EN10MB}{display=Ethernet}\n"
}

/// What `--extcap-config` prints.
pub(crate) fn config_text() -> &'static str {
    CONFIG
}

/// Why `expr` is not a capture filter for Ethernet frames, on one line; None when it is
/// one (or is empty).
pub(crate) fn filter_error(expr: &str) -> Option<String> {
    if expr.trim().is_empty() {
        return None;
    }
    let e = corecap_linux::filter::compile_offline(1, 262144, expr).err()?;
    Some(e.to_string().replace(['\n', '\r'], " "))
}

/// The interfaces of this network namespace that corecap captures, with their RX queues.
fn interfaces() -> Result<Vec<(String, u32)>> {
    let mut names: Vec<String> = std::fs::read_dir("/sys/class/net")
        .context("reading /sys/class/net")?
        .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
        .filter(|n| corecap_linux::netdev::linktype(n).is_ok())
        .collect();
    names.sort();
    Ok(names
        .into_iter()
        .map(|n| {
            let q = corecap_linux::netdev::rx_queues(&n).unwrap_or(1);
            (n, q)
        })
        .collect())
}

/// `corecap:IF[@Q]` → `IF[@Q]`, checked against this namespace's interfaces.
fn interface(value: Option<&str>) -> Result<String> {
    let value = value.context("missing --extcap-interface corecap:IF[@QUEUE]")?;
    let Some(spec) = value.strip_prefix(PREFIX) else {
        bail!("--extcap-interface {value}: not a corecap interface (corecap:IF[@QUEUE])");
    };
    let input = corecap_engine::capture::Input::parse(spec)
        .map_err(|e| anyhow::anyhow!("--extcap-interface {value}: {e}"))?;
    corecap_linux::netdev::linktype(&input.iface)
        .with_context(|| format!("--extcap-interface {value}"))?;
    if let Some(q) = input.queue {
        let n = corecap_linux::netdev::rx_queues(&input.iface).unwrap_or(1);
        if u32::from(q) >= n {
            bail!(
                "--extcap-interface {value}: {} has {n} RX queue{}",
                input.iface,
                if n == 1 { "" } else { "s" }
            );
        }
    }
    Ok(spec.to_owned())
}

/// Runs `corecap extcap`. Returns the process exit code.
pub(crate) fn run(a: ExtcapArgs) -> Result<i32> {
    match &a.cmd {
        Some(ExtcapCmd::Install { dir }) => return install(dir.as_deref()),
        Some(ExtcapCmd::Uninstall { dir }) => return uninstall(dir.as_deref()),
        None => {}
    }
    if a.extcap_interfaces {
        print!("{}", interfaces_text(&interfaces()?));
        return Ok(0);
    }
    if a.extcap_dlts {
        interface(a.extcap_interface.as_deref())?;
        print!("{}", dlts_text());
        return Ok(0);
    }
    if a.extcap_config {
        interface(a.extcap_interface.as_deref())?;
        print!("{}", config_text());
        return Ok(0);
    }
    if a.capture {
        return capture(&a);
    }
    if let Some(f) = &a.extcap_capture_filter {
        // Wireshark checks a capture filter so: valid when nothing is printed, else the
        // first line printed is the error it shows.
        interface(a.extcap_interface.as_deref())?;
        if let Some(e) = filter_error(f) {
            println!("{e}");
        }
        return Ok(0);
    }
    if a.extcap_version.is_some() {
        println!("corecap extcap {}", env!("CARGO_PKG_VERSION"));
        return Ok(0);
    }
    bail!(
        "nothing to do: give --extcap-interfaces, --extcap-dlts, --extcap-config or --capture \
         (or `corecap extcap install`)"
    )
}

/// Waits until the FIFO has a reader (Wireshark opens it after starting the extcap), or a
/// signal stops the wait. Returns the write end it opened, held while the capture opens its
/// own, so the reader never sees the FIFO without a writer.
fn wait_reader(fifo: &Path, stop: &AtomicBool) -> Result<Option<std::fs::File>> {
    loop {
        match std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(fifo)
        {
            Ok(f) => return Ok(Some(f)),
            // ENXIO: no reader yet.
            Err(e) if e.raw_os_error() == Some(libc::ENXIO) => {}
            Err(e) => return Err(e).with_context(|| format!("opening --fifo {}", fifo.display())),
        }
        // Relaxed: a flag set by the signal handler, polled here.
        if stop.load(Ordering::Relaxed) {
            return Ok(None);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `--capture --fifo PATH`: `corecap capture -i IF[@Q] -w PATH --merge` until Wireshark
/// stops it (SIGTERM, SIGINT) or closes the FIFO.
fn capture(a: &ExtcapArgs) -> Result<i32> {
    let spec = interface(a.extcap_interface.as_deref())?;
    let fifo = a.fifo.as_deref().context("--capture needs --fifo PATH")?;
    if !corecap_store::write::disk::is_fifo(fifo) {
        bail!("--fifo {}: not a FIFO", fifo.display());
    }
    let mut argv: Vec<String> = [
        "corecap",
        "capture",
        "-i",
        &spec,
        "--merge",
        "--quiet",
        "--json",
        "--stats-interval",
        "0",
    ]
    .map(String::from)
    .into();
    if let Some(w) = a.workers.filter(|w| *w > 0) {
        argv.extend(["--workers".into(), w.to_string()]);
    }
    if let Some(s) = a.snaplen {
        argv.extend(["--snaplen".into(), s.to_string()]);
    }
    if let Some(b) = a.balance {
        let name = b.to_possible_value().expect("no variant is skipped");
        argv.extend(["--balance".into(), name.get_name().to_owned()]);
    }
    if let Some(f) = a.extcap_capture_filter.as_deref().map(str::trim) {
        if !f.is_empty() {
            argv.extend(["--filter".into(), f.to_owned()]);
        }
    }
    argv.extend(["-w".into(), fifo.display().to_string()]);
    let cli = Cli::try_parse_from(&argv).map_err(|e| anyhow::anyhow!("{}", e.render()))?;
    let Cmd::Capture(args) = cli.cmd else {
        unreachable!("the arguments name the capture command")
    };
    // Checked before waiting for the reader, so bad options fail at once.
    crate::config::capture(&args)?;
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone()).context("installing signal handlers")?;
    }
    let Some(_held) = wait_reader(fifo, &stop)? else {
        return Ok(0);
    };
    crate::cmd::capture::run(*args)
}

/// Wireshark's extcap folders from `tshark -G folders`: (personal, global).
pub(crate) fn folders(text: &str) -> (Option<PathBuf>, Option<PathBuf>) {
    let field = |key: &str| {
        text.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            (k.trim() == key && !v.trim().is_empty()).then(|| PathBuf::from(v.trim()))
        })
    };
    // Wireshark 4.2 and later name both; 4.0 has one "Extcap path" and reads a personal
    // "extcap" folder in its configuration folder.
    let personal = field("Personal Extcap path")
        .or_else(|| field("Personal configuration").map(|p| p.join("extcap")));
    let global = field("Global Extcap path").or_else(|| field("Extcap path"));
    (personal, global)
}

/// The folder to install into: the user's, or the system's as root.
fn default_dir() -> Result<PathBuf> {
    let root = std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0);
    let out = std::process::Command::new("tshark")
        .args(["-G", "folders"])
        .stderr(std::process::Stdio::null())
        .output();
    let (personal, global) = match out {
        Ok(o) if o.status.success() => folders(&String::from_utf8_lossy(&o.stdout)),
        _ => (None, None),
    };
    if root {
        return global.context(
            "cannot find Wireshark's global extcap folder (tshark -G folders); give --dir DIR",
        );
    }
    if let Some(p) = personal {
        return Ok(p);
    }
    let config = match std::env::var_os("XDG_CONFIG_HOME").filter(|v| !v.is_empty()) {
        Some(c) => PathBuf::from(c),
        None => PathBuf::from(std::env::var_os("HOME").context("HOME is not set; give --dir DIR")?)
            .join(".config"),
    };
    Ok(config.join("wireshark").join("extcap"))
}

/// Whether `link` is a symbolic link to a corecap binary.
fn is_our_link(link: &Path) -> bool {
    std::fs::read_link(link).is_ok_and(|t| t.file_name().is_some_and(|n| n == "corecap"))
}

/// `corecap extcap install [--dir DIR]`.
fn install(dir: Option<&Path>) -> Result<i32> {
    let dir = match dir {
        Some(d) => d.to_owned(),
        None => default_dir()?,
    };
    let exe = std::env::current_exe()
        .and_then(|p| p.canonicalize())
        .context("finding the corecap binary")?;
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let link = dir.join(LINK_NAME);
    match std::fs::symlink_metadata(&link) {
        Ok(_) if is_our_link(&link) => {
            std::fs::remove_file(&link).with_context(|| format!("replacing {}", link.display()))?
        }
        Ok(_) => bail!(
            "{} exists and is not a link to corecap; not replacing it",
            link.display()
        ),
        Err(e) if e.kind() == ErrorKind::NotFound => {}
        Err(e) => return Err(e).with_context(|| format!("reading {}", link.display())),
    }
    std::os::unix::fs::symlink(&exe, &link)
        .with_context(|| format!("linking {} to {}", link.display(), exe.display()))?;
    println!("{}", link.display());
    Ok(0)
}

/// `corecap extcap uninstall [--dir DIR]`: removes the link, and nothing else.
fn uninstall(dir: Option<&Path>) -> Result<i32> {
    let dir = match dir {
        Some(d) => d.to_owned(),
        None => default_dir()?,
    };
    let link = dir.join(LINK_NAME);
    match std::fs::symlink_metadata(&link) {
        Err(e) if e.kind() == ErrorKind::NotFound => {
            bail!(
                "no corecap extcap in {} ({LINK_NAME} is not there)",
                dir.display()
            )
        }
        Err(e) => return Err(e).with_context(|| format!("reading {}", link.display())),
        Ok(_) if !is_our_link(&link) => bail!(
            "{} is not a link to corecap; not removing it",
            link.display()
        ),
        Ok(_) => {}
    }
    std::fs::remove_file(&link).with_context(|| format!("removing {}", link.display()))?;
    println!("removed {}", link.display());
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_interfaces_text() {
        let s = interfaces_text(&[("cap0".into(), 2), ("eth0".into(), 1)]);
        let want = format!(
            "extcap {{version={}}}{{help={}}}\n\
             interface {{value=corecap:cap0}}{{display=corecap: cap0 (all queues)}}\n\
             interface {{value=corecap:cap0@0}}{{display=corecap: cap0 RX queue 0}}\n\
             interface {{value=corecap:cap0@1}}{{display=corecap: cap0 RX queue 1}}\n\
             interface {{value=corecap:eth0}}{{display=corecap: eth0 (all queues)}}\n\
             interface {{value=corecap:eth0@0}}{{display=corecap: eth0 RX queue 0}}\n",
            env!("CARGO_PKG_VERSION"),
            env!("CARGO_PKG_REPOSITORY")
        );
        assert_eq!(s, want);
    }

    #[test]
    fn test_dlts_text() {
        assert_eq!(
            dlts_text(),
            "dlt {number=1}{name=EN10MB}{display=Ethernet}\n"
        );
    }

    #[test]
    fn test_config_text() {
        let lines: Vec<&str> = config_text().lines().collect();
        assert_eq!(
            lines[0],
            "arg {number=0}{call=--workers}{display=Workers}{type=integer}{range=0,1024}\
             {default=0}{tooltip=Capture workers (0: one per RX queue, at most one per CPU)}\
             {group=Capture}"
        );
        assert_eq!(
            lines[1],
            "arg {number=1}{call=--snaplen}{display=Snap length}{type=integer}\
             {range=64,262144}{default=262144}{tooltip=Bytes to keep of each packet}\
             {group=Capture}"
        );
        assert_eq!(
            lines[2],
            "arg {number=2}{call=--balance}{display=Balance}{type=selector}\
             {tooltip=How packets are spread over the workers}{group=Capture}"
        );
        // Every selector value is one that --balance takes, and one is the default.
        let values: Vec<&str> = lines[3..]
            .iter()
            .map(|l| {
                assert!(l.starts_with("value {arg=2}{value="), "{l}");
                l["value {arg=2}{value=".len()..]
                    .split('}')
                    .next()
                    .unwrap_or("")
            })
            .collect();
        let names: Vec<String> = crate::args::BalanceArg::value_variants()
            .iter()
            .filter_map(|v| v.to_possible_value().map(|p| p.get_name().to_owned()))
            .collect();
        assert_eq!(values, names);
        assert_eq!(
            lines
                .iter()
                .filter(|l| l.ends_with("{default=true}"))
                .count(),
            1
        );
        // Every line is whole: braces balance and nothing trails them.
        for l in &lines {
            assert_eq!(l.matches('{').count(), l.matches('}').count(), "{l}");
            assert!(l.ends_with('}'), "{l}");
        }
    }

    #[test]
    fn test_filter_error() {
        assert_eq!(filter_error("udp port 53"), None);
        assert_eq!(filter_error("  "), None);
        let e = filter_error("udp port").expect("not a filter");
        assert!(!e.is_empty() && !e.contains('\n'), "{e}");
    }

    #[test]
    fn test_folders() {
        let v40 = "Personal configuration:\t/root/.config/wireshark\n\
                   Global configuration:\t/usr/share/wireshark\n\
                   Extcap path:         \t/usr/lib/x86_64-linux-gnu/wireshark/extcap\n";
        assert_eq!(
            folders(v40),
            (
                Some(PathBuf::from("/root/.config/wireshark/extcap")),
                Some(PathBuf::from("/usr/lib/x86_64-linux-gnu/wireshark/extcap"))
            )
        );
        let v42 = "Personal configuration:\t/home/a/.config/wireshark\n\
                   Personal Extcap path:\t/home/a/.local/lib/wireshark/extcap\n\
                   Global Extcap path:\t/usr/lib/wireshark/extcap\n";
        assert_eq!(
            folders(v42),
            (
                Some(PathBuf::from("/home/a/.local/lib/wireshark/extcap")),
                Some(PathBuf::from("/usr/lib/wireshark/extcap"))
            )
        );
        assert_eq!(folders(""), (None, None));
    }
}
