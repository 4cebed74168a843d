//! `plumb os`: one snapshot report of the host.

use crate::GlobalArgs;
use anyhow::{Context, Result};
use clap::Args;
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct OsArgs {
    /// Report the filesystem, mount options and block devices under this path (default: the
    /// current directory). Point it at the data or WAL directory.
    #[arg(long, value_name = "DIR")]
    pub path: Option<PathBuf>,
    /// Also report this process: memory (status and smaps_rollup), CPU wait, I/O, and the
    /// cgroup and container limits on it. Repeat for several.
    #[arg(long = "pid", value_name = "PID", value_parser = clap::value_parser!(u32).range(1..))]
    pub pids: Vec<u32>,
}

pub fn run(g: &GlobalArgs, a: &OsArgs) -> Result<i32> {
    let root = g.root()?;
    let path = match &a.path {
        Some(p) => p.clone(),
        None => {
            std::env::current_dir().context("cannot find the current directory; pass --path")?
        }
    };
    // Name the flag in the message: the reader's error only knows the file.
    if root.is_host() {
        std::fs::metadata(&path)
            .map_err(|e| crate::quoting(format!("--path {}: {e}", path.display()), e))?;
    }
    let sample =
        plumb_sys::snapshot::collect(&root, &a.pids, Some(&path)).map_err(|e| match e {
            plumb_sys::Error::NoSuchProcess { pid, .. } => {
                crate::quoting(format!("--pid {pid}: {e}"), e)
            }
            _ => anyhow::Error::new(e),
        })?;
    let page = plumb_sys::host::page_size_bytes().unwrap_or(4096);
    let report = plumb_analyze::os::build(&sample, page);
    crate::emit(g, &report)?;
    Ok(0)
}
