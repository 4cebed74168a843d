//! The load's PostgreSQL connection: the wire protocol (postgres-protocol's messages) over a
//! socket of its own, for the driver's hot path only. It blocks until `set_nonblocking`; then
//! its `_async` calls wait in `plumb_sys::mux`, so one thread serves several sessions.
//!
//! Why not the `postgres` crate here: it runs every connection on a tokio runtime, so each
//! statement costs a send, an epoll wait and reads until EAGAIN; measured against pgbench on the
//! TPC-B-like transaction that was 1.65 times pgbench's client CPU per transaction, and on a
//! two-CPU host the client's CPU is the server's. Here a statement is one write (Bind, Execute,
//! Sync) and reads until ReadyForQuery, as libpq does it. Everything else plumb says to
//! PostgreSQL (creating, loading, checking, counting) still goes through the `postgres` crate.
//!
//! A hostile or broken server gets an error, never a panic or unbounded memory: a message over
//! `MAX_MESSAGE` is refused before it is read, an unknown message ends the connection, and the
//! login has the URL's connect timeout (10 s unless it says otherwise).

use bytes::BytesMut;
use fallible_iterator::FallibleIterator;
use plumb_sys::mux::{self, block_on};
use postgres::config::{Config, Host};
use postgres_protocol::authentication::{md5_hash, sasl};
use postgres_protocol::message::backend::Message;
use postgres_protocol::message::frontend;
use postgres_protocol::IsNull;
use std::fmt::Write as _;
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::Duration;

/// The largest message plumb reads from the server: the workloads' replies are a few hundred
/// bytes; a longer one is refused unread.
pub const MAX_MESSAGE: usize = 16 << 20;
/// The most rows plumb reads for one of its statements (they read a few: the widest, a range
/// of 100); more is a server that will not stop, and ends the connection.
pub const MAX_ROWS: u64 = 100_000;

/// A value for a statement's parameter, sent in text form; the server gives it the type the
/// statement needs.
pub enum Param<'a> {
    Int(i64),
    Text(&'a str),
    Ints(&'a [i32]),
}

/// What went wrong on the wire.
#[derive(Debug)]
pub enum WireError {
    /// The server's error: its SQLSTATE, its message and whether it ended the session.
    Db {
        code: String,
        message: String,
        fatal: bool,
    },
    /// The connection: closed, reset, timed out.
    Io(io::Error),
    /// The server said something plumb does not read; the connection is no longer used.
    Protocol(String),
}

impl std::fmt::Display for WireError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WireError::Db { code, message, .. } => write!(f, "{message} (SQLSTATE {code})"),
            WireError::Io(e) => write!(f, "{e}"),
            WireError::Protocol(m) => write!(f, "{m}"),
        }
    }
}

impl std::error::Error for WireError {}

impl From<io::Error> for WireError {
    fn from(e: io::Error) -> WireError {
        WireError::Io(e)
    }
}

type Res<T> = std::result::Result<T, WireError>;

#[derive(Clone, Debug)]
pub(super) enum Addr {
    Unix(PathBuf),
    Tcp(String, u16),
}

pub(super) enum Sock {
    Unix(UnixStream),
    Tcp(TcpStream),
}

impl Sock {
    pub(super) fn open(a: &Addr, timeout: Duration) -> io::Result<Sock> {
        match a {
            Addr::Unix(p) => UnixStream::connect(p).map(Sock::Unix),
            Addr::Tcp(host, port) => {
                use std::net::ToSocketAddrs;
                let mut last = io::Error::new(io::ErrorKind::NotFound, "no address");
                for sa in (host.as_str(), *port).to_socket_addrs()? {
                    match TcpStream::connect_timeout(&sa, timeout) {
                        Ok(s) => {
                            s.set_nodelay(true)?;
                            return Ok(Sock::Tcp(s));
                        }
                        Err(e) => last = e,
                    }
                }
                Err(last)
            }
        }
    }

    /// Something another thread can call to close this session's socket for reading and
    /// writing: a read blocked on a server that says nothing returns at once. It holds a
    /// duplicate of the socket, so it never reaches a descriptor reused for something else.
    pub(super) fn closer(&self) -> Box<dyn Fn() + Send + Sync> {
        let dup = match self {
            Sock::Unix(s) => s.try_clone().map(Sock::Unix),
            Sock::Tcp(s) => s.try_clone().map(Sock::Tcp),
        };
        Box::new(move || {
            let _ = match &dup {
                Ok(Sock::Unix(s)) => s.shutdown(std::net::Shutdown::Both),
                Ok(Sock::Tcp(s)) => s.shutdown(std::net::Shutdown::Both),
                Err(_) => Ok(()),
            };
        })
    }

    pub(super) fn fd(&self) -> RawFd {
        match self {
            Sock::Unix(s) => s.as_raw_fd(),
            Sock::Tcp(s) => s.as_raw_fd(),
        }
    }

    pub(super) fn set_nonblocking(&self) -> io::Result<()> {
        match self {
            Sock::Unix(s) => s.set_nonblocking(true),
            Sock::Tcp(s) => s.set_nonblocking(true),
        }
    }

    pub(super) fn set_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        match self {
            Sock::Unix(s) => {
                s.set_read_timeout(t)?;
                s.set_write_timeout(t)
            }
            Sock::Tcp(s) => {
                s.set_read_timeout(t)?;
                s.set_write_timeout(t)
            }
        }
    }
}

impl Read for Sock {
    fn read(&mut self, b: &mut [u8]) -> io::Result<usize> {
        match self {
            Sock::Unix(s) => s.read(b),
            Sock::Tcp(s) => s.read(b),
        }
    }
}

impl Write for Sock {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        match self {
            Sock::Unix(s) => s.write(b),
            Sock::Tcp(s) => s.write(b),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// One session on the wire.
pub struct Wire {
    sock: Sock,
    rbuf: BytesMut,
    wbuf: BytesMut,
    /// What each read fills, kept (a fresh zeroed buffer a read showed in profiles).
    chunk: Box<[u8; 8192]>,
    addr: Addr,
    key: Option<(i32, i32)>,
    timeout: Duration,
    dead: bool,
    /// The socket does not block: a read or write that would waits in `plumb_sys::mux`, so
    /// several sessions can share a thread.
    nonblocking: bool,
    /// A request went out and nothing has been read since: on a non-blocking session the
    /// reply cannot be there yet, so the first read waits for the socket instead of trying
    /// (one system call a round trip fewer, as pgbench's threads wait before they read).
    sent: bool,
}

/// The server's address, the login and the database from a parsed URL (the first host).
pub struct Login {
    addr: Addr,
    user: String,
    password: Option<Vec<u8>>,
    dbname: String,
    application_name: String,
    options: Option<String>,
    timeout: Duration,
}

impl Login {
    /// From the `postgres` crate's parsed URL, with `db` as the database. The user defaults to
    /// the OS user's name, as libpq's does.
    pub(crate) fn from_config(c: &Config, db: &str) -> std::result::Result<Login, String> {
        let port = c.get_ports().first().copied().unwrap_or(5432);
        let addr = match c.get_hosts().first() {
            Some(Host::Unix(dir)) => Addr::Unix(dir.join(format!(".s.PGSQL.{port}"))),
            Some(Host::Tcp(h)) => Addr::Tcp(h.clone(), port),
            None => Addr::Unix(PathBuf::from(format!(
                "/var/run/postgresql/.s.PGSQL.{port}"
            ))),
        };
        let user = match c.get_user() {
            Some(u) => u.to_string(),
            // SAFETY: geteuid has no preconditions.
            None => plumb_sys::os::user_by_uid(unsafe { libc::geteuid() })
                .map(|u| u.name)
                .ok_or("no user in the URL, and the OS user has no name")?,
        };
        Ok(Login {
            addr,
            user,
            password: c.get_password().map(|p| p.to_vec()),
            dbname: db.to_string(),
            application_name: c.get_application_name().unwrap_or("plumb").to_string(),
            options: c.get_options().map(str::to_string),
            timeout: c
                .get_connect_timeout()
                .copied()
                .unwrap_or(Duration::from_secs(10)),
        })
    }
}

impl Wire {
    /// Open a session and log in; the login may take up to the connect timeout.
    pub fn connect(l: &Login) -> Res<Wire> {
        let sock = Sock::open(&l.addr, l.timeout)?;
        sock.set_timeout(Some(l.timeout))?;
        let mut w = Wire {
            sock,
            rbuf: BytesMut::with_capacity(8192),
            wbuf: BytesMut::with_capacity(1024),
            chunk: Box::new([0u8; 8192]),
            addr: l.addr.clone(),
            key: None,
            timeout: l.timeout,
            dead: false,
            nonblocking: false,
            sent: false,
        };
        block_on(w.login(l))?;
        w.sock.set_timeout(None)?;
        Ok(w)
    }

    /// From now on a read or write that would block waits in `plumb_sys::mux` instead: the
    /// session's `_async` calls can share a thread with other sessions' (the blocking ones
    /// still block).
    pub fn set_nonblocking(&mut self) -> Res<()> {
        self.sock.set_nonblocking()?;
        self.nonblocking = true;
        Ok(())
    }

    async fn login(&mut self, l: &Login) -> Res<()> {
        let mut params = vec![
            ("user", l.user.as_str()),
            ("database", l.dbname.as_str()),
            ("application_name", l.application_name.as_str()),
            ("client_encoding", "UTF8"),
        ];
        if let Some(o) = &l.options {
            params.push(("options", o.as_str()));
        }
        frontend::startup_message(params, &mut self.wbuf)?;
        self.send().await?;
        let mut scram: Option<sasl::ScramSha256> = None;
        let password = || {
            l.password.as_deref().ok_or_else(|| {
                WireError::Protocol("the server asks for a password and none was given".into())
            })
        };
        loop {
            match self.next().await? {
                Message::AuthenticationOk => {}
                Message::AuthenticationCleartextPassword => {
                    frontend::password_message(password()?, &mut self.wbuf)?;
                    self.send().await?;
                }
                Message::AuthenticationMd5Password(b) => {
                    let h = md5_hash(l.user.as_bytes(), password()?, b.salt());
                    frontend::password_message(h.as_bytes(), &mut self.wbuf)?;
                    self.send().await?;
                }
                Message::AuthenticationSasl(b) => {
                    let mut offered = false;
                    let mut m = b.mechanisms();
                    while let Some(name) = m.next()? {
                        offered |= name == sasl::SCRAM_SHA_256;
                    }
                    if !offered {
                        return Err(WireError::Protocol(
                            "the server offers no SASL mechanism plumb speaks (SCRAM-SHA-256)"
                                .into(),
                        ));
                    }
                    let s = sasl::ScramSha256::new(password()?, sasl::ChannelBinding::unsupported());
                    frontend::sasl_initial_response(sasl::SCRAM_SHA_256, s.message(), &mut self.wbuf)?;
                    self.send().await?;
                    scram = Some(s);
                }
                Message::AuthenticationSaslContinue(b) => {
                    let s = scram.as_mut().ok_or_else(|| unexpected("SASL continue"))?;
                    s.update(b.data())?;
                    frontend::sasl_response(s.message(), &mut self.wbuf)?;
                    self.send().await?;
                }
                Message::AuthenticationSaslFinal(b) => {
                    scram
                        .as_mut()
                        .ok_or_else(|| unexpected("SASL final"))?
                        .finish(b.data())?;
                }
                Message::BackendKeyData(k) => self.key = Some((k.process_id(), k.secret_key())),
                Message::ParameterStatus(_) | Message::NoticeResponse(_) => {}
                Message::ReadyForQuery(_) => return Ok(()),
                Message::ErrorResponse(e) => return Err(db_error(&e, true)),
                _ => {
                    return Err(WireError::Protocol(
                        "the server asked for an authentication plumb does not speak (cleartext, MD5 and SCRAM-SHA-256 it does)".into(),
                    ))
                }
            }
        }
    }

    /// Prepare `sql` as the named statement `name`, its parameters' types left to the server.
    pub fn prepare(&mut self, name: &str, sql: &str) -> Res<()> {
        frontend::parse(name, sql, std::iter::empty(), &mut self.wbuf)?;
        frontend::sync(&mut self.wbuf);
        block_on(async {
            self.send().await?;
            self.finish().await.map(|_| ())
        })
    }

    /// Run a prepared statement with `params` (one round trip): the rows it returned.
    pub fn run(&mut self, name: &str, params: &[Param<'_>]) -> Res<u64> {
        block_on(self.run_async(name, params))
    }

    /// `run`, waiting in `plumb_sys::mux` on a non-blocking session.
    pub async fn run_async(&mut self, name: &str, params: &[Param<'_>]) -> Res<u64> {
        frontend::bind(
            "",
            name,
            std::iter::once(0i16),
            params,
            |p, buf| {
                match p {
                    Param::Int(n) => write!(buf, "{n}")?,
                    Param::Text(s) => buf.extend_from_slice(s.as_bytes()),
                    Param::Ints(v) => {
                        buf.extend_from_slice(b"{");
                        for (i, n) in v.iter().enumerate() {
                            if i > 0 {
                                buf.extend_from_slice(b",");
                            }
                            write!(buf, "{n}")?;
                        }
                        buf.extend_from_slice(b"}");
                    }
                }
                Ok(IsNull::No)
            },
            std::iter::once(0i16),
            &mut self.wbuf,
        )
        .map_err(|e| match e {
            frontend::BindError::Conversion(e) => {
                WireError::Protocol(format!("encoding a parameter: {e}"))
            }
            frontend::BindError::Serialization(e) => WireError::Io(e),
        })?;
        frontend::execute("", 0, &mut self.wbuf)?;
        frontend::sync(&mut self.wbuf);
        self.send().await?;
        self.finish().await
    }

    /// Run `sql` as a simple query (ROLLBACK after a failed transaction).
    pub fn simple(&mut self, sql: &str) -> Res<()> {
        block_on(self.simple_async(sql))
    }

    /// `simple`, waiting in `plumb_sys::mux` on a non-blocking session.
    pub async fn simple_async(&mut self, sql: &str) -> Res<()> {
        frontend::query(sql, &mut self.wbuf)?;
        self.send().await?;
        self.finish().await.map(|_| ())
    }

    /// The backend's process ID, from the startup's BackendKeyData (None before it, or from a
    /// server that sent none).
    pub fn backend_pid(&self) -> Option<u32> {
        self.key.and_then(|(pid, _)| u32::try_from(pid).ok())
    }

    /// Something another thread can call to cancel this session's running statement (a
    /// CancelRequest on a connection of its own, as libpq's PQcancel).
    pub fn canceller(&self) -> Box<dyn Fn() + Send + Sync> {
        let addr = self.addr.clone();
        let key = self.key;
        let timeout = self.timeout.min(Duration::from_secs(5));
        Box::new(move || {
            let Some((pid, secret)) = key else { return };
            let mut buf = BytesMut::new();
            frontend::cancel_request(pid, secret, &mut buf);
            if let Ok(mut s) = Sock::open(&addr, timeout) {
                let _ = s.set_timeout(Some(timeout));
                let _ = s.write_all(&buf);
                let mut b = [0u8; 1];
                let _ = s.read(&mut b);
            }
        })
    }

    /// Something another thread can call to close the session (see `Sock::closer`).
    pub fn closer(&self) -> Box<dyn Fn() + Send + Sync> {
        self.sock.closer()
    }

    /// Whether the session can no longer be used (closed, or the server said something plumb
    /// does not read).
    pub(crate) fn is_dead(&self) -> bool {
        self.dead
    }

    async fn send(&mut self) -> Res<()> {
        if self.dead {
            return Err(WireError::Io(io::Error::new(
                io::ErrorKind::NotConnected,
                "the connection is closed",
            )));
        }
        let mut off = 0;
        let r = loop {
            if off == self.wbuf.len() {
                break Ok(());
            }
            match self.sock.write(&self.wbuf[off..]) {
                Ok(0) => break Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => off += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock && self.nonblocking => {
                    mux::writable(self.sock.fd()).await
                }
                Err(e) => break Err(e),
            }
        };
        self.wbuf.clear();
        self.sent = true;
        r.map_err(|e| self.died(e))
    }

    fn died(&mut self, e: io::Error) -> WireError {
        self.dead = true;
        WireError::Io(e)
    }

    /// Read to ReadyForQuery: the rows, or the first error the server sent.
    async fn finish(&mut self) -> Res<u64> {
        let mut rows = 0;
        let mut err = None;
        loop {
            match self.next().await? {
                Message::DataRow(_) => {
                    rows += 1;
                    if rows > MAX_ROWS {
                        self.dead = true;
                        return Err(WireError::Protocol(format!(
                            "the server sent more than {MAX_ROWS} rows for one statement (plumb's statements read a few)"
                        )));
                    }
                }
                Message::ReadyForQuery(_) => {
                    return match err {
                        Some(e) => Err(e),
                        None => Ok(rows),
                    }
                }
                Message::ErrorResponse(e) => {
                    let e = db_error(&e, false);
                    if let WireError::Db { fatal: true, .. } = e {
                        self.dead = true;
                        return Err(e);
                    }
                    err.get_or_insert(e);
                }
                Message::ParseComplete
                | Message::BindComplete
                | Message::CommandComplete(_)
                | Message::RowDescription(_)
                | Message::NoData
                | Message::EmptyQueryResponse
                | Message::CloseComplete
                | Message::ParameterStatus(_)
                | Message::NoticeResponse(_)
                | Message::NotificationResponse(_) => {}
                _ => {
                    self.dead = true;
                    return Err(unexpected("a message"));
                }
            }
        }
    }

    /// The next message, read whole; one longer than `MAX_MESSAGE` is refused unread.
    async fn next(&mut self) -> Res<Message> {
        loop {
            if self.rbuf.len() >= 5 {
                let len =
                    u32::from_be_bytes([self.rbuf[1], self.rbuf[2], self.rbuf[3], self.rbuf[4]])
                        as usize;
                if len > MAX_MESSAGE {
                    self.dead = true;
                    return Err(WireError::Protocol(format!(
                        "the server sent a message of {len} bytes (plumb reads at most {MAX_MESSAGE})"
                    )));
                }
                match Message::parse(&mut self.rbuf) {
                    Ok(Some(m)) => return Ok(m),
                    Ok(None) => {}
                    Err(e) => {
                        self.dead = true;
                        return Err(WireError::Protocol(format!(
                            "the server sent a message plumb cannot read: {e}"
                        )));
                    }
                }
            }
            if std::mem::take(&mut self.sent) && self.nonblocking {
                mux::readable(self.sock.fd()).await;
            }
            let read = self.sock.read(&mut self.chunk[..]);
            if let Ok(n) = read {
                self.rbuf.extend_from_slice(&self.chunk[..n]);
            }
            match read {
                Ok(0) => {
                    return Err(self.died(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "the server closed the connection",
                    )))
                }
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock && self.nonblocking => {
                    mux::readable(self.sock.fd()).await
                }
                Err(e) => return Err(self.died(e)),
            }
        }
    }
}

impl Drop for Wire {
    fn drop(&mut self) {
        if !self.dead {
            frontend::terminate(&mut self.wbuf);
            let _ = self.sock.write_all(&self.wbuf);
        }
    }
}

fn unexpected(what: &str) -> WireError {
    WireError::Protocol(format!("the server sent {what} plumb did not expect"))
}

fn db_error(e: &postgres_protocol::message::backend::ErrorResponseBody, login: bool) -> WireError {
    let (mut code, mut message, mut fatal) = (String::new(), String::new(), login);
    let mut f = e.fields();
    while let Ok(Some(field)) = f.next() {
        let value = String::from_utf8_lossy(field.value_bytes());
        match field.type_() {
            b'C' => code = value.into_owned(),
            b'M' => message = value.into_owned(),
            b'V' => fatal |= matches!(&*value, "FATAL" | "PANIC"),
            _ => {}
        }
    }
    WireError::Db {
        code,
        message,
        fatal,
    }
}

#[cfg(test)]
mod tests {
    //! A scripted peer on a real Unix socket plays the server: what a hostile or broken one
    //! sends cannot be produced by a real PostgreSQL.
    use super::*;
    use std::os::unix::net::UnixListener;
    use std::time::Instant;

    fn msg(tag: u8, body: &[u8]) -> Vec<u8> {
        let mut v = vec![tag];
        v.extend_from_slice(&(body.len() as u32 + 4).to_be_bytes());
        v.extend_from_slice(body);
        v
    }

    fn ready() -> Vec<u8> {
        msg(b'Z', b"I")
    }

    fn auth_ok() -> Vec<u8> {
        let mut v = msg(b'R', &0u32.to_be_bytes());
        let mut key = 42u32.to_be_bytes().to_vec();
        key.extend_from_slice(&7u32.to_be_bytes());
        v.extend(msg(b'K', &key));
        v
    }

    /// A server on a socket in a temporary directory that reads the startup message, then
    /// plays `script`: each step reads what the client sends (if asked), then writes bytes.
    fn server(
        script: Vec<(bool, Vec<u8>)>,
    ) -> (tempfile::TempDir, Login, std::thread::JoinHandle<Vec<u8>>) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(".s.PGSQL.5432");
        let l = UnixListener::bind(&path).unwrap();
        let h = std::thread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            let mut got = Vec::new();
            let mut b = [0u8; 4096];
            let n = s.read(&mut b).unwrap_or(0);
            got.extend_from_slice(&b[..n]);
            for (read_first, bytes) in script {
                if read_first {
                    let n = s.read(&mut b).unwrap_or(0);
                    got.extend_from_slice(&b[..n]);
                }
                if s.write_all(&bytes).is_err() {
                    break;
                }
            }
            std::thread::sleep(Duration::from_millis(300));
            got
        });
        let login = Login {
            addr: Addr::Unix(path),
            user: "u".into(),
            password: None,
            dbname: "d".into(),
            application_name: "plumb test".into(),
            options: None,
            timeout: Duration::from_millis(500),
        };
        (dir, login, h)
    }

    #[test]
    fn a_statement_is_one_write_with_its_parameters_in_text() {
        let mut reply = msg(b'2', b"");
        reply.extend(msg(b'D', &[0, 1, 0, 0, 0, 1, b'5']));
        reply.extend(msg(b'C', b"SELECT 1\0"));
        reply.extend(ready());
        let mut first = auth_ok();
        first.extend(ready());
        let (_d, login, h) = server(vec![(false, first), (true, reply)]);
        let mut w = Wire::connect(&login).unwrap();
        let rows = w
            .run(
                "s0",
                &[
                    Param::Int(-3),
                    Param::Text("BAR"),
                    Param::Ints(&[1, 20, 300]),
                ],
            )
            .unwrap();
        assert_eq!(rows, 1);
        drop(w);
        let got = h.join().unwrap();
        let text = String::from_utf8_lossy(&got);
        assert!(text.contains("user\0u\0database\0d\0"), "{text:?}");
        assert!(text.contains("s0\0"), "{text:?}");
        for v in ["-3", "BAR", "{1,20,300}"] {
            assert!(text.contains(v), "{v} not in {text:?}");
        }
    }

    #[test]
    fn an_error_is_kept_with_its_code_and_the_session_goes_on() {
        let mut err = msg(b'E', b"SERROR\0VERROR\0C40P01\0Mdeadlock detected\0\0");
        err.extend(ready());
        let mut ok = msg(b'C', b"UPDATE 1\0");
        ok.extend(ready());
        let mut first = auth_ok();
        first.extend(ready());
        let (_d, login, _h) = server(vec![(false, first), (true, err), (true, ok)]);
        let mut w = Wire::connect(&login).unwrap();
        match w.run("s0", &[]) {
            Err(WireError::Db {
                code,
                message,
                fatal,
            }) => {
                assert_eq!(code, "40P01");
                assert_eq!(message, "deadlock detected");
                assert!(!fatal);
            }
            other => panic!("{other:?}"),
        }
        assert!(!w.is_dead());
        assert_eq!(w.run("s0", &[]).unwrap(), 0);
    }

    #[test]
    fn a_huge_message_is_refused_unread() {
        let mut first = auth_ok();
        first.extend(ready());
        // A DataRow claiming 2^32-1 bytes.
        let huge = vec![b'D', 0xff, 0xff, 0xff, 0xff, 0, 1];
        let (_d, login, _h) = server(vec![(false, first), (true, huge)]);
        let mut w = Wire::connect(&login).unwrap();
        let e = w.run("s0", &[]).unwrap_err();
        assert!(e.to_string().contains("4294967295 bytes"), "{e}");
        assert!(w.is_dead());
        assert!(w.run("s0", &[]).is_err());
    }

    #[test]
    fn garbage_and_a_closed_connection_are_errors() {
        let mut first = auth_ok();
        first.extend(ready());
        // A message with a length below its own header.
        let (_d, login, _h) = server(vec![(false, first.clone()), (true, vec![b'C', 0, 0, 0, 1])]);
        let mut w = Wire::connect(&login).unwrap();
        assert!(matches!(w.run("s0", &[]), Err(WireError::Protocol(_))));
        assert!(w.is_dead());
        // The server closes halfway through a reply.
        let (_d, login, _h) = server(vec![(false, first), (true, msg(b'2', b"")[..3].to_vec())]);
        let mut w = Wire::connect(&login).unwrap();
        let e = w.run("s0", &[]).unwrap_err();
        assert!(matches!(e, WireError::Io(_)), "{e:?}");
        assert!(w.is_dead());
    }

    #[test]
    fn a_silent_server_times_the_login_out() {
        let (_d, login, _h) = server(vec![]);
        let t = Instant::now();
        let e = Wire::connect(&login)
            .err()
            .expect("a silent server logged in");
        assert!(matches!(e, WireError::Io(_)), "{e:?}");
        assert!(t.elapsed() < Duration::from_secs(5));
    }

    #[test]
    fn a_password_request_without_a_password_and_a_fatal_login_error() {
        let (_d, login, _h) = server(vec![(false, msg(b'R', &3u32.to_be_bytes()))]);
        let e = Wire::connect(&login).err().unwrap();
        assert!(e.to_string().contains("asks for a password"), "{e}");
        let fatal = msg(
            b'E',
            b"SFATAL\0VFATAL\0C28P01\0Mpassword authentication failed\0\0",
        );
        let (_d, login, _h) = server(vec![(false, fatal)]);
        match Wire::connect(&login).err().unwrap() {
            WireError::Db { code, fatal, .. } => {
                assert_eq!(code, "28P01");
                assert!(fatal);
            }
            e => panic!("{e:?}"),
        }
    }
}
