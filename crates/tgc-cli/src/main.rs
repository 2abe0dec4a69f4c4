//! `tgc`: the command-line tool. Runs the same pipeline as `tgc::kernel!` on
//! files: `check` a graph, `run` it on data, `compile` it and dump stages.
//!
//! Exit status (the contract of `DESIGN.md`): 0 success; 1 a diagnosed user
//! error (message on stderr); 2 an internal error. No input makes it panic
//! with a backtrace: a panic is caught and reported as an internal error.

mod cli;
mod commands;
#[cfg(feature = "cuda")]
mod gpu;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    std::panic::set_hook(Box::new(|info| {
        eprintln!("tgc: internal error (a bug in tgc, please report it): {info}");
    }));
    let args = match cli::Cli::try_parse() {
        Ok(a) => a,
        Err(e) => {
            let code = match e.kind() {
                clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion => 0,
                _ => 1,
            };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    match std::panic::catch_unwind(|| commands::run(args)) {
        Ok(Ok(())) => ExitCode::SUCCESS,
        Ok(Err(e)) => {
            eprintln!("{}", e.message);
            ExitCode::from(e.code)
        }
        Err(_) => ExitCode::from(2),
    }
}
