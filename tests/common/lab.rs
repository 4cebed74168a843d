//! What the tests that run labs share: a scratch directory the server's user can reach, a lab
//! started and followed to a step, and the check that nothing of it is left.

use super::{is_root, plumb, processes_in};
use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

/// A scratch directory the postgres user can reach when plumb runs as root.
pub fn scratch() -> tempfile::TempDir {
    let d = tempfile::Builder::new()
        .prefix("plumb-lab-test")
        .tempdir_in("/var/tmp")
        .unwrap();
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    d
}

/// What is left in the scratch directory (the lab's work directory must be gone).
pub fn leftovers(dir: &Path, keep: &[&str]) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| !keep.contains(&n.as_str()))
        .collect()
}

pub fn assert_nothing_left(d: &Path, keep: &[&str]) {
    assert!(
        leftovers(d, keep).is_empty(),
        "left behind: {:?}",
        leftovers(d, keep)
    );
    assert!(
        processes_in(d).is_empty(),
        "still running: {:?}",
        processes_in(d)
    );
}

/// Start a lab and wait until its progress names `step`; the child and its stderr so far.
pub fn start_until(dir: &Path, out: &Path, step: &str) -> (Child, String) {
    start_until_with(&[], dir, out, step)
}

pub fn start_until_with(extra: &[&str], dir: &Path, out: &Path, step: &str) -> (Child, String) {
    let mut c = plumb()
        .args(["lab", "--quick"])
        .args(extra)
        .arg("--dir")
        .arg(dir)
        .arg("--out")
        .arg(out)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut r = BufReader::new(c.stderr.take().unwrap());
    let mut seen = String::new();
    let t0 = Instant::now();
    loop {
        let mut line = String::new();
        if r.read_line(&mut line).unwrap() == 0 {
            panic!("the lab ended before {step:?}: {seen}");
        }
        seen.push_str(&line);
        if line.contains(step) {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(240),
            "no {step:?}: {seen}"
        );
    }
    // Keep reading stderr so the child never blocks on a full pipe.
    let h = std::thread::spawn(move || {
        let mut rest = String::new();
        let _ = std::io::Read::read_to_string(&mut r, &mut rest);
        rest
    });
    std::mem::forget(h);
    (c, seen)
}

pub fn wait(c: &mut Child, limit: Duration) -> i32 {
    let t0 = Instant::now();
    loop {
        if let Some(st) = c.try_wait().unwrap() {
            return st.code().unwrap_or(-1);
        }
        assert!(
            t0.elapsed() < limit,
            "the lab did not stop within {limit:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Why the MariaDB lab cannot run here, or None.
pub fn no_mariadb() -> Option<&'static str> {
    if !Path::new("/usr/sbin/mariadbd").exists() {
        Some("no MariaDB server (apt-get install mariadb-server)")
    } else if !is_root() {
        Some("the private MariaDB runs as the mysql user: root only")
    } else {
        None
    }
}
