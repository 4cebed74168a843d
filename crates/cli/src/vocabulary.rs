//! The command line's vocabulary, checked: every argument has help, one flag has one meaning,
//! every subcommand has a man page.

fn walk(cmd: &clap::Command, path: &str, out: &mut Vec<String>) {
    for a in cmd.get_arguments() {
        let id = a.get_id().as_str();
        if id == "help" || id == "version" || a.is_hide_set() {
            continue;
        }
        if a.get_help().is_none() && a.get_long_help().is_none() {
            out.push(format!("{path} {id}"));
        }
    }
    for s in cmd.get_subcommands() {
        walk(s, &format!("{path} {}", s.get_name()), out);
    }
}

#[test]
fn every_argument_has_help() {
    let mut missing = Vec::new();
    walk(&crate::command(), "plumb", &mut missing);
    assert!(missing.is_empty(), "arguments without help: {missing:#?}");
}

/// Every visible option of every subcommand, with its command's path.
fn options(cmd: &clap::Command, path: &str, out: &mut Vec<(String, clap::Arg)>) {
    for a in cmd.get_arguments() {
        if a.get_long().is_some() && !a.is_hide_set() {
            out.push((path.to_string(), a.clone()));
        }
    }
    for s in cmd.get_subcommands() {
        options(s, &format!("{path} {}", s.get_name()), out);
    }
}

fn help(a: &clap::Arg) -> String {
    a.get_long_help()
        .or(a.get_help())
        .map(|h| h.to_string())
        .unwrap_or_default()
}

fn value_name(a: &clap::Arg) -> String {
    a.get_value_names()
        .and_then(|v| v.first().map(|n| n.to_string()))
        .unwrap_or_default()
}

/// One meaning per flag name across all subcommands: --engine is a database URL (a
/// primary and its standby are --primary and --standby), an I/O
/// engine is --ioengine (as fio), an engine kind is --kind, --out is where the result goes
/// (a file or a directory, said in the help), --dir a work directory, and the lab's old
/// --target is only a hidden alias.
#[test]
fn one_vocabulary() {
    let mut all = Vec::new();
    let mut root = crate::command();
    root.build();
    options(&root, "plumb", &mut all);
    let mut wrong = Vec::new();
    for (path, a) in &all {
        let long = a.get_long().unwrap();
        let (vn, h) = (value_name(a), help(a));
        let bad = match long {
            "engine" => vn != "URL",
            "ioengine" => vn != "ENGINE",
            "kind" => vn != "KIND" || !(h.contains("postgres") && h.contains("mariadb")),
            "out" => !(h.starts_with("The directory") || h.contains(" file")),
            "dir" => vn != "DIR" || !h.contains("work directory"),
            "target" => true,
            // A pair of servers: each a URL, named for its part.
            "primary" | "standby" => vn != "URL" || !path.starts_with("plumb repl"),
            _ => vn == "ENGINE" || vn == "URL" && long != "password-file",
        };
        if bad {
            wrong.push(format!("{path} --{long} <{vn}>: {h}"));
        }
    }
    assert!(wrong.is_empty(), "flags off the vocabulary: {wrong:#?}");
    // The renamed flags, to be sure the test sees them.
    let longs: Vec<&str> = all.iter().filter_map(|(_, a)| a.get_long()).collect();
    for want in ["engine", "ioengine", "kind", "out", "dir", "workload"] {
        assert!(longs.contains(&want), "--{want} missing");
    }
    // --target still works for the lab, unseen.
    let lab = root.find_subcommand("lab").unwrap();
    let engine = lab
        .get_arguments()
        .find(|a| a.get_long() == Some("engine"))
        .unwrap();
    assert!(engine
        .get_all_aliases()
        .unwrap_or_default()
        .contains(&"target"));
}

/// A man page for every subcommand at every depth, each with EXIT STATUS, ENVIRONMENT
/// and EXAMPLES.
#[test]
fn man_pages_for_every_subcommand() {
    let pages = crate::docs::pages().unwrap();
    let names: Vec<&str> = pages.iter().map(|(n, _)| n.as_str()).collect();
    for want in [
        "plumb",
        "plumb-io-run",
        "plumb-io-sweep",
        "plumb-engine-start",
        "plumb-k8s-manifest",
        "plumb-mem-assume",
    ] {
        assert!(names.contains(&want), "{want} missing: {names:?}");
    }
    for (name, page) in &pages {
        let t = String::from_utf8_lossy(page);
        for section in [".SH \"EXIT STATUS\"", ".SH ENVIRONMENT", ".SH EXAMPLES"] {
            assert!(t.contains(section), "{name}: no {section}");
        }
        assert!(t.contains(&format!(".TH {name} 1")), "{name}: title");
    }
    let run = &pages.iter().find(|(n, _)| n == "plumb-io-run").unwrap().1;
    let run = String::from_utf8_lossy(run);
    assert!(
        run.contains("plumb io run"),
        "synopsis names the command as typed"
    );
    assert!(
        run.contains("\\fBplumb\\-io\\fR(1)"),
        "see also the parent page"
    );
}
