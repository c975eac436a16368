//! `serve --config FILE`: serve's settings in a TOML file. Each key is one of serve's long
//! flags, its value the flag's, so the file goes through the same clap definitions, value
//! parsers and checks as the command line, into the same `ServeArgs`: there is one way
//! from what was typed to `config::serve`. A flag on the command line wins over the key.
//!
//! ```toml
//! interface = ["eth0"]          # -i eth0 (a list for a flag that repeats)
//! spool = "/var/lib/corecap/spool"
//! max-captures = 8
//! json = true                   # a switch: true gives it, false leaves it out
//! ```

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::parser::ValueSource;
use clap::{Arg, ArgMatches, Command};

/// Keys that are long flags but no setting.
const NOT_SETTINGS: [&str; 3] = ["config", "help", "version"];

/// With `serve --config FILE`: the file and the arguments with its settings added, each
/// key not given on the command line as `--KEY=VALUE` (once per element of a list; a bare
/// `--KEY` for a switch set to true). `None` without `--config`.
///
/// `cmd` is the whole command and `m` what it matched of `argv`.
pub(crate) fn with_file(
    argv: &[OsString],
    cmd: &Command,
    m: &ArgMatches,
) -> Result<Option<(PathBuf, Vec<OsString>)>> {
    let Some(("serve", sm)) = m.subcommand() else {
        return Ok(None);
    };
    let Some(path) = sm.get_one::<PathBuf>("config") else {
        return Ok(None);
    };
    let serve = cmd
        .find_subcommand("serve")
        .context("the serve command's definition")?;
    let added = settings(path, serve, sm)?;
    Ok(Some((
        path.clone(),
        argv.iter().cloned().chain(added).collect(),
    )))
}

/// The flags of the file's settings that the command line did not give.
fn settings(path: &Path, serve: &Command, typed: &ArgMatches) -> Result<Vec<OsString>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading the configuration {}", path.display()))?;
    let table: toml::Table = toml::from_str(&text)
        .with_context(|| format!("reading the configuration {}", path.display()))?;
    let mut flags = Vec::new();
    for (key, value) in &table {
        let Some(arg) = serve
            .get_arguments()
            .find(|a| a.get_long() == Some(key.as_str()) && !NOT_SETTINGS.contains(&key.as_str()))
        else {
            bail!(
                "{}: unknown key '{key}' (the keys are serve's long flags, as `corecap serve \
                 --help` lists them)",
                path.display()
            );
        };
        if typed.value_source(arg.get_id().as_str()) == Some(ValueSource::CommandLine) {
            continue;
        }
        flags.extend(
            flag(arg, key, value).with_context(|| format!("{}: key '{key}'", path.display()))?,
        );
    }
    Ok(flags)
}

/// `--KEY=VALUE` for each value of `value`, or `--KEY` for a switch set to true.
fn flag(arg: &Arg, key: &str, value: &toml::Value) -> Result<Vec<OsString>> {
    if !arg.get_action().takes_values() {
        return match value {
            toml::Value::Boolean(true) => Ok(vec![format!("--{key}").into()]),
            toml::Value::Boolean(false) => Ok(Vec::new()),
            _ => bail!("a switch: true or false"),
        };
    }
    let values: Vec<&toml::Value> = match value {
        toml::Value::Array(list) => list.iter().collect(),
        one => vec![one],
    };
    values
        .into_iter()
        .map(|v| Ok(format!("--{key}={}", scalar(v)?).into()))
        .collect()
}

/// A value as it would be typed after the flag.
fn scalar(v: &toml::Value) -> Result<String> {
    Ok(match v {
        toml::Value::String(s) => s.clone(),
        toml::Value::Integer(i) => i.to_string(),
        toml::Value::Float(f) => f.to_string(),
        toml::Value::Boolean(b) => b.to_string(),
        toml::Value::Datetime(_) | toml::Value::Array(_) | toml::Value::Table(_) => {
            bail!("a string, a number, or a list of them")
        }
    })
}
