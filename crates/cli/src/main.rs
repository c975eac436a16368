//! The corecap command: packet capture on every core.
#![forbid(unsafe_code)]

mod args;
mod cmd;
mod config;
mod config_file;
mod flow_args;
mod print;
mod report;

use clap::{CommandFactory, FromArgMatches};

/// The arguments, with `extcap` put in front when corecap runs under the name of its
/// extcap link (Wireshark runs the programs of its extcap folder by their own names).
fn argv() -> (Vec<std::ffi::OsString>, bool) {
    let mut v: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let linked = v.first().is_some_and(|a0| {
        std::path::Path::new(a0).file_name() == Some(cmd::extcap::LINK_NAME.as_ref())
    });
    if linked {
        v.insert(1, "extcap".into());
    }
    let extcap = v.get(1).is_some_and(|a| a == "extcap");
    (v, extcap)
}

/// Ends on a usage error (or prints the help or version that was asked for).
fn usage(e: clap::Error, extcap: bool) -> ! {
    // Wireshark shows an extcap's stderr; a usage error there exits 1.
    if extcap && e.use_stderr() {
        let _ = e.print();
        std::process::exit(1);
    }
    e.exit()
}

/// The arguments as typed, with the settings of `serve --config FILE` under them.
fn parse(argv: Vec<std::ffi::OsString>, extcap: bool) -> args::Cli {
    let cmd = args::Cli::command();
    let m = cmd
        .clone()
        .try_get_matches_from(&argv)
        .unwrap_or_else(|e| usage(e, extcap));
    let (file, all) = match config_file::with_file(&argv, &cmd, &m) {
        Ok(Some(with)) => with,
        Ok(None) => return args::Cli::from_arg_matches(&m).unwrap_or_else(|e| usage(e, extcap)),
        Err(e) => {
            eprintln!("corecap: error: {e:#}");
            std::process::exit(2);
        }
    };
    match cmd
        .try_get_matches_from(all)
        .and_then(|m| args::Cli::from_arg_matches(&m))
    {
        Ok(c) => c,
        // The command line alone parsed: the file's value is the wrong one.
        Err(e) => {
            let text = e.to_string();
            let first = text.lines().next().unwrap_or_default();
            eprintln!(
                "corecap: error: {}: {}",
                file.display(),
                first.strip_prefix("error: ").unwrap_or(first)
            );
            std::process::exit(2);
        }
    }
}

fn main() {
    let (argv, extcap) = argv();
    let cli = parse(argv, extcap);
    let r = match cli.cmd {
        args::Cmd::Extcap(a) => cmd::extcap::run(*a),
        args::Cmd::Capture(a) => cmd::capture::run(*a),
        args::Cmd::Gen(a) => cmd::gen::run(a),
        args::Cmd::Lab { cmd } => cmd::lab::run(cmd),
        args::Cmd::Demo(a) => cmd::demo::run(a),
        args::Cmd::Bench(a) => cmd::bench::run(a),
        args::Cmd::Tune { cmd } => cmd::tune::run(cmd),
        args::Cmd::Generate { what } => cmd::generate::run(what),
        args::Cmd::Serve(a) => cmd::serve::run(*a),
        args::Cmd::Request(a) => cmd::request::run(a),
        args::Cmd::Index(a) => cmd::index::run(a),
        args::Cmd::Query(a) => cmd::query::run(a),
        args::Cmd::Flows(a) => cmd::flows::run(a),
        args::Cmd::Certs(a) => cmd::certs::run(&a),
        args::Cmd::Keygen { out } => cmd::seal::keygen(&out),
        args::Cmd::Decrypt {
            input,
            out,
            key_file,
            allow_truncated,
        } => cmd::seal::decrypt(&input, out.as_deref(), &key_file, allow_truncated),
    };
    // A sessions log that outlived the captures that used it writes what waits in it.
    corecap_store::write::sessions_log::flush_all();
    match r {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            // A closed pipe on `-w -` is the reader's choice, not an error.
            if print::pipe::is_broken_pipe(&e) {
                std::process::exit(0);
            }
            eprintln!("corecap: error: {e:#}");
            std::process::exit(if extcap { 1 } else { 2 });
        }
    }
}
