//! `plumb fs`: mount a server's views (and the user's own query files) as read-only files.
//!
//! Without --foreground, plumb starts a copy of itself that mounts and serves in the
//! background (in a session of its own, so closing the terminal does not unmount), and waits
//! until the mount is ready or has failed: errors are the caller's, with the exit code. The
//! URL and password reach that copy on its standard input, never on its command line.

use crate::GlobalArgs;
use anyhow::{anyhow, bail, Result};
use clap::Args;
use plumb_engine::Target;
use serde::{Deserialize, Serialize};
use std::io::{BufRead, Read, Write};
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, Args)]
pub struct FsArgs {
    /// An empty directory to mount on (a plumb mount left there by a plumb that was killed is
    /// removed first).
    #[arg(value_name = "MOUNTPOINT", required_unless_present = "unmount")]
    pub mountpoint: Option<PathBuf>,
    /// The server: postgres://…, mysql:// or mariadb://…, mssql://… (SQL Server's views are
    /// written from its documentation, not tested against a live server).
    #[arg(long, value_name = "URL", required_unless_present_any = ["unmount", "serve_stdin"], value_parser = crate::typed::EngineUrl)]
    pub engine: Option<plumb_engine::Target>,
    /// Read the password from this file (private to its owner) instead of the URL or the
    /// environment.
    #[arg(long, value_name = "FILE")]
    pub password_file: Option<PathBuf>,
    /// A directory of your own queries: each NAME.sql appears as queries/NAME (and .json,
    /// .txt), run in a transaction that is rolled back; new files appear without a remount.
    #[arg(long, value_name = "DIR")]
    pub queries: Option<PathBuf>,
    /// Opens within this time of a result share it instead of running the query again (0: every
    /// open runs its query).
    #[arg(long, value_name = "TIME", default_value = "1s", value_parser = crate::typed::DURATION)]
    pub cache: Duration,
    /// Statement timeout of every query.
    #[arg(long, value_name = "TIME", default_value = "10s", value_parser = crate::typed::DURATION)]
    pub timeout: Duration,
    /// Connections the files share (a slow query holds one; the others go on).
    #[arg(long, value_name = "N", default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..=64))]
    pub connections: u16,
    /// Unmount when the server has not answered for this long.
    #[arg(long, value_name = "TIME", default_value = "10s", value_parser = crate::typed::DURATION)]
    pub gone_after: Duration,
    /// Stay in the foreground until Ctrl-C (or SIGTERM) unmounts, instead of serving in the
    /// background.
    #[arg(long)]
    pub foreground: bool,
    /// Remove a plumb mount (one being served, or one left by a plumb that was killed), and
    /// stop the plumb serving it.
    #[arg(long, value_name = "MOUNTPOINT", conflicts_with_all = ["mountpoint", "engine", "queries", "foreground"])]
    pub unmount: Option<PathBuf>,
    /// (Internal) serve in the background with the settings read from standard input.
    #[arg(long, hide = true)]
    pub serve_stdin: bool,
}

/// What the background copy is given on its standard input.
#[derive(Serialize, Deserialize)]
struct Handoff {
    url: String,
    password: Option<String>,
    mountpoint: PathBuf,
    queries: Option<PathBuf>,
    cache_ms: u64,
    timeout_ms: u64,
    connections: usize,
    gone_after_ms: u64,
}

pub fn run(_global: &GlobalArgs, a: &FsArgs) -> Result<i32> {
    if let Some(p) = &a.unmount {
        let path = plumb_fs::unmount(p)?;
        println!("plumb fs: unmounted {}", path.display());
        return Ok(0);
    }
    let handoff = if a.serve_stdin {
        let mut s = String::new();
        // plumb's own hand-off from the parent: small, never endless.
        std::io::stdin().take(1 << 20).read_to_string(&mut s)?;
        serde_json::from_str::<Handoff>(&s)
            .map_err(|e| crate::quoting(format!("the settings on stdin: {e}"), e))?
    } else {
        let mountpoint = a
            .mountpoint
            .clone()
            .ok_or_else(|| anyhow!("MOUNTPOINT is required"))?;
        let url = a
            .engine
            .clone()
            .ok_or_else(|| anyhow!("--engine is required"))?;
        let t = crate::typed::with_password(url, a.password_file.as_deref())?;
        // Absolute: the background copy runs in /.
        let abs = |p: &PathBuf| std::path::absolute(p).unwrap_or_else(|_| p.clone());
        Handoff {
            url: t.url.clone(),
            password: t.password.clone(),
            mountpoint: abs(&mountpoint),
            queries: a.queries.as_ref().map(abs),
            cache_ms: a.cache.as_millis() as u64,
            timeout_ms: a.timeout.as_millis() as u64,
            connections: a.connections as usize,
            gone_after_ms: a.gone_after.as_millis() as u64,
        }
    };
    if a.foreground {
        return serve(handoff, None);
    }
    if a.serve_stdin {
        // The background copy: a session of its own, its readiness on standard output.
        plumb_sys::os::new_session();
        return serve(handoff, Some(std::io::stdout()));
    }
    start_background(&handoff)
}

fn options(h: &Handoff) -> plumb_fs::Options {
    let mut target = Target::new(&h.url);
    target.password = h.password.clone();
    if let Some(p) = &h.password {
        plumb_engine::secret::remember(p);
    }
    plumb_fs::Options {
        target,
        cache: Duration::from_millis(h.cache_ms),
        timeout: Duration::from_millis(h.timeout_ms),
        queries: h.queries.clone(),
        connections: h.connections,
        gone_after: Duration::from_millis(h.gone_after_ms),
    }
}

/// Mount and serve; `ready` (the background copy's pipe to its starter) hears "mounted" or the
/// error, once.
fn serve(h: Handoff, ready: Option<std::io::Stdout>) -> Result<i32> {
    plumb_sys::signal::install();
    let tell = |line: &str| {
        if let Some(out) = &ready {
            let mut o = out.lock();
            let _ = writeln!(o, "{line}");
            let _ = o.flush();
        }
    };
    let mounted = plumb_fs::prepare(&h.mountpoint, options(&h)).and_then(|p| {
        let removed = p.removed_stale;
        let facts = p.facts.clone();
        p.mount().map(|m| (m, removed, facts))
    });
    let (mounted, removed_stale, facts) = match mounted {
        Ok(m) => m,
        Err(e) => {
            // Bad input and a failed mount both exit 2.
            tell(&format!("error\t2\t{}", one_line(&e.to_string())));
            return Err(e.into());
        }
    };
    let path = mounted.path.clone();
    let summary = format!(
        "{} {}: {} views in {} directories{}",
        facts.engine,
        facts.version,
        facts.dirs.iter().map(|(_, n)| n).sum::<usize>(),
        facts.dirs.len(),
        if facts.queries.is_some() {
            ", and queries/"
        } else {
            ""
        }
    );
    tell(&format!(
        "mounted\t{}\t{}\t{}",
        path.display(),
        u8::from(removed_stale),
        summary
    ));
    if ready.is_none() {
        if removed_stale {
            eprintln!(
                "plumb fs: removed a plumb mount left at {} by a plumb that was stopped without unmounting",
                path.display()
            );
        }
        eprintln!(
            "plumb fs: {} mounted on {} (read-only); Ctrl-C unmounts",
            summary,
            path.display()
        );
    }
    let ending = mounted.serve(&plumb_sys::signal::stop_requested)?;
    ended(ending, &path, ready.is_none())
}

/// How the mount ended: stopped by a signal (its exit code), unmounted by someone, or the
/// database gone (an error). `foreground`: say so on stderr.
fn ended(ending: plumb_fs::Ending, path: &std::path::Path, foreground: bool) -> Result<i32> {
    match ending {
        plumb_fs::Ending::Stopped => {
            if foreground {
                eprintln!("plumb fs: unmounted {}", path.display());
            }
            Ok(plumb_sys::signal::received()
                .map(plumb_sys::signal::exit_code_for)
                .unwrap_or(0))
        }
        plumb_fs::Ending::Unmounted => {
            if foreground {
                eprintln!("plumb fs: {} was unmounted", path.display());
            }
            Ok(0)
        }
        plumb_fs::Ending::Gone(why) => Err(anyhow!(
            "the database stopped answering ({why}); unmounted {}",
            path.display()
        )),
    }
}

fn one_line(s: &str) -> String {
    s.replace(['\n', '\t'], " ")
}

/// Start the background copy and wait for its word.
fn start_background(h: &Handoff) -> Result<i32> {
    use std::process::{Command, Stdio};
    let exe = std::env::current_exe()
        .map_err(|e| crate::quoting(format!("plumb's own executable: {e}"), e))?;
    let mut child = Command::new(exe)
        .arg("fs")
        .arg(&h.mountpoint)
        .arg("--serve-stdin")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .current_dir("/")
        .spawn()
        .map_err(|e| crate::quoting(format!("starting the background plumb: {e}"), e))?;
    {
        let mut stdin = child
            .stdin
            .take()
            .ok_or_else(|| anyhow!("no pipe to the background plumb"))?;
        stdin.write_all(serde_json::to_string(h)?.as_bytes())?;
    }
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| anyhow!("no pipe from the background plumb"))?;
    let mut line = String::new();
    std::io::BufReader::new(stdout).read_line(&mut line)?;
    let f: Vec<&str> = line.trim_end().splitn(4, '\t').collect();
    match f.as_slice() {
        ["mounted", path, stale, summary] => {
            if *stale == "1" {
                eprintln!(
                    "plumb fs: removed a plumb mount left at {path} by a plumb that was stopped without unmounting"
                );
            }
            println!(
                "plumb fs: {summary} mounted on {path} (read-only), served in the background by process {}",
                child.id()
            );
            println!("  plumb fs --unmount {path}   to unmount");
            Ok(0)
        }
        ["error", code, msg] => {
            let _ = child.wait();
            eprintln!("plumb: error: {msg}");
            Ok(code.parse().unwrap_or(2))
        }
        _ => {
            let status = child.wait()?;
            bail!("the background plumb ended before mounting ({status})")
        }
    }
}
