//! A private MariaDB: plumb's own server in a directory it owns, run with Debian's mariadbd,
//! as safe as the private PostgreSQL (`private`), whose directory handling it shares: plumb
//! creates the directory (or takes an empty one the caller owns), never follows a link for
//! it, writes a manifest of what it created and removes only that.
//!
//! Who can reach it: nobody but the user who started plumb. The server listens on no TCP port
//! (`--skip-networking`); its socket is in `DIR/sock`, a directory only the server's OS user
//! can enter (root can too). mariadb-install-db makes the data directory with no test
//! database and no anonymous account; on the first start plumb drops every account but the
//! caller's (`root` for root, else the caller's OS user name) and the locked `mariadb.sys`
//! (the definer of the `mysql.user` view), and leaves the caller's identified by `unix_socket`
//! only: the server admits the OS user at the socket's other end, by that name, and nobody
//! else. An interrupted first start (no lock-down yet) is bootstrapped again from nothing.
//!
//! When plumb runs as root the server runs as the `mysql` user (Debian's package makes it).

pub use crate::private::MariaRunning;
use crate::private::{
    absolute, caller, open_as, setup_err, write_manifest, InstanceDir, MariaDbState as State,
    Removed,
};
use crate::{Error, Result};
use mysql::prelude::Queryable;
use plumb_sys::os::{euid, user_by_name, User};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const MARIADBD: &str = "/usr/sbin/mariadbd";
const INSTALL_DB: &str = "/usr/bin/mariadb-install-db";
/// util-linux's unshare (Debian's util-linux, which plumb's setup installs).
const UNSHARE: &str = "/usr/bin/unshare";
const LOG: &str = "mariadb.log";

/// How to start it.
#[derive(Debug, Clone, Default)]
pub struct MariaOptions {
    /// innodb_buffer_pool_size (default 128M).
    pub buffer_pool: Option<String>,
    /// Other server options, NAME=VALUE.
    pub settings: Vec<(String, String)>,
}

/// The OS user the server runs as: `mysql` when plumb runs as root, else the caller.
fn server_user() -> Result<User> {
    if euid() != 0 {
        return caller();
    }
    user_by_name("mysql").ok_or_else(|| {
        Error::Setup(
            "plumb runs as root and runs MariaDB as the `mysql` OS user, which does not exist (apt-get install mariadb-server creates it)".into(),
        )
    })
}

/// The account plumb leaves: the caller's OS user name (`root` for root).
fn login_name() -> Result<String> {
    let name = caller()?.name;
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
    {
        return Err(Error::Setup(format!(
            "the OS user name {name:?} is not one plumb passes to MariaDB as an account name"
        )));
    }
    Ok(name)
}

/// `s` as an SQL string literal.
fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\\', "\\\\").replace('\'', "''"))
}

/// Options plumb sets itself, so that nobody but the caller reaches the server.
const OWN: [&str; 12] = [
    "socket",
    "port",
    "bind-address",
    "skip-networking",
    "datadir",
    "user",
    "pid-file",
    "log-error",
    "tmpdir",
    "plugin-dir",
    "init-file",
    "skip-grant-tables",
];

fn check_settings(settings: &[(String, String)]) -> Result<()> {
    for (k, v) in settings {
        let norm = k.replace('_', "-");
        if k.is_empty()
            || !k
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
            || v.contains(['\n', '\r', '\0'])
        {
            return Err(Error::Setup(format!(
                "setting {k}={v}: not a MariaDB option plumb will pass"
            )));
        }
        if OWN.contains(&norm.as_str()) || norm.starts_with("skip-grant") || norm == "networking" {
            return Err(Error::Setup(format!(
                "setting {k}: plumb sets it itself so that nobody but you can reach the server"
            )));
        }
    }
    Ok(())
}

/// Start the private MariaDB in `dir`, or find it running (`true`: it already ran).
pub fn start_or_find(dir: &Path, opts: &MariaOptions) -> Result<(MariaRunning, bool)> {
    check_settings(&opts.settings)?;
    for p in [MARIADBD, INSTALL_DB] {
        if !Path::new(p).exists() {
            return Err(Error::Setup(format!(
                "{p} not found: the private MariaDB runs Debian's server (apt-get install mariadb-server)"
            )));
        }
    }
    let sock = absolute(dir)?.join("sock/mysqld.sock");
    if sock.as_os_str().len() > 107 {
        return Err(Error::Setup(format!(
            "{}: too deep for the server's socket ({} bytes with sock/mysqld.sock; a Unix socket path holds 107): choose a shorter path",
            dir.display(),
            sock.as_os_str().len()
        )));
    }
    let server = server_user()?;
    let mut d = open_as(dir, true, &server)?.ok_or_else(|| setup_err(dir, "cannot open"))?;
    refuse_postgres(&d)?;
    if let Some(r) = running_in(&d) {
        if d.manifest.mariadb.as_ref().is_some_and(|s| s.ready) {
            return Ok((r, true));
        }
        // The server of a first start that was interrupted before the lock-down: stopped,
        // and the data made again.
        terminate(r.pid)?;
    }
    if d.manifest.mariadb.is_none() {
        // Said before anything is made, so that what follows is known as a MariaDB's.
        d.manifest.mariadb = Some(State {
            ready: false,
            last: None,
        });
        write_manifest(&d.dir, &d.manifest)?;
    }
    for name in ["data", "sock", "tmp"] {
        d.server_dir(name, &server)?;
    }
    d.server_file(LOG, &server)?;
    let mut state = d.manifest.mariadb.clone().unwrap_or(State {
        ready: false,
        last: None,
    });
    if !state.ready {
        // A first start, or one interrupted before the lock-down: from nothing again, once a
        // killed start's bootstrap (its install script, its server) is gone.
        end_bootstrap_of(&d.dir.join("data"));
        wipe(&d.dir.join("data"))?;
        bootstrap(&d, &server)?;
    }
    let mut settings = vec![(
        "innodb_buffer_pool_size".to_string(),
        opts.buffer_pool.clone().unwrap_or_else(|| "128M".into()),
    )];
    settings.extend(opts.settings.iter().cloned());
    let r = launch(&mut d, &server, &settings)?;
    let ok = (|| -> Result<MariaRunning> {
        let mut c = connect(&r)?;
        if !state.ready {
            lock_down(&mut c, &r.login)?;
            state.ready = true;
        }
        let version: Option<String> = c
            .query_first("SELECT VERSION()")
            .map_err(|e| Error::Setup(format!("the private MariaDB: {e}")))?;
        Ok(MariaRunning {
            version: version.unwrap_or_default(),
            ..r.clone()
        })
    })();
    let r = match ok {
        Ok(r) => r,
        Err(e) => {
            let _ = terminate(r.pid);
            return Err(e);
        }
    };
    d.manifest.mariadb = Some(State {
        ready: state.ready,
        last: Some(r.clone()),
    });
    write_manifest(&d.dir, &d.manifest)?;
    Ok((r, false))
}

/// A directory that holds plumb's private PostgreSQL is not taken for a MariaDB.
fn refuse_postgres(d: &InstanceDir) -> Result<()> {
    if d.manifest.mariadb.is_none() && !d.manifest.created.is_empty() {
        return Err(Error::Setup(format!(
            "{}: holds plumb's private PostgreSQL; give another directory for a MariaDB",
            d.dir.display()
        )));
    }
    Ok(())
}

/// Empty the data directory plumb made (its entries only; the directory stays).
fn wipe(data: &Path) -> Result<()> {
    let entries = std::fs::read_dir(data).map_err(|e| setup_err(data, e))?;
    for e in entries {
        let p = e.map_err(|e| setup_err(data, e))?.path();
        let m = std::fs::symlink_metadata(&p).map_err(|e| setup_err(&p, e))?;
        let r = if m.is_dir() {
            std::fs::remove_dir_all(&p)
        } else {
            std::fs::remove_file(&p)
        };
        r.map_err(|e| setup_err(&p, e))?;
    }
    Ok(())
}

/// The `--datadir=` argument plumb gives mariadb-install-db (which passes it on to its
/// bootstrap server as it is).
fn datadir_arg(data: &Path) -> String {
    format!("--datadir={}", data.display())
}

/// End what a killed start's bootstrap left running on `data` (mariadb-install-db, the shell
/// that feeds it, its `mariadbd --bootstrap`): SIGTERM, 10 s, then SIGKILL.
fn end_bootstrap_of(data: &Path) {
    let root = plumb_sys::Root::host();
    let arg = datadir_arg(data);
    let left = plumb_sys::process::with_arg(&root, &arg);
    if left.is_empty() {
        return;
    }
    for &p in &left {
        plumb_sys::os::signal(p, libc::SIGTERM);
    }
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(10) {
        if plumb_sys::process::with_arg(&root, &arg).is_empty() {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    for p in plumb_sys::process::with_arg(&root, &arg) {
        plumb_sys::os::signal(p, libc::SIGKILL);
    }
    std::thread::sleep(Duration::from_millis(200));
}

/// Run mariadb-install-db in a process group of its own that ends with plumb: SIGKILL when
/// plumb dies (the parent-death signal; as root its PID namespace goes with it, the bootstrap
/// server included), SIGTERM to the whole group when plumb is asked to stop; whatever a killed
/// plumb still left is ended by the next start ([`end_bootstrap_of`]).
fn bootstrap(d: &InstanceDir, server: &User) -> Result<()> {
    let me = caller()?;
    // As root, in a PID namespace of its own whose first process dies with plumb (util-linux's
    // unshare --kill-child): the kernel then ends everything in it, the bootstrap server
    // included. Otherwise the script alone dies with plumb.
    let unshare = Path::new(UNSHARE);
    let mut c = if euid() == 0 && unshare.exists() {
        let mut c = Command::new(unshare);
        c.args(["--pid", "--fork", "--kill-child=SIGKILL", INSTALL_DB]);
        c
    } else {
        Command::new(INSTALL_DB)
    };
    c.arg("--no-defaults")
        .arg(datadir_arg(&d.dir.join("data")))
        .arg(format!("--tmpdir={}", d.dir.join("tmp").display()))
        .arg(format!("--user={}", server.name))
        .arg("--auth-root-authentication-method=socket")
        .arg(format!("--auth-root-socket-user={}", me.name))
        .args(["--skip-test-db", "--skip-name-resolve"])
        .env("LC_ALL", "C.UTF-8")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let parent = std::process::id() as libc::pid_t;
    // SAFETY: setpgid and die_with_parent are async-signal-safe.
    unsafe {
        c.pre_exec(move || {
            libc::setpgid(0, 0);
            plumb_sys::ledger::die_with_parent(parent, libc::SIGKILL)
        });
    }
    // As root it hands the files to --user and runs the bootstrap server as that user;
    // otherwise the server's user is the caller.
    let mut child = c
        .spawn()
        .map_err(|e| Error::Setup(format!("mariadb-install-db: cannot run: {e}")))?;
    let group = child.id() as libc::pid_t;
    // Its output, read aside so that a full pipe never stalls it.
    let read = |r: Option<Box<dyn std::io::Read + Send>>| {
        std::thread::spawn(move || {
            let mut s = String::new();
            if let Some(mut r) = r {
                let _ = r.read_to_string(&mut s);
            }
            s
        })
    };
    let out = read(
        child
            .stdout
            .take()
            .map(|r| Box::new(r) as Box<dyn std::io::Read + Send>),
    );
    let err = read(
        child
            .stderr
            .take()
            .map(|r| Box::new(r) as Box<dyn std::io::Read + Send>),
    );
    let t0 = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(st)) => break st,
            Ok(None) => {}
            Err(e) => return Err(Error::Setup(format!("mariadb-install-db: {e}"))),
        }
        let why = if crate::interrupted() {
            Some("interrupted".to_string())
        } else if t0.elapsed() > Duration::from_secs(300) {
            Some("mariadb-install-db did not finish in 5 minutes".to_string())
        } else {
            None
        };
        if let Some(why) = why {
            // SAFETY: a signal to the group plumb made.
            unsafe { libc::kill(-group, libc::SIGTERM) };
            let _ = child.wait();
            end_bootstrap_of(&d.dir.join("data"));
            return Err(Error::Setup(why));
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let o = std::process::Output {
        status,
        stdout: out.join().unwrap_or_default().into_bytes(),
        stderr: err.join().unwrap_or_default().into_bytes(),
    };
    if !o.status.success() {
        return Err(Error::Setup(format!(
            "mariadb-install-db failed ({}): {}",
            o.status,
            tail(
                &String::from_utf8_lossy(&o.stdout),
                &String::from_utf8_lossy(&o.stderr)
            )
        )));
    }
    Ok(())
}

fn tail(a: &str, b: &str) -> String {
    let all = format!("{a}\n{b}");
    let lines: Vec<&str> = all.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(8)..].join("\n")
}

/// Start mariadbd in its own session (Ctrl-C of the plumb that started it does not reach it)
/// and wait until it answers on its socket.
fn launch(
    d: &mut InstanceDir,
    server: &User,
    settings: &[(String, String)],
) -> Result<MariaRunning> {
    let data = d.dir.join("data");
    let sock = d.dir.join("sock/mysqld.sock");
    let log = d.dir.join(LOG);
    let mut c = Command::new(MARIADBD);
    c.arg("--no-defaults")
        .arg(format!("--datadir={}", data.display()))
        .arg(format!("--socket={}", sock.display()))
        .arg(format!(
            "--pid-file={}",
            d.dir.join("sock/mariadbd.pid").display()
        ))
        .arg(format!("--log-error={}", log.display()))
        .arg(format!("--tmpdir={}", d.dir.join("tmp").display()))
        .arg("--skip-networking")
        .arg(format!("--user={}", server.name));
    for (k, v) in settings {
        c.arg(format!("--{k}={v}"));
    }
    c.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // mariadbd drops to --user itself when started as root.
    c.env("LC_ALL", "C.UTF-8");
    // SAFETY: setsid in the child before exec; async-signal-safe.
    unsafe {
        c.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
    let log_from = std::fs::metadata(&log).map(|m| m.len()).unwrap_or(0);
    let mut child = c
        .spawn()
        .map_err(|e| Error::Setup(format!("{MARIADBD}: cannot run: {e}")))?;
    let pid = child.id();
    let r = MariaRunning {
        pid,
        version: String::new(),
        socket: sock,
        login: login_name()?,
        user: server.name.clone(),
        data,
        log: log.clone(),
        settings: settings.to_vec(),
    };
    // Its PID in the manifest at once: a plumb interrupted from here on leaves a server the
    // next start finds (and stops, when the lock-down never ran).
    if let Some(st) = d.manifest.mariadb.as_mut() {
        st.last = Some(r.clone());
        write_manifest(&d.dir, &d.manifest)?;
    }
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(120) {
        if let Ok(Some(st)) = child.try_wait() {
            return Err(Error::Setup(format!(
                "the private MariaDB stopped at start ({st}); its log says:\n{}",
                log_since(&log, log_from)
            )));
        }
        if r.socket.exists() && connect(&r).is_ok() {
            // Reaped by whoever waits on it: the kernel's init once plumb is gone.
            std::mem::forget(child);
            return Ok(r);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = child.kill();
    let _ = child.wait();
    Err(Error::Setup(format!(
        "the private MariaDB did not answer within 120 s; its log says:\n{}",
        log_since(&log, log_from)
    )))
}

fn log_since(log: &Path, from: u64) -> String {
    let t = std::fs::read(log).unwrap_or_default();
    let t = String::from_utf8_lossy(t.get(from as usize..).unwrap_or_default()).into_owned();
    tail(&t, "")
}

/// A session as the caller, by the socket.
pub fn connect(r: &MariaRunning) -> Result<mysql::Conn> {
    let o = mysql::OptsBuilder::new()
        .socket(Some(r.socket.display().to_string()))
        .user(Some(r.login.clone()))
        .db_name(Some("mysql"))
        .prefer_socket(true)
        .tcp_connect_timeout(Some(Duration::from_secs(5)))
        .read_timeout(Some(Duration::from_secs(60)));
    mysql::Conn::new(o).map_err(|e| Error::Connect {
        url: r.url(),
        message: e.to_string(),
        source: Some(Box::new(e)),
    })
}

/// Leave only the caller's account (by unix_socket alone) and the locked `mariadb.sys`.
fn lock_down(c: &mut mysql::Conn, login: &str) -> Result<()> {
    let q = |e: mysql::Error| Error::Setup(format!("locking the private MariaDB down: {e}"));
    let accounts: Vec<(String, String)> = c
        .query("SELECT User, Host FROM mysql.global_priv")
        .map_err(q)?;
    for (user, host) in accounts {
        let keep = host == "localhost" && (user == login || user == "mariadb.sys");
        if !keep {
            c.query_drop(format!("DROP USER {}@{}", quote(&user), quote(&host)))
                .map_err(q)?;
        }
    }
    c.query_drop(format!(
        "ALTER USER {}@'localhost' IDENTIFIED VIA unix_socket",
        quote(login)
    ))
    .map_err(q)?;
    let left: Vec<(String, String, Option<String>, Option<String>)> = c
        .query("SELECT User, Host, JSON_VALUE(Priv, '$.plugin'), JSON_VALUE(Priv, '$.account_locked') FROM mysql.global_priv ORDER BY User")
        .map_err(q)?;
    let ok = left.iter().all(|(u, h, plugin, locked)| {
        h == "localhost"
            && ((u == login && plugin.as_deref() == Some("unix_socket"))
                || (u == "mariadb.sys" && matches!(locked.as_deref(), Some("true" | "1"))))
    });
    if !ok {
        return Err(Error::Setup(format!(
            "the private MariaDB still has accounts plumb did not mean to leave: {left:?}"
        )));
    }
    Ok(())
}

/// The live server of an open instance directory: its PID a mariadbd on this data directory,
/// not a zombie, answering on the socket.
fn running_in(d: &InstanceDir) -> Option<MariaRunning> {
    let r = d.manifest.mariadb.as_ref()?.last.clone()?;
    let root = plumb_sys::Root::host();
    let st = plumb_sys::process::stat(&root, r.pid).ok()?;
    if st.comm != "mariadbd" || st.state == 'Z' {
        return None;
    }
    let line = plumb_sys::process::cmdline(&root, r.pid)?;
    if !line.contains(&format!("--datadir={}", r.data.display())) {
        return None;
    }
    connect(&r).ok().map(|_| r)
}

/// The running server in `dir`, if any (an error when `dir` holds something else).
pub fn status(dir: &Path) -> Result<Option<MariaRunning>> {
    let Some(d) = open_as(dir, false, &server_user()?)? else {
        return Ok(None);
    };
    refuse_postgres(&d)?;
    Ok(running_in(&d))
}

/// SIGTERM (a clean shutdown), then wait up to 120 s for the process to go.
fn terminate(pid: u32) -> Result<()> {
    // SAFETY: a signal to the server's PID, checked to be our mariadbd just before.
    unsafe { libc::kill(pid as i32, libc::SIGTERM) };
    let t0 = Instant::now();
    let root = plumb_sys::Root::host();
    while t0.elapsed() < Duration::from_secs(120) {
        // Our own child until plumb exits: reap it.
        // SAFETY: waitpid with WNOHANG on one PID.
        unsafe { libc::waitpid(pid as i32, std::ptr::null_mut(), libc::WNOHANG) };
        match plumb_sys::process::stat(&root, pid) {
            Ok(st) if st.comm == "mariadbd" && st.state != 'Z' => {}
            _ => return Ok(()),
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Err(Error::Setup(format!(
        "the private MariaDB (PID {pid}) did not stop within 120 s of SIGTERM"
    )))
}

fn stop_locked(d: &InstanceDir) -> Result<bool> {
    match running_in(d) {
        None => Ok(false),
        Some(r) => terminate(r.pid).map(|_| true),
    }
}

/// Stop the server in `dir` (a clean shutdown). Not running is not an error.
pub fn stop(dir: &Path) -> Result<bool> {
    match open_as(dir, false, &server_user()?)? {
        None => Ok(false),
        Some(d) => {
            refuse_postgres(&d)?;
            stop_locked(&d)
        }
    }
}

/// Stop and remove plumb's instance in `dir`, whichever engine it runs (its manifest says):
/// what the lab's guard and the reclaiming of a killed plumb's leftovers call.
pub fn remove_any(dir: &Path) -> Result<Removed> {
    match crate::private::kind_of(dir)? {
        Some(crate::Kind::Mariadb) => remove(dir),
        _ => crate::private::remove(dir),
    }
}

/// Whether plumb's instance in `dir` (either engine) has a server running.
pub fn running_any(dir: &Path) -> Result<bool> {
    match crate::private::kind_of(dir)? {
        Some(crate::Kind::Mariadb) => status(dir).map(|r| r.is_some()),
        _ => crate::private::status(dir).map(|r| r.is_some()),
    }
}

/// Stop it and delete what plumb created in `dir` (and `dir` when plumb made it).
pub fn remove(dir: &Path) -> Result<Removed> {
    let Some(mut d) = open_as(dir, false, &server_user()?)? else {
        return Ok(Removed::Nothing);
    };
    refuse_postgres(&d)?;
    let was = stop_locked(&d)?;
    d.remove_created()?;
    Ok(if was {
        Removed::Running
    } else {
        Removed::Stopped
    })
}

/// The default directory: /var/tmp/plumb-mariadb-USER.
pub fn default_dir() -> PathBuf {
    let name = caller()
        .map(|u| u.name)
        .unwrap_or_else(|_| euid().to_string());
    PathBuf::from(format!("/var/tmp/plumb-mariadb-{name}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_that_would_open_the_server_are_refused() {
        for k in [
            "port",
            "bind_address",
            "skip-grant-tables",
            "skip_networking",
            "socket",
            "init_file",
            "user",
        ] {
            let e = check_settings(&[(k.to_string(), "x".into())]).unwrap_err();
            assert!(e.to_string().contains("plumb sets it itself"), "{k}: {e}");
        }
        assert!(check_settings(&[("innodb_flush_log_at_trx_commit".into(), "2".into())]).is_ok());
        assert!(check_settings(&[("a b".into(), "1".into())]).is_err());
    }
}
