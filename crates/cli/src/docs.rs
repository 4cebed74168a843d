//! Man pages generated from the clap definition, so they cannot drift from the flags.

use anyhow::{bail, Context, Result};
use std::io::Write;
use std::path::Path;

/// Every page: plumb.1, then one per subcommand at every depth (plumb-io-run.1), each with
/// EXIT STATUS, ENVIRONMENT, EXAMPLES and SEE ALSO after what clap_mangen writes.
pub fn pages() -> Result<Vec<(String, Vec<u8>)>> {
    let mut root = crate::command().disable_help_subcommand(true);
    // Building names every subcommand's page (display name plumb-io-run) and synopsis
    // (bin name "plumb io run").
    root.build();
    let mut out = Vec::new();
    fn walk(
        cmd: &clap::Command,
        path: &mut Vec<String>,
        out: &mut Vec<(String, Vec<u8>)>,
    ) -> Result<()> {
        let name = cmd
            .get_display_name()
            .unwrap_or_else(|| cmd.get_name())
            .to_string();
        let mut buf = Vec::new();
        clap_mangen::Man::new(cmd.clone())
            .source(format!("plumb {}", env!("CARGO_PKG_VERSION")))
            .render(&mut buf)?;
        buf.extend(extra_sections(cmd, path).into_bytes());
        out.push((name, buf));
        for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
            path.push(sub.get_name().to_string());
            walk(sub, path, out)?;
            path.pop();
        }
        Ok(())
    }
    walk(&root, &mut Vec::new(), &mut out)?;
    Ok(out)
}

pub fn man(dir: Option<&Path>) -> Result<i32> {
    let pages = pages()?;
    match dir {
        None => {
            let mut out = std::io::stdout().lock();
            out.write_all(&pages[0].1)?;
            out.flush()?;
        }
        Some(dir) => {
            // A man directory is shared (man1 holds every program's pages): plumb writes its
            // own files into it, new, or in place of its own earlier pages, never another's.
            match std::fs::symlink_metadata(dir) {
                Ok(m) if m.is_dir() => {}
                Ok(_) => bail!("--out {}: not a directory", dir.display()),
                Err(_) => {
                    plumb_report::out::out_dir("--out", dir)?;
                }
            }
            // Check every page first: nothing is written when one is in the way.
            for (name, _) in &pages {
                let p = dir.join(format!("{name}.1"));
                if !replaceable(&p)? {
                    plumb_report::out::check_new_file("--out", &p)?;
                }
            }
            for (name, buf) in pages {
                let p = dir.join(format!("{name}.1"));
                if replaceable(&p)? {
                    let tmp = dir.join(format!(".{name}.1.plumb-tmp"));
                    let _ = std::fs::remove_file(&tmp);
                    plumb_report::out::write_new("--out", &tmp, &buf)?;
                    std::fs::rename(&tmp, &p)
                        .with_context(|| format!("cannot replace {}", p.display()))?;
                } else {
                    plumb_report::out::write_new("--out", &p, &buf)?;
                }
            }
        }
    }
    Ok(0)
}

/// Text for a roff paragraph: backslashes and hyphens escaped, no line taken for a request.
fn roff(s: &str) -> String {
    let t = s.replace('\\', "\\e").replace('-', "\\-");
    if t.starts_with('.') || t.starts_with('\'') {
        format!("\\&{t}")
    } else {
        t
    }
}

/// Exit codes beyond the common ones, by command.
fn exit_notes(path: &str) -> &'static [(&'static str, &'static str)] {
    match path {
        "record" | "trace" => &[(
            "N",
            "With a command after --: the command's exit code (128 + the signal that ended it).",
        )],
        "engine status" => &[("1", "The instance is not running.")],
        "k8s lint" => &[("1", "A manifest has an error.")],
        "k8s advise" => &[(
            "1",
            "A warning: the pod or the settings do not fit the node.",
        )],
        "mem assume" => &[(
            "1",
            "A warning: what the engine assumes does not fit its limit.",
        )],
        _ => &[],
    }
}

/// Examples per command, as a user would type them.
fn examples(path: &str) -> &'static [(&'static str, &'static str)] {
    crate::docs_examples::EXAMPLES
        .iter()
        .find(|(paths, _)| paths.contains(&path))
        .map_or(&[], |(_, e)| e)
}

/// The sections clap_mangen does not write, for the command at `path` (empty for plumb).
fn extra_sections(cmd: &clap::Command, path: &[String]) -> String {
    let key = path.join(" ");
    let mut s = exit_status(&key);
    s.push_str(&environment(cmd, &key));
    s.push_str(&examples_section(&key));
    s.push_str(&see_also(cmd, path));
    s
}

/// EXIT STATUS: the codes every command shares, then the command's own.
fn exit_status(key: &str) -> String {
    let mut s = String::new();
    s.push_str(".SH \"EXIT STATUS\"\n");
    for (code, what) in [
        ("0", "Success."),
        ("2", "Bad input or an error: a wrong path, PID, URL or size, an unreadable required file, a database that went away. The message names the input; nothing plumb created is left behind."),
        ("130, 143, 129", "Stopped by Ctrl-C, SIGTERM or SIGHUP (128 + the signal), after cleaning up."),
    ] {
        s.push_str(&format!(".TP\n{code}\n{}\n", roff(what)));
    }
    for (code, what) in exit_notes(key) {
        s.push_str(&format!(".TP\n{code}\n{}\n", roff(what)));
    }
    s
}

/// ENVIRONMENT: the variables this command reads, its own flags' first.
fn environment(cmd: &clap::Command, key: &str) -> String {
    let mut s = String::new();
    // The environment this command reads: its own flags' variables, then the common ones.
    let mut env: Vec<(String, String)> = Vec::new();
    for a in cmd.get_arguments() {
        if let (Some(e), Some(l)) = (a.get_env(), a.get_long()) {
            env.push((
                e.to_string_lossy().into_owned(),
                format!("The default for {}.", roff(&format!("--{l}"))),
            ));
        }
    }
    let takes_url = cmd.get_arguments().any(|a| {
        a.get_long() == Some("engine")
            && a.get_value_names()
                .is_some_and(|v| v.iter().any(|n| n == "URL"))
    });
    if takes_url || key.is_empty() {
        env.push(("PGPASSWORD, MYSQL_PWD, MSSQL_PASSWORD".into(), "The password for an engine URL without one (never put it on the command line: it shows in the process list).".into()));
    }
    let private = key.is_empty()
        || key == "lab"
        || key == "delta"
        || key == "load"
        || key.starts_with("engine");
    if private {
        env.push(("PLUMB_PG_BIN".into(), "The directory of PostgreSQL's server binaries for plumb's private instance when neither --bin-dir nor --pg-version is given (default: the newest under /usr/lib/postgresql).".into()));
        env.push(("PLUMB_PG_VERSIONS".into(), "Where --pg-version N also looks for a server build, as N/bin (default /var/cache/plumb/postgresql, where scripts/setup --test installs PostgreSQL 16, 17 and 18).".into()));
        env.push((
            "PLUMB_PG_DIR".into(),
            "The private instance's directory (default /var/tmp/plumb-pg-USER).".into(),
        ));
    }
    env.sort();
    env.dedup();
    if !env.is_empty() {
        s.push_str(".SH ENVIRONMENT\n");
        for (k, v) in env {
            s.push_str(&format!(".TP\n\\fB{k}\\fR\n{v}\n"));
        }
    }
    s
}

/// EXAMPLES, where the command has some.
fn examples_section(key: &str) -> String {
    let mut s = String::new();
    let ex = examples(key);
    if !ex.is_empty() {
        s.push_str(".SH EXAMPLES\n");
        for (what, line) in ex {
            s.push_str(&format!(
                ".TP\n{}\n.nf\n\\fB{}\\fR\n.fi\n",
                roff(what),
                roff(line)
            ));
        }
    }
    s
}

/// SEE ALSO: the parent page and the subcommands' pages.
fn see_also(cmd: &clap::Command, path: &[String]) -> String {
    let mut s = String::new();
    // Where to go from here: the parent page and the subcommands' pages.
    let mut see = Vec::new();
    if !path.is_empty() {
        let parent = if path.len() == 1 {
            "plumb".to_string()
        } else {
            format!("plumb-{}", path[..path.len() - 1].join("-"))
        };
        see.push(format!("\\fB{}\\fR(1)", roff(&parent)));
    }
    for sub in cmd.get_subcommands().filter(|c| !c.is_hide_set()) {
        let name = sub.get_display_name().unwrap_or_else(|| sub.get_name());
        see.push(format!("\\fB{}\\fR(1)", roff(name)));
    }
    if !see.is_empty() {
        s.push_str(&format!(".SH \"SEE ALSO\"\n{}\n", see.join(", ")));
    }
    s
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
