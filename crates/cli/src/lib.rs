//! The plumb command line: flag definitions and one module per subcommand. Glue only: the work
//! happens in the reader, analysis and renderer crates.
#![forbid(unsafe_code)]

use anyhow::Result;
use std::io::{self, Write};

mod args;
mod cmd_compare;
mod cmd_delta;
mod cmd_engine;
mod cmd_engine_maria;
mod cmd_export;
mod cmd_fs;
mod cmd_io;
mod cmd_io_args;
mod cmd_k8s;
mod cmd_lab;
mod cmd_load;
mod cmd_mem;
mod cmd_os;
mod cmd_record;
mod cmd_recording;
mod cmd_repl;
mod cmd_statements;
mod cmd_trace;
mod docs;
mod docs_examples;
mod every;
#[cfg(test)]
mod help_truth;
mod neighbours;
mod progress;
mod typed;
#[cfg(test)]
mod vocabulary;

pub use args::{command, Cli, Command, FormatArg, GlobalArgs};

/// The command line as given, passwords masked (for reports and recordings).
static COMMAND_LINE: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();

/// The command line as typed, each argument's passwords masked.
pub(crate) fn command_args() -> Vec<String> {
    COMMAND_LINE
        .get()
        .cloned()
        .unwrap_or_else(|| std::env::args().map(|a| plumb_engine::redact(&a)).collect())
}

/// Run and return the exit code. Errors print as `plumb: error: ...` with their causes.
pub fn main() -> i32 {
    every::handle_a_closed_output();
    // Parsed from a copy taken first: masking rewrites the memory std::env::args reads.
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    // plumb's own SQL Server client process (see plumb_engine::mssql::MssqlConn).
    if args.len() == 2 && args[1] == plumb_engine::mssql::CLIENT_ARG {
        return plumb_engine::mssql::client_main();
    }
    plumb_engine::mssql::on_interrupt(plumb_sys::signal::stop_requested);
    COMMAND_LINE.get_or_init(|| {
        args.iter()
            .map(|a| plumb_engine::redact(&a.to_string_lossy()))
            .collect()
    });
    every::hide_passwords_in_argv(&args);
    let parsed = command()
        .try_get_matches_from(&args)
        .and_then(|m| <Cli as clap::FromArgMatches>::from_arg_matches(&m));
    let cli = match parsed {
        Ok(c) => c,
        Err(e) => {
            // Help and version go to stdout and exit 0; usage errors exit 2. A usage error may
            // quote the value given: passwords masked.
            let text = plumb_engine::redact(&e.render().to_string());
            if e.use_stderr() {
                eprint!("{text}");
            } else {
                print!("{text}");
                let _ = io::stdout().flush();
            }
            return e.exit_code();
        }
    };
    every::reclaim_what_killed_plumbs_left();
    every::exit_code(|| run(cli))
}

pub fn run(cli: Cli) -> Result<i32> {
    if cli.global.json
        && matches!(
            cli.global.format,
            Some(FormatArg::Text | FormatArg::Csv | FormatArg::Openmetrics)
        )
    {
        anyhow::bail!(
            "--json is --format json: it cannot go with --format {}; give one of them",
            match cli.global.format {
                Some(FormatArg::Csv) => "csv",
                Some(FormatArg::Openmetrics) => "openmetrics",
                _ => "text",
            }
        );
    }
    if cli.global.openmetrics() && !matches!(cli.command, Command::Export(_)) {
        anyhow::bail!(
            "--format openmetrics: only plumb export writes OpenMetrics (plumb record --serve ADDR exposes the live figures)"
        );
    }
    match &cli.command {
        Command::Lab(a) => cmd_lab::run(&cli.global, a),
        Command::Os(a) => cmd_os::run(&cli.global, a),
        Command::Io(a) => cmd_io::run(&cli.global, a),
        Command::Mem(a) => cmd_mem::run(&cli.global, a),
        Command::K8s(a) => cmd_k8s::run(&cli.global, a),
        Command::Record(a) => cmd_record::record(&cli.global, a),
        Command::Mark(a) => cmd_recording::mark(a),
        Command::Report(a) => cmd_recording::report(&cli.global, a),
        Command::Plot(a) => cmd_recording::plot(a),
        Command::Export(a) => cmd_export::export(&cli.global, a),
        Command::Compare(a) => cmd_compare::compare(&cli.global, a),
        Command::Cpu(a) => cmd_record::cpu(&cli.global, a),
        Command::Engine(a) => cmd_engine::run(&cli.global, a),
        Command::Trace(a) => cmd_trace::run(&cli.global, a),
        Command::Repl(a) => cmd_repl::run(&cli.global, a),
        Command::Fs(a) => cmd_fs::run(&cli.global, a),
        Command::Delta(a) => cmd_delta::run(&cli.global, a),
        Command::Load(a) => cmd_load::run(&cli.global, a),
        Command::Completions { shell } => {
            // Rendered in memory first: clap_complete panics on a write error, and a reader
            // that closes the pipe early (`| head`) is not an error.
            let mut cmd = command();
            let mut buf = Vec::new();
            clap_complete::generate(*shell, &mut cmd, "plumb", &mut buf);
            let mut out = io::stdout().lock();
            out.write_all(&buf)?;
            out.flush()?;
            Ok(0)
        }
        Command::Man { out } => docs::man(out.as_deref()),
    }
}

/// Write a result to stdout in the format the user chose.
pub(crate) fn emit<R: plumb_report::Render>(global: &GlobalArgs, r: &R) -> Result<()> {
    let stdout = io::stdout();
    let mut out = io::BufWriter::new(stdout.lock());
    plumb_report::emit(r, global.format(), &mut out)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{CommandFactory, Parser};
    use plumb_report::Format;

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
        command().debug_assert();
    }

    #[test]
    fn json_flag_is_format_json_and_conflicts_with_another_format() {
        let c = Cli::try_parse_from(["plumb", "os", "--json"]).unwrap();
        assert_eq!(c.global.format(), Format::Json);
        let c = Cli::try_parse_from(["plumb", "--format", "csv", "os"]).unwrap();
        assert_eq!(c.global.format(), Format::Csv);
        let c = Cli::try_parse_from(["plumb", "--format", "csv", "os", "--json"]).unwrap();
        let e = run(c).unwrap_err().to_string();
        assert!(e.contains("--json") && e.contains("csv"), "{e}");
        let c = Cli::try_parse_from(["plumb", "--format", "json", "os", "--json"]).unwrap();
        assert_eq!(c.global.format(), Format::Json);
    }

    #[test]
    fn bad_pid_is_a_usage_error() {
        let e = Cli::try_parse_from(["plumb", "os", "--pid", "abc"]).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        let e = Cli::try_parse_from(["plumb", "os", "--pid", "0"]).unwrap_err();
        assert_eq!(e.exit_code(), 2);
    }
}

/// A message that quotes its cause (`--interval 5x: not a duration`), with the cause kept under
/// it: the error's chain has it, and `main` does not print it twice.
pub(crate) fn quoting<E: std::error::Error + Send + Sync + 'static>(
    message: String,
    cause: E,
) -> anyhow::Error {
    anyhow::Error::new(cause).context(message)
}

/// `r`'s error after the flag that gave the value (`--engine postgres://…: refused`), its cause
/// kept under it.
pub(crate) fn flagged<T, E: std::error::Error + Send + Sync + 'static>(
    flag: &str,
    r: std::result::Result<T, E>,
) -> anyhow::Result<T> {
    r.map_err(|e| quoting(format!("{flag} {e}"), e))
}
