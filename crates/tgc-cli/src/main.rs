//! `tgc`: the command-line tool. Runs the same pipeline as `tgc::kernel!` on
//! files: `check` a graph, `run` it on data, `compile` it and dump stages,
//! `import` an ONNX model as graph-language text and weights.
//!
//! Exit status (the contract of `DESIGN.md`): 0 success; 1 a diagnosed user
//! error (message on stderr); 2 an internal error. No input makes it panic
//! with a backtrace: a panic is caught and reported as an internal error.
//! A reader that closes standard output early (`| head`) ends it quietly
//! with 0.

mod cli;
mod commands;
#[cfg(feature = "cuda")]
mod gpu;
mod import;
mod progress;
mod tune;
mod tune_gpu;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    std::panic::set_hook(Box::new(|info| {
        if stdout_closed(info) {
            // The reader went away (`tgc compile … | head`): nothing more
            // to print and nothing went wrong, as for other Unix tools.
            std::process::exit(0);
        }
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

/// Whether a panic is `print!`'s on a closed standard output (`EPIPE`: the
/// Rust runtime ignores `SIGPIPE`, so the write fails and `print!` panics
/// with std's message "failed printing to stdout: Broken pipe").
fn stdout_closed(info: &std::panic::PanicHookInfo<'_>) -> bool {
    let p = info.payload();
    let msg = p.downcast_ref::<String>().map(String::as_str).or_else(|| p.downcast_ref::<&str>().copied());
    msg.is_some_and(|m| m.starts_with("failed printing to stdout") && m.contains("Broken pipe"))
}
