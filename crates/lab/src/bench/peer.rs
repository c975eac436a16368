//! The other capture tools a benchmark compares with: finding them, their versions, and
//! reading what they report when they stop.

use std::path::{Path, PathBuf};

/// A capture tool the benchmark can run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PeerKind {
    /// tcpdump (libpcap, one thread).
    Tcpdump,
    /// dumpcap (Wireshark's capture engine).
    Dumpcap,
    /// netsniff-ng (TPACKET ring, one thread).
    NetsniffNg,
}

impl PeerKind {
    /// Every peer, in report order.
    pub const ALL: [PeerKind; 3] = [PeerKind::Tcpdump, PeerKind::Dumpcap, PeerKind::NetsniffNg];

    /// Executable name.
    pub fn program(self) -> &'static str {
        match self {
            PeerKind::Tcpdump => "tcpdump",
            PeerKind::Dumpcap => "dumpcap",
            PeerKind::NetsniffNg => "netsniff-ng",
        }
    }

    /// Debian package that provides it.
    pub fn package(self) -> &'static str {
        match self {
            PeerKind::Tcpdump => "tcpdump",
            PeerKind::Dumpcap => "wireshark-common",
            PeerKind::NetsniffNg => "netsniff-ng",
        }
    }

    /// Argument that prints the version.
    pub fn version_arg(self) -> &'static str {
        match self {
            PeerKind::Tcpdump => "--version",
            PeerKind::Dumpcap => "-v",
            PeerKind::NetsniffNg => "-v",
        }
    }

    /// Reads (captured, dropped) from what the tool printed when it stopped.
    pub fn parse_stats(self, text: &str) -> Option<(u64, u64)> {
        match self {
            PeerKind::Tcpdump => Some((
                number_before(text, "packets captured")?,
                number_before(text, "packets dropped by kernel").unwrap_or(0),
            )),
            PeerKind::Dumpcap => {
                // Packets received/dropped on interface 'cap0': 300000/0 (pcap:0/...) (100.0%)
                let line = text
                    .lines()
                    .find(|l| l.contains("received/dropped on interface"))?;
                let (_, tail) = line.rsplit_once("': ")?;
                let pair = tail.split_whitespace().next()?;
                let (r, d) = pair.split_once('/')?;
                Some((r.parse().ok()?, d.parse().ok()?))
            }
            PeerKind::NetsniffNg => {
                let passed = number_before(text, "packets passed filter")
                    .or_else(|| number_before(text, "packets incoming"))?;
                Some((
                    passed,
                    number_before(text, "packets failed filter").unwrap_or(0),
                ))
            }
        }
    }
}

/// The number written just before `label` (e.g. "123 packets captured").
fn number_before(text: &str, label: &str) -> Option<u64> {
    let at = text.find(label)?;
    text[..at].split_whitespace().last()?.parse().ok()
}

/// A peer found on this machine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Peer {
    /// Which tool.
    pub kind: PeerKind,
    /// Where it is.
    pub path: PathBuf,
    /// First line of its version output.
    pub version: String,
}

/// Finds `program` in the directories of a `PATH`-style list.
pub fn find_in(path_list: &str, program: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    path_list
        .split(':')
        .filter(|d| !d.is_empty())
        .map(|d| Path::new(d).join(program))
        .find(|p| {
            std::fs::metadata(p)
                .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
                .unwrap_or(false)
        })
}

/// The peers installed under `path_list`, with their versions; the others are returned as
/// missing.
pub fn detect(path_list: &str) -> (Vec<Peer>, Vec<PeerKind>) {
    let mut found = Vec::new();
    let mut missing = Vec::new();
    for kind in PeerKind::ALL {
        match find_in(path_list, kind.program()) {
            Some(path) => {
                let version = std::process::Command::new(&path)
                    .arg(kind.version_arg())
                    .output()
                    .map(|o| {
                        let mut t = String::from_utf8_lossy(&o.stdout).into_owned();
                        t.push_str(&String::from_utf8_lossy(&o.stderr));
                        t.lines()
                            .find(|l| !l.trim().is_empty())
                            .unwrap_or("")
                            .trim()
                            .to_owned()
                    })
                    .unwrap_or_default();
                found.push(Peer {
                    kind,
                    path,
                    version,
                });
            }
            None => missing.push(kind),
        }
    }
    (found, missing)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_parse_peer_reports() {
        let tcpdump = "tcpdump: listening on cap0\n4816249 packets captured\n5000000 packets received by filter\n183751 packets dropped by kernel\n";
        assert_eq!(
            PeerKind::Tcpdump.parse_stats(tcpdump),
            Some((4816249, 183751))
        );
        let dumpcap = "Capturing on 'cap0'\nPackets received/dropped on interface 'cap0': 4455743/544257 (pcap:544257/dumpcap:0/flushed:0/ps_ifdrop:0) (89.1%)\n";
        assert_eq!(
            PeerKind::Dumpcap.parse_stats(dumpcap),
            Some((4455743, 544257))
        );
        let nsng = "\r\n         5000000  packets incoming (0 unread on exit)\r\n         4867148  packets passed filter\r\n          132852  packets failed filter (out of space)\r\n";
        assert_eq!(
            PeerKind::NetsniffNg.parse_stats(nsng),
            Some((4867148, 132852))
        );
        assert_eq!(
            PeerKind::Tcpdump.parse_stats("tcpdump: cap0: No such device"),
            None
        );
    }

    #[test]
    fn test_detect_finds_executables_and_versions() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("corecap-peer-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let fake = dir.join("tcpdump");
        std::fs::write(&fake, "#!/bin/sh\necho 'tcpdump version 9.9.9'\n").expect("write");
        std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        // A file that is not executable is not a peer.
        std::fs::write(dir.join("dumpcap"), "not a program").expect("write");
        let (found, missing) = detect(dir.to_str().expect("utf8"));
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].kind, PeerKind::Tcpdump);
        assert_eq!(found[0].version, "tcpdump version 9.9.9");
        assert_eq!(missing, vec![PeerKind::Dumpcap, PeerKind::NetsniffNg]);
    }
}
