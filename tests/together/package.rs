//! The Debian package (scripts/package-deb): built from the test's plumb, installed with dpkg
//! on this machine, its service's command run as the service's user, then removed and purged
//! without a file left. Root only; skipped where a plumb is already installed (not ours to
//! remove).

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use crate::common;
use crate::common::{is_root, skip, stderr};

const REPO: &str = env!("CARGO_MANIFEST_DIR");

fn sh(cmd: &str) -> Output {
    Command::new("sh").arg("-c").arg(cmd).output().unwrap()
}

fn ok(cmd: &str) -> String {
    let o = sh(cmd);
    assert!(
        o.status.success(),
        "{cmd}: {}{}",
        String::from_utf8_lossy(&o.stdout),
        stderr(&o)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn no_package() -> Option<String> {
    if !is_root() {
        return Some("skipped: dpkg installs as root only".into());
    }
    for tool in [
        "dpkg-deb",
        "dpkg",
        "strip",
        "objdump",
        "systemd-analyze",
        "setpriv",
    ] {
        if !sh(&format!("command -v {tool}")).status.success() {
            return Some(format!("skipped: no {tool}"));
        }
    }
    if sh("dpkg-query -W plumb").status.success() || Path::new("/usr/bin/plumb").exists() {
        return Some(
            "skipped: a plumb is installed here already, not this test's to remove".into(),
        );
    }
    None
}

/// Purges the package (and the user, when the test made it) however the test ends.
struct Installed {
    user_was_there: bool,
}

impl Drop for Installed {
    fn drop(&mut self) {
        let _ = sh("dpkg --purge plumb >/dev/null 2>&1");
        if !self.user_was_there {
            let _ = sh("userdel plumb 2>/dev/null; groupdel plumb 2>/dev/null");
        }
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn get_metrics(port: u16) -> Option<String> {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    s.write_all(b"GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n")
        .ok()?;
    let mut body = String::new();
    s.read_to_string(&mut body).ok()?;
    Some(body)
}

#[test]
fn the_debian_package_installs_runs_its_service_command_and_purges_clean() {
    let _group = common::beside();
    if let Some(why) = no_package() {
        skip(why);
        return;
    }
    let out = tempfile::tempdir().unwrap();
    let o = Command::new("/usr/bin/python3")
        .arg(format!("{REPO}/scripts/package-deb"))
        .arg("--binary")
        .arg(env!("CARGO_BIN_EXE_plumb"))
        .arg("--out")
        .arg(out.path())
        // Installed right here: xz's CPU on a test build's binary buys nothing.
        .args(["--compression", "none"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let deb = String::from_utf8(o.stdout).unwrap().trim().to_string();
    assert!(deb.ends_with(".deb"), "{deb}");
    let info = ok(&format!("dpkg-deb --field {deb} Package Version Depends"));
    assert!(
        info.contains("Package: plumb") && info.contains("libc6 (>= 2."),
        "{info}"
    );

    // The unit's hardening, as systemd scores it (docs/fleet.md states the score).
    let unit = format!("{REPO}/packaging/debian/plumb-record.service");
    let o = sh(&format!(
        "systemd-analyze security --offline=true {unit} 2>&1"
    ));
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    let score: f64 = text
        .lines()
        .find_map(|l| l.split("plumb-record.service: ").nth(1))
        .and_then(|r| r.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no exposure level: {text}"));
    assert!(score <= 2.0, "exposure {score}: {text}");

    let _installed = Installed {
        user_was_there: sh("getent passwd plumb").status.success(),
    };
    ok(&format!("dpkg -i {deb}"));
    let files: Vec<String> = ok("dpkg -L plumb").lines().map(String::from).collect();
    let version = ok("/usr/bin/plumb --version");
    assert!(version.starts_with("plumb "), "{version}");
    // The service's user: a system user that cannot log in, home in its directory.
    let user = ok("getent passwd plumb");
    assert!(user.contains(":/var/lib/plumb:/usr/sbin/nologin"), "{user}");
    let uid: u32 = user.split(':').nth(2).unwrap().parse().unwrap();
    assert!(uid < 1000, "{user}");
    // The man pages and completions, from the one flag table.
    let page = ok("zcat /usr/share/man/man1/plumb-record.1.gz");
    assert!(
        page.contains("keep\\-size") || page.contains("keep-size"),
        "{page}"
    );
    let bash = ok("bash -c '. /usr/share/bash-completion/completions/plumb && complete -p plumb'");
    assert!(bash.contains("plumb"), "{bash}");
    for f in [
        "/usr/share/zsh/vendor-completions/_plumb",
        "/usr/share/fish/vendor_completions.d/plumb.fish",
        "/usr/lib/sysusers.d/plumb.conf",
        "/etc/default/plumb-record",
    ] {
        assert!(files.iter().any(|l| l == f), "{f} not in the package");
    }
    ok("systemd-analyze verify /lib/systemd/system/plumb-record.service");
    ok("test -L /etc/systemd/system/multi-user.target.wants/plumb-record.service");

    // What the service runs, run as its user: the unit's ExecStart with the options from
    // /etc/default (on another port, to keep clear of anything on 9494), in the directory
    // systemd makes (StateDirectory=plumb, 0750).
    let unit_text = std::fs::read_to_string("/lib/systemd/system/plumb-record.service").unwrap();
    let exec = unit_text
        .lines()
        .find_map(|l| l.strip_prefix("ExecStart="))
        .unwrap();
    let defaults = std::fs::read_to_string("/etc/default/plumb-record").unwrap();
    let opts = defaults
        .lines()
        .find_map(|l| l.strip_prefix("PLUMB_RECORD_OPTS="))
        .unwrap()
        .trim_matches('"');
    assert!(opts.contains("--serve 9494"), "{opts}");
    let port = free_port();
    let line = exec.replace(
        "$PLUMB_RECORD_OPTS",
        &opts.replace("--serve 9494", &format!("--serve {port}")),
    );
    ok("install -d -o plumb -g plumb -m 750 /var/lib/plumb");
    let mut words = line.split_whitespace();
    let child = Command::new("setpriv")
        .args([
            "--reuid",
            "plumb",
            "--regid",
            "plumb",
            "--clear-groups",
            "--",
        ])
        .arg(words.next().unwrap())
        .args(words)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    let mut metrics = None;
    while t0.elapsed() < Duration::from_secs(15) {
        std::thread::sleep(Duration::from_millis(300));
        if let Some(m) = get_metrics(port).filter(|m| m.contains("plumb_build_info")) {
            metrics = Some(m);
            break;
        }
    }
    std::thread::sleep(Duration::from_millis(1200));
    // SAFETY: our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let o = child.wait_with_output().unwrap();
    let m = metrics.unwrap_or_else(|| panic!("no /metrics on {port}: {}", stderr(&o)));
    assert!(m.contains("plumb_cpu_seconds_total"), "{m}");
    assert!(o.status.success(), "{}", stderr(&o));
    let rec = ok("ls /var/lib/plumb");
    let name = rec.trim();
    assert!(
        name.starts_with("plumb-") && name.ends_with(".plumb"),
        "{rec}"
    );
    let owner = ok(&format!("stat -c %U /var/lib/plumb/{name}"));
    assert_eq!(owner.trim(), "plumb");
    ok(&format!(
        "/usr/bin/plumb export /var/lib/plumb/{name} --list"
    ));

    // Removed: the program goes, its options stay (a conffile); purged: nothing stays.
    ok("dpkg -r plumb");
    assert!(!Path::new("/usr/bin/plumb").exists());
    assert!(Path::new("/etc/default/plumb-record").exists());
    ok("dpkg --purge plumb");
    for f in &files {
        let p = Path::new(f);
        assert!(p.is_dir() || !p.exists(), "{f} is left after the purge");
    }
    for gone in ["/etc/default/plumb-record", "/var/lib/plumb"] {
        assert!(!Path::new(gone).exists(), "{gone} is left after the purge");
    }
    let left = ok(
        "find /etc/systemd /var/lib/systemd/deb-systemd-helper-enabled /var/lib/systemd/deb-systemd-helper-masked -name '*plumb*' 2>/dev/null || true",
    );
    assert!(left.trim().is_empty(), "left after the purge: {left}");
    assert!(!sh("dpkg-query -W plumb").status.success());
}
