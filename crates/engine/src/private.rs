//! A private PostgreSQL instance: plumb's own cluster in a directory it owns, run with the
//! distribution's binaries. initdb on first start, a free port, the socket in the directory,
//! settings on the command line, the log beside it. When plumb runs as root the cluster runs as
//! the `postgres` user (PostgreSQL refuses root).

use crate::{Error, Result};
use serde::{Deserialize, Serialize};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The superuser plumb creates in its clusters.
pub const SUPERUSER: &str = "plumb";

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Running {
    pub dir: PathBuf,
    pub pid: u32,
    pub port: u16,
    pub version: String,
    /// The OS user the server runs as.
    pub user: String,
    /// Settings given on the command line at start.
    #[serde(default)]
    pub settings: Vec<(String, String)>,
}

impl Running {
    /// Connection settings for the instance (Unix socket in its directory).
    pub fn config(&self, dbname: &str) -> postgres::Config {
        let mut c = postgres::Config::new();
        c.host_path(&self.dir)
            .port(self.port)
            .user(SUPERUSER)
            .dbname(dbname)
            .application_name("plumb");
        c.connect_timeout(std::time::Duration::from_secs(10));
        c
    }

    /// A URL for plumb's own `--engine` and for libpq tools (`psql "URL"`).
    pub fn url(&self) -> String {
        format!(
            "postgresql:///postgres?host={}&port={}&user={SUPERUSER}",
            self.dir.display(),
            self.port
        )
    }

    pub fn target(&self) -> crate::Target {
        crate::Target::new(&self.url())
    }
}

/// The newest Debian PostgreSQL bin directory (`/usr/lib/postgresql/N/bin`), or `PLUMB_PG_BIN`.
pub fn find_bin() -> Result<PathBuf> {
    if let Ok(p) = std::env::var("PLUMB_PG_BIN") {
        return Ok(PathBuf::from(p));
    }
    let mut best: Option<(u32, PathBuf)> = None;
    if let Ok(rd) = std::fs::read_dir("/usr/lib/postgresql") {
        for e in rd.flatten() {
            if let Some(v) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) {
                let bin = e.path().join("bin");
                if bin.join("initdb").exists()
                    && bin.join("pg_ctl").exists()
                    && best.as_ref().is_none_or(|b| v > b.0)
                {
                    best = Some((v, bin));
                }
            }
        }
    }
    best.map(|b| b.1).ok_or_else(|| {
        Error::Setup("no PostgreSQL server binaries found under /usr/lib/postgresql (apt-get install postgresql); or set PLUMB_PG_BIN".into())
    })
}

struct RunAs {
    name: String,
    uid: u32,
    gid: u32,
}

fn lookup_user(name: &str) -> Option<RunAs> {
    let c = std::ffi::CString::new(name).ok()?;
    // SAFETY: getpwnam returns a pointer into static storage or null; we copy out at once.
    let pw = unsafe { libc::getpwnam(c.as_ptr()) };
    if pw.is_null() {
        return None;
    }
    // SAFETY: non-null passwd entry.
    let (uid, gid) = unsafe { ((*pw).pw_uid, (*pw).pw_gid) };
    Some(RunAs {
        name: name.to_string(),
        uid,
        gid,
    })
}

fn run_as() -> Result<Option<RunAs>> {
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Ok(None);
    }
    lookup_user("postgres").map(Some).ok_or_else(|| {
        Error::Setup("plumb runs as root and PostgreSQL refuses to: a `postgres` OS user is needed (apt-get install postgresql creates it)".into())
    })
}

fn cmd(bin: &Path, prog: &str, who: &Option<RunAs>) -> Command {
    let mut c = Command::new(bin.join(prog));
    if let Some(u) = who {
        c.uid(u.uid).gid(u.gid);
        c.env("HOME", "/tmp");
    }
    // A foreign PGDATA or locale must not leak into plumb's cluster.
    c.env_remove("PGDATA").env("LC_ALL", "C.UTF-8");
    c
}

fn output(mut c: Command, what: &str) -> Result<String> {
    let o = c
        .output()
        .map_err(|e| Error::Setup(format!("{what}: cannot run: {e}")))?;
    if !o.status.success() {
        return Err(Error::Setup(format!(
            "{what} failed ({}): {}",
            o.status,
            String::from_utf8_lossy(&o.stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&o.stdout).into_owned())
}

fn free_port() -> Result<u16> {
    let l = std::net::TcpListener::bind("127.0.0.1:0")
        .map_err(|e| Error::Setup(format!("no free TCP port: {e}")))?;
    Ok(l.local_addr()
        .map_err(|e| Error::Setup(e.to_string()))?
        .port())
}

fn state_file(dir: &Path) -> PathBuf {
    dir.join("plumb-instance.json")
}

/// The instance running in `dir`, if any (its postmaster.pid names a live process).
pub fn status(dir: &Path) -> Result<Option<Running>> {
    let pidfile = dir.join("data/postmaster.pid");
    let Ok(text) = std::fs::read_to_string(&pidfile) else {
        return Ok(None);
    };
    let mut lines = text.lines();
    let Some(pid) = lines.next().and_then(|l| l.trim().parse::<u32>().ok()) else {
        return Ok(None);
    };
    // A live postgres process: not a zombie nobody reaped, not a reused PID.
    let alive = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|st| {
            let (head, rest) = st.rsplit_once(')')?;
            let comm = head.split_once('(')?.1;
            let state = rest.split_whitespace().next()?;
            Some((comm == "postgres" || comm == "postmaster") && state != "Z")
        })
        .unwrap_or(false);
    if !alive {
        return Ok(None);
    }
    let port = text
        .lines()
        .nth(3)
        .and_then(|l| l.trim().parse::<u16>().ok())
        .unwrap_or(0);
    let saved: Option<Running> = std::fs::read_to_string(state_file(dir))
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok());
    Ok(Some(Running {
        dir: dir.to_path_buf(),
        pid,
        port,
        version: saved
            .as_ref()
            .map(|s| s.version.clone())
            .unwrap_or_default(),
        user: saved.as_ref().map(|s| s.user.clone()).unwrap_or_default(),
        settings: saved.map(|s| s.settings).unwrap_or_default(),
    }))
}

#[derive(Debug, Clone, Default)]
pub struct StartOptions {
    /// `-c name=value` settings, e.g. ("shared_buffers", "128MB").
    pub settings: Vec<(String, String)>,
    /// The port to use if it is free (a restart keeps its port); else a free one.
    pub port: Option<u16>,
}

/// Start the instance in `dir` (initdb on first use). A running one is returned as it is.
pub fn start(dir: &Path, opts: &StartOptions) -> Result<Running> {
    if let Some(r) = status(dir)? {
        return Ok(r);
    }
    let bin = find_bin()?;
    let who = run_as()?;
    std::fs::create_dir_all(dir).map_err(|e| Error::Setup(format!("{}: {e}", dir.display())))?;
    let dir =
        std::fs::canonicalize(dir).map_err(|e| Error::Setup(format!("{}: {e}", dir.display())))?;
    if let Some(u) = &who {
        let c = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes()).expect("no NUL");
        // SAFETY: valid path; giving the directory to the server's user.
        if unsafe { libc::chown(c.as_ptr(), u.uid, u.gid) } != 0 {
            return Err(Error::Setup(format!(
                "cannot hand {} to the postgres user: {}",
                dir.display(),
                std::io::Error::last_os_error()
            )));
        }
    }
    let data = dir.join("data");
    // A postmaster.pid whose process is dead (killed, or a zombie nobody reaped) would make
    // PostgreSQL refuse to start; status() found no live postgres behind it.
    let pidfile = data.join("postmaster.pid");
    if pidfile.exists() {
        let _ = std::fs::remove_file(&pidfile);
    }
    if !data.join("PG_VERSION").exists() {
        let mut c = cmd(&bin, "initdb", &who);
        c.arg("-D")
            .arg(&data)
            .args(["-U", SUPERUSER, "-A", "trust", "-E", "UTF8", "--no-sync"]);
        output(c, "initdb")?;
    }
    let version = std::fs::read_to_string(data.join("PG_VERSION"))
        .unwrap_or_default()
        .trim()
        .to_string();
    let port = match opts
        .port
        .filter(|p| std::net::TcpListener::bind(("127.0.0.1", *p)).is_ok())
    {
        Some(p) => p,
        None => free_port()?,
    };
    let mut o = format!(
        "-p {port} -k {} -c listen_addresses=127.0.0.1",
        dir.display()
    );
    for (k, v) in &opts.settings {
        if !k
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
            || v.contains(['\'', '"', '\\'])
        {
            return Err(Error::Setup(format!(
                "setting {k}={v}: not a PostgreSQL setting plumb will pass"
            )));
        }
        o.push_str(&format!(" -c {k}={v}"));
    }
    let mut c = cmd(&bin, "pg_ctl", &who);
    c.arg("-D")
        .arg(&data)
        .arg("-o")
        .arg(&o)
        .arg("-l")
        .arg(dir.join("postgresql.log"))
        .args(["-w", "-t", "60", "start"]);
    // The server must not die with plumb's terminal: its own session.
    unsafe {
        c.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
    if let Err(e) = output(c, "pg_ctl start") {
        let log = std::fs::read_to_string(dir.join("postgresql.log")).unwrap_or_default();
        let tail: Vec<&str> = log.lines().rev().take(5).collect();
        return Err(Error::Setup(format!(
            "{e}; log: {}",
            tail.into_iter().rev().collect::<Vec<_>>().join(" | ")
        )));
    }
    let mut r = status(&dir)?.ok_or_else(|| {
        Error::Setup("the server started and went away again; see postgresql.log".into())
    })?;
    r.version = version;
    r.user = who
        .as_ref()
        .map(|u| u.name.clone())
        .unwrap_or_else(|| std::env::var("USER").unwrap_or_default());
    r.settings = opts.settings.clone();
    let _ = std::fs::write(
        state_file(&dir),
        serde_json::to_string_pretty(&r).unwrap_or_default(),
    );
    Ok(r)
}

/// The default directory: `PLUMB_PG_DIR`, else /var/tmp/plumb-pg-USER (reachable by the
/// `postgres` user, unlike a home directory).
pub fn default_dir() -> PathBuf {
    if let Ok(d) = std::env::var("PLUMB_PG_DIR") {
        return PathBuf::from(d);
    }
    // SAFETY: geteuid cannot fail.
    let uid = unsafe { libc::geteuid() };
    let user = std::env::var("USER")
        .ok()
        .filter(|u| !u.is_empty() && uid != 0)
        .unwrap_or_else(|| {
            if uid == 0 {
                "root".into()
            } else {
                uid.to_string()
            }
        });
    PathBuf::from(format!("/var/tmp/plumb-pg-{user}"))
}

/// Whether `dir` is a directory plumb made for an instance (so removing it destroys nothing else).
pub fn is_plumb_dir(dir: &Path) -> bool {
    state_file(dir).exists()
        || (dir.join("data/PG_VERSION").exists()
            && std::fs::read_dir(dir)
                .map(|rd| {
                    rd.flatten().all(|e| {
                        let n = e.file_name();
                        let n = n.to_string_lossy();
                        n == "data"
                            || n == "postgresql.log"
                            || n.starts_with(".s.PGSQL")
                            || n == "plumb-instance.json"
                    })
                })
                .unwrap_or(false))
}

/// Stop the instance and delete its directory (only a directory plumb made).
pub fn remove(dir: &Path) -> Result<()> {
    if !dir.exists() {
        return Ok(());
    }
    if !is_plumb_dir(dir) {
        return Err(Error::Setup(format!(
            "{}: not a plumb instance directory (no plumb-instance.json); left alone",
            dir.display()
        )));
    }
    stop(dir)?;
    std::fs::remove_dir_all(dir).map_err(|e| Error::Setup(format!("{}: {e}", dir.display())))
}

/// Stop the instance in `dir` (fast shutdown). Not running is not an error.
pub fn stop(dir: &Path) -> Result<bool> {
    if status(dir)?.is_none() {
        return Ok(false);
    }
    let bin = find_bin()?;
    let who = run_as()?;
    let mut c = cmd(&bin, "pg_ctl", &who);
    c.arg("-D")
        .arg(dir.join("data"))
        .args(["-m", "fast", "-w", "-t", "60", "stop"]);
    output(c, "pg_ctl stop")?;
    Ok(true)
}

/// Restart with the same settings and port (for cold runs). Not `pg_ctl restart`: that would
/// forget the log file and leave the server writing into plumb's pipe.
pub fn restart(dir: &Path) -> Result<Running> {
    let saved: Option<Running> = std::fs::read_to_string(state_file(dir))
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok());
    let was = status(dir)?;
    stop(dir)?;
    let opts = StartOptions {
        settings: saved
            .as_ref()
            .map(|s| s.settings.clone())
            .unwrap_or_default(),
        port: was.map(|r| r.port).or(saved.map(|s| s.port)),
    };
    start(dir, &opts)
}

/// Stops an instance this process started, on drop (errors, Ctrl-C unwinding through callers).
pub struct StopOnDrop(pub PathBuf);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        let _ = stop(&self.0);
    }
}
