//! The workloads on MariaDB: the schemas (InnoDB, keys from the start: the loader inserts in
//! key order), a loader that generates each warehouse (or branch) on the server from the
//! Sequence engine's `seq_1_to_N` tables, the order-entry transactions as SQL/PSM procedures
//! (each its own transaction: in autocommit a procedure's statements would commit one by one),
//! pgbench's statements between START TRANSACTION and COMMIT, and a client that runs them
//! through prepared statements.

use super::mywire::{Login, MyError, MyWire, Param, Stmt};
use super::{Failed, Tx, TxError, Workload};
use crate::mariadb::{merr, parse_url};
use crate::{Error, Result, Target};
use mysql::prelude::Queryable;
use mysql::{Conn, Opts, OptsBuilder};

type WRes<T> = std::result::Result<T, MyError>;

pub use mysql::Conn as Client;

/// A random string of `lo` to `hi` characters, as SQL.
fn s(lo: u32, hi: u32) -> String {
    format!(
        "SUBSTRING(REPEAT(MD5(RAND()), 16), 1, {lo} + FLOOR(RAND() * {}))",
        hi - lo + 1
    )
}

fn schema() -> String {
    "
CREATE TABLE warehouse (w_id int NOT NULL PRIMARY KEY, w_name varchar(10), w_street_1 varchar(20),
  w_street_2 varchar(20), w_city varchar(20), w_state char(2), w_zip char(9),
  w_tax decimal(4,4), w_ytd decimal(12,2)) ENGINE = InnoDB;
CREATE TABLE district (d_id int NOT NULL, d_w_id int NOT NULL, d_name varchar(10),
  d_street_1 varchar(20), d_street_2 varchar(20), d_city varchar(20), d_state char(2),
  d_zip char(9), d_tax decimal(4,4), d_ytd decimal(12,2), d_next_o_id int,
  PRIMARY KEY (d_w_id, d_id)) ENGINE = InnoDB;
CREATE TABLE customer (c_id int NOT NULL, c_d_id int NOT NULL, c_w_id int NOT NULL,
  c_first varchar(16), c_middle char(2), c_last varchar(16), c_street_1 varchar(20),
  c_street_2 varchar(20), c_city varchar(20), c_state char(2), c_zip char(9), c_phone char(16),
  c_since datetime, c_credit char(2), c_credit_lim decimal(12,2), c_discount decimal(4,4),
  c_balance decimal(12,2), c_ytd_payment decimal(12,2), c_payment_cnt int, c_delivery_cnt int,
  c_data varchar(500), PRIMARY KEY (c_w_id, c_d_id, c_id),
  KEY customer_name (c_w_id, c_d_id, c_last, c_first)) ENGINE = InnoDB;
CREATE TABLE history (h_c_id int, h_c_d_id int, h_c_w_id int, h_d_id int, h_w_id int,
  h_date datetime, h_amount decimal(6,2), h_data varchar(24)) ENGINE = InnoDB;
CREATE TABLE new_order (no_o_id int NOT NULL, no_d_id int NOT NULL, no_w_id int NOT NULL,
  PRIMARY KEY (no_w_id, no_d_id, no_o_id)) ENGINE = InnoDB;
CREATE TABLE orders (o_id int NOT NULL, o_d_id int NOT NULL, o_w_id int NOT NULL, o_c_id int,
  o_entry_d datetime, o_carrier_id int, o_ol_cnt int, o_all_local int,
  PRIMARY KEY (o_w_id, o_d_id, o_id), KEY orders_customer (o_w_id, o_d_id, o_c_id, o_id))
  ENGINE = InnoDB;
CREATE TABLE order_line (ol_o_id int NOT NULL, ol_d_id int NOT NULL, ol_w_id int NOT NULL,
  ol_number int NOT NULL, ol_i_id int, ol_supply_w_id int, ol_delivery_d datetime,
  ol_quantity int, ol_amount decimal(6,2), ol_dist_info char(24),
  PRIMARY KEY (ol_w_id, ol_d_id, ol_o_id, ol_number)) ENGINE = InnoDB;
CREATE TABLE item (i_id int NOT NULL PRIMARY KEY, i_im_id int, i_name varchar(24),
  i_price decimal(5,2), i_data varchar(50)) ENGINE = InnoDB;
CREATE TABLE stock (s_i_id int NOT NULL, s_w_id int NOT NULL, s_quantity int,
  s_dist_01 char(24), s_dist_02 char(24), s_dist_03 char(24), s_dist_04 char(24),
  s_dist_05 char(24), s_dist_06 char(24), s_dist_07 char(24), s_dist_08 char(24),
  s_dist_09 char(24), s_dist_10 char(24), s_ytd int, s_order_cnt int, s_remote_cnt int,
  s_data varchar(50), PRIMARY KEY (s_w_id, s_i_id)) ENGINE = InnoDB"
        .to_string()
}

const PGBENCH_SCHEMA: &str = "
CREATE TABLE pgbench_branches (bid int NOT NULL PRIMARY KEY, bbalance int, filler char(88)) ENGINE = InnoDB;
CREATE TABLE pgbench_tellers (tid int NOT NULL PRIMARY KEY, bid int, tbalance int, filler char(84)) ENGINE = InnoDB;
CREATE TABLE pgbench_accounts (aid int NOT NULL PRIMARY KEY, bid int, abalance int, filler char(84)) ENGINE = InnoDB;
CREATE TABLE pgbench_history (tid int, bid int, aid int, delta int, mtime datetime, filler char(22)) ENGINE = InnoDB";

/// sysbench's table for oltp_read_write, its keys from the start (the loader inserts in key
/// order).
const RW_SCHEMA: &str = "CREATE TABLE plumb_rw (id int NOT NULL PRIMARY KEY, k int NOT NULL DEFAULT 0,
  c char(120) NOT NULL DEFAULT '', pad char(60) NOT NULL DEFAULT '', KEY plumb_rw_k (k)) ENGINE = InnoDB";

/// One unit (0-based `j`) of the read-write table's rows, as sysbench fills them.
fn rw_rows_sql(j: u32, scale: u32) -> String {
    let g = "LPAD(FLOOR(RAND() * 1e11), 11, '0')";
    let groups = |n: usize| format!("CONCAT_WS('-', {})", vec![g; n].join(", "));
    let rows = super::ACCOUNTS * i64::from(scale);
    let first = i64::from(j) * super::ACCOUNTS + 1;
    format!(
        "INSERT INTO plumb_rw SELECT seq, 1 + FLOOR(RAND() * {rows}), {}, {} FROM seq_{first}_to_{}",
        groups(10),
        groups(5),
        first + super::ACCOUNTS - 1
    )
}

/// sysbench's oltp_read_write statements, in `Tx::ReadWrite`'s order.
const RW: [&str; 9] = [
    "SELECT c FROM plumb_rw WHERE id = ?",
    "SELECT c FROM plumb_rw WHERE id BETWEEN ? AND ?",
    "SELECT SUM(k) FROM plumb_rw WHERE id BETWEEN ? AND ?",
    "SELECT c FROM plumb_rw WHERE id BETWEEN ? AND ? ORDER BY c",
    "SELECT DISTINCT c FROM plumb_rw WHERE id BETWEEN ? AND ? ORDER BY c",
    "UPDATE plumb_rw SET k = k + 1 WHERE id = ?",
    "UPDATE plumb_rw SET c = ? WHERE id = ?",
    "DELETE FROM plumb_rw WHERE id = ?",
    "INSERT INTO plumb_rw (id, k, c, pad) VALUES (?, ?, ?, ?)",
];

/// A last name from a number column `n` (0..=999), as SQL.
fn last(n: &str) -> String {
    let syl = super::syllables_sql();
    format!("CONCAT(ELT({n} DIV 100 + 1, {syl}), ELT({n} DIV 10 MOD 10 + 1, {syl}), ELT({n} MOD 10 + 1, {syl}))")
}

fn zip() -> &'static str {
    "CONCAT(LPAD(FLOOR(RAND() * 10000), 4, '0'), '11111')"
}

fn state() -> &'static str {
    "UPPER(SUBSTRING(MD5(RAND()), 1, 2))"
}

fn items_sql() -> String {
    format!(
        "INSERT INTO item SELECT seq, 1 + FLOOR(RAND() * 10000), {}, ROUND(1 + RAND() * 99, 2),
           IF(RAND() < 0.1, INSERT({}, 3, 8, 'ORIGINAL'), {}) FROM seq_1_to_100000",
        s(14, 24),
        s(26, 50),
        s(26, 50)
    )
}

/// One warehouse's statements, TPC-C's clause 4.3.3 cardinalities and values.
fn warehouse_sql(w: u32) -> Vec<String> {
    let (s10, s20) = (s(6, 10), s(10, 20));
    let dist = (0..10).map(|_| s(24, 24)).collect::<Vec<_>>().join(", ");
    vec![
        format!("INSERT INTO warehouse VALUES ({w}, {s10}, {s20}, {s20}, {s20}, {}, {}, ROUND(RAND() * 0.2, 4), 300000)", state(), zip()),
        format!("INSERT INTO district SELECT seq, {w}, {s10}, {s20}, {s20}, {s20}, {}, {}, ROUND(RAND() * 0.2, 4), 30000, 3001 FROM seq_1_to_10", state(), zip()),
        format!(
            "INSERT INTO customer SELECT c, d, {w}, {}, 'OE', {}, {s20}, {s20}, {s20}, {}, {},
               LPAD(FLOOR(RAND() * 1e15), 16, '0'), NOW(), IF(RAND() < 0.1, 'BC', 'GC'), 50000,
               ROUND(RAND() * 0.5, 4), -10, 10, 1, 0, {}
             FROM (SELECT d.seq d, c.seq c,
                     IF(c.seq <= 1000, c.seq - 1, ((FLOOR(RAND() * 256) | FLOOR(RAND() * 1000)) + {}) MOD 1000) n
                   FROM seq_1_to_10 d, seq_1_to_3000 c) x",
            s(8, 16),
            last("n"),
            state(),
            zip(),
            s(300, 500),
            super::C_LAST_LOAD
        ),
        format!("INSERT INTO history SELECT c.seq, d.seq, {w}, d.seq, {w}, NOW(), 10, {} FROM seq_1_to_10 d, seq_1_to_3000 c", s(12, 24)),
        format!(
            "INSERT INTO orders SELECT o, d, {w}, c, NOW(), IF(o < 2101, 1 + FLOOR(RAND() * 10), NULL),
               5 + FLOOR(RAND() * 11), 1
             FROM (SELECT d.seq d, o.seq o, ROW_NUMBER() OVER (PARTITION BY d.seq ORDER BY RAND()) c
                   FROM seq_1_to_10 d, seq_1_to_3000 o) x"
        ),
        format!(
            "INSERT INTO order_line SELECT o.o_id, o.o_d_id, {w}, n.seq, 1 + FLOOR(RAND() * 100000), {w},
               IF(o.o_id < 2101, o.o_entry_d, NULL), 5,
               IF(o.o_id < 2101, 0, ROUND(0.01 + RAND() * 9999.98, 2)), {}
             FROM orders o JOIN seq_1_to_15 n ON n.seq <= o.o_ol_cnt WHERE o.o_w_id = {w}",
            s(24, 24)
        ),
        format!("INSERT INTO new_order SELECT o.seq, d.seq, {w} FROM seq_1_to_10 d, seq_2101_to_3000 o"),
        format!(
            "INSERT INTO stock SELECT seq, {w}, 10 + FLOOR(RAND() * 91), {dist}, 0, 0, 0,
               IF(RAND() < 0.1, INSERT({}, 3, 8, 'ORIGINAL'), {}) FROM seq_1_to_100000",
            s(26, 50),
            s(26, 50)
        ),
    ]
}

fn branch_sql(b: u32) -> Vec<String> {
    vec![
        format!("INSERT INTO pgbench_branches VALUES ({b}, 0, NULL)"),
        format!(
            "INSERT INTO pgbench_tellers SELECT seq, {b}, 0, NULL FROM seq_{}_to_{}",
            (b - 1) * 10 + 1,
            b * 10
        ),
        format!(
            "INSERT INTO pgbench_accounts SELECT seq, {b}, 0, '' FROM seq_{}_to_{}",
            (b - 1) * 100_000 + 1,
            b * 100_000
        ),
    ]
}

/// The five transactions. Each starts and ends its own transaction; an error rolls it back
/// and goes to the client (RESIGNAL); new-order's unused item rolls back and signals PLRB1.
const PROCEDURES: [&str; 6] = [
    r#"CREATE PROCEDURE plumb_customer(p_w int, p_d int, p_c int, p_last varchar(16), OUT v_c int)
BEGIN
  DECLARE v_n int;
  IF p_c > 0 THEN SET v_c = p_c;
  ELSE
    SELECT count(*) INTO v_n FROM customer WHERE c_w_id = p_w AND c_d_id = p_d AND c_last = p_last;
    SET v_n = GREATEST((v_n - 1) DIV 2, 0);
    SELECT c_id INTO v_c FROM customer WHERE c_w_id = p_w AND c_d_id = p_d AND c_last = p_last
      ORDER BY c_first LIMIT v_n, 1;
  END IF;
END"#,
    r#"CREATE PROCEDURE plumb_neword(p_w int, p_d int, p_c int, p_items text, p_supply text, p_qty text)
BEGIN
  DECLARE v_o, v_n, v_all_local, i, v_item, v_sw, v_q int;
  DECLARE v_price, v_w_tax, v_d_tax, v_disc decimal(12,4);
  DECLARE v_dist char(24);
  DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;
  SET v_n = JSON_LENGTH(p_items), v_all_local = 1, i = 0;
  WHILE i < v_n DO
    IF JSON_VALUE(p_supply, CONCAT('$[', i, ']')) <> p_w THEN SET v_all_local = 0; END IF;
    SET i = i + 1;
  END WHILE;
  START TRANSACTION;
  SELECT w_tax INTO v_w_tax FROM warehouse WHERE w_id = p_w;
  SELECT d_next_o_id, d_tax INTO v_o, v_d_tax FROM district WHERE d_w_id = p_w AND d_id = p_d FOR UPDATE;
  UPDATE district SET d_next_o_id = d_next_o_id + 1 WHERE d_w_id = p_w AND d_id = p_d;
  SELECT c_discount INTO v_disc FROM customer WHERE c_w_id = p_w AND c_d_id = p_d AND c_id = p_c;
  INSERT INTO orders VALUES (v_o, p_d, p_w, p_c, NOW(), NULL, v_n, v_all_local);
  INSERT INTO new_order VALUES (v_o, p_d, p_w);
  SET i = 0;
  WHILE i < v_n DO
    SET v_item = JSON_VALUE(p_items, CONCAT('$[', i, ']')),
        v_sw = JSON_VALUE(p_supply, CONCAT('$[', i, ']')),
        v_q = JSON_VALUE(p_qty, CONCAT('$[', i, ']')), v_price = NULL;
    SELECT i_price INTO v_price FROM item WHERE i_id = v_item;
    IF v_price IS NULL THEN
      ROLLBACK;
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'PLRB1: the item does not exist; the new order is rolled back';
    END IF;
    SELECT CASE p_d WHEN 1 THEN s_dist_01 WHEN 2 THEN s_dist_02 WHEN 3 THEN s_dist_03
      WHEN 4 THEN s_dist_04 WHEN 5 THEN s_dist_05 WHEN 6 THEN s_dist_06 WHEN 7 THEN s_dist_07
      WHEN 8 THEN s_dist_08 WHEN 9 THEN s_dist_09 ELSE s_dist_10 END INTO v_dist
      FROM stock WHERE s_w_id = v_sw AND s_i_id = v_item FOR UPDATE;
    UPDATE stock SET
      s_quantity = IF(s_quantity - v_q >= 10, s_quantity - v_q, s_quantity - v_q + 91),
      s_ytd = s_ytd + v_q, s_order_cnt = s_order_cnt + 1,
      s_remote_cnt = s_remote_cnt + IF(v_sw <> p_w, 1, 0)
    WHERE s_w_id = v_sw AND s_i_id = v_item;
    INSERT INTO order_line VALUES (v_o, p_d, p_w, i + 1, v_item, v_sw, NULL, v_q, v_q * v_price, v_dist);
    SET i = i + 1;
  END WHILE;
  COMMIT;
END"#,
    r#"CREATE PROCEDURE plumb_payment(p_w int, p_d int, p_c_w int, p_c_d int, p_c int, p_last varchar(16), p_cents bigint)
BEGIN
  DECLARE v_c int; DECLARE v_credit char(2); DECLARE v_w_name, v_d_name varchar(10);
  DECLARE v_amount decimal(12,2);
  DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;
  SET v_amount = p_cents / 100;
  START TRANSACTION;
  UPDATE warehouse SET w_ytd = w_ytd + v_amount WHERE w_id = p_w;
  SELECT w_name INTO v_w_name FROM warehouse WHERE w_id = p_w;
  UPDATE district SET d_ytd = d_ytd + v_amount WHERE d_w_id = p_w AND d_id = p_d;
  SELECT d_name INTO v_d_name FROM district WHERE d_w_id = p_w AND d_id = p_d;
  CALL plumb_customer(p_c_w, p_c_d, p_c, p_last, v_c);
  UPDATE customer SET c_balance = c_balance - v_amount, c_ytd_payment = c_ytd_payment + v_amount,
    c_payment_cnt = c_payment_cnt + 1 WHERE c_w_id = p_c_w AND c_d_id = p_c_d AND c_id = v_c;
  SELECT c_credit INTO v_credit FROM customer WHERE c_w_id = p_c_w AND c_d_id = p_c_d AND c_id = v_c;
  IF v_credit = 'BC' THEN
    UPDATE customer SET c_data = SUBSTRING(CONCAT_WS(' ', v_c, p_c_d, p_c_w, p_d, p_w, v_amount, '|', c_data), 1, 500)
    WHERE c_w_id = p_c_w AND c_d_id = p_c_d AND c_id = v_c;
  END IF;
  INSERT INTO history VALUES (v_c, p_c_d, p_c_w, p_d, p_w, NOW(), v_amount, SUBSTRING(CONCAT(v_w_name, '    ', v_d_name), 1, 24));
  COMMIT;
END"#,
    r#"CREATE PROCEDURE plumb_ostat(p_w int, p_d int, p_c int, p_last varchar(16))
BEGIN
  DECLARE v_c, v_o, v_lines int; DECLARE v_bal decimal(12,2);
  DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;
  START TRANSACTION;
  CALL plumb_customer(p_w, p_d, p_c, p_last, v_c);
  SELECT c_balance INTO v_bal FROM customer WHERE c_w_id = p_w AND c_d_id = p_d AND c_id = v_c;
  SELECT o_id INTO v_o FROM orders WHERE o_w_id = p_w AND o_d_id = p_d AND o_c_id = v_c
    ORDER BY o_id DESC LIMIT 1;
  SELECT count(*) INTO v_lines FROM (SELECT ol_i_id, ol_supply_w_id, ol_quantity, ol_amount, ol_delivery_d
    FROM order_line WHERE ol_w_id = p_w AND ol_d_id = p_d AND ol_o_id = v_o) l;
  COMMIT;
END"#,
    r#"CREATE PROCEDURE plumb_delivery(p_w int, p_carrier int)
BEGIN
  DECLARE d, v_o, v_c int; DECLARE v_total decimal(12,2);
  DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;
  START TRANSACTION;
  SET d = 1;
  WHILE d <= 10 DO
    SET v_o = NULL;
    SELECT no_o_id INTO v_o FROM new_order WHERE no_w_id = p_w AND no_d_id = d
      ORDER BY no_o_id LIMIT 1 FOR UPDATE;
    IF v_o IS NOT NULL THEN
      DELETE FROM new_order WHERE no_w_id = p_w AND no_d_id = d AND no_o_id = v_o;
      SELECT o_c_id INTO v_c FROM orders WHERE o_w_id = p_w AND o_d_id = d AND o_id = v_o;
      UPDATE orders SET o_carrier_id = p_carrier WHERE o_w_id = p_w AND o_d_id = d AND o_id = v_o;
      UPDATE order_line SET ol_delivery_d = NOW() WHERE ol_w_id = p_w AND ol_d_id = d AND ol_o_id = v_o;
      SELECT sum(ol_amount) INTO v_total FROM order_line WHERE ol_w_id = p_w AND ol_d_id = d AND ol_o_id = v_o;
      UPDATE customer SET c_balance = c_balance + v_total, c_delivery_cnt = c_delivery_cnt + 1
        WHERE c_w_id = p_w AND c_d_id = d AND c_id = v_c;
    END IF;
    SET d = d + 1;
  END WHILE;
  COMMIT;
END"#,
    r#"CREATE PROCEDURE plumb_slev(p_w int, p_d int, p_threshold int)
BEGIN
  DECLARE v_next, v_low int;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;
  START TRANSACTION;
  SELECT d_next_o_id INTO v_next FROM district WHERE d_w_id = p_w AND d_id = p_d;
  SELECT count(DISTINCT s_i_id) INTO v_low FROM order_line, stock
  WHERE ol_w_id = p_w AND ol_d_id = p_d AND ol_o_id < v_next AND ol_o_id >= v_next - 20
    AND s_w_id = p_w AND s_i_id = ol_i_id AND s_quantity < p_threshold;
  COMMIT;
END"#,
];

fn q(what: &str) -> impl Fn(mysql::Error) -> Error + '_ {
    move |e| merr(what, e)
}

fn wq(what: &str) -> impl Fn(MyError) -> Error + '_ {
    move |e| match e {
        MyError::Io(_) => Error::Gone(format!("{what}: {e}")),
        e => Error::Query {
            what: what.to_string(),
            message: e.to_string(),
            source: Some(Box::new(e)),
        },
    }
}

fn connect_opts(t: &Target, db: Option<&str>, label: &str) -> Result<Conn> {
    let mut b = OptsBuilder::from_opts(parse_url(t)?);
    if let Some(db) = db {
        b = b.db_name(Some(db));
    }
    crate::mariadb::login(&Opts::from(b), label)
}

/// Connect to the database the URL names (or none).
pub(crate) fn connect_admin(t: &Target) -> Result<Conn> {
    connect_opts(t, None, &t.shown())
}

pub(crate) fn connect_to(t: &Target, db: &str, label: &str) -> Result<Conn> {
    connect_opts(t, Some(db), &format!("{label} (database {db})"))
}

pub(crate) fn server_version(c: &mut Conn) -> Result<String> {
    let v: Option<String> = c
        .query_first("SELECT VERSION()")
        .map_err(q("reading the server's version"))?;
    Ok(v.unwrap_or_default())
}

/// Cancel a connection's running statement: KILL QUERY from a connection of its own.
pub fn canceller(t: &Target, c: &Conn) -> Box<dyn Fn() + Send + Sync> {
    kill_query(t, c.connection_id())
}

fn kill_query(t: &Target, id: u32) -> Box<dyn Fn() + Send + Sync> {
    let t = t.clone();
    Box::new(move || {
        if let Ok(mut k) = connect_admin(&t) {
            let _ = k.query_drop(format!("KILL QUERY {id}"));
        }
    })
}

/// Look for `db`: loaded whole when plumb's mark table in it says so; being loaded (or left by
/// a killed run) when its comment carries a run's token; anything else is somebody else's.
pub fn find(admin: &mut Conn, db: &str) -> Result<super::holdings::Found> {
    use super::holdings::Found;
    let r: Option<Option<String>> = admin
        .exec_first(
            "SELECT SCHEMA_COMMENT FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?",
            (db,),
        )
        .map_err(q("looking for the load's database"))?;
    let Some(comment) = r else {
        return Ok(Found::Nothing);
    };
    let has_mark: Option<i64> = admin
        .exec_first(
            "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?",
            (db, super::MARK_TABLE),
        )
        .map_err(q("looking for the load's database"))?;
    if has_mark.unwrap_or(0) > 0 {
        let mark: Option<String> = admin
            .query_first(format!(
                "SELECT mark FROM {db}.{} LIMIT 1",
                super::MARK_TABLE
            ))
            .map_err(q("reading the load's database's mark"))?;
        if let found @ Found::Plumbs { .. } = super::parse_mark(mark.as_deref()) {
            return Ok(found);
        }
        return Ok(Found::Other);
    }
    // A comment alone never makes a database plumb's loaded one (anyone with ALTER can write
    // it); it only says which run created it.
    Ok(match super::parse_mark(comment.as_deref()) {
        found @ Found::Unfinished { .. } => found,
        _ => Found::Other,
    })
}

/// Create `db` with the run's token as its comment, in one statement.
pub fn create_database(admin: &mut Conn, db: &str, run: &str) -> Result<()> {
    admin
        .query_drop(format!(
            "CREATE DATABASE {db} COMMENT '{}'",
            super::loading_mark(run).replace('\'', "''")
        ))
        .map_err(q("creating the load's database"))
}

/// Mark `db` loaded whole: plumb's own table in it, holding the mark.
pub fn mark_database(admin: &mut Conn, _t: &Target, db: &str, mark: &str) -> Result<()> {
    admin
        .query_drop(format!(
            "CREATE TABLE {db}.{} (mark varchar(200) NOT NULL) ENGINE = InnoDB",
            super::MARK_TABLE
        ))
        .and_then(|_| {
            admin.exec_drop(
                format!("INSERT INTO {db}.{} (mark) VALUES (?)", super::MARK_TABLE),
                (mark,),
            )
        })
        .map_err(q("marking the load's database"))
}

/// What `db` holds beyond `allowed` (MariaDB has no owner of a database: only what is in it).
pub fn holdings(
    admin: &mut Conn,
    db: &str,
    allowed: &[String],
) -> Result<super::holdings::Holdings> {
    let me: Option<String> = admin
        .query_first("SELECT CURRENT_USER()")
        .map_err(q("reading who plumb is connected as"))?;
    let objects: Vec<(String, String)> = admin
        .exec(
            "SELECT LOWER(TABLE_TYPE), TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = ?
             UNION ALL SELECT LOWER(ROUTINE_TYPE), ROUTINE_NAME FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = ?
             UNION ALL SELECT 'trigger', TRIGGER_NAME FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = ?
             UNION ALL SELECT 'event', EVENT_NAME FROM information_schema.EVENTS WHERE EVENT_SCHEMA = ?",
            (db, db, db, db),
        )
        .map_err(q("reading what the load's database holds"))?;
    let objects: Vec<(String, String, Option<String>)> = objects
        .into_iter()
        .map(|(kind, name)| {
            // Triggers and events are never plumb's: their names must not pass as a table's.
            let name = match kind.as_str() {
                "trigger" | "event" => format!("{name} ({kind})"),
                _ => name,
            };
            (kind.replace("base table", "table"), name, None)
        })
        .collect();
    let me = me.unwrap_or_default();
    Ok(super::holdings::Holdings {
        foreign: super::holdings::foreign_objects(&objects, allowed, &me),
        owner: None,
        me,
    })
}

/// Wait up to `wait` for every session in `db` to be gone (a killed plumb's connections end
/// when their statement does; MariaDB says nothing that tells them from anybody's, so none is
/// killed). Whether they are.
pub fn end_sessions_of(admin: &mut Conn, db: &str, wait: std::time::Duration) -> bool {
    let t0 = std::time::Instant::now();
    loop {
        let n: Option<i64> = admin
            .exec_first(
                "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE DB = ? AND ID <> CONNECTION_ID()",
                (db,),
            )
            .unwrap_or(Some(1));
        if n == Some(0) {
            return true;
        }
        if t0.elapsed() > wait {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}

/// Drop `db`, never from under another session: the sessions in it (plumb's own, closing)
/// get 5 s to leave; if any stay, it is refused with their ids. Metadata locks are waited for
/// 10 s at most.
pub fn drop_database(admin: &mut Conn, db: &str) -> Result<()> {
    let t0 = std::time::Instant::now();
    loop {
        let others: Vec<(u64, String, String)> = admin
            .exec(
                "SELECT ID, USER, COMMAND FROM information_schema.PROCESSLIST WHERE DB = ? AND ID <> CONNECTION_ID()",
                (db,),
            )
            .map_err(q("looking for sessions in the load's database"))?;
        if others.is_empty() {
            break;
        }
        if t0.elapsed() > std::time::Duration::from_secs(5) {
            let shown: Vec<String> = others
                .iter()
                .map(|(id, user, cmd)| format!("connection {id} ({user}, {cmd})"))
                .collect();
            return Err(Error::Refused(format!(
                "other sessions are in it ({}); plumb drops a database only when nobody else is in it",
                shown.join(", ")
            )));
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    admin
        .query_drop("SET SESSION lock_wait_timeout = 10")
        .and_then(|_| admin.query_drop(format!("DROP DATABASE IF EXISTS {db}")))
        .map_err(q("dropping the load's database"))
}

fn each(c: &mut Conn, what: &str, sqls: &[String]) -> Result<()> {
    for sql in sqls {
        c.query_drop(sql).map_err(q(what))?;
    }
    Ok(())
}

/// The insert loops' table (as the script they reproduce has it, with the key InnoDB needs for
/// AUTO_INCREMENT) and the two rounds as procedures: `n` inserts each committing on its own
/// (autocommit), or all in one transaction.
const INSERTS: [&str; 3] = [
    "CREATE TABLE plumb_inserts (id INT AUTO_INCREMENT PRIMARY KEY, col1 VARCHAR(2000) DEFAULT (REPEAT('T', 2000))) ENGINE=InnoDB",
    "CREATE PROCEDURE plumb_single(n INT)
BEGIN
  DECLARE i INT DEFAULT 0;
  SET autocommit = 1;
  WHILE i < n DO
    INSERT INTO plumb_inserts () VALUES ();
    SET i = i + 1;
  END WHILE;
END",
    "CREATE PROCEDURE plumb_bulk(n INT)
BEGIN
  DECLARE i INT DEFAULT 0;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;
  START TRANSACTION;
  WHILE i < n DO
    INSERT INTO plumb_inserts () VALUES ();
    SET i = i + 1;
  END WHILE;
  COMMIT;
END",
];

/// MariaDB has no CHECKPOINT statement; the nearest is InnoDB's `innodb_log_checkpoint_now`
/// (a debug-build switch until MDEV-30000 made it part of every build for mariadb-backup;
/// Debian 12's 10.11 has it): setting it writes the buffer pool's dirty pages back and moves
/// the log checkpoint up to the current log position. Setting a global needs SUPER.
pub const CHECKPOINT: &str = "SET GLOBAL innodb_log_checkpoint_now = ON";

pub fn create_schema(c: &mut Conn, w: Workload) -> Result<()> {
    if w.is_loop() {
        let stmts: Vec<String> = INSERTS.iter().map(|s| s.to_string()).collect();
        return each(c, "creating the insert loops' table", &stmts);
    }
    let sql = match w {
        Workload::OrderEntry => schema(),
        Workload::ReadWrite => RW_SCHEMA.to_string(),
        _ => PGBENCH_SCHEMA.to_string(),
    };
    let stmts: Vec<String> = sql
        .split(';')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(String::from)
        .collect();
    each(c, "creating the schema", &stmts)
}

pub fn load_job(c: &mut Conn, w: Workload, j: u32, scale: u32) -> Result<()> {
    match w {
        Workload::ReadWrite => each(
            c,
            &format!(
                "loading rows {} to {}",
                u64::from(j) * 100_000 + 1,
                u64::from(j + 1) * 100_000
            ),
            &[rw_rows_sql(j, scale)],
        ),
        Workload::OrderEntry if j == 0 => each(c, "loading the items", &[items_sql()]),
        Workload::OrderEntry => each(c, &format!("loading warehouse {j}"), &warehouse_sql(j)),
        _ => each(c, &format!("loading branch {}", j + 1), &branch_sql(j + 1)),
    }
}

/// The procedures (order-entry) and fresh statistics, after the rows are in.
pub fn finish(c: &mut Conn, w: Workload) -> Result<()> {
    if w.is_loop() {
        return Ok(());
    }
    if w == Workload::OrderEntry {
        let p: Vec<String> = PROCEDURES.iter().map(|s| s.to_string()).collect();
        each(c, "creating the procedures", &p)?;
    }
    let tables = match w {
        Workload::OrderEntry => super::TABLES.join(", "),
        Workload::ReadWrite => "plumb_rw".into(),
        _ => "pgbench_branches, pgbench_tellers, pgbench_accounts, pgbench_history".into(),
    };
    each(
        c,
        "analyzing the tables",
        &[format!("ANALYZE TABLE {tables}")],
    )
}

pub fn number(c: &mut Conn, sql: &str) -> Result<i64> {
    let v: Option<Option<i64>> = c.query_first(sql).map_err(q(sql))?;
    Ok(v.flatten().unwrap_or(0))
}

/// Com_commit + Com_rollback: the transactions the server counts (TPM's source; the whole
/// server's, every database's).
pub fn transactions(admin: &mut Conn) -> Result<i64> {
    let rows: Vec<(String, String)> = admin
        .query("SHOW GLOBAL STATUS WHERE Variable_name IN ('Com_commit', 'Com_rollback')")
        .map_err(q("reading Com_commit and Com_rollback"))?;
    Ok(rows.iter().filter_map(|(_, v)| v.parse::<i64>().ok()).sum())
}

const CALLS: [&str; 5] = [
    "CALL plumb_neword(?, ?, ?, ?, ?, ?)",
    "CALL plumb_payment(?, ?, ?, ?, ?, ?, ?)",
    "CALL plumb_ostat(?, ?, ?, ?)",
    "CALL plumb_delivery(?, ?)",
    "CALL plumb_slev(?, ?, ?)",
];

const TPCB: [&str; 5] = [
    "UPDATE pgbench_accounts SET abalance = abalance + ? WHERE aid = ?",
    "SELECT abalance FROM pgbench_accounts WHERE aid = ?",
    "UPDATE pgbench_tellers SET tbalance = tbalance + ? WHERE tid = ?",
    "UPDATE pgbench_branches SET bbalance = bbalance + ? WHERE bid = ?",
    "INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES (?, ?, ?, ?, NOW())",
];

/// One client's connection with its workload's statements prepared, on plumb's lean protocol
/// client (`mywire`): one write and blocking reads a statement, as sysbench's libmariadb.
pub struct MariaOltp {
    conn: MyWire,
    stmts: Vec<Stmt>,
    target: Target,
    /// The server thread serving this connection, where it keeps one (see `server_thread`).
    tid: Option<u32>,
}

/// The OS thread serving `conn`: PROCESSLIST's TID (MariaDB 10.1 and later, Linux), where the
/// server gives each connection a thread of its own (`thread_handling` is
/// one-thread-per-connection; a pool moves connections between threads). None otherwise.
fn own_thread(conn: &mut MyWire) -> Option<u32> {
    let mut own = conn
        .prepare("SELECT @@thread_handling = 'one-thread-per-connection'")
        .ok()?;
    if conn.execute(&mut own, &[]).ok()?.0? != 1 {
        return None;
    }
    let mut tid = conn
        .prepare("SELECT TID FROM information_schema.PROCESSLIST WHERE ID = CONNECTION_ID()")
        .ok()?;
    let t = conn.execute(&mut tid, &[]).ok()?.0?;
    u32::try_from(t).ok().filter(|t| *t > 0)
}

impl MariaOltp {
    pub fn connect(t: &Target, db: &str, w: Workload) -> Result<MariaOltp> {
        let login = Login::from_opts(&parse_url(t)?, db);
        let label = format!("{} (database {db})", t.shown());
        let mut conn = MyWire::connect(&login).map_err(|e| Error::Connect {
            url: label.clone(),
            message: crate::with_hint(crate::Kind::Mariadb, e.to_string()),
            source: Some(Box::new(e)),
        })?;
        let sqls: &[&str] = match w {
            Workload::OrderEntry => &CALLS,
            Workload::TpcB => &TPCB,
            Workload::PointSelect => &TPCB[1..2],
            Workload::ReadWrite => &RW,
            Workload::InsertSingle | Workload::InsertBulk => &[],
        };
        let stmts = sqls
            .iter()
            .map(|s| conn.prepare(s).map_err(wq("preparing the transactions")))
            .collect::<Result<_>>()?;
        if w.is_loop() {
            if let Err(e) = conn.query("SELECT @@GLOBAL.innodb_log_checkpoint_now") {
                return Err(Error::Refused(format!(
                    "{}: the insert/CHECKPOINT loops checkpoint MariaDB with SET GLOBAL innodb_log_checkpoint_now = ON, which this server lacks (a debug-build switch before MDEV-30000): {e}",
                    t.shown()
                )));
            }
        }
        let tid = own_thread(&mut conn);
        Ok(MariaOltp {
            conn,
            stmts,
            target: t.clone(),
            tid,
        })
    }

    /// The server thread serving this session (None: the server shares threads, or does
    /// not say).
    pub fn server_thread(&self) -> Option<u32> {
        self.tid
    }

    pub fn canceller(&self) -> Box<dyn Fn() + Send + Sync> {
        kill_query(&self.target, self.conn.connection_id())
    }

    /// Something another thread can call to close the session.
    pub fn closer(&self) -> Box<dyn Fn() + Send + Sync> {
        self.conn.closer()
    }

    /// Run one transaction: Ok(true) committed, Ok(false) rolled back on purpose.
    pub fn exec(&mut self, tx: &Tx) -> std::result::Result<bool, TxError> {
        use Param::{Int, Text};
        let (c, s) = (&mut self.conn, &mut self.stmts);
        let i = |v: i32| Int(v as i64);
        let r = match tx {
            Tx::NewOrder {
                w,
                d,
                c: cust,
                items,
                supply,
                qty,
            } => {
                let (a, b, q) = (
                    super::json_array(items),
                    super::json_array(supply),
                    super::json_array(qty),
                );
                let p = [i(*w), i(*d), i(*cust), Text(&a), Text(&b), Text(&q)];
                c.execute(&mut s[0], &p).map(|_| ())
            }
            Tx::Payment {
                w,
                d,
                c_w,
                c_d,
                c: cust,
                amount_cents,
            } => {
                let (id, last) = cust.arg();
                let p = [
                    i(*w),
                    i(*d),
                    i(*c_w),
                    i(*c_d),
                    i(id),
                    Text(last),
                    Int(*amount_cents),
                ];
                c.execute(&mut s[1], &p).map(|_| ())
            }
            Tx::OrderStatus { w, d, c: cust } => {
                let (id, last) = cust.arg();
                c.execute(&mut s[2], &[i(*w), i(*d), i(id), Text(last)])
                    .map(|_| ())
            }
            Tx::Delivery { w, carrier } => c.execute(&mut s[3], &[i(*w), i(*carrier)]).map(|_| ()),
            Tx::StockLevel { w, d, threshold } => c
                .execute(&mut s[4], &[i(*w), i(*d), i(*threshold)])
                .map(|_| ()),
            Tx::TpcB {
                aid,
                tid,
                bid,
                delta,
            } => tpcb(c, s, *aid, *tid, *bid, *delta),
            Tx::ReadWrite { .. } => read_write(c, s, tx),
            Tx::PointSelect { aid } => match c.execute(&mut s[0], &[i(*aid)]) {
                Ok((_, 1)) => Ok(()),
                Ok((_, rows)) => {
                    return Err(TxError {
                        failed: Failed::Other,
                        code: "rows".into(),
                        message: format!("the point select returned {rows} rows, not one"),
                    })
                }
                Err(e) => Err(e),
            },
            Tx::Truncate => c.query("TRUNCATE TABLE plumb_inserts").map(|_| ()),
            Tx::Inserts { rows, each_commits } => c
                .query(&format!(
                    "CALL {}({rows})",
                    if *each_commits {
                        "plumb_single"
                    } else {
                        "plumb_bulk"
                    }
                ))
                .map(|_| ()),
            Tx::Checkpoint => c.query(CHECKPOINT).map(|_| ()),
        };
        match r {
            Ok(()) => Ok(true),
            Err(MyError::Db { message, .. }) if message.starts_with("PLRB1") => Ok(false),
            Err(e) => Err(classify_wire(e, self.conn.is_dead())),
        }
    }
}

fn tpcb(c: &mut MyWire, s: &mut [Stmt], aid: i32, tid: i32, bid: i32, delta: i32) -> WRes<()> {
    use Param::Int;
    let (aid, tid, bid, delta) = (aid as i64, tid as i64, bid as i64, delta as i64);
    in_transaction(c, |c| {
        c.execute(&mut s[0], &[Int(delta), Int(aid)])?;
        // The account's balance: a read that finds nothing fails the transaction.
        let (_, found) = c.execute(&mut s[1], &[Int(aid)])?;
        if found != 1 {
            return Err(MyError::Db {
                code: 0,
                state: "rows".into(),
                message: format!("the account's select found {found} rows, not one (aid {aid})"),
            });
        }
        c.execute(&mut s[2], &[Int(delta), Int(tid)])?;
        c.execute(&mut s[3], &[Int(delta), Int(bid)])?;
        c.execute(&mut s[4], &[Int(tid), Int(bid), Int(aid), Int(delta)])?;
        Ok(())
    })
}

/// START TRANSACTION, `body`, COMMIT; after a failure, ROLLBACK (on a live connection).
fn in_transaction(c: &mut MyWire, body: impl FnOnce(&mut MyWire) -> WRes<()>) -> WRes<()> {
    c.query("START TRANSACTION")?;
    match body(c) {
        Ok(()) => c.query("COMMIT").map(|_| ()),
        Err(e) => {
            if !c.is_dead() {
                let _ = c.query("ROLLBACK");
            }
            Err(e)
        }
    }
}

/// sysbench's oltp_read_write: START TRANSACTION, the eighteen statements, COMMIT; after a
/// failure, ROLLBACK.
fn read_write(c: &mut MyWire, s: &mut [Stmt], tx: &Tx) -> WRes<()> {
    use Param::{Int, Text};
    let Tx::ReadWrite {
        points,
        ranges,
        k_id,
        c_id,
        del_id,
        k,
        c: cv,
        pad,
    } = tx
    else {
        return Ok(());
    };
    let i = |v: &i32| Int(i64::from(*v));
    in_transaction(c, |c| {
        for p in points {
            c.execute(&mut s[0], &[i(p)])?;
        }
        for (q, first) in ranges.iter().enumerate() {
            let last = first + super::RW_RANGE - 1;
            c.execute(&mut s[1 + q], &[i(first), i(&last)])?;
        }
        c.execute(&mut s[5], &[i(k_id)])?;
        c.execute(&mut s[6], &[Text(cv), i(c_id)])?;
        c.execute(&mut s[7], &[i(del_id)])?;
        c.execute(&mut s[8], &[i(del_id), i(k), Text(cv), Text(pad)])?;
        Ok(())
    })
}

/// A MariaDB error as the driver counts it: 1213 deadlock, 1205 lock wait timeout, a broken
/// connection (the server's 1927 or 1053, a closed or unreadable one) lost.
fn classify_wire(e: MyError, dead: bool) -> TxError {
    match e {
        // plumb's own: a read that found no row.
        MyError::Db { state, message, .. } if state == "rows" => TxError {
            failed: Failed::Other,
            code: "rows".into(),
            message,
        },
        MyError::Db { code, message, .. } => TxError {
            failed: match code {
                _ if dead => Failed::Lost,
                1213 => Failed::Deadlock,
                1205 => Failed::LockTimeout,
                2006 | 2013 | 1927 | 1053 => Failed::Lost,
                _ => Failed::Other,
            },
            code: code.to_string(),
            message,
        },
        MyError::Io(_) | MyError::Protocol(_) => TxError {
            failed: if dead { Failed::Lost } else { Failed::Other },
            code: "connection".into(),
            message: e.to_string(),
        },
    }
}
