//! A MariaDB server of a test's own (apt-get install mariadb-server; `scripts/setup --test`
//! installs it): performance_schema on, a 64 MiB buffer pool.

use super::is_root;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A MariaDB server of this test's own, in a temporary directory.
pub struct Maria {
    pub dir: tempfile::TempDir,
    pub child: Option<Child>,
    /// More server options (replication); with a --port, the server listens on 127.0.0.1.
    pub extra: Vec<String>,
}

impl Maria {
    pub fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }
    pub fn sock(&self) -> PathBuf {
        self.dir.path().join("mysqld.sock")
    }
    pub fn url(&self, db: &str) -> String {
        format!(
            "mysql://root@localhost/{db}?socket={}",
            self.sock().display()
        )
    }

    pub fn start() -> Result<Maria, String> {
        Maria::start_with(&[])
    }

    pub fn start_with(extra: &[&str]) -> Result<Maria, String> {
        if !Path::new("/usr/sbin/mariadbd").exists() {
            return Err("no MariaDB server (apt-get install mariadb-server)".into());
        }
        let dir = tempfile::Builder::new()
            .prefix("plumb-maria")
            .tempdir_in("/tmp")
            .map_err(|e| e.to_string())?;
        if is_root() {
            // mariadbd drops to the mysql user, who must reach the directory.
            let st = Command::new("chown")
                .args(["mysql:mysql"])
                .arg(dir.path())
                .status()
                .map_err(|e| e.to_string())?;
            if !st.success() {
                return Err("chown mysql failed (no mysql user?)".into());
            }
        }
        let mut m = Maria {
            dir,
            child: None,
            extra: extra.iter().map(|s| s.to_string()).collect(),
        };
        let o = Command::new("mariadb-install-db")
            .arg("--no-defaults")
            .arg(format!("--datadir={}", m.data().display()))
            // Its own temporary directory: two bootstraps at once in /tmp have failed with
            // "Could not remove temporary table".
            .arg(format!("--tmpdir={}", m.dir.path().display()))
            .args([
                "--user=mysql",
                "--auth-root-authentication-method=normal",
                "--skip-test-db",
            ])
            .output()
            .map_err(|e| format!("mariadb-install-db: {e}"))?;
        if !o.status.success() {
            return Err(format!(
                "mariadb-install-db failed: {}",
                String::from_utf8_lossy(&o.stderr)
            ));
        }
        m.launch()?;
        Ok(m)
    }

    pub fn launch(&mut self) -> Result<(), String> {
        let d = self.dir.path();
        let child = Command::new("/usr/sbin/mariadbd")
            .arg("--no-defaults")
            .arg(format!("--datadir={}", self.data().display()))
            .arg(format!("--socket={}", self.sock().display()))
            .arg(format!("--pid-file={}", d.join("mariadbd.pid").display()))
            .arg(format!("--log-error={}", d.join("error.log").display()))
            .arg(format!("--tmpdir={}", d.display()))
            .args(if self.extra.iter().any(|a| a.starts_with("--port=")) {
                &["--bind-address=127.0.0.1"][..]
            } else {
                &["--skip-networking"][..]
            })
            .args([
                "--user=mysql",
                "--performance_schema=ON",
                "--performance-schema-instrument=%=ON",
                "--innodb-buffer-pool-size=64M",
                "--innodb-flush-method=O_DIRECT",
                // A restart must start with an empty buffer pool (no dump and reload).
                "--innodb-buffer-pool-dump-at-shutdown=OFF",
                "--innodb-buffer-pool-load-at-startup=OFF",
            ])
            // The caller's last: a later option wins.
            .args(&self.extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("mariadbd: {e}"))?;
        self.child = Some(child);
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(60) {
            if self.sql("SELECT 1").is_ok() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        Err(format!(
            "mariadbd did not come up: {}",
            std::fs::read_to_string(d.join("error.log")).unwrap_or_default()
        ))
    }

    pub fn sql(&self, sql: &str) -> Result<String, String> {
        let o = Command::new("mariadb")
            .arg(format!("--socket={}", self.sock().display()))
            .args(["-uroot", "-N", "-B", "-e", sql])
            .output()
            .map_err(|e| e.to_string())?;
        if o.status.success() {
            Ok(String::from_utf8_lossy(&o.stdout).into_owned())
        } else {
            Err(String::from_utf8_lossy(&o.stderr).into_owned())
        }
    }

    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            // SAFETY: signalling the server this test started.
            unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
            let t0 = Instant::now();
            while t0.elapsed() < Duration::from_secs(30) {
                if c.try_wait().ok().flatten().is_some() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(|c| c.id())
    }
}

impl Drop for Maria {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A free TCP port on 127.0.0.1 (the kernel's choice, released for the server to take).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}
