//! `/metrics` over HTTP for `plumb record --serve`: the recorder's latest values ([`Live`]),
//! rendered on each scrape as OpenMetrics (or Prometheus's older text format for a scraper that
//! does not ask for OpenMetrics). One thread answers; a scrape never waits for a sample.

use crate::live::Live;
use anyhow::{anyhow, Result};
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// Renders the values (`openmetrics`: the format asked for) into a body and its Content-Type.
pub type Render = Box<dyn Fn(&[(String, u64)], u64, bool) -> (Vec<u8>, &'static str) + Send>;

/// Where to listen: `PORT` is 127.0.0.1:PORT (this host only), `:PORT` every interface,
/// otherwise `HOST:PORT` (`0.0.0.0:9187`, `[::1]:9187`, `localhost:9187`).
pub fn parse_addr(s: &str) -> Result<SocketAddr, String> {
    let bad = || format!("{s:?}: give PORT (this host only), :PORT (every interface) or HOST:PORT");
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
        .map_err(|e| format!("{s:?}: {e}"))?
        .next()
        .ok_or_else(bad)
}

/// The server; stops when dropped.
pub struct Serving {
    server: Arc<tiny_http::Server>,
    stop: Arc<std::sync::atomic::AtomicBool>,
    handle: Option<JoinHandle<()>>,
    pub addr: SocketAddr,
}

/// Listen on `addr` (port 0: any free port; [`Serving::addr`] says which).
pub fn start(addr: SocketAddr, live: Arc<Live>, render: Render) -> Result<Serving> {
    let server = tiny_http::Server::http(addr).map_err(|e| anyhow!("{addr}: {e}"))?;
    let bound = server.server_addr().to_ip().unwrap_or(addr);
    let server = Arc::new(server);
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (s, stopped) = (server.clone(), stop.clone());
    let handle = std::thread::Builder::new()
        .name("plumb-serve".into())
        .spawn(move || loop {
            if stopped.load(std::sync::atomic::Ordering::Relaxed) {
                return;
            }
            let req = match s.recv_timeout(Duration::from_millis(200)) {
                Ok(Some(r)) => r,
                Ok(None) => continue,
                // Unblocked (stopping) or the listener failed: either way, done.
                Err(_) => return,
            };
            answer(req, &live, &render);
        })?;
    Ok(Serving {
        server,
        stop,
        handle: Some(handle),
        addr: bound,
    })
}

fn header(k: &'static str, v: &'static str) -> tiny_http::Header {
    tiny_http::Header::from_bytes(k.as_bytes(), v.as_bytes()).expect("an ASCII header")
}

fn answer(req: tiny_http::Request, live: &Live, render: &Render) {
    use tiny_http::{Method, Response};
    let path = req.url().split('?').next().unwrap_or("").to_string();
    let method = req.method().clone();
    let reply = |req: tiny_http::Request, code: u16, body: Vec<u8>, ct: &'static str| {
        let head = method == Method::Head;
        let r = Response::from_data(if head { Vec::new() } else { body })
            .with_status_code(code)
            .with_header(header("Content-Type", ct));
        // A scraper that went away is not plumb's error.
        let _ = req.respond(r);
    };
    if method != Method::Get && method != Method::Head {
        let r = Response::from_string("only GET and HEAD\n")
            .with_status_code(405)
            .with_header(header("Allow", "GET, HEAD"));
        let _ = req.respond(r);
        return;
    }
    match path.as_str() {
        "/metrics" => {
            let openmetrics = req.headers().iter().any(|h| {
                h.field.equiv("Accept") && h.value.as_str().contains("application/openmetrics-text")
            });
            let (values, samples) = live.snapshot();
            let (body, ct) = render(&values, samples, openmetrics);
            reply(req, 200, body, ct);
        }
        "/" => reply(
            req,
            200,
            b"plumb record: the live figures are at /metrics\n".to_vec(),
            "text/plain; charset=utf-8",
        ),
        _ => reply(
            req,
            404,
            b"not found: the figures are at /metrics\n".to_vec(),
            "text/plain; charset=utf-8",
        ),
    }
}

impl Drop for Serving {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.server.unblock();
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses() {
        assert_eq!(parse_addr("9187").unwrap().to_string(), "127.0.0.1:9187");
        assert_eq!(parse_addr(":9187").unwrap().to_string(), "0.0.0.0:9187");
        assert_eq!(parse_addr("[::1]:80").unwrap().to_string(), "[::1]:80");
        assert!(parse_addr("99999").is_err());
        assert!(parse_addr("").is_err());
        assert!(parse_addr("no-such-host.invalid:1").is_err());
    }
}
