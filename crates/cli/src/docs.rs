//! Man pages generated from the clap definition, so they cannot drift from the flags.

use crate::Cli;
use anyhow::{Context, Result};
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
            std::fs::create_dir_all(dir).with_context(|| format!("--dir {}", dir.display()))?;
            let write = |name: &str, c: clap::Command| -> Result<()> {
                let p = dir.join(format!("{name}.1"));
                let mut buf = Vec::new();
                clap_mangen::Man::new(c).render(&mut buf)?;
                std::fs::write(&p, buf).with_context(|| format!("cannot write {}", p.display()))?;
                Ok(())
            };
            for sub in cmd.get_subcommands() {
                let name = format!("plumb-{}", sub.get_name());
                write(&name, sub.clone().name(name.clone()))?;
            }
            write("plumb", cmd)?;
        }
    }
    Ok(0)
}
