//! What every command does around its work: first it takes down what a killed plumb left,
//! masks a password typed on the command line, and makes a closed output stop it cleanly; last
//! it tells a closed output from an error.

use std::io;

/// Every command first takes down what a killed plumb left (its ledger, its trace instances
/// and uprobes) and says so.
pub(crate) fn reclaim_what_killed_plumbs_left() {
    for r in plumb_lab::resources::reclaim_killed() {
        eprintln!("{}", plumb_report::words::reclaimed(&r));
    }
}

/// SIGPIPE on plumb's own output stops it cleanly (see plumb_sys::signal), and the panic of
/// the print that met the closed pipe says nothing.
pub(crate) fn handle_a_closed_output() {
    plumb_sys::signal::install_pipe();
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if !plumb_sys::signal::output_closed() {
            default(info)
        }
    }));
}

/// A password typed on the command line (a URL's, or password=) is remembered so that no
/// output shows it, and masked in plumb's own process title, which every local user can read;
/// plumb says so, since it was visible until now.
pub(crate) fn hide_passwords_in_argv(args: &[std::ffi::OsString]) {
    let mut any = false;
    for a in args.iter().map(|a| a.to_string_lossy()) {
        let a = a.as_ref();
        if plumb_engine::secret::mask_same_length(a) != a {
            plumb_engine::secret::remember_in(a);
            any = true;
        }
    }
    if any {
        plumb_sys::process::mask_own_cmdline(plumb_engine::secret::mask_same_length);
        eprintln!("plumb: warning: a password on the command line is visible to other local users in the process list (plumb masks its own copy now); use --password-file, or PGPASSWORD / MYSQL_PWD, instead");
    }
}

/// plumb's own output was closed (`plumb os | head`): not an error. A broken pipe under a
/// database error is the database's connection (a server that went away), which is one.
pub(crate) fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain()
        .take_while(|c| c.downcast_ref::<plumb_engine::Error>().is_none())
        .any(|c| {
            c.downcast_ref::<io::Error>()
            .is_some_and(|io| io.kind() == io::ErrorKind::BrokenPipe)
            || c.downcast_ref::<serde_json::Error>().and_then(|j| j.io_error_kind()) == Some(io::ErrorKind::BrokenPipe)
            || c.downcast_ref::<plumb_report::Error>().is_some_and(|r| {
                matches!(r, plumb_report::Error::Io(io) if io.kind() == io::ErrorKind::BrokenPipe)
            })
        })
}

/// `plumb: TEXT` on stderr, TEXT quoting a server or a file: its control characters shown,
/// never obeyed by the terminal.
pub(crate) fn say(text: &str) {
    eprintln!("plumb: {}", plumb_sys::visible::lines(text));
}

/// The command's exit code, and its error printed (`plumb: error: …` with its causes, each
/// left out where the message before it quotes it; passwords masked, control characters
/// shown). One place for a closed output, whatever the command: it stopped (cleaning up what it
/// made, as on SIGTERM) or finished, quietly, with the status of a command that lost its
/// reader; a write that failed on it may have panicked, and that panic is this, and silent.
/// A long command stopped by a signal (or its cancel) before it finished, with what plumb took
/// down: said once, at the end, with the signal's exit code. Every long command ends early
/// this one way (`stopped`).
#[derive(Debug)]
pub(crate) struct Stopped(String);

impl std::fmt::Display for Stopped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "interrupted; {}", self.0)
    }
}

impl std::error::Error for Stopped {}

/// `e` as the command's end: [`Stopped`] (saying `removed`) when the run was interrupted,
/// the error itself otherwise.
pub(crate) fn stopped(e: plumb_lab::Error, removed: &str) -> anyhow::Error {
    if e.is_interrupted() {
        anyhow::Error::new(Stopped(removed.to_string()))
    } else {
        e.into()
    }
}

/// Exit code for an interrupted run, after cleanup: 128 + the signal (130 for Ctrl-C, 143 for
/// SIGTERM, 129 for SIGHUP), as a shell reports it.
fn interrupted_code() -> i32 {
    plumb_sys::signal::exit_code_for(
        plumb_sys::signal::received().unwrap_or(plumb_sys::signal::SIGINT),
    )
}

pub(crate) fn exit_code(command: impl FnOnce() -> anyhow::Result<i32>) -> i32 {
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(command));
    if plumb_sys::signal::output_closed() {
        return plumb_sys::signal::OUTPUT_CLOSED_CODE;
    }
    match r.unwrap_or_else(|p| std::panic::resume_unwind(p)) {
        Ok(code) => code,
        Err(e) if is_broken_pipe(&e) => plumb_sys::signal::OUTPUT_CLOSED_CODE,
        Err(e) if e.is::<Stopped>() => {
            eprintln!("plumb: {e}");
            interrupted_code()
        }
        Err(e) => {
            let mut msg = format!("plumb: error: {e}");
            let mut last = e.to_string();
            for cause in e.chain().skip(1) {
                let c = cause.to_string();
                if !last.contains(&c) {
                    msg.push_str(&format!("\n  caused by: {c}"));
                }
                last = c;
            }
            eprintln!("{}", plumb_sys::visible::lines(&plumb_engine::redact(&msg)));
            2
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plumbs_own_output_closing_is_a_quiet_broken_pipe() {
        let pipe = || io::Error::new(io::ErrorKind::BrokenPipe, "Broken pipe");
        assert!(is_broken_pipe(&anyhow::Error::new(pipe())));
        assert!(is_broken_pipe(&anyhow::Error::new(
            plumb_report::Error::Io(pipe())
        )));
        // A database connection that broke is an error, not a closed stdout.
        let gone = plumb_engine::Error::Query {
            what: "pg_stat_wal_receiver".into(),
            message: "Broken pipe".into(),
            source: Some(Box::new(pipe())),
        };
        assert!(!is_broken_pipe(&anyhow::Error::new(gone)));
        // serde_json's own broken pipe (`--json | head -c 150`) is a closed output too.
        let json = serde_json::Error::io(pipe());
        assert!(is_broken_pipe(&anyhow::Error::new(json)));
    }
}
