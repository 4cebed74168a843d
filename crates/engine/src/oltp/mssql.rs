//! The workloads on SQL Server, written from Microsoft's documentation and **not run against a
//! live server** (none runs on Linux test hosts here): T-SQL schemas with clustered keys, a
//! loader that generates each warehouse (or branch) on the server from a numbers CTE (NEWID()
//! for per-row randomness: RAND() is evaluated once a query), the order-entry transactions as
//! procedures (SET XACT_ABORT ON, one explicit transaction each, a new order's lines as JSON
//! arrays read with OPENJSON/JSON_VALUE: SQL Server 2016, compatibility level 130, or later),
//! and pgbench's statements in a transaction. Each statement goes through plumb's SQL Server
//! client process (`mssql_client`) as text; the inputs are numbers and last names made of
//! TPC-C's fixed syllables, never user text.

use super::holdings::Found;
use super::{Failed, Tx, TxError, Workload};
use crate::mssql_client::MssqlConn;
use crate::{Error, Result, Target};

pub use crate::mssql_client::MssqlConn as Client;

/// A random integer in `0..n` per row, as T-SQL.
fn rnd(n: u64) -> String {
    format!("(ABS(CHECKSUM(NEWID())) % {n})")
}

/// A random string of `lo` to `hi` characters per row.
fn s(lo: u32, hi: u32) -> String {
    format!(
        "LEFT(REPLICATE(CONVERT(varchar(36), NEWID()), 14), {lo} + {})",
        rnd((hi - lo + 1) as u64)
    )
}

/// 1..=100,000 as a CTE named `n` (column `i`), before an INSERT.
const NUMBERS: &str = "WITH t(v) AS (SELECT v FROM (VALUES (0),(1),(2),(3),(4),(5),(6),(7),(8),(9)) x(v)), \
n(i) AS (SELECT a.v + 10 * b.v + 100 * c.v + 1000 * d.v + 10000 * e.v + 1 FROM t a, t b, t c, t d, t e) ";

const SCHEMA: [&str; 10] = [
    "CREATE TABLE warehouse (w_id int NOT NULL PRIMARY KEY, w_name varchar(10), w_street_1 varchar(20), w_street_2 varchar(20), w_city varchar(20), w_state char(2), w_zip char(9), w_tax decimal(4,4), w_ytd decimal(12,2))",
    "CREATE TABLE district (d_id int NOT NULL, d_w_id int NOT NULL, d_name varchar(10), d_street_1 varchar(20), d_street_2 varchar(20), d_city varchar(20), d_state char(2), d_zip char(9), d_tax decimal(4,4), d_ytd decimal(12,2), d_next_o_id int, PRIMARY KEY (d_w_id, d_id))",
    "CREATE TABLE customer (c_id int NOT NULL, c_d_id int NOT NULL, c_w_id int NOT NULL, c_first varchar(16), c_middle char(2), c_last varchar(16), c_street_1 varchar(20), c_street_2 varchar(20), c_city varchar(20), c_state char(2), c_zip char(9), c_phone char(16), c_since datetime2, c_credit char(2), c_credit_lim decimal(12,2), c_discount decimal(4,4), c_balance decimal(12,2), c_ytd_payment decimal(12,2), c_payment_cnt int, c_delivery_cnt int, c_data varchar(500), PRIMARY KEY (c_w_id, c_d_id, c_id))",
    "CREATE INDEX customer_name ON customer (c_w_id, c_d_id, c_last, c_first)",
    "CREATE TABLE history (h_c_id int, h_c_d_id int, h_c_w_id int, h_d_id int, h_w_id int, h_date datetime2, h_amount decimal(6,2), h_data varchar(24))",
    "CREATE TABLE new_order (no_o_id int NOT NULL, no_d_id int NOT NULL, no_w_id int NOT NULL, PRIMARY KEY (no_w_id, no_d_id, no_o_id))",
    "CREATE TABLE orders (o_id int NOT NULL, o_d_id int NOT NULL, o_w_id int NOT NULL, o_c_id int, o_entry_d datetime2, o_carrier_id int, o_ol_cnt int, o_all_local int, PRIMARY KEY (o_w_id, o_d_id, o_id), INDEX orders_customer (o_w_id, o_d_id, o_c_id, o_id))",
    "CREATE TABLE order_line (ol_o_id int NOT NULL, ol_d_id int NOT NULL, ol_w_id int NOT NULL, ol_number int NOT NULL, ol_i_id int, ol_supply_w_id int, ol_delivery_d datetime2, ol_quantity int, ol_amount decimal(6,2), ol_dist_info char(24), PRIMARY KEY (ol_w_id, ol_d_id, ol_o_id, ol_number))",
    "CREATE TABLE item (i_id int NOT NULL PRIMARY KEY, i_im_id int, i_name varchar(24), i_price decimal(5,2), i_data varchar(50))",
    "CREATE TABLE stock (s_i_id int NOT NULL, s_w_id int NOT NULL, s_quantity int, s_dist_01 char(24), s_dist_02 char(24), s_dist_03 char(24), s_dist_04 char(24), s_dist_05 char(24), s_dist_06 char(24), s_dist_07 char(24), s_dist_08 char(24), s_dist_09 char(24), s_dist_10 char(24), s_ytd int, s_order_cnt int, s_remote_cnt int, s_data varchar(50), PRIMARY KEY (s_w_id, s_i_id))",
];

const PGBENCH_SCHEMA: [&str; 4] = [
    "CREATE TABLE pgbench_branches (bid int NOT NULL PRIMARY KEY, bbalance int, filler char(88))",
    "CREATE TABLE pgbench_tellers (tid int NOT NULL PRIMARY KEY, bid int, tbalance int, filler char(84))",
    "CREATE TABLE pgbench_accounts (aid int NOT NULL PRIMARY KEY, bid int, abalance int, filler char(84))",
    "CREATE TABLE pgbench_history (tid int, bid int, aid int, delta int, mtime datetime2, filler char(22))",
];

fn last(n: &str) -> String {
    let syl = super::syllables_sql();
    format!("CONCAT(CHOOSE({n} / 100 + 1, {syl}), CHOOSE({n} / 10 % 10 + 1, {syl}), CHOOSE({n} % 10 + 1, {syl}))")
}

fn zip() -> String {
    format!("CONCAT(RIGHT(CONCAT('000', {}), 4), '11111')", rnd(10000))
}

fn state() -> &'static str {
    "LEFT(CONVERT(varchar(36), NEWID()), 2)"
}

fn items_sql() -> String {
    format!(
        "{NUMBERS}INSERT INTO item SELECT i, 1 + {}, {}, 1 + {} / 100.0, CASE WHEN {} = 0 THEN STUFF({}, 3, 8, 'ORIGINAL') ELSE {} END FROM n WHERE i <= 100000",
        rnd(10000),
        s(14, 24),
        rnd(9900),
        rnd(10),
        s(26, 50),
        s(26, 50)
    )
}

fn warehouse_sql(w: u32) -> Vec<String> {
    let (s10, s20, st, z) = (s(6, 10), s(10, 20), state(), zip());
    let dist = (0..10).map(|_| s(24, 24)).collect::<Vec<_>>().join(", ");
    let c_last = last(&format!(
        "CASE WHEN i <= 1000 THEN i - 1 ELSE (({} | {}) + {}) % 1000 END",
        rnd(256),
        rnd(1000),
        super::C_LAST_LOAD
    ));
    vec![
        format!("INSERT INTO warehouse VALUES ({w}, {s10}, {s20}, {s20}, {s20}, {st}, {z}, {} / 10000.0, 300000)", rnd(2000)),
        format!("{NUMBERS}INSERT INTO district SELECT i, {w}, {s10}, {s20}, {s20}, {s20}, {st}, {z}, {} / 10000.0, 30000, 3001 FROM n WHERE i <= 10", rnd(2000)),
        format!(
            "{NUMBERS}INSERT INTO customer SELECT c.i, d.i, {w}, {}, 'OE', {}, {s20}, {s20}, {s20}, {st}, {z}, RIGHT(CONCAT(REPLICATE('0', 16), {}, {}), 16), SYSDATETIME(), CASE WHEN {} = 0 THEN 'BC' ELSE 'GC' END, 50000, {} / 10000.0, -10, 10, 1, 0, {} FROM n d CROSS JOIN (SELECT i, {c_last} AS l FROM n WHERE i <= 3000) c WHERE d.i <= 10",
            s(8, 16),
            "c.l",
            rnd(100_000_000),
            rnd(100_000_000),
            rnd(10),
            rnd(5000),
            s(300, 500)
        ),
        format!("{NUMBERS}INSERT INTO history SELECT c.i, d.i, {w}, d.i, {w}, SYSDATETIME(), 10, {} FROM n d CROSS JOIN n c WHERE d.i <= 10 AND c.i <= 3000", s(12, 24)),
        format!(
            "{NUMBERS}INSERT INTO orders SELECT o, d, {w}, c, SYSDATETIME(), CASE WHEN o < 2101 THEN 1 + {} END, 5 + {}, 1 FROM (SELECT d.i d, o.i o, ROW_NUMBER() OVER (PARTITION BY d.i ORDER BY NEWID()) c FROM n d CROSS JOIN n o WHERE d.i <= 10 AND o.i <= 3000) x",
            rnd(10),
            rnd(11)
        ),
        format!(
            "{NUMBERS}INSERT INTO order_line SELECT o.o_id, o.o_d_id, {w}, n.i, 1 + {}, {w}, CASE WHEN o.o_id < 2101 THEN o.o_entry_d END, 5, CASE WHEN o.o_id < 2101 THEN 0 ELSE (1 + {}) / 100.0 END, {} FROM orders o JOIN n ON n.i <= o.o_ol_cnt WHERE o.o_w_id = {w}",
            rnd(100_000),
            rnd(999_999),
            s(24, 24)
        ),
        format!("{NUMBERS}INSERT INTO new_order SELECT o.i, d.i, {w} FROM n d CROSS JOIN n o WHERE d.i <= 10 AND o.i BETWEEN 2101 AND 3000"),
        format!(
            "{NUMBERS}INSERT INTO stock SELECT i, {w}, 10 + {}, {dist}, 0, 0, 0, CASE WHEN {} = 0 THEN STUFF({}, 3, 8, 'ORIGINAL') ELSE {} END FROM n WHERE i <= 100000",
            rnd(91),
            rnd(10),
            s(26, 50),
            s(26, 50)
        ),
    ]
}

fn branch_sql(b: u32) -> Vec<String> {
    let first = |per: u32| (b - 1) * per;
    vec![
        format!("INSERT INTO pgbench_branches VALUES ({b}, 0, NULL)"),
        format!("{NUMBERS}INSERT INTO pgbench_tellers SELECT {} + i, {b}, 0, NULL FROM n WHERE i <= 10", first(10)),
        format!("{NUMBERS}INSERT INTO pgbench_accounts SELECT {} + i, {b}, 0, '' FROM n WHERE i <= 100000", first(100_000)),
    ]
}

/// The five transactions, one CREATE PROCEDURE a batch (as T-SQL requires).
pub const PROCEDURES: [&str; 5] = [
    "CREATE PROCEDURE dbo.plumb_neword @w int, @d int, @c int, @items nvarchar(max), @supply nvarchar(max), @qty nvarchar(max) AS
BEGIN
  SET NOCOUNT ON; SET XACT_ABORT ON;
  DECLARE @o int, @n int, @all_local int, @i int = 0, @item int, @sw int, @q int, @price decimal(5,2), @dist char(24);
  SELECT @n = COUNT(*) FROM OPENJSON(@items);
  SET @all_local = CASE WHEN EXISTS (SELECT 1 FROM OPENJSON(@supply) WHERE CAST(value AS int) <> @w) THEN 0 ELSE 1 END;
  BEGIN TRANSACTION;
  UPDATE district SET @o = d_next_o_id, d_next_o_id = d_next_o_id + 1 WHERE d_w_id = @w AND d_id = @d;
  INSERT INTO orders VALUES (@o, @d, @w, @c, SYSDATETIME(), NULL, @n, @all_local);
  INSERT INTO new_order VALUES (@o, @d, @w);
  WHILE @i < @n
  BEGIN
    SELECT @item = CAST(JSON_VALUE(@items, CONCAT('$[', @i, ']')) AS int),
           @sw = CAST(JSON_VALUE(@supply, CONCAT('$[', @i, ']')) AS int),
           @q = CAST(JSON_VALUE(@qty, CONCAT('$[', @i, ']')) AS int), @price = NULL;
    SELECT @price = i_price FROM item WHERE i_id = @item;
    IF @price IS NULL
    BEGIN
      ROLLBACK TRANSACTION;
      THROW 50001, 'PLRB1: the item does not exist; the new order is rolled back', 1;
    END
    UPDATE stock SET @dist = CASE @d WHEN 1 THEN s_dist_01 WHEN 2 THEN s_dist_02 WHEN 3 THEN s_dist_03
        WHEN 4 THEN s_dist_04 WHEN 5 THEN s_dist_05 WHEN 6 THEN s_dist_06 WHEN 7 THEN s_dist_07
        WHEN 8 THEN s_dist_08 WHEN 9 THEN s_dist_09 ELSE s_dist_10 END,
      s_quantity = CASE WHEN s_quantity - @q >= 10 THEN s_quantity - @q ELSE s_quantity - @q + 91 END,
      s_ytd = s_ytd + @q, s_order_cnt = s_order_cnt + 1,
      s_remote_cnt = s_remote_cnt + CASE WHEN @sw <> @w THEN 1 ELSE 0 END
    WHERE s_w_id = @sw AND s_i_id = @item;
    INSERT INTO order_line VALUES (@o, @d, @w, @i + 1, @item, @sw, NULL, @q, @q * @price, @dist);
    SET @i += 1;
  END
  COMMIT TRANSACTION;
END",
    "CREATE PROCEDURE dbo.plumb_payment @w int, @d int, @c_w int, @c_d int, @c int, @last varchar(16), @cents bigint AS
BEGIN
  SET NOCOUNT ON; SET XACT_ABORT ON;
  DECLARE @amount decimal(12,2) = @cents / 100.0, @w_name varchar(10), @d_name varchar(10), @credit char(2), @n int;
  BEGIN TRANSACTION;
  UPDATE warehouse SET w_ytd = w_ytd + @amount, @w_name = w_name WHERE w_id = @w;
  UPDATE district SET d_ytd = d_ytd + @amount, @d_name = d_name WHERE d_w_id = @w AND d_id = @d;
  IF @c = 0
  BEGIN
    SELECT @n = COUNT(*) FROM customer WHERE c_w_id = @c_w AND c_d_id = @c_d AND c_last = @last;
    SELECT @c = c_id FROM customer WHERE c_w_id = @c_w AND c_d_id = @c_d AND c_last = @last
      ORDER BY c_first OFFSET (CASE WHEN @n > 0 THEN (@n - 1) / 2 ELSE 0 END) ROWS FETCH NEXT 1 ROWS ONLY;
  END
  UPDATE customer SET c_balance = c_balance - @amount, c_ytd_payment = c_ytd_payment + @amount,
    c_payment_cnt = c_payment_cnt + 1, @credit = c_credit
  WHERE c_w_id = @c_w AND c_d_id = @c_d AND c_id = @c;
  IF @credit = 'BC'
    UPDATE customer SET c_data = LEFT(CONCAT(@c, ' ', @c_d, ' ', @c_w, ' ', @d, ' ', @w, ' ', @amount, ' | ', c_data), 500)
    WHERE c_w_id = @c_w AND c_d_id = @c_d AND c_id = @c;
  INSERT INTO history VALUES (@c, @c_d, @c_w, @d, @w, SYSDATETIME(), @amount, LEFT(CONCAT(@w_name, '    ', @d_name), 24));
  COMMIT TRANSACTION;
END",
    "CREATE PROCEDURE dbo.plumb_ostat @w int, @d int, @c int, @last varchar(16) AS
BEGIN
  SET NOCOUNT ON; SET XACT_ABORT ON;
  DECLARE @n int, @bal decimal(12,2), @o int, @lines int;
  BEGIN TRANSACTION;
  IF @c = 0
  BEGIN
    SELECT @n = COUNT(*) FROM customer WHERE c_w_id = @w AND c_d_id = @d AND c_last = @last;
    SELECT @c = c_id FROM customer WHERE c_w_id = @w AND c_d_id = @d AND c_last = @last
      ORDER BY c_first OFFSET (CASE WHEN @n > 0 THEN (@n - 1) / 2 ELSE 0 END) ROWS FETCH NEXT 1 ROWS ONLY;
  END
  SELECT @bal = c_balance FROM customer WHERE c_w_id = @w AND c_d_id = @d AND c_id = @c;
  SELECT TOP (1) @o = o_id FROM orders WHERE o_w_id = @w AND o_d_id = @d AND o_c_id = @c ORDER BY o_id DESC;
  SELECT @lines = COUNT(*) FROM (SELECT ol_i_id, ol_supply_w_id, ol_quantity, ol_amount, ol_delivery_d
    FROM order_line WHERE ol_w_id = @w AND ol_d_id = @d AND ol_o_id = @o) l;
  COMMIT TRANSACTION;
END",
    "CREATE PROCEDURE dbo.plumb_delivery @w int, @carrier int AS
BEGIN
  SET NOCOUNT ON; SET XACT_ABORT ON;
  DECLARE @d int = 1, @o int, @c int, @total decimal(12,2);
  BEGIN TRANSACTION;
  WHILE @d <= 10
  BEGIN
    SET @o = NULL;
    SELECT TOP (1) @o = no_o_id FROM new_order WITH (UPDLOCK, ROWLOCK)
      WHERE no_w_id = @w AND no_d_id = @d ORDER BY no_o_id;
    IF @o IS NOT NULL
    BEGIN
      DELETE FROM new_order WHERE no_w_id = @w AND no_d_id = @d AND no_o_id = @o;
      UPDATE orders SET o_carrier_id = @carrier, @c = o_c_id WHERE o_w_id = @w AND o_d_id = @d AND o_id = @o;
      UPDATE order_line SET ol_delivery_d = SYSDATETIME() WHERE ol_w_id = @w AND ol_d_id = @d AND ol_o_id = @o;
      SELECT @total = SUM(ol_amount) FROM order_line WHERE ol_w_id = @w AND ol_d_id = @d AND ol_o_id = @o;
      UPDATE customer SET c_balance = c_balance + @total, c_delivery_cnt = c_delivery_cnt + 1
        WHERE c_w_id = @w AND c_d_id = @d AND c_id = @c;
    END
    SET @d += 1;
  END
  COMMIT TRANSACTION;
END",
    "CREATE PROCEDURE dbo.plumb_slev @w int, @d int, @threshold int AS
BEGIN
  SET NOCOUNT ON; SET XACT_ABORT ON;
  DECLARE @next int, @low int;
  BEGIN TRANSACTION;
  SELECT @next = d_next_o_id FROM district WHERE d_w_id = @w AND d_id = @d;
  SELECT @low = COUNT(DISTINCT s_i_id) FROM order_line JOIN stock ON s_w_id = @w AND s_i_id = ol_i_id
  WHERE ol_w_id = @w AND ol_d_id = @d AND ol_o_id < @next AND ol_o_id >= @next - 20 AND s_quantity < @threshold;
  COMMIT TRANSACTION;
END",
];

pub(crate) fn connect_admin(t: &Target) -> Result<MssqlConn> {
    MssqlConn::connect(t)
}

/// A connection in the load's database.
pub(crate) fn connect_to(t: &Target, db: &str) -> Result<MssqlConn> {
    let mut c = MssqlConn::connect(t)?;
    c.execute(&format!("USE {db}"))?;
    Ok(c)
}

fn first_number(c: &mut MssqlConn, what: &str, sql: &str) -> Result<Option<f64>> {
    let rs = c.query(what, sql)?;
    Ok(rs
        .rows
        .first()
        .and_then(|r| r.first())
        .and_then(|v| v.f64()))
}

pub(crate) fn server_version(c: &mut MssqlConn) -> Result<String> {
    let rs = c.query(
        "reading the server's version",
        "SELECT CAST(SERVERPROPERTY('ProductVersion') AS nvarchar(64)) AS v",
    )?;
    Ok(rs
        .rows
        .first()
        .and_then(|r| r.first())
        .map(|v| v.text())
        .unwrap_or_default())
}

pub fn find(admin: &mut MssqlConn, db: &str) -> Result<Found> {
    let exists = first_number(
        admin,
        "looking for the load's database",
        &format!("SELECT COUNT(*) FROM sys.databases WHERE name = '{db}'"),
    )?;
    if exists.unwrap_or(0.0) == 0.0 {
        return Ok(Found::Nothing);
    }
    let rs = admin.query(
        "reading the load's database's mark",
        &format!("SELECT CAST(value AS nvarchar(200)) AS v FROM [{db}].sys.extended_properties WHERE class = 0 AND name = 'plumb'"),
    )?;
    Ok(super::parse_mark(
        rs.rows
            .first()
            .and_then(|r| r.first())
            .map(|v| v.text())
            .as_deref(),
    ))
}

/// Create `db`, then mark it with the run that made it (a database extended property).
pub fn create_database(admin: &mut MssqlConn, db: &str, run: &str) -> Result<()> {
    admin.execute(&format!("CREATE DATABASE [{db}]"))?;
    admin
        .execute(&format!(
            "EXEC [{db}].sys.sp_addextendedproperty @name = N'plumb', @value = N'{}'",
            super::loading_mark(run).replace('\'', "''")
        ))
        .map(|_| ())
        .inspect_err(|_| {
            let _ = drop_database(admin, db);
        })
}

pub fn mark_database(admin: &mut MssqlConn, db: &str, mark: &str) -> Result<()> {
    admin
        .execute(&format!(
            "EXEC [{db}].sys.sp_updateextendedproperty @name = N'plumb', @value = N'{}'",
            mark.replace('\'', "''")
        ))
        .map(|_| ())
}

/// Who owns `db` and what user objects it holds (tables, views, routines, synonyms,
/// triggers; from sys.objects, SQL Server's documentation: not run against a live server).
pub fn holdings(
    admin: &mut MssqlConn,
    db: &str,
    allowed: &[String],
) -> Result<super::holdings::Holdings> {
    let rs = admin.query(
        "reading who owns the load's database",
        &format!("SELECT SUSER_SNAME(owner_sid) AS owner, SUSER_SNAME() AS me FROM sys.databases WHERE name = '{db}'"),
    )?;
    let row = rs.rows.first();
    let cell = |i: usize| {
        row.and_then(|r| r.get(i))
            .map(|v| v.text())
            .unwrap_or_default()
    };
    let (owner, me) = (cell(0), cell(1));
    let rs = admin.query(
        "reading what the load's database holds",
        &format!(
            "SELECT o.type_desc AS kind, s.name AS sch, o.name AS name, USER_NAME(COALESCE(o.principal_id, s.principal_id)) AS owner FROM [{db}].sys.objects o JOIN [{db}].sys.schemas s ON s.schema_id = o.schema_id WHERE o.is_ms_shipped = 0 AND (o.parent_object_id = 0 OR o.type = 'TR')"
        ),
    )?;
    let objects = mssql_objects(
        &rs.rows
            .iter()
            .map(|r| r.iter().map(|v| v.text()).collect())
            .collect::<Vec<Vec<String>>>(),
    );
    Ok(super::holdings::Holdings {
        foreign: super::holdings::foreign_objects(&objects, allowed, "dbo"),
        owner: Some(owner),
        me,
    })
}

/// sys.objects rows (type_desc, schema, name, owning user) as (kind, name, owner): dbo's
/// objects by their plain names, triggers never passing as a table.
pub(crate) fn mssql_objects(rows: &[Vec<String>]) -> Vec<(String, String, Option<String>)> {
    rows.iter()
        .filter(|r| r.len() >= 4)
        .map(|r| {
            let kind = r[0].to_ascii_lowercase().replace('_', " ");
            let name = if r[1] == "dbo" && !kind.contains("trigger") {
                r[2].clone()
            } else {
                format!("{}.{}", r[1], r[2])
            };
            (kind, name, Some(r[3].clone()))
        })
        .collect()
}

/// Drop `db` when nobody else is in it (never SINGLE_USER WITH ROLLBACK IMMEDIATE).
pub fn drop_database(admin: &mut MssqlConn, db: &str) -> Result<()> {
    let rs = admin.query(
        "looking for sessions in the load's database",
        &format!("SELECT CAST(session_id AS nvarchar(20)) + ' (' + login_name + ')' AS s FROM sys.dm_exec_sessions WHERE database_id = DB_ID('{db}') AND session_id <> @@SPID"),
    )?;
    if !rs.rows.is_empty() {
        let shown: Vec<String> = rs
            .rows
            .iter()
            .filter_map(|r| r.first().map(|v| format!("session {}", v.text())))
            .collect();
        return Err(crate::Error::Refused(format!(
            "other sessions are in it ({}); plumb drops a database only when nobody else is in it",
            shown.join(", ")
        )));
    }
    admin
        .execute(&format!(
            "IF DB_ID('{db}') IS NOT NULL DROP DATABASE [{db}]"
        ))
        .map(|_| ())
}

/// sysbench's table for oltp_read_write.
const RW_SCHEMA: [&str; 2] = [
    "CREATE TABLE plumb_rw (id int NOT NULL PRIMARY KEY, k int NOT NULL DEFAULT 0, c char(120) NOT NULL DEFAULT '', pad char(60) NOT NULL DEFAULT '')",
    "CREATE INDEX plumb_rw_k ON plumb_rw (k)",
];

/// One unit (0-based `j`) of the read-write table's rows, as sysbench fills them (groups of
/// 11 random digits; CONCAT_WS is SQL Server 2017's).
fn rw_rows_sql(j: u32, scale: u32) -> String {
    let g = format!(
        "RIGHT('0000000000' + CONVERT(varchar(11), {}), 11)",
        rnd(99_999_999_999)
    );
    let groups = |n: usize| format!("CONCAT_WS('-', {})", vec![g.as_str(); n].join(", "));
    let rows = super::ACCOUNTS as u64 * u64::from(scale);
    format!(
        "{NUMBERS}INSERT INTO plumb_rw SELECT {} + i, 1 + {}, {}, {} FROM n WHERE i <= 100000",
        i64::from(j) * super::ACCOUNTS,
        rnd(rows),
        groups(10),
        groups(5)
    )
}

pub fn create_schema(c: &mut MssqlConn, w: Workload) -> Result<()> {
    let stmts: &[&str] = if w == Workload::ReadWrite {
        &RW_SCHEMA
    } else if w.is_loop() {
        &["CREATE TABLE plumb_inserts (id int IDENTITY, col1 varchar(2000) DEFAULT REPLICATE('T', 2000))"]
    } else if w == Workload::OrderEntry {
        &SCHEMA
    } else {
        &PGBENCH_SCHEMA
    };
    for s in stmts {
        c.execute(s)?;
    }
    Ok(())
}

pub fn load_job(c: &mut MssqlConn, w: Workload, j: u32, scale: u32) -> Result<()> {
    let stmts = match w {
        Workload::ReadWrite => vec![rw_rows_sql(j, scale)],
        Workload::OrderEntry if j == 0 => vec![items_sql()],
        Workload::OrderEntry => warehouse_sql(j),
        _ => branch_sql(j + 1),
    };
    for s in stmts {
        c.execute(&s)?;
    }
    Ok(())
}

pub fn finish(c: &mut MssqlConn, w: Workload) -> Result<()> {
    if w == Workload::OrderEntry {
        for p in PROCEDURES {
            c.execute(p)?;
        }
    }
    c.execute("EXEC sp_updatestats").map(|_| ())
}

pub fn number(c: &mut MssqlConn, sql: &str) -> Result<i64> {
    Ok(first_number(c, sql, sql)?.unwrap_or(0.0) as i64)
}

/// HammerDB's TPM source on SQL Server: the cumulative Batch Requests/sec counter (needs VIEW
/// SERVER STATE; the whole instance's batches).
pub const BATCH_REQUESTS: &str = "SELECT cntr_value FROM sys.dm_os_performance_counters WHERE counter_name = 'Batch Requests/sec'";

pub fn transactions(admin: &mut MssqlConn) -> Result<i64> {
    Ok(first_number(admin, "reading Batch Requests/sec", BATCH_REQUESTS)?.unwrap_or(0.0) as i64)
}

/// The batch one transaction sends. Last names are TPC-C's syllables (letters only); the rest
/// are numbers.
pub fn batch(tx: &Tx) -> String {
    match tx {
        Tx::NewOrder { w, d, c, items, supply, qty } => format!(
            "EXEC dbo.plumb_neword @w = {w}, @d = {d}, @c = {c}, @items = N'{}', @supply = N'{}', @qty = N'{}'",
            super::json_array(items),
            super::json_array(supply),
            super::json_array(qty)
        ),
        Tx::Payment { w, d, c_w, c_d, c, amount_cents } => {
            let (id, last) = c.arg();
            format!("EXEC dbo.plumb_payment @w = {w}, @d = {d}, @c_w = {c_w}, @c_d = {c_d}, @c = {id}, @last = '{last}', @cents = {amount_cents}")
        }
        Tx::OrderStatus { w, d, c } => {
            let (id, last) = c.arg();
            format!("EXEC dbo.plumb_ostat @w = {w}, @d = {d}, @c = {id}, @last = '{last}'")
        }
        Tx::Delivery { w, carrier } => format!("EXEC dbo.plumb_delivery @w = {w}, @carrier = {carrier}"),
        Tx::StockLevel { w, d, threshold } => format!("EXEC dbo.plumb_slev @w = {w}, @d = {d}, @threshold = {threshold}"),
        Tx::TpcB { aid, tid, bid, delta } => format!(
            "SET XACT_ABORT ON; BEGIN TRANSACTION; \
UPDATE pgbench_accounts SET abalance = abalance + {delta} WHERE aid = {aid}; \
SELECT abalance FROM pgbench_accounts WHERE aid = {aid}; \
UPDATE pgbench_tellers SET tbalance = tbalance + {delta} WHERE tid = {tid}; \
UPDATE pgbench_branches SET bbalance = bbalance + {delta} WHERE bid = {bid}; \
INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES ({tid}, {bid}, {aid}, {delta}, SYSDATETIME()); \
COMMIT TRANSACTION;"
        ),
        Tx::PointSelect { aid } => format!("SELECT abalance FROM pgbench_accounts WHERE aid = {aid}"),
        // c and pad are digits and dashes.
        Tx::ReadWrite { points, ranges, k_id, c_id, del_id, k, c, pad } => {
            let mut b = String::from("SET XACT_ABORT ON; BEGIN TRANSACTION; ");
            for p in points {
                b += &format!("SELECT c FROM plumb_rw WHERE id = {p}; ");
            }
            let r = |f: &i32| format!("id BETWEEN {f} AND {}", f + super::RW_RANGE - 1);
            b += &format!(
                "SELECT c FROM plumb_rw WHERE {}; \
SELECT SUM(k) FROM plumb_rw WHERE {}; \
SELECT c FROM plumb_rw WHERE {} ORDER BY c; \
SELECT DISTINCT c FROM plumb_rw WHERE {} ORDER BY c; \
UPDATE plumb_rw SET k = k + 1 WHERE id = {k_id}; \
UPDATE plumb_rw SET c = '{c}' WHERE id = {c_id}; \
DELETE FROM plumb_rw WHERE id = {del_id}; \
INSERT INTO plumb_rw (id, k, c, pad) VALUES ({del_id}, {k}, '{c}', '{pad}'); \
COMMIT TRANSACTION;",
                r(&ranges[0]),
                r(&ranges[1]),
                r(&ranges[2]),
                r(&ranges[3])
            );
            b
        }
        Tx::Truncate => "TRUNCATE TABLE plumb_inserts".into(),
        // The script the loops reproduce: a WHILE loop of single inserts, each its own
        // transaction, or all inside one.
        Tx::Inserts { rows, each_commits: true } => format!(
            "SET NOCOUNT ON; DECLARE @i int = 1; WHILE @i <= {rows} BEGIN INSERT INTO plumb_inserts DEFAULT VALUES; SET @i += 1; END"
        ),
        Tx::Inserts { rows, each_commits: false } => format!(
            "SET NOCOUNT ON; SET XACT_ABORT ON; DECLARE @i int = 1; BEGIN TRANSACTION; WHILE @i <= {rows} BEGIN INSERT INTO plumb_inserts DEFAULT VALUES; SET @i += 1; END; COMMIT TRANSACTION;"
        ),
        Tx::Checkpoint => "CHECKPOINT".into(),
    }
}

/// One client's connection.
pub struct MssqlOltp {
    conn: MssqlConn,
}

impl MssqlOltp {
    pub fn connect(t: &Target, db: &str) -> Result<MssqlOltp> {
        Ok(MssqlOltp {
            conn: connect_to(t, db)?,
        })
    }

    pub fn exec(&mut self, tx: &Tx) -> std::result::Result<bool, TxError> {
        match self.conn.execute(&batch(tx)) {
            Ok(_) => Ok(true),
            Err(e) => classify(&e),
        }
    }
}

/// A SQL Server error as the driver counts it, from the message plumb's client process passes
/// on ("… (error N)"): 1205 a deadlock victim, 1222 a lock timeout, 3960 a snapshot update
/// conflict, 50001 the new order's planned rollback; a connection gone is lost.
pub fn classify(e: &Error) -> std::result::Result<bool, TxError> {
    let message = e.to_string();
    let code = message
        .rsplit_once("(error ")
        .and_then(|(_, r)| r.trim_end_matches(')').parse::<u32>().ok());
    if code == Some(50001) && message.contains("PLRB1") {
        return Ok(false);
    }
    let failed = match (e, code) {
        (Error::Gone(_) | Error::Refused(_), _) => Failed::Lost,
        (_, Some(1205)) => Failed::Deadlock,
        (_, Some(1222)) => Failed::LockTimeout,
        (_, Some(3960)) => Failed::Serialization,
        _ => Failed::Other,
    };
    Err(TxError {
        failed,
        code: code
            .map(|c| c.to_string())
            .unwrap_or_else(|| "connection".into()),
        message,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::oltp::Customer;

    fn query_error(message: &str) -> Error {
        Error::Query {
            what: "the workload".into(),
            message: message.into(),
            source: None,
        }
    }

    /// Messages in the shape mssql_direct gives them: the server's text, then "(error N)".
    #[test]
    fn errors_are_classed_by_their_number() {
        let dl = query_error("Transaction (Process ID 57) was deadlocked on lock resources with another process and has been chosen as the deadlock victim. Rerun the transaction. (error 1205)");
        assert_eq!(classify(&dl).unwrap_err().failed, Failed::Deadlock);
        assert_eq!(classify(&dl).unwrap_err().code, "1205");
        let lt = query_error("Lock request time out period exceeded. (error 1222)");
        assert_eq!(classify(&lt).unwrap_err().failed, Failed::LockTimeout);
        let sn = query_error(
            "Snapshot isolation transaction aborted due to update conflict. (error 3960)",
        );
        assert_eq!(classify(&sn).unwrap_err().failed, Failed::Serialization);
        let rb = query_error(
            "PLRB1: the item does not exist; the new order is rolled back (error 50001)",
        );
        assert!(matches!(classify(&rb), Ok(false)));
        let other = query_error("Invalid object name 'stock'. (error 208)");
        let e = classify(&other).unwrap_err();
        assert_eq!((e.failed, e.code.as_str()), (Failed::Other, "208"));
        let gone = Error::Gone("the workload: the client process ended".into());
        assert_eq!(classify(&gone).unwrap_err().failed, Failed::Lost);
    }

    #[test]
    fn each_transaction_is_one_exec_of_numbers_and_syllables() {
        let t = Tx::NewOrder {
            w: 1,
            d: 2,
            c: 3,
            items: vec![5, 9],
            supply: vec![1, 1],
            qty: vec![4, 2],
        };
        assert_eq!(batch(&t), "EXEC dbo.plumb_neword @w = 1, @d = 2, @c = 3, @items = N'[5,9]', @supply = N'[1,1]', @qty = N'[4,2]'");
        let p = Tx::Payment {
            w: 1,
            d: 2,
            c_w: 1,
            c_d: 2,
            c: Customer::Last("BARPRIESE".into()),
            amount_cents: 1234,
        };
        assert_eq!(batch(&p), "EXEC dbo.plumb_payment @w = 1, @d = 2, @c_w = 1, @c_d = 2, @c = 0, @last = 'BARPRIESE', @cents = 1234");
        let b = batch(&Tx::TpcB {
            aid: 7,
            tid: 2,
            bid: 1,
            delta: -40,
        });
        assert!(
            b.starts_with("SET XACT_ABORT ON; BEGIN TRANSACTION;")
                && b.ends_with("COMMIT TRANSACTION;")
        );
        assert_eq!(b.matches("; ").count(), 7, "{b}");
        // sysbench's oltp_read_write in one transaction: 18 statements, ranges of 100 keys,
        // the inserted row under the deleted key.
        let mut draw = 0;
        let mut u = |lo: i64, _hi: i64| {
            draw += 1;
            lo + draw
        };
        let rw = crate::oltp::generate_for(Workload::ReadWrite, 0, 1, 1, &mut u);
        let b = batch(&rw);
        assert!(
            b.starts_with("SET XACT_ABORT ON; BEGIN TRANSACTION;")
                && b.ends_with("COMMIT TRANSACTION;")
        );
        assert_eq!(
            b.matches("SELECT c FROM plumb_rw WHERE id = ").count(),
            10,
            "{b}"
        );
        assert!(b.contains("id BETWEEN 12 AND 111"), "{b}");
        assert!(
            b.contains("DELETE FROM plumb_rw WHERE id = 18;") && b.contains("VALUES (18, 19, '"),
            "{b}"
        );
        assert_eq!(b.matches("; ").count(), 20, "{b}");
        let Tx::ReadWrite { c, pad, .. } = rw else {
            unreachable!()
        };
        assert_eq!((c.len(), pad.len()), (119, 59));
        assert!(c.chars().all(|ch| ch.is_ascii_digit() || ch == '-'));
    }

    #[test]
    fn the_read_write_loader_draws_per_row() {
        let sql = rw_rows_sql(2, 3);
        assert!(
            sql.contains("SELECT 200000 + i, 1 + (ABS(CHECKSUM(NEWID())) % 300000)"),
            "{sql}"
        );
        assert_eq!(sql.matches("NEWID()").count(), 16, "{sql}");
    }

    #[test]
    fn the_procedures_are_what_the_documentation_asks() {
        for p in PROCEDURES {
            // CREATE PROCEDURE must be the first statement of its batch.
            assert!(p.starts_with("CREATE PROCEDURE dbo.plumb_"), "{p}");
            assert_eq!(p.matches("CREATE PROCEDURE").count(), 1);
            // Any error rolls the whole transaction back.
            assert!(
                p.contains("SET XACT_ABORT ON") && p.contains("BEGIN TRANSACTION"),
                "{p}"
            );
            assert!(p.trim_end().ends_with("COMMIT TRANSACTION;\nEND"), "{p}");
        }
        let neword = PROCEDURES[0];
        let throw = neword.find("THROW 50001").unwrap();
        assert!(neword.find("ROLLBACK TRANSACTION").unwrap() < throw);
        assert!(
            throw < neword.find("UPDATE stock").unwrap(),
            "the unused item is met before its stock row"
        );
        // THROW's message starts as classify() looks for it.
        assert!(neword.contains("'PLRB1:"));
    }

    #[test]
    fn the_loader_draws_per_row() {
        // RAND() is evaluated once a statement: every per-row draw is NEWID()'s.
        for sql in warehouse_sql(3)
            .iter()
            .chain([items_sql()].iter())
            .chain(branch_sql(2).iter())
        {
            assert!(!sql.contains("RAND("), "{sql}");
        }
        assert!(warehouse_sql(3)[0].starts_with("INSERT INTO warehouse VALUES (3,"));
        assert!(branch_sql(2)[2].contains("SELECT 100000 + i, 2"));
        assert!(NUMBERS.matches("t ").count() >= 1);
    }
}
