//! The files of a mount and the FUSE requests on them.
//!
//! Inodes: the root is 1, then the directories and view files in order, fixed at mount time.
//! The user's query files are found in their directory at each lookup and listing (a new
//! `.sql` file appears without a remount) and numbered from [`QUERY_BASE`], four numbers per
//! query name (its three forms).
//!
//! Only an open asks the server, from a thread of its own so that a slow query holds up only
//! its own caller. A lookup or a stat (`ls -l`) never does: a view's or query file's size is
//! its newest result's (0 before the first read), so listing a directory runs nobody's SQL.

use crate::pool::{Key, Pool, Results};
use fuser::{
    Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo,
    OpenAccMode, OpenFlags, ReplyAttr, ReplyData, ReplyDirectory, ReplyEmpty, ReplyEntry,
    ReplyOpen, Request,
};
use plumb_engine::views::{Table, View};
use plumb_report::view_render::{self, MountFacts, ViewFormat};
use std::collections::{BTreeMap, HashMap};
use std::ffi::OsStr;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Where the user's query files are numbered from.
pub(crate) const QUERY_BASE: u64 = 1 << 40;

/// How long the kernel may keep a name → file answer. Attributes are never kept: each stat
/// asks, so sizes follow the data.
const ENTRY_TTL: Duration = Duration::from_secs(1);

/// The largest query file plumb reads.
const MAX_QUERY_BYTES: u64 = 1 << 20;

#[derive(Debug, Clone)]
enum Node {
    Dir {
        name: String,
        children: Vec<u64>,
    },
    /// The user's query files (listed from their directory).
    Queries,
    File {
        name: String,
        what: What,
    },
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum What {
    View(usize, ViewFormat),
    Readme,
    /// `.errors`: the whole mount's, or only the query files' (`queries/.errors`).
    Errors {
        queries_only: bool,
    },
}

/// An open file: its content, and when it was taken.
type Handle = (Arc<Vec<u8>>, SystemTime);

/// A file in the user's query directory.
#[derive(Debug, Clone, PartialEq)]
struct QueryFile {
    name: String,
    form: ViewFormat,
}

pub(crate) struct State {
    pub facts: MountFacts,
    views: Vec<View>,
    nodes: Vec<Node>,
    queries: Option<PathBuf>,
    query_names: Mutex<Vec<String>>,
    cache: Duration,
    pub pool: Pool,
    results: Results,
    handles: Mutex<HashMap<u64, Handle>>,
    next_fh: AtomicU64,
    /// Each file whose last read failed: when (ms since the epoch) and why.
    errors: Mutex<BTreeMap<String, (u64, String)>>,
    uid: u32,
    gid: u32,
    started: SystemTime,
    /// Opens of view and query files.
    pub opens: AtomicU64,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn unix_ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

impl State {
    pub fn new(
        facts: MountFacts,
        views: Vec<View>,
        queries: Option<PathBuf>,
        cache: Duration,
        pool: Pool,
    ) -> State {
        // The root (1), its README and .errors, then a directory per group with three files
        // per view, then the query directory.
        let mut nodes = vec![Node::Dir {
            name: String::new(),
            children: Vec::new(),
        }];
        let mut root_children = Vec::new();
        let add = |nodes: &mut Vec<Node>, n: Node| -> u64 {
            nodes.push(n);
            nodes.len() as u64
        };
        root_children.push(add(
            &mut nodes,
            Node::File {
                name: "README".into(),
                what: What::Readme,
            },
        ));
        root_children.push(add(
            &mut nodes,
            Node::File {
                name: ".errors".into(),
                what: What::Errors {
                    queries_only: false,
                },
            },
        ));
        let mut dirs: Vec<String> = Vec::new();
        for v in &views {
            if !dirs.contains(&v.dir) {
                dirs.push(v.dir.clone());
            }
        }
        for d in &dirs {
            let dir_ino = add(
                &mut nodes,
                Node::Dir {
                    name: d.clone(),
                    children: Vec::new(),
                },
            );
            root_children.push(dir_ino);
            let mut kids = Vec::new();
            for (i, v) in views.iter().enumerate().filter(|(_, v)| &v.dir == d) {
                for form in ViewFormat::ALL {
                    kids.push(add(
                        &mut nodes,
                        Node::File {
                            name: format!("{}{}", v.name, form.suffix()),
                            what: What::View(i, form),
                        },
                    ));
                }
            }
            if let Node::Dir { children, .. } = &mut nodes[dir_ino as usize - 1] {
                *children = kids;
            }
        }
        if queries.is_some() {
            root_children.push(add(&mut nodes, Node::Queries));
            add(
                &mut nodes,
                Node::File {
                    name: ".errors".into(),
                    what: What::Errors { queries_only: true },
                },
            );
        }
        if let Node::Dir { children, .. } = &mut nodes[0] {
            *children = root_children;
        }
        let (uid, gid) = plumb_sys::os::uid_gid();
        State {
            facts,
            views,
            nodes,
            queries,
            query_names: Mutex::new(Vec::new()),
            cache,
            pool,
            results: Results::default(),
            handles: Mutex::new(HashMap::new()),
            next_fh: AtomicU64::new(1),
            errors: Mutex::new(BTreeMap::new()),
            uid,
            gid,
            started: SystemTime::now(),
            opens: AtomicU64::new(0),
        }
    }

    fn node(&self, ino: u64) -> Option<&Node> {
        if ino == 0 {
            return None;
        }
        self.nodes.get(ino as usize - 1)
    }

    fn node_name(&self, ino: u64) -> String {
        match self.node(ino) {
            Some(Node::Dir { name, .. }) | Some(Node::File { name, .. }) => name.clone(),
            Some(Node::Queries) => "queries".into(),
            None => String::new(),
        }
    }

    /// The query file behind an inode from [`QUERY_BASE`].
    fn query_file(&self, ino: u64) -> Option<QueryFile> {
        let i = ino.checked_sub(QUERY_BASE)?;
        let name = lock(&self.query_names).get((i / 4) as usize)?.clone();
        let form = *ViewFormat::ALL.get((i % 4) as usize)?;
        Some(QueryFile { name, form })
    }

    fn query_ino(&self, name: &str, form: ViewFormat) -> u64 {
        let mut names = lock(&self.query_names);
        let id = match names.iter().position(|n| n == name) {
            Some(i) => i,
            None => {
                names.push(name.to_string());
                names.len() - 1
            }
        };
        let f = ViewFormat::ALL.iter().position(|x| *x == form).unwrap_or(0);
        QUERY_BASE + id as u64 * 4 + f as u64
    }

    /// The query names in the user's directory now: each regular `NAME.sql`.
    fn query_names_now(&self) -> Vec<String> {
        let Some(dir) = &self.queries else {
            return Vec::new();
        };
        let Ok(rd) = std::fs::read_dir(dir) else {
            return Vec::new();
        };
        let mut out: Vec<String> = rd
            .filter_map(|e| e.ok())
            .filter_map(|e| {
                let name = e.file_name().to_str()?.to_string();
                let stem = name.strip_suffix(".sql")?;
                // A name that would read as another file's form is left out.
                if stem.is_empty() || stem.ends_with(".json") || stem.ends_with(".txt") {
                    return None;
                }
                e.path().metadata().ok().filter(|m| m.is_file())?;
                Some(stem.to_string())
            })
            .collect();
        out.sort();
        out
    }

    /// A query file's SQL, refused when someone other than its owner could have written it.
    fn read_query(&self, name: &str) -> Result<String, String> {
        let dir = self.queries.as_ref().ok_or("no query directory")?;
        let path = dir.join(format!("{name}.sql"));
        let shown = path.display();
        let m = path.metadata().map_err(|e| format!("{shown}: {e}"))?;
        if m.uid() != self.uid && m.uid() != 0 {
            return Err(format!(
                "{shown}: not run: it belongs to uid {}, not to you (uid {}); plumb runs only your own query files",
                m.uid(),
                self.uid
            ));
        }
        if m.mode() & 0o022 != 0 {
            return Err(format!(
                "{shown}: not run: other users can write it (chmod go-w {shown})"
            ));
        }
        if m.len() > MAX_QUERY_BYTES {
            return Err(format!("{shown}: not run: larger than 1 MiB"));
        }
        let sql = plumb_sys::read_text_bounded(&path, MAX_QUERY_BYTES)
            .map_err(|e| format!("{shown}: not run: {e}"))?;
        if sql.trim().is_empty() {
            return Err(format!("{shown}: empty"));
        }
        Ok(sql)
    }

    fn note(&self, file: &str, result: &Result<Table, String>) {
        let mut e = lock(&self.errors);
        match result {
            Ok(_) => {
                e.remove(file);
            }
            Err(m) => {
                e.insert(file.to_string(), (unix_ms(SystemTime::now()), m.clone()));
            }
        }
    }

    fn errors_bytes(&self, queries_only: bool) -> Vec<u8> {
        let rows: Vec<(String, u64, String)> = lock(&self.errors)
            .iter()
            .filter(|(f, _)| !queries_only || f.starts_with("queries/"))
            .map(|(f, (t, m))| (f.clone(), *t, m.clone()))
            .collect();
        view_render::errors(&rows)
    }

    /// The content of a file and the moment it was taken, from a result at most `max_age`
    /// old. None: no such file.
    fn content(&self, ino: u64, max_age: Duration) -> Option<(Arc<Vec<u8>>, SystemTime)> {
        if let Some(q) = self.query_file(ino) {
            let file = format!("queries/{}", q.name);
            return Some(match self.read_query(&q.name) {
                Err(m) => {
                    let r = Err(m.clone());
                    self.note(&file, &r);
                    (Arc::new(view_render::error(&m, q.form)), SystemTime::now())
                }
                Ok(sql) => {
                    let slot = self
                        .results
                        .get(&Key::Query(q.name.clone()), &sql, max_age, || {
                            let r = self.pool.run(|c| c.query_user(&sql));
                            self.note(&file, &r);
                            r
                        });
                    (slot.bytes(q.form, None), slot.wall)
                }
            });
        }
        match self.node(ino)? {
            Node::File {
                what: What::View(i, form),
                ..
            } => {
                let v = &self.views[*i];
                let file = format!("{}/{}", v.dir, v.name);
                let slot = self.results.get(&Key::View(*i), &v.sql, max_age, || {
                    let r = self.pool.run(|c| c.query(&v.sql));
                    self.note(&file, &r);
                    r
                });
                Some((slot.bytes(*form, v.text_column.as_deref()), slot.wall))
            }
            Node::File {
                what: What::Readme, ..
            } => Some((Arc::new(view_render::readme(&self.facts)), self.started)),
            Node::File {
                what: What::Errors { queries_only },
                ..
            } => Some((
                Arc::new(self.errors_bytes(*queries_only)),
                SystemTime::now(),
            )),
            _ => None,
        }
    }

    /// Whether answering for this inode may need the server.
    fn needs_server(&self, ino: u64) -> bool {
        ino >= QUERY_BASE
            || matches!(
                self.node(ino),
                Some(Node::File {
                    what: What::View(..),
                    ..
                })
            )
    }

    fn is_dir(&self, ino: u64) -> bool {
        matches!(self.node(ino), Some(Node::Dir { .. }) | Some(Node::Queries))
    }

    fn dir_attr(&self, ino: u64) -> FileAttr {
        self.attr(ino, FileType::Directory, 0, self.started)
    }

    fn attr(&self, ino: u64, kind: FileType, size: u64, mtime: SystemTime) -> FileAttr {
        FileAttr {
            ino: INodeNo(ino),
            size,
            blocks: size.div_ceil(512),
            atime: mtime,
            mtime,
            ctime: mtime,
            crtime: self.started,
            kind,
            perm: if kind == FileType::Directory {
                0o555
            } else {
                0o444
            },
            nlink: if kind == FileType::Directory { 2 } else { 1 },
            uid: self.uid,
            gid: self.gid,
            rdev: 0,
            blksize: 4096,
            flags: 0,
        }
    }

    /// A file's attributes, without asking the server: a view's or query file's size is that
    /// of its newest result (0, dated from the mount, before its first read).
    fn file_attr(&self, ino: u64) -> Option<FileAttr> {
        if self.is_dir(ino) {
            return Some(self.dir_attr(ino));
        }
        if self.needs_server(ino) {
            let (key, form, text_column) = match self.query_file(ino) {
                Some(q) => (Key::Query(q.name), q.form, None),
                None => match self.node(ino)? {
                    Node::File {
                        what: What::View(i, form),
                        ..
                    } => (Key::View(*i), *form, self.views[*i].text_column.as_deref()),
                    _ => return None,
                },
            };
            let (size, when) = match self.results.newest(&key) {
                Some(slot) => (slot.bytes(form, text_column).len() as u64, slot.wall),
                None => (0, self.started),
            };
            return Some(self.attr(ino, FileType::RegularFile, size, when));
        }
        let (bytes, when) = self.content(ino, self.cache)?;
        Some(self.attr(ino, FileType::RegularFile, bytes.len() as u64, when))
    }

    /// The child of a directory by name.
    fn child(&self, parent: u64, name: &str) -> Option<u64> {
        match self.node(parent)? {
            Node::Dir { children, .. } => children
                .iter()
                .copied()
                .find(|c| self.node_name(*c) == name),
            Node::Queries => {
                if name == ".errors" {
                    return Some(parent + 1);
                }
                let (stem, form) = ViewFormat::of_file(name);
                if self.query_names_now().iter().any(|n| n == stem) {
                    Some(self.query_ino(stem, form))
                } else {
                    None
                }
            }
            Node::File { .. } => None,
        }
    }

    /// A directory's entries (after `.` and `..`).
    fn entries(&self, ino: u64) -> Option<Vec<(u64, FileType, String)>> {
        match self.node(ino)? {
            Node::Dir { children, .. } => Some(
                children
                    .iter()
                    .map(|c| {
                        let kind = if self.is_dir(*c) {
                            FileType::Directory
                        } else {
                            FileType::RegularFile
                        };
                        (*c, kind, self.node_name(*c))
                    })
                    .collect(),
            ),
            Node::Queries => {
                let mut out = vec![(ino + 1, FileType::RegularFile, ".errors".to_string())];
                let names = self.query_names_now();
                // Results of files that are gone are forgotten.
                self.results.keep_queries(&names);
                for n in names {
                    for form in ViewFormat::ALL {
                        out.push((
                            self.query_ino(&n, form),
                            FileType::RegularFile,
                            format!("{n}{}", form.suffix()),
                        ));
                    }
                }
                Some(out)
            }
            Node::File { .. } => None,
        }
    }

    fn parent_of(&self, ino: u64) -> u64 {
        for (i, n) in self.nodes.iter().enumerate() {
            if let Node::Dir { children, .. } = n {
                if children.contains(&ino) {
                    return i as u64 + 1;
                }
            }
        }
        1
    }
}

/// The FUSE side: every request, on the shared state.
pub(crate) struct PlumbFs(pub Arc<State>);

impl Filesystem for PlumbFs {
    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let Some(name) = name.to_str() else {
            return reply.error(Errno::ENOENT);
        };
        let Some(ino) = self.0.child(parent.0, name) else {
            return reply.error(Errno::ENOENT);
        };
        match self.0.file_attr(ino) {
            Some(a) => reply.entry_with_ttls(&Duration::ZERO, &ENTRY_TTL, &a, Generation(0)),
            None => reply.error(Errno::ENOENT),
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, fh: Option<FileHandle>, reply: ReplyAttr) {
        let ino = ino.0;
        // An open file's size is its own snapshot's (fstat after open: cat, wc).
        if let Some(fh) = fh {
            if let Some((b, when)) = lock(&self.0.handles).get(&fh.0).cloned() {
                let a = self
                    .0
                    .attr(ino, FileType::RegularFile, b.len() as u64, when);
                return reply.attr(&Duration::ZERO, &a);
            }
        }
        match self.0.file_attr(ino) {
            Some(a) => reply.attr(&Duration::ZERO, &a),
            None => reply.error(Errno::ENOENT),
        }
    }

    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let ino = ino.0;
        if flags.acc_mode() != OpenAccMode::O_RDONLY || flags.0 & libc::O_TRUNC != 0 {
            return reply.error(Errno::EROFS);
        }
        if self.0.is_dir(ino) {
            return reply.error(Errno::EISDIR);
        }
        let st = self.0.clone();
        let work = move || {
            let max_age = st.cache;
            match st.content(ino, max_age) {
                Some((bytes, when)) => {
                    if st.needs_server(ino) {
                        st.opens.fetch_add(1, Ordering::Relaxed);
                    }
                    let fh = st.next_fh.fetch_add(1, Ordering::Relaxed);
                    lock(&st.handles).insert(fh, (bytes, when));
                    // Reads come to plumb, not from the page cache: each open has its own
                    // snapshot, whatever size the kernel last saw.
                    reply.opened(FileHandle(fh), FopenFlags::FOPEN_DIRECT_IO);
                }
                None => reply.error(Errno::ENOENT),
            }
        };
        if self.0.needs_server(ino) {
            std::thread::spawn(work);
        } else {
            work();
        }
    }

    fn read(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<fuser::LockOwner>,
        reply: ReplyData,
    ) {
        let Some((b, _)) = lock(&self.0.handles).get(&fh.0).cloned() else {
            return reply.error(Errno::EBADF);
        };
        let start = (offset as usize).min(b.len());
        let end = start.saturating_add(size as usize).min(b.len());
        reply.data(&b[start..end]);
    }

    fn release(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<fuser::LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        lock(&self.0.handles).remove(&fh.0);
        reply.ok();
    }

    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        if self.0.is_dir(ino.0) {
            reply.opened(FileHandle(0), FopenFlags::empty());
        } else {
            reply.error(Errno::ENOTDIR);
        }
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let Some(entries) = self.0.entries(ino.0) else {
            return reply.error(Errno::ENOTDIR);
        };
        let parent = if ino.0 == 1 {
            1
        } else {
            self.0.parent_of(ino.0)
        };
        let all = [
            (ino.0, FileType::Directory, ".".to_string()),
            (parent, FileType::Directory, "..".to_string()),
        ]
        .into_iter()
        .chain(entries);
        for (i, (child, kind, name)) in all.enumerate().skip(offset as usize) {
            if reply.add(INodeNo(child), (i + 1) as u64, kind, &name) {
                break;
            }
        }
        reply.ok();
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: fuser::ReplyStatfs) {
        reply.statfs(0, 0, 0, 0, 0, 4096, 255, 4096);
    }
}
