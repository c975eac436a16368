//! Issue 39: corecap installs like a package. The man pages and shell completions that
//! the package ships (made by `corecap generate`) cover every subcommand.

use std::process::Command;

use crate::util::{corecap, Scratch};

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
    if crate::util::have("bash") {
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
