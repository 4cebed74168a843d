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
    match path {
        "" => &[
            ("The whole lab on a private PostgreSQL, with an HTML report", "sudo plumb lab --quick"),
            ("This host as a database sees it", "plumb os --path /var/lib/postgresql"),
        ],
        "lab" => &[
            ("The whole lab on plumb's private PostgreSQL", "sudo plumb lab --out lab-report"),
            ("Against an existing server, read-only", "plumb lab --engine postgres://monitor@db1/postgres --dir /var/lib/postgresql"),
        ],
        "os" => &[("The host and the storage under the data directory", "plumb os --path /var/lib/postgresql")],
        "io" | "io run" => &[
            ("The WAL-shaped preset on a file plumb creates and removes", "plumb io run --preset log-write /data/plumb-test.dat"),
            ("Random 8K reads, 16 deep, for 30 s", "plumb io run --bs 8K --qd 16 --pattern random --duration 30s /data/t.dat"),
        ],
        "io diskspd" => &[("A diskspd command line, as written", "plumb io diskspd -- -d15 -o32 -t2 -b64K -h -r -L -w0 /data/t.dat")],
        "io durability" => &[("What a durable write costs in each mode, under the data", "sudo plumb io durability /var/lib/postgresql")],
        "io sweep" => &[("Queue depths 1 to 64, three runs each, with the knee", "plumb io sweep --preset data-read --qd-levels 1,2,4,8,16,32,64 --reps 3 /data/t.dat")],
        "io presets" => &[("The database-shaped presets", "plumb io presets")],
        "mem" => &[
            ("Each database process's memory, swap included", "sudo plumb mem"),
            ("Beside what the server believes it caches", "sudo plumb mem --engine postgres://monitor@localhost/postgres"),
        ],
        "mem assume" => &[("What SQL Server will take in a 3 GiB container", "plumb mem assume --kind mssql --host-memory 7113152Ki --limit 3Gi")],
        "mem pressure" => &[("Hold 700 MiB in a 400 MiB cgroup with zram swap", "sudo plumb mem pressure 700M --hold 30s --cgroup-limit 400M --swap zram:1G")],
        "k8s" | "k8s advise" => &[("The pod that fits a 16 GiB AKS node", "plumb k8s advise --preset aks --node-memory 16Gi --kind postgres")],
        "k8s lint" => &[("Check manifests", "plumb k8s lint db.yaml")],
        "k8s manifest" => &[
            ("A PostgreSQL StatefulSet with 4 GiB", "plumb k8s manifest --kind postgres --memory 4Gi --workload statefulset > pg.yaml"),
            ("plumb on every node, for Prometheus", "plumb k8s manifest --plumb > plumb-daemonset.yaml"),
        ],
        "record" => &[
            ("Record while a command runs", "plumb record --out run.plumb -- pgbench -c 8 -T 60 shop"),
            ("A server's process tree and its engine, every 100 ms", "sudo plumb record --interval 100ms --engine-server --engine postgres:///postgres --out db.plumb"),
            ("Serve the live figures to Prometheus", "plumb record --serve :9187"),
        ],
        "mark" => &[("Mark a phase in a recording (also while it records)", "plumb mark run.plumb \"checkpoint start\"")],
        "report" => &[("An HTML report of two recordings, overlaid", "plumb report before.plumb after.plumb --out report")],
        "plot" => &[("One metric as an SVG picture", "plumb plot run.plumb --metric disk.vda.write_bytes_per_s --out writes.svg")],
        "export" => &[
            ("Every metric, one row per sample", "plumb export run.plumb > run.csv"),
            ("One row per value, for DuckDB or pandas", "plumb export run.plumb --long > run-long.csv"),
            ("For promtool's backfill", "plumb export run.plumb --format openmetrics > run.om"),
        ],
        "cpu" => &[("Who waits for a CPU, every second", "plumb cpu --watch --pid 4242")],
        "engine" | "engine start" => &[("Start plumb's private PostgreSQL", "plumb engine start --dir /var/tmp/plumb-pg")],
        "engine stop" => &[("Stop it and remove what plumb created", "plumb engine stop --dir /var/tmp/plumb-pg --remove")],
        "engine status" => &[("Is it running, and where", "plumb engine status --json")],
        "engine psql" => &[("A query on it", "plumb engine psql -- -c \"SELECT version()\"")],
        "delta" => &[
            ("Cold and warm, three times each, on the private instance", "plumb delta --both --repeat 3 --sql \"SELECT count(*) FROM orders\""),
            ("Around a command, on your server", "plumb delta --engine postgres://app@db1/shop -- ./nightly-report.sh"),
        ],
        "trace" => &[
            ("What a command asks of the kernel", "sudo plumb trace -- pgbench -c 4 -T 10 shop"),
            ("The database server's processes for 30 s", "sudo plumb trace --engine-server --duration 30s"),
        ],
        "repl xe-session" => &[
            ("The session, to run on both replicas with sqlcmd", "plumb repl xe-session > ag-commit.sql"),
        ],
        "repl xe-timeline" => &[
            ("From both replicas, after one INSERT on the primary", "plumb repl xe-timeline --primary 'mssql://plumb@sql1/master' --standby 'mssql://plumb@sql2/master' --password-file ~/.sqlpw"),
            ("From files of the read-back query's rows", "plumb repl xe-timeline --primary-events sql1.xml --standby-events sql2.xml"),
        ],
        "repl watch" => &[
            ("A standby plumb made, live, 10 readings a second", "plumb repl watch --standby-dir /var/tmp/pg-standby"),
            ("Your primary for an hour, kept for plumb report", "plumb repl watch --primary 'postgres:///shop?host=/run/postgresql' --duration 1h --out repl.plumb"),
        ],
        "repl" | "repl timeline" => &[
            ("One commit through plumb's own primary and standby", "sudo plumb repl timeline --standby-dir /var/tmp/pg-standby --sql \"INSERT INTO t VALUES (1)\""),
            ("Twenty commits, with a swimlane", "sudo plumb repl timeline --primary 'postgres:///shop?host=/run/postgresql' --standby 'postgres:///shop?host=/run/postgresql&port=5433' --sql \"INSERT INTO t VALUES (1)\" --repeat 20 --svg commit.svg"),
        ],
        "fs" => &[
            ("A server's views and your queries as files, in the background", "plumb fs /tmp/pgfs --engine postgres://fs_reader@db1/postgres --password-file ~/.fs_reader.pw --queries ~/sql"),
            ("Who waits on a lock, by column", "awk -F'\\t' -v OFS='\\t' '{ print $3, $15, $16 }' /tmp/pgfs/activity/pg_stat_activity | column -t -s $'\\t'"),
            ("Unmount", "plumb fs --unmount /tmp/pgfs"),
        ],
        "completions" => &[("Bash completion", "plumb completions bash > /etc/bash_completion.d/plumb")],
        "man" => &[("Install every page", "sudo plumb man --out /usr/local/share/man/man1")],
        _ => &[],
    }
}

/// The sections clap_mangen does not write, for the command at `path` (empty for plumb).
fn extra_sections(cmd: &clap::Command, path: &[String]) -> String {
    let key = path.join(" ");
    let mut s = String::new();
    s.push_str(".SH \"EXIT STATUS\"\n");
    for (code, what) in [
        ("0", "Success."),
        ("2", "Bad input or an error: a wrong path, PID, URL or size, an unreadable required file, a database that went away. The message names the input; nothing plumb created is left behind."),
        ("130, 143, 129", "Stopped by Ctrl-C, SIGTERM or SIGHUP (128 + the signal), after cleaning up."),
    ] {
        s.push_str(&format!(".TP\n{code}\n{}\n", roff(what)));
    }
    for (code, what) in exit_notes(&key) {
        s.push_str(&format!(".TP\n{code}\n{}\n", roff(what)));
    }
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
    let private = key.is_empty() || key == "lab" || key == "delta" || key.starts_with("engine");
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
    let ex = examples(&key);
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
