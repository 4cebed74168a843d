//! plumb's SQL Server connection through the real driver (tiberius) against a stand-in server
//! that answers in TDS as the protocol documentation ([MS-TDS]) describes: pre-login without
//! encryption, a login acknowledgement (or a login error, or a routing redirect), and SQL
//! batches answered with column metadata and rows, with column metadata and no rows, or with
//! a server error. No SQL Server runs here; this is as far as the transport can be exercised
//! without one. What the stand-in answers comes from the documentation of each DMV, not from a
//! captured server.

mod common;

use common::plumb;
use plumb_engine::mssql::{MssqlConn, MssqlObserver};
use plumb_engine::{Observer, Target};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};

/// A value in a row the stand-in sends.
#[derive(Clone)]
enum V {
    Int(i64),
    Text(&'static str),
    Null,
}

/// The stand-in's answer to a batch.
#[derive(Clone)]
enum Answer {
    /// Columns (all bigint or nvarchar, by the first row's values or `text` for no rows)
    /// and rows.
    Rows(Vec<(&'static str, bool)>, Vec<Vec<V>>),
    /// A server error: number and message.
    Error(u32, &'static str),
    /// A statement without a result (SET …).
    Done,
    /// Whatever this writes (a hostile server's answer).
    Raw(fn(&mut TcpStream)),
    /// No answer at all.
    Silent,
}

/// What the stand-in does after the login.
#[derive(Clone)]
enum Login {
    Ok,
    Fail(&'static str),
    /// A routing redirect to this port on 127.0.0.1 (0: to the stand-in itself).
    RouteTo(u16),
    /// Accepts the connection and never answers.
    Silent,
}

struct StandIn {
    port: u16,
    /// Every batch received, in order.
    batches: Arc<Mutex<Vec<String>>>,
}

fn start(login: Login, answer: fn(&str) -> Answer) -> StandIn {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let batches = Arc::new(Mutex::new(Vec::new()));
    let seen = batches.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(conn) = conn else { return };
            let (login, seen) = (login.clone(), seen.clone());
            let login = match login {
                Login::RouteTo(0) => Login::RouteTo(port),
                other => other,
            };
            std::thread::spawn(move || serve(conn, login, answer, seen));
        }
    });
    StandIn { port, batches }
}

/// One message from the client: its packet type and payload (packets joined up to the one
/// marked end of message).
fn read_message(c: &mut TcpStream) -> Option<(u8, Vec<u8>)> {
    let mut payload = Vec::new();
    loop {
        let mut h = [0u8; 8];
        c.read_exact(&mut h).ok()?;
        let len = u16::from_be_bytes([h[2], h[3]]) as usize;
        let mut body = vec![0u8; len - 8];
        c.read_exact(&mut body).ok()?;
        payload.extend(body);
        if h[1] & 1 == 1 {
            return Some((h[0], payload));
        }
    }
}

/// A tabular result (packet type 4) in one packet.
fn send(c: &mut TcpStream, payload: &[u8]) {
    assert!(payload.len() + 8 <= 4096, "the stand-in sends one packet");
    let mut p = vec![4u8, 1];
    p.extend(((payload.len() + 8) as u16).to_be_bytes());
    p.extend([0, 0, 1, 0]);
    p.extend(payload);
    c.write_all(&p).unwrap();
}

fn utf16(s: &str) -> Vec<u8> {
    s.encode_utf16().flat_map(|u| u.to_le_bytes()).collect()
}

fn b_varchar(s: &str) -> Vec<u8> {
    let mut v = vec![s.encode_utf16().count() as u8];
    v.extend(utf16(s));
    v
}

fn us_varchar(s: &str) -> Vec<u8> {
    let mut v = (s.encode_utf16().count() as u16).to_le_bytes().to_vec();
    v.extend(utf16(s));
    v
}

/// DONE: status (0x10 a count follows, 0x02 an error), current command, row count.
fn done(status: u16, rows: u64) -> Vec<u8> {
    let mut v = vec![0xFD];
    v.extend(status.to_le_bytes());
    v.extend(0u16.to_le_bytes());
    v.extend(rows.to_le_bytes());
    v
}

/// A token with a 16-bit length before its body.
fn sized(token: u8, body: Vec<u8>) -> Vec<u8> {
    let mut v = vec![token];
    v.extend((body.len() as u16).to_le_bytes());
    v.extend(body);
    v
}

fn error(number: u32, message: &str, class: u8) -> Vec<u8> {
    let mut b = number.to_le_bytes().to_vec();
    b.extend([1, class]);
    b.extend(us_varchar(message));
    b.extend(b_varchar("standin"));
    b.extend(b_varchar(""));
    b.extend(1u32.to_le_bytes());
    sized(0xAA, b)
}

fn serve(
    mut c: TcpStream,
    login: Login,
    answer: fn(&str) -> Answer,
    seen: Arc<Mutex<Vec<String>>>,
) {
    if let Login::Silent = login {
        let _ = read_message(&mut c);
        std::thread::sleep(std::time::Duration::from_secs(600));
        return;
    }
    // Pre-login: version 16.0, encryption not supported (the client asked for none).
    let Some((0x12, _)) = read_message(&mut c) else {
        return;
    };
    let options: [(u8, Vec<u8>); 4] = [
        (0x00, vec![16, 0, 0x10, 0x27, 0, 0]),
        (0x01, vec![2]),
        (0x02, vec![0]),
        (0x04, vec![0]),
    ];
    let mut head = Vec::new();
    let mut data: Vec<u8> = Vec::new();
    let mut offset = options.len() * 5 + 1;
    for (token, value) in &options {
        head.push(*token);
        head.extend((offset as u16).to_be_bytes());
        head.extend((value.len() as u16).to_be_bytes());
        offset += value.len();
        data.extend(value);
    }
    head.push(0xFF);
    head.extend(data);
    send(&mut c, &head);
    // Login.
    let Some((0x10, _)) = read_message(&mut c) else {
        return;
    };
    let mut ack = vec![1u8];
    ack.extend(0x7400_0004u32.to_be_bytes());
    ack.extend(b_varchar("Microsoft SQL Server"));
    ack.extend([16, 0, 0x10, 0x27]);
    match login {
        Login::Fail(m) => {
            let mut r = error(18456, m, 14);
            r.extend(done(0x02, 0));
            send(&mut c, &r);
            return;
        }
        Login::RouteTo(port) => {
            let mut r = sized(0xAD, ack);
            // ENVCHANGE 20 (routing): value length, protocol 0 (TCP), port, server name.
            let mut value = vec![0u8];
            value.extend(port.to_le_bytes());
            value.extend(us_varchar("127.0.0.1"));
            let mut body = vec![20u8];
            body.extend((value.len() as u16).to_le_bytes());
            body.extend(value);
            body.extend(0u16.to_le_bytes());
            r.extend(sized(0xE3, body));
            r.extend(done(0, 0));
            send(&mut c, &r);
            return;
        }
        Login::Silent => unreachable!(),
        Login::Ok => {
            let mut r = sized(0xAD, ack);
            r.extend(done(0, 0));
            send(&mut c, &r);
        }
    }
    // Batches: ALL_HEADERS (its length first), then the statement in UTF-16.
    while let Some((ty, p)) = read_message(&mut c) {
        if ty != 1 {
            return;
        }
        let skip = u32::from_le_bytes([p[0], p[1], p[2], p[3]]) as usize;
        let units: Vec<u16> = p[skip..]
            .chunks(2)
            .map(|b| u16::from_le_bytes([b[0], b[1]]))
            .collect();
        let sql = String::from_utf16_lossy(&units);
        seen.lock().unwrap().push(sql.clone());
        let out = match answer(&sql) {
            Answer::Raw(write) => {
                write(&mut c);
                continue;
            }
            Answer::Silent => {
                std::thread::sleep(std::time::Duration::from_secs(600));
                return;
            }
            Answer::Done => done(0, 0),
            Answer::Error(n, m) => {
                let mut r = error(n, m, 16);
                r.extend(done(0x02, 0));
                r
            }
            Answer::Rows(cols, rows) => {
                // COLMETADATA: per column user type, flags (nullable), type, name.
                let mut r = vec![0x81];
                r.extend((cols.len() as u16).to_le_bytes());
                for (name, text) in &cols {
                    r.extend(0u32.to_le_bytes());
                    r.extend(1u16.to_le_bytes());
                    if *text {
                        // NVARCHAR(4000): max length in bytes, collation.
                        r.push(0xE7);
                        r.extend(8000u16.to_le_bytes());
                        r.extend([0x09, 0x04, 0xD0, 0x00, 0x34]);
                    } else {
                        // INTN of 8 bytes: bigint.
                        r.extend([0x26, 8]);
                    }
                    r.extend(b_varchar(name));
                }
                for row in &rows {
                    r.push(0xD1);
                    for (k, v) in row.iter().enumerate() {
                        match v {
                            V::Int(i) => {
                                r.push(8);
                                r.extend(i.to_le_bytes());
                            }
                            V::Text(t) => {
                                let b = utf16(t);
                                r.extend((b.len() as u16).to_le_bytes());
                                r.extend(b);
                            }
                            V::Null => {
                                if cols[k].1 {
                                    r.extend(0xFFFFu16.to_le_bytes());
                                } else {
                                    r.push(0);
                                }
                            }
                        }
                    }
                }
                r.extend(done(0x10, rows.len() as u64));
                r
            }
        };
        send(&mut c, &out);
    }
}

fn url(port: u16) -> Target {
    // The connection runs in a plumb process of its own.
    plumb_engine::mssql::use_client_program(std::path::Path::new(env!("CARGO_BIN_EXE_plumb")));
    Target::new(&format!(
        "mssql://plumb:Secret1@127.0.0.1:{port}/master?encrypt=not_supported"
    ))
}

/// A SQL Server 2022 whose login may read some views: the version, the waiting tasks (none
/// now: an empty set), the file statistics (names hidden); the wait statistics are refused,
/// and the rest do not exist on this stand-in.
fn server_2022(sql: &str) -> Answer {
    use V::*;
    let t = |n: &'static str| (n, true);
    let i = |n: &'static str| (n, false);
    if sql.contains("@@SPID") {
        Answer::Rows(vec![i("spid")], vec![vec![Int(57)]])
    } else if sql.starts_with("SET ") {
        Answer::Done
    } else if sql.contains("SERVERPROPERTY('ProductMajorVersion')") {
        Answer::Rows(
            vec![
                i("major_version"),
                t("product_version"),
                t("version"),
                i("engine_edition"),
            ],
            vec![vec![
                Int(16),
                Text("16.0.4135.4"),
                Text("Microsoft SQL Server 2022 (RTM-CU15) - 16.0.4135.4 (X64)"),
                Int(3),
            ]],
        )
    } else if sql.contains("sys.all_columns") {
        Answer::Rows(vec![i("n")], vec![vec![Int(1)]])
    } else if sql.contains("sys.dm_os_waiting_tasks") {
        Answer::Rows(
            vec![
                i("session_id"),
                t("wait_type"),
                i("wait_duration_ms"),
                i("blocking_session_id"),
            ],
            vec![],
        )
    } else if sql.contains("sys.dm_os_wait_stats") {
        Answer::Error(
            300,
            "VIEW SERVER PERFORMANCE STATE permission was denied on object 'server', database 'master'.",
        )
    } else if sql.contains("sys.dm_io_virtual_file_stats") {
        let cols = [
            i("database_id"),
            i("file_id"),
            t("database_name"),
            t("logical_name"),
            t("physical_name"),
            t("type_desc"),
            i("num_of_reads"),
            i("num_of_bytes_read"),
            i("io_stall_read_ms"),
            i("num_of_writes"),
            i("num_of_bytes_written"),
            i("io_stall_write_ms"),
            i("io_stall_queued_read_ms"),
            i("io_stall_queued_write_ms"),
            i("size_on_disk_bytes"),
        ];
        let mut row = vec![Int(5), Int(1), Text("sales"), Null, Null, Null];
        row.extend([500, 4096000, 900, 10, 81920, 30, 0, 0, 8388608].map(Int));
        Answer::Rows(cols.to_vec(), vec![row])
    } else {
        Answer::Error(208, "Invalid object name 'this stand-in has no such view'.")
    }
}

#[test]
fn an_observer_reads_what_the_login_may_read_through_tds() {
    let s = start(Login::Ok, server_2022);
    let mut obs = MssqlObserver::connect(&url(s.port)).expect("connects to the stand-in");
    let snap = obs.snapshot().expect("a snapshot despite refusals");
    assert_eq!(snap.version, "16.0.4135.4");
    // An empty set comes with its columns from the result's metadata: no tasks wait, which is
    // a figure, not an error.
    assert_eq!(snap.gauges["waiting_tasks.tasks"], 0.0);
    assert_eq!(snap.gauges["waiting_tasks.blocked"], 0.0);
    // A file whose name the login may not see keeps its figures.
    assert_eq!(
        snap.objects["file"]["sales/file 1 (name not visible)"]["read_bytes"],
        4096000.0
    );
    let said = snap.unavailable.join("\n");
    // The refusal in the server's words, with the 2022 permission.
    assert!(
        said.contains("waits (sys.dm_os_wait_stats)")
            && said.contains("VIEW SERVER PERFORMANCE STATE permission was denied")
            && said.contains("the login needs VIEW SERVER PERFORMANCE STATE"),
        "{said}"
    );
    // Other failures say what the server said, not a guess about permissions.
    assert!(
        said.contains("latches (sys.dm_os_latch_stats)")
            && said.contains("Invalid object name")
            && !said.contains("Invalid object name 'this stand-in has no such view'.; the login"),
        "{said}"
    );
    assert!(!said.contains("Secret1"));
    // The server's words, without the driver's wrapping.
    assert!(
        said.contains("Invalid object name 'this stand-in has no such view'. (error 208)")
            && !said.contains("Token error"),
        "{said}"
    );
    // The workload session's own sets are read once the observer knows the session.
    obs.set_workload_session(Some(61));
    let _ = obs.snapshot().unwrap();
    let batches = s.batches.lock().unwrap();
    assert!(
        batches
            .iter()
            .any(|b| b.contains("sys.dm_exec_session_wait_stats WHERE session_id = 61")),
        "{batches:?}"
    );
}

#[test]
fn a_redirect_is_followed_to_the_server_it_names() {
    let target = start(Login::Ok, server_2022);
    let gateway = start(Login::RouteTo(target.port), server_2022);
    let conn = MssqlConn::connect(&url(gateway.port)).expect("follows the redirect");
    assert_eq!(conn.session_id, 57);
    assert_eq!(
        conn.redirected_to(),
        Some(format!("127.0.0.1:{}", target.port).as_str())
    );
    assert!(gateway.batches.lock().unwrap().is_empty());
    assert!(!target.batches.lock().unwrap().is_empty());
}

#[test]
fn a_redirect_loop_ends_with_a_clear_error() {
    // A server that sends the client back to itself: plumb gives up rather than loop.
    let lp = start(Login::RouteTo(0), server_2022);
    let e = MssqlConn::connect(&url(lp.port)).unwrap_err().to_string();
    assert!(e.contains("mssql://plumb:***@127.0.0.1"), "{e}");
    assert!(e.contains("redirected more than 3 times"), "{e}");
}

#[test]
fn a_refused_login_is_said_in_the_servers_words() {
    let s = start(Login::Fail("Login failed for user 'plumb'."), server_2022);
    let e = MssqlConn::connect(&url(s.port)).unwrap_err().to_string();
    assert!(e.contains("Login failed for user 'plumb'."), "{e}");
    assert!(
        e.contains("mssql://plumb:***@") && !e.contains("Secret1"),
        "{e}"
    );
}

#[test]
fn a_server_older_than_2016_is_refused_by_name() {
    fn server_2014(sql: &str) -> Answer {
        if sql.contains("SERVERPROPERTY('ProductMajorVersion')") {
            Answer::Rows(
                vec![
                    ("major_version", false),
                    ("product_version", true),
                    ("version", true),
                    ("engine_edition", false),
                ],
                vec![vec![
                    V::Int(12),
                    V::Text("12.0.6444.4"),
                    V::Text("Microsoft SQL Server 2014 (SP3-CU4)"),
                    V::Int(3),
                ]],
            )
        } else {
            server_2022(sql)
        }
    }
    let s = start(Login::Ok, server_2014);
    let e = MssqlObserver::connect(&url(s.port))
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("12.0.6444.4") && e.contains("2016"), "{e}");
}

/// `plumb delta` against the stand-in: the workload's statement runs in its own session while
/// a second one reads the workload session's waits and CPU before and after, and samples the
/// run queue and memory grants during the run; the report has them beside the server's.
#[test]
fn a_delta_reads_the_sessions_waits_and_samples_the_run_queue() {
    static SAMPLE: AtomicI64 = AtomicI64::new(0);
    static SNAPSHOT: AtomicI64 = AtomicI64::new(0);
    fn server(sql: &str) -> Answer {
        use V::*;
        let i = |n: &'static str| (n, false);
        let t = |n: &'static str| (n, true);
        let waits = [
            t("wait_type"),
            i("waiting_tasks_count"),
            i("wait_time_ms"),
            i("max_wait_time_ms"),
            i("signal_wait_time_ms"),
        ];
        if sql.contains("WAITFOR DELAY") {
            // The workload: half a second of work.
            std::thread::sleep(std::time::Duration::from_millis(500));
            Answer::Done
        } else if sql.contains("sys.dm_exec_session_wait_stats") {
            // Before and after of the workload's session: 30 s more of CXPACKET.
            let k = SNAPSHOT.fetch_add(1, Ordering::SeqCst);
            Answer::Rows(
                waits.to_vec(),
                vec![vec![
                    Text("CXPACKET"),
                    Int(10 + k * 100),
                    Int(1000 + k * 30000),
                    Int(5),
                    Int(10),
                ]],
            )
        } else if sql.contains("sys.dm_os_wait_stats") {
            let k = SNAPSHOT.load(Ordering::SeqCst);
            Answer::Rows(
                waits.to_vec(),
                vec![vec![
                    Text("CXPACKET"),
                    Int(10 + k * 200),
                    Int(5000 + k * 40000),
                    Int(5),
                    Int(10),
                ]],
            )
        } else if sql.contains("sys.dm_exec_sessions") {
            let k = SNAPSHOT.load(Ordering::SeqCst);
            Answer::Rows(
                vec![
                    i("cpu_time"),
                    i("total_scheduled_time"),
                    i("total_elapsed_time"),
                    i("reads"),
                    i("writes"),
                    i("logical_reads"),
                    i("row_count"),
                ],
                vec![vec![
                    Int(100 + k * 450),
                    Int(0),
                    Int(0),
                    Int(0),
                    Int(0),
                    Int(0),
                    Int(0),
                ]],
            )
        } else if sql.contains("sys.dm_exec_query_memory_grants") {
            // The run queue rises and falls during the run; a 64 MiB grant is held.
            let k = SAMPLE.fetch_add(1, Ordering::SeqCst);
            Answer::Rows(
                vec![
                    i("runnable_tasks"),
                    i("current_tasks"),
                    i("grants_waiting"),
                    i("granted_kb"),
                    i("grant_used_kb"),
                ],
                vec![vec![
                    Int(if k % 2 == 0 { 4 } else { 2 }),
                    Int(6),
                    Int(0),
                    Int(65536),
                    Int(32768),
                ]],
            )
        } else {
            server_2022(sql)
        }
    }
    let s = start(Login::Ok, server);
    let o = plumb()
        .args(["delta", "--engine"])
        .arg(format!(
            "mssql://plumb@127.0.0.1:{}/master?encrypt=not_supported",
            s.port
        ))
        .args(["--sql", "WAITFOR DELAY '00:00:00.5'", "--json"])
        .env("MSSQL_PASSWORD", "Secret1")
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{out}\n{err}");
    assert!(!out.contains("Secret1") && !err.contains("Secret1"));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let row = |g: &str, o: &str, m: &str| {
        v["rows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["group"] == g && r["object"] == o && r["metric"] == m)
            .map(|r| r["stats"][0]["median"].as_f64().unwrap())
            .unwrap_or_else(|| panic!("{g}/{o}/{m} missing: {out}"))
    };
    // The session's own CXPACKET beside the server's, and its CPU.
    assert_eq!(row("session_wait", "CXPACKET", "wait_ms"), 30000.0);
    assert_eq!(
        row("session_wait", "CXPACKET", "server_wide_wait_ms"),
        40000.0
    );
    assert_eq!(row("session", "", "cpu_ms"), 450.0);
    // Sampled during the half-second run (every 20 ms): the run queue peaked at 4, the grant held.
    assert_eq!(row("sampled", "", "runnable_tasks peak"), 4.0);
    let mean = row("sampled", "", "runnable_tasks mean");
    assert!(mean > 2.0 && mean < 4.0, "{mean}");
    assert_eq!(
        row("sampled", "", "granted_workspace_bytes peak"),
        64.0 * 1024.0 * 1024.0
    );
    assert!(
        SAMPLE.load(Ordering::SeqCst) >= 10,
        "samples taken: {}",
        SAMPLE.load(Ordering::SeqCst)
    );
    // What the stand-in refused is said with the server's words.
    let said = v["unavailable"].to_string();
    assert!(said.contains("Invalid object name"), "{said}");
}

/// An Availability Group's primary: two secondary databases (documented columns of
/// sys.dm_hadr_database_replica_states; queues in KB), the synchronous one dropping out of
/// SYNCHRONIZED after a few readings.
#[test]
fn an_availability_group_is_watched_through_tds() {
    static READS: AtomicI64 = AtomicI64::new(0);
    fn ag(sql: &str) -> Answer {
        use V::*;
        let t = |n: &'static str| (n, true);
        let i = |n: &'static str| (n, false);
        if !sql.contains("sys.dm_hadr_database_replica_states") {
            return server_2022(sql);
        }
        let k = READS.fetch_add(1, Ordering::SeqCst);
        let state = if k < 6 {
            "SYNCHRONIZED"
        } else {
            "NOT SYNCHRONIZING"
        };
        Answer::Rows(
            vec![
                t("database_name"),
                t("replica_server_name"),
                t("availability_mode_desc"),
                i("is_local"),
                i("is_primary_replica"),
                t("synchronization_state_desc"),
                t("synchronization_health_desc"),
                i("log_send_queue_size"),
                i("log_send_rate"),
                i("redo_queue_size"),
                i("redo_rate"),
                i("secondary_lag_seconds"),
            ],
            vec![
                vec![
                    Text("sales"),
                    Text("sql1"),
                    Text("SYNCHRONOUS_COMMIT"),
                    Int(1),
                    Int(1),
                    Text("SYNCHRONIZED"),
                    Text("HEALTHY"),
                    Null,
                    Null,
                    Null,
                    Null,
                    Null,
                ],
                vec![
                    Text("sales"),
                    Text("sql2"),
                    Text("SYNCHRONOUS_COMMIT"),
                    Int(0),
                    Int(0),
                    Text(state),
                    Text("HEALTHY"),
                    Int(2048),
                    Int(51200),
                    Int(512),
                    Int(40960),
                    Int(0),
                ],
                vec![
                    Text("sales"),
                    Text("sql3"),
                    Text("ASYNCHRONOUS_COMMIT"),
                    Int(0),
                    Int(0),
                    Text("SYNCHRONIZING"),
                    Text("HEALTHY"),
                    Int(81920),
                    Int(10240),
                    Int(4096),
                    Int(8192),
                    Int(12),
                ],
            ],
        )
    }
    let s = start(Login::Ok, ag);
    let o = plumb()
        .args(["repl", "watch", "--primary"])
        .arg(format!(
            "mssql://plumb@127.0.0.1:{}/master?encrypt=not_supported",
            s.port
        ))
        .args(["--duration", "2s", "--json"])
        .env("MSSQL_PASSWORD", "Secret1")
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(!out.contains("Secret1"));
    let lines: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(lines.len() >= 2, "{out}");
    let first = &lines[0];
    assert_eq!(first["kind"], "repl_watch_hadr");
    let sql2 = first["replicas"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["server"] == "sql2")
        .unwrap();
    // KB as SQL Server gives them, made bytes.
    assert_eq!(sql2["send_queue_bytes"].as_f64().unwrap(), 2048.0 * 1024.0);
    assert_eq!(
        sql2["redo_rate_bytes_per_s"].as_f64().unwrap(),
        40960.0 * 1024.0
    );
    // The synchronous secondary's fall out of SYNCHRONIZED is said once, when it happens.
    let changes: Vec<String> = lines
        .iter()
        .flat_map(|l| {
            l["changes"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| c.as_str().unwrap().to_string())
        })
        .collect();
    assert_eq!(
        changes,
        ["sql2/sales: SYNCHRONIZED → NOT SYNCHRONIZING"],
        "{out}"
    );
    // A server without Availability Group databases is refused by name.
    fn none(sql: &str) -> Answer {
        if sql.contains("sys.dm_hadr_database_replica_states") {
            // The documented columns, no rows.
            let cols = [
                ("database_name", true),
                ("replica_server_name", true),
                ("availability_mode_desc", true),
                ("is_local", false),
                ("is_primary_replica", false),
                ("synchronization_state_desc", true),
                ("synchronization_health_desc", true),
                ("log_send_queue_size", false),
                ("log_send_rate", false),
                ("redo_queue_size", false),
                ("redo_rate", false),
                ("secondary_lag_seconds", false),
            ];
            Answer::Rows(cols.to_vec(), vec![])
        } else {
            server_2022(sql)
        }
    }
    let s = start(Login::Ok, none);
    let o = plumb()
        .args(["repl", "watch", "--primary"])
        .arg(format!(
            "mssql://plumb@127.0.0.1:{}/master?encrypt=not_supported",
            s.port
        ))
        .args(["--duration", "1s"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("no Availability Group databases"), "{err}");
}

/// `plumb fs` on SQL Server, through the stand-in: the DMVs it lists become files by family,
/// dm_io_virtual_file_stats (a function dbfs could not show) among them, the seed's pipelines
/// work on them, a view the login may not read says so in its file, and a query file runs in a
/// transaction that is rolled back. Needs root and /dev/fuse (the mount).
#[test]
fn dmvs_as_files_through_tds() {
    if !common::needs(
        &[common::Need::Root, common::Need::Fuse],
        "plumb fs is tested as root with /dev/fuse",
    ) {
        return;
    }
    fn server(sql: &str) -> Answer {
        use V::*;
        let t = |n: &'static str| (n, true);
        let i = |n: &'static str| (n, false);
        if sql.contains("sys.system_views") {
            Answer::Rows(
                vec![t("name")],
                [
                    "dm_exec_connections",
                    "dm_os_schedulers",
                    "dm_os_wait_stats",
                ]
                .iter()
                .map(|n| vec![Text(n)])
                .collect(),
            )
        } else if sql.contains("ProductVersion') AS nvarchar(128)) AS v") {
            Answer::Rows(vec![t("v")], vec![vec![Text("16.0.4135.4")]])
        } else if sql.contains("FROM sys.dm_exec_connections") {
            Answer::Rows(
                vec![
                    i("session_id"),
                    t("connect_time"),
                    t("net_transport"),
                    t("client_net_address"),
                ],
                vec![
                    vec![
                        Int(51),
                        Text("2017-06-19 09:29:36.340"),
                        Text("TCP"),
                        Text("127.0.0.1"),
                    ],
                    vec![
                        Int(52),
                        Text("2017-06-19 09:31:02.117"),
                        Text("Shared memory"),
                        Text("<local machine>"),
                    ],
                ],
            )
        } else if sql.contains("FROM sys.dm_os_schedulers") {
            Answer::Rows(
                vec![i("scheduler_id"), t("status"), i("runnable_tasks_count")],
                vec![
                    vec![Int(0), Text("VISIBLE ONLINE"), Int(0)],
                    vec![Int(1048576), Text("VISIBLE ONLINE (DAC)"), Int(0)],
                ],
            )
        } else if sql.contains("BEGIN TRANSACTION") && sql.contains("ROLLBACK") {
            Answer::Rows(vec![i("sessions")], vec![vec![Int(2)]])
        } else if sql.contains("SELECT 1 AS one") {
            Answer::Rows(vec![i("one")], vec![vec![Int(1)]])
        } else {
            server_2022(sql)
        }
    }
    let s = start(Login::Ok, server);
    let tmp = tempfile::tempdir().unwrap();
    let m = tmp.path().join("mnt");
    let q = tmp.path().join("q");
    std::fs::create_dir(&m).unwrap();
    std::fs::create_dir(&q).unwrap();
    std::fs::set_permissions(&q, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    std::fs::write(
        q.join("sessions.sql"),
        "SELECT COUNT(*) AS sessions FROM sys.dm_exec_sessions",
    )
    .unwrap();
    std::fs::set_permissions(
        q.join("sessions.sql"),
        std::os::unix::fs::PermissionsExt::from_mode(0o600),
    )
    .unwrap();
    let o = plumb()
        .arg("fs")
        .arg(&m)
        .arg("--engine")
        .arg(format!(
            "mssql://plumb:Secret1@127.0.0.1:{}/master?encrypt=not_supported",
            s.port
        ))
        .arg("--queries")
        .arg(&q)
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let unmount = || {
        let _ = plumb().args(["fs", "--unmount"]).arg(&m).output();
    };
    let check = || {
        let read = |p: &str| std::fs::read_to_string(m.join(p)).unwrap();
        let conns = read("exec/dm_exec_connections");
        assert_eq!(
            conns,
            "session_id\tconnect_time\tnet_transport\tclient_net_address\n\
             51\t2017-06-19 09:29:36.340\tTCP\t127.0.0.1\n\
             52\t2017-06-19 09:31:02.117\tShared memory\t<local machine>\n"
        );
        // The seed's pipeline: tab-separated columns keep their dates whole.
        let o = std::process::Command::new("bash")
            .args([
                "-c",
                "awk -F'\\t' '{ print $2 }' exec/dm_exec_connections | tail -1",
            ])
            .current_dir(&m)
            .output()
            .unwrap();
        assert_eq!(
            String::from_utf8_lossy(&o.stdout),
            "2017-06-19 09:31:02.117\n"
        );
        let dac = std::process::Command::new("grep")
            .args(["DAC", "os/dm_os_schedulers"])
            .current_dir(&m)
            .output()
            .unwrap();
        assert_eq!(
            String::from_utf8_lossy(&dac.stdout),
            "1048576\tVISIBLE ONLINE (DAC)\t0\n"
        );
        let j: serde_json::Value = serde_json::from_str(
            read("exec/dm_exec_connections.json")
                .lines()
                .next()
                .unwrap(),
        )
        .unwrap();
        assert_eq!(j["session_id"], 51);
        assert_eq!(j["net_transport"], "TCP");
        // Refused by the server: the file says so in the server's words.
        let waits = read("os/dm_os_wait_stats");
        assert!(
            waits.starts_with("error: VIEW SERVER PERFORMANCE STATE permission was denied"),
            "{waits}"
        );
        // A function beside the views.
        assert!(read("io/dm_io_virtual_file_stats").contains("sales"));
        assert!(m.join("catalog").is_dir());
        assert_eq!(read("queries/sessions"), "sessions\n2\n");
        assert!(read("README").contains("rolled back"));
        assert!(!read("README").contains("Secret1"));
    };
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(check));
    let batches = s.batches.lock().unwrap().clone();
    unmount();
    r.unwrap();
    // The user's query went inside a transaction that is rolled back.
    let user = batches
        .iter()
        .find(|b| b.contains("sys.dm_exec_sessions"))
        .expect("the query file was sent");
    assert!(
        user.contains("BEGIN TRANSACTION") && user.trim_end().ends_with("ROLLBACK"),
        "{user}"
    );
}

// ---- A hostile server gets an error, never a hang, an abort or gigabytes ----

/// One packet of a tabular result; `last` ends the message.
fn packet(c: &mut TcpStream, payload: &[u8], last: bool) -> bool {
    let mut p = vec![4u8, u8::from(last)];
    p.extend(((payload.len() + 8) as u16).to_be_bytes());
    p.extend([0, 0, 1, 0]);
    p.extend(payload);
    c.write_all(&p).is_ok()
}

/// Column metadata of one NVARCHAR(MAX) column (its values are sent in chunks, PLP).
fn plp_column() -> Vec<u8> {
    let mut r = vec![0x81];
    r.extend(1u16.to_le_bytes());
    r.extend(0u32.to_le_bytes());
    r.extend(1u16.to_le_bytes());
    r.push(0xE7);
    r.extend(0xFFFFu16.to_le_bytes());
    r.extend([0x09, 0x04, 0xD0, 0x00, 0x34]);
    r.extend(b_varchar("spid"));
    r
}

/// A row whose one value declares `len` bytes, then a chunk of 4 bytes and the end.
fn declared(c: &mut TcpStream, len: u64) {
    let mut r = plp_column();
    r.push(0xD1);
    r.extend(len.to_le_bytes());
    r.extend(4u32.to_le_bytes());
    r.extend(utf16("57"));
    r.extend(0u32.to_le_bytes());
    r.extend(done(0x10, 1));
    packet(c, &r, true);
}

fn row_of_a_terabyte(sql: &str) -> Answer {
    let _ = sql;
    Answer::Raw(|c| declared(c, 1 << 40))
}

fn row_of_2_64(sql: &str) -> Answer {
    let _ = sql;
    Answer::Raw(|c| declared(c, u64::MAX - 3))
}

/// Rows without end, each a 2,000-character text, until the client goes away.
fn endless_rows(sql: &str) -> Answer {
    let _ = sql;
    Answer::Raw(|c| {
        let mut first = plp_column();
        let text = utf16(&"x".repeat(1000));
        let mut row = vec![0xD1];
        row.extend((text.len() as u64).to_le_bytes());
        row.extend((text.len() as u32).to_le_bytes());
        row.extend(&text);
        row.extend(0u32.to_le_bytes());
        first.extend(&row);
        if !packet(c, &first, false) {
            return;
        }
        while packet(c, &row, false) {}
    })
}

fn silent_after_login(sql: &str) -> Answer {
    let _ = sql;
    Answer::Silent
}

/// Whether process `pid` exists and has not ended (an ended one waiting for its parent to
/// collect it does not run).
fn running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        !s.rsplit_once(')')
            .is_some_and(|(_, r)| r.trim_start().starts_with('Z'))
    })
}

/// The error of connecting, and how long it took.
fn connect_error(s: &StandIn) -> (String, std::time::Duration) {
    let t0 = std::time::Instant::now();
    let e = MssqlConn::connect(&url(s.port)).unwrap_err().to_string();
    (e, t0.elapsed())
}

#[test]
fn a_row_that_declares_a_terabyte_or_2_64_bytes_is_an_error() {
    let s = start(Login::Ok, row_of_a_terabyte);
    let (e, _) = connect_error(&s);
    assert!(
        e.contains("more than plumb holds for one connection") && e.contains("1024 MiB"),
        "{e}"
    );
    assert!(
        e.contains("mssql://plumb:***@") && !e.contains("Secret1"),
        "{e}"
    );
    let s = start(Login::Ok, row_of_2_64);
    let (e, _) = connect_error(&s);
    assert!(
        e.contains("could not handle what the server sent") && e.contains("connection is closed"),
        "{e}"
    );
    // Through the command line: exit 2, one clear line, no panic text or backtrace.
    for answer in [row_of_a_terabyte as fn(&str) -> Answer, row_of_2_64] {
        let s = start(Login::Ok, answer);
        let out = plumb()
            .args(["record", "--duration", "3s", "--engine"])
            .arg(format!(
                "mssql://plumb:Secret1@127.0.0.1:{}/master?encrypt=not_supported",
                s.port
            ))
            .env("RUST_BACKTRACE", "1")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(
            !err.contains("panicked") && !err.contains("backtrace") && !err.contains("Secret1"),
            "{err}"
        );
        assert!(err.contains("connection is closed"), "{err}");
    }
}

#[test]
fn endless_rows_end_at_the_bound_not_in_gigabytes() {
    let s = start(Login::Ok, endless_rows);
    let (e, took) = connect_error(&s);
    // The row bound, the memory bound, or (on a slow, busy host, where reading 64 MiB row by
    // row takes longer than a query may) the query's 30 s: an error either way, never gigabytes.
    assert!(
        e.contains("more than 1000000 rows or 64 MiB")
            || e.contains("more than plumb holds")
            || e.contains("no answer within 30 s"),
        "{e}"
    );
    assert!(took < std::time::Duration::from_secs(45), "{took:?}");
}

#[test]
fn a_server_silent_before_the_login_is_a_timeout() {
    let s = start(Login::Silent, server_2022);
    let (e, took) = connect_error(&s);
    assert!(e.contains("did not complete the login within 15 s"), "{e}");
    assert!(took < std::time::Duration::from_secs(25), "{took:?}");
}

/// A server silent after the login holds plumb no longer than a signal: SIGTERM ends it within
/// a second or two, and its client process with it; kill -9 ends the client too.
#[test]
fn a_signal_ends_plumb_and_its_client_at_once_on_a_silent_server() {
    let s = start(Login::Ok, silent_after_login);
    let mut child = plumb()
        .args(["record", "--duration", "1m", "--engine"])
        .arg(format!(
            "mssql://plumb:Secret1@127.0.0.1:{}/master?encrypt=not_supported",
            s.port
        ))
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_secs(2));
    let clients = |pid: u32| -> Vec<u32> {
        std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
            .filter(|p| {
                let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).unwrap_or_default();
                let ppid = stat
                    .rsplit_once(')')
                    .and_then(|(_, r)| r.split_whitespace().nth(1)?.parse::<u32>().ok());
                ppid == Some(pid)
            })
            .collect()
    };
    let kids = clients(child.id());
    assert_eq!(kids.len(), 1, "plumb's SQL Server client runs: {kids:?}");
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let t0 = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if t0.elapsed() > std::time::Duration::from_secs(5) {
            let _ = child.kill();
            panic!("SIGTERM did not end plumb within 5 s");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    std::thread::sleep(std::time::Duration::from_millis(500));
    assert!(!running(kids[0]), "the client process outlived plumb");
    // kill -9: the client notices its parent is gone and ends too.
    let s = start(Login::Ok, silent_after_login);
    let mut child = plumb()
        .args(["record", "--duration", "1m", "--engine"])
        .arg(format!(
            "mssql://plumb:Secret1@127.0.0.1:{}/master?encrypt=not_supported",
            s.port
        ))
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_secs(2));
    let kids = clients(child.id());
    assert_eq!(kids.len(), 1, "{kids:?}");
    child.kill().unwrap();
    child.wait().unwrap();
    std::thread::sleep(std::time::Duration::from_secs(1));
    assert!(
        !running(kids[0]),
        "the client process outlived a killed plumb"
    );
}

/// A query file on SQL Server: one SELECT, sent inside a transaction that is rolled back; a
/// file that could leave the transaction or write is refused and never sent.
#[test]
fn a_query_file_that_could_leave_its_transaction_is_never_sent() {
    fn server(sql: &str) -> Answer {
        if sql.contains("@@SPID") {
            Answer::Rows(vec![("spid", false)], vec![vec![V::Int(57)]])
        } else if sql.contains("SERVERPROPERTY('ProductVersion')") {
            Answer::Rows(vec![("v", true)], vec![vec![V::Text("16.0.4135.4")]])
        } else {
            Answer::Rows(vec![("one", false)], vec![vec![V::Int(1)]])
        }
    }
    let s = start(Login::Ok, server);
    let mut r = plumb_engine::views::reader(&url(s.port), std::time::Duration::from_secs(5))
        .expect("connects to the stand-in");
    let t = r.query_user("SELECT 1 AS one").unwrap();
    assert_eq!(t.columns, ["one"]);
    for evil in [
        "COMMIT; BEGIN TRANSACTION READ WRITE; DROP TABLE victim",
        "SELECT 1 COMMIT DROP TABLE victim",
        "SELECT * INTO stolen FROM victim",
    ] {
        let e = r.query_user(evil).unwrap_err().to_string();
        assert!(e.contains("a query file holds one SELECT"), "{e}");
    }
    let batches = s.batches.lock().unwrap();
    assert!(
        batches
            .iter()
            .any(|b| b.contains("BEGIN TRANSACTION;\nSELECT 1 AS one") && b.contains("ROLLBACK")),
        "{batches:?}"
    );
    assert!(!batches.iter().any(|b| b.contains("victim")), "{batches:?}");
}

/// The order-entry run's SQL Server side as the stand-in plays it: the database, the schema and
/// the procedures are taken as written, each transaction's EXEC answered (every 50th new order
/// with the procedure's planned THROW 50001, every 9th payment with a deadlock, 1205), and
/// `sum(d_next_o_id)` and Batch Requests/sec counted up, 600 and 5,000 a reading.
fn oltp_server(sql: &str) -> Answer {
    use V::*;
    static NEW_ORDERS: AtomicI64 = AtomicI64::new(0);
    static PAYMENTS: AtomicI64 = AtomicI64::new(0);
    static NEXT_O_ID: AtomicI64 = AtomicI64::new(30_010);
    static BATCHES: AtomicI64 = AtomicI64::new(1_000_000);
    let i = |n: &'static str| (n, false);
    if sql.starts_with("EXEC dbo.plumb_neword") {
        if NEW_ORDERS.fetch_add(1, Ordering::Relaxed) % 50 == 49 {
            return Answer::Error(
                50001,
                "PLRB1: the item does not exist; the new order is rolled back",
            );
        }
        Answer::Done
    } else if sql.starts_with("EXEC dbo.plumb_payment") {
        if PAYMENTS.fetch_add(1, Ordering::Relaxed) % 9 == 8 {
            return Answer::Error(1205, "Transaction (Process ID 58) was deadlocked on lock resources with another process and has been chosen as the deadlock victim. Rerun the transaction.");
        }
        Answer::Done
    } else if sql.starts_with("EXEC dbo.plumb_") {
        Answer::Done
    } else if sql.contains("SERVERPROPERTY('ProductVersion')") {
        Answer::Rows(vec![("v", true)], vec![vec![Text("16.0.4135.4")]])
    } else if sql.contains("SUSER_SNAME(owner_sid)") {
        // Before a drop: the database is the login's own.
        Answer::Rows(
            vec![("owner", true), ("me", true)],
            vec![vec![Text("sa"), Text("sa")]],
        )
    } else if sql.contains("sys.dm_exec_sessions") {
        // Before a drop: nobody else is in it.
        Answer::Rows(vec![("s", true)], vec![])
    } else if sql.contains("FROM sys.databases WHERE name") {
        Answer::Rows(vec![i("n")], vec![vec![Int(0)]])
    } else if sql.contains("sum(d_next_o_id)") {
        let v = NEXT_O_ID.fetch_add(600, Ordering::Relaxed);
        Answer::Rows(vec![i("n")], vec![vec![Int(v)]])
    } else if sql.contains("Batch Requests/sec") {
        let v = BATCHES.fetch_add(5_000, Ordering::Relaxed);
        Answer::Rows(vec![i("cntr_value")], vec![vec![Int(v)]])
    } else if sql.starts_with("SELECT")
        && !sql.contains("SERVERPROPERTY")
        && !sql.contains("@@SPID")
    {
        // The counts the run reads (rows loaded): one a table.
        Answer::Rows(vec![i("n")], vec![vec![Int(1)]])
    } else if sql.starts_with("CREATE")
        || sql.starts_with("INSERT")
        || sql.starts_with("USE ")
        || sql.starts_with("ALTER")
        || sql.starts_with("IF DB_ID")
        || sql.starts_with("EXEC ")
        || sql.starts_with("WITH")
        || sql.starts_with("UPDATE")
        || sql.starts_with("TRUNCATE")
        || sql == "CHECKPOINT"
    {
        Answer::Done
    } else {
        server_2022(sql)
    }
}

/// `plumb --json load` against a stand-in playing `answer`, with `extra` flags.
fn load_on_the_stand_in(
    answer: fn(&str) -> Answer,
    extra: &[&str],
) -> (StandIn, std::process::Output) {
    let s = start(Login::Ok, answer);
    let url = format!(
        "mssql://plumb:Secret1@127.0.0.1:{}/master?encrypt=not_supported",
        s.port
    );
    let o = plumb()
        .args([
            "--json",
            "load",
            "--engine",
            &url,
            "--allow-writes",
            "--rampup",
            "0s",
        ])
        .args(extra)
        .output()
        .unwrap();
    (s, o)
}

#[test]
fn plumb_load_drives_the_order_entry_procedures_through_tds() {
    let (s, o) = load_on_the_stand_in(oltp_server, &["--clients", "2", "--duration", "2s"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(!err.contains("Secret1"), "{err}");
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(r["engine"], "SQL Server", "{r:#}");
    assert_eq!(r["version"], "16.0.4135.4");
    let ty = |name: &str| {
        r["types"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("no {name}: {r:#}"))
    };
    // The planned rollback (THROW 50001 'PLRB1…') is a rollback, not a failure; the
    // deadlock victim is a failure of its class, with SQL Server's number.
    let no = ty("new-order");
    assert!(no["committed"].as_u64().unwrap() > 0, "{no}");
    assert!(no["rolled_back"].as_u64().unwrap() > 0, "{no}");
    assert_eq!(no["failed"], serde_json::json!({}), "{no}");
    let committed = no["committed"].as_u64().unwrap() as f64;
    let share = no["rolled_back"].as_u64().unwrap() as f64 / committed;
    assert!((0.01..0.03).contains(&share), "every 50th: {no}");
    let pay = ty("payment");
    let deadlocks = pay["failed"]["deadlock"].as_u64().unwrap();
    assert_eq!(pay["codes"]["1205"].as_u64(), Some(deadlocks), "{pay}");
    let tries = pay["committed"].as_u64().unwrap() + deadlocks;
    // (a transaction in flight as the window closed may be the stand-in's but not the run's)
    assert!(deadlocks.abs_diff(tries / 9) <= 1, "every 9th: {pay}");
    // NOPM and TPM from the two readings at the window's edges: 600 new orders and 5,000
    // batches over the window.
    let window = r["window_s"].as_f64().unwrap();
    let nopm = r["nopm"].as_f64().unwrap();
    assert!(
        (nopm - 600.0 * 60.0 / window).abs() < 1.0,
        "{nopm} over {window} s"
    );
    let tpm = r["tpm"].as_f64().unwrap();
    assert!((tpm - 5000.0 * 60.0 / window).abs() < 1.0, "{tpm}");
    // What was sent, in order: the database, the procedures, the transactions, the drop.
    let b = s.batches.lock().unwrap().clone();
    let at = |p: &str| {
        b.iter()
            .position(|x| x.contains(p))
            .unwrap_or_else(|| panic!("no batch with {p}"))
    };
    let last = |p: &str| b.iter().rposition(|x| x.contains(p)).unwrap();
    assert!(at("CREATE DATABASE [plumb_load]") < at("CREATE PROCEDURE dbo.plumb_neword"));
    assert_eq!(
        b.iter()
            .filter(|x| x.starts_with("CREATE PROCEDURE dbo.plumb_"))
            .count(),
        5
    );
    assert!(at("sp_addextendedproperty") < at("EXEC dbo.plumb_neword"));
    assert!(last("EXEC dbo.plumb_") < last("DROP DATABASE [plumb_load]"));
    let neword = &b[at("EXEC dbo.plumb_neword")];
    assert!(neword.contains("@items = N'["), "{neword}");
}

#[test]
fn the_insert_checkpoint_loops_send_the_scripts_batches_in_order() {
    // Its own counter: the order-entry test's readings run in this process at the same time.
    fn loops_server(sql: &str) -> Answer {
        if sql.contains("Batch Requests/sec") {
            Answer::Rows(vec![("cntr_value", false)], vec![vec![V::Int(1)]])
        } else {
            oltp_server(sql)
        }
    }
    let (s, o) = load_on_the_stand_in(
        loops_server,
        &["--workload", "insert-bulk", "--duration", "1s"],
    );
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let b = s.batches.lock().unwrap().clone();
    let table = b
        .iter()
        .position(|x| x.starts_with("CREATE TABLE plumb_inserts (id int IDENTITY"))
        .expect("the seed's table");
    // After the table: truncate, 10,000 inserts in one transaction, CHECKPOINT, round and
    // round, then the drop.
    let rounds: Vec<&String> = b[table..]
        .iter()
        .filter(|x| {
            x.starts_with("TRUNCATE") || x.contains("WHILE @i <= 10000") || *x == "CHECKPOINT"
        })
        .collect();
    assert!(rounds.len() >= 6, "{rounds:?}");
    for (i, x) in rounds.iter().enumerate() {
        match i % 3 {
            0 => assert_eq!(x.as_str(), "TRUNCATE TABLE plumb_inserts"),
            1 => assert!(
                x.contains("BEGIN TRANSACTION; WHILE @i <= 10000 BEGIN INSERT INTO plumb_inserts DEFAULT VALUES;")
                    && x.ends_with("COMMIT TRANSACTION;"),
                "{x}"
            ),
            _ => assert_eq!(x.as_str(), "CHECKPOINT"),
        }
    }
    assert!(
        b.last().unwrap().contains("DROP DATABASE [plumb_load]"),
        "{:?}",
        b.last()
    );
}
