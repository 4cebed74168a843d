//! The lab's errors: refused before it started, interrupted, or a step that failed with its
//! cause under it (`source`), so the command line prints the chain (`error: …`, `caused by: …`)
//! and a caller can ask whether the lab was interrupted.

/// A cause of any kind, kept whole.
pub type Cause = Box<dyn std::error::Error + Send + Sync + 'static>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Stopped (Ctrl-C, SIGTERM, SIGHUP, or `cancel`); what the lab created is gone.
    #[error("interrupted")]
    Interrupted,
    /// What the lab will not run with (flags, the host, the server), in words, before
    /// anything started, or a step that cannot go on for a reason of its own.
    #[error("{0}")]
    Refused(String),
    /// The work directory has less room than the plan needs (bytes), before anything started.
    /// The command line words it (`plumb_report::words::no_room`); this is the plain form.
    #[error(
        "--dir {}: only {free} bytes free; the lab needs about {need} bytes there",
        dir.display()
    )]
    NoRoom {
        dir: std::path::PathBuf,
        free: u64,
        need: u64,
    },
    /// A step that failed: what it was doing (or the whole message, quoting the cause), and
    /// the cause.
    #[error("{message}")]
    Failed {
        message: String,
        #[source]
        source: Cause,
    },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The lab was stopped; what it created is gone.
#[derive(Debug, Clone, Copy)]
pub struct Interrupted;

impl From<Interrupted> for Error {
    fn from(_: Interrupted) -> Error {
        Error::Interrupted
    }
}

impl Error {
    /// A message that quotes its cause (`--engine postgres://…: connection refused`), with the
    /// cause kept under it.
    pub fn quoting(message: impl Into<String>, cause: impl Into<Cause>) -> Error {
        Error::Failed {
            message: message.into(),
            source: cause.into(),
        }
    }

    /// Whether the lab was interrupted, however deep under a step's error.
    pub fn is_interrupted(&self) -> bool {
        match self {
            Error::Interrupted => true,
            Error::Refused(_) | Error::NoRoom { .. } => false,
            Error::Failed { source, .. } => {
                source
                    .downcast_ref::<Error>()
                    .is_some_and(Error::is_interrupted)
                    || matches!(
                        source.downcast_ref::<plumb_io::Error>(),
                        Some(plumb_io::Error::Interrupted)
                    )
            }
        }
    }

    /// The message and its causes in one line (`doing this: because of that`), each cause left
    /// out where the message before it already quotes it.
    pub(crate) fn chain_text(&self) -> String {
        let mut out = self.to_string();
        let mut last = out.clone();
        let mut cause = std::error::Error::source(self);
        while let Some(c) = cause {
            let t = c.to_string();
            if !last.contains(&t) {
                out.push_str(": ");
                out.push_str(&t);
            }
            last = t;
            cause = c.source();
        }
        out
    }
}

/// What a step was doing, put over its error (the cause stays under it).
pub trait Context<T> {
    fn context(self, doing: impl Into<String>) -> Result<T>;
    fn with_context<S: Into<String>>(self, doing: impl FnOnce() -> S) -> Result<T>;
}

impl<T, E: Into<Cause>> Context<T> for std::result::Result<T, E> {
    fn context(self, doing: impl Into<String>) -> Result<T> {
        self.map_err(|e| Error::quoting(doing, e))
    }
    fn with_context<S: Into<String>>(self, doing: impl FnOnce() -> S) -> Result<T> {
        self.map_err(|e| Error::quoting(doing(), e))
    }
}

impl<T> Context<T> for Option<T> {
    fn context(self, doing: impl Into<String>) -> Result<T> {
        self.ok_or_else(|| Error::Refused(doing.into()))
    }
    fn with_context<S: Into<String>>(self, doing: impl FnOnce() -> S) -> Result<T> {
        self.ok_or_else(|| Error::Refused(doing().into()))
    }
}

/// The errors of the crates the lab drives, kept whole under the lab's.
macro_rules! cause {
    ($($t:ty),*) => {$(
        impl From<$t> for Error {
            fn from(e: $t) -> Error {
                Error::Failed { message: e.to_string(), source: Box::new(e) }
            }
        }
    )*};
}

/// The I/O runner's interruption is the lab's: one way to say a run ended early.
impl From<plumb_io::Error> for Error {
    fn from(e: plumb_io::Error) -> Error {
        match e {
            plumb_io::Error::Interrupted => Error::Interrupted,
            e => Error::Failed {
                message: e.to_string(),
                source: Box::new(e),
            },
        }
    }
}

cause!(
    std::io::Error,
    plumb_sys::Error,
    plumb_sys::KernelError,
    plumb_engine::Error,
    plumb_analyze::compare::InputError,
    plumb_record::Error,
    plumb_store::Error
);

/// Refuse with a message: `return Err(Error::Refused(format!(…)))`.
#[macro_export]
macro_rules! refuse {
    ($($arg:tt)*) => {
        return Err($crate::Error::Refused(format!($($arg)*)))
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_interruption_under_a_step_is_still_an_interruption() {
        let e: Result<()> = Err(Error::Interrupted);
        let e = e.context("running pgbench").unwrap_err();
        assert!(e.is_interrupted());
        assert!(!Error::Refused("no".into()).is_interrupted());
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "gone");
        assert!(!Error::quoting("reading x", io).is_interrupted());
    }

    #[test]
    fn the_chain_keeps_each_cause_and_says_it_once() {
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "No such file");
        let step: Result<()> = Err(io).context("--dir /nope");
        let e = step.context("checking the lab's directory").unwrap_err();
        assert_eq!(
            e.chain_text(),
            "checking the lab's directory: --dir /nope: No such file"
        );
        // A message that already quotes its cause does not repeat it.
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "No such file");
        let e = Error::quoting("--bin-dir /x: No such file", io);
        assert_eq!(e.chain_text(), "--bin-dir /x: No such file");
        let cause = std::error::Error::source(&e).expect("the cause is kept");
        assert!(cause.downcast_ref::<std::io::Error>().is_some());
    }
}
