//! Man pages generated from the clap definition, so they cannot drift from the flags.

use crate::Cli;
use anyhow::{bail, Context, Result};
use clap::CommandFactory;
use std::io::Write;
use std::path::Path;

pub fn man(dir: Option<&Path>) -> Result<i32> {
    let cmd = Cli::command();
    match dir {
        None => {
            let mut out = std::io::stdout().lock();
            clap_mangen::Man::new(cmd).render(&mut out)?;
            out.flush()?;
        }
        Some(dir) => {
            // A man directory is shared (man1 holds every program's pages): plumb writes its
            // own files into it, new, or in place of its own earlier pages, never another's.
            match std::fs::symlink_metadata(dir) {
                Ok(m) if m.is_dir() => {}
                Ok(_) => bail!("--dir {}: not a directory", dir.display()),
                Err(_) => {
                    plumb_report::out::out_dir("--dir", dir)?;
                }
            }
            let mut pages = Vec::new();
            for sub in cmd.get_subcommands() {
                let name = format!("plumb-{}", sub.get_name());
                pages.push((name.clone(), sub.clone().name(name)));
            }
            pages.push(("plumb".to_string(), cmd));
            // Check every page first: nothing is written when one is in the way.
            for (name, _) in &pages {
                let p = dir.join(format!("{name}.1"));
                if !replaceable(&p)? {
                    plumb_report::out::check_new_file("--dir", &p)?;
                }
            }
            for (name, c) in pages {
                let p = dir.join(format!("{name}.1"));
                let mut buf = Vec::new();
                clap_mangen::Man::new(c).render(&mut buf)?;
                if replaceable(&p)? {
                    let tmp = dir.join(format!(".{name}.1.plumb-tmp"));
                    let _ = std::fs::remove_file(&tmp);
                    plumb_report::out::write_new("--dir", &tmp, &buf)?;
                    std::fs::rename(&tmp, &p)
                        .with_context(|| format!("cannot replace {}", p.display()))?;
                } else {
                    plumb_report::out::write_new("--dir", &p, &buf)?;
                }
            }
        }
    }
    Ok(0)
}

/// Whether `p` is a man page plumb wrote earlier (a regular file, not a link, whose title is
/// plumb's), which a new one may replace.
fn replaceable(p: &Path) -> Result<bool> {
    use std::io::Read;
    let Ok(m) = std::fs::symlink_metadata(p) else {
        return Ok(false);
    };
    if !m.is_file() {
        return Ok(false);
    }
    let mut head = String::new();
    let f = std::fs::File::open(p).with_context(|| format!("{}", p.display()))?;
    let _ = f.take(4096).read_to_string(&mut head);
    Ok(head.lines().any(|l| l.starts_with(".TH plumb")))
}
