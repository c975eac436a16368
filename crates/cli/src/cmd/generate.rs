//! `corecap generate`: the man pages and shell completions, made from the clap
//! definitions in `args.rs`, so they never drift from `--help`. The package build runs it
//! on the binary it ships (`crates/cli/debian/build`); `cargo build` needs nothing more.

use std::io::Write;
use std::path::Path;

use anyhow::{Context, Result};
use clap::{Command, CommandFactory};

use crate::args::{Cli, GenerateCmd};

pub(crate) fn run(what: GenerateCmd) -> Result<i32> {
    match what {
        GenerateCmd::Man { dir } => man(&dir)?,
        GenerateCmd::Completion { shell } => completion(shell)?,
    }
    Ok(0)
}

/// Writes `corecap.1` and one page per visible subcommand, `corecap-SUB[-SUB].1`.
fn man(dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("making {}", dir.display()))?;
    let mut root = Cli::command().disable_help_subcommand(true);
    root.build();
    page(&root, dir)
}

/// The page of `cmd` and of its visible subcommands, each with corecap's name and version
/// in the footer (clap_mangen would put the subcommand's own name there).
fn page(cmd: &Command, dir: &Path) -> Result<()> {
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        page(sub, dir)?;
    }
    let man =
        clap_mangen::Man::new(cmd.clone()).source(concat!("corecap ", env!("CARGO_PKG_VERSION")));
    man.generate_to(dir)
        .with_context(|| format!("writing {}", dir.join(man.get_filename()).display()))?;
    Ok(())
}

/// Prints the completion script of `shell`. It is made in memory first: a closed stdout
/// is then a write error (exit 0, as for `-w -`), not a panic inside clap_complete.
fn completion(shell: clap_complete::Shell) -> Result<()> {
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut visible(), "corecap", &mut script);
    let mut out = std::io::stdout().lock();
    out.write_all(&script)
        .and_then(|()| out.flush())
        .context("writing the completion script")
}

/// The command without its hidden subcommands (this one), which clap_complete would
/// offer: corecap's about and version over its visible subcommands.
fn visible() -> Command {
    let root = Cli::command();
    let subcommands: Vec<Command> = root
        .get_subcommands()
        .filter(|s| !s.is_hide_set())
        .cloned()
        .collect();
    let mut c = Command::new("corecap")
        .version(env!("CARGO_PKG_VERSION"))
        .propagate_version(true)
        .subcommands(subcommands);
    if let Some(about) = root.get_about() {
        c = c.about(about.clone());
    }
    c
}
