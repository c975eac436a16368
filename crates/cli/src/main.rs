//! The corecap command: packet capture on every core.
#![forbid(unsafe_code)]

mod args;
mod cmd;
mod config;
mod report;

use clap::Parser;

fn main() {
    let cli = args::Cli::parse();
    let r = match cli.cmd {
        args::Cmd::Capture(a) => cmd::capture::run(*a),
        args::Cmd::Gen(a) => cmd::gen::run(a),
        args::Cmd::Lab { cmd } => cmd::lab::run(cmd),
        args::Cmd::Demo(a) => cmd::demo::run(a),
        args::Cmd::Bench(a) => cmd::bench::run(a),
        args::Cmd::Tune { cmd } => cmd::tune::run(cmd),
        args::Cmd::Serve(a) => cmd::serve::run(*a),
        args::Cmd::Request(a) => cmd::request::run(a),
        args::Cmd::Index(a) => cmd::index::run(a),
        args::Cmd::Query(a) => cmd::query::run(a),
        args::Cmd::Keygen { out } => cmd::seal::keygen(&out),
        args::Cmd::Decrypt {
            input,
            out,
            key_file,
            allow_truncated,
        } => cmd::seal::decrypt(&input, out.as_deref(), &key_file, allow_truncated),
    };
    match r {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            // A closed pipe on `-w -` is the reader's choice, not an error.
            if e.chain().any(|c| {
                c.downcast_ref::<std::io::Error>()
                    .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
            }) {
                std::process::exit(0);
            }
            eprintln!("corecap: error: {e:#}");
            std::process::exit(2);
        }
    }
}
