//! The load's MariaDB (and MySQL) connection: the client/server protocol over a blocking
//! socket, for the driver's hot path only, as `wire` is for PostgreSQL.
//!
//! Why not the `mysql` crate here: measured against sysbench (libmariadb) on the point select,
//! it spent 1.13 times sysbench's client CPU per transaction: every binary result set's column
//! definitions parsed into owned values, a row of `Value`s built and dropped. Here a statement
//! is one write (COM_STMT_EXECUTE with its parameters) and blocking reads to the end of its
//! results; rows are counted, only a first integer column is decoded, and with MariaDB's
//! metadata cache (MARIADB_CLIENT_CACHE_METADATA, 10.6 and later) the server stops resending
//! column definitions at all. Everything else plumb says to MariaDB (creating, loading,
//! checking, counting, cancelling) still goes through the `mysql` crate.
//!
//! A hostile or broken server gets an error, never a panic, a hang at login or unbounded
//! memory: a packet of 16 MiB or more (a split one) is refused before it is read, a request for
//! a local file (LOAD DATA LOCAL) is refused (plumb never offers CLIENT_LOCAL_FILES), a password
//! is never sent in clear text, and the login has the URL's connect timeout (10 s unless it
//! says otherwise).

use super::wire::{Addr, Sock};
use std::io::{self, Read, Write};
use std::path::PathBuf;
use std::time::Duration;

/// A packet's largest payload: 0xFFFFFF announces a split packet, which no reply of the
/// workloads needs; it is refused unread.
pub const MAX_PACKET: usize = 0xFF_FFFF;

// Capability flags (the protocol's names).
const CLIENT_LONG_FLAG: u32 = 0x4;
const CLIENT_CONNECT_WITH_DB: u32 = 0x8;
const CLIENT_PROTOCOL_41: u32 = 0x200;
const CLIENT_TRANSACTIONS: u32 = 0x2000;
const CLIENT_SECURE_CONNECTION: u32 = 0x8000;
const CLIENT_MULTI_RESULTS: u32 = 0x2_0000;
const CLIENT_PS_MULTI_RESULTS: u32 = 0x4_0000;
const CLIENT_PLUGIN_AUTH: u32 = 0x8_0000;
const CLIENT_PLUGIN_AUTH_LENENC_DATA: u32 = 0x20_0000;
const CLIENT_DEPRECATE_EOF: u32 = 0x100_0000;
/// Set by MySQL servers; a MariaDB server leaves it clear and sends its own flags apart.
const CLIENT_MYSQL: u32 = 0x1;
/// MariaDB's: the server resends a result's column definitions only when they change.
const MARIADB_CLIENT_CACHE_METADATA: u32 = 0x10;

const SERVER_MORE_RESULTS_EXISTS: u16 = 0x8;

/// utf8mb4_general_ci.
const CHARSET: u8 = 45;

const COM_QUIT: u8 = 0x01;
const COM_QUERY: u8 = 0x03;
const COM_STMT_PREPARE: u8 = 0x16;
const COM_STMT_EXECUTE: u8 = 0x17;

const TYPE_LONGLONG: u8 = 0x08;
const TYPE_VAR_STRING: u8 = 0xFD;

/// A value for a prepared statement's parameter.
pub enum Param<'a> {
    Int(i64),
    Text(&'a str),
}

/// What went wrong.
#[derive(Debug)]
pub enum MyError {
    /// The server's error: its number, SQLSTATE and message.
    Db {
        code: u16,
        state: String,
        message: String,
    },
    /// The connection: closed, reset, timed out.
    Io(io::Error),
    /// The server said something plumb does not read; the connection is no longer used.
    Protocol(String),
}

impl std::fmt::Display for MyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MyError::Db {
                code,
                state,
                message,
            } => write!(f, "ERROR {code} ({state}): {message}"),
            MyError::Io(e) => write!(f, "{e}"),
            MyError::Protocol(m) => write!(f, "{m}"),
        }
    }
}

impl std::error::Error for MyError {}

impl From<io::Error> for MyError {
    fn from(e: io::Error) -> MyError {
        MyError::Io(e)
    }
}

type Res<T> = std::result::Result<T, MyError>;

fn bad(what: &str) -> MyError {
    MyError::Protocol(format!("the server sent {what} plumb cannot read"))
}

/// Where and as whom to log in.
pub struct Login {
    addr: Addr,
    user: String,
    password: Option<String>,
    db: String,
    timeout: Duration,
}

impl Login {
    /// From the `mysql` crate's parsed URL (socket, or host and port; user; password), with
    /// `db` as the database.
    pub(crate) fn from_opts(o: &mysql::Opts, db: &str) -> Login {
        let addr = match o.get_socket() {
            Some(s) => Addr::Unix(PathBuf::from(s)),
            None => Addr::Tcp(o.get_ip_or_hostname().to_string(), o.get_tcp_port()),
        };
        Login {
            addr,
            user: o.get_user().unwrap_or_default().to_string(),
            password: o.get_pass().map(str::to_string),
            db: db.to_string(),
            timeout: o
                .get_tcp_connect_timeout()
                .unwrap_or(Duration::from_secs(10)),
        }
    }
}

/// A prepared statement: its id, its parameters and the type of its first column (if it
/// returns rows and the server said).
pub struct Stmt {
    id: u32,
    params: u16,
    first: Option<Meta>,
}

/// What a result's rows hold: the first column's type and how many columns there are.
#[derive(Clone, Copy)]
struct Meta {
    ty: u8,
    cols: usize,
}

/// One session.
pub struct MyWire {
    sock: Sock,
    rbuf: Vec<u8>,
    start: usize,
    end: usize,
    wbuf: Vec<u8>,
    id: u32,
    caps: u32,
    cache_meta: bool,
    dead: bool,
}

/// A little reader over a packet's bytes: every read is checked, nothing panics.
struct Cur<'a>(&'a [u8]);

impl<'a> Cur<'a> {
    fn take(&mut self, n: usize) -> Res<&'a [u8]> {
        if self.0.len() < n {
            return Err(bad("a packet shorter than it says"));
        }
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        Ok(a)
    }
    fn u8(&mut self) -> Res<u8> {
        Ok(self.take(1)?[0])
    }
    fn u16(&mut self) -> Res<u16> {
        let b = self.take(2)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }
    fn u32(&mut self) -> Res<u32> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn lenenc(&mut self) -> Res<u64> {
        Ok(match self.u8()? {
            n @ 0..=0xFA => n as u64,
            0xFC => self.u16()? as u64,
            0xFD => {
                let b = self.take(3)?;
                u32::from_le_bytes([b[0], b[1], b[2], 0]) as u64
            }
            0xFE => {
                let b = self.take(8)?;
                u64::from_le_bytes(b.try_into().map_err(|_| bad("a length"))?)
            }
            _ => return Err(bad("a length")),
        })
    }
    fn lenenc_bytes(&mut self) -> Res<&'a [u8]> {
        let n = self.lenenc()?;
        self.take(usize::try_from(n).map_err(|_| bad("a length"))?)
    }
    fn nul_str(&mut self) -> Res<&'a [u8]> {
        let i = self
            .0
            .iter()
            .position(|&b| b == 0)
            .ok_or_else(|| bad("a string without its end"))?;
        let s = self.take(i)?;
        self.take(1)?;
        Ok(s)
    }
    fn rest(&mut self) -> &'a [u8] {
        std::mem::take(&mut self.0)
    }
}

fn err_packet(p: &[u8]) -> MyError {
    let mut c = Cur(p.get(1..).unwrap_or_default());
    let Ok(code) = c.u16() else {
        return bad("an error packet");
    };
    let mut state = String::from("HY000");
    if c.0.first() == Some(&b'#') && c.0.len() >= 6 {
        state = String::from_utf8_lossy(&c.0[1..6]).into_owned();
        c.0 = &c.0[6..];
    }
    MyError::Db {
        code,
        state,
        message: String::from_utf8_lossy(c.rest()).into_owned(),
    }
}

/// The status flags of an OK packet (header 0x00 or, closing a result set, 0xFE).
fn ok_status(p: &[u8]) -> Res<u16> {
    let mut c = Cur(p.get(1..).unwrap_or_default());
    c.lenenc()?;
    c.lenenc()?;
    c.u16()
}

/// An EOF packet's status flags (servers without CLIENT_DEPRECATE_EOF).
fn eof_status(p: &[u8]) -> Res<u16> {
    let mut c = Cur(p.get(1..).unwrap_or_default());
    c.u16()?;
    c.u16()
}

/// The type byte of a column definition.
fn column_type(p: &[u8]) -> Res<u8> {
    let mut c = Cur(p);
    for _ in 0..6 {
        c.lenenc_bytes()?;
    }
    c.lenenc()?;
    c.u16()?;
    c.u32()?;
    c.u8()
}

impl MyWire {
    /// Something another thread can call to close the session: a read blocked on a server that
    /// says nothing returns at once.
    pub fn closer(&self) -> Box<dyn Fn() + Send + Sync> {
        self.sock.closer()
    }
}

impl MyWire {
    /// Open a session and log in; the login may take up to the connect timeout.
    pub fn connect(l: &Login) -> Res<MyWire> {
        let sock = Sock::open(&l.addr, l.timeout)?;
        sock.set_timeout(Some(l.timeout))?;
        let mut w = MyWire {
            sock,
            rbuf: vec![0; 16 << 10],
            start: 0,
            end: 0,
            wbuf: Vec::with_capacity(1024),
            id: 0,
            caps: 0,
            cache_meta: false,
            dead: false,
        };
        w.login(l).inspect_err(|_| w.dead = true)?;
        w.sock.set_timeout(None)?;
        Ok(w)
    }

    /// The server's id for this session (what KILL QUERY takes).
    pub(crate) fn connection_id(&self) -> u32 {
        self.id
    }

    pub(crate) fn is_dead(&self) -> bool {
        self.dead
    }

    fn login(&mut self, l: &Login) -> Res<()> {
        let (seq, hello) = self.packet()?;
        let p = &self.rbuf[hello];
        if p.first() == Some(&0xFF) {
            return Err(err_packet(p));
        }
        let mut c = Cur(p);
        if c.u8()? != 10 {
            return Err(MyError::Protocol(
                "the server does not speak the MySQL protocol (version 10)".into(),
            ));
        }
        c.nul_str()?;
        let id = c.u32()?;
        let mut nonce = c.take(8)?.to_vec();
        c.u8()?;
        let mut caps = c.u16()? as u32;
        c.u8()?;
        c.u16()?;
        caps |= (c.u16()? as u32) << 16;
        let auth_len = c.u8()? as usize;
        c.take(6)?;
        let ext = c.u32()?;
        if caps & CLIENT_SECURE_CONNECTION != 0 {
            let n = auth_len.saturating_sub(8).max(13);
            let part = c.take(n)?;
            nonce.extend_from_slice(part.strip_suffix(&[0]).unwrap_or(part));
        }
        let plugin = if caps & CLIENT_PLUGIN_AUTH != 0 {
            String::from_utf8_lossy(c.nul_str().unwrap_or(c.rest())).into_owned()
        } else {
            String::new()
        };
        let need = CLIENT_PROTOCOL_41 | CLIENT_SECURE_CONNECTION | CLIENT_PLUGIN_AUTH;
        if caps & need != need {
            return Err(MyError::Protocol(
                "the server is older than plumb's client speaks (MySQL 5.5 / MariaDB 5.5 and later)"
                    .into(),
            ));
        }
        let want = CLIENT_LONG_FLAG
            | CLIENT_CONNECT_WITH_DB
            | CLIENT_PROTOCOL_41
            | CLIENT_TRANSACTIONS
            | CLIENT_SECURE_CONNECTION
            | CLIENT_MULTI_RESULTS
            | CLIENT_PS_MULTI_RESULTS
            | CLIENT_PLUGIN_AUTH
            | CLIENT_PLUGIN_AUTH_LENENC_DATA
            | CLIENT_DEPRECATE_EOF;
        self.caps = caps & want;
        self.id = id;
        let mariadb = caps & CLIENT_MYSQL == 0;
        self.cache_meta = mariadb && ext & MARIADB_CLIENT_CACHE_METADATA != 0;

        let (plugin, data) = self.auth_data(&plugin, &nonce, l)?;
        let mut b = Vec::with_capacity(128);
        b.extend_from_slice(&self.caps.to_le_bytes());
        b.extend_from_slice(&(MAX_PACKET as u32).to_le_bytes());
        b.push(CHARSET);
        b.extend_from_slice(&[0; 19]);
        let ext_out = if self.cache_meta {
            MARIADB_CLIENT_CACHE_METADATA
        } else {
            0
        };
        b.extend_from_slice(&ext_out.to_le_bytes());
        b.extend_from_slice(l.user.as_bytes());
        b.push(0);
        if self.caps & CLIENT_PLUGIN_AUTH_LENENC_DATA != 0 {
            put_lenenc(&mut b, data.len() as u64);
        } else {
            b.push(data.len() as u8);
        }
        b.extend_from_slice(&data);
        b.extend_from_slice(l.db.as_bytes());
        b.push(0);
        b.extend_from_slice(plugin.as_bytes());
        b.push(0);
        self.send_packet(seq.wrapping_add(1), &b)?;
        loop {
            let (seq, r) = self.packet()?;
            let p = self.rbuf[r].to_vec();
            match p.first() {
                Some(0x00) => return Ok(()),
                Some(0xFF) => return Err(err_packet(&p)),
                Some(0xFE) => {
                    // Another authentication method, with its own nonce.
                    let mut c = Cur(&p[1..]);
                    let name = String::from_utf8_lossy(c.nul_str().unwrap_or(&[])).into_owned();
                    let rest = c.rest();
                    let nonce = rest.strip_suffix(&[0]).unwrap_or(rest).to_vec();
                    let (_, data) = self.auth_data(&name, &nonce, l)?;
                    self.send_packet(seq.wrapping_add(1), &data)?;
                }
                _ => {
                    return Err(MyError::Protocol(format!(
                        "the server continued the login with {plugin} in a way plumb's load client does not speak (mysql_native_password and unix_socket it does)"
                    )))
                }
            }
        }
    }

    /// What to answer a login method with.
    fn auth_data(&self, plugin: &str, nonce: &[u8], l: &Login) -> Res<(String, Vec<u8>)> {
        match plugin {
            "mysql_native_password" | "" => {
                let d = match &l.password {
                    Some(p) if !p.is_empty() => {
                        let n = nonce.get(..20).ok_or_else(|| bad("a short login nonce"))?;
                        mysql_common::scramble::scramble_native(n, p.as_bytes())
                            .map(|s| s.to_vec())
                            .unwrap_or_default()
                    }
                    _ => Vec::new(),
                };
                Ok(("mysql_native_password".into(), d))
            }
            // The server checks the socket's peer; nothing to send.
            "unix_socket" | "auth_socket" => Ok((plugin.to_string(), Vec::new())),
            "mysql_clear_password" => Err(MyError::Protocol(
                "the server asks for the password in clear text; plumb does not send it so".into(),
            )),
            other => Err(MyError::Protocol(format!(
                "the server asks for the {other} login, which plumb's load client does not speak (mysql_native_password and unix_socket it does)"
            ))),
        }
    }

    /// Prepare `sql`.
    pub fn prepare(&mut self, sql: &str) -> Res<Stmt> {
        self.command(COM_STMT_PREPARE, sql.as_bytes())?;
        let (_, r) = self.packet()?;
        let p = &self.rbuf[r];
        match p.first() {
            Some(0x00) => {}
            Some(0xFF) => return Err(err_packet(p)),
            _ => return Err(self.broken("a prepare reply")),
        }
        let mut c = Cur(&p[1..]);
        let (id, cols, params) = (c.u32()?, c.u16()?, c.u16()?);
        let mut first = None;
        if params > 0 {
            self.skip_defs(params as usize)?;
        }
        if cols > 0 {
            first = self.defs(cols as usize)?;
        }
        Ok(Stmt { id, params, first })
    }

    /// Run a prepared statement: the first row's first column if it is an integer (the point
    /// select's balance), and the rows counted.
    pub fn execute(&mut self, s: &mut Stmt, params: &[Param<'_>]) -> Res<(Option<i64>, u64)> {
        if params.len() != s.params as usize {
            return Err(MyError::Protocol(format!(
                "a statement of {} parameters was given {}",
                s.params,
                params.len()
            )));
        }
        let mut b = std::mem::take(&mut self.wbuf);
        b.clear();
        b.extend_from_slice(&[0, 0, 0, 0, COM_STMT_EXECUTE]);
        b.extend_from_slice(&s.id.to_le_bytes());
        b.push(0);
        b.extend_from_slice(&1u32.to_le_bytes());
        if !params.is_empty() {
            b.extend(std::iter::repeat_n(0, params.len().div_ceil(8)));
            b.push(1);
            for p in params {
                b.push(match p {
                    Param::Int(_) => TYPE_LONGLONG,
                    Param::Text(_) => TYPE_VAR_STRING,
                });
                b.push(0);
            }
            for p in params {
                match p {
                    Param::Int(v) => b.extend_from_slice(&v.to_le_bytes()),
                    Param::Text(t) => {
                        put_lenenc(&mut b, t.len() as u64);
                        b.extend_from_slice(t.as_bytes());
                    }
                }
            }
        }
        self.wbuf = b;
        self.send_framed(0)?;
        self.results(true, &mut s.first)
    }

    /// Run `sql` as text, to the end of all its results.
    pub fn query(&mut self, sql: &str) -> Res<u64> {
        self.command(COM_QUERY, sql.as_bytes())?;
        self.results(false, &mut None).map(|(_, n)| n)
    }

    fn command(&mut self, cmd: u8, body: &[u8]) -> Res<()> {
        self.wbuf.clear();
        self.wbuf.extend_from_slice(&[0, 0, 0, 0, cmd]);
        self.wbuf.extend_from_slice(body);
        self.send_framed(0)
    }

    /// Send `wbuf` (a 4-byte gap, then the payload) as packet `seq`.
    fn send_framed(&mut self, seq: u8) -> Res<()> {
        if self.dead {
            return Err(MyError::Io(io::Error::new(
                io::ErrorKind::NotConnected,
                "the connection is closed",
            )));
        }
        let n = self.wbuf.len() - 4;
        if n >= MAX_PACKET {
            return Err(MyError::Protocol(format!(
                "a statement of {n} bytes (plumb sends at most {MAX_PACKET})"
            )));
        }
        self.wbuf[..4].copy_from_slice(&[n as u8, (n >> 8) as u8, (n >> 16) as u8, seq]);
        let r = self.sock.write_all(&self.wbuf);
        r.map_err(|e| self.died(e))
    }

    fn send_packet(&mut self, seq: u8, body: &[u8]) -> Res<()> {
        self.wbuf.clear();
        self.wbuf.extend_from_slice(&[0, 0, 0, 0]);
        self.wbuf.extend_from_slice(body);
        self.send_framed(seq)
    }

    /// Read a command's results to the end (every result set, every OK, through
    /// SERVER_MORE_RESULTS_EXISTS): the first integer of the first row, and the rows.
    fn results(&mut self, binary: bool, first: &mut Option<Meta>) -> Res<(Option<i64>, u64)> {
        let (mut value, mut rows) = (None, 0u64);
        loop {
            let (_, r) = self.packet()?;
            let p = &self.rbuf[r];
            let status = match p.first() {
                Some(0x00) => ok_status(p)?,
                Some(0xFF) => {
                    // An error ends the command (and every result still to come).
                    return Err(err_packet(p));
                }
                Some(0xFB) => {
                    self.dead = true;
                    return Err(MyError::Protocol(
                        "the server asked for a local file (LOAD DATA LOCAL); plumb sends none and closed the connection".into(),
                    ));
                }
                Some(_) => {
                    let mut c = Cur(p);
                    let n = c.lenenc()? as usize;
                    let meta = if self.cache_meta { c.u8()? == 1 } else { true };
                    if meta {
                        let t = self.defs(n)?;
                        if binary {
                            *first = t;
                        }
                    }
                    loop {
                        let (_, r) = self.packet()?;
                        let p = &self.rbuf[r];
                        match p.first() {
                            Some(0xFE) if self.caps & CLIENT_DEPRECATE_EOF != 0 => {
                                break ok_status(p)?;
                            }
                            Some(0xFE) => break eof_status(p)?,
                            Some(0xFF) => return Err(err_packet(p)),
                            _ => {
                                if rows == 0 {
                                    value = first_int(p, binary, *first);
                                }
                                rows += 1;
                                if rows > super::wire::MAX_ROWS {
                                    return Err(self.broken(&format!(
                                        "more than {} rows for one statement (plumb's statements read a few)",
                                        super::wire::MAX_ROWS
                                    )));
                                }
                            }
                        }
                    }
                }
                None => return Err(self.broken("an empty packet")),
            };
            if status & SERVER_MORE_RESULTS_EXISTS == 0 {
                return Ok((value, rows));
            }
        }
    }

    /// Read `n` column (or parameter) definitions and the EOF after them: the first one's type.
    fn defs(&mut self, n: usize) -> Res<Option<Meta>> {
        let mut first = None;
        for i in 0..n {
            let (_, r) = self.packet()?;
            if i == 0 {
                first = Some(Meta {
                    ty: column_type(&self.rbuf[r])?,
                    cols: n,
                });
            }
        }
        if self.caps & CLIENT_DEPRECATE_EOF == 0 {
            self.packet()?;
        }
        Ok(first)
    }

    fn skip_defs(&mut self, n: usize) -> Res<()> {
        self.defs(n).map(|_| ())
    }

    fn broken(&mut self, what: &str) -> MyError {
        self.dead = true;
        bad(what)
    }

    fn died(&mut self, e: io::Error) -> MyError {
        self.dead = true;
        MyError::Io(e)
    }

    /// The next packet, read whole (its sequence number and where it lies in `rbuf`); a split
    /// packet (16 MiB or more) is refused unread.
    fn packet(&mut self) -> Res<(u8, std::ops::Range<usize>)> {
        loop {
            let have = self.end - self.start;
            if have >= 4 {
                let h = &self.rbuf[self.start..self.start + 4];
                let len = u32::from_le_bytes([h[0], h[1], h[2], 0]) as usize;
                let seq = h[3];
                if len >= MAX_PACKET {
                    self.dead = true;
                    return Err(MyError::Protocol(format!(
                        "the server sent a packet of {len} bytes or more (plumb reads less than {MAX_PACKET})"
                    )));
                }
                if have >= 4 + len {
                    let r = self.start + 4..self.start + 4 + len;
                    self.start += 4 + len;
                    return Ok((seq, r));
                }
                if self.start + 4 + len > self.rbuf.len() {
                    // Make room: move what is left to the front, grow if still too small.
                    self.rbuf.copy_within(self.start..self.end, 0);
                    self.end -= self.start;
                    self.start = 0;
                    if 4 + len > self.rbuf.len() {
                        self.rbuf.resize(4 + len, 0);
                    }
                }
            } else if self.start > 0 && self.start == self.end {
                self.start = 0;
                self.end = 0;
            } else if self.start + 4 > self.rbuf.len() {
                self.rbuf.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
            }
            let n = match self.sock.read(&mut self.rbuf[self.end..]) {
                Ok(0) => {
                    return Err(self.died(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "the server closed the connection",
                    )))
                }
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(self.died(e)),
            };
            self.end += n;
        }
    }
}

/// The first column of a row as an integer, where it is one.
fn first_int(p: &[u8], binary: bool, meta: Option<Meta>) -> Option<i64> {
    if binary {
        // 0x00, then the NULL bitmap (columns + 2 bits, the first column's is bit 2), then
        // the values.
        let m = meta?;
        if p.get(1)? & 0b100 != 0 {
            return None;
        }
        let v = p.get(1 + (m.cols + 9) / 8..)?;
        match m.ty {
            0x08 => Some(i64::from_le_bytes(v.get(..8)?.try_into().ok()?)),
            0x03 | 0x09 => Some(i32::from_le_bytes(v.get(..4)?.try_into().ok()?) as i64),
            _ => None,
        }
    } else {
        let mut c = Cur(p);
        std::str::from_utf8(c.lenenc_bytes().ok()?)
            .ok()?
            .parse()
            .ok()
    }
}

fn put_lenenc(b: &mut Vec<u8>, n: u64) {
    match n {
        0..=0xFA => b.push(n as u8),
        0xFB..=0xFFFF => {
            b.push(0xFC);
            b.extend_from_slice(&(n as u16).to_le_bytes());
        }
        0x1_0000..=0xFF_FFFF => {
            b.push(0xFD);
            b.extend_from_slice(&(n as u32).to_le_bytes()[..3]);
        }
        _ => {
            b.push(0xFE);
            b.extend_from_slice(&n.to_le_bytes());
        }
    }
}

impl Drop for MyWire {
    fn drop(&mut self) {
        if !self.dead {
            let _ = self.command(COM_QUIT, &[]);
        }
    }
}

#[cfg(test)]
mod tests {
    //! A scripted peer on a real Unix socket plays the server: what a hostile or broken one
    //! sends cannot be produced by a real MariaDB.
    use super::*;
    use std::os::unix::net::UnixListener;
    use std::time::Instant;

    fn pkt(seq: u8, body: &[u8]) -> Vec<u8> {
        let n = body.len();
        let mut v = vec![n as u8, (n >> 8) as u8, (n >> 16) as u8, seq];
        v.extend_from_slice(body);
        v
    }

    const CAPS: u32 = CLIENT_PROTOCOL_41
        | CLIENT_SECURE_CONNECTION
        | CLIENT_PLUGIN_AUTH
        | CLIENT_PLUGIN_AUTH_LENENC_DATA
        | CLIENT_DEPRECATE_EOF
        | CLIENT_MULTI_RESULTS
        | CLIENT_PS_MULTI_RESULTS
        | CLIENT_CONNECT_WITH_DB
        | CLIENT_TRANSACTIONS;

    const NONCE: &[u8; 20] = b"abcdefghijklmnopqrst";

    fn greeting() -> Vec<u8> {
        let mut b = vec![10];
        b.extend_from_slice(b"5.5.5-10.11.0-MariaDB\0");
        b.extend_from_slice(&77u32.to_le_bytes());
        b.extend_from_slice(&NONCE[..8]);
        b.push(0);
        b.extend_from_slice(&(CAPS as u16).to_le_bytes());
        b.push(45);
        b.extend_from_slice(&2u16.to_le_bytes());
        b.extend_from_slice(&((CAPS >> 16) as u16).to_le_bytes());
        b.push(21);
        b.extend_from_slice(&[0; 6]);
        b.extend_from_slice(&MARIADB_CLIENT_CACHE_METADATA.to_le_bytes());
        b.extend_from_slice(&NONCE[8..]);
        b.push(0);
        b.extend_from_slice(b"mysql_native_password\0");
        pkt(0, &b)
    }

    fn ok(seq: u8, status: u16) -> Vec<u8> {
        let mut b = vec![0, 0, 0];
        b.extend_from_slice(&status.to_le_bytes());
        b.extend_from_slice(&[0, 0]);
        pkt(seq, &b)
    }

    fn end(seq: u8, status: u16) -> Vec<u8> {
        let mut v = ok(seq, status);
        v[4] = 0xFE;
        v
    }

    fn err(seq: u8, code: u16, state: &str, msg: &str) -> Vec<u8> {
        let mut b = vec![0xFF];
        b.extend_from_slice(&code.to_le_bytes());
        b.push(b'#');
        b.extend_from_slice(state.as_bytes());
        b.extend_from_slice(msg.as_bytes());
        pkt(seq, &b)
    }

    fn coldef(seq: u8, ty: u8) -> Vec<u8> {
        let mut b = Vec::new();
        for s in ["def", "d", "t", "t", "c", "c"] {
            b.push(s.len() as u8);
            b.extend_from_slice(s.as_bytes());
        }
        b.push(0x0c);
        b.extend_from_slice(&63u16.to_le_bytes());
        b.extend_from_slice(&11u32.to_le_bytes());
        b.push(ty);
        b.extend_from_slice(&[0, 0, 0, 0, 0]);
        pkt(seq, &b)
    }

    /// A server on a socket in a temporary directory: each step reads what the client sends
    /// (if asked), then writes bytes. It returns everything the client sent.
    fn server(
        script: Vec<(bool, Vec<u8>)>,
    ) -> (tempfile::TempDir, Login, std::thread::JoinHandle<Vec<u8>>) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("mysqld.sock");
        let l = UnixListener::bind(&path).unwrap();
        let h = std::thread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            s.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
            let mut got = Vec::new();
            let mut b = [0u8; 4096];
            for (read_first, bytes) in script {
                if read_first {
                    let n = s.read(&mut b).unwrap_or(0);
                    got.extend_from_slice(&b[..n]);
                }
                if s.write_all(&bytes).is_err() {
                    break;
                }
            }
            std::thread::sleep(Duration::from_millis(200));
            let n = s.read(&mut b).unwrap_or(0);
            got.extend_from_slice(&b[..n]);
            got
        });
        let login = Login {
            addr: Addr::Unix(path),
            user: "plumb".into(),
            password: Some("s3cret-pw".into()),
            db: "plumb_load".into(),
            timeout: Duration::from_millis(500),
        };
        (dir, login, h)
    }

    fn contains(hay: &[u8], needle: &[u8]) -> bool {
        hay.windows(needle.len()).any(|w| w == needle)
    }

    #[test]
    fn a_login_scrambles_the_password_and_a_statement_is_one_packet() {
        let mut prep = {
            let mut b = vec![0];
            b.extend_from_slice(&9u32.to_le_bytes());
            b.extend_from_slice(&1u16.to_le_bytes());
            b.extend_from_slice(&1u16.to_le_bytes());
            b.extend_from_slice(&[0, 0, 0]);
            pkt(1, &b)
        };
        prep.extend(coldef(2, TYPE_LONGLONG));
        prep.extend(coldef(3, TYPE_LONGLONG));
        // Column count 1, "metadata follows" 0, one binary row holding 42, the end.
        let mut rows = pkt(1, &[1, 0]);
        let mut row = vec![0, 0];
        row.extend_from_slice(&42i64.to_le_bytes());
        rows.extend(pkt(2, &row));
        rows.extend(end(3, 2));
        let (_d, login, h) = server(vec![
            (false, greeting()),
            (true, ok(2, 2)),
            (true, prep),
            (true, rows),
        ]);
        let mut c = MyWire::connect(&login).unwrap();
        assert_eq!(c.connection_id(), 77);
        let mut s = c.prepare("SELECT abalance FROM a WHERE aid = ?").unwrap();
        assert_eq!(c.execute(&mut s, &[Param::Int(7)]).unwrap(), (Some(42), 1));
        drop(c);
        let got = h.join().unwrap();
        assert!(
            !contains(&got, b"s3cret-pw"),
            "the password went out in clear"
        );
        let scramble = mysql_common::scramble::scramble_native(NONCE, b"s3cret-pw").unwrap();
        assert!(contains(&got, &scramble), "no scrambled password");
        assert!(contains(&got, b"plumb\0"));
        assert!(contains(&got, b"plumb_load\0"));
        // COM_STMT_EXECUTE: statement 9, no cursor, one iteration, no NULLs, types sent, a
        // BIGINT 7.
        let mut exec = vec![0x17, 9, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, TYPE_LONGLONG, 0];
        exec.extend_from_slice(&7i64.to_le_bytes());
        assert!(contains(&got, &pkt(0, &exec)), "{got:?}");
        assert!(got.ends_with(&pkt(0, &[COM_QUIT])));
    }

    #[test]
    fn an_error_is_kept_with_its_number_and_the_session_goes_on() {
        let (_d, login, h) = server(vec![
            (false, greeting()),
            (true, ok(2, 2)),
            (
                true,
                err(1, 1213, "40001", "Deadlock found when trying to get lock"),
            ),
            (true, ok(1, 2)),
        ]);
        let mut c = MyWire::connect(&login).unwrap();
        match c.query("UPDATE t SET x = 1") {
            Err(MyError::Db {
                code,
                state,
                message,
            }) => {
                assert_eq!((code, state.as_str()), (1213, "40001"));
                assert!(message.starts_with("Deadlock"));
            }
            other => panic!("{other:?}"),
        }
        assert!(!c.is_dead());
        c.query("COMMIT").unwrap();
        drop(c);
        h.join().unwrap();
    }

    #[test]
    fn every_result_of_a_procedure_is_read() {
        // CALL: a result set (one text row), an OK saying more follows, the final OK.
        let mut r = pkt(1, &[1, 1]);
        r.extend(coldef(2, 3));
        r.extend(pkt(3, &[1, b'7']));
        r.extend(end(4, 2 | SERVER_MORE_RESULTS_EXISTS));
        r.extend(ok(5, 2));
        let (_d, login, h) = server(vec![
            (false, greeting()),
            (true, ok(2, 2)),
            (true, r),
            (true, ok(1, 2)),
        ]);
        let mut c = MyWire::connect(&login).unwrap();
        assert_eq!(c.query("CALL p()").unwrap(), 1);
        // The next statement reads its own reply, not the procedure's leftovers.
        assert_eq!(c.query("COMMIT").unwrap(), 0);
        drop(c);
        h.join().unwrap();
    }

    #[test]
    fn a_split_packet_and_a_local_file_request_are_refused() {
        let (_d, login, h) = server(vec![
            (false, greeting()),
            (true, ok(2, 2)),
            (true, vec![0xFF, 0xFF, 0xFF, 1, 0, 0]),
        ]);
        let mut c = MyWire::connect(&login).unwrap();
        let e = c.query("SELECT 1").unwrap_err();
        assert!(e.to_string().contains("plumb reads less than"), "{e}");
        assert!(c.is_dead());
        drop(c);
        h.join().unwrap();

        let mut file = vec![0xFB];
        file.extend_from_slice(b"/etc/shadow");
        let (_d, login, h) = server(vec![
            (false, greeting()),
            (true, ok(2, 2)),
            (true, pkt(1, &file)),
        ]);
        let mut c = MyWire::connect(&login).unwrap();
        let e = c.query("SELECT 1").unwrap_err();
        assert!(e.to_string().contains("local file"), "{e}");
        assert!(c.is_dead());
        drop(c);
        let got = h.join().unwrap();
        assert!(!contains(&got, b"root:"), "a file went out");
        assert!(
            !got.ends_with(&pkt(0, &[COM_QUIT])),
            "the dead session was used again"
        );
    }

    #[test]
    fn a_clear_text_password_request_is_refused_and_a_login_error_kept() {
        let mut sw = vec![0xFE];
        sw.extend_from_slice(b"mysql_clear_password\0");
        let (_d, login, h) = server(vec![(false, greeting()), (true, pkt(2, &sw))]);
        let e = MyWire::connect(&login).err().unwrap();
        assert!(e.to_string().contains("clear text"), "{e}");
        let got = h.join().unwrap();
        assert!(!contains(&got, b"s3cret-pw"));

        let (_d, login, h) = server(vec![
            (false, greeting()),
            (
                true,
                err(
                    2,
                    1045,
                    "28000",
                    "Access denied for user 'plumb'@'localhost'",
                ),
            ),
        ]);
        match MyWire::connect(&login) {
            Err(MyError::Db { code: 1045, .. }) => {}
            other => panic!("{:?}", other.err()),
        }
        h.join().unwrap();
    }

    #[test]
    fn a_silent_server_times_the_login_out_and_a_closed_one_is_an_error() {
        let (_d, login, h) = server(vec![(false, Vec::new())]);
        let t = Instant::now();
        assert!(matches!(MyWire::connect(&login), Err(MyError::Io(_))));
        assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
        h.join().unwrap();

        // Half a reply, then the connection closes.
        let (_d, login, h) = server(vec![
            (false, greeting()),
            (true, ok(2, 2)),
            (true, vec![40, 0, 0, 1, 3]),
        ]);
        let mut c = MyWire::connect(&login).unwrap();
        h.join().unwrap();
        assert!(matches!(c.query("SELECT 1"), Err(MyError::Io(_))));
        assert!(c.is_dead());
        // Garbage for a greeting.
        let (_d, login, h) = server(vec![(false, pkt(0, b"HTTP/1.1 400"))]);
        let e = MyWire::connect(&login).err().unwrap();
        assert!(e.to_string().contains("MySQL protocol"), "{e}");
        h.join().unwrap();
    }
}
