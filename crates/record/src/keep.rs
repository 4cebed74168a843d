//! A recorder left running for months (`plumb record --out-dir`): a new file every so often,
//! and the oldest of its own files removed when the directory's recordings pass a size or an
//! age. Only files named as plumb names them (`plumb-DATE-TIME.plumb`, regular files) are
//! ever removed, and never the one being written.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// Where and how long to keep recordings.
#[derive(Debug, Clone)]
pub struct Keep {
    /// The directory the recordings go into.
    pub dir: PathBuf,
    /// A new file this often.
    pub every: Duration,
    /// Remove the oldest while the directory's recordings take more than this.
    pub max_bytes: u64,
    /// Remove recordings last written longer ago than this.
    pub max_age: Duration,
}

/// Why a recording was removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cap {
    Size,
    Age,
}

/// A recording removed to keep within the caps.
#[derive(Debug, Clone)]
pub struct Removed {
    pub path: PathBuf,
    pub bytes: u64,
    pub cap: Cap,
}

/// A name for a new recording in `dir`, `plumb-DATE-TIME.plumb` (with `-2`, `-3`… when a
/// file of that name exists: two files started in the same second).
pub(crate) fn next_path(dir: &Path) -> PathBuf {
    let stamp = crate::stamp();
    let first = dir.join(format!("plumb-{stamp}.plumb"));
    if !first.exists() {
        return first;
    }
    (2..)
        .map(|n| dir.join(format!("plumb-{stamp}-{n}.plumb")))
        .find(|p| !p.exists())
        .expect("an unused name")
}

/// Whether plumb named this file (and so may remove it).
fn is_ours(name: &str) -> bool {
    let Some(stem) = name
        .strip_prefix("plumb-")
        .and_then(|s| s.strip_suffix(".plumb"))
    else {
        return false;
    };
    // DATE-TIME, then an optional -N.
    let b = stem.as_bytes();
    b.len() >= 15
        && b[..8].iter().all(u8::is_ascii_digit)
        && b[8] == b'-'
        && b[9..15].iter().all(u8::is_ascii_digit)
        && (b.len() == 15
            || (b[15] == b'-' && b.len() > 16 && b[16..].iter().all(u8::is_ascii_digit)))
}

/// Remove the oldest of plumb's recordings in `keep.dir` (by when they were last written) that
/// are older than the age cap, then the oldest while all of them (`current` included) take more
/// than the size cap. `current` is never removed. Returns what was removed.
pub(crate) fn prune(keep: &Keep, current: &Path, now: SystemTime) -> std::io::Result<Vec<Removed>> {
    let mut files = Vec::new();
    for e in std::fs::read_dir(&keep.dir)? {
        let e = e?;
        let name = e.file_name();
        let Some(name) = name.to_str().filter(|n| is_ours(n)) else {
            continue;
        };
        let m = e.metadata()?;
        if !m.file_type().is_file() {
            continue;
        }
        let path = keep.dir.join(name);
        let written = m.modified().unwrap_or(now);
        files.push((written, path, m.len()));
    }
    files.sort();
    let mut total: u64 = files.iter().map(|f| f.2).sum();
    let mut removed = Vec::new();
    for (written, path, bytes) in files {
        if path.file_name() == current.file_name() {
            continue;
        }
        let old = now
            .duration_since(written)
            .is_ok_and(|age| age > keep.max_age);
        let cap = if old {
            Cap::Age
        } else if total > keep.max_bytes {
            Cap::Size
        } else {
            continue;
        };
        match std::fs::remove_file(&path) {
            Ok(()) => {}
            // Removed meanwhile by someone else: nothing to do.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        total -= bytes;
        removed.push(Removed { path, bytes, cap });
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs::{File, FileTimes};

    fn file(dir: &Path, name: &str, bytes: usize, age_s: u64, now: SystemTime) {
        let p = dir.join(name);
        std::fs::write(&p, vec![0u8; bytes]).unwrap();
        let t = now - Duration::from_secs(age_s);
        File::options()
            .write(true)
            .open(&p)
            .unwrap()
            .set_times(FileTimes::new().set_modified(t).set_accessed(t))
            .unwrap();
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn the_oldest_go_first_and_only_plumbs_own_files() {
        let d = tempfile::tempdir().unwrap();
        let now = SystemTime::now();
        file(d.path(), "plumb-20261101-000000.plumb", 400, 3000, now);
        file(d.path(), "plumb-20261101-010000.plumb", 400, 2000, now);
        file(d.path(), "plumb-20261101-010000-2.plumb", 400, 1500, now);
        file(d.path(), "plumb-20261101-020000.plumb", 400, 10, now);
        // Not plumb's: a user's file, a name plumb would not give, another extension.
        file(d.path(), "notes.plumb", 5000, 9000, now);
        file(d.path(), "plumb-mine.plumb", 5000, 9000, now);
        file(d.path(), "plumb-20261101-000000.plumb.bak", 5000, 9000, now);
        std::os::unix::fs::symlink("/etc/passwd", d.path().join("plumb-20261101-030000.plumb"))
            .unwrap();
        let keep = Keep {
            dir: d.path().into(),
            every: Duration::from_secs(3600),
            max_bytes: 1000,
            max_age: Duration::from_secs(2500),
        };
        let current = d.path().join("plumb-20261101-020000.plumb");
        let r = prune(&keep, &current, now).unwrap();
        // The first by age; then 1,200 bytes left of plumb's, over 1,000: the next oldest.
        assert_eq!(r.len(), 2, "{r:?}");
        assert_eq!(r[0].cap, Cap::Age);
        assert!(r[0].path.ends_with("plumb-20261101-000000.plumb"));
        assert_eq!(r[1].cap, Cap::Size);
        assert!(r[1].path.ends_with("plumb-20261101-010000.plumb"));
        assert_eq!(
            names(d.path()),
            [
                "notes.plumb",
                "plumb-20261101-000000.plumb.bak",
                "plumb-20261101-010000-2.plumb",
                "plumb-20261101-020000.plumb",
                "plumb-20261101-030000.plumb",
                "plumb-mine.plumb",
            ]
        );
        // The file being written stays even alone over the cap.
        let small = Keep {
            max_bytes: 1,
            ..keep
        };
        let r = prune(&small, &current, now).unwrap();
        assert_eq!(r.len(), 1);
        assert!(current.exists());
    }

    #[test]
    fn names_are_plumbs_own() {
        for ok in [
            "plumb-20261127-101010.plumb",
            "plumb-20261127-101010-12.plumb",
        ] {
            assert!(is_ours(ok), "{ok}");
        }
        for no in [
            "plumb-20261127-101010-.plumb",
            "plumb-2026112-101010.plumb",
            "plumb-20261127-101010.plumb.x",
            "plumb-20261127_101010.plumb",
            "plumb-20261127-101010-a.plumb",
            "x-plumb-20261127-101010.plumb",
        ] {
            assert!(!is_ours(no), "{no}");
        }
        let d = tempfile::tempdir().unwrap();
        let a = next_path(d.path());
        std::fs::write(&a, b"").unwrap();
        let b = next_path(d.path());
        assert_ne!(a, b);
        assert!(is_ours(a.file_name().unwrap().to_str().unwrap()));
        assert!(is_ours(b.file_name().unwrap().to_str().unwrap()));
    }
}
