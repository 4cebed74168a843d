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
