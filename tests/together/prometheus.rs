//! plumb and a real Prometheus (Debian's `prometheus`, installed by `scripts/setup --test`):
//! Prometheus scrapes `plumb record --serve` and answers with the values plumb recorded; an
//! exported recording is backfilled with `promtool` and queried.

use crate::common;
use crate::common::{plumb, skip};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn have(prog: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {prog}")])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn prometheus_missing() -> bool {
    if have("prometheus") && have("promtool") {
        return false;
    }
    skip("skipped: no prometheus and promtool (apt-get install prometheus; scripts/setup --test does)");
    true
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A GET over plain HTTP/1.0; the status and the body.
fn get(port: u16, path: &str) -> Option<(u16, String)> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
    let mut buf = String::new();
    s.read_to_string(&mut buf).ok()?;
    let (head, body) = buf.split_once("\r\n\r\n")?;
    let code = head.split_whitespace().nth(1)?.parse().ok()?;
    Some((code, body.to_string()))
}

fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// A Prometheus of the test's own (its port, config and data), stopped when dropped.
struct Prometheus {
    child: Child,
    port: u16,
}

impl Prometheus {
    fn start(dir: &Path, data: &Path, config: &str) -> Prometheus {
        let port = free_port();
        let cfg = dir.join("prometheus.yml");
        std::fs::write(&cfg, config).unwrap();
        let child = Command::new("prometheus")
            .arg(format!("--config.file={}", cfg.display()))
            .arg(format!("--storage.tsdb.path={}", data.display()))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("prometheus.log")).unwrap())
            .spawn()
            .expect("prometheus");
        let p = Prometheus { child, port };
        let t0 = Instant::now();
        while get(port, "/-/ready").map(|r| r.0) != Some(200) {
            assert!(
                t0.elapsed() < Duration::from_secs(60),
                "prometheus did not get ready: {}",
                std::fs::read_to_string(dir.join("prometheus.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        p
    }

    /// An instant query's result (`data.result`).
    fn query(&self, q: &str, at: Option<f64>) -> Vec<serde_json::Value> {
        let mut path = format!("/api/v1/query?query={}", urlencode(q));
        if let Some(t) = at {
            path.push_str(&format!("&time={t:.3}"));
        }
        let (code, body) = get(self.port, &path).expect("prometheus answers");
        assert_eq!(code, 200, "{q}: {body}");
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(v["status"], "success", "{body}");
        v["data"]["result"].as_array().cloned().unwrap_or_default()
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn num(v: &serde_json::Value) -> f64 {
    v.as_str().unwrap().parse().unwrap()
}

fn raw_values(rec: &plumb_store::Recording, name: &str) -> Vec<u64> {
    rec.column(name)
        .unwrap_or_else(|| panic!("{name} not recorded"))
        .iter()
        .copied()
        .filter(|v| *v != plumb_store::MISSING)
        .collect()
}

#[test]
fn prometheus_scrapes_record_serve_and_holds_the_values_plumb_recorded() {
    let _group = common::beside();
    if prometheus_missing() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let rec_path = d.path().join("live.plumb");
    let plumb_port = free_port();
    // User CPU that moves while Prometheus scrapes (an idle host's barely does).
    let mut busy = Command::new("timeout")
        .args(["12", "sh", "-c", "while :; do :; done"])
        .spawn()
        .unwrap();
    let rec = plumb()
        .args(["record", "--serve"])
        .arg(format!("127.0.0.1:{plumb_port}"))
        .arg("--out")
        .arg(&rec_path)
        .args(["--interval", "1s", "--duration", "14s"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The endpoint answers before Prometheus starts.
    let t0 = Instant::now();
    let body = loop {
        if let Some((200, b)) = get(plumb_port, "/metrics") {
            if b.contains("plumb_mem_total_bytes") {
                break b;
            }
        }
        assert!(t0.elapsed() < Duration::from_secs(10), "no /metrics");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(body.contains("# TYPE plumb_cpu_seconds_total counter"));
    assert!(
        !body.contains("cpu=\"all\""),
        "no aggregate beside the CPUs"
    );
    assert_eq!(get(plumb_port, "/nothing-here").map(|r| r.0), Some(404));
    let prom = Prometheus::start(
        d.path(),
        &d.path().join("data"),
        &format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 900ms\nscrape_configs:\n  - job_name: plumb\n    static_configs:\n      - targets: ['127.0.0.1:{plumb_port}']\n"
        ),
    );
    let out = rec.wait_with_output().unwrap();
    let _ = busy.kill();
    let _ = busy.wait();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains(&format!("http://127.0.0.1:{plumb_port}/metrics")),
        "{err}"
    );
    let r = plumb_store::read(&rec_path).unwrap();
    let hz = r.header.clock_ticks_per_s.unwrap() as f64;
    let host = r.header.hostname.clone().unwrap();

    // Every value Prometheus scraped is one plumb recorded (in seconds: ticks / USER_HZ).
    let scraped = prom.query(
        &format!("plumb_cpu_seconds_total{{cpu=\"cpu0\",mode=\"user\",host=\"{host}\"}}[2m]"),
        None,
    );
    assert_eq!(scraped.len(), 1, "{scraped:?}");
    let values: Vec<f64> = scraped[0]["values"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| num(&p[1]))
        .collect();
    let recorded: Vec<f64> = raw_values(&r, "cpu.cpu0.user_ticks")
        .iter()
        .map(|t| *t as f64 / hz)
        .collect();
    assert!(
        values.len() >= 5,
        "Prometheus scraped {} samples in the 14 s: {values:?}",
        values.len()
    );
    for v in &values {
        assert!(
            recorded.iter().any(|x| (x - v).abs() < 1e-9),
            "scraped {v} s of user CPU, which plumb never recorded: {recorded:?}"
        );
    }
    let mut distinct = values.clone();
    distinct.dedup();
    assert!(distinct.len() >= 3, "the counter moved: {values:?}");

    // A gauge, and a counter per device with its label.
    let total = prom.query("last_over_time(plumb_mem_total_bytes[2m])", None);
    assert_eq!(
        num(&total[0]["value"][1]) as u64,
        raw_values(&r, "mem.total_bytes")[0]
    );
    let dev = r
        .metrics
        .iter()
        .find_map(|m| {
            m.name
                .strip_prefix("disk.")
                .and_then(|s| s.strip_suffix(".reads"))
        })
        .expect("a disk")
        .to_string();
    let reads = prom.query(
        &format!("last_over_time(plumb_disk_reads_total{{device=\"{dev}\"}}[2m])"),
        None,
    );
    assert_eq!(reads.len(), 1, "{reads:?}");
    assert!(
        raw_values(&r, &format!("disk.{dev}.reads")).contains(&(num(&reads[0]["value"][1]) as u64))
    );
    // Scraped as OpenMetrics, with the unit metadata.
    let (_, meta) = get(prom.port, "/api/v1/metadata?metric=plumb_cpu_seconds").unwrap();
    assert!(meta.contains("\"unit\":\"seconds\""), "{meta}");
    // Summed over the CPUs, each mode is the host's (/proc/stat's first line) within 2%.
    let by_mode = prom.query(
        &format!("sum by (mode) (last_over_time(plumb_cpu_seconds_total{{host=\"{host}\"}}[2m]))"),
        None,
    );
    let last = |raw: &str| *raw_values(&r, raw).last().unwrap() as f64 / hz;
    for m in &by_mode {
        let mode = m["metric"]["mode"].as_str().unwrap();
        let got = num(&m["value"][1]);
        let want = last(&format!("cpu.all.{mode}_ticks"));
        assert!(
            (got - want).abs() <= 0.02 * want.max(1.0),
            "{mode}: Prometheus's sum over the CPUs {got} s, /proc/stat's all-CPUs {want} s"
        );
    }
    assert_eq!(by_mode.len(), 6, "{by_mode:?}");
}

#[test]
fn an_exported_recording_is_backfilled_by_promtool_and_queried() {
    let _group = common::beside();
    if prometheus_missing() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let rec_path = d.path().join("incident.plumb");
    let st = plumb()
        .args([
            "record",
            "--interval",
            "200ms",
            "--duration",
            "2s",
            "--name",
            "incident",
            "--out",
        ])
        .arg(&rec_path)
        .output()
        .unwrap();
    assert!(
        st.status.success(),
        "{}",
        String::from_utf8_lossy(&st.stderr)
    );
    let om = d.path().join("incident.om");
    let out = plumb()
        .args(["export", "--format", "openmetrics"])
        .arg(&rec_path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::write(&om, &out.stdout).unwrap();
    let data = d.path().join("data");
    let st = Command::new("promtool")
        .args(["tsdb", "create-blocks-from", "openmetrics"])
        .arg(&om)
        .arg(&data)
        .output()
        .unwrap();
    assert!(
        st.status.success(),
        "promtool refused the export: {}{}",
        String::from_utf8_lossy(&st.stdout),
        String::from_utf8_lossy(&st.stderr)
    );
    let prom = Prometheus::start(d.path(), &data, "global:\n  scrape_interval: 15s\n");
    let r = plumb_store::read(&rec_path).unwrap();
    let host = r.header.hostname.clone().unwrap();
    // At the last sample's time, the gauge and the counter are what was recorded then.
    let last = r.times_ms.len() - 1;
    let at = (r.header.started_unix_ms + r.times_ms[last]) as f64 / 1000.0;
    let free = prom.query(
        &format!("plumb_mem_free_bytes{{host=\"{host}\",run=\"incident\"}}"),
        Some(at),
    );
    assert_eq!(free.len(), 1, "{free:?}");
    assert_eq!(
        num(&free[0]["value"][1]) as u64,
        r.column("mem.free_bytes").unwrap()[last]
    );
    assert!((free[0]["value"][0].as_f64().unwrap() - at).abs() < 1e-6);
    // Every sample is there: 2 s at 200 ms.
    let n = prom.query(
        &format!(
            "count_over_time(plumb_cpu_seconds_total{{cpu=\"cpu0\",mode=\"idle\",host=\"{host}\"}}[1h])"
        ),
        Some(at),
    );
    assert_eq!(num(&n[0]["value"][1]) as usize, r.times_ms.len());
    // A rate Prometheus computes from the export is the one plumb computes.
    let idle = r.column("cpu.cpu0.idle_ticks").unwrap();
    let hz = r.header.clock_ticks_per_s.unwrap() as f64;
    let first_t = (r.header.started_unix_ms + r.times_ms[0]) as f64 / 1000.0;
    let span = at - first_t;
    let q = format!(
        "increase(plumb_cpu_seconds_total{{cpu=\"cpu0\",mode=\"idle\",host=\"{host}\"}}[{}ms])",
        (span * 1000.0).round() as u64 + 1
    );
    let inc = prom.query(&q, Some(at));
    let want = (idle[last] - idle[0]) as f64 / hz;
    // increase() extrapolates to the window's edges: within one sample's worth.
    let got = num(&inc[0]["value"][1]);
    assert!(
        (got - want).abs() <= want / (r.times_ms.len() - 1) as f64 + 1e-6,
        "increase {got} s, recorded {want} s"
    );
}

#[test]
fn serve_and_openmetrics_refuse_bad_input_and_leave_nothing() {
    let _group = common::beside();
    let d = tempfile::tempdir().unwrap();
    let out = plumb()
        .args(["record", "--serve", "99999"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--serve \"99999\""));
    // A port in use: the error names it, and the file is not left behind.
    let busy = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = busy.local_addr().unwrap().port();
    let f = d.path().join("r.plumb");
    let out = plumb()
        .args(["record", "--duration", "1s", "--serve"])
        .arg(port.to_string())
        .arg("--out")
        .arg(&f)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains(&format!("--serve 127.0.0.1:{port}")), "{err}");
    assert!(
        !f.exists(),
        "a recording that never started is not left behind"
    );
    // OpenMetrics is plumb export's format only.
    let out = plumb()
        .args(["os", "--format", "openmetrics"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("only plumb export"));
    // --serve alone keeps no file.
    let out = plumb()
        .current_dir(d.path())
        .args(["record", "--duration", "1s", "--serve", "0"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("samples served"));
    let left: Vec<_> = std::fs::read_dir(d.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

/// Every Prometheus sample name plumb can expose, from the one metric list.
fn exposed_names() -> std::collections::BTreeSet<String> {
    use plumb_analyze::openmetrics::{series_of, Scale};
    plumb_analyze::series::RULES
        .iter()
        .filter_map(|r| {
            let raw = if r.per_object {
                format!("{}.x.{}", r.family, r.raw)
            } else {
                format!("{}.{}", r.family, r.raw)
            };
            series_of(&raw, &Scale::default())
        })
        .map(|s| s.family.sample_name())
        .collect()
}

#[test]
fn the_shipped_rules_and_scrape_config_pass_promtool_and_name_real_metrics() {
    let _group = common::beside();
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/prometheus");
    let rules = std::fs::read_to_string(dir.join("plumb.rules.yml")).unwrap();
    // The rules use names plumb exposes (a renamed metric would silence an alert).
    let names = exposed_names();
    let mut used = 0;
    for w in rules.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':')) {
        if w.starts_with("plumb_") {
            assert!(
                names.contains(w),
                "{w} in plumb.rules.yml is not a metric plumb exposes"
            );
            used += 1;
        }
    }
    assert!(used >= 6, "{used}");
    if prometheus_missing() {
        return;
    }
    for args in [
        vec!["check", "config", "prometheus.yml"],
        vec!["test", "rules", "plumb.rules.test.yml"],
    ] {
        let o = Command::new("promtool")
            .args(&args)
            .current_dir(&dir)
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "promtool {args:?}: {}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
    }
}

/// Threads of process `pid`.
fn threads(pid: u32) -> usize {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

/// A client connected with a 4 KiB receive buffer.
fn tiny_window(port: u16) -> TcpStream {
    use std::os::fd::FromRawFd;
    // SAFETY: a new socket, owned by the TcpStream made from it; the option and the address
    // are plain values that live across each call.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0);
        assert!(fd >= 0);
        let size: libc::c_int = 4096;
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            &size as *const _ as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as u32,
        );
        let sa = libc::sockaddr_in {
            sin_family: libc::AF_INET as u16,
            sin_port: port.to_be(),
            sin_addr: libc::in_addr {
                s_addr: u32::from_be_bytes([127, 0, 0, 1]).to_be(),
            },
            sin_zero: [0; 8],
        };
        let r = libc::connect(
            fd,
            &sa as *const _ as *const libc::sockaddr,
            std::mem::size_of::<libc::sockaddr_in>() as u32,
        );
        assert_eq!(r, 0, "{}", std::io::Error::last_os_error());
        TcpStream::from_raw_fd(fd)
    }
}

#[test]
fn no_client_holds_the_endpoint_or_the_shutdown() {
    let _group = common::beside();
    let port = free_port();
    let mut rec = plumb()
        .args(["record", "--serve"])
        .arg(port.to_string())
        .args(["--interval", "1s", "--duration", "5m"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    while get(port, "/metrics").map(|r| r.0) != Some(200) {
        assert!(t0.elapsed() < Duration::from_secs(10), "no /metrics");
        std::thread::sleep(Duration::from_millis(100));
    }
    // A client that pipelines 2,000 scrapes through a tiny window and never reads.
    let mut greedy = tiny_window(port);
    greedy
        .set_write_timeout(Some(Duration::from_secs(2)))
        .unwrap();
    let one = b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";
    for _ in 0..2000 {
        if greedy.write_all(one).is_err() {
            break;
        }
    }
    // Every other scraper is answered at once: the greedy one got one answer and was closed.
    let t0 = Instant::now();
    let first = get(port, "/metrics");
    assert_eq!(
        first.map(|r| r.0),
        Some(200),
        "a scrape beside a client that does not read"
    );
    assert!(t0.elapsed() < Duration::from_secs(3), "{:?}", t0.elapsed());
    // 500 that connect and say nothing take a bounded number of threads ...
    let silent: Vec<TcpStream> = (0..500)
        .filter_map(|_| TcpStream::connect(("127.0.0.1", port)).ok())
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    let n = threads(rec.id());
    assert!(n < 40, "plumb runs {n} threads for 501 clients");
    // ... and are closed after the deadline, still connected, so a scraper is answered again.
    let t0 = Instant::now();
    let answered = loop {
        match get(port, "/metrics") {
            Some((200, b)) if b.contains("plumb_mem_total_bytes") => break true,
            _ if t0.elapsed() > Duration::from_secs(20) => break false,
            _ => std::thread::sleep(Duration::from_millis(200)),
        }
    };
    assert!(
        answered,
        "no scrape answered while 500 clients said nothing"
    );
    // SIGTERM ends plumb while the greedy client is still connected.
    unsafe { libc::kill(rec.id() as i32, libc::SIGTERM) };
    let t0 = Instant::now();
    let ended = loop {
        if rec.try_wait().unwrap().is_some() {
            break true;
        }
        if t0.elapsed() > Duration::from_secs(5) {
            break false;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    if !ended {
        let _ = rec.kill();
        let _ = rec.wait();
    }
    drop((greedy, silent));
    assert!(ended, "SIGTERM did not end plumb record --serve within 5 s");
}

/// The value of `name`'s one series on plumb's /metrics now, if it is there.
fn metric_now(port: u16, name: &str) -> Option<f64> {
    let (_, body) = get(port, "/metrics")?;
    body.lines()
        .find(|l| l.starts_with(name) && l[name.len()..].starts_with(['{', ' ']))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

/// Poll /metrics until `name` is `want` (within `within`); how long it took.
fn until(port: u16, name: &str, want: f64, within: Duration) -> Duration {
    let t0 = Instant::now();
    loop {
        if metric_now(port, name) == Some(want) {
            return t0.elapsed();
        }
        assert!(
            t0.elapsed() < within,
            "{name} was not {want} within {within:?}: {:?}",
            get(port, "/metrics").map(|r| r.1)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Wait (at most 20 s) until Prometheus's latest plumb_engine_up is `want`.
fn prom_until(prom: &Prometheus, want: f64) {
    let t0 = Instant::now();
    while prom
        .query("plumb_engine_up", None)
        .first()
        .map(|v| num(&v["value"][1]))
        != Some(want)
    {
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "Prometheus never scraped plumb_engine_up {want}"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

#[test]
fn the_shipped_dashboard_is_what_its_generator_writes() {
    let _group = common::beside();
    let o = Command::new("python3")
        .arg("examples/grafana/make_dashboard.py")
        .output()
        .unwrap();
    assert!(o.status.success());
    let made: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let shipped: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string("examples/grafana/plumb-dashboard.json").unwrap(),
    )
    .unwrap();
    assert_eq!(
        made, shipped,
        "run examples/grafana/make_dashboard.py > examples/grafana/plumb-dashboard.json"
    );
    // Every field is in Grafana's dashboard schema (grafana-foundation-sdk's model of it), and
    // the check would see one that is not.
    let py = Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv-test/bin/python");
    let has_sdk = Command::new(&py)
        .args(["-c", "import grafana_foundation_sdk"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !has_sdk {
        skip("skipped the schema check: no .venv-test with grafana-foundation-sdk (scripts/setup --test makes it)");
        return;
    }
    let check = |file: &Path| {
        Command::new(&py)
            .arg("examples/grafana/check_schema.py")
            .arg(file)
            .output()
            .unwrap()
    };
    let o = check(Path::new("examples/grafana/plumb-dashboard.json"));
    assert!(
        o.status.success(),
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    let mut bad = shipped.clone();
    bad["panels"][0]["gridPosition"] = serde_json::json!({"x": 0});
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("bad.json");
    std::fs::write(&f, serde_json::to_vec(&bad).unwrap()).unwrap();
    let o = check(&f);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("$.panels[0].gridPosition: not in the schema"),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
}

#[test]
fn the_engine_goes_and_comes_back_through_a_restart() {
    let _group = common::beside();
    if prometheus_missing() {
        return;
    }
    if let Some(why) = common::no_postgres() {
        skip(format!("skipped: {why}"));
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let tmp = common::server_tempdir("plumb-prom-pg");
    let pg = common::Private::start(&tmp.path().join("pg"), &[]);
    let rec_path = d.path().join("restart.plumb");
    let plumb_port = free_port();
    let rec = plumb()
        .args(["record", "--serve"])
        .arg(format!("127.0.0.1:{plumb_port}"))
        .arg("--out")
        .arg(&rec_path)
        .args(["--interval", "1s", "--duration", "40s", "--engine"])
        .arg(pg.url())
        // The server's tree too: after the restart, the new server's.
        .arg("--pid")
        .arg(pg.pid().to_string())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let prom = Prometheus::start(
        d.path(),
        &d.path().join("data"),
        &format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 900ms\nscrape_configs:\n  - job_name: plumb\n    static_configs:\n      - targets: ['127.0.0.1:{plumb_port}']\n"
        ),
    );
    until(plumb_port, "plumb_engine_up", 1.0, Duration::from_secs(15));
    assert!(metric_now(plumb_port, "plumb_build_info") == Some(1.0));
    // The server's tree is there, its processes' PIDs are not (no --serve-pids).
    let body = get(plumb_port, "/metrics").unwrap().1;
    assert!(body.contains("plumb_tree_pss_bytes{"), "{body}");
    assert!(!body.contains("pid=\""), "{body}");
    // Prometheus has scraped the engine up before it stops.
    prom_until(&prom, 1.0);
    // The server stops: the endpoint says so within seconds, and the host goes on.
    let stop = plumb()
        .args(["engine", "stop", "--dir", pg.dir_str()])
        .output()
        .unwrap();
    assert!(
        stop.status.success(),
        "{}",
        String::from_utf8_lossy(&stop.stderr)
    );
    until(plumb_port, "plumb_engine_up", 0.0, Duration::from_secs(10));
    assert!(metric_now(plumb_port, "plumb_mem_total_bytes").is_some());
    prom_until(&prom, 0.0);
    // Started again (same directory, same port): read again within 10 s, its series back.
    let start = plumb()
        .args(["engine", "start", "--dir", pg.dir_str()])
        .output()
        .unwrap();
    assert!(
        start.status.success(),
        "{}",
        String::from_utf8_lossy(&start.stderr)
    );
    let back = until(plumb_port, "plumb_engine_up", 1.0, Duration::from_secs(10));
    eprintln!("read again {back:?} after the server started");
    let t0 = Instant::now();
    while metric_now(plumb_port, "plumb_engine_db_commits_total").is_none() {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "no engine series after the restart"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    // The engine's series say which server and database they come from, never the login.
    let (_, body) = get(plumb_port, "/metrics").unwrap();
    let commits = body
        .lines()
        .find(|l| l.starts_with("plumb_engine_db_commits_total{"))
        .unwrap();
    assert!(
        commits.contains("server=\"") && commits.contains("database=\"postgres\""),
        "{commits}"
    );
    let wal = body
        .lines()
        .find(|l| l.starts_with("plumb_engine_wal_"))
        .unwrap();
    assert!(
        wal.contains("server=\"") && !wal.contains("database="),
        "{wal}"
    );
    assert!(
        !body.contains("user=") && !body.contains('@'),
        "a login in a label"
    );
    // promtool's linter passes the page with the engine's families in it (Prometheus's text
    // format, as a scrape without an Accept header gets it).
    let mut lint = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    lint.stdin
        .take()
        .unwrap()
        .write_all(body.as_bytes())
        .unwrap();
    let o = lint.wait_with_output().unwrap();
    assert!(
        o.status.success() && o.stdout.is_empty() && o.stderr.is_empty(),
        "promtool check metrics: {}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    // The recorder's marks are counted by kind: the engine went away and came back.
    let engine_marks = || -> f64 {
        get(plumb_port, "/metrics")
            .and_then(|(_, b)| {
                b.lines()
                    .find(|l| {
                        l.starts_with("plumb_recorder_marks_total{")
                            && l.contains("kind=\"engine\"")
                    })
                    .and_then(|l| l.rsplit(' ').next()?.parse().ok())
            })
            .unwrap_or(0.0)
    };
    let t0 = Instant::now();
    while engine_marks() < 2.0 {
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "engine marks: {}",
            engine_marks()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    // Prometheus saw 1, then 0, then 1.
    std::thread::sleep(Duration::from_secs(3));
    let up = prom.query("plumb_engine_up[2m]", None);
    assert_eq!(up.len(), 1, "{up:?}");
    let mut seen: Vec<f64> = up[0]["values"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| num(&p[1]))
        .collect();
    seen.dedup();
    assert_eq!(seen, vec![1.0, 0.0, 1.0], "plumb_engine_up as scraped");
    // The dashboard's annotations find the restart.
    let dash: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string("examples/grafana/plumb-dashboard.json").unwrap(),
    )
    .unwrap();
    for a in dash["annotations"]["list"].as_array().unwrap() {
        if let Some(q) = a["expr"].as_str() {
            let q = q.replace("$host", ".*").replace("[1m]", "[2m]");
            assert!(
                !prom
                    .query(&format!("max_over_time(({q})[2m:1s])"), None)
                    .is_empty(),
                "{q}"
            );
        }
    }
    // Every panel of the shipped dashboard has data in this Prometheus.
    let dash: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string("examples/grafana/plumb-dashboard.json").unwrap(),
    )
    .unwrap();
    let panels = dash["panels"].as_array().unwrap();
    assert!(panels.len() >= 10);
    for p in panels {
        for t in p["targets"].as_array().unwrap() {
            let q = t["expr"].as_str().unwrap().replace("$host", ".*");
            assert!(
                !prom.query(&q, None).is_empty(),
                "the panel {} has no data: {q}",
                p["title"]
            );
        }
    }
    let out = rec.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The recording went on through the gap, marked, with no sample lost either side.
    let r = plumb_store::read(&rec_path).unwrap();
    let names: Vec<&str> = r.marks.iter().map(|m| m.name.as_str()).collect();
    let gone = names.iter().position(|n| *n == "engine unreachable");
    let back = names.iter().position(|n| *n == "engine back");
    assert!(gone.is_some() && back > gone, "{names:?}");
    let gaps = r.times_ms.windows(2).map(|w| w[1] - w[0]).max().unwrap();
    assert!(gaps < 1600, "a sample went missing: {gaps} ms between two");
    let mut ups = raw_values(&r, "engine.up");
    ups.dedup();
    assert_eq!(ups, vec![1, 0, 1]);
    // The new server's processes are followed from its return on.
    let new = pg.status()["instance"]["pid"].as_u64().unwrap() as u32;
    assert_ne!(new, pg.pid());
    assert!(
        names.contains(&format!("engine server now PID {new}").as_str()),
        "{names:?}"
    );
    assert!(
        r.metrics
            .iter()
            .any(|m| m.name.starts_with(&format!("tree.{new}."))),
        "no series of the new server's tree"
    );
}
