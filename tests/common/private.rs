//! A private PostgreSQL for a test: made by `plumb engine start` in a directory, stopped and
//! removed (`plumb engine stop --remove`) when the value is dropped, also when the test fails.

use super::plumb;
use std::path::{Path, PathBuf};

pub struct Private {
    pub dir: PathBuf,
    /// What `engine start --json` said (`url`, `instance.pid`…).
    pub started: serde_json::Value,
    removed: bool,
}

impl Private {
    /// Started in `dir` with `extra` flags (`--set`, `--shared-buffers`, `--standby-of`,
    /// `--bin-dir`…); a start that fails fails the test with plumb's words.
    pub fn start(dir: &Path, extra: &[&str]) -> Private {
        let o = plumb()
            .args(["engine", "start", "--json", "--dir"])
            .arg(dir)
            .args(extra)
            .output()
            .expect("run plumb engine start");
        assert!(
            o.status.success(),
            "plumb engine start --dir {} {extra:?}: {}",
            dir.display(),
            String::from_utf8_lossy(&o.stderr)
        );
        let started = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
            panic!(
                "engine start --json: {e}: {}",
                String::from_utf8_lossy(&o.stdout)
            )
        });
        Private {
            dir: dir.to_path_buf(),
            started,
            removed: false,
        }
    }

    /// Its address (a socket in its directory, with the caller's login).
    pub fn url(&self) -> String {
        self.started["url"]
            .as_str()
            .expect("engine start --json gives a url")
            .to_string()
    }

    /// The postmaster's PID.
    pub fn pid(&self) -> u32 {
        self.started["instance"]["pid"]
            .as_u64()
            .expect("engine start --json gives the instance's pid") as u32
    }

    /// The directory as a string (for plumb's own flags).
    pub fn dir_str(&self) -> &str {
        self.dir.to_str().expect("a UTF-8 test directory")
    }

    /// `sql` through psql on it: the output, trimmed.
    pub fn psql(&self, sql: &str) -> String {
        super::engine_psql(&self.dir, sql)
    }

    /// What `engine status --json` says now.
    pub fn status(&self) -> serde_json::Value {
        let o = plumb()
            .args(["--json", "engine", "status", "--dir"])
            .arg(&self.dir)
            .output()
            .expect("run plumb engine status");
        serde_json::from_slice(&o.stdout).unwrap_or(serde_json::Value::Null)
    }
}

impl Private {
    /// Stop and remove it now (`engine stop --remove`), for a test that checks how that went.
    pub fn remove(mut self) -> std::process::Output {
        self.removed = true;
        stop_remove(&self.dir)
    }
}

fn stop_remove(dir: &Path) -> std::process::Output {
    plumb()
        .args(["engine", "stop", "--remove", "--dir"])
        .arg(dir)
        .output()
        .expect("run plumb engine stop")
}

impl Drop for Private {
    fn drop(&mut self) {
        if !self.removed {
            stop_remove(&self.dir);
        }
    }
}

/// The instance's postmaster and its children, stopped (SIGSTOP) while this lives: a server
/// that says nothing. Continued when it goes, also when the test fails.
pub struct Silent(Vec<i32>);

impl Private {
    /// Stop the whole instance (SIGSTOP) until the guard goes.
    pub fn silence(&self) -> Silent {
        let root = self.pid();
        let mut pids = vec![root as i32];
        for e in std::fs::read_dir("/proc").unwrap().flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
                continue;
            };
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let ppid = stat
                .rsplit_once(')')
                .and_then(|(_, r)| r.split_whitespace().nth(1))
                .and_then(|v| v.parse::<u32>().ok());
            if ppid == Some(root) {
                pids.push(pid);
            }
        }
        for &pid in &pids {
            // SAFETY: signals to the test's own server.
            unsafe { libc::kill(pid, libc::SIGSTOP) };
        }
        Silent(pids)
    }
}

impl Drop for Silent {
    fn drop(&mut self) {
        for &pid in &self.0 {
            // SAFETY: as above.
            unsafe { libc::kill(pid, libc::SIGCONT) };
        }
    }
}
