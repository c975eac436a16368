//! Issue 39: corecap installs like a package. The man pages and shell completions that
//! the package ships (made by `corecap generate`) cover every subcommand, and `serve
//! --config FILE` reads serve's flags from TOML: an unknown key fails with its name, a
//! flag on the command line wins over the file, and the example the package puts in
//! /etc/corecap loads.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::util::{bin, corecap, lines_of, Scratch};

/// Every visible command as its path of names: `[]` (corecap), `["capture"]`, `["lab",
/// "up"]` ..., read from the `Commands:` sections of `--help`.
fn commands() -> Vec<Vec<String>> {
    let mut all = vec![Vec::new()];
    let mut i = 0;
    while i < all.len() {
        let path = all[i].clone();
        let help = corecap(&[path.iter().map(String::as_str).collect(), vec!["--help"]].concat());
        assert!(help.status.success(), "{path:?} --help");
        let text = String::from_utf8_lossy(&help.stdout).into_owned();
        let names = text
            .lines()
            .skip_while(|l| *l != "Commands:")
            .skip(1)
            .take_while(|l| !l.is_empty())
            .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
            .filter_map(|l| l.split_whitespace().next())
            .filter(|n| *n != "help");
        all.extend(names.map(|n| [path.clone(), vec![n.to_owned()]].concat()));
        i += 1;
    }
    all
}

#[test]
fn issue39_a_man_page_for_every_subcommand() {
    let cmds = commands();
    assert!(cmds.len() > 20, "{cmds:?}");
    let dir = Scratch::new("man");
    let o = corecap(&["generate", "man", dir.path("man").to_str().expect("utf8")]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let mut pages: Vec<String> = std::fs::read_dir(dir.path("man"))
        .expect("man dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    pages.sort();
    let mut expected: Vec<String> = cmds
        .iter()
        .map(|p| {
            format!(
                "{}.1",
                [vec!["corecap".to_owned()], p.clone()].concat().join("-")
            )
        })
        .collect();
    expected.sort();
    // One page per command, none for the hidden `generate`.
    assert_eq!(pages, expected);
    for p in &cmds {
        let name = [vec!["corecap".to_owned()], p.clone()].concat();
        let page = std::fs::read_to_string(dir.path("man").join(format!("{}.1", name.join("-"))))
            .expect("page");
        // roff escapes the hyphens of the NAME line, and the synopsis spells the command.
        assert!(
            page.starts_with(".ie") && page.contains(".SH NAME"),
            "{name:?}"
        );
        assert!(
            page.contains(&format!("\n{} \\- ", name.join("\\-"))),
            "{name:?}: {page}"
        );
        assert!(
            page.contains(&format!("\\fB{}\\fR", name.join(" "))),
            "{name:?}"
        );
        assert!(
            page.contains("corecap 0."),
            "{name:?}: the footer names corecap"
        );
    }
    let top = std::fs::read_to_string(dir.path("man").join("corecap.1")).expect("corecap.1");
    for p in cmds.iter().filter(|p| p.len() == 1) {
        assert!(
            top.contains(&format!("corecap\\-{}(1)", p[0])),
            "corecap.1 lists {p:?}"
        );
    }
}

#[test]
fn issue39_completions_for_bash_zsh_and_fish_name_every_subcommand() {
    let cmds = commands();
    for shell in ["bash", "zsh", "fish"] {
        let o = corecap(&["generate", "completion", shell]);
        assert!(o.status.success(), "{shell}");
        let script = String::from_utf8_lossy(&o.stdout);
        assert!(script.len() > 1000, "{shell}: {script}");
        for hidden in ["__subcmd__generate", "(generate)", "\"generate\""] {
            assert!(
                !script.contains(hidden),
                "{shell} offers the hidden command"
            );
        }
        for p in cmds.iter().filter(|p| !p.is_empty()) {
            let leaf = p.last().expect("name");
            let named = match shell {
                "bash" => script.contains(&format!(
                    "cmd=\"corecap__subcmd__{}\"",
                    p.join("__subcmd__")
                )),
                "zsh" => script.contains(&format!("\n'{leaf}:")),
                _ => script.lines().any(|l| {
                    l.contains(&format!("-a \"{leaf}\""))
                        && (p.len() == 1 && l.contains("__fish_corecap_needs_command")
                            || l.contains(&format!("__fish_corecap_using_subcommand {}", p[0])))
                }),
            };
            assert!(named, "{shell} completion lacks {p:?}");
        }
    }
    // bash reads the script without a syntax error (it is sourced at every new shell).
    if crate::util::need("bash") {
        let s = Scratch::new("bash");
        let f = s.path("corecap");
        std::fs::write(&f, corecap(&["generate", "completion", "bash"]).stdout).expect("write");
        let o = Command::new("bash")
            .arg("-n")
            .arg(&f)
            .output()
            .expect("bash -n");
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
}

/// Runs `corecap serve ARGS` and waits for its exit (at most 30 s; then it is killed).
fn serve_exit(args: &[&str]) -> Output {
    let mut child = Command::new(bin())
        .arg("serve")
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start corecap serve");
    let deadline = Instant::now() + Duration::from_secs(30);
    while child.try_wait().expect("wait").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("serve kept running");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().expect("output")
}

/// Starts `corecap serve ARGS`, returns it and its `serving on ...` line once it is up.
fn serve_up(args: &[&str]) -> (Child, String) {
    let mut child = Command::new(bin())
        .arg("serve")
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start corecap serve");
    let lines = lines_of(child.stderr.take().expect("stderr"));
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match lines.recv_timeout(Duration::from_millis(100)) {
            Ok(l) if l.contains("serving on") => return (child, l),
            Ok(_) => {}
            Err(_) => {
                if let Ok(Some(st)) = child.try_wait() {
                    panic!("serve exited: {st}");
                }
                assert!(Instant::now() < deadline, "serve did not come up in 30 s");
            }
        }
    }
}

/// SIGTERM, and the exit.
fn stop(mut child: Child) {
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let st = child.wait().expect("wait");
    assert!(st.success(), "serve ended {st}");
}

fn s(p: &Path) -> &str {
    p.to_str().expect("utf8")
}

#[test]
fn issue39_serve_config_unknown_key_fails_naming_it() {
    let dir = Scratch::new("config-unknown");
    let file = dir.path("corecap.toml");
    std::fs::write(
        &file,
        format!(
            "socket = \"{}\"\nspool = \"{}\"\nmax-captures = 3\nmax-capture = 4\n",
            s(&dir.path("api.sock")),
            s(&dir.path("spool"))
        ),
    )
    .expect("write");
    let o = serve_exit(&["--config", s(&file)]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("unknown key 'max-capture'"), "{err}");
    assert!(err.contains(s(&file)), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    // Nothing was made: it stopped before the spool was opened.
    assert!(!dir.path("spool").exists());

    // A value of the wrong kind names the key or the flag, and the file.
    for (text, says) in [
        ("json = 1\n", "key 'json'"),
        ("max-captures = \"many\"\n", "--max-captures"),
        ("spool = { a = 1 }\n", "key 'spool'"),
        ("socket = [\"a\", \"b\"]\n", "--socket"),
        ("[serve]\nspool = \"x\"\n", "unknown key 'serve'"),
        ("spool = \n", "TOML parse error"),
    ] {
        std::fs::write(&file, text).expect("write");
        let o = serve_exit(&["--config", s(&file)]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{text}: {err}");
        assert!(
            err.contains(says) && err.contains(s(&file)),
            "{text}: {err}"
        );
    }
    let o = serve_exit(&["--config", s(&dir.path("missing.toml"))]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("missing.toml"));
}

#[test]
fn issue39_serve_flag_wins_over_config_file() {
    let dir = Scratch::new("config-flag");
    let file = dir.path("corecap.toml");
    let socket = dir.path("api.sock");
    std::fs::write(
        &file,
        format!(
            "# a comment\nsocket = \"{}\"\nspool = \"{}\"\nmax-captures = 3\nflush-interval = 0.5\n",
            s(&socket),
            s(&dir.path("file-spool"))
        ),
    )
    .expect("write");
    let flag_spool = dir.path("flag-spool");
    let (child, line) = serve_up(&["--config", s(&file), "--spool", s(&flag_spool)]);
    // The socket and the limit come from the file; the spool from the flag.
    assert!(
        line.contains(&format!("serving on {}", s(&socket))),
        "{line}"
    );
    assert!(
        line.contains(&format!("spool {}", s(&flag_spool))),
        "{line}"
    );
    assert!(line.contains("at most 3 captures"), "{line}");
    stop(child);
    assert!(flag_spool.is_dir());
    assert!(!dir.path("file-spool").exists());

    // A flag that repeats: the command line's list replaces the file's (whose collector
    // alone is refused), and a number on the command line the file's.
    std::fs::write(&file, "max-captures = 5\nipfix-collector = [\"nowhere\"]\n").expect("write");
    let rest = ["--socket", s(&socket), "--spool", s(&flag_spool)];
    let (child, line) = serve_up(
        &[
            &["--config", s(&file), "--max-captures", "7"][..],
            &["--ipfix-collector", "ipfix://127.0.0.1:4739"],
            &rest,
        ]
        .concat(),
    );
    assert!(line.contains("at most 7 captures"), "{line}");
    stop(child);
    let o = serve_exit(&[&["--config", s(&file)][..], &rest].concat());
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("'nowhere'"), "{err}");
}

fn example() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("debian/corecap.toml")
}

#[test]
fn issue39_the_packaged_example_config_loads() {
    // Its keys, the commented ones too, are serve's flags.
    let help = String::from_utf8_lossy(&corecap(&["serve", "--help"]).stdout).into_owned();
    let text = std::fs::read_to_string(example()).expect("example");
    let keys: Vec<&str> = text
        .lines()
        .map(|l| l.trim_start_matches("# "))
        .filter_map(|l| l.split_once(" = ").map(|(k, _)| k))
        .filter(|k| k.chars().all(|c| c.is_ascii_lowercase() || c == '-'))
        .collect();
    assert!(keys.len() > 10, "{keys:?}");
    for k in &keys {
        assert!(
            help.contains(&format!("--{k} ")) || help.contains(&format!("--{k}\n")),
            "{k}"
        );
    }
    // As the package installs it, with the paths a test may use given as flags.
    let dir = Scratch::new("config-example");
    let (child, line) = serve_up(&[
        "--config",
        s(&example()),
        "--socket",
        s(&dir.path("api.sock")),
        "--spool",
        s(&dir.path("spool")),
    ]);
    assert!(line.contains(s(&dir.path("spool"))), "{line}");
    stop(child);
}
