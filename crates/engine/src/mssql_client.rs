//! plumb's SQL Server connections run in a process of their own, so that no server can take
//! plumb down with it.
//!
//! The driver (tiberius) believes the lengths a server declares: a row that declares a 2^40-byte
//! value makes it ask for that much memory, and a failed allocation aborts the whole process,
//! which no error handling can catch. So each connection is a child process (plumb itself, run
//! as `plumb __sqlserver-client`) that holds at most [`MEMORY_BOUND`] of memory, writes no core
//! file, sits in a process group of its own (a Ctrl-C at the terminal reaches plumb, which ends
//! it) and ends when plumb does. plumb sends it requests and reads its answers as JSON lines over
//! pipes (the password too: never on a command line or in the environment), waits a bounded time
//! for each, and stops waiting on SIGINT, SIGTERM and SIGHUP. A client that dies or runs out of
//! its bound becomes a clear error about that connection: exit 2, never an abort or a backtrace.

use crate::mssql_direct::{Direct, QUERY_WAIT};
use crate::mssql_result::ResultSet;
use crate::{Error, Result, Target};
use serde::{Deserialize, Serialize};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The argument that makes plumb the client process.
pub const CLIENT_ARG: &str = "__sqlserver-client";
/// The address space the client process may use.
pub const MEMORY_BOUND: u64 = 1 << 30;
/// How long plumb waits for a connection: the client's own bounds (10 s to connect, 15 s to log
/// in, per server of up to three redirects, then a query) and a margin.
const CONNECT_WAIT: Duration = Duration::from_secs(4 * 25 + 30 + 5);
/// The longest answer line read from the client (its results are bounded far below this).
const MAX_LINE: u64 = 512 << 20;

static PROGRAM: OnceLock<PathBuf> = OnceLock::new();

/// Run `program` as the client process instead of plumb's own executable (for programs that
/// link plumb's engine crate but are not plumb, such as tests).
pub fn use_client_program(program: &Path) {
    let _ = PROGRAM.set(program.to_path_buf());
}

use crate::interrupted;
pub use crate::on_interrupt;

#[derive(Serialize, Deserialize)]
enum Request {
    Connect {
        url: String,
        password: Option<String>,
    },
    Query {
        what: String,
        sql: String,
    },
    Execute {
        sql: String,
    },
}

#[derive(Serialize, Deserialize)]
enum Reply {
    Connected {
        session_id: u64,
        redirected_to: Option<String>,
    },
    Rows(ResultSet),
    Count(u64),
    Failed(Wire),
}

/// An [`Error`] as it crosses the pipe.
#[derive(Serialize, Deserialize)]
struct Wire {
    kind: String,
    head: String,
    message: String,
}

impl From<Error> for Wire {
    fn from(e: Error) -> Wire {
        let (kind, head, message) = match e {
            Error::Setup(m) => ("setup", String::new(), m),
            Error::Connect { url, message, .. } => ("connect", url, message),
            Error::Query { what, message, .. } => ("query", what, message),
            Error::Gone(m) => ("gone", String::new(), m),
            Error::Refused(m) => ("refused", String::new(), m),
            Error::Url(m) => ("url", String::new(), m),
        };
        Wire {
            kind: kind.into(),
            head,
            message,
        }
    }
}

impl Wire {
    fn error(self) -> Error {
        match self.kind.as_str() {
            "connect" => Error::Connect {
                url: self.head,
                message: self.message,
                source: None,
            },
            "query" => Error::Query {
                what: self.head,
                message: self.message,
                source: None,
            },
            "gone" => Error::Gone(self.message),
            "refused" => Error::Refused(self.message),
            "url" => Error::Url(self.message),
            _ => Error::Setup(self.message),
        }
    }

    /// Whether the client closed the connection after this error.
    fn ends_connection(&self) -> bool {
        matches!(self.kind.as_str(), "gone" | "refused")
    }
}

/// A SQL Server session, held by plumb's client process.
pub struct MssqlConn {
    child: Child,
    to: Option<ChildStdin>,
    from: Receiver<Option<Vec<u8>>>,
    stderr: Option<std::thread::JoinHandle<Vec<u8>>>,
    label: String,
    pub session_id: u64,
    redirected_to: Option<String>,
    /// Why the connection can no longer be used.
    lost: Option<String>,
}

impl MssqlConn {
    pub fn connect(t: &Target) -> Result<MssqlConn> {
        let label = t.shown();
        // A URL plumb cannot use is said before any process starts.
        crate::mssql_direct::parse_url(t)?;
        let program = PROGRAM
            .get()
            .cloned()
            .unwrap_or_else(plumb_sys::os::own_exe);
        let mut cmd = Command::new(&program);
        cmd.arg(CLIENT_ARG)
            .env_clear()
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        // SAFETY: only async-signal-safe calls (setpgid, setrlimit) between fork and exec.
        unsafe {
            cmd.pre_exec(|| {
                libc::setpgid(0, 0);
                let mem = libc::rlimit {
                    rlim_cur: MEMORY_BOUND,
                    rlim_max: MEMORY_BOUND,
                };
                libc::setrlimit(libc::RLIMIT_AS, &mem);
                let none = libc::rlimit {
                    rlim_cur: 0,
                    rlim_max: 0,
                };
                libc::setrlimit(libc::RLIMIT_CORE, &none);
                Ok(())
            });
        }
        let mut child = cmd.spawn().map_err(|e| {
            Error::Setup(format!(
                "starting plumb's SQL Server client ({}): {e}",
                program.display()
            ))
        })?;
        let (to, out, err) = (child.stdin.take(), child.stdout.take(), child.stderr.take());
        let (tx, from) = std::sync::mpsc::channel();
        if let Some(out) = out {
            std::thread::spawn(move || {
                let mut r = BufReader::new(out);
                loop {
                    let mut line = Vec::new();
                    match (&mut r).take(MAX_LINE).read_until(b'\n', &mut line) {
                        Ok(n) if n > 0 && line.ends_with(b"\n") => {
                            if tx.send(Some(line)).is_err() {
                                return;
                            }
                        }
                        _ => {
                            let _ = tx.send(None);
                            return;
                        }
                    }
                }
            });
        }
        let stderr = err.map(|e| {
            std::thread::spawn(move || {
                let mut kept = Vec::new();
                let _ = e.take(16 << 10).read_to_end(&mut kept);
                kept
            })
        });
        let mut c = MssqlConn {
            child,
            to,
            from,
            stderr,
            label: label.clone(),
            session_id: 0,
            redirected_to: None,
            lost: None,
        };
        let req = Request::Connect {
            url: t.url.clone(),
            password: t.password.clone(),
        };
        let as_connect = |e: Error| match e {
            e @ (Error::Connect { .. } | Error::Url(_) | Error::Setup(_)) => e,
            other => Error::Connect {
                url: label.clone(),
                message: other.to_string(),
                source: None,
            },
        };
        match c
            .call(&req, "connecting", CONNECT_WAIT)
            .map_err(as_connect)?
        {
            Reply::Connected {
                session_id,
                redirected_to,
            } => {
                c.session_id = session_id;
                c.redirected_to = redirected_to;
                Ok(c)
            }
            _ => Err(as_connect(c.lose("connecting", "an answer out of order"))),
        }
    }

    /// Run a query and read its first result set (see [`Direct::query`]'s bounds).
    pub fn query(&mut self, what: &str, sql: &str) -> Result<ResultSet> {
        let req = Request::Query {
            what: what.to_string(),
            sql: sql.to_string(),
        };
        match self.call(&req, what, QUERY_WAIT + Duration::from_secs(5))? {
            Reply::Rows(rs) => Ok(rs),
            _ => Err(self.lose(what, "an answer out of order")),
        }
    }

    /// Run statements (the workload's); the rows they returned. No time limit but plumb's own
    /// stop.
    pub fn execute(&mut self, sql: &str) -> Result<u64> {
        let req = Request::Execute {
            sql: sql.to_string(),
        };
        match self.call(&req, "the workload", Duration::MAX)? {
            Reply::Count(n) => Ok(n),
            _ => Err(self.lose("the workload", "an answer out of order")),
        }
    }

    /// Where the server redirected this connection, if it did.
    pub fn redirected_to(&self) -> Option<&str> {
        self.redirected_to.as_deref()
    }

    fn call(&mut self, req: &Request, what: &str, wait: Duration) -> Result<Reply> {
        if let Some(why) = &self.lost {
            return Err(Error::Gone(format!("{what}: {why}")));
        }
        let mut line = serde_json::to_vec(req).map_err(|e| Error::Setup(e.to_string()))?;
        line.push(b'\n');
        let sent = match self.to.as_mut() {
            Some(w) => w.write_all(&line).and_then(|_| w.flush()).is_ok(),
            None => false,
        };
        if !sent {
            return Err(self.lose(what, ""));
        }
        let t0 = Instant::now();
        loop {
            match self.from.recv_timeout(Duration::from_millis(100)) {
                Ok(Some(bytes)) => {
                    return match serde_json::from_slice::<Reply>(&bytes) {
                        Ok(Reply::Failed(w)) => {
                            let ends = w.ends_connection();
                            let e = w.error();
                            if ends {
                                self.end(&e.to_string());
                            }
                            Err(e)
                        }
                        Ok(r) => Ok(r),
                        Err(_) => Err(self.lose(what, "an answer plumb could not read")),
                    };
                }
                Ok(None) | Err(RecvTimeoutError::Disconnected) => return Err(self.lose(what, "")),
                Err(RecvTimeoutError::Timeout) => {
                    if interrupted() {
                        self.end("stopped by a signal");
                        return Err(Error::Gone(format!("{what}: stopped by a signal")));
                    }
                    if t0.elapsed() > wait {
                        let why = format!(
                            "no answer within {} s (the connection is dropped)",
                            wait.as_secs()
                        );
                        self.end(&why);
                        return Err(Error::Gone(format!("{what}: {why}")));
                    }
                }
            }
        }
    }

    /// End the client process; later calls fail with `why`.
    fn end(&mut self, why: &str) {
        self.lost.get_or_insert_with(|| why.to_string());
        self.to = None;
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// The client ended (or said something out of order): the error that says why.
    fn lose(&mut self, what: &str, said: &str) -> Error {
        // Closing its input ends a client that is still waiting for a request.
        self.to = None;
        let t0 = Instant::now();
        let status = loop {
            match self.child.try_wait() {
                Ok(Some(s)) => break Some(s),
                Ok(None) if t0.elapsed() < Duration::from_secs(2) => {
                    std::thread::sleep(Duration::from_millis(20))
                }
                _ => {
                    let _ = self.child.kill();
                    break self.child.wait().ok();
                }
            }
        };
        let stderr = self
            .stderr
            .take()
            .and_then(|h| h.join().ok())
            .unwrap_or_default();
        let stderr = String::from_utf8_lossy(&stderr);
        // What the client said, without the runtime's advice about backtraces.
        let said_lines: Vec<&str> = stderr
            .lines()
            .filter(|l| !l.trim().is_empty() && !l.starts_with("note: "))
            .collect();
        let last = said_lines
            .iter()
            .find(|l| l.contains("memory allocation"))
            .or(said_lines.last())
            .copied();
        use std::os::unix::process::ExitStatusExt;
        let sig = status.and_then(|s| s.signal());
        let e = if last.is_some_and(|l| l.contains("memory allocation"))
            || sig == Some(libc::SIGABRT)
        {
            Error::Refused(format!(
                "{what}: the server sent more than plumb holds for one connection ({} MiB: {}); the connection is closed",
                MEMORY_BOUND >> 20,
                last.unwrap_or("the client process aborted")
            ))
        } else if !said.is_empty() {
            Error::Refused(format!(
                "{what}: plumb's SQL Server client sent {said}; the connection is closed"
            ))
        } else {
            let how = match (status.and_then(|s| s.code()), sig) {
                (Some(c), _) => format!("exit status {c}"),
                (None, Some(s)) => format!("signal {s}"),
                _ => "unknown status".into(),
            };
            Error::Gone(format!(
                "{what}: plumb's SQL Server client for {} ended ({how}){}",
                self.label,
                last.map(|l| format!(": {l}")).unwrap_or_default()
            ))
        };
        self.lost.get_or_insert_with(|| e.to_string());
        e
    }
}

impl std::fmt::Debug for MssqlConn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "MssqlConn({}, session {})", self.label, self.session_id)
    }
}

impl Drop for MssqlConn {
    fn drop(&mut self) {
        self.to = None;
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The client process: `plumb __sqlserver-client`. Reads requests on standard input, answers
/// on standard output, ends when plumb closes its input, when plumb is gone, or after an error
/// that ends the connection.
pub fn client_main() -> i32 {
    // A panic in the driver is turned into an error by `guarded`; nothing else is printed.
    std::panic::set_hook(Box::new(|_| {}));
    // Ends with plumb: when plumb is gone, this process is given another parent.
    // SAFETY: getppid has no preconditions.
    let parent = unsafe { libc::getppid() };
    std::thread::spawn(move || loop {
        std::thread::sleep(Duration::from_millis(200));
        // SAFETY: getppid has no preconditions; _exit ends the process at once.
        unsafe {
            if libc::getppid() != parent {
                libc::_exit(1);
            }
        }
    });
    let stdin = std::io::stdin();
    let mut out = std::io::stdout().lock();
    let mut conn: Option<Direct> = None;
    for line in stdin.lock().lines() {
        let Ok(line) = line else { return 1 };
        let Ok(req) = serde_json::from_str::<Request>(&line) else {
            return 2;
        };
        let reply = match (req, conn.as_mut()) {
            (Request::Connect { url, password }, _) => {
                match Direct::connect(&Target { url, password }) {
                    Ok(d) => {
                        let r = Reply::Connected {
                            session_id: d.session_id,
                            redirected_to: d.redirected_to().map(str::to_string),
                        };
                        conn = Some(d);
                        r
                    }
                    Err(e) => Reply::Failed(e.into()),
                }
            }
            (Request::Query { what, sql }, Some(d)) => match d.query(&what, &sql) {
                Ok(rs) => Reply::Rows(rs),
                Err(e) => Reply::Failed(e.into()),
            },
            (Request::Execute { sql }, Some(d)) => match d.execute(&sql) {
                Ok(n) => Reply::Count(n),
                Err(e) => Reply::Failed(e.into()),
            },
            (_, None) => Reply::Failed(Error::Setup("not connected".into()).into()),
        };
        let ends = matches!(&reply, Reply::Failed(w) if w.ends_connection());
        let written = serde_json::to_writer(&mut out, &reply).is_ok()
            && out.write_all(b"\n").is_ok()
            && out.flush().is_ok();
        if !written || ends {
            return 1;
        }
    }
    0
}
