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
