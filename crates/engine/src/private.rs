//! A private PostgreSQL instance: plumb's own cluster in a directory it owns, run with the
//! distribution's binaries. initdb on first start, the settings on the command line, the log
//! beside it. When plumb runs as root the cluster runs as the `postgres` user (PostgreSQL
//! refuses root).
//!
//! Who can reach it: nobody but the user who started plumb. The server listens on no TCP port;
//! its socket is in `DIR/sock`, a directory only the server's OS user can enter (root can too),
//! and `pg_hba.conf` admits only the `plumb` role over that socket by peer authentication, with
//! `pg_ident.conf` mapping the caller's OS user (and no other) to it.
//!
//! What it touches: plumb creates `DIR` (one level: its parent must exist) or takes an empty
//! directory the caller owns; it never changes the owner or mode of a directory it did not
//! create, follows no symbolic link for `DIR`, and writes a manifest (`plumb-instance.json`)
//! saying what it created. Removal deletes only the entries it created and `DIR` itself when
//! plumb made it.

use crate::{Error, Result};
use serde::{Deserialize, Serialize};
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::os::unix::io::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

pub use postgres::Client;

/// The superuser plumb creates in its clusters.
pub const SUPERUSER: &str = "plumb";

/// The manifest's name inside the instance directory.
const MANIFEST: &str = "plumb-instance.json";
/// The entries plumb may create inside the instance directory; removal touches no other name.
const ENTRIES: [&str; 5] = ["data", "sock", "postgresql.log", "mariadb.log", "tmp"];
/// Manifest format: a manifest of another format is not trusted for removal.
const FORMAT: u32 = 2;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Running {
    pub dir: PathBuf,
    pub pid: u32,
    pub port: u16,
    /// The server's version: as its build reports it ("17.10"), or the cluster's major version.
    pub version: String,
    /// The directory of the server build's programs it was started with; stop, restart and the
    /// next start use the same build.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bin: Option<PathBuf>,
    /// The OS user the server runs as.
    pub user: String,
    /// Settings given on the command line at start.
    #[serde(default)]
    pub settings: Vec<(String, String)>,
    /// This instance is a streaming standby of another plumb instance.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub standby_of: Option<StandbyOf>,
    /// Standbys plumb made of this instance (their directories).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub standbys: Vec<PathBuf>,
}

/// A standby's link to its primary.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct StandbyOf {
    /// The primary's instance directory.
    pub primary: PathBuf,
    /// The replication slot on the primary, also the standby's `application_name` there.
    pub slot: String,
    /// The primary waits for this standby at every commit (`synchronous_standby_names`).
    pub sync: bool,
    /// The base backup finished (false while `pg_basebackup` copies: a copy a killed plumb
    /// interrupted is made again, never started as a server of its own). Manifests from before
    /// this field were written only after the copy.
    #[serde(default = "copied_before")]
    pub copied: bool,
}

fn copied_before() -> bool {
    true
}

impl Running {
    /// The directory of the server's Unix socket (only its owner, and root, can enter it).
    pub fn socket_dir(&self) -> PathBuf {
        self.dir.join("sock")
    }

    /// Connection settings for the instance (Unix socket, peer authentication).
    pub fn config(&self, dbname: &str) -> postgres::Config {
        let mut c = postgres::Config::new();
        c.host_path(self.socket_dir())
            .port(self.port)
            .user(SUPERUSER)
            .dbname(dbname)
            .application_name("plumb");
        c.connect_timeout(std::time::Duration::from_secs(10));
        c
    }

    /// A URL for plumb's own `--engine` and for libpq tools (`psql "URL"`). It carries no
    /// password: the server admits the caller's OS user by peer authentication.
    pub fn url(&self) -> String {
        format!(
            "postgresql:///postgres?host={}&port={}&user={SUPERUSER}",
            self.socket_dir().display(),
            self.port
        )
    }

    /// A connection as `plumb` to the `postgres` database.
    pub fn client(&self) -> Result<Client> {
        connect(self)
    }

    pub fn target(&self) -> crate::Target {
        crate::Target::new(&self.url())
    }

    /// A client program (psql, pgbench) for this server: its build's own, else one from
    /// Debian's packages (see [`Build::client_program`]). None: there is none; an error: the one
    /// found is one that others can change.
    pub fn client_program(&self, name: &str) -> Result<Option<PathBuf>> {
        let Some(bin) = self.bin.clone().or_else(|| find_bin().ok()) else {
            return Ok(None);
        };
        let b = Build {
            bin,
            major: major_of(&self.version).unwrap_or(0),
            version: self.version.clone(),
        };
        b.client_program(name)
    }

    /// psql for this server: beside its programs, under /usr/lib/postgresql, else Debian's
    /// /usr/bin/psql (each one only root or the caller can change).
    pub fn psql(&self) -> Result<Option<PathBuf>> {
        match self.client_program("psql")? {
            Some(p) => Ok(Some(p)),
            None => Some(PathBuf::from("/usr/bin/psql"))
                .filter(|p| p.exists())
                .map(|p| trusted_path(&p))
                .transpose(),
        }
    }
}

use crate::pg::major as major_of;

/// What plumb wrote about an instance directory it made: what it created, and the last start.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Manifest {
    format: u32,
    /// plumb created the directory itself (so removal may delete it).
    created_dir: bool,
    /// Entries of [`ENTRIES`] plumb created in it.
    pub(crate) created: Vec<String>,
    /// A private MariaDB's state (`private_maria`); none for PostgreSQL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) mariadb: Option<MariaDbState>,
    /// The last start: port, version, user, settings.
    last: Option<Running>,
    /// This instance is a standby plumb made of another one.
    #[serde(default)]
    standby_of: Option<StandbyOf>,
    /// Standbys plumb made of this instance: their directories. While there is one, the
    /// server's OS user may open replication connections (see [`write_access_files`]).
    #[serde(default)]
    standbys: Vec<PathBuf>,
}

// The private MariaDB's part of a manifest (its code: `private_maria`).

/// What the manifest keeps about a private MariaDB.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct MariaDbState {
    /// The data directory is made and locked down (only the caller's account is left).
    pub ready: bool,
    /// The last start.
    pub last: Option<MariaRunning>,
}

/// A running private MariaDB.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct MariaRunning {
    pub pid: u32,
    pub version: String,
    /// The socket (in `DIR/sock`).
    pub socket: PathBuf,
    /// The account the caller logs in as (by unix_socket).
    pub login: String,
    /// The OS user the server runs as.
    pub user: String,
    pub data: PathBuf,
    pub log: PathBuf,
    /// Server options plumb passed (NAME=VALUE), the buffer pool first.
    pub settings: Vec<(String, String)>,
}

impl MariaRunning {
    /// The URL `--engine` takes for it (no password: the socket says who you are).
    pub fn url(&self) -> String {
        format!(
            "mysql://{}@localhost/mysql?socket={}",
            self.login,
            self.socket.display()
        )
    }
}

/// Where `scripts/setup --test` installs PostgreSQL server builds (`N/bin`), unless
/// `PLUMB_PG_VERSIONS` says otherwise.
pub const BUILD_CACHE: &str = "/var/cache/plumb/postgresql";
/// Where Debian's packages put each major version's programs (`N/bin`).
const DEBIAN_BUILDS: &str = "/usr/lib/postgresql";

/// A PostgreSQL server build: the directory of its programs and the version they report.
#[derive(Debug, Clone, PartialEq)]
pub struct Build {
    pub bin: PathBuf,
    /// As `postgres --version` says it: "17.10".
    pub version: String,
    pub major: u32,
}

impl Build {
    /// The build's own program `name`, else the same major version's from Debian's packages,
    /// else the newest Debian one (client programs such as psql and pgbench speak to newer
    /// servers). Server builds from the npm registry ship only initdb, pg_ctl and postgres.
    /// The one found must be one only root or the caller can change ([`trusted_path`]), or it
    /// is an error naming it: plumb never falls back past a program it would not run.
    pub fn client_program(&self, name: &str) -> Result<Option<PathBuf>> {
        let own = self.bin.join(name);
        let found = if std::fs::symlink_metadata(&own).is_ok() {
            Some(own)
        } else {
            let same = Path::new(DEBIAN_BUILDS)
                .join(self.major.to_string())
                .join("bin")
                .join(name);
            if same.is_file() {
                Some(same)
            } else {
                debian_builds()
                    .into_iter()
                    .rev()
                    .map(|(_, b)| b.join(name))
                    .find(|p| p.is_file())
            }
        };
        found.map(|p| trusted_path(&p)).transpose()
    }

    /// `pg_basebackup` of this very major version (an older one refuses a newer server, a
    /// newer one may not suit an older server's standby), for making a standby.
    pub fn basebackup(&self) -> Result<PathBuf> {
        let own = self.bin.join("pg_basebackup");
        if std::fs::symlink_metadata(&own).is_ok() {
            return trusted_path(&own);
        }
        let same = Path::new(DEBIAN_BUILDS)
            .join(self.major.to_string())
            .join("bin/pg_basebackup");
        if same.is_file() {
            return trusted_path(&same);
        }
        Err(Error::Setup(format!(
            "the PostgreSQL {} build in {} has no pg_basebackup, and none of version {} is installed under {DEBIAN_BUILDS}: a standby needs one (apt-get install postgresql-{}, or a build that ships it)",
            self.version,
            self.bin.display(),
            self.major,
            self.major
        )))
    }
}

/// The major versions under `root` (`root/N/bin` with initdb and pg_ctl), oldest first.
fn builds_under(root: &Path) -> Vec<(u32, PathBuf)> {
    let mut out = Vec::new();
    if let Ok(rd) = std::fs::read_dir(root) {
        for e in rd.flatten() {
            if let Some(v) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) {
                let bin = e.path().join("bin");
                if bin.join("initdb").is_file() && bin.join("pg_ctl").is_file() {
                    out.push((v, bin));
                }
            }
        }
    }
    out.sort();
    out
}

fn debian_builds() -> Vec<(u32, PathBuf)> {
    builds_under(Path::new(DEBIAN_BUILDS))
}

fn cached_builds() -> Vec<(u32, PathBuf)> {
    let root = std::env::var_os("PLUMB_PG_VERSIONS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(BUILD_CACHE));
    builds_under(&root)
}

/// The server builds installed, by major version, oldest first: Debian's packages, then the
/// builds `scripts/setup --test` cached (a major version Debian has is taken from Debian).
pub fn installed() -> Vec<(u32, PathBuf)> {
    let mut all = debian_builds();
    for (v, b) in cached_builds() {
        if !all.iter().any(|(w, _)| *w == v) {
            all.push((v, b));
        }
    }
    all.sort();
    all
}

/// The build of major version `major` among those [`installed`].
pub fn build_for_version(major: u32) -> Result<Build> {
    let all = installed();
    match all.iter().find(|(v, _)| *v == major) {
        Some((_, b)) => build(b),
        None => Err(Error::Setup(format!(
            "PostgreSQL {major}: not installed here (installed: {}); scripts/setup --test installs 16, 17 and 18 into {BUILD_CACHE}, or give --bin-dir",
            if all.is_empty() {
                "none".to_string()
            } else {
                all.iter()
                    .map(|(v, b)| format!("{v} in {}", b.display()))
                    .collect::<Vec<_>>()
                    .join(", ")
            }
        ))),
    }
}

/// The default build: `PLUMB_PG_BIN`, else the newest of Debian's packages.
pub fn default_build() -> Result<Build> {
    if let Some(p) = std::env::var_os("PLUMB_PG_BIN") {
        return build(Path::new(&p)).map_err(|e| Error::Setup(format!("PLUMB_PG_BIN={e}")));
    }
    match debian_builds().pop() {
        Some((_, b)) => build(&b),
        None => Err(Error::Setup(format!(
            "no PostgreSQL server binaries found under {DEBIAN_BUILDS} (apt-get install postgresql); or give --bin-dir, or set PLUMB_PG_BIN"
        ))),
    }
}

/// The directory of the default build's programs (see [`default_build`]).
pub fn find_bin() -> Result<PathBuf> {
    default_build().map(|b| b.bin)
}

/// Owned by root or by the caller: the only owners whose files plumb runs (as root, only root).
fn owner_trusted(m: &std::fs::Metadata) -> bool {
    m.uid() == 0 || m.uid() == euid()
}

/// Why another user could change `dir` (its owner, or a group/other write bit without the sticky
/// bit that keeps others from renaming what they do not own), or None.
fn dir_open_to_others(m: &std::fs::Metadata) -> Option<String> {
    let mode = m.mode() & 0o7777;
    if !owner_trusted(m) {
        return Some(format!("owned by uid {} (mode {mode:o})", m.uid()));
    }
    if mode & 0o022 != 0 && mode & 0o1000 == 0 {
        return Some(format!("others can write to it (mode {mode:o})"));
    }
    None
}

/// Each directory from `/` down to `dir` (canonical) as [`dir_open_to_others`] sees it.
fn trusted_dirs(dir: &Path, what: &Path) -> Result<()> {
    let mut at = PathBuf::from("/");
    let mut parts = dir.components().skip(1);
    loop {
        let m = std::fs::metadata(&at).map_err(|e| setup_err(&at, e))?;
        if let Some(why) = dir_open_to_others(&m) {
            return Err(Error::Setup(format!(
                "{}: on the way to {}, {why}: plumb runs only programs that root or you control",
                at.display(),
                what.display()
            )));
        }
        match parts.next() {
            Some(p) => at.push(p),
            None => return Ok(()),
        }
    }
}

/// As root, the way to `dir` as given: every existing component, symbolic links included (and
/// every directory of where they lead), must be root's or the caller's, and no directory on it
/// writable by others (a world-writable one only with the sticky bit). Otherwise another user
/// could point the way somewhere else (`A/B/new` with B a link to /etc, in A they own) and
/// plumb would make its directory, as root, there. The error names the component.
pub fn trusted_place(dir: &Path) -> Result<()> {
    if euid() != 0 {
        return Ok(());
    }
    let given = if dir.is_absolute() {
        dir.to_path_buf()
    } else {
        std::env::current_dir()
            .map_err(|e| setup_err(dir, e))?
            .join(dir)
    };
    let refuse = |at: &Path, why: String| {
        Error::Setup(format!(
            "{}: on the way to {}, {why}: plumb makes and writes directories as root only where nobody but root or you can change the way there",
            at.display(),
            dir.display()
        ))
    };
    let parent = given.parent().unwrap_or(Path::new("/"));
    let mut at = PathBuf::from("/");
    for c in parent.components().skip(1) {
        at.push(c);
        match std::fs::symlink_metadata(&at) {
            // Missing from here on: whoever creates it reports that.
            Err(_) => break,
            Ok(m) if m.file_type().is_symlink() => {
                if !owner_trusted(&m) {
                    return Err(refuse(
                        &at,
                        format!("a symbolic link owned by uid {}", m.uid()),
                    ));
                }
            }
            Ok(m) => {
                if let Some(why) = dir_open_to_others(&m) {
                    return Err(refuse(&at, why));
                }
            }
        }
    }
    // Where the links lead: each directory of the real path.
    if let Ok(real) = std::fs::canonicalize(parent) {
        let mut at = PathBuf::from("/");
        let mut parts = real.components().skip(1);
        loop {
            let m = std::fs::metadata(&at).map_err(|e| setup_err(&at, e))?;
            if let Some(why) = dir_open_to_others(&m) {
                return Err(refuse(&at, why));
            }
            match parts.next() {
                Some(p) => at.push(p),
                None => break,
            }
        }
    }
    Ok(())
}

/// `path` as given (a Debian wrapper such as /usr/bin/psql reads the name it was run by), after
/// checking that only root or the caller can change it or what it resolves to: each directory
/// from `/` down (a world-writable one only with the sticky bit, and then what lies below it
/// must be root's or the caller's), a symbolic link on the way, and the file itself. The error
/// names the path that others can change.
pub(crate) fn trusted_path(path: &Path) -> Result<PathBuf> {
    let parent = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let parent = std::fs::canonicalize(parent).map_err(|e| setup_err(parent, e))?;
    trusted_dirs(&parent, path)?;
    let link = std::fs::symlink_metadata(path).map_err(|e| setup_err(path, e))?;
    if link.file_type().is_symlink() && !owner_trusted(&link) {
        return Err(Error::Setup(format!(
            "{}: a symbolic link owned by uid {}; plumb runs only programs that root or you control",
            path.display(),
            link.uid()
        )));
    }
    let real = std::fs::canonicalize(path).map_err(|e| setup_err(path, e))?;
    if let Some(dir) = real.parent().filter(|d| *d != parent) {
        trusted_dirs(dir, path)?;
    }
    let m = std::fs::metadata(&real).map_err(|e| setup_err(&real, e))?;
    let mode = m.mode() & 0o7777;
    if !owner_trusted(&m) || mode & 0o022 != 0 {
        return Err(Error::Setup(format!(
            "{}{}: others can change it (owner uid {}, mode {mode:o}); plumb runs only programs that root or you control",
            path.display(),
            if real != path { format!(" ({})", real.display()) } else { String::new() },
            m.uid()
        )));
    }
    Ok(path.to_path_buf())
}

/// The library directory a build's programs load from (`BIN/../lib`, as the registry builds'
/// `$ORIGIN/../lib` run path and Debian's pkglibdir): it and everything in it, a few levels
/// down, only root's or the caller's to change. Nothing to check when there is none.
fn trusted_libs(bin: &Path) -> Result<()> {
    let Some(lib) = bin.parent().map(|p| p.join("lib")).filter(|l| l.is_dir()) else {
        return Ok(());
    };
    trusted_path(&lib)?;
    let lib = std::fs::canonicalize(&lib).map_err(|e| setup_err(&lib, e))?;
    let mut stack = vec![(lib, 0u32)];
    let mut seen = 0usize;
    while let Some((dir, depth)) = stack.pop() {
        let rd = std::fs::read_dir(&dir).map_err(|e| setup_err(&dir, e))?;
        for e in rd.flatten() {
            seen += 1;
            if seen > 20_000 {
                return Err(setup_err(&dir, "more than 20,000 files under the build's lib directory; plumb checks every one it may load"));
            }
            let p = e.path();
            let m = std::fs::symlink_metadata(&p).map_err(|e| setup_err(&p, e))?;
            let open = if m.is_dir() {
                dir_open_to_others(&m)
            } else if !owner_trusted(&m) {
                Some(format!("owned by uid {}", m.uid()))
            } else if !m.file_type().is_symlink() && m.mode() & 0o022 != 0 {
                Some(format!(
                    "others can write to it (mode {:o})",
                    m.mode() & 0o7777
                ))
            } else {
                None
            };
            if let Some(why) = open {
                return Err(Error::Setup(format!(
                    "{}: {why}; the build's programs load their libraries from here, and plumb runs only programs that root or you control",
                    p.display()
                )));
            }
            if m.is_dir() && depth < 4 {
                stack.push((p, depth + 1));
            }
        }
    }
    Ok(())
}

/// The build whose programs are in `bin`: initdb, pg_ctl and postgres there, in a directory
/// only root or the caller can change (plumb runs them, as root's `postgres` user), and the
/// version `postgres --version` reports.
pub fn build(bin: &Path) -> Result<Build> {
    let shown = bin.display();
    let m = std::fs::metadata(bin).map_err(|e| setup_err(bin, e))?;
    if !m.is_dir() {
        return Err(setup_err(bin, "not a directory"));
    }
    trusted_path(bin)?;
    trusted_libs(bin)?;
    for prog in ["initdb", "pg_ctl", "postgres"] {
        let p = bin.join(prog);
        let m = std::fs::metadata(&p).map_err(|_| {
            Error::Setup(format!(
                "{shown}: no {prog} here; give the directory of a PostgreSQL server build's programs (initdb, pg_ctl, postgres)"
            ))
        })?;
        if !m.is_file() || m.mode() & 0o111 == 0 {
            return Err(Error::Setup(format!(
                "{}: not an executable program",
                p.display()
            )));
        }
        trusted_path(&p)?;
    }
    // Run as the server's user, never as root (postgres answers --version before its check).
    let mut c = cmd(bin, "postgres", &server_user()?)?;
    c.arg("--version");
    let out = output(c, &format!("{shown}/postgres --version"))?;
    // "postgres (PostgreSQL) 17.10" or "postgres (PostgreSQL) 15.18 (Debian 15.18-0+deb12u1)"
    let version = out
        .split("(PostgreSQL)")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .map(str::to_string)
        .ok_or_else(|| {
            Error::Setup(format!(
                "{shown}/postgres --version: not a PostgreSQL server ({})",
                out.trim()
            ))
        })?;
    let major = major_of(&version).filter(|m| *m >= 10).ok_or_else(|| {
        Error::Setup(format!(
            "{shown}/postgres --version: version {version}: plumb runs PostgreSQL 10 and newer"
        ))
    })?;
    Ok(Build {
        bin: bin.to_path_buf(),
        version,
        major,
    })
}

use plumb_sys::os::{euid, user_by_name, user_by_uid, User};

/// The OS user that calls plumb (the only one the server admits).
pub(crate) fn caller() -> Result<User> {
    let uid = euid();
    user_by_uid(uid).ok_or_else(|| {
        Error::Setup(format!(
            "uid {uid} has no entry in the user database: the private PostgreSQL admits its caller by OS user name"
        ))
    })
}

/// The OS user the server runs as: `postgres` when plumb runs as root, else the caller.
fn server_user() -> Result<User> {
    if euid() != 0 {
        return caller();
    }
    user_by_name("postgres").ok_or_else(|| {
        Error::Setup("plumb runs as root and PostgreSQL refuses to: a `postgres` OS user is needed (apt-get install postgresql creates it)".into())
    })
}

fn cmd(bin: &Path, prog: &str, who: &User) -> Result<Command> {
    cmd_at(&bin.join(prog), who)
}

/// The program `path`, run as `who`, if only root or the caller can change it (checked at
/// each run: a build's directory can change between two).
fn cmd_at(path: &Path, who: &User) -> Result<Command> {
    let mut c = Command::new(trusted_path(path)?);
    if who.uid != euid() {
        // std drops root's supplementary groups (setgroups) before setuid.
        c.uid(who.uid).gid(who.gid);
        c.env("HOME", "/tmp");
    }
    // A foreign PGDATA or locale must not leak into plumb's cluster.
    c.env_remove("PGDATA").env("LC_ALL", "C.UTF-8");
    Ok(c)
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

pub(crate) fn setup_err(p: &Path, e: impl std::fmt::Display) -> Error {
    Error::Setup(format!("{}: {e}", p.display()))
}

/// An instance directory, open and locked: nothing else in plumb touches it meanwhile (a second
/// `plumb engine start` on it waits, then finds the first one's server).
pub(crate) struct InstanceDir {
    pub(crate) dir: PathBuf,
    /// Held open for the lock (flock on the directory itself).
    _lock: File,
    pub(crate) manifest: Manifest,
}

/// What a path is, without following a link.
enum Found {
    Missing,
    Link,
    NotDir,
    Dir(std::fs::Metadata),
}

fn look(dir: &Path) -> Result<Found> {
    match std::fs::symlink_metadata(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Found::Missing),
        Err(e) => Err(setup_err(dir, e)),
        Ok(m) if m.file_type().is_symlink() => Ok(Found::Link),
        Ok(m) if !m.is_dir() => Ok(Found::NotDir),
        Ok(m) => Ok(Found::Dir(m)),
    }
}

fn refuse_link(dir: &Path) -> Error {
    let real = std::fs::canonicalize(dir)
        .map(|p| format!(" (it points to {})", p.display()))
        .unwrap_or_default();
    Error::Setup(format!(
        "{}: a symbolic link{real}; plumb does not follow links for its instance directory: give the real path",
        dir.display()
    ))
}

fn lock_dir(dir: &Path) -> Result<File> {
    let f = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(dir)
        .map_err(|e| setup_err(dir, e))?;
    // SAFETY: flock on an fd we own; blocks until another plumb on this directory is done.
    if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) } != 0 {
        return Err(setup_err(dir, std::io::Error::last_os_error()));
    }
    Ok(f)
}

/// The manifest, when the directory holds one plumb wrote for this caller. `Ok(None)`: none.
fn read_manifest(dir: &Path) -> Result<Option<Manifest>> {
    let p = dir.join(MANIFEST);
    let f = match OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(&p)
    {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        // ELOOP: a link in place of the manifest, planted.
        Err(e) => return Err(setup_err(&p, e)),
        Ok(f) => f,
    };
    let m = f.metadata().map_err(|e| setup_err(&p, e))?;
    if !m.is_file() || m.uid() != euid() || m.mode() & 0o022 != 0 {
        return Err(Error::Setup(format!(
            "{}: not a manifest plumb wrote for this user (owner uid {}, mode {:o}); the directory is left alone",
            p.display(),
            m.uid(),
            m.mode() & 0o7777
        )));
    }
    let mut text = String::new();
    f.take(1 << 20)
        .read_to_string(&mut text)
        .map_err(|e| setup_err(&p, e))?;
    let man: Manifest = serde_json::from_str(&text).map_err(|_| {
        Error::Setup(format!(
            "{}: not a manifest this plumb understands (an older plumb's instance?); stop and remove that directory by hand",
            p.display()
        ))
    })?;
    if man.format != FORMAT {
        return Err(Error::Setup(format!(
            "{}: manifest format {} (this plumb writes {FORMAT}); stop and remove that directory by hand",
            p.display(),
            man.format
        )));
    }
    Ok(Some(man))
}

pub(crate) fn write_manifest(dir: &Path, m: &Manifest) -> Result<()> {
    let tmp = dir.join(format!("{MANIFEST}.tmp"));
    let _ = std::fs::remove_file(&tmp);
    let mut f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o644)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(&tmp)
        .map_err(|e| setup_err(&tmp, e))?;
    f.write_all(
        serde_json::to_string_pretty(m)
            .unwrap_or_default()
            .as_bytes(),
    )
    .map_err(|e| setup_err(&tmp, e))?;
    drop(f);
    std::fs::rename(&tmp, dir.join(MANIFEST)).map_err(|e| setup_err(&tmp, e))
}

/// Whether `uid`/`gid` may enter `dir` and every directory above it.
fn reachable_by(dir: &Path, who: &User) -> std::result::Result<(), PathBuf> {
    if who.uid == 0 {
        return Ok(());
    }
    let mut p = Some(dir);
    while let Some(d) = p {
        if let Ok(m) = std::fs::metadata(d) {
            let mode = m.mode();
            let ok = if m.uid() == who.uid {
                mode & 0o100 != 0
            } else if m.gid() == who.gid {
                mode & 0o010 != 0
            } else {
                mode & 0o001 != 0
            };
            if !ok {
                return Err(d.to_path_buf());
            }
        }
        p = d.parent();
    }
    Ok(())
}

/// Make `dir` as a new instance directory: built as `parent/.plumb-new-PID-N` (0700, or 0710
/// with the server's group when the server runs as another user, and its manifest), then
/// renamed into place with RENAME_NOREPLACE. Returns false when something appeared at `dir`
/// first (another plumb's directory, or anything else: it is then looked at as found).
fn publish_new_dir(dir: &Path, parent: &Path, server: &User) -> Result<bool> {
    let mut tmp = None;
    for i in 0..100u32 {
        let t = parent.join(format!(".plumb-new-{}-{i}", std::process::id()));
        match std::fs::DirBuilder::new().mode(0o700).create(&t) {
            Ok(()) => {
                tmp = Some(t);
                break;
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(setup_err(dir, e)),
        }
    }
    let tmp = tmp.ok_or_else(|| setup_err(dir, "cannot make a new directory beside it"))?;
    let built = (|| -> Result<()> {
        if server.uid != euid() {
            // The server's group may pass through (not list), to reach data/ and sock/.
            let c = std::ffi::CString::new(tmp.as_os_str().as_encoded_bytes())
                .map_err(|_| setup_err(dir, "NUL in path"))?;
            // SAFETY: a directory we just created; lchown does not follow links.
            if unsafe { libc::lchown(c.as_ptr(), euid(), server.gid) } != 0 {
                return Err(setup_err(dir, std::io::Error::last_os_error()));
            }
            std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o710))
                .map_err(|e| setup_err(dir, e))?;
        }
        write_manifest(
            &tmp,
            &Manifest {
                format: FORMAT,
                created_dir: true,
                created: Vec::new(),
                last: None,
                mariadb: None,
                standby_of: None,
                standbys: Vec::new(),
            },
        )
    })();
    let undo = || {
        let _ = std::fs::remove_file(tmp.join(MANIFEST));
        let _ = std::fs::remove_dir(&tmp);
    };
    if let Err(e) = built {
        undo();
        return Err(e);
    }
    let cstr = |p: &Path| std::ffi::CString::new(p.as_os_str().as_encoded_bytes());
    let (Ok(from), Ok(to)) = (cstr(&tmp), cstr(dir)) else {
        undo();
        return Err(setup_err(dir, "NUL in path"));
    };
    // SAFETY: valid C strings; renameat2 with AT_FDCWD and RENAME_NOREPLACE.
    let r = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            from.as_ptr(),
            libc::AT_FDCWD,
            to.as_ptr(),
            libc::RENAME_NOREPLACE,
        )
    };
    if r == 0 {
        return Ok(true);
    }
    let e = std::io::Error::last_os_error();
    undo();
    if e.raw_os_error() == Some(libc::EEXIST) {
        return Ok(false);
    }
    Err(setup_err(dir, e))
}

/// `dir` as an absolute path (a socket path must be one), its parent's links resolved and the
/// last component kept as it is (a link there is refused, not followed).
pub(crate) fn absolute(dir: &Path) -> Result<PathBuf> {
    let name = dir
        .file_name()
        .filter(|n| *n != "." && *n != "..")
        .ok_or_else(|| Error::Setup(format!("{}: name a directory", dir.display())))?;
    let parent = match dir.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    match std::fs::canonicalize(&parent) {
        Ok(p) => Ok(p.join(name)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(Error::Setup(format!(
            "{}: its parent {} does not exist; plumb creates only the last directory (mkdir -p the parent first)",
            dir.display(),
            parent.display()
        ))),
        Err(e) => Err(setup_err(&parent, e)),
    }
}

/// Open the instance directory `dir`. `create`: make it when missing, or take an empty one
/// the caller owns. Else `Ok(None)` when there is no instance directory there.
fn open(dir: &Path, create: bool) -> Result<Option<InstanceDir>> {
    let d = open_as(dir, create, &server_user()?)?;
    if let Some(d) = &d {
        if d.manifest.mariadb.is_some() {
            return Err(Error::Setup(format!(
                "{}: holds plumb's private MariaDB, not a PostgreSQL instance (plumb engine status --dir {0} says how it runs)",
                d.dir.display()
            )));
        }
    }
    Ok(d)
}

/// The instance directory `dir`, opened and locked for a server that runs as `server`
/// (created when `create` and it is missing or empty).
pub(crate) fn open_as(dir: &Path, create: bool, server: &User) -> Result<Option<InstanceDir>> {
    trusted_place(dir)?;
    let dir = &absolute(dir)?;
    match look(dir)? {
        Found::Link => return Err(refuse_link(dir)),
        Found::NotDir => return Err(Error::Setup(format!("{}: not a directory", dir.display()))),
        Found::Missing if !create => return Ok(None),
        Found::Missing => {
            let parent = match dir.parent() {
                Some(p) if p.as_os_str().is_empty() => Path::new("."),
                Some(p) => p,
                None => return Err(Error::Setup(format!("{}: no parent", dir.display()))),
            };
            if !parent.is_dir() {
                return Err(Error::Setup(format!(
                    "{}: its parent {} does not exist; plumb creates only the last directory (mkdir -p the parent first)",
                    dir.display(),
                    parent.display()
                )));
            }
            if let Err(at) = reachable_by(parent, server) {
                return Err(Error::Setup(format!(
                    "{}: the server runs as {} and cannot enter {}; choose a directory it can reach (under /var/tmp, say)",
                    dir.display(),
                    server.name,
                    at.display()
                )));
            }
            // Built under a name of its own (mode, owner and manifest set), then published
            // with a rename that never replaces: another plumb sees no directory, or a finished
            // instance directory, never one half made.
            if publish_new_dir(dir, parent, server)? {
                let lock = lock_dir(dir)?;
                let manifest = read_manifest(dir)?
                    .ok_or_else(|| setup_err(dir, "its manifest went missing"))?;
                return Ok(Some(InstanceDir {
                    dir: dir.to_path_buf(),
                    _lock: lock,
                    manifest,
                }));
            }
            // Another plumb published it a moment ago: open it as found.
        }
        Found::Dir(_) => {}
    }
    // An existing directory: re-check what it is now, then lock it.
    let meta = match look(dir)? {
        Found::Dir(m) => m,
        Found::Link => return Err(refuse_link(dir)),
        _ => return Err(Error::Setup(format!("{}: not a directory", dir.display()))),
    };
    if meta.uid() != euid() {
        return Err(Error::Setup(format!(
            "{}: owned by uid {}, not by you (uid {}); plumb keeps its instance only in a directory it owns",
            dir.display(),
            meta.uid(),
            euid()
        )));
    }
    let lock = lock_dir(dir)?;
    if let Some(manifest) = read_manifest(dir)? {
        return Ok(Some(InstanceDir {
            dir: dir.to_path_buf(),
            _lock: lock,
            manifest,
        }));
    }
    let empty = std::fs::read_dir(dir)
        .map_err(|e| setup_err(dir, e))?
        .next()
        .is_none();
    if !create {
        if empty {
            return Ok(None);
        }
        return Err(Error::Setup(format!(
            "{}: not a plumb instance directory (no {MANIFEST}); left alone",
            dir.display()
        )));
    }
    if !empty {
        return Err(Error::Setup(format!(
            "{}: exists and holds files plumb did not create; give a new or empty directory",
            dir.display()
        )));
    }
    if meta.mode() & 0o022 != 0 {
        return Err(Error::Setup(format!(
            "{}: others can write in it (mode {:o}); give a directory only you can write",
            dir.display(),
            meta.mode() & 0o7777
        )));
    }
    if let Err(at) = reachable_by(dir, server) {
        return Err(Error::Setup(format!(
            "{}: the server runs as {} and cannot enter {}; plumb does not change the mode of a directory it did not create: give a new directory (plumb makes it) or chmod o+x {}",
            dir.display(),
            server.name,
            at.display(),
            at.display()
        )));
    }
    let manifest = Manifest {
        format: FORMAT,
        created_dir: false,
        created: Vec::new(),
        last: None,
        mariadb: None,
        standby_of: None,
        standbys: Vec::new(),
    };
    write_manifest(dir, &manifest)?;
    Ok(Some(InstanceDir {
        dir: dir.to_path_buf(),
        _lock: lock,
        manifest,
    }))
}

impl InstanceDir {
    fn data(&self) -> PathBuf {
        self.dir.join("data")
    }

    fn log(&self) -> PathBuf {
        self.dir.join("postgresql.log")
    }

    fn sock(&self) -> PathBuf {
        self.dir.join("sock")
    }

    pub(crate) fn note_created(&mut self, name: &str) -> Result<()> {
        if !self.manifest.created.iter().any(|c| c == name) {
            self.manifest.created.push(name.to_string());
            write_manifest(&self.dir, &self.manifest)?;
        }
        Ok(())
    }

    /// Make `name` as a directory the server user owns (mode 0700), unless plumb made it before.
    pub(crate) fn server_dir(&mut self, name: &str, server: &User) -> Result<()> {
        let p = self.dir.join(name);
        match look(&p)? {
            Found::Dir(m)
                if m.uid() == server.uid && self.manifest.created.iter().any(|c| c == name) =>
            {
                return Ok(())
            }
            Found::Missing => {}
            _ => {
                return Err(Error::Setup(format!(
                    "{}: not the directory plumb made there; the instance directory is left alone",
                    p.display()
                )))
            }
        }
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&p)
            .map_err(|e| setup_err(&p, e))?;
        self.note_created(name)?;
        chown_nofollow(&p, server)
    }

    /// The log file, made by plumb (never through a link) and handed to the server's user.
    fn server_log(&mut self, server: &User) -> Result<()> {
        self.server_file("postgresql.log", server)
    }

    /// A file `name` of [`ENTRIES`], made by plumb (never through a link) and handed to the
    /// server's user.
    pub(crate) fn server_file(&mut self, name: &str, server: &User) -> Result<()> {
        let p = self.dir.join(name);
        match look(&p)? {
            Found::Missing => {
                let f = OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(0o600)
                    .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
                    .open(&p)
                    .map_err(|e| setup_err(&p, e))?;
                self.note_created(name)?;
                // SAFETY: fchown on a file we just created.
                if unsafe { libc::fchown(f.as_raw_fd(), server.uid, server.gid) } != 0 {
                    return Err(setup_err(&p, std::io::Error::last_os_error()));
                }
                Ok(())
            }
            Found::NotDir if self.manifest.created.iter().any(|c| c == name) => Ok(()),
            _ => Err(Error::Setup(format!(
                "{}: not the log file plumb made there; the instance directory is left alone",
                p.display()
            ))),
        }
    }

    /// Remove what plumb created here (never anything else), and the directory if plumb made
    /// it and nothing else is left in it.
    pub(crate) fn remove_created(&mut self) -> Result<()> {
        for name in ENTRIES {
            if !self.manifest.created.iter().any(|c| c == name) {
                continue;
            }
            let p = self.dir.join(name);
            let r = match look(&p)? {
                Found::Missing => Ok(()),
                // remove_dir_all does not follow links inside, and a link itself is unlinked.
                Found::Dir(_) => std::fs::remove_dir_all(&p),
                Found::Link | Found::NotDir => std::fs::remove_file(&p),
            };
            r.map_err(|e| setup_err(&p, e))?;
        }
        self.manifest.created.clear();
        let _ = std::fs::remove_file(self.dir.join(format!("{MANIFEST}.tmp")));
        std::fs::remove_file(self.dir.join(MANIFEST))
            .map_err(|e| setup_err(&self.dir.join(MANIFEST), e))?;
        if self.manifest.created_dir {
            match std::fs::remove_dir(&self.dir) {
                Ok(()) => {}
                Err(e) if e.raw_os_error() == Some(libc::ENOTEMPTY) => {
                    return Err(Error::Setup(format!(
                        "{}: plumb removed what it created; the directory stays because it now holds files plumb did not create",
                        self.dir.display()
                    )))
                }
                Err(e) => return Err(setup_err(&self.dir, e)),
            }
        }
        Ok(())
    }
}

fn chown_nofollow(p: &Path, who: &User) -> Result<()> {
    if who.uid == euid() {
        return Ok(());
    }
    let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes())
        .map_err(|_| setup_err(p, "NUL in path"))?;
    // SAFETY: a path plumb just created; lchown does not follow a link.
    if unsafe { libc::lchown(c.as_ptr(), who.uid, who.gid) } != 0 {
        return Err(setup_err(p, std::io::Error::last_os_error()));
    }
    Ok(())
}

/// The live server in an open instance directory.
fn running_in(d: &InstanceDir) -> Option<Running> {
    let text = std::fs::read_to_string(d.data().join("postmaster.pid")).ok()?;
    let mut lines = text.lines();
    let pid = lines.next()?.trim().parse::<u32>().ok()?;
    // A live postgres process: not a zombie nobody reaped, not a reused PID.
    let alive = plumb_sys::process::stat(&plumb_sys::Root::host(), pid)
        .is_ok_and(|st| (st.comm == "postgres" || st.comm == "postmaster") && st.state != 'Z');
    if !alive {
        return None;
    }
    let port = text
        .lines()
        .nth(3)
        .and_then(|l| l.trim().parse::<u16>().ok())
        .unwrap_or(0);
    let last = d.manifest.last.clone();
    Some(Running {
        dir: d.dir.clone(),
        pid,
        port,
        version: last.as_ref().map(|s| s.version.clone()).unwrap_or_default(),
        bin: last.as_ref().and_then(|s| s.bin.clone()),
        user: last.as_ref().map(|s| s.user.clone()).unwrap_or_default(),
        settings: last.map(|s| s.settings).unwrap_or_default(),
        standby_of: d.manifest.standby_of.clone(),
        standbys: d.manifest.standbys.clone(),
    })
}

/// The instance running in `dir`, if any (its postmaster.pid names a live process). A
/// symbolic link, or a directory plumb did not make, is an error.
pub fn status(dir: &Path) -> Result<Option<Running>> {
    match open(dir, false)? {
        None => Ok(None),
        Some(d) => Ok(running_in(&d)),
    }
}

#[derive(Debug, Clone, Default)]
pub struct StartOptions {
    /// `-c name=value` settings, e.g. ("shared_buffers", "128MB").
    pub settings: Vec<(String, String)>,
    /// The port (the socket's name) to use if it is free (a restart keeps its port).
    pub port: Option<u16>,
    /// Make a streaming standby of the instance in this directory (a base backup of it, a
    /// replication slot on it), rather than a new cluster.
    pub standby_of: Option<PathBuf>,
    /// With `standby_of`: the primary waits for this standby at every commit.
    pub sync: bool,
    /// The server build's programs (see [`build`]). None: the build this directory was last
    /// started with, a standby's primary's build, else [`default_build`].
    pub bin: Option<PathBuf>,
}

/// What [`start_or_find`] did.
#[derive(Debug, Clone)]
pub struct Started {
    pub running: Running,
    /// It was running already (settings given now were not applied).
    pub was_running: bool,
    /// initdb ran in this call: the cluster is new.
    pub fresh: bool,
}

/// Start the instance in `dir` (initdb on first use). A running one is returned as it is.
pub fn start(dir: &Path, opts: &StartOptions) -> Result<Running> {
    start_or_find(dir, opts).map(|s| s.running)
}

/// What `start_or_find` refuses before it touches anything: a setting plumb will not pass (or
/// one it sets itself to keep the instance private), a directory too deep for the socket.
fn check_start(dir: &Path, opts: &StartOptions) -> Result<()> {
    for (k, v) in &opts.settings {
        if k.is_empty()
            || !k
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
            || v.contains(['\'', '"', '\\', '\n', '\r', '\0'])
        {
            return Err(Error::Setup(format!(
                "setting {k}={v}: not a PostgreSQL setting plumb will pass"
            )));
        }
        if matches!(
            k.as_str(),
            "listen_addresses"
                | "unix_socket_directories"
                | "unix_socket_permissions"
                | "unix_socket_group"
                | "hba_file"
                | "ident_file"
                | "port"
                | "data_directory"
        ) {
            return Err(Error::Setup(format!(
                "setting {k}: plumb sets it itself so that nobody but you can reach the instance"
            )));
        }
    }
    // A Unix socket path holds 107 bytes: DIR/sock/.s.PGSQL.65535 must fit.
    let sock_path = absolute(dir)?.join("sock/.s.PGSQL.65535");
    if sock_path.as_os_str().len() > 107 {
        return Err(Error::Setup(format!(
            "{}: too deep for the server's socket ({} bytes with sock/.s.PGSQL.PORT; a Unix socket path holds 107): choose a shorter path",
            dir.display(),
            sock_path.as_os_str().len()
        )));
    }
    Ok(())
}

/// Start the instance in `dir`, or find it running. On failure, what this call created is
/// removed again.
pub fn start_or_find(dir: &Path, opts: &StartOptions) -> Result<Started> {
    check_start(dir, opts)?;
    let build = choose_build(dir, opts)?;
    let server = server_user()?;
    let me = caller()?;
    let mut d = open(dir, true)?.ok_or_else(|| setup_err(dir, "cannot open"))?;
    // A cluster that was there before this call (a stopped instance) is kept on failure;
    // a new one is taken back, so a later start begins clean.
    let had_cluster = d.data().join("PG_VERSION").exists();
    if had_cluster {
        let made = cluster_major(&d.data());
        if made != Some(build.major) {
            let made = made.map(|m| m.to_string()).unwrap_or_else(|| "?".into());
            return Err(Error::Setup(format!(
                "{}: holds a PostgreSQL {made} cluster; the build in {} is {}: start it with the build that made it (--pg-version {made}), or give a new --dir",
                d.dir.display(),
                build.bin.display(),
                build.version
            )));
        }
    }
    let primary = match &opts.standby_of {
        Some(p) => Some(absolute(p)?),
        None => d.manifest.standby_of.as_ref().map(|s| s.primary.clone()),
    };
    if let Some(primary) = &primary {
        if had_cluster && d.manifest.standby_of.is_none() {
            return Err(Error::Setup(format!(
                "{}: holds a primary instance, not a standby; give a new directory for the standby",
                d.dir.display()
            )));
        }
        if let Some(was) = d
            .manifest
            .standby_of
            .as_ref()
            .filter(|s| s.primary != *primary)
        {
            return Err(Error::Setup(format!(
                "{}: a standby of {}, not of {}",
                d.dir.display(),
                was.primary.display(),
                primary.display()
            )));
        }
    }
    if let Some(r) = running_in(&d) {
        return Ok(Started {
            running: r,
            was_running: true,
            fresh: false,
        });
    }
    if let Some(primary) = primary {
        let sync = if opts.standby_of.is_some() {
            opts.sync
        } else {
            d.manifest.standby_of.as_ref().is_some_and(|s| s.sync)
        };
        // A new standby is in plumb's ledger until it runs or is cleaned up: one a killed plumb
        // was making is removed by the next plumb command, its slot on the primary with it.
        let noted = if had_cluster {
            plumb_sys::ledger::Entry::NONE
        } else {
            plumb_sys::ledger::note(plumb_sys::ledger::Item::Engine { dir: d.dir.clone() })
        };
        let started = start_standby_locked(&mut d, &build, &server, &me, opts, &primary, sync);
        let r = match started {
            Ok(running) => Ok(Started {
                running,
                was_running: false,
                fresh: !had_cluster,
            }),
            Err(e) => {
                let _ = stop_locked(&d);
                let mut also = Vec::new();
                if !had_cluster {
                    if let Err(e2) = detach_from_primary(&mut d, true) {
                        also.push(e2.to_string());
                    }
                    if let Err(e2) = d.remove_created() {
                        also.push(e2.to_string());
                    }
                } else if let Err(e2) = detach_from_primary(&mut d, false) {
                    also.push(e2.to_string());
                }
                if also.is_empty() {
                    Err(e)
                } else {
                    Err(Error::Setup(format!(
                        "{e}; and cleaning up: {}",
                        also.join("; ")
                    )))
                }
            }
        };
        noted.done();
        return r;
    }
    match start_locked(&mut d, &build, &server, &me, opts) {
        Ok((running, fresh)) => {
            if !fresh {
                // Housekeeping only: a failure here leaves a slot, not a broken instance.
                let _ = drop_forgotten_slots(&d, &running);
            }
            Ok(Started {
                running,
                was_running: false,
                fresh,
            })
        }
        Err(e) => {
            if !had_cluster {
                if let Err(e2) = d.remove_created() {
                    return Err(Error::Setup(format!("{e}; and cleaning up: {e2}")));
                }
            }
            Err(e)
        }
    }
}

fn start_locked(
    d: &mut InstanceDir,
    build: &Build,
    server: &User,
    me: &User,
    opts: &StartOptions,
) -> Result<(Running, bool)> {
    d.server_dir("data", server)?;
    d.server_dir("sock", server)?;
    d.server_log(server)?;
    let data = d.data();
    // A postmaster.pid whose process is dead (killed, or a zombie nobody reaped) would make
    // PostgreSQL refuse to start; running_in() found no live postgres behind it.
    let pidfile = data.join("postmaster.pid");
    if pidfile.exists() {
        let _ = std::fs::remove_file(&pidfile);
    }
    let bin = &build.bin;
    let fresh = !data.join("PG_VERSION").exists();
    if fresh {
        let mut c = cmd(bin, "initdb", server)?;
        c.arg("-D").arg(&data).args([
            "-U",
            SUPERUSER,
            "--auth-local=peer",
            "--auth-host=reject",
            "-E",
            "UTF8",
            "--no-sync",
        ]);
        output(c, "initdb")?;
    }
    write_access_files(&data, server, me, !d.manifest.standbys.is_empty())?;
    let port = match opts
        .port
        .or(d.manifest.last.as_ref().map(|l| l.port))
        .filter(|p| !d.sock().join(format!(".s.PGSQL.{p}")).exists())
    {
        Some(p) => p,
        None => free_port()?,
    };
    // pg_ctl hands these to /bin/sh: the socket path goes in single quotes.
    let sock = d.sock().display().to_string();
    if sock.contains('\'') {
        return Err(Error::Setup(format!(
            "{}: a quote in the path; choose a directory without one",
            d.dir.display()
        )));
    }
    let mut o =
        format!("-p {port} -k '{sock}' -c listen_addresses= -c unix_socket_permissions=0700");
    for (k, v) in &opts.settings {
        // Quoted for pg_ctl's shell: a value has no quote (checked), it may have spaces
        // (a standby's primary_conninfo).
        o.push_str(&format!(" -c '{k}={v}'"));
    }
    let log = d.log();
    let log_start = std::fs::metadata(&log).map(|m| m.len()).unwrap_or(0);
    let mut c = cmd(bin, "pg_ctl", server)?;
    c.arg("-D")
        .arg(&data)
        .arg("-o")
        .arg(&o)
        .arg("-l")
        .arg(&log)
        .args(["-w", "-t", "60", "start"]);
    // The server must not die with plumb's terminal: its own session.
    // SAFETY: setsid between fork and exec.
    unsafe {
        c.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
    if let Err(e) = output(c, "pg_ctl start") {
        let log = log_since(&log, log_start);
        return Err(Error::Setup(if log.is_empty() {
            e.to_string()
        } else {
            format!("PostgreSQL did not start: {log}")
        }));
    }
    let mut r = running_in(d).ok_or_else(|| {
        Error::Setup(format!(
            "the server started and went away again; its log: {}",
            log_since(&log, log_start)
        ))
    })?;
    r.version = build.version.clone();
    r.bin = Some(build.bin.clone());
    r.user = server.name.clone();
    r.settings = opts.settings.clone();
    d.manifest.last = Some(r.clone());
    write_manifest(&d.dir, &d.manifest)?;
    Ok((r, fresh))
}

/// The major version of the cluster in `data` (its PG_VERSION file).
fn cluster_major(data: &Path) -> Option<u32> {
    std::fs::read_to_string(data.join("PG_VERSION"))
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// The build to start `dir` with: the one asked for, else the one it was last started with,
/// else (for a new standby) its primary's, else the default.
fn choose_build(dir: &Path, opts: &StartOptions) -> Result<Build> {
    if let Some(b) = &opts.bin {
        return build(b);
    }
    let last_bin = |d: &Path| {
        read_manifest(d)
            .ok()
            .flatten()
            .and_then(|m| m.last)
            .and_then(|l| l.bin)
    };
    let recorded = last_bin(dir).or_else(|| opts.standby_of.as_deref().and_then(last_bin));
    match recorded {
        Some(b) => build(&b).map_err(|e| {
            Error::Setup(format!(
                "{}: last started with the PostgreSQL build in {}, which is no longer usable: {e}",
                dir.display(),
                b.display()
            ))
        }),
        None => default_build(),
    }
}

/// The last lines the log got since `from` (this attempt's, not an earlier one's).
fn log_since(log: &Path, from: u64) -> String {
    let mut text = String::new();
    if let Ok(mut f) = File::open(log) {
        let _ = f.seek(SeekFrom::Start(from));
        let _ = f.take(64 << 10).read_to_string(&mut text);
    }
    let tail: Vec<&str> = text.lines().rev().take(5).collect();
    tail.into_iter().rev().collect::<Vec<_>>().join(" | ")
}

/// pg_hba.conf and pg_ident.conf: the `plumb` role over the socket, for the caller's OS user
/// only. Written at every start, so an older cluster's `trust` lines do not survive.
///
/// With `replication` (the instance has a standby plumb made), the server's own OS user may
/// also open replication connections as `plumb`, and nothing else: that is how the standby's
/// WAL receiver, which runs as that user, connects. That user owns the data files already, so
/// this admits nobody new.
fn write_access_files(data: &Path, server: &User, me: &User, replication: bool) -> Result<()> {
    let mut hba =
        "# Written by plumb at every start: only the OS user that started plumb, over the\n\
               # Unix socket (in a directory only the server's user can enter), as role plumb.\n\
               local all plumb peer map=plumb\n"
            .to_string();
    let mut ident = format!(
        "# Written by plumb: the OS user that started plumb is role plumb; nobody else is.\nplumb {} {SUPERUSER}\n",
        me.name
    );
    if replication {
        hba.push_str(
            "# A standby plumb made: replication connections from the server's own OS user.\n\
             local replication plumb peer map=plumb_replication\n",
        );
        ident.push_str(&format!(
            "plumb_replication {} {SUPERUSER}\nplumb_replication {} {SUPERUSER}\n",
            server.name, me.name
        ));
    }
    for (name, text) in [("pg_hba.conf", hba), ("pg_ident.conf", ident)] {
        let p = data.join(name);
        let tmp = data.join(format!("{name}.plumb-tmp"));
        let _ = std::fs::remove_file(&tmp);
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&tmp)
            .map_err(|e| setup_err(&tmp, e))?;
        f.write_all(text.as_bytes())
            .map_err(|e| setup_err(&tmp, e))?;
        // SAFETY: fchown on a file we just created.
        if server.uid != euid()
            && unsafe { libc::fchown(f.as_raw_fd(), server.uid, server.gid) } != 0
        {
            return Err(setup_err(&tmp, std::io::Error::last_os_error()));
        }
        drop(f);
        std::fs::rename(&tmp, &p).map_err(|e| setup_err(&p, e))?;
    }
    Ok(())
}

/// The default directory: `PLUMB_PG_DIR`, else /var/tmp/plumb-pg-USER (reachable by the
/// `postgres` user, unlike a home directory).
pub fn default_dir() -> PathBuf {
    if let Ok(d) = std::env::var("PLUMB_PG_DIR") {
        return PathBuf::from(d);
    }
    let uid = euid();
    let user = if uid == 0 {
        "root".to_string()
    } else {
        user_by_uid(uid)
            .map(|u| u.name)
            .unwrap_or_else(|| uid.to_string())
    };
    PathBuf::from(format!("/var/tmp/plumb-pg-{user}"))
}

/// Which engine plumb's instance in `dir` runs, from its manifest; None when `dir` holds no
/// plumb instance (missing, empty, or a manifest of no start yet).
pub fn kind_of(dir: &Path) -> Result<Option<crate::Kind>> {
    let dir = absolute(dir)?;
    if !matches!(look(&dir)?, Found::Dir(_)) {
        return Ok(None);
    }
    Ok(read_manifest(&dir)?.and_then(|m| {
        if m.mariadb.is_some() {
            Some(crate::Kind::Mariadb)
        } else if m.created.is_empty() {
            None
        } else {
            Some(crate::Kind::Postgres)
        }
    }))
}

/// What [`remove`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Removed {
    /// No plumb instance there (no directory, or an empty one).
    Nothing,
    /// A stopped instance, removed.
    Stopped,
    /// A running instance, stopped and removed.
    Running,
}

/// Stop the instance and delete what plumb created in `dir` (and `dir` when plumb made it).
pub fn remove(dir: &Path) -> Result<Removed> {
    let Some(mut d) = open(dir, false)? else {
        return Ok(Removed::Nothing);
    };
    // A primary whose standby plumb made is still there: that one goes first.
    let followers: Vec<PathBuf> = d
        .manifest
        .standbys
        .iter()
        .filter(|s| {
            matches!(read_manifest(s), Ok(Some(m)) if m.standby_of.as_ref().is_some_and(|o| o.primary == d.dir))
        })
        .cloned()
        .collect();
    if let Some(s) = followers.first() {
        return Err(Error::Setup(format!(
            "{}: the standby in {} follows this instance; remove it first (plumb engine stop --dir {1} --remove)",
            d.dir.display(),
            s.display()
        )));
    }
    if d.manifest.standby_of.is_some() {
        detach_from_primary(&mut d, false)?;
    }
    // Its data goes next: an immediate shutdown, without the checkpoint that would write the
    // dirty buffers out first.
    let was = stop_with(&d, "immediate")?;
    detach_from_primary(&mut d, true)?;
    d.remove_created()?;
    Ok(if was {
        Removed::Running
    } else {
        Removed::Stopped
    })
}

/// Stop the instance in `dir` (fast shutdown). Not running is not an error.
///
/// A synchronous standby is taken out of its primary's `synchronous_standby_names` first, so
/// the primary's commits do not wait for a standby that is gone; its next start puts it back.
pub fn stop(dir: &Path) -> Result<bool> {
    match open(dir, false)? {
        None => Ok(false),
        Some(mut d) => {
            if running_in(&d).is_some() {
                detach_from_primary(&mut d, false)?;
            }
            stop_locked(&d)
        }
    }
}

fn stop_locked(d: &InstanceDir) -> Result<bool> {
    stop_with(d, "fast")
}

/// Stop with pg_ctl's shutdown `mode`: fast (a checkpoint first: the data is kept) or
/// immediate (none: only for data about to be removed).
fn stop_with(d: &InstanceDir, mode: &str) -> Result<bool> {
    if running_in(d).is_none() {
        return Ok(false);
    }
    // The build that started it (a pg_ctl of another version may refuse its data directory).
    let bin = match d.manifest.last.as_ref().and_then(|l| l.bin.clone()) {
        Some(b) => b,
        None => find_bin()?,
    };
    let server = server_user()?;
    let mut c = cmd(&bin, "pg_ctl", &server)?;
    c.arg("-D")
        .arg(d.data())
        .args(["-m", mode, "-w", "-t", "60", "stop"]);
    output(c, "pg_ctl stop")?;
    Ok(true)
}

/// Restart with the same settings and port (for cold runs). Not `pg_ctl restart`: that would
/// forget the log file and leave the server writing into plumb's pipe.
pub fn restart(dir: &Path) -> Result<Running> {
    let saved = {
        let d = open(dir, false)?
            .ok_or_else(|| Error::Setup(format!("{}: no instance here", dir.display())))?;
        let last = d.manifest.last.clone();
        stop_locked(&d)?;
        last
    };
    let opts = StartOptions {
        settings: saved
            .as_ref()
            .map(|s| s.settings.clone())
            .unwrap_or_default(),
        port: saved.as_ref().map(|s| s.port),
        bin: saved.and_then(|s| s.bin),
        ..Default::default()
    };
    start(dir, &opts)
}

/// The replication slot (and `application_name`) of the standby in `dir`: one per standby
/// directory, so two standbys of one primary never share a slot.
fn slot_name(dir: &Path) -> String {
    // FNV-1a of the path: short, stable, lower-case hex (a slot name allows [a-z0-9_]).
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in dir.as_os_str().as_encoded_bytes() {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("plumb_standby_{:012x}", h & 0xffff_ffff_ffff)
}

fn connect(r: &Running) -> Result<postgres::Client> {
    r.config("postgres").connect(postgres::NoTls).map_err(|e| {
        Error::Setup(format!(
            "{}: {}",
            r.dir.display(),
            crate::pg::with_causes(&e)
        ))
    })
}

fn exec(c: &mut postgres::Client, dir: &Path, sql: &str) -> Result<()> {
    c.batch_execute(sql).map_err(|e| {
        Error::Setup(format!(
            "{}: {sql}: {}",
            dir.display(),
            crate::pg::with_causes(&e)
        ))
    })
}

/// The primary of a new standby: a running plumb instance that is no standby itself.
fn open_primary(primary: &Path) -> Result<(InstanceDir, Running)> {
    let p = open(primary, false)?.ok_or_else(|| {
        Error::Setup(format!(
            "--standby-of {}: no plumb instance there (plumb engine start --dir {0})",
            primary.display()
        ))
    })?;
    if p.manifest.standby_of.is_some() {
        return Err(Error::Setup(format!(
            "--standby-of {}: a standby itself; plumb makes standbys of a primary",
            primary.display()
        )));
    }
    let r = running_in(&p).ok_or_else(|| {
        Error::Setup(format!(
            "--standby-of {}: the instance there is not running (plumb engine start --dir {0})",
            primary.display()
        ))
    })?;
    Ok((p, r))
}

/// The base backup of the primary (`pg_basebackup` through slot `slot`, made now) into `d`'s
/// data directory, then its standby.signal: the copy is done when the manifest says so.
fn copy_primary(
    d: &mut InstanceDir,
    basebackup: &Path,
    server: &User,
    prun: &Running,
    slot: &str,
    pc: &mut postgres::Client,
) -> Result<()> {
    let data = d.data();
    // A slot of this name left by an earlier attempt is taken back first.
    let _ = pc.execute(
        "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1 AND NOT active",
        &[&slot],
    );
    let mut c = cmd_at(basebackup, server)?;
    c.arg("-D")
        .arg(&data)
        .arg("-h")
        .arg(prun.socket_dir())
        .arg("-p")
        .arg(prun.port.to_string())
        .args(["-U", SUPERUSER, "-X", "stream", "-C", "-S", &slot])
        .args(["-c", "fast", "--no-sync", "-w"]);
    // It ends with plumb (SIGTERM when plumb dies), rather than copying on as an orphan.
    let parent = std::process::id() as libc::pid_t;
    // SAFETY: die_with_parent makes only async-signal-safe calls.
    unsafe {
        use std::os::unix::process::CommandExt;
        c.pre_exec(move || plumb_sys::ledger::die_with_parent(parent, libc::SIGTERM));
    }
    output(c, "pg_basebackup")?;
    let signal = data.join("standby.signal");
    let f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(&signal)
        .map_err(|e| setup_err(&signal, e))?;
    // SAFETY: fchown on a file we just created.
    if server.uid != euid() && unsafe { libc::fchown(f.as_raw_fd(), server.uid, server.gid) } != 0 {
        return Err(setup_err(&signal, std::io::Error::last_os_error()));
    }
    if let Some(s) = d.manifest.standby_of.as_mut() {
        s.copied = true;
    }
    write_manifest(&d.dir, &d.manifest)?;
    Ok(())
}

/// Wait until the primary (`pc`, in `primary_dir`) sees the standby in `d` streaming, and
/// synchronous when `sync`; at most 60 s, and not past the standby's end.
fn wait_streaming(
    d: &InstanceDir,
    pc: &mut postgres::Client,
    primary_dir: &Path,
    slot: &str,
    sync: bool,
) -> Result<()> {
    let t = std::time::Instant::now();
    loop {
        let row = pc
            .query_opt(
                "SELECT state, sync_state FROM pg_stat_replication WHERE application_name = $1",
                &[&slot],
            )
            .map_err(|e| {
                Error::Setup(format!(
                    "{}: {}",
                    primary_dir.display(),
                    crate::pg::with_causes(&e)
                ))
            })?;
        let ok = row.as_ref().is_some_and(|r| {
            r.get::<_, Option<String>>(0).as_deref() == Some("streaming")
                && (!sync || r.get::<_, Option<String>>(1).as_deref() == Some("sync"))
        });
        if ok {
            break;
        }
        if running_in(d).is_none() {
            return Err(Error::Setup(format!(
                "the standby stopped; its log: {}",
                log_since(&d.log(), 0)
            )));
        }
        if t.elapsed() > std::time::Duration::from_secs(60) {
            return Err(Error::Setup(format!(
                "the standby did not reach the primary within 60 s; its log: {}",
                log_since(&d.log(), 0)
            )));
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    Ok(())
}

/// Start the standby in `d` of the instance in `primary`: on first use a replication slot on
/// the primary and a base backup of it (`pg_basebackup`), then the server in standby mode
/// streaming from the slot; with `sync`, the primary then waits for it at every commit. Returns
/// once the primary sees it streaming.
fn start_standby_locked(
    d: &mut InstanceDir,
    build: &Build,
    server: &User,
    me: &User,
    opts: &StartOptions,
    primary: &Path,
    sync: bool,
) -> Result<Running> {
    if primary == d.dir {
        return Err(Error::Setup(format!(
            "--standby-of {}: the standby needs a directory of its own",
            primary.display()
        )));
    }
    let (mut p, prun) = open_primary(primary)?;
    if cluster_major(&p.data()) != Some(build.major) {
        return Err(Error::Setup(format!(
            "--standby-of {}: the primary is not PostgreSQL {} (the build in {}); a standby runs the primary's major version",
            primary.display(),
            build.major,
            build.bin.display()
        )));
    }
    // A copy that never finished (plumb killed during pg_basebackup): its PG_VERSION is there
    // but not its standby.signal, and started as it is it would run as a primary of its own.
    // It is plumb's (the manifest says the copy began), so it is made again.
    let interrupted = d.data().join("PG_VERSION").exists()
        && d.manifest.standby_of.as_ref().is_some_and(|s| !s.copied);
    if interrupted {
        std::fs::remove_dir_all(d.data()).map_err(|e| setup_err(&d.data(), e))?;
    }
    let basebackup = if d.data().join("PG_VERSION").exists() {
        None
    } else {
        Some(build.basebackup()?)
    };
    let slot = d
        .manifest
        .standby_of
        .as_ref()
        .map(|s| s.slot.clone())
        .unwrap_or_else(|| slot_name(&d.dir));
    // Recorded first, on both sides: a failure from here on is undone by detach_from_primary.
    d.manifest.standby_of = Some(StandbyOf {
        primary: primary.to_path_buf(),
        slot: slot.clone(),
        sync,
        copied: basebackup.is_none(),
    });
    write_manifest(&d.dir, &d.manifest)?;
    if !p.manifest.standbys.contains(&d.dir) {
        p.manifest.standbys.push(d.dir.clone());
        write_manifest(&p.dir, &p.manifest)?;
    }
    write_access_files(&p.data(), server, me, true)?;
    let mut pc = connect(&prun)?;
    exec(&mut pc, &p.dir, "SELECT pg_reload_conf()")?;
    d.server_dir("data", server)?;
    d.server_dir("sock", server)?;
    d.server_log(server)?;
    if let Some(basebackup) = basebackup {
        copy_primary(d, &basebackup, server, &prun, &slot, &mut pc)?;
    }
    let psock = prun.socket_dir().display().to_string();
    if psock.contains(['\'', ' ']) {
        return Err(Error::Setup(format!(
            "--standby-of {}: a quote or space in the path; choose a directory without one",
            primary.display()
        )));
    }
    let mut settings: Vec<(String, String)> = opts
        .settings
        .iter()
        .filter(|(k, _)| !matches!(k.as_str(), "primary_conninfo" | "primary_slot_name"))
        .cloned()
        .collect();
    settings.push((
        "primary_conninfo".into(),
        format!(
            "host={psock} port={} user={SUPERUSER} application_name={slot}",
            prun.port
        ),
    ));
    settings.push(("primary_slot_name".into(), slot.clone()));
    let sopts = StartOptions {
        settings,
        port: opts.port,
        standby_of: None,
        sync: false,
        bin: Some(build.bin.clone()),
    };
    let (running, _) = start_locked(d, build, server, me, &sopts)?;
    if sync {
        // Added to the standbys the primary already waits for, never in their place.
        let names: String = pc
            .query_one("SELECT current_setting('synchronous_standby_names')", &[])
            .map(|row| row.get(0))
            .unwrap_or_default();
        let mut names = sync_names(&names);
        if !names.contains(&slot) {
            names.push(slot.clone());
        }
        set_sync_names(&mut pc, &p.dir, &names)?;
    }
    // Streaming (and synchronous, when asked) as the primary sees it.
    wait_streaming(d, &mut pc, &p.dir, &slot, sync)?;
    Ok(Running {
        standby_of: d.manifest.standby_of.clone(),
        ..running
    })
}

/// The standby names in a `synchronous_standby_names` value: `"a"`, `a, b`, `FIRST 2 ("a",
/// "b")`, `ANY 1 (a, b)`, unquoted and in order.
fn sync_names(v: &str) -> Vec<String> {
    let v = v.trim();
    let list = match (v.find('('), v.rfind(')')) {
        (Some(a), Some(b)) if a < b => &v[a + 1..b],
        _ => v,
    };
    list.split(',')
        .map(|n| n.trim().trim_matches('"').to_string())
        .filter(|n| !n.is_empty())
        .collect()
}

/// Make the primary wait for every standby in `names` at each commit (`FIRST n (…)` for
/// several), or for none; then reload. Two statements: ALTER SYSTEM refuses a transaction block.
fn set_sync_names(c: &mut Client, dir: &Path, names: &[String]) -> Result<()> {
    let quoted: Vec<String> = names.iter().map(|n| format!("\"{n}\"")).collect();
    let sql = match quoted.len() {
        0 => "ALTER SYSTEM RESET synchronous_standby_names".to_string(),
        1 => format!(
            "ALTER SYSTEM SET synchronous_standby_names = '{}'",
            quoted[0]
        ),
        n => format!(
            "ALTER SYSTEM SET synchronous_standby_names = 'FIRST {n} ({})'",
            quoted.join(", ")
        ),
    };
    exec(c, dir, &sql)?;
    exec(c, dir, "SELECT pg_reload_conf()")
}

/// Undo what a standby in `d` set on its primary: the primary stops waiting for it (its
/// `synchronous_standby_names`, when it names this standby, is reset). With `forget`, also its
/// replication slot is dropped, the primary forgets the standby, and with no standby left the
/// primary no longer admits replication connections. A primary that is not running is changed
/// in its files only; its slot is dropped at its next start ([`drop_forgotten_slots`]).
fn detach_from_primary(d: &mut InstanceDir, forget: bool) -> Result<()> {
    let Some(sb) = d.manifest.standby_of.clone() else {
        return Ok(());
    };
    let Some(mut p) = open(&sb.primary, false)? else {
        return Ok(()); // the primary is gone, and its slot with it
    };
    let prun = running_in(&p);
    if let Some(r) = &prun {
        let mut c = connect(r)?;
        let names: String = c
            .query_one("SELECT current_setting('synchronous_standby_names')", &[])
            .map(|row| row.get(0))
            .unwrap_or_default();
        let mut names = sync_names(&names);
        if names.contains(&sb.slot) {
            // Only this standby leaves the list; the others stay synchronous.
            names.retain(|n| *n != sb.slot);
            set_sync_names(&mut c, &p.dir, &names)?;
        }
        if forget {
            // The standby's WAL sender ends shortly after the standby stops.
            let t = std::time::Instant::now();
            loop {
                let r = c.execute(
                    "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1 AND NOT active",
                    &[&sb.slot],
                );
                let left: i64 = c
                    .query_one(
                        "SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1",
                        &[&sb.slot],
                    )
                    .map(|row| row.get(0))
                    .unwrap_or(0);
                if left == 0 {
                    break;
                }
                // The standby is stopped by now: whatever still holds its slot after a moment
                // is left over (the WAL streamer a killed pg_basebackup forked), and is ended.
                if t.elapsed() > std::time::Duration::from_secs(2) {
                    let _ = c.execute(
                        "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = $1 AND active",
                        &[&sb.slot],
                    );
                }
                if t.elapsed() > std::time::Duration::from_secs(10) {
                    return Err(Error::Setup(format!(
                        "{}: replication slot {} is still in use ({r:?}); drop it with plumb engine psql --dir {0} -- -c \"SELECT pg_drop_replication_slot('{1}')\"",
                        p.dir.display(),
                        sb.slot
                    )));
                }
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
        }
    }
    if forget {
        p.manifest.standbys.retain(|s| *s != d.dir);
        write_manifest(&p.dir, &p.manifest)?;
        if p.manifest.standbys.is_empty() && p.data().join("PG_VERSION").exists() {
            let server = server_user()?;
            let me = caller()?;
            write_access_files(&p.data(), &server, &me, false)?;
            if let Some(r) = &prun {
                let mut c = connect(r)?;
                exec(&mut c, &p.dir, "SELECT pg_reload_conf()")?;
            }
        }
        d.manifest.standby_of = None;
        write_manifest(&d.dir, &d.manifest)?;
    }
    Ok(())
}

/// At a primary's start: drop the slots of standbys plumb made and has since removed while the
/// primary was stopped (a slot nobody reads keeps WAL forever).
fn drop_forgotten_slots(d: &InstanceDir, r: &Running) -> Result<()> {
    let mut c = connect(r)?;
    let keep: Vec<String> = d.manifest.standbys.iter().map(|s| slot_name(s)).collect();
    let rows = c
        .query(
            "SELECT slot_name::text FROM pg_replication_slots WHERE slot_name LIKE 'plumb\\_standby\\_%' AND NOT active",
            &[],
        )
        .map_err(|e| Error::Setup(format!("{}: {}", d.dir.display(), crate::pg::with_causes(&e))))?;
    for row in rows {
        let name: String = row.get(0);
        if !keep.contains(&name) {
            let _ = c.execute("SELECT pg_drop_replication_slot($1)", &[&name]);
        }
    }
    Ok(())
}

/// Stops an instance this process started, on drop (errors, Ctrl-C unwinding through callers).
pub struct StopOnDrop(pub PathBuf);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        let _ = stop(&self.0);
    }
}

/// Stops an instance this process started and, when this process also created it, removes
/// what plumb created for it: nothing of plumb's is left behind.
pub struct Owned {
    pub dir: PathBuf,
    pub remove: bool,
}

impl Drop for Owned {
    fn drop(&mut self) {
        let r = if self.remove {
            remove(&self.dir).map(|_| ())
        } else {
            stop(&self.dir).map(|_| ())
        };
        if let Err(e) = r {
            eprintln!(
                "plumb: warning: {}",
                plumb_sys::visible::lines(&e.to_string())
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn major_versions_are_read_from_version_strings() {
        assert_eq!(major_of("17.10"), Some(17));
        assert_eq!(major_of("18beta1"), Some(18));
        assert_eq!(major_of("15"), Some(15));
        assert_eq!(major_of("x"), None);
        assert_eq!(
            major_of("PostgreSQL 17.10 on x86_64-pc-linux-gnu, compiled by gcc"),
            Some(17)
        );
        assert_eq!(major_of("MariaDB 10.11.6"), None);
    }

    #[test]
    fn synchronous_standby_names_are_read_as_a_list() {
        assert_eq!(sync_names(""), Vec::<String>::new());
        assert_eq!(sync_names("\"plumb_a\""), ["plumb_a"]);
        assert_eq!(sync_names("FIRST 2 (\"a\", \"b\")"), ["a", "b"]);
        assert_eq!(sync_names("ANY 1 (a,b)"), ["a", "b"]);
        assert_eq!(sync_names("a, b"), ["a", "b"]);
    }

    #[test]
    fn builds_are_found_by_major_version_in_a_cache_directory() {
        let d = tempfile::tempdir().unwrap();
        for v in ["16", "17"] {
            let bin = d.path().join(v).join("bin");
            std::fs::create_dir_all(&bin).unwrap();
            for p in ["initdb", "pg_ctl"] {
                std::fs::write(bin.join(p), "").unwrap();
            }
        }
        // Not a build: no pg_ctl.
        std::fs::create_dir_all(d.path().join("14/bin")).unwrap();
        std::fs::write(d.path().join("14/bin/initdb"), "").unwrap();
        let found: Vec<u32> = builds_under(d.path()).into_iter().map(|b| b.0).collect();
        assert_eq!(found, vec![16, 17]);
    }
}

/// A private instance's settings: `shared_buffers`, `track_io_timing=on` (plumb's deltas want
/// the read and write times in pg_stat_database and pg_stat_io), then each `--set NAME=VALUE`,
/// a later one replacing an earlier one of the same name.
pub fn settings(shared_buffers: &str, set: &[String]) -> Result<Vec<(String, String)>> {
    let mut out = vec![
        ("shared_buffers".to_string(), shared_buffers.to_string()),
        ("track_io_timing".to_string(), "on".to_string()),
    ];
    for s in set {
        let (k, v) = s
            .split_once('=')
            .ok_or_else(|| Error::Setup(format!("--set {s}: expected NAME=VALUE")))?;
        out.retain(|(n, _)| n != k);
        out.push((k.trim().to_string(), v.trim().to_string()));
    }
    Ok(out)
}
