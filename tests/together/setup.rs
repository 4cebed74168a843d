//! scripts/pg-versions.py's checked extraction, run with the system's own /usr/bin/python3
//! (Debian 12's is 3.11.2, without tarfile's `filter=`) on crafted archives: each unsafe member is
//! refused by name with nothing written, inside the target or outside it; a good archive lands.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;

const PYTHON: &str = "/usr/bin/python3";

/// Writes one archive per case into the directory given, with Python's own tarfile (the crafted
/// members a hostile registry package could carry).
const CRAFT: &str = r##"
import io, sys, tarfile
out = sys.argv[1]

def file(name, data=b"x", mode=0o644):
    ti = tarfile.TarInfo(name); ti.size = len(data); ti.mode = mode
    return ti, io.BytesIO(data)

def entry(name, kind, link="", mode=0o644, dev=(0, 0)):
    ti = tarfile.TarInfo(name); ti.type = kind; ti.linkname = link; ti.mode = mode
    ti.devmajor, ti.devminor = dev
    return ti, None

cases = {
    "good": [entry("package", tarfile.DIRTYPE, mode=0o755),
             file("package/bin/postgres", b"#!/bin/sh\necho hi\n", 0o775),
             file("package/lib/libpq.so.5.17", b"ELF", 0o644),
             entry("package/lib/libpq.so.5", tarfile.SYMTYPE, "libpq.so.5.17"),
             entry("package/lib/libpq.hard", tarfile.LNKTYPE, "package/lib/libpq.so.5.17")],
    "traversal": [file("package/ok"), file("package/../../escaped")],
    "absolute": [file("/tmp/plumb-absolute-member")],
    "symlink-out": [entry("package/lib/evil", tarfile.SYMTYPE, "../../../outside"),
                    file("package/lib/evil/planted")],
    "symlink-absolute": [entry("package/etc", tarfile.SYMTYPE, "/etc")],
    "through-link": [entry("package/a", tarfile.SYMTYPE, "."),
                     entry("package/a/b", tarfile.SYMTYPE, ".."),
                     file("package/a/b/escaped")],
    "hardlink-out": [entry("package/passwd", tarfile.LNKTYPE, "/etc/passwd")],
    "device": [file("package/ok"), entry("package/dev/mem", tarfile.CHRTYPE, dev=(1, 1))],
    "fifo": [entry("package/pipe", tarfile.FIFOTYPE)],
    "setuid": [file("package/bin/su", b"x", 0o4755)],
}
for name, members in cases.items():
    with tarfile.open(f"{out}/{name}.tar.gz", "w:gz") as t:
        for ti, data in members:
            t.addfile(ti, data)
"##;

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/pg-versions.py")
}

/// The crafted archives in `tmp/archives`, or None (with the reason printed) without a system Python.
fn craft(tmp: &Path) -> Option<PathBuf> {
    if !Path::new(PYTHON).exists() {
        common::skip(format!(
            "skipped the extraction tests: no {PYTHON} (Debian's python3)"
        ));
        return None;
    }
    let dir = tmp.join("archives");
    std::fs::create_dir(&dir).unwrap();
    let o = Command::new(PYTHON)
        .arg("-c")
        .arg(CRAFT)
        .arg(&dir)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "crafting the archives: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    Some(dir)
}

fn extract(archive: &Path, dest: &Path) -> (i32, String) {
    let o = Command::new(PYTHON)
        .arg(script())
        .arg("--extract")
        .arg(archive)
        .arg(dest)
        .output()
        .unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// Every path under `dir`, relative to it, sorted.
fn tree(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            out.push(p.strip_prefix(dir).unwrap().display().to_string());
            if e.file_type().unwrap().is_dir() {
                stack.push(p);
            }
        }
    }
    out.sort();
    out
}

#[test]
fn unsafe_members_are_refused_by_name_and_nothing_is_written() {
    let _group = common::beside();
    let tmp = tempfile::tempdir().unwrap();
    let Some(archives) = craft(tmp.path()) else {
        return;
    };
    let cases = [
        ("traversal", "package/../../escaped", "'..'"),
        ("absolute", "/tmp/plumb-absolute-member", "absolute"),
        ("symlink-out", "package/lib/evil", "outside the target"),
        ("symlink-absolute", "package/etc", "outside the target"),
        ("through-link", "package/a/b", "through the link package/a"),
        ("hardlink-out", "package/passwd", "outside the target"),
        ("device", "package/dev/mem", "device node"),
        ("fifo", "package/pipe", "FIFO"),
        ("setuid", "package/bin/su", "setuid"),
    ];
    for (case, member, why) in cases {
        // The target sits two levels down so that a '..' member has somewhere to land.
        let root = tmp.path().join(case);
        let dest = root.join("a/target");
        std::fs::create_dir_all(&dest).unwrap();
        let archive = archives.join(format!("{case}.tar.gz"));
        let (code, err) = extract(&archive, &dest);
        assert_eq!(code, 2, "{case}: exit code; stderr: {err}");
        assert!(
            err.contains(&format!("member {member}")),
            "{case}: the member is not named: {err}"
        );
        assert!(
            err.contains(why),
            "{case}: the reason ({why}) is not said: {err}"
        );
        assert!(err.contains("nothing extracted"), "{case}: {err}");
        assert_eq!(
            tree(&root),
            ["a", "a/target"],
            "{case}: something was written"
        );
    }
    assert!(!Path::new("/tmp/plumb-absolute-member").exists());
    assert!(!tmp.path().join("escaped").exists() && !tmp.path().join("outside").exists());
}

#[test]
fn a_good_archive_lands_with_its_links_and_modes() {
    let _group = common::beside();
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let tmp = tempfile::tempdir().unwrap();
    let Some(archives) = craft(tmp.path()) else {
        return;
    };
    let dest = tmp.path().join("target");
    std::fs::create_dir(&dest).unwrap();
    let (code, err) = extract(&archives.join("good.tar.gz"), &dest);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        tree(&dest),
        [
            "package",
            "package/bin",
            "package/bin/postgres",
            "package/lib",
            "package/lib/libpq.hard",
            "package/lib/libpq.so.5",
            "package/lib/libpq.so.5.17"
        ]
    );
    let postgres = dest.join("package/bin/postgres");
    assert_eq!(
        std::fs::read_to_string(&postgres).unwrap(),
        "#!/bin/sh\necho hi\n"
    );
    // Group write dropped: only the owner (root) changes what plumb will run.
    assert_eq!(
        std::fs::metadata(&postgres).unwrap().permissions().mode() & 0o7777,
        0o755
    );
    let lib = dest.join("package/lib");
    assert_eq!(
        std::fs::read_link(lib.join("libpq.so.5")).unwrap(),
        Path::new("libpq.so.5.17")
    );
    assert_eq!(std::fs::read(lib.join("libpq.so.5")).unwrap(), b"ELF");
    let (a, b) = (
        std::fs::metadata(lib.join("libpq.hard")).unwrap(),
        std::fs::metadata(lib.join("libpq.so.5.17")).unwrap(),
    );
    assert_eq!(
        a.ino(),
        b.ino(),
        "the hard link is not one file with its target"
    );
}

#[test]
fn a_corrupt_or_missing_archive_is_an_error_naming_it() {
    let _group = common::beside();
    let tmp = tempfile::tempdir().unwrap();
    if craft(tmp.path()).is_none() {
        return;
    }
    let bad = tmp.path().join("corrupt.tar.gz");
    std::fs::write(&bad, b"not an archive").unwrap();
    let dest = tmp.path().join("target");
    std::fs::create_dir(&dest).unwrap();
    for archive in [bad, tmp.path().join("missing.tar.gz")] {
        let (code, err) = extract(&archive, &dest);
        assert_eq!(code, 2, "{err}");
        assert!(err.contains(&archive.display().to_string()), "{err}");
        assert!(!err.contains("Traceback"), "{err}");
    }
    assert!(tree(&dest).is_empty());
}
