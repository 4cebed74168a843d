//! The shape of the program, checked: every read of /proc and /sys goes through crates/sys
//! (so --sysroot and the captured fixtures reach it), and the command line has no `unsafe`.

use std::path::{Path, PathBuf};

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The lines of a source file outside its `#[cfg(test)]` items, without comments.
fn code_lines(p: &Path) -> Vec<(usize, String)> {
    let text = std::fs::read_to_string(p).unwrap();
    let mut out = Vec::new();
    // Inside a test item: its brace depth, once its first brace is seen.
    let mut skipping: Option<i64> = None;
    let mut depth = 0i64;
    for (i, l) in text.lines().enumerate() {
        let t = l.trim_start();
        if t.starts_with("#[cfg(test)]") {
            skipping = Some(0);
            depth = 0;
            continue;
        }
        if let Some(seen) = skipping.as_mut() {
            let opens = l.matches('{').count() as i64;
            let closes = l.matches('}').count() as i64;
            depth += opens - closes;
            if opens > 0 {
                *seen = 1;
            }
            // A one-line item (`mod fuzz;`) or the block closed.
            if (*seen == 0 && t.ends_with(';')) || (*seen == 1 && depth <= 0) {
                skipping = None;
            }
            continue;
        }
        if t.starts_with("//") {
            continue;
        }
        out.push((i + 1, l.to_string()));
    }
    out
}

fn crate_sources() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for c in std::fs::read_dir(root.join("crates")).unwrap().flatten() {
        let src = c.path().join("src");
        if src.is_dir() {
            sources(&src, &mut files);
        }
    }
    sources(&root.join("src"), &mut files);
    files
}

#[test]
fn proc_and_sys_are_read_only_in_crates_sys() {
    let sys = Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/sys");
    let mut found = Vec::new();
    for f in crate_sources() {
        if f.starts_with(&sys) {
            continue;
        }
        for (n, l) in code_lines(&f) {
            // A path given to the OS starts a string: "/proc/…", "/sys/…" (prose that names
            // a file in a sentence does not).
            if l.contains("\"/proc") || l.contains("\"/sys/") || l.contains("\"/sys\"") {
                found.push(format!("{}:{n}: {}", f.display(), l.trim()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "/proc or /sys read outside crates/sys (add a reader there):\n{}",
        found.join("\n")
    );
}

#[test]
fn the_command_line_has_no_unsafe() {
    let cli = Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/cli/src");
    let mut files = Vec::new();
    sources(&cli, &mut files);
    assert!(!files.is_empty());
    let lib = std::fs::read_to_string(cli.join("lib.rs")).unwrap();
    assert!(lib.contains("#![forbid(unsafe_code)]"));
    for f in files {
        for (n, l) in code_lines(&f) {
            assert!(
                !l.contains("unsafe ") && !l.contains("unsafe{"),
                "{}:{n}: {}",
                f.display(),
                l.trim()
            );
        }
    }
}

/// What a test file calls when it needs a part the fast tier does not have: a server, a
/// browser, root, or a PostgreSQL build.
const NEEDS_A_PART: &[&str] = &[
    "skip(",
    "no_postgres(",
    "is_root(",
    "chromium(",
    "pg_bin(",
    "pg_build(",
    "engine_psql(",
    "server_tempdir(",
    "maria::",
];

/// Whether `text` calls `name` (a function, or a module path): not a method or a longer name
/// that ends the same way (`.skip(1)`, `skip_while(` are not `skip(`).
fn calls(text: &str, name: &str) -> bool {
    text.match_indices(name).any(|(i, _)| {
        text[..i]
            .chars()
            .next_back()
            .is_none_or(|c| !(c.is_alphanumeric() || c == '_' || c == '.'))
    })
}

/// Cargo's test targets, each with its source text: a file directly in a tests/ directory, or
/// a folder of it with a main.rs (all its files); tests/common is the helpers'.
fn test_targets() -> Vec<(String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut dirs = vec![root.join("tests")];
    for c in std::fs::read_dir(root.join("crates")).unwrap().flatten() {
        dirs.push(c.path().join("tests"));
    }
    let mut out = Vec::new();
    for d in dirs.iter().filter(|d| d.is_dir()) {
        for e in std::fs::read_dir(d).unwrap().flatten() {
            let p = e.path();
            let name = p.file_stem().unwrap().to_string_lossy().into_owned();
            if p.extension().is_some_and(|x| x == "rs") {
                out.push((name, std::fs::read_to_string(&p).unwrap()));
            } else if p.join("main.rs").is_file() {
                let mut files = Vec::new();
                sources(&p, &mut files);
                let text = files
                    .iter()
                    .map(|f| std::fs::read_to_string(f).unwrap())
                    .collect();
                out.push((name, text));
            }
        }
    }
    out
}

/// The test binary whose tests run beside the other files' (tests/together): each test takes
/// `common::beside()` or `common::alone()` before anything else, or it would run beside a test
/// that must be alone.
#[test]
fn every_test_run_together_takes_its_group_first() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/together");
    let mut files = Vec::new();
    sources(&dir, &mut files);
    let mut missing = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        for (i, l) in lines.iter().enumerate() {
            if l.trim() != "#[test]" {
                continue;
            }
            // The line after the test's `fn` line (indented in a macro's module).
            let Some(at) = (i + 1..lines.len()).find(|&j| lines[j].trim_start().starts_with("fn "))
            else {
                continue;
            };
            let group = lines.get(at + 1).map(|l| l.trim());
            if !matches!(
                group,
                Some("let _group = common::beside();" | "let _group = common::alone();")
            ) {
                missing.push(format!("{}:{}: {}", f.display(), at + 1, lines[at]));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "these tests take no group (common::beside or common::alone) first: {missing:#?}"
    );
}

/// `cargo test-fast` (.cargo/config.toml) runs exactly the test files that need no part, or
/// whose every need goes through `common::needs` (which leaves those tests to the full tier): a
/// new such file is added to it, and a file that starts needing a server another way leaves it.
#[test]
fn the_fast_tier_names_exactly_the_pure_test_files() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = std::fs::read_to_string(root.join(".cargo/config.toml")).unwrap();
    let alias = config
        .split("test-fast = [")
        .nth(1)
        .and_then(|s| s.split(']').next())
        .expect("a test-fast alias in .cargo/config.toml");
    let words: Vec<&str> = alias
        .split(',')
        .map(|w| w.trim().trim_matches('"'))
        .filter(|w| !w.is_empty())
        .collect();
    let mut listed: Vec<String> = words
        .windows(2)
        .filter(|w| w[0] == "--test")
        .map(|w| w[1].to_string())
        .collect();
    listed.sort();
    let mut pure = Vec::new();
    for (name, text) in test_targets() {
        // This file names the calls it looks for, and needs none of them.
        if name == "architecture" || !NEEDS_A_PART.iter().any(|n| calls(&text, n)) {
            pure.push(name);
        }
    }
    pure.sort();
    assert_eq!(
        listed, pure,
        "the test-fast alias in .cargo/config.toml should list the test files that need no \
         server, browser or root"
    );
}

/// The one watch loop: ticking (the drift-free schedule), the duration and cancellation are
/// written once, in crates/record/src/ticks.rs; every watcher calls `ticks::run`.
#[test]
fn ticking_is_written_once() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let home = [
        root.join("crates/record/src/ticks.rs"),
        root.join("crates/record/src/schedule.rs"),
    ];
    let mut found = Vec::new();
    for f in crate_sources() {
        if home.contains(&f) {
            continue;
        }
        for (n, l) in code_lines(&f) {
            if l.contains("Schedule::new(") || l.contains(".wait(&plumb_sys::signal") {
                found.push(format!("{}:{n}: {}", f.display(), l.trim()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "a tick loop written outside plumb_record::ticks (use ticks::run):\n{}",
        found.join("\n")
    );
}

/// A source file's module path inside its crate: src/oltp/server.rs is `oltp::server`,
/// src/oltp/mod.rs is `oltp`, src/lib.rs is the crate's root (empty).
fn module_path(src: &Path, f: &Path) -> Vec<String> {
    let rel = f.strip_prefix(src).unwrap().to_string_lossy().into_owned();
    let mut parts: Vec<String> = rel.split('/').map(str::to_string).collect();
    let last = parts.pop().unwrap();
    match last.as_str() {
        "mod.rs" | "lib.rs" | "main.rs" => {}
        f => parts.push(f.trim_end_matches(".rs").to_string()),
    }
    parts
}

/// The paths a line names through `crate::`, `super::` or `$crate::`, made absolute from the
/// module `at` (`super::{a, b::c}` names `a` and `b::c` below at's parent).
fn named_paths(line: &str, at: &[String]) -> Vec<Vec<String>> {
    let b = line.as_bytes();
    let word = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let head = ["crate::", "super::"]
            .into_iter()
            .find(|h| b[i..].starts_with(h.as_bytes()) && (i == 0 || !word(b[i - 1])));
        let Some(head) = head else {
            i += 1;
            continue;
        };
        // The chain: crate:: or super::super::…, then names, then maybe one {group}.
        let mut base: Vec<String> = if head == "crate::" {
            Vec::new()
        } else {
            at.to_vec()
        };
        let mut j = i;
        if head == "super::" {
            while line[j..].starts_with("super::") {
                base.pop();
                j += "super::".len();
            }
        } else {
            j += head.len();
        }
        let name_at = |mut k: usize| {
            let s = k;
            while k < b.len() && word(b[k]) {
                k += 1;
            }
            (line[s..k].to_string(), k)
        };
        loop {
            if j < b.len() && b[j] == b'{' {
                let close = line[j..].find('}').map_or(b.len(), |c| j + c);
                for item in line[j + 1..close].split(',') {
                    let mut p = base.clone();
                    p.extend(item.trim().split("::").map(|s| s.trim().to_string()));
                    out.push(p);
                }
                j = close;
                break;
            }
            let (n, k) = name_at(j);
            if n.is_empty() {
                break;
            }
            base.push(n);
            j = k;
            if line[j..].starts_with("::") {
                j += 2;
            } else {
                break;
            }
        }
        if !base.is_empty() {
            out.push(base);
        }
        i = j.max(i + 1);
    }
    out
}

/// Within each crate, and within each folder of a crate, no module uses one that uses it back
/// (directly or around a circle): a crate's files form layers, so each can be read, and moved,
/// from the bottom up. A folder's files are checked among themselves (oltp/server.rs against
/// oltp/pg.rs) as the crate's top-level modules are.
#[test]
fn no_import_circles_inside_a_crate() {
    use std::collections::{BTreeMap, BTreeSet};
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut circles = Vec::new();
    for c in std::fs::read_dir(root.join("crates")).unwrap().flatten() {
        let src = c.path().join("src");
        if !src.is_dir() {
            continue;
        }
        let mut files = Vec::new();
        sources(&src, &mut files);
        let modules: BTreeSet<Vec<String>> = files.iter().map(|f| module_path(&src, f)).collect();
        // (folder, module in it) -> the modules in the same folder it uses.
        type Level = (Vec<String>, String);
        let mut uses: BTreeMap<Level, BTreeSet<String>> = BTreeMap::new();
        for f in &files {
            let from = module_path(&src, f);
            for (_, l) in code_lines(f) {
                for named in named_paths(&l, &from) {
                    // The longest module the path reaches into.
                    let Some(to) = (1..=named.len())
                        .rev()
                        .map(|n| named[..n].to_vec())
                        .find(|m| modules.contains(m))
                    else {
                        continue;
                    };
                    let k = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
                    // A module and its own folder's parent or child are not siblings.
                    if k == from.len() || k == to.len() {
                        continue;
                    }
                    uses.entry((from[..k].to_vec(), from[k].clone()))
                        .or_default()
                        .insert(to[k].clone());
                }
            }
        }
        // A circle: a path from a module back to itself among its folder's modules.
        for (folder, start) in uses.keys() {
            let mut stack = vec![(start.clone(), vec![start.clone()])];
            let mut seen = BTreeSet::new();
            while let Some((at, path)) = stack.pop() {
                let key = (folder.clone(), at);
                for next in uses.get(&key).into_iter().flatten() {
                    if next == start {
                        circles.push(format!(
                            "{}/{}: {} -> {start}",
                            src.display(),
                            folder.join("/"),
                            path.join(" -> ")
                        ));
                    } else if seen.insert(next.clone()) {
                        let mut p = path.clone();
                        p.push(next.clone());
                        stack.push((next.clone(), p));
                    }
                }
            }
        }
    }
    assert!(
        circles.is_empty(),
        "modules that use each other (move what both need into a module below them):\n{}",
        circles.join("\n")
    );
}

/// The command line is glue: no file in crates/cli over 300 lines. The files still over it are
/// listed with the size they may not grow past (docs/architecture.md says what is left to
/// move out of them); a file that shrinks below 300 leaves the list.
#[test]
fn the_command_line_stays_glue() {
    const LIMIT: usize = 300;
    const NOT_YET: &[(&str, usize)] = &[];
    let cli = Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/cli/src");
    let mut files = Vec::new();
    sources(&cli, &mut files);
    let mut over = Vec::new();
    for f in files {
        let n = std::fs::read_to_string(&f).unwrap().lines().count();
        let name = f.file_name().unwrap().to_string_lossy().into_owned();
        let cap = NOT_YET.iter().find(|(x, _)| *x == name).map(|(_, c)| *c);
        let new = format!("{name}: {n} lines (at most {LIMIT})");
        over.extend(against_cap(&name, n, cap, LIMIT, new));
    }
    assert!(
        over.is_empty(),
        "move logic out of crates/cli into the crate its stage belongs to:\n{}",
        over.join("\n")
    );
}

/// A length held to `limit`, or to its `cap` on a NOT_YET list while it is still over: what is
/// wrong with it, if anything (`what` names it; `new` says a new one over the limit).
fn against_cap(
    what: &str,
    n: usize,
    cap: Option<usize>,
    limit: usize,
    new: String,
) -> Option<String> {
    match cap {
        Some(c) if n > c => Some(format!("{what}: {n} lines, grown past {c}")),
        Some(_) if n <= limit => Some(format!(
            "{what}: {n} lines, now within {limit}: take it off the NOT_YET list"
        )),
        None if n > limit => Some(new),
        _ => None,
    }
}

/// The functions of a source file and their lengths in lines, from `fn` to the brace that
/// closes it at the same indentation (rustfmt's layout).
fn function_lengths(p: &Path) -> Vec<(String, usize)> {
    let text = std::fs::read_to_string(p).unwrap();
    lengths_in(&text)
}

/// The length of each function in `text`, by name.
fn lengths_in(text: &str) -> Vec<(String, usize)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let l = lines[i];
        let body = l.trim_start();
        let indent = l.len() - body.len();
        let after_vis = body
            .strip_prefix("pub(crate) ")
            .or_else(|| body.strip_prefix("pub "))
            .unwrap_or(body);
        if let Some(rest) = after_vis.strip_prefix("fn ") {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            let close = format!("{}}}", " ".repeat(indent));
            if let Some(end) = (i + 1..lines.len()).find(|&j| lines[j] == close) {
                out.push((name, end - i + 1));
                i = end;
            }
        }
        i += 1;
    }
    out
}

/// The command line is glue in its functions too: none over 60 lines (flag structs are not
/// functions). A function that has to stay over it while its logic moves out is listed here
/// with the length it may not grow past, and leaves the list once it is within 60.
#[test]
fn the_command_lines_functions_are_short() {
    const LIMIT: usize = 60;
    const NOT_YET: &[(&str, &str, usize)] = &[];
    let cli = Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/cli/src");
    let mut files = Vec::new();
    sources(&cli, &mut files);
    let mut over = Vec::new();
    for f in files {
        let file = f.file_name().unwrap().to_string_lossy().into_owned();
        for (name, n) in function_lengths(&f) {
            let cap = NOT_YET
                .iter()
                .find(|(x, y, _)| *x == file && *y == name)
                .map(|(_, _, c)| *c);
            let new = format!("{file} {name}: {n} lines (at most {LIMIT})");
            over.extend(against_cap(&format!("{file} {name}"), n, cap, LIMIT, new));
        }
    }
    assert!(
        over.is_empty(),
        "split the function, moving its logic to the crate its stage belongs to:\n{}",
        over.join("\n")
    );
}

/// The libraries' functions outside tests: none over 150 lines, so each reads as one thing
/// (a renderer a list of sections, a check a list of rules). The functions still over it are
/// listed with the length they may not grow past, and leave the list once within 150.
#[test]
fn the_libraries_functions_stay_under_150_lines() {
    const LIMIT: usize = 150;
    const NOT_YET: &[(&str, &str, usize)] = &[];
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("crates");
    let mut over = Vec::new();
    for f in crate_sources() {
        let Ok(rel) = f.strip_prefix(&root) else {
            continue;
        };
        let file = rel.to_string_lossy().into_owned();
        if file.starts_with("cli/") {
            continue;
        }
        let text = std::fs::read_to_string(&f).unwrap();
        // The code before the file's test module.
        let code = match text.find("\n#[cfg(test)]") {
            Some(i) => &text[..i],
            None => &text[..],
        };
        // The longest function of each name (a file may hold two `run`s, in two impls).
        let mut longest = std::collections::BTreeMap::new();
        for (name, n) in lengths_in(code) {
            let e = longest.entry(name).or_insert(0);
            *e = n.max(*e);
        }
        for (name, n) in longest {
            let cap = NOT_YET
                .iter()
                .find(|(x, y, _)| *x == file && *y == name)
                .map(|(_, _, c)| *c);
            let new = format!("(\"{file}\", \"{name}\", {n}),");
            over.extend(against_cap(&format!("{file} {name}"), n, cap, LIMIT, new));
        }
    }
    assert!(
        over.is_empty(),
        "split the function into the steps it reads as:\n{}",
        over.join("\n")
    );
}

/// A crate's face is what others use: a `pub fn` whose name appears nowhere outside its crate's
/// sources (another crate, a test file, the binary) is `pub(crate)` or private instead. Matched
/// by name, so a name another crate uses for anything keeps every `pub fn` of that name public.
#[test]
fn every_pub_fn_is_named_outside_its_crate() {
    // Accessors the crate's own tests read, kept public as the type's face.
    const KEPT: &[(&str, &str)] = &[("sys", "sched_via")];
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut all = Vec::new();
    for dir in ["crates", "tests", "src"] {
        sources(&root.join(dir), &mut all);
    }
    // The crate whose sources a file is in (None: a test file or the binary).
    let owner = |p: &Path| -> Option<String> {
        let rel = p.strip_prefix(root.join("crates")).ok()?;
        let mut parts = rel.components();
        let name = parts.next()?.as_os_str().to_str()?.to_string();
        (parts.next()?.as_os_str() == "src").then_some(name)
    };
    let words_of = |text: &str| -> std::collections::BTreeSet<String> {
        text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .filter(|w| !w.is_empty())
            .map(str::to_string)
            .collect()
    };
    // Each word, and the crates (or "" for outside any crate's sources) whose files use it.
    let mut used: std::collections::HashMap<String, std::collections::BTreeSet<String>> =
        std::collections::HashMap::new();
    let mut texts = Vec::new();
    for p in &all {
        let text = std::fs::read_to_string(p).unwrap();
        let o = owner(p).unwrap_or_default();
        for w in words_of(&text) {
            used.entry(w).or_default().insert(o.clone());
        }
        texts.push((p.clone(), o, text));
    }
    let mut private = Vec::new();
    for (p, o, text) in &texts {
        if o.is_empty() {
            continue;
        }
        for l in text.lines() {
            let Some(rest) = l.trim_start().strip_prefix("pub fn ") else {
                continue;
            };
            let name: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            let outside = used[&name].iter().any(|c| c != o);
            if !outside && !KEPT.contains(&(o.as_str(), name.as_str())) {
                private.push(format!(
                    "{}: {name}",
                    p.strip_prefix(root).unwrap().display()
                ));
            }
        }
    }
    assert!(
        private.is_empty(),
        "make these pub(crate) (no other crate, test or the binary names them):\n{}",
        private.join("\n")
    );
}
