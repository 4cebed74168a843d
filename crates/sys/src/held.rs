//! Files read again every sample, held open between reads.
//!
//! A recorder reads the same few files of each process it follows (`stat`, `status`, `io`,
//! `schedstat`) many times a second. Opening each one again walks its path and allocates a file
//! every time; most of what following a process costs is that. A procfs file read again from
//! offset 0 is generated afresh, so holding the file and reading it with `pread` gives the same
//! text for a fraction of the cost (the technique `top` and `atop` use for their own files).
//!
//! A held file of a process that has exited fails to read (the kernel answers ESRCH): it is
//! dropped and opened again by name, so a PID taken by a new process is read as that process.
//! At most [`Held::LIMIT`] files are held; beyond that files are read the ordinary way.

use crate::{Error, Result, Root};
use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::FileExt;

#[derive(Debug, Default)]
pub struct Held {
    files: HashMap<String, File>,
    buf: Vec<u8>,
}

impl Held {
    /// Files held at most (a server with thousands of connections is not held whole).
    pub const LIMIT: usize = 256;

    pub fn new() -> Held {
        Held::default()
    }

    /// How many files are held now.
    pub fn len(&self) -> usize {
        self.files.len()
    }

    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    /// The text of `abs` (a host path under `root`), from the held file when there is one.
    pub fn read(&mut self, root: &Root, abs: &str) -> Result<String> {
        if !root.is_host() {
            return root.read(abs);
        }
        if let Some(f) = self.files.get(abs) {
            if let Ok(t) = read_from_start(f, &mut self.buf) {
                return Ok(t);
            }
            // Gone (or its PID taken by another process): open it again by name.
            self.files.remove(abs);
        }
        let path = root.path(abs);
        let f = File::open(&path).map_err(|source| Error::Io {
            path: path.clone(),
            source,
        })?;
        let t = read_from_start(&f, &mut self.buf).map_err(|source| Error::Io { path, source })?;
        if self.files.len() < Self::LIMIT {
            self.files.insert(abs.to_string(), f);
        }
        Ok(t)
    }

    /// Close the files of processes for which `keep` is false.
    pub(crate) fn retain_pids(&mut self, keep: impl Fn(u32) -> bool) {
        self.files.retain(|abs, _| pid_of(abs).is_none_or(&keep));
    }
}

/// The PID in `/proc/PID/...`.
fn pid_of(abs: &str) -> Option<u32> {
    abs.strip_prefix("/proc/")?.split('/').next()?.parse().ok()
}

fn read_from_start(f: &File, buf: &mut Vec<u8>) -> std::io::Result<String> {
    buf.clear();
    let mut chunk = [0u8; 4096];
    loop {
        let n = f.read_at(&mut chunk, buf.len() as u64)?;
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    std::str::from_utf8(buf)
        .map(str::to_string)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_procfs_file_reads_fresh_text_and_a_gone_process_fails() {
        let root = Root::host();
        let mut held = Held::new();
        let me = std::process::id();
        let abs = format!("/proc/{me}/stat");
        let utime = |t: &str| -> u64 {
            let after = &t[t.rfind(')').unwrap() + 2..];
            let f: Vec<&str> = after.split(' ').collect();
            f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
        };
        let first = held.read(&root, &abs).unwrap();
        assert_eq!(held.len(), 1);
        // Burn CPU until the tick counters move: the held file must show it.
        let t = std::time::Instant::now();
        let mut x = 0u64;
        while t.elapsed() < std::time::Duration::from_millis(300) {
            x = x.wrapping_mul(31).wrapping_add(7);
        }
        std::hint::black_box(x);
        let again = held.read(&root, &abs).unwrap();
        assert!(utime(&again) > utime(&first), "{first} / {again}");
        assert_eq!(held.len(), 1);

        // A child that exits: its held file fails, and is dropped.
        let mut c = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let cabs = format!("/proc/{}/stat", c.id());
        assert!(held.read(&root, &cabs).unwrap().contains("(sleep)"));
        c.kill().unwrap();
        c.wait().unwrap();
        assert!(held.read(&root, &cabs).is_err());
        assert!(!held.files.contains_key(&cabs));
        held.retain_pids(|p| p != me);
        assert!(held.is_empty());
    }
}
