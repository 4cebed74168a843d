//! Each command's one-line help held against what the command accepts: the engines its
//! `--kind` takes, the results `compare` reads, the workloads `--workload` runs. (The help said
//! the lab ran "on a private PostgreSQL" after it ran on MariaDB too, and compare compared
//! "`plumb load` results" after it read four kinds.)

use clap::CommandFactory;

/// The engine a `--kind` value names, as the help words it.
fn engine(kind: &str) -> &'static str {
    match kind {
        "postgres" => "PostgreSQL",
        "mariadb" => "MariaDB",
        "mssql" => "SQL Server",
        other => panic!("a --kind value with no engine name here: {other}"),
    }
}

/// Every command with its path and its parent's about.
fn walk(
    cmd: &clap::Command,
    path: &mut Vec<String>,
    parent_about: String,
    out: &mut Vec<(String, String, String, clap::Command)>,
) {
    let about = cmd.get_about().map(|a| a.to_string()).unwrap_or_default();
    out.push((path.join(" "), about.clone(), parent_about, cmd.clone()));
    for sub in cmd.get_subcommands() {
        path.push(sub.get_name().to_string());
        walk(sub, path, about.clone(), out);
        path.pop();
    }
}

fn commands() -> Vec<(String, String, String, clap::Command)> {
    let mut out = Vec::new();
    walk(
        &crate::args::Cli::command(),
        &mut Vec::new(),
        String::new(),
        &mut out,
    );
    out
}

fn about_of(path: &str) -> String {
    commands()
        .into_iter()
        .find(|c| c.0 == path)
        .unwrap_or_else(|| panic!("no command {path}"))
        .1
}

fn arg_help(path: &str, arg: &str) -> String {
    let c = commands()
        .into_iter()
        .find(|c| c.0 == path)
        .unwrap_or_else(|| panic!("no command {path}"))
        .3;
    let a = c
        .get_arguments()
        .find(|a| a.get_id() == arg)
        .unwrap_or_else(|| panic!("{path} has no {arg}"));
    a.get_long_help()
        .or(a.get_help())
        .map(|h| h.to_string())
        .unwrap_or_default()
}

#[test]
fn a_commands_help_names_every_engine_its_kind_takes() {
    let mut seen = 0;
    for (path, about, parent, cmd) in commands() {
        let Some(kind) = cmd.get_arguments().find(|a| a.get_id() == "kind") else {
            continue;
        };
        seen += 1;
        for v in kind.get_possible_values() {
            let name = engine(v.get_name());
            assert!(
                about.contains(name) || parent.contains(name),
                "plumb {path}: --kind takes {}, but its help (or its parent's) does not name {name}: {about:?} / {parent:?}",
                v.get_name()
            );
        }
    }
    assert!(seen >= 2, "the lab and the engine commands take --kind");
}

#[test]
fn compares_help_names_every_kind_of_result_it_reads() {
    let about = about_of("compare");
    for kind in plumb_analyze::compare::KINDS {
        // It reads the kind (an unknown one is refused as a kind)…
        let e = plumb_analyze::compare::read_run("f", &serde_json::json!({ "kind": kind }));
        assert!(
            !matches!(e, Err(plumb_analyze::compare::InputError::Kind { .. })),
            "{kind}: {e:?}"
        );
        // …and the help says so.
        assert!(
            about.contains(kind),
            "compare's help does not name {kind}: {about}"
        );
    }
    let e = plumb_analyze::compare::read_run("f", &serde_json::json!({ "kind": "mem" }));
    assert!(matches!(
        e,
        Err(plumb_analyze::compare::InputError::Kind { .. })
    ));
}

#[test]
fn workload_help_names_every_workload_it_runs() {
    let load = arg_help("load", "workload");
    for w in plumb_engine::oltp::Workload::ALL {
        assert!(
            load.contains(w.name()),
            "load --workload: {} missing: {load}",
            w.name()
        );
        assert!(crate::args::Cli::command()
            .try_get_matches_from(["plumb", "load", "--workload", w.name()])
            .is_ok());
    }
    let lab = arg_help("lab", "workload");
    for w in plumb_engine::oltp::Workload::ALL
        .iter()
        .filter(|w| !w.is_loop())
    {
        assert!(
            lab.contains(w.name()),
            "lab --workload: {} missing: {lab}",
            w.name()
        );
    }
    // A name from another tool is answered with the workload it means.
    let e = crate::args::Cli::command()
        .try_get_matches_from(["plumb", "load", "--workload", "tpc-c"])
        .unwrap_err()
        .to_string();
    assert!(e.contains("did you mean order-entry"), "{e}");
}

#[test]
fn the_engine_commands_help_names_the_commands_that_use_it() {
    let about = about_of("engine");
    for uses in ["delta", "load", "lab"] {
        assert!(about.contains(uses), "engine's help: {about}");
    }
    // The lab's help does not promise half a minute for a run measured at about 52 s.
    let quick = arg_help("lab", "quick");
    assert!(!quick.contains("half a minute"), "{quick}");
}
