//! `/metrics` over HTTP for `plumb record --serve`: the recorder's latest values ([`Live`]),
//! rendered on each scrape as OpenMetrics (or Prometheus's older text format for a scraper that
//! does not ask for OpenMetrics). A scrape never waits for a sample.
//!
//! The endpoint may face any client on the network, so no client can hold it: at most
//! [`MAX_CLIENTS`] connections are served at once, each gets one request and [`DEADLINE`] to
//! send it and read the answer, a request head is at most [`MAX_HEAD`] bytes, and stopping the
//! server waits for nobody longer than a fraction of a second. When every slot is taken, the
//! connection that has waited longest without sending its request is closed to make room (a
//! client that opens connections and says nothing cannot starve a scraper); only when every
//! slot is busy answering is the next one answered 503 and closed, the way node_exporter's
//! `--web.max-requests` does.

use crate::live::Live;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Renders the values (`openmetrics`: the format asked for) into a body and its Content-Type.
pub type Render = Box<dyn Fn(&[(String, u64)], u64, bool) -> (Vec<u8>, &'static str) + Send + Sync>;

/// Connections served at once; more are answered 503 and closed.
pub const MAX_CLIENTS: usize = 16;
/// The longest a connection is kept, from accept to the last byte of the answer.
pub const DEADLINE: Duration = Duration::from_secs(10);
/// The longest request head (request line and headers) read.
pub const MAX_HEAD: usize = 16 << 10;
/// How often a waiting thread looks whether the server is stopping.
const POLL: Duration = Duration::from_millis(100);

/// An address `--serve` cannot listen on, as given.
#[derive(Debug, thiserror::Error)]
pub enum AddrError {
    #[error("{0:?}: give PORT (this host only), :PORT (every interface) or HOST:PORT")]
    Form(String),
    #[error("{given:?}: {source}")]
    Lookup {
        given: String,
        #[source]
        source: std::io::Error,
    },
}

/// Where to listen: `PORT` is 127.0.0.1:PORT (this host only), `:PORT` every interface,
/// otherwise `HOST:PORT` (`0.0.0.0:9494`, `[::1]:9494`, `localhost:9494`).
pub(crate) fn parse_addr(s: &str) -> Result<SocketAddr, AddrError> {
    let bad = || AddrError::Form(s.to_string());
    if !s.is_empty() && s.chars().all(|c| c.is_ascii_digit()) {
        let port: u16 = s.parse().map_err(|_| bad())?;
        return Ok(SocketAddr::from(([127, 0, 0, 1], port)));
    }
    if let Some(p) = s.strip_prefix(':') {
        let port: u16 = p.parse().map_err(|_| bad())?;
        return Ok(SocketAddr::from(([0, 0, 0, 0], port)));
    }
    if let Ok(a) = s.parse::<SocketAddr>() {
        return Ok(a);
    }
    s.to_socket_addrs()
        .map_err(|source| AddrError::Lookup {
            given: s.to_string(),
            source,
        })?
        .next()
        .ok_or_else(bad)
}

/// The server; stops when dropped.
pub struct Serving {
    stop: Arc<AtomicBool>,
    active: Arc<AtomicUsize>,
    handle: Option<JoinHandle<()>>,
    pub addr: SocketAddr,
}

struct Shared {
    live: Arc<Live>,
    render: Render,
    stop: Arc<AtomicBool>,
    active: Arc<AtomicUsize>,
    /// The connections being served, for making room.
    slots: std::sync::Mutex<Vec<Slot>>,
    next_id: AtomicUsize,
}

/// A connection being served: when it came, whether its request has arrived, and a handle to
/// close it from the accepting thread.
struct Slot {
    id: usize,
    accepted: Instant,
    waiting: Arc<AtomicBool>,
    conn: TcpStream,
}

impl Shared {
    /// Close the connection that has waited longest without a request; whether there was one.
    fn make_room(&self) -> bool {
        let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        let idle = slots
            .iter()
            .enumerate()
            .filter(|(_, s)| s.waiting.load(Ordering::SeqCst))
            .min_by_key(|(_, s)| s.accepted)
            .map(|(i, _)| i);
        match idle {
            Some(i) => {
                let s = slots.swap_remove(i);
                let _ = s.conn.shutdown(std::net::Shutdown::Both);
                true
            }
            None => false,
        }
    }

    fn add(&self, conn: &TcpStream) -> (usize, Arc<AtomicBool>) {
        let id = self.next_id.fetch_add(1, Ordering::SeqCst);
        let waiting = Arc::new(AtomicBool::new(true));
        if let Ok(c) = conn.try_clone() {
            self.slots
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(Slot {
                    id,
                    accepted: Instant::now(),
                    waiting: waiting.clone(),
                    conn: c,
                });
        }
        (id, waiting)
    }

    fn remove(&self, id: usize) {
        self.slots
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|s| s.id != id);
    }
}

/// Listen on `addr` (port 0: any free port; [`Serving::addr`] says which).
pub fn start(addr: SocketAddr, live: Arc<Live>, render: Render) -> std::io::Result<Serving> {
    let listener = TcpListener::bind(addr)
        .map_err(|e| std::io::Error::new(e.kind(), format!("{addr}: {e}")))?;
    listener.set_nonblocking(true)?;
    let bound = listener.local_addr().unwrap_or(addr);
    let stop = Arc::new(AtomicBool::new(false));
    let active = Arc::new(AtomicUsize::new(0));
    let shared = Arc::new(Shared {
        live,
        render,
        stop: stop.clone(),
        active: active.clone(),
        slots: std::sync::Mutex::new(Vec::new()),
        next_id: AtomicUsize::new(0),
    });
    let handle = std::thread::Builder::new()
        .name("plumb-serve".into())
        .spawn(move || accept_loop(listener, shared))?;
    Ok(Serving {
        stop,
        active,
        handle: Some(handle),
        addr: bound,
    })
}

/// Wait until `fd` is readable (or POLL passed).
fn wait_readable(fd: i32) {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd for the duration of the call.
    unsafe { libc::poll(&mut p, 1, POLL.as_millis() as i32) };
}

fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    while !shared.stop.load(Ordering::Relaxed) {
        let (conn, _) = match listener.accept() {
            Ok(c) => c,
            Err(e) if e.kind() == ErrorKind::WouldBlock || e.kind() == ErrorKind::Interrupted => {
                wait_readable(listener.as_raw_fd());
                continue;
            }
            // Out of descriptors or a connection reset before it was taken: the next may do.
            Err(_) => {
                std::thread::sleep(POLL);
                continue;
            }
        };
        // Full: room is made by closing the longest-waiting silent connection (its thread
        // sees the close and ends); only if every slot is answering is this one turned away.
        if shared.active.load(Ordering::SeqCst) >= MAX_CLIENTS && !shared.make_room() {
            busy(conn);
            continue;
        }
        shared.active.fetch_add(1, Ordering::SeqCst);
        let s = shared.clone();
        let (id, waiting) = s.add(&conn);
        let spawned = std::thread::Builder::new()
            .name("plumb-scrape".into())
            .spawn(move || {
                serve_one(conn, &s, &waiting);
                s.remove(id);
                s.active.fetch_sub(1, Ordering::SeqCst);
            });
        if spawned.is_err() {
            shared.active.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

/// Too many clients: a 503 if the socket takes it at once, then closed.
fn busy(conn: TcpStream) {
    let _ = conn.set_nonblocking(true);
    let mut c = conn;
    let _ = c.write(
        b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\n\
          Content-Length: 26\r\nRetry-After: 1\r\nConnection: close\r\n\r\ntoo many clients at once\r\n",
    );
}

/// Why a connection ended without an answer worth writing.
enum Gone {
    /// Closed, timed out or stopping: nothing more to say.
    Quiet,
    /// A request plumb answers with this status and text.
    Bad(u16, &'static str),
}

/// Read one request head within the deadline.
fn read_head(conn: &mut TcpStream, deadline: Instant, stop: &AtomicBool) -> Result<Vec<u8>, Gone> {
    let mut head = Vec::with_capacity(1024);
    let mut buf = [0u8; 4096];
    loop {
        if let Some(end) = find_end(&head) {
            head.truncate(end);
            return Ok(head);
        }
        if head.len() >= MAX_HEAD {
            return Err(Gone::Bad(431, "the request head is longer than 16 KiB\n"));
        }
        let now = Instant::now();
        if now >= deadline || stop.load(Ordering::Relaxed) {
            return Err(Gone::Quiet);
        }
        let _ = conn.set_read_timeout(Some(POLL.min(deadline - now)));
        let want = (MAX_HEAD - head.len()).min(buf.len());
        match conn.read(&mut buf[..want]) {
            Ok(0) => return Err(Gone::Quiet),
            Ok(n) => head.extend_from_slice(&buf[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
                ) => {}
            Err(_) => return Err(Gone::Quiet),
        }
    }
}

/// The end of the head (after the blank line), if it has arrived.
fn find_end(b: &[u8]) -> Option<usize> {
    b.windows(4).position(|w| w == b"\r\n\r\n").map(|i| i + 4)
}

/// Write all of `data` within the deadline; false when the client did not take it in time.
fn write_within(conn: &mut TcpStream, data: &[u8], deadline: Instant, stop: &AtomicBool) -> bool {
    let mut at = 0;
    while at < data.len() {
        let now = Instant::now();
        if now >= deadline || stop.load(Ordering::Relaxed) {
            return false;
        }
        let _ = conn.set_write_timeout(Some(POLL.min(deadline - now)));
        let end = (at + (64 << 10)).min(data.len());
        match conn.write(&data[at..end]) {
            Ok(0) => return false,
            Ok(n) => at += n,
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
                ) => {}
            Err(_) => return false,
        }
    }
    true
}

fn respond(
    conn: &mut TcpStream,
    code: u16,
    ct: &str,
    extra: &str,
    body: &[u8],
    head_only: bool,
    deadline: Instant,
    stop: &AtomicBool,
) {
    let reason = match code {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        431 => "Request Header Fields Too Large",
        _ => "Error",
    };
    let head = format!(
        "HTTP/1.1 {code} {reason}\r\nContent-Type: {ct}\r\nContent-Length: {}\r\n{extra}Connection: close\r\n\r\n",
        body.len()
    );
    if write_within(conn, head.as_bytes(), deadline, stop) && !head_only {
        write_within(conn, body, deadline, stop);
    }
}

const TEXT: &str = "text/plain; charset=utf-8";

/// One connection, one request (`Connection: close`): Prometheus opens the next for the next
/// scrape, and a client that pipelines requests gets the first answered and is closed.
fn serve_one(mut conn: TcpStream, s: &Shared, waiting: &AtomicBool) {
    let deadline = Instant::now() + DEADLINE;
    let stop = &*s.stop;
    let head = read_head(&mut conn, deadline, stop);
    waiting.store(false, Ordering::SeqCst);
    let head = match head {
        Ok(h) => h,
        Err(Gone::Quiet) => return,
        Err(Gone::Bad(code, text)) => {
            respond(
                &mut conn,
                code,
                TEXT,
                "",
                text.as_bytes(),
                false,
                deadline,
                stop,
            );
            return;
        }
    };
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut req = httparse::Request::new(&mut headers);
    let (method, path, openmetrics) = match req.parse(&head) {
        Ok(httparse::Status::Complete(_)) => {
            let openmetrics = req.headers.iter().any(|h| {
                h.name.eq_ignore_ascii_case("accept")
                    && String::from_utf8_lossy(h.value).contains("application/openmetrics-text")
            });
            (
                req.method.unwrap_or("").to_string(),
                req.path
                    .unwrap_or("")
                    .split('?')
                    .next()
                    .unwrap_or("")
                    .to_string(),
                openmetrics,
            )
        }
        _ => {
            let t = b"not an HTTP request\n";
            respond(&mut conn, 400, TEXT, "", t, false, deadline, stop);
            return;
        }
    };
    let head_only = method == "HEAD";
    if method != "GET" && !head_only {
        let t = b"only GET and HEAD\n";
        respond(
            &mut conn,
            405,
            TEXT,
            "Allow: GET, HEAD\r\n",
            t,
            false,
            deadline,
            stop,
        );
        return;
    }
    let (code, body, ct): (u16, Vec<u8>, &str) = match path.as_str() {
        "/metrics" => {
            let (values, samples) = s.live.snapshot();
            let (body, ct) = (s.render)(&values, samples, openmetrics);
            (200, body, ct)
        }
        "/" => (
            200,
            b"plumb record: the live figures are at /metrics\n".to_vec(),
            TEXT,
        ),
        _ => (
            404,
            b"not found: the figures are at /metrics\n".to_vec(),
            TEXT,
        ),
    };
    respond(&mut conn, code, ct, "", &body, head_only, deadline, stop);
}

impl Serving {
    /// Connections being served now.
    pub fn active(&self) -> usize {
        self.active.load(Ordering::SeqCst)
    }
}

impl Drop for Serving {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
        // Every connection thread looks at `stop` at least every POLL; give them a moment to
        // close their sockets, and leave the rest to the process's exit.
        let t0 = Instant::now();
        while self.active.load(Ordering::SeqCst) > 0 && t0.elapsed() < POLL * 5 {
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses() {
        assert_eq!(parse_addr("9494").unwrap().to_string(), "127.0.0.1:9494");
        assert_eq!(parse_addr(":9494").unwrap().to_string(), "0.0.0.0:9494");
        assert_eq!(parse_addr("[::1]:80").unwrap().to_string(), "[::1]:80");
        assert!(parse_addr("99999").is_err());
        assert!(parse_addr("").is_err());
        assert!(parse_addr("no-such-host.invalid:1").is_err());
    }

    fn server() -> Serving {
        let live = Arc::new(Live::default());
        let render: Render = Box::new(|v, n, _| (format!("{} {n}\n", v.len()).into_bytes(), TEXT));
        start("127.0.0.1:0".parse().unwrap(), live, render).unwrap()
    }

    fn get(addr: SocketAddr, req: &[u8]) -> String {
        let mut c = TcpStream::connect(addr).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        c.write_all(req).unwrap();
        let mut out = String::new();
        let _ = c.read_to_string(&mut out);
        out
    }

    #[test]
    fn answers_get_head_and_refuses_the_rest() {
        let s = server();
        let r = get(s.addr, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
        assert!(r.starts_with("HTTP/1.1 200 OK\r\n"), "{r}");
        assert!(r.ends_with("\r\n\r\n0 0\n"), "{r}");
        let r = get(s.addr, b"HEAD /metrics HTTP/1.1\r\n\r\n");
        assert!(
            r.contains("Content-Length: 4\r\n") && r.ends_with("\r\n\r\n"),
            "{r}"
        );
        let r = get(s.addr, b"POST /metrics HTTP/1.1\r\n\r\n");
        assert!(r.starts_with("HTTP/1.1 405"), "{r}");
        let r = get(s.addr, b"GET /nope HTTP/1.0\r\n\r\n");
        assert!(r.starts_with("HTTP/1.1 404"), "{r}");
        let r = get(s.addr, b"\x16\x03\x01 not http\r\n\r\n");
        assert!(r.starts_with("HTTP/1.1 400"), "{r}");
        let mut long = b"GET / HTTP/1.1\r\n".to_vec();
        long.extend(std::iter::repeat(b'a').take(MAX_HEAD + 10));
        let r = get(s.addr, &long);
        assert!(r.starts_with("HTTP/1.1 431"), "{r}");
    }

    /// Clients that connect and say nothing take a bounded number of threads, and cannot
    /// starve a scraper: each new connection, when every slot is taken, closes the silent one
    /// that has waited longest. 50 scrapes among 16 connections held open (and opened again
    /// as they are closed) are all answered.
    #[test]
    fn silent_clients_take_a_bounded_number_of_threads_and_never_starve_a_scraper() {
        let s = server();
        let mut silent: Vec<TcpStream> = (0..MAX_CLIENTS + 20)
            .map(|_| TcpStream::connect(s.addr).unwrap())
            .collect();
        let t0 = Instant::now();
        while s.active() < MAX_CLIENTS && t0.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(10));
        }
        std::thread::sleep(Duration::from_millis(200));
        assert!(s.active() <= MAX_CLIENTS + 1, "{} threads", s.active());
        let mut answered = 0;
        for _ in 0..50 {
            let r = get(s.addr, b"GET /metrics HTTP/1.1\r\n\r\n");
            answered += r.starts_with("HTTP/1.1 200") as usize;
            silent.push(TcpStream::connect(s.addr).unwrap());
        }
        assert_eq!(answered, 50, "scrapes answered among silent connections");
        assert!(s.active() <= MAX_CLIENTS + 1, "{} threads", s.active());
        drop(silent);
        // Closed clients free their places at once.
        let t0 = Instant::now();
        while s.active() > 0 && t0.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(s.active(), 0);
        let r = get(s.addr, b"GET /metrics HTTP/1.1\r\n\r\n");
        assert!(r.starts_with("HTTP/1.1 200"), "{r}");
        // And stopping waits for no one.
        let _held = TcpStream::connect(s.addr).unwrap();
        std::thread::sleep(Duration::from_millis(100));
        let t0 = Instant::now();
        drop(s);
        assert!(t0.elapsed() < Duration::from_secs(2), "{:?}", t0.elapsed());
    }
}
