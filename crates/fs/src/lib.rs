//! `plumb fs`: a database's views, and a DBA's own queries, as read-only files.
//!
//! One directory per group of views (PostgreSQL's `activity`, `stats`, `tables`…; MariaDB's
//! `performance_schema`, `innodb`, `status`…; SQL Server's `exec`, `os`, `io`…), three files
//! per view (tab-separated, `.json`, `.txt`), a `queries` directory with the results of the
//! `*.sql` files of a directory the user names, a README and an `.errors` file.
//!
//! Mounting is checked first: the mount point must be an empty directory; a plumb mount left
//! there by a plumb that was killed is removed (a live one, or anything else mounted there, is
//! refused); the server must answer. The mount is read-only, admits only its owner (FUSE's
//! default without `allow_other`), and carries no URL or password in its options
//! (`/proc/mounts` shows `plumb:postgresql`).

mod pool;
mod tree;

use plumb_engine::views::ViewReader;
use plumb_engine::{Kind, Target};
use plumb_report::view_render::MountFacts;
use plumb_sys::mount::MountEntry;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Bad input (a mount point, a URL, a query directory): nothing was mounted.
    #[error("{0}")]
    Input(String),
    /// The mount itself failed or ended badly.
    #[error("{0}")]
    Mount(String),
}

pub type Result<T> = std::result::Result<T, Error>;

/// How a mount reads.
#[derive(Debug, Clone)]
pub struct Options {
    pub target: Target,
    /// How long a result is reused by later opens (zero: every open runs its query).
    pub cache: Duration,
    /// The statement timeout of every query.
    pub timeout: Duration,
    /// The directory of the user's `*.sql` files.
    pub queries: Option<PathBuf>,
    /// Connections shared by the files.
    pub connections: usize,
    /// Unmount when the server has not answered for this long.
    pub gone_after: Duration,
}

/// What is mounted at a path.
#[derive(Debug, Clone, PartialEq)]
pub enum AtPath {
    Nothing,
    /// A plumb mount whose plumb is gone ("Transport endpoint is not connected").
    StalePlumb,
    /// A plumb mount a plumb still serves.
    LivePlumb,
    /// Something else.
    Other(MountEntry),
}

fn is_plumb_mount(m: &MountEntry) -> bool {
    (m.fs_type == "fuse" || m.fs_type.starts_with("fuse.")) && m.source.starts_with("plumb:")
}

/// An absolute path without symbolic links, found without looking inside the last component
/// (which may be a dead mount): a last component that is itself a symbolic link is followed
/// (`--unmount LINK` finds the mount where the link points).
fn resolve(path: &Path) -> Result<PathBuf> {
    let abs =
        std::path::absolute(path).map_err(|e| Error::Input(format!("{}: {e}", path.display())))?;
    let mut abs = plumb_sys::mount::normalize(&abs);
    for _ in 0..40 {
        match std::fs::symlink_metadata(&abs) {
            Ok(m) if m.file_type().is_symlink() => {
                let target = std::fs::read_link(&abs)
                    .map_err(|e| Error::Input(format!("{}: {e}", path.display())))?;
                let base = abs.parent().map(Path::to_path_buf).unwrap_or_default();
                abs = plumb_sys::mount::normalize(&base.join(target));
            }
            _ => break,
        }
    }
    let (Some(parent), Some(name)) = (abs.parent(), abs.file_name()) else {
        return Err(Error::Input(format!(
            "{}: not a directory plumb can mount on",
            path.display()
        )));
    };
    let parent = parent
        .canonicalize()
        .map_err(|e| Error::Input(format!("{}: {e}", path.display())))?;
    Ok(parent.join(name))
}

/// What is mounted at `path` (resolved), looking at the mount table and, for a plumb mount,
/// whether a plumb still answers there.
pub(crate) fn at_path(path: &Path) -> Result<(PathBuf, AtPath)> {
    let path = resolve(path)?;
    let mounts = plumb_sys::mount::read_mountinfo(&plumb_sys::Root::host(), None)
        .map_err(|e| Error::Mount(format!("the mount table: {e}")))?;
    let shown = path.to_string_lossy();
    let Some(m) = mounts.iter().rev().find(|m| m.mount_point == shown) else {
        return Ok((path, AtPath::Nothing));
    };
    if !is_plumb_mount(m) {
        return Ok((path, AtPath::Other(m.clone())));
    }
    let state = match std::fs::metadata(&path) {
        Err(e) if e.raw_os_error() == Some(libc::ENOTCONN) => AtPath::StalePlumb,
        _ => AtPath::LivePlumb,
    };
    Ok((path, state))
}

/// `plumb fs --unmount`: remove a plumb mount (live or left behind); anything else is refused.
pub fn unmount(path: &Path) -> Result<PathBuf> {
    let (path, at) = at_path(path)?;
    match at {
        AtPath::Nothing => Err(Error::Input(format!(
            "{}: nothing is mounted here",
            path.display()
        ))),
        AtPath::Other(m) => Err(Error::Input(format!(
            "{}: not a plumb mount ({} from {}); plumb removes only its own",
            path.display(),
            m.fs_type,
            m.source
        ))),
        AtPath::StalePlumb | AtPath::LivePlumb => {
            // Only its owner or root can take a FUSE mount down; fusermount3 says why only
            // in part, so the refusal is plumb's own.
            if !plumb_sys::os::is_root() {
                if let Some(uid) = mount_owner(&path).filter(|u| *u != plumb_sys::os::euid()) {
                    let who = plumb_sys::os::user_by_uid(uid)
                        .map(|u| format!("{} (uid {uid})", u.name))
                        .unwrap_or_else(|| format!("uid {uid}"));
                    return Err(Error::Input(format!(
                        "{}: a plumb mount of {who}; only that user or root can unmount it",
                        path.display()
                    )));
                }
            }
            remove(&path)?;
            Ok(path)
        }
    }
}

/// The user a FUSE mount at `path` belongs to (its `user_id=` option).
fn mount_owner(path: &Path) -> Option<u32> {
    let mounts = plumb_sys::mount::read_mountinfo(&plumb_sys::Root::host(), None).ok()?;
    let shown = path.to_string_lossy();
    let m = mounts.iter().rev().find(|m| m.mount_point == shown)?;
    m.super_options
        .iter()
        .find_map(|o| o.strip_prefix("user_id="))
        .and_then(|u| u.parse().ok())
}

/// Unmount; with files still open, detach it (it is gone from the tree at once, and its
/// last reader's files fail once plumb stops).
fn remove(path: &Path) -> Result<()> {
    match plumb_sys::os::unmount(path, false) {
        Ok(()) => Ok(()),
        Err(e) if e.raw_os_error() == Some(libc::EBUSY) => plumb_sys::os::unmount(path, true)
            .map_err(|e| Error::Mount(format!("{}: unmount: {e}", path.display()))),
        Err(e) => Err(Error::Mount(format!("{}: unmount: {e}", path.display()))),
    }
}

/// A mount checked and connected, not yet mounted.
pub struct Prepared {
    pub path: PathBuf,
    /// A plumb mount left at the path by a killed plumb, removed.
    pub removed_stale: bool,
    pub facts: MountFacts,
    state: Arc<tree::State>,
    kind: Kind,
    options: Options,
}

/// Check the mount point and the query directory, connect, and list the views.
pub fn prepare(mountpoint: &Path, options: Options) -> Result<Prepared> {
    if options.timeout < Duration::from_millis(1) {
        return Err(Error::Input(format!(
            "--timeout {:?}: must be at least 1ms",
            options.timeout
        )));
    }
    let shown = mountpoint.display();
    // The kernel would mount where a link points while plumb's bookkeeping named the link
    // (and another user could repoint it): the directory itself, or nothing.
    if std::fs::symlink_metadata(mountpoint).is_ok_and(|m| m.file_type().is_symlink()) {
        let to = std::fs::canonicalize(mountpoint)
            .map(|p| format!(" (it points to {})", p.display()))
            .unwrap_or_default();
        return Err(Error::Input(format!(
            "{shown}: a symbolic link{to}; give the directory itself as the mount point"
        )));
    }
    let (path, at) = at_path(mountpoint)?;
    let mut removed_stale = false;
    match at {
        AtPath::Nothing => {}
        AtPath::StalePlumb => {
            remove(&path)?;
            removed_stale = true;
        }
        AtPath::LivePlumb => {
            return Err(Error::Input(format!(
                "{shown}: a running plumb fs is mounted here; plumb fs --unmount {shown} first"
            )))
        }
        AtPath::Other(m) => {
            return Err(Error::Input(format!(
                "{shown}: {} from {} is mounted here; plumb mounts only on an empty directory",
                m.fs_type, m.source
            )))
        }
    }
    let meta = std::fs::metadata(&path).map_err(|e| Error::Input(format!("{shown}: {e}")))?;
    if !meta.is_dir() {
        return Err(Error::Input(format!("{shown}: not a directory")));
    }
    let mut rd = std::fs::read_dir(&path).map_err(|e| Error::Input(format!("{shown}: {e}")))?;
    if rd.next().is_some() {
        return Err(Error::Input(format!(
            "{shown}: not empty; plumb mounts only on an empty directory (what is in it would be hidden)"
        )));
    }
    if let Some(q) = &options.queries {
        check_query_dir(q)?;
    }
    let kind = options
        .target
        .kind()
        .map_err(|e| Error::Input(format!("--engine {e}")))?;
    let mut first = plumb_engine::views::reader(&options.target, options.timeout)
        .map_err(|e| Error::Input(plumb_engine::redact(&e.to_string())))?;
    let views = first
        .views()
        .map_err(|e| Error::Input(plumb_engine::redact(&e.to_string())))?;
    // The engine's own groups first, alphabetically; the catalogs (big, rarely read) last.
    let mut views = views;
    let last = |d: &str| matches!(d, "catalog" | "information_schema" | "other");
    views.sort_by(|a, b| (last(&a.dir), &a.dir, &a.name).cmp(&(last(&b.dir), &b.dir, &b.name)));
    let mut dirs: Vec<(String, usize)> = Vec::new();
    for v in &views {
        match dirs.iter_mut().find(|(d, _)| *d == v.dir) {
            Some((_, n)) => *n += 1,
            None => dirs.push((v.dir.clone(), 1)),
        }
    }
    let facts = MountFacts {
        engine: kind.name().to_string(),
        version: first.version(),
        url: options.target.shown(),
        mountpoint: path.display().to_string(),
        dirs,
        queries: options.queries.as_ref().map(|q| q.display().to_string()),
        cache_ms: options.cache.as_millis() as u64,
        timeout_ms: options.timeout.as_millis() as u64,
        read_only_how: match kind {
            Kind::Postgres => "in a read-only transaction that is rolled back".into(),
            Kind::Mariadb => {
                "in a read-only transaction (START TRANSACTION READ ONLY) that is rolled back"
                    .into()
            }
            Kind::Sqlserver => {
                "in a transaction that is rolled back (SQL Server has no read-only transactions)"
                    .into()
            }
        },
    };
    let pool = pool::Pool::new(
        options.target.clone(),
        options.timeout,
        options.connections,
        first,
    );
    let state = Arc::new(tree::State::new(
        facts.clone(),
        views,
        options.queries.clone(),
        options.cache,
        pool,
    ));
    Ok(Prepared {
        path,
        removed_stale,
        facts,
        state,
        kind,
        options,
    })
}

/// The query directory must be a directory only its owner (the caller, or root) can write:
/// plumb runs what is in it with the caller's credentials.
fn check_query_dir(q: &Path) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    let shown = q.display();
    let m = std::fs::metadata(q).map_err(|e| Error::Input(format!("--queries {shown}: {e}")))?;
    if !m.is_dir() {
        return Err(Error::Input(format!("--queries {shown}: not a directory")));
    }
    let (uid, _) = plumb_sys::os::uid_gid();
    if m.uid() != uid && m.uid() != 0 {
        return Err(Error::Input(format!(
            "--queries {shown}: belongs to uid {}, not to you; plumb runs only query files you own",
            m.uid()
        )));
    }
    if m.mode() & 0o022 != 0 {
        return Err(Error::Input(format!(
            "--queries {shown}: other users can add files to it, and plumb would run them as you (chmod go-w {shown})"
        )));
    }
    Ok(())
}

/// Why a mount ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Ending {
    /// Asked to stop (a signal); the mount was removed.
    Stopped,
    /// Someone unmounted it (`plumb fs --unmount`, `umount`).
    Unmounted,
    /// The server stopped answering for good; the mount was removed.
    Gone(String),
}

/// A mount being served.
pub struct Mounted {
    pub path: PathBuf,
    state: Arc<tree::State>,
    thread: std::thread::JoinHandle<std::io::Result<()>>,
    options: Options,
    /// The mount's line in plumb's ledger (a killed plumb fs leaves a dead mount otherwise).
    ledger: plumb_sys::ledger::Entry,
}

impl Prepared {
    /// Mount. The mount is served by a thread of its own until [`Mounted::serve`] ends.
    pub fn mount(self) -> Result<Mounted> {
        let mut config = fuser::Config::default();
        config.mount_options = vec![
            fuser::MountOption::RO,
            fuser::MountOption::NoSuid,
            fuser::MountOption::NoDev,
            fuser::MountOption::NoExec,
            fuser::MountOption::NoAtime,
            fuser::MountOption::DefaultPermissions,
            fuser::MountOption::FSName(format!(
                "plumb:{}",
                match self.kind {
                    Kind::Postgres => "postgresql",
                    Kind::Mariadb => "mariadb",
                    Kind::Sqlserver => "sqlserver",
                }
            )),
            fuser::MountOption::Subtype("plumb".into()),
        ];
        config.acl = fuser::SessionACL::Owner;
        let fs = tree::PlumbFs(self.state.clone());
        let ledger = plumb_sys::ledger::note(plumb_sys::ledger::Item::Mount {
            path: self.path.clone(),
        });
        let session = fuser::Session::new(fs, &self.path, &config).map_err(|e| {
            ledger.done();
            Error::Mount(format!(
                "{}: mount: {e}{}",
                self.path.display(),
                if e.kind() == std::io::ErrorKind::NotFound {
                    " (FUSE needs /dev/fuse, and fusermount3 when not root: apt-get install fuse3)"
                } else {
                    ""
                }
            ))
        })?;
        let thread = std::thread::Builder::new()
            .name("plumb-fs".into())
            .spawn(move || session.run())
            .map_err(|e| Error::Mount(format!("a thread to serve the mount: {e}")))?;
        Ok(Mounted {
            path: self.path,
            state: self.state,
            thread,
            options: self.options,
            ledger,
        })
    }
}

impl Mounted {
    /// Serve until `stop()` says so, someone unmounts it, or the server is gone for
    /// `gone_after`; the mount is removed in the first and last case.
    pub fn serve(self, stop: &dyn Fn() -> bool) -> Result<Ending> {
        let mut health: Option<Box<dyn ViewReader>> = None;
        let mut last_check = Instant::now();
        let mut down_since: Option<(Instant, String)> = None;
        loop {
            if stop() {
                remove(&self.path)?;
                self.ledger.done();
                return Ok(Ending::Stopped);
            }
            if self.thread.is_finished() {
                self.ledger.done();
                return Ok(Ending::Unmounted);
            }
            if last_check.elapsed() >= Duration::from_secs(1) {
                last_check = Instant::now();
                let ok = match health.as_mut() {
                    Some(r) => r.ping().map_err(|e| e.to_string()),
                    None => plumb_engine::views::reader(&self.options.target, self.options.timeout)
                        .map(|r| {
                            health = Some(r);
                        })
                        .map_err(|e| e.to_string()),
                };
                match ok {
                    Ok(()) => down_since = None,
                    Err(e) => {
                        health = None;
                        let since = down_since
                            .get_or_insert_with(|| (Instant::now(), plumb_engine::redact(&e)));
                        if since.0.elapsed() >= self.options.gone_after {
                            let why = since.1.clone();
                            remove(&self.path)?;
                            self.ledger.done();
                            return Ok(Ending::Gone(why));
                        }
                    }
                }
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Queries sent to the server and opens of view and query files so far.
    pub fn counts(&self) -> (u64, u64) {
        (
            self.state.pool.sent.load(Ordering::Relaxed),
            self.state.opens.load(Ordering::Relaxed),
        )
    }
}
