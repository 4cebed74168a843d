//! The SQL Server driver itself (tiberius over TDS), run inside plumb's own client process
//! (`mssql_client`): the URL, the login, queries with their time and size bounds, and cells
//! turned into plumb's [`Cell`]s.

use crate::mssql_result::{Cell, ResultSet};
use crate::{Error, Kind, Result, Target};

// ---- the connection (tiberius over TDS) ----

/// Parse `mssql://user:password@host:port/database?trust_server_certificate=true&encrypt=on`
/// (the `url` crate's parser; user, password and database percent-decoded).
///
/// `encrypt`: `on` (also true, yes, mandatory; the default) encrypts the whole session, `off`
/// (false, no, optional) the login only, `not_supported` nothing. `strict` (TDS 8.0, which SQL
/// Server 2022's Force Strict Encryption requires) is refused: the driver does not speak it.
pub fn parse_url(t: &Target) -> Result<tiberius::Config> {
    let shown = t.shown();
    let bad = |m: &str| Error::Url(format!("{shown}: {m}"));
    let u = url::Url::parse(&t.url).map_err(|e| match e {
        url::ParseError::InvalidPort => bad("the port is not a number"),
        other => bad(&format!("not a URL ({other})")),
    })?;
    let decode = |s: &str| {
        url::form_urlencoded::parse(format!("x={}", s.replace('+', "%2B")).as_bytes())
            .next()
            .map(|(_, v)| v.into_owned())
            .unwrap_or_default()
    };
    let user = decode(u.username());
    let pw = u.password().map(decode);
    let host = u.host_str().unwrap_or("").to_string();
    let port = u.port().unwrap_or(1433);
    let db = decode(u.path().trim_start_matches('/'));
    if host.is_empty() || user.is_empty() {
        return Err(bad("needs user@host"));
    }
    let query: Vec<(String, String)> = u
        .query_pairs()
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect();
    let password = t
        .password
        .clone()
        .or(pw)
        .or_else(|| std::env::var("MSSQL_PASSWORD").ok())
        .unwrap_or_default();
    let mut c = tiberius::Config::new();
    c.host(&host);
    c.port(port);
    c.authentication(tiberius::AuthMethod::sql_server(&user, &password));
    if !db.is_empty() {
        c.database(&db);
    }
    c.application_name("plumb");
    for (k, v) in &query {
        let v = if v.is_empty() {
            "true".to_string()
        } else {
            v.to_ascii_lowercase()
        };
        match k.to_ascii_lowercase().as_str() {
            "trust_server_certificate" | "trustservercertificate" => match v.as_str() {
                "true" | "yes" | "on" => c.trust_cert(),
                "false" | "no" | "off" => {}
                other => {
                    return Err(bad(&format!(
                        "{k}={other}: give true or false"
                    )))
                }
            },
            "encrypt" => c.encryption(match v.as_str() {
                "on" | "true" | "yes" | "mandatory" | "required" => {
                    tiberius::EncryptionLevel::Required
                }
                "off" | "false" | "no" | "optional" => tiberius::EncryptionLevel::Off,
                "not_supported" => tiberius::EncryptionLevel::NotSupported,
                "strict" => {
                    return Err(bad(
                        "encrypt=strict (TDS 8.0, needed when the server forces strict encryption) is not supported by the SQL Server driver plumb uses; connect with encrypt=on to a server that does not force strict encryption",
                    ))
                }
                other => {
                    return Err(bad(&format!(
                        "encrypt={other}: give on, off, not_supported (strict is not supported)"
                    )))
                }
            }),
            _ => return Err(bad(&format!("unknown option {k}"))),
        }
    }
    Ok(c)
}

type TdsClient = tiberius::Client<tokio_util::compat::Compat<tokio::net::TcpStream>>;

/// A SQL Server session driven from synchronous code through its own small runtime: the
/// driver itself, run only inside plumb's client process ([`crate::mssql_client`]), which
/// bounds what a server can make it do.
pub(crate) struct Direct {
    rt: tokio::runtime::Runtime,
    client: TdsClient,
    pub session_id: u64,
    redirected_to: Option<String>,
}

/// The server's own words for an error it sent ("Invalid object name 'x'. (error 208)");
/// the driver's description for anything else.
fn terr(what: &str, e: tiberius::error::Error) -> Error {
    match e {
        tiberius::error::Error::Io { .. } => Error::Gone(format!("{what}: {e}")),
        tiberius::error::Error::Server(t) => Error::Query {
            what: what.to_string(),
            message: format!("{} (error {})", t.message().trim_end(), t.code()),
            source: None,
        },
        other => Error::Query {
            what: what.to_string(),
            message: other.to_string(),
            source: Some(Box::new(other)),
        },
    }
}

/// How long a server may take to complete the login once the connection is open.
const LOGIN_WAIT: std::time::Duration = std::time::Duration::from_secs(15);
/// How long a query may take, first byte to last.
pub(crate) const QUERY_WAIT: std::time::Duration = std::time::Duration::from_secs(30);
/// The most rows of one result plumb keeps.
pub const MAX_ROWS: usize = 1_000_000;
/// The most bytes of one result plumb keeps (cell text and numbers).
pub const MAX_RESULT_BYTES: usize = 64 << 20;

/// How many routing redirects a connection follows (Azure SQL Managed Instance's redirect
/// connection policy sends one).
const MAX_REDIRECTS: usize = 3;

/// Run the driver, turning a panic inside it (it panics on some malformed server answers)
/// into an error.
fn guarded<T>(what: &str, f: impl FnOnce() -> Result<T>) -> Result<T> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|p| {
        let why = p
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| p.downcast_ref::<String>().cloned())
            .unwrap_or_default();
        Err(Error::Refused(format!(
            "{what}: the SQL Server driver could not handle what the server sent ({why}); the connection is closed"
        )))
    })
}

impl Direct {
    pub(crate) fn connect(t: &Target) -> Result<Direct> {
        use tokio_util::compat::TokioAsyncWriteCompatExt;
        let mut cfg = parse_url(t)?;
        let label = t.shown();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| Error::Setup(e.to_string()))?;
        let connect_err = |m: String| Error::Connect {
            url: label.clone(),
            message: crate::with_hint(Kind::Sqlserver, m),
            source: None,
        };
        let mut redirects = Vec::new();
        let client = loop {
            let attempt = guarded(&label, || {
                Ok(rt.block_on(async {
                    let addr = cfg.get_addr();
                    let tcp = tokio::time::timeout(
                        std::time::Duration::from_secs(10),
                        tokio::net::TcpStream::connect(&addr),
                    )
                    .await
                    .map_err(|_| Err(format!("connecting to {addr} timed out after 10 s")))?
                    .map_err(|e| Err(format!("{addr}: {e}")))?;
                    tcp.set_nodelay(true).map_err(|e| Err(e.to_string()))?;
                    let login = tiberius::Client::connect(cfg.clone(), tcp.compat_write());
                    tokio::time::timeout(LOGIN_WAIT, login)
                        .await
                        .map_err(|_| {
                            Err(format!(
                                "{addr} accepted the connection but did not complete the login within {} s",
                                LOGIN_WAIT.as_secs()
                            ))
                        })?
                        .map_err(|e| match e {
                            tiberius::error::Error::Routing { host, port } => Ok((host, port)),
                            tiberius::error::Error::Server(t) => {
                                Err(format!("{} (error {})", t.message().trim_end(), t.code()))
                            }
                            other => Err(other.to_string()),
                        })
                }))
            })?;
            match attempt {
                Ok(c) => break c,
                // The server sends the client elsewhere: connect there, as drivers do.
                Err(Ok((host, port))) if redirects.len() < MAX_REDIRECTS => {
                    redirects.push(format!("{host}:{port}"));
                    cfg.host(&host);
                    cfg.port(port);
                }
                Err(Ok((host, port))) => {
                    return Err(connect_err(format!(
                        "redirected more than {MAX_REDIRECTS} times ({}, then {host}:{port})",
                        redirects.join(", ")
                    )))
                }
                Err(Err(m)) if redirects.is_empty() => return Err(connect_err(m)),
                Err(Err(m)) => {
                    return Err(connect_err(format!(
                        "redirected to {}: {m}",
                        redirects.join(", then ")
                    )))
                }
            }
        };
        let mut c = Direct {
            rt,
            client,
            session_id: 0,
            redirected_to: redirects.pop(),
        };
        let id = c.query("@@SPID", "SELECT CAST(@@SPID AS int) AS spid")?;
        c.session_id = id.first_f64("spid")?.unwrap_or(0.0) as u64;
        Ok(c)
    }

    /// Run a query and read its first result set: column names from the result's metadata
    /// (so a set without rows still has its columns), then the rows, at most [`MAX_ROWS`] of
    /// them and [`MAX_RESULT_BYTES`] in all (a metric query returns far less; more ends the
    /// connection with an error naming the bound).
    pub(crate) fn query(&mut self, what: &str, sql: &str) -> Result<ResultSet> {
        use futures_util::TryStreamExt;
        let client = &mut self.client;
        let rt = &self.rt;
        guarded(what, || {
            rt.block_on(async {
                tokio::time::timeout(QUERY_WAIT, async {
                    let mut stream = client.simple_query(sql).await.map_err(|e| terr(what, e))?;
                    let mut columns: Option<Vec<String>> = None;
                    let mut rows = Vec::new();
                    let mut bytes = 0usize;
                    while let Some(item) = stream.try_next().await.map_err(|e| terr(what, e))? {
                        match item {
                            tiberius::QueryItem::Metadata(m) if m.result_index() == 0 => {
                                columns =
                                    Some(m.columns().iter().map(|c| c.name().to_string()).collect());
                            }
                            tiberius::QueryItem::Row(r) if r.result_index() == 0 => {
                                let row: Vec<Cell> = r.into_iter().map(cell_of).collect();
                                bytes += row.iter().map(cell_bytes).sum::<usize>();
                                rows.push(row);
                                if rows.len() > MAX_ROWS || bytes > MAX_RESULT_BYTES {
                                    return Err(Error::Refused(format!(
                                        "{what}: the server sent more than {} rows or {} MiB, more than any query plumb runs returns; the connection is closed",
                                        MAX_ROWS,
                                        MAX_RESULT_BYTES >> 20
                                    )));
                                }
                            }
                            // Later result sets are read past, not kept.
                            _ => {}
                        }
                    }
                    Ok(ResultSet {
                        columns: columns.unwrap_or_default(),
                        rows,
                    })
                })
                .await
                .unwrap_or_else(|_| {
                    Err(Error::Gone(format!(
                        "{what}: no answer within {} s (the connection is dropped)",
                        QUERY_WAIT.as_secs()
                    )))
                })
            })
        })
    }

    /// Run statements; the rows they returned, counted as they arrive and not kept.
    pub(crate) fn execute(&mut self, sql: &str) -> Result<u64> {
        use futures_util::TryStreamExt;
        let client = &mut self.client;
        let rt = &self.rt;
        guarded("the workload", || {
            rt.block_on(async {
                let mut stream = client
                    .simple_query(sql)
                    .await
                    .map_err(|e| terr("the workload", e))?;
                let mut rows = 0;
                while let Some(item) = stream
                    .try_next()
                    .await
                    .map_err(|e| terr("the workload", e))?
                {
                    if let tiberius::QueryItem::Row(_) = item {
                        rows += 1;
                    }
                }
                Ok(rows)
            })
        })
    }

    /// Where the server redirected this connection, if it did.
    pub(crate) fn redirected_to(&self) -> Option<&str> {
        self.redirected_to.as_deref()
    }
}

fn cell_bytes(c: &Cell) -> usize {
    match c {
        Cell::Text(t) => t.len() + 24,
        _ => 16,
    }
}

fn cell_of(d: tiberius::ColumnData<'static>) -> Cell {
    use tiberius::ColumnData as D;
    match d {
        D::U8(Some(v)) => Cell::Int(v as i64),
        D::I16(Some(v)) => Cell::Int(v as i64),
        D::I32(Some(v)) => Cell::Int(v as i64),
        D::I64(Some(v)) => Cell::Int(v),
        D::F32(Some(v)) => Cell::Float(v as f64),
        D::F64(Some(v)) => Cell::Float(v),
        D::Bit(Some(b)) => Cell::Int(b as i64),
        D::Numeric(Some(n)) => Cell::Float(n.value() as f64 / 10f64.powi(n.scale() as i32)),
        D::String(Some(s)) => Cell::Text(s.into_owned()),
        D::Guid(Some(g)) => Cell::Text(g.to_string().to_uppercase()),
        D::Binary(Some(b)) => {
            let mut t = String::with_capacity(2 + 2 * b.len());
            t.push_str("0x");
            for x in b.iter() {
                t.push_str(&format!("{x:02X}"));
            }
            Cell::Text(t)
        }
        D::Xml(Some(x)) => Cell::Text(x.to_string()),
        D::DateTime(Some(d)) => {
            // Days since 1900-01-01 and 1/300 s since midnight.
            let ms = (d.seconds_fragments() as u64 * 1000 + 150) / 300;
            Cell::Text(format!(
                "{} {}",
                civil(DAYS_1900 + d.days() as i64),
                clock(ms * 1_000_000, 3)
            ))
        }
        D::SmallDateTime(Some(d)) => Cell::Text(format!(
            "{} {}",
            civil(DAYS_1900 + d.days() as i64),
            clock(d.seconds_fragments() as u64 * 60 * 1_000_000_000, 0)
        )),
        D::Date(Some(d)) => Cell::Text(civil(DAYS_0001 + d.days() as i64)),
        D::Time(Some(t)) => Cell::Text(clock(time_ns(t), t.scale())),
        D::DateTime2(Some(d)) => Cell::Text(format!(
            "{} {}",
            civil(DAYS_0001 + d.date().days() as i64),
            clock(time_ns(d.time()), d.time().scale())
        )),
        D::DateTimeOffset(Some(o)) => {
            // Stored in UTC; shown in its own offset, as SQL Server shows it.
            let d = o.datetime2();
            let off = o.offset() as i64;
            let ns = (DAYS_0001 + d.date().days() as i64) * 86_400_000_000_000
                + time_ns(d.time()) as i64
                + off * 60_000_000_000;
            let (day, in_day) = (
                ns.div_euclid(86_400_000_000_000),
                ns.rem_euclid(86_400_000_000_000),
            );
            let sign = if off < 0 { '-' } else { '+' };
            Cell::Text(format!(
                "{} {} {sign}{:02}:{:02}",
                civil(day),
                clock(in_day as u64, d.time().scale()),
                off.abs() / 60,
                off.abs() % 60
            ))
        }
        _ => Cell::Null,
    }
}

/// Days from 1970-01-01 back to SQL Server's two day zeros.
const DAYS_1900: i64 = -25_567;
const DAYS_0001: i64 = -719_162;

/// A time's nanoseconds since midnight (increments of 10^-scale s).
fn time_ns(t: tiberius::time::Time) -> u64 {
    t.increments() * 10u64.pow(9u32.saturating_sub(t.scale() as u32))
}

/// A day number (days since 1970-01-01) as YYYY-MM-DD (the proleptic Gregorian calendar).
fn civil(days: i64) -> String {
    let (y, m, d) = plumb_sys::date::civil(days);
    format!("{y:04}-{m:02}-{d:02}")
}

/// Nanoseconds since midnight as HH:MM:SS with `digits` decimals.
fn clock(ns: u64, digits: u8) -> String {
    let s = ns / 1_000_000_000;
    let mut out = format!("{:02}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60);
    if digits > 0 {
        let frac = format!("{:09}", ns % 1_000_000_000);
        out.push('.');
        out.push_str(&frac[..(digits as usize).min(9)]);
    }
    out
}

#[cfg(test)]
mod date_tests {
    use super::*;

    #[test]
    fn sql_server_dates_read_as_its_own_text() {
        use tiberius::time::{Date, DateTime, DateTime2, DateTimeOffset, Time};
        use tiberius::ColumnData as D;
        // 2017-06-19 09:29:36.340 (the connect_time of a dm_exec_connections row).
        let days = 42_903; // days from 1900-01-01
        let frags = ((9 * 3600 + 29 * 60 + 36) * 300 + 102) as u32;
        assert_eq!(
            cell_of(D::DateTime(Some(DateTime::new(days, frags)))),
            Cell::Text("2017-06-19 09:29:36.340".into())
        );
        assert_eq!(civil(DAYS_0001), "0001-01-01");
        assert_eq!(civil(0), "1970-01-01");
        assert_eq!(civil(-1), "1969-12-31");
        assert_eq!(civil(19_782), "2024-02-29");
        let t = Time::new(12_345_670, 7); // 1.234567 s at 100 ns increments
        let d2 = DateTime2::new(Date::new(736_498), t);
        assert_eq!(
            cell_of(D::DateTime2(Some(d2))),
            Cell::Text("2017-06-19 00:00:01.2345670".into())
        );
        // Stored in UTC, shown at its offset.
        let o = DateTimeOffset::new(DateTime2::new(Date::new(736_498), Time::new(0, 0)), -300);
        assert_eq!(
            cell_of(D::DateTimeOffset(Some(o))),
            Cell::Text("2017-06-18 19:00:00 -05:00".into())
        );
        assert_eq!(
            cell_of(D::Binary(Some(vec![1u8, 0xab].into()))),
            Cell::Text("0x01AB".into())
        );
    }
}
