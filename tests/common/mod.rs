//! Helpers the integration tests share: finding PostgreSQL and Chromium, root, and the
//! processes a test's server left running.
#![allow(dead_code)] // each test file uses its own subset

pub mod lab;
pub mod maria;
pub mod private;

#[allow(unused_imports)] // each test file uses its own subset
pub use private::Private;

use std::path::Path;
use std::process::Command;

/// plumb, without the environment that would point it at another engine or instance.
/// The plumb binary, with none of the caller's PLUMB_* settings (a PLUMB_ENGINE or
/// PLUMB_SYSROOT in the environment would change what every test measures) and no database
/// password from the environment. PLUMB_PG_BIN (where the server binaries are) stays.
pub fn plumb() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_plumb"));
    for (k, _) in std::env::vars_os() {
        let k = k.to_string_lossy();
        if (k.starts_with("PLUMB_") && k != "PLUMB_PG_BIN") || k == "MYSQL_PWD" || k == "PGPASSWORD"
        {
            c.env_remove(k.as_ref());
        }
    }
    c
}

/// Run plumb with `args` and wait for it (see [`plumb`] for the environment it gets).
pub fn run(args: &[&str]) -> std::process::Output {
    plumb().args(args).output().expect("run plumb")
}

/// What a finished plumb said on stderr.
pub fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

pub fn is_root() -> bool {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// A test cannot run here (`msg` says why, starting "skipped"). Under CI (CI=true) every part
/// a test needs must be there, so it fails with the reason; elsewhere the reason is printed
/// and the test returns.
pub fn skip(msg: impl std::fmt::Display) {
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("CI=true, and this test cannot run: {msg}");
    }
    eprintln!("{msg}");
}

/// What a test needs that the fast tier (`cargo test-fast`, run before the setup on any
/// machine) does not give: root, or FUSE.
#[derive(Clone, Copy)]
pub enum Need {
    Root,
    Fuse,
}

impl Need {
    fn here(self) -> bool {
        match self {
            Need::Root => is_root(),
            Need::Fuse => Path::new("/dev/fuse").exists(),
        }
    }
}

/// Whether a test that needs `what` runs now: the fast tier (PLUMB_TIER=fast, set by `cargo
/// test-fast`) leaves it to the full tier, saying so; in the full tier a missing part is
/// [`skip`]'s (under CI=true, a failure). A test file whose every need goes through here
/// belongs in the fast tier (tests/architecture.rs checks it).
pub fn needs(what: &[Need], why: &str) -> bool {
    if std::env::var("PLUMB_TIER").is_ok_and(|t| t == "fast") {
        eprintln!("left to the full tier: {why}");
        return false;
    }
    if what.iter().all(|n| n.here()) {
        return true;
    }
    skip(format!("skipped: {why}"));
    false
}

/// The tests that measure, and the rest (tests/together, one test binary). A test whose figures
/// another test's servers and processes would move holds [`alone`] for its run; every other test
/// holds [`beside`], and those run together, at most [`BESIDE`] at once (most of them wait on a
/// server or a timer, not on a CPU).
///
/// The binary runs more tests at a time than that (RUST_TEST_THREADS, .cargo/config.toml), so
/// that the tests waiting to run alone gather while the others go on: when more wait than the
/// threads left over beyond [`BESIDE`] (or nothing else is left to run), the tests beside let
/// the running ones end, and the waiting ones run alone one after another; then the others go
/// on. One pause for a batch of them, instead of one for each, where the running tests end one
/// by one while the rest wait.
/// PLUMB_TEST_BESIDE sets another number, to measure with (bench/test_time.py --groups).
pub const BESIDE: usize = 6;

fn beside_limit() -> usize {
    static LIMIT: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *LIMIT.get_or_init(|| {
        std::env::var("PLUMB_TEST_BESIDE")
            .ok()
            .and_then(|v| v.parse().ok())
            .filter(|n| *n > 0)
            .unwrap_or(BESIDE)
    })
}

struct Turns {
    /// The tests waiting to run alone run now: no test starts beside.
    alone_turn: bool,
    alone_running: bool,
    alone_waiting: usize,
    beside_running: usize,
    beside_waiting: usize,
}

static TURNS: std::sync::Mutex<Turns> = std::sync::Mutex::new(Turns {
    alone_turn: false,
    alone_running: false,
    alone_waiting: 0,
    beside_running: 0,
    beside_waiting: 0,
});
static TURN: std::sync::Condvar = std::sync::Condvar::new();

/// Tests at a time: RUST_TEST_THREADS, or as many as run beside.
fn threads() -> usize {
    static THREADS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *THREADS.get_or_init(|| {
        std::env::var("RUST_TEST_THREADS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(beside_limit)
    })
}

impl Turns {
    /// Whose turn it is now; true when it changed.
    fn settle(&mut self) -> bool {
        let was = self.alone_turn;
        if !self.alone_turn {
            let gathered = self.alone_waiting > threads().saturating_sub(beside_limit());
            let nothing_else = self.beside_running == 0 && self.beside_waiting == 0;
            self.alone_turn = self.alone_waiting > 0 && (gathered || nothing_else);
        } else if self.alone_waiting == 0 && !self.alone_running {
            self.alone_turn = false;
        }
        was != self.alone_turn
    }
}

fn turns() -> std::sync::MutexGuard<'static, Turns> {
    TURNS.lock().unwrap_or_else(|e| e.into_inner())
}

/// Wait until `ready` holds, settling whose turn it is on every change.
fn wait_turn(
    mut t: std::sync::MutexGuard<'static, Turns>,
    ready: fn(&Turns) -> bool,
) -> std::sync::MutexGuard<'static, Turns> {
    loop {
        if t.settle() {
            TURN.notify_all();
        }
        if ready(&t) {
            return t;
        }
        t = TURN.wait(t).unwrap_or_else(|e| e.into_inner());
    }
}

/// A test's hold on the group. With PLUMB_TEST_LOG set, its end appends a line to that file:
/// the test, `alone` or `beside`, and when it got the group and let it go (seconds from the
/// binary's first test); `python3 bench/test_time.py --groups FILE` reads them.
pub struct Held {
    alone: bool,
    since: f64,
}

fn clock() -> f64 {
    static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    START
        .get_or_init(std::time::Instant::now)
        .elapsed()
        .as_secs_f64()
}

impl Drop for Held {
    fn drop(&mut self) {
        let kind = if self.alone { "alone" } else { "beside" };
        if let Some(path) = std::env::var_os("PLUMB_TEST_LOG") {
            let line = format!(
                "{}\t{kind}\t{:.3}\t{:.3}\n",
                std::thread::current().name().unwrap_or("?"),
                self.since,
                clock()
            );
            use std::io::Write;
            if let Ok(mut f) = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
            {
                let _ = f.write_all(line.as_bytes());
            }
        }
        // The turn given back, a panic's included.
        let mut t = turns();
        if self.alone {
            t.alone_running = false;
        } else {
            t.beside_running -= 1;
        }
        t.settle();
        TURN.notify_all();
    }
}

/// Run alone: no other test of the binary runs until this one ends.
pub fn alone() -> Held {
    clock();
    let mut t = turns();
    t.alone_waiting += 1;
    let mut t = wait_turn(t, |t| {
        t.alone_turn && !t.alone_running && t.beside_running == 0
    });
    t.alone_waiting -= 1;
    t.alone_running = true;
    drop(t);
    // On a settled host: what the tests before it left to write back goes now, not in its
    // measured windows (alone tests run one after another).
    // SAFETY: sync(2) takes no arguments and cannot fail.
    unsafe { libc::sync() };
    Held {
        alone: true,
        since: clock(),
    }
}

/// Run beside the other tests that hold it, never beside one that runs [`alone`].
pub fn beside() -> Held {
    clock();
    let mut t = turns();
    t.beside_waiting += 1;
    let mut t = wait_turn(t, |t| !t.alone_turn && t.beside_running < beside_limit());
    t.beside_waiting -= 1;
    t.beside_running += 1;
    drop(t);
    Held {
        alone: false,
        since: clock(),
    }
}

/// A part every Debian host has (a tool of procps or util-linux, a kernel file) is missing:
/// [`skip`]'s behaviour, in either tier.
pub fn missing_basic(what: &str) {
    skip(format!("skipped: {what}"));
}

/// Skip (printing why) unless PostgreSQL runs here; under CI a missing part fails.
pub fn need_postgres() -> bool {
    if let Some(why) = no_postgres() {
        skip(format!("skipped: {why}"));
        return false;
    }
    true
}

/// Why the PostgreSQL tests cannot run here, if they cannot (server binaries and pgbench).
pub fn no_postgres() -> Option<String> {
    let has = std::fs::read_dir("/usr/lib/postgresql")
        .map(|rd| {
            rd.flatten().any(|e| {
                e.path().join("bin/initdb").exists() && e.path().join("bin/pgbench").exists()
            })
        })
        .unwrap_or(false);
    (!has && std::env::var("PLUMB_PG_BIN").is_err())
        .then(|| "no PostgreSQL server binaries and pgbench (apt-get install postgresql)".into())
}

/// A PostgreSQL program (`pgbench`, `psql`): from PLUMB_PG_BIN, else the first of Debian's
/// installed versions that has it.
pub fn pg_bin(name: &str) -> String {
    let bin = std::env::var("PLUMB_PG_BIN").unwrap_or_else(|_| {
        std::fs::read_dir("/usr/lib/postgresql")
            .expect("/usr/lib/postgresql (no_postgres() first)")
            .flatten()
            .map(|e| e.path().join("bin"))
            .find(|b| b.join(name).exists())
            .unwrap_or_else(|| panic!("no {name} under /usr/lib/postgresql"))
            .display()
            .to_string()
    });
    format!("{bin}/{name}")
}

/// Processes whose command line names `dir`, or that work in it (a server's processes).
pub fn processes_in(dir: &Path) -> Vec<String> {
    let needle = dir.to_str().unwrap();
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        if !e
            .file_name()
            .to_str()
            .is_some_and(|n| n.parse::<u32>().is_ok())
        {
            continue;
        }
        if let Ok(c) = std::fs::read(e.path().join("cmdline")) {
            let c = String::from_utf8_lossy(&c).replace('\0', " ");
            let cwd = std::fs::read_link(e.path().join("cwd")).unwrap_or_default();
            if c.contains(needle) || cwd.starts_with(dir) {
                out.push(c);
            }
        }
    }
    out
}

/// A headless browser, when one is installed.
pub fn chromium() -> Option<&'static str> {
    ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find(|c| {
            Command::new(c)
                .arg("--version")
                .output()
                .map(|o| o.status.success())
                .unwrap_or(false)
        })
}

/// `sql` through psql on a private instance (`plumb engine psql --dir DIR -- -Atc SQL`): its
/// output, trimmed; a failure fails the test with psql's message.
pub fn engine_psql(dir: &Path, sql: &str) -> String {
    let o = plumb()
        .args(["engine", "psql", "--dir"])
        .arg(dir)
        .args(["--", "-Atc", sql])
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "{sql}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

/// The server build of PostgreSQL `major` the version tests run on: Debian's (15 here) or the
/// one `scripts/setup --test` installs into $PLUMB_PG_VERSIONS (default
/// /var/cache/plumb/postgresql/N), found as plumb finds them. A missing one fails under CI=true
/// and is skipped with its reason elsewhere (None).
pub fn pg_build(major: u32) -> Option<std::path::PathBuf> {
    match plumb_engine::private::installed()
        .into_iter()
        .find(|(v, _)| *v == major)
    {
        Some((_, bin)) => Some(bin),
        None => {
            skip(format!(
                "skipped: no PostgreSQL {major} server build here (scripts/setup --test installs 16, 17 and 18 into {})",
                plumb_engine::private::BUILD_CACHE
            ));
            None
        }
    }
}

/// A temporary directory under /tmp that a server running as another OS user (postgres) can
/// reach: mode 0755.
pub fn server_tempdir(prefix: &str) -> tempfile::TempDir {
    let tmp = tempfile::Builder::new()
        .prefix(prefix)
        .tempdir_in("/tmp")
        .unwrap();
    std::fs::set_permissions(
        tmp.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    tmp
}

/// Why Selenium cannot drive Chromium here, or None when it can.
#[allow(dead_code)]
pub fn selenium_missing() -> Option<String> {
    if chromium().is_none() {
        return Some("no chromium".into());
    }
    if !Path::new("/usr/bin/chromedriver").exists() {
        return Some("no /usr/bin/chromedriver (Debian's chromium-driver)".into());
    }
    let ok = Command::new("/usr/bin/python3")
        .args(["-c", "import selenium"])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    (!ok).then(|| "no Selenium for /usr/bin/python3 (Debian's python3-selenium)".into())
}

/// What the first screen of an HTML report shows at 1280x800 in headless Chromium
/// (tests/browser/first_screen.py): the verdict block's bounds and lines. None (said) when
/// Selenium cannot run here. `PLUMB_SCREENSHOTS=DIR` keeps the screenshot as DIR/NAME.png.
#[allow(dead_code)]
pub fn first_screen(html: &Path, name: &str) -> Option<serde_json::Value> {
    if let Some(why) = selenium_missing() {
        skip(format!(
            "skipped the first-screen check: {why}; scripts/setup --test installs chromium, chromium-driver and python3-selenium"
        ));
        return None;
    }
    let shots = std::env::var_os("PLUMB_SCREENSHOTS")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::env::temp_dir());
    let _ = std::fs::create_dir_all(&shots);
    let shot = shots.join(format!("{name}.png"));
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/browser/first_screen.py");
    let o = Command::new("/usr/bin/python3")
        .arg(&script)
        .arg(html)
        .arg(&shot)
        .output()
        .expect("python3 runs");
    assert!(
        o.status.success(),
        "first_screen.py failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("one JSON object");
    assert!(
        std::fs::metadata(&shot)
            .map(|m| m.len() > 20_000)
            .unwrap_or(false),
        "blank first screen: {}",
        shot.display()
    );
    Some(v)
}

/// `file` checked against `docs/SCHEMA` with python3-jsonschema: "" or the errors after
/// "INVALID: "; None (said) when jsonschema is not installed.
#[allow(dead_code)]
pub fn validate(schema: &str, report: &Path) -> Option<String> {
    // Debian's Python, which python3-jsonschema is installed for (not whichever python3 is
    // first on PATH).
    let ok = Command::new("/usr/bin/python3")
        .args(["-c", "import jsonschema"])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !ok {
        skip("skipped schema validation: no python3-jsonschema (scripts/setup --test installs it)");
        return None;
    }
    let schema = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("docs")
        .join(schema);
    let o = Command::new("/usr/bin/python3")
        .args([
            "-c",
            "import json,sys,jsonschema\n\
             s=json.load(open(sys.argv[1])); d=json.load(open(sys.argv[2]))\n\
             jsonschema.Draft202012Validator.check_schema(s)\n\
             errs=[e.message for e in jsonschema.Draft202012Validator(s).iter_errors(d)]\n\
             print('\\n'.join(errs)); sys.exit(1 if errs else 0)",
        ])
        .arg(&schema)
        .arg(report)
        .output()
        .unwrap();
    Some(format!(
        "{}{}",
        if o.status.success() { "" } else { "INVALID: " },
        String::from_utf8_lossy(&o.stdout).trim()
    ))
}

/// A JSON value checked against `docs/SCHEMA` ([`validate`]): panics with the errors when it
/// does not validate; says so when jsonschema is not installed.
#[allow(dead_code)]
pub fn assert_valid(schema: &str, v: &serde_json::Value) {
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("result.json");
    std::fs::write(&f, v.to_string()).unwrap();
    if let Some(errs) = validate(schema, &f) {
        assert_eq!(errs, "", "against docs/{schema}: {v:#}");
    }
}
