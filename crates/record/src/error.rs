//! The recorder's errors, each with the cause under it (`source`), so the command line can
//! print the chain and a caller can ask what went wrong.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A value the user gave (a flag's), refused before anything started: `--interval 5ms:
    /// use 100ms or more`.
    #[error("{flag}: {message}")]
    Refused { flag: String, message: String },
    /// A size, duration or rate that is not one.
    #[error("{flag}: {source}")]
    Unit {
        flag: &'static str,
        #[source]
        source: plumb_sys::units::UnitError,
    },
    /// A flag that needs root, given without it.
    #[error("{flag} needs root ({why})")]
    NeedsRoot {
        flag: &'static str,
        why: &'static str,
    },
    /// A `--pid` that names no process plumb can read.
    #[error("--pid {pid}: {source}")]
    Pid {
        pid: u32,
        #[source]
        source: plumb_sys::Error,
    },
    /// The command to record could not start.
    #[error("cannot run {program}{}", source.as_ref().map(|e| format!(": {e}")).unwrap_or_default())]
    Command {
        program: String,
        #[source]
        source: Option<std::io::Error>,
    },
    /// The recording's file: creating, writing or marking it.
    #[error("{doing} {}", path.display())]
    File {
        doing: &'static str,
        path: PathBuf,
        #[source]
        source: plumb_store::Error,
    },
    /// The engine named by `--engine`: its URL, login or first query.
    #[error("--engine {source}")]
    Engine {
        #[source]
        source: plumb_engine::Error,
    },
    /// A database plumb reads (the primary `repl watch` follows).
    #[error(transparent)]
    Database(#[from] plumb_engine::Error),
    /// What the host says (/proc, /sys) could not be read.
    #[error(transparent)]
    Host(plumb_sys::Error),
    /// The kernel's tracing (BPF, perf events, tracefs).
    #[error(transparent)]
    Kernel(#[from] plumb_sys::KernelError),
    /// `--serve`: not an address.
    #[error("--serve {source}")]
    ServeAddr {
        #[source]
        source: crate::metrics_endpoint::AddrError,
    },
    /// `--serve`: the address could not be listened on.
    #[error("--serve {addr}: {source}")]
    Serve {
        addr: std::net::SocketAddr,
        #[source]
        source: std::io::Error,
    },
    /// A thread of the recorder's own ended in a panic.
    #[error("{0} panicked")]
    Panicked(&'static str),
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

impl Error {
    pub(crate) fn refused(flag: impl Into<String>, message: impl Into<String>) -> Error {
        Error::Refused {
            flag: flag.into(),
            message: message.into(),
        }
    }
}

pub type Result<T> = std::result::Result<T, Error>;
