//! The workloads on PostgreSQL: the schemas, a loader that generates each warehouse (or branch)
//! on the server (generate_series, one statement a table), the order-entry transactions as
//! PL/pgSQL functions, pgbench's statements as pgbench sends them, and a client that runs them
//! through prepared statements.

use super::wire::{Login, Param, Wire, WireError};
use super::{Failed, Tx, TxError, Workload};
use crate::pg::{parse_url, with_causes};
use crate::{Error, Result, Target};
use postgres::NoTls;

/// A session of the postgres crate (the load's administration, its loader, its checks) that
/// never holds plumb on its way out: postgres::Client's own drop waits for the server to close
/// the connection, which a server that answers nothing never does; this one lets that wait
/// happen on a thread of its own.
pub struct Client(Option<postgres::Client>);

impl Client {
    fn new(c: postgres::Client) -> Client {
        Client(Some(c))
    }
}

impl std::ops::Deref for Client {
    type Target = postgres::Client;
    fn deref(&self) -> &postgres::Client {
        self.0.as_ref().expect("taken only on drop")
    }
}

impl std::ops::DerefMut for Client {
    fn deref_mut(&mut self) -> &mut postgres::Client {
        self.0.as_mut().expect("taken only on drop")
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        if let Some(c) = self.0.take() {
            let _ = std::thread::Builder::new()
                .name("plumb-pg-close".into())
                .spawn(move || drop(c));
        }
    }
}

/// Something another thread can call to cancel a connection's running statement.
pub fn canceller(c: &Client) -> Box<dyn Fn() + Send + Sync> {
    let token = c.cancel_token();
    Box::new(move || {
        let _ = token.cancel_query(NoTls);
    })
}

/// The tables, created without keys: the loader fills them first, `KEYS` comes after.
const SCHEMA: &str = "
CREATE TABLE warehouse (w_id int NOT NULL, w_name varchar(10), w_street_1 varchar(20),
  w_street_2 varchar(20), w_city varchar(20), w_state char(2), w_zip char(9),
  w_tax numeric(4,4), w_ytd numeric(12,2));
CREATE TABLE district (d_id int NOT NULL, d_w_id int NOT NULL, d_name varchar(10),
  d_street_1 varchar(20), d_street_2 varchar(20), d_city varchar(20), d_state char(2),
  d_zip char(9), d_tax numeric(4,4), d_ytd numeric(12,2), d_next_o_id int);
CREATE TABLE customer (c_id int NOT NULL, c_d_id int NOT NULL, c_w_id int NOT NULL,
  c_first varchar(16), c_middle char(2), c_last varchar(16), c_street_1 varchar(20),
  c_street_2 varchar(20), c_city varchar(20), c_state char(2), c_zip char(9), c_phone char(16),
  c_since timestamp, c_credit char(2), c_credit_lim numeric(12,2), c_discount numeric(4,4),
  c_balance numeric(12,2), c_ytd_payment numeric(12,2), c_payment_cnt int, c_delivery_cnt int,
  c_data varchar(500));
CREATE TABLE history (h_c_id int, h_c_d_id int, h_c_w_id int, h_d_id int, h_w_id int,
  h_date timestamp, h_amount numeric(6,2), h_data varchar(24));
CREATE TABLE new_order (no_o_id int NOT NULL, no_d_id int NOT NULL, no_w_id int NOT NULL);
CREATE TABLE orders (o_id int NOT NULL, o_d_id int NOT NULL, o_w_id int NOT NULL, o_c_id int,
  o_entry_d timestamp, o_carrier_id int, o_ol_cnt int, o_all_local int);
CREATE TABLE order_line (ol_o_id int NOT NULL, ol_d_id int NOT NULL, ol_w_id int NOT NULL,
  ol_number int NOT NULL, ol_i_id int, ol_supply_w_id int, ol_delivery_d timestamp,
  ol_quantity int, ol_amount numeric(6,2), ol_dist_info char(24));
CREATE TABLE item (i_id int NOT NULL, i_im_id int, i_name varchar(24), i_price numeric(5,2),
  i_data varchar(50));
CREATE TABLE stock (s_i_id int NOT NULL, s_w_id int NOT NULL, s_quantity int,
  s_dist_01 char(24), s_dist_02 char(24), s_dist_03 char(24), s_dist_04 char(24),
  s_dist_05 char(24), s_dist_06 char(24), s_dist_07 char(24), s_dist_08 char(24),
  s_dist_09 char(24), s_dist_10 char(24), s_ytd int, s_order_cnt int, s_remote_cnt int,
  s_data varchar(50));
CREATE FUNCTION plumb_str(lo int, hi int) RETURNS text LANGUAGE sql VOLATILE AS
  $$ SELECT substr(repeat(md5(random()::text), 16), 1, lo + floor(random() * (hi - lo + 1))::int) $$;
CREATE FUNCTION plumb_nurand(a int, x int, y int, c int) RETURNS int LANGUAGE sql VOLATILE AS
  $$ SELECT (((floor(random() * (a + 1))::int | (x + floor(random() * (y - x + 1))::int)) + c) % (y - x + 1)) + x $$;
CREATE FUNCTION plumb_last(n int) RETURNS text LANGUAGE sql IMMUTABLE AS
  $$ SELECT s[n / 100 + 1] || s[n / 10 % 10 + 1] || s[n % 10 + 1] FROM (SELECT ARRAY[SYLLABLES] s) x $$;
";

/// Keys and the two secondary indexes TPC-C's transactions need, built after the load.
const KEYS: [&str; 10] = [
    "ALTER TABLE warehouse ADD PRIMARY KEY (w_id)",
    "ALTER TABLE district ADD PRIMARY KEY (d_w_id, d_id)",
    "ALTER TABLE customer ADD PRIMARY KEY (c_w_id, c_d_id, c_id)",
    "CREATE INDEX customer_name ON customer (c_w_id, c_d_id, c_last, c_first)",
    "ALTER TABLE new_order ADD PRIMARY KEY (no_w_id, no_d_id, no_o_id)",
    "ALTER TABLE orders ADD PRIMARY KEY (o_w_id, o_d_id, o_id)",
    "CREATE INDEX orders_customer ON orders (o_w_id, o_d_id, o_c_id, o_id)",
    "ALTER TABLE order_line ADD PRIMARY KEY (ol_w_id, ol_d_id, ol_o_id, ol_number)",
    "ALTER TABLE item ADD PRIMARY KEY (i_id)",
    "ALTER TABLE stock ADD PRIMARY KEY (s_w_id, s_i_id)",
];

const ITEMS_SQL: &str = "
INSERT INTO item (i_id, i_im_id, i_name, i_price, i_data)
SELECT i, 1 + floor(random() * 10000)::int, plumb_str(14, 24), round((1 + random() * 99)::numeric, 2),
  CASE WHEN random() < 0.1 THEN overlay(plumb_str(26, 50) placing 'ORIGINAL' from 3) ELSE plumb_str(26, 50) END
FROM generate_series(1, 100000) i";

/// One warehouse's rows, `$W` its number: TPC-C's clause 4.3.3 cardinalities and values.
const WAREHOUSE_SQL: &str = "
INSERT INTO warehouse VALUES ($W, plumb_str(6, 10), plumb_str(10, 20), plumb_str(10, 20),
  plumb_str(10, 20), upper(substr(md5(random()::text), 1, 2)), lpad(floor(random() * 10000)::text, 4, '0') || '11111',
  round((random() * 0.2)::numeric, 4), 300000);
INSERT INTO district SELECT d, $W, plumb_str(6, 10), plumb_str(10, 20), plumb_str(10, 20),
  plumb_str(10, 20), upper(substr(md5(random()::text), 1, 2)), lpad(floor(random() * 10000)::text, 4, '0') || '11111',
  round((random() * 0.2)::numeric, 4), 30000, 3001 FROM generate_series(1, 10) d;
INSERT INTO customer SELECT c, d, $W, plumb_str(8, 16), 'OE',
  CASE WHEN c <= 1000 THEN plumb_last(c - 1) ELSE plumb_last(plumb_nurand(255, 0, 999, C_LAST_LOAD)) END,
  plumb_str(10, 20), plumb_str(10, 20), plumb_str(10, 20), upper(substr(md5(random()::text), 1, 2)),
  lpad(floor(random() * 10000)::text, 4, '0') || '11111', lpad(floor(random() * 1e15)::bigint::text, 16, '0'),
  now(), CASE WHEN random() < 0.1 THEN 'BC' ELSE 'GC' END, 50000, round((random() * 0.5)::numeric, 4),
  -10, 10, 1, 0, plumb_str(300, 500)
  FROM generate_series(1, 10) d, generate_series(1, 3000) c;
INSERT INTO history SELECT c, d, $W, d, $W, now(), 10, plumb_str(12, 24)
  FROM generate_series(1, 10) d, generate_series(1, 3000) c;
WITH o AS (
  INSERT INTO orders SELECT o, d, $W, c, now(), CASE WHEN o < 2101 THEN 1 + floor(random() * 10)::int END,
    5 + floor(random() * 11)::int, 1
  FROM (SELECT d, o, row_number() OVER (PARTITION BY d ORDER BY random())::int c
        FROM generate_series(1, 10) d, generate_series(1, 3000) o) x
  RETURNING o_id, o_d_id, o_ol_cnt, o_entry_d)
INSERT INTO order_line SELECT o.o_id, o.o_d_id, $W, n, 1 + floor(random() * 100000)::int, $W,
  CASE WHEN o.o_id < 2101 THEN o.o_entry_d END, 5,
  CASE WHEN o.o_id < 2101 THEN 0 ELSE round((0.01 + random() * 9999.98)::numeric, 2) END, plumb_str(24, 24)
  FROM o, generate_series(1, o.o_ol_cnt) n;
INSERT INTO new_order SELECT o, d, $W FROM generate_series(1, 10) d, generate_series(2101, 3000) o;
INSERT INTO stock SELECT i, $W, 10 + floor(random() * 91)::int, plumb_str(24, 24), plumb_str(24, 24),
  plumb_str(24, 24), plumb_str(24, 24), plumb_str(24, 24), plumb_str(24, 24), plumb_str(24, 24),
  plumb_str(24, 24), plumb_str(24, 24), plumb_str(24, 24), 0, 0, 0,
  CASE WHEN random() < 0.1 THEN overlay(plumb_str(26, 50) placing 'ORIGINAL' from 3) ELSE plumb_str(26, 50) END
  FROM generate_series(1, 100000) i";

/// pgbench's tables, as `pgbench -i` makes them.
const PGBENCH_SCHEMA: &str = "
CREATE TABLE pgbench_branches (bid int NOT NULL, bbalance int, filler char(88)) WITH (fillfactor = 100);
CREATE TABLE pgbench_tellers (tid int NOT NULL, bid int, tbalance int, filler char(84)) WITH (fillfactor = 100);
CREATE TABLE pgbench_accounts (aid int NOT NULL, bid int, abalance int, filler char(84)) WITH (fillfactor = 100);
CREATE TABLE pgbench_history (tid int, bid int, aid int, delta int, mtime timestamp, filler char(22));
";

/// One branch (`$B`) with its ten tellers and 100,000 accounts.
const BRANCH_SQL: &str = "
INSERT INTO pgbench_branches VALUES ($B, 0, NULL);
INSERT INTO pgbench_tellers SELECT t, $B, 0, NULL FROM generate_series(($B - 1) * 10 + 1, $B * 10) t;
INSERT INTO pgbench_accounts SELECT a, $B, 0, '' FROM generate_series(($B - 1) * 100000 + 1, $B * 100000) a";

const PGBENCH_KEYS: [&str; 3] = [
    "ALTER TABLE pgbench_branches ADD PRIMARY KEY (bid)",
    "ALTER TABLE pgbench_tellers ADD PRIMARY KEY (tid)",
    "ALTER TABLE pgbench_accounts ADD PRIMARY KEY (aid)",
];

/// sysbench's table for oltp_read_write (its keys after the rows, as pgbench's).
const RW_SCHEMA: &str = "CREATE TABLE plumb_rw (id int NOT NULL, k int NOT NULL DEFAULT 0,
  c char(120) NOT NULL DEFAULT '', pad char(60) NOT NULL DEFAULT '')";

/// One unit (`$J`, 0-based) of the read-write table's rows: keys in order, `k` uniform over
/// the table, `c` and `pad` groups of 11 random digits, as sysbench fills them.
fn rw_rows_sql(j: u32, scale: u32) -> String {
    let g = "lpad(floor(random() * 1e11)::bigint::text, 11, '0')";
    let groups = |n: usize| vec![g; n].join(" || '-' || ");
    let rows = super::ACCOUNTS * i64::from(scale);
    let first = i64::from(j) * super::ACCOUNTS + 1;
    format!(
        "INSERT INTO plumb_rw SELECT i, 1 + floor(random() * {rows})::int, {}, {} FROM generate_series({first}, {}) i",
        groups(10),
        groups(5),
        first + super::ACCOUNTS - 1
    )
}

/// sysbench's oltp_read_write statements, in `Tx::ReadWrite`'s order.
const RW: [&str; 9] = [
    "SELECT c FROM plumb_rw WHERE id = $1",
    "SELECT c FROM plumb_rw WHERE id BETWEEN $1 AND $2",
    "SELECT sum(k) FROM plumb_rw WHERE id BETWEEN $1 AND $2",
    "SELECT c FROM plumb_rw WHERE id BETWEEN $1 AND $2 ORDER BY c",
    "SELECT DISTINCT c FROM plumb_rw WHERE id BETWEEN $1 AND $2 ORDER BY c",
    "UPDATE plumb_rw SET k = k + 1 WHERE id = $1",
    "UPDATE plumb_rw SET c = $1 WHERE id = $2",
    "DELETE FROM plumb_rw WHERE id = $1",
    "INSERT INTO plumb_rw (id, k, c, pad) VALUES ($1, $2, $3, $4)",
];

/// pgbench's TPC-B-like transaction, statement by statement (between BEGIN and COMMIT).
const TPCB: [&str; 5] = [
    "UPDATE pgbench_accounts SET abalance = abalance + $1 WHERE aid = $2",
    "SELECT abalance FROM pgbench_accounts WHERE aid = $1",
    "UPDATE pgbench_tellers SET tbalance = tbalance + $1 WHERE tid = $2",
    "UPDATE pgbench_branches SET bbalance = bbalance + $1 WHERE bid = $2",
    "INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES ($1, $2, $3, $4, CURRENT_TIMESTAMP)",
];

/// The five transactions, each one function (one round trip, one transaction).
const PROCEDURES: &str = r#"
CREATE FUNCTION plumb_neword(p_w int, p_d int, p_c int, p_items int[], p_supply int[], p_qty int[])
RETURNS int LANGUAGE plpgsql AS $$
DECLARE
  v_o int; v_d_tax numeric; v_w_tax numeric; v_disc numeric; v_all_local int := 1;
  v_price numeric; v_dist text; v_total numeric := 0;
BEGIN
  FOR i IN 1 .. array_length(p_items, 1) LOOP
    IF p_supply[i] <> p_w THEN v_all_local := 0; END IF;
  END LOOP;
  SELECT w_tax INTO v_w_tax FROM warehouse WHERE w_id = p_w;
  UPDATE district SET d_next_o_id = d_next_o_id + 1 WHERE d_w_id = p_w AND d_id = p_d
    RETURNING d_next_o_id - 1, d_tax INTO v_o, v_d_tax;
  SELECT c_discount INTO v_disc FROM customer WHERE c_w_id = p_w AND c_d_id = p_d AND c_id = p_c;
  INSERT INTO orders VALUES (v_o, p_d, p_w, p_c, now(), NULL, array_length(p_items, 1), v_all_local);
  INSERT INTO new_order VALUES (v_o, p_d, p_w);
  FOR i IN 1 .. array_length(p_items, 1) LOOP
    SELECT i_price INTO v_price FROM item WHERE i_id = p_items[i];
    IF NOT FOUND THEN
      RAISE EXCEPTION 'item % does not exist: the new order is rolled back', p_items[i] USING ERRCODE = 'PLRB1';
    END IF;
    UPDATE stock SET
      s_quantity = CASE WHEN s_quantity - p_qty[i] >= 10 THEN s_quantity - p_qty[i] ELSE s_quantity - p_qty[i] + 91 END,
      s_ytd = s_ytd + p_qty[i], s_order_cnt = s_order_cnt + 1,
      s_remote_cnt = s_remote_cnt + CASE WHEN p_supply[i] <> p_w THEN 1 ELSE 0 END
    WHERE s_w_id = p_supply[i] AND s_i_id = p_items[i]
    RETURNING CASE p_d WHEN 1 THEN s_dist_01 WHEN 2 THEN s_dist_02 WHEN 3 THEN s_dist_03
      WHEN 4 THEN s_dist_04 WHEN 5 THEN s_dist_05 WHEN 6 THEN s_dist_06 WHEN 7 THEN s_dist_07
      WHEN 8 THEN s_dist_08 WHEN 9 THEN s_dist_09 ELSE s_dist_10 END INTO v_dist;
    INSERT INTO order_line VALUES (v_o, p_d, p_w, i, p_items[i], p_supply[i], NULL, p_qty[i],
      p_qty[i] * v_price, v_dist);
    v_total := v_total + p_qty[i] * v_price;
  END LOOP;
  RETURN v_o;
END $$;

CREATE FUNCTION plumb_customer(p_w int, p_d int, p_c int, p_last text) RETURNS int
LANGUAGE plpgsql AS $$
DECLARE v_n int; v_c int;
BEGIN
  IF p_c > 0 THEN RETURN p_c; END IF;
  SELECT count(*) INTO v_n FROM customer WHERE c_w_id = p_w AND c_d_id = p_d AND c_last = p_last;
  SELECT c_id INTO v_c FROM customer WHERE c_w_id = p_w AND c_d_id = p_d AND c_last = p_last
    ORDER BY c_first OFFSET greatest((v_n - 1) / 2, 0) LIMIT 1;
  RETURN v_c;
END $$;

CREATE FUNCTION plumb_payment(p_w int, p_d int, p_c_w int, p_c_d int, p_c int, p_last text, p_amount numeric)
RETURNS int LANGUAGE plpgsql AS $$
DECLARE v_c int; v_credit text; v_w_name text; v_d_name text;
BEGIN
  UPDATE warehouse SET w_ytd = w_ytd + p_amount WHERE w_id = p_w RETURNING w_name INTO v_w_name;
  UPDATE district SET d_ytd = d_ytd + p_amount WHERE d_w_id = p_w AND d_id = p_d RETURNING d_name INTO v_d_name;
  v_c := plumb_customer(p_c_w, p_c_d, p_c, p_last);
  UPDATE customer SET c_balance = c_balance - p_amount, c_ytd_payment = c_ytd_payment + p_amount,
    c_payment_cnt = c_payment_cnt + 1
  WHERE c_w_id = p_c_w AND c_d_id = p_c_d AND c_id = v_c RETURNING c_credit INTO v_credit;
  IF v_credit = 'BC' THEN
    UPDATE customer SET c_data = substr(concat_ws(' ', v_c, p_c_d, p_c_w, p_d, p_w, p_amount) || ' | ' || c_data, 1, 500)
    WHERE c_w_id = p_c_w AND c_d_id = p_c_d AND c_id = v_c;
  END IF;
  INSERT INTO history VALUES (v_c, p_c_d, p_c_w, p_d, p_w, now(), p_amount, substr(v_w_name || '    ' || v_d_name, 1, 24));
  RETURN v_c;
END $$;

CREATE FUNCTION plumb_ostat(p_w int, p_d int, p_c int, p_last text) RETURNS int
LANGUAGE plpgsql AS $$
DECLARE v_c int; v_bal numeric; v_o int; v_lines int;
BEGIN
  v_c := plumb_customer(p_w, p_d, p_c, p_last);
  SELECT c_balance INTO v_bal FROM customer WHERE c_w_id = p_w AND c_d_id = p_d AND c_id = v_c;
  SELECT o_id INTO v_o FROM orders WHERE o_w_id = p_w AND o_d_id = p_d AND o_c_id = v_c
    ORDER BY o_id DESC LIMIT 1;
  SELECT count(*) INTO v_lines FROM (SELECT ol_i_id, ol_supply_w_id, ol_quantity, ol_amount, ol_delivery_d
    FROM order_line WHERE ol_w_id = p_w AND ol_d_id = p_d AND ol_o_id = v_o) l;
  RETURN v_lines;
END $$;

CREATE FUNCTION plumb_delivery(p_w int, p_carrier int) RETURNS int LANGUAGE plpgsql AS $$
DECLARE v_o int; v_c int; v_total numeric; v_done int := 0;
BEGIN
  FOR d IN 1 .. 10 LOOP
    DELETE FROM new_order WHERE no_w_id = p_w AND no_d_id = d AND no_o_id =
      (SELECT min(no_o_id) FROM new_order WHERE no_w_id = p_w AND no_d_id = d)
      RETURNING no_o_id INTO v_o;
    CONTINUE WHEN v_o IS NULL;
    UPDATE orders SET o_carrier_id = p_carrier WHERE o_w_id = p_w AND o_d_id = d AND o_id = v_o
      RETURNING o_c_id INTO v_c;
    UPDATE order_line SET ol_delivery_d = now() WHERE ol_w_id = p_w AND ol_d_id = d AND ol_o_id = v_o;
    SELECT sum(ol_amount) INTO v_total FROM order_line WHERE ol_w_id = p_w AND ol_d_id = d AND ol_o_id = v_o;
    UPDATE customer SET c_balance = c_balance + v_total, c_delivery_cnt = c_delivery_cnt + 1
      WHERE c_w_id = p_w AND c_d_id = d AND c_id = v_c;
    v_done := v_done + 1;
  END LOOP;
  RETURN v_done;
END $$;

CREATE FUNCTION plumb_slev(p_w int, p_d int, p_threshold int) RETURNS int LANGUAGE plpgsql AS $$
DECLARE v_next int; v_low int;
BEGIN
  SELECT d_next_o_id INTO v_next FROM district WHERE d_w_id = p_w AND d_id = p_d;
  SELECT count(DISTINCT s_i_id) INTO v_low FROM order_line, stock
  WHERE ol_w_id = p_w AND ol_d_id = p_d AND ol_o_id < v_next AND ol_o_id >= v_next - 20
    AND s_w_id = p_w AND s_i_id = ol_i_id AND s_quantity < p_threshold;
  RETURN v_low;
END $$;
"#;

/// What plumb load's sessions call themselves: `plumb load (PID N)`, so that a later run can
/// tell a killed run's sessions (in the database that run made) from anybody else's.
pub fn application_name() -> String {
    format!("plumb load (PID {})", std::process::id())
}

/// Cancel the statements of dead plumb `pid`'s sessions in `db` (its name on them, the role
/// plumb connects as) and wait up to `wait` for every session in `db` to be gone. Whether
/// they are.
pub fn end_sessions_of(admin: &mut Client, db: &str, pid: u32, wait: std::time::Duration) -> bool {
    let app = format!("plumb load (PID {pid})");
    let t0 = std::time::Instant::now();
    loop {
        // A cancelled statement fails; its backend then finds its client gone and ends.
        let _ = admin.query(
            "SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND application_name = $2 AND usename = current_user",
            &[&db, &app],
        );
        let any: i64 = admin
            .query_one(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()",
                &[&db],
            )
            .and_then(|r| r.try_get::<_, i64>(0))
            .unwrap_or(1);
        if any == 0 {
            return true;
        }
        if t0.elapsed() > wait {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}

/// Connect to the database the target's URL names (where plumb creates and drops its own).
pub(crate) fn connect_admin(t: &Target) -> Result<Client> {
    let mut cfg = parse_url(t)?;
    cfg.application_name(&application_name());
    cfg.connect(NoTls)
        .map(Client::new)
        .map_err(|e| Error::Connect {
            url: t.shown(),
            message: crate::with_hint(crate::Kind::Postgres, with_causes(&e)),
            source: Some(Box::new(e)),
        })
}

/// The server's version as it says it (`15.8`, `17.2 (Debian 17.2-1)`).
pub(crate) fn server_version(c: &mut Client) -> Result<String> {
    let r = c
        .query_one("SHOW server_version", &[])
        .map_err(q("reading the server's version"))?;
    Ok(r.get(0))
}

/// Connect to `db` on the target's server.
pub(crate) fn connect_to(t: &Target, db: &str, label: &str) -> Result<Client> {
    let mut cfg = parse_url(t)?;
    cfg.dbname(db);
    cfg.application_name(&application_name());
    cfg.connect(NoTls)
        .map(Client::new)
        .map_err(|e| Error::Connect {
            url: format!("{label} (database {db})"),
            message: crate::with_hint(crate::Kind::Postgres, with_causes(&e)),
            source: Some(Box::new(e)),
        })
}

fn q(what: &str) -> impl Fn(postgres::Error) -> Error + '_ {
    move |e| crate::pg::qerr(what, e)
}

/// Look for `db` from a session in another database (the target's own).
pub fn find(admin: &mut Client, db: &str) -> Result<super::holdings::Found> {
    use super::holdings::Found;
    let row = admin
        .query_opt(
            "SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = $1",
            &[&db],
        )
        .map_err(q("looking for the load's database"))?;
    Ok(match row {
        None => Found::Nothing,
        Some(r) => super::parse_mark(r.get::<_, Option<String>>(0).as_deref()),
    })
}

/// Create `db` (a checked name) from template0, so that it holds nothing but what plumb puts
/// in it (a template1 with extensions or tables of a site's would make every new database hold
/// them, and plumb would take its own for somebody else's), then mark it with the run that
/// made it.
pub fn create_database(admin: &mut Client, db: &str, run: &str) -> Result<()> {
    admin
        .batch_execute(&format!("CREATE DATABASE {db} TEMPLATE template0"))
        .map_err(q("creating the load's database"))?;
    // Made a moment ago and empty: if it cannot carry the run's mark, it goes at once.
    comment(admin, db, &super::loading_mark(run)).inspect_err(|_| {
        let _ = drop_database(admin, db);
    })
}

fn comment(admin: &mut Client, db: &str, mark: &str) -> Result<()> {
    admin
        .batch_execute(&format!(
            "COMMENT ON DATABASE {db} IS '{}'",
            mark.replace('\'', "''")
        ))
        .map_err(q("marking the load's database"))
}

/// Mark `db` as plumb's, loaded whole: only a database with this mark is ever reused.
pub fn mark_database(admin: &mut Client, db: &str, mark: &str) -> Result<()> {
    comment(admin, db, mark)
}

/// Every object of a user's in the database plumb is connected to: (kind, name, owner).
/// Relations, routines, schemas, extensions, types and large objects; the system's own left out.
const OBJECTS: &str = "
SELECT CASE c.relkind WHEN 'v' THEN 'view' WHEN 'm' THEN 'materialized view'
         WHEN 'f' THEN 'foreign table' WHEN 'c' THEN 'type' WHEN 'S' THEN 'sequence' ELSE 'table' END,
       CASE WHEN n.nspname = 'public' THEN c.relname::text ELSE n.nspname || '.' || c.relname END,
       pg_get_userbyid(c.relowner)::text
  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
 WHERE c.relkind IN ('r', 'p', 'v', 'm', 'f', 'c')
   AND n.nspname NOT IN ('pg_catalog', 'information_schema')
   AND n.nspname NOT LIKE 'pg\\_toast%' AND n.nspname NOT LIKE 'pg\\_temp\\_%'
UNION ALL
SELECT CASE p.prokind WHEN 'p' THEN 'procedure' WHEN 'a' THEN 'aggregate' ELSE 'function' END,
       CASE WHEN n.nspname = 'public' THEN p.proname::text ELSE n.nspname || '.' || p.proname END,
       pg_get_userbyid(p.proowner)::text
  FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
 WHERE n.nspname NOT IN ('pg_catalog', 'information_schema')
   AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_proc'::regclass
                   AND d.objid = p.oid AND d.deptype = 'e')
UNION ALL
SELECT 'schema', nspname::text, pg_get_userbyid(nspowner)::text FROM pg_namespace
 WHERE nspname NOT IN ('public', 'pg_catalog', 'information_schema')
   AND nspname NOT LIKE 'pg\\_toast%' AND nspname NOT LIKE 'pg\\_temp\\_%'
UNION ALL
SELECT 'extension', extname::text, NULL FROM pg_extension WHERE extname <> 'plpgsql'
UNION ALL
SELECT 'type', n.nspname || '.' || t.typname, pg_get_userbyid(t.typowner)::text
  FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace
 WHERE t.typtype IN ('e', 'd', 'r', 'm') AND n.nspname NOT IN ('pg_catalog', 'information_schema')
UNION ALL
SELECT 'large objects:', count(*)::text, NULL FROM pg_largeobject_metadata HAVING count(*) > 0";

/// Who owns `db`, and what in it plumb does not make (a session in it, closed after).
pub fn holdings(
    admin: &mut Client,
    t: &Target,
    db: &str,
    allowed: &[String],
) -> Result<super::holdings::Holdings> {
    let row = admin
        .query_opt(
            "SELECT pg_get_userbyid(datdba)::text, current_user::text FROM pg_database WHERE datname = $1",
            &[&db],
        )
        .map_err(q("reading who owns the load's database"))?;
    let Some(row) = row else {
        return Ok(super::holdings::Holdings::default());
    };
    let (owner, me): (String, String) = (row.get(0), row.get(1));
    let mut c = connect_to(t, db, &t.shown())?;
    let objects: Vec<(String, String, Option<String>)> = c
        .query(OBJECTS, &[])
        .map_err(q("reading what the load's database holds"))?
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect();
    drop(c);
    Ok(super::holdings::Holdings {
        foreign: super::holdings::foreign_objects(&objects, allowed, &me),
        owner: Some(owner),
        me,
    })
}

/// Drop `db`. Never `WITH (FORCE)`: PostgreSQL waits up to 5 s for the sessions in it to end
/// (plumb's own, closing) and refuses if any stay; the error names them.
pub fn drop_database(admin: &mut Client, db: &str) -> Result<()> {
    match admin.batch_execute(&format!("DROP DATABASE IF EXISTS {db}")) {
        Ok(()) => Ok(()),
        Err(e) if e.code() == Some(&postgres::error::SqlState::OBJECT_IN_USE) => {
            let sessions: Vec<String> = admin
                .query(
                    "SELECT format('PID %s (%s, %s)', pid, coalesce(usename::text, '?'), coalesce(nullif(application_name, ''), 'no application name')) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()",
                    &[&db],
                )
                .map(|rows| rows.iter().map(|r| r.get(0)).collect())
                .unwrap_or_default();
            Err(Error::Refused(format!(
                "other sessions are in it ({}); plumb drops a database only when nobody else is in it",
                if sessions.is_empty() {
                    "they left as plumb looked".to_string()
                } else {
                    sessions.join(", ")
                }
            )))
        }
        Err(e) => Err(q("dropping the load's database")(e)),
    }
}

/// The insert loops' table, as the script they reproduce has it: a serial and a 2,000-byte
/// default, stored inline (PLAIN: neither compressed nor moved out of the row).
const INSERTS_SCHEMA: &str =
    "CREATE TABLE plumb_inserts (id serial, col1 varchar(2000) DEFAULT repeat('T', 2000));
ALTER TABLE plumb_inserts ALTER col1 SET STORAGE PLAIN;";

/// The insert loops' two rounds as server-side loops, one round trip each: `rows` inserts,
/// each committed (PostgreSQL 11+ commits inside a DO block run on its own), or all in one
/// transaction.
fn inserts_sql(rows: u32, each_commits: bool) -> String {
    let commit = if each_commits { " COMMIT;" } else { "" };
    format!(
        "DO $$ BEGIN FOR i IN 1..{rows} LOOP INSERT INTO plumb_inserts DEFAULT VALUES;{commit} END LOOP; END $$"
    )
}

/// The tables and helper functions (in the load's database).
pub fn create_schema(c: &mut Client, w: Workload) -> Result<()> {
    if w.is_loop() {
        return c
            .batch_execute(INSERTS_SCHEMA)
            .map_err(q("creating the insert loops' table"));
    }
    if w == Workload::ReadWrite {
        return c.batch_execute(RW_SCHEMA).map_err(q("creating the schema"));
    }
    if w != Workload::OrderEntry {
        return c
            .batch_execute(PGBENCH_SCHEMA)
            .map_err(q("creating the schema"));
    }
    let sql = SCHEMA
        .replace("SYLLABLES", &super::syllables_sql())
        .replace("C_LAST_LOAD", &super::C_LAST_LOAD.to_string());
    c.batch_execute(&sql).map_err(q("creating the schema"))
}

/// Load job `j` of `w`'s (0-based, [`Workload::jobs`] of them) at `scale`.
pub fn load_job(c: &mut Client, w: Workload, j: u32, scale: u32) -> Result<()> {
    match w {
        Workload::OrderEntry if j == 0 => load_items(c),
        Workload::OrderEntry => load_warehouse(c, j),
        Workload::ReadWrite => c.batch_execute(&rw_rows_sql(j, scale)).map_err(q(&format!(
            "loading rows {} to {}",
            u64::from(j) * 100_000 + 1,
            u64::from(j + 1) * 100_000
        ))),
        _ => c
            .batch_execute(&BRANCH_SQL.replace("$B", &(j + 1).to_string()))
            .map_err(q(&format!("loading branch {}", j + 1))),
    }
}

pub(crate) fn load_items(c: &mut Client) -> Result<()> {
    c.batch_execute(ITEMS_SQL).map_err(q("loading the items"))
}

pub(crate) fn load_warehouse(c: &mut Client, w: u32) -> Result<()> {
    let sql = WAREHOUSE_SQL
        .replace("$W", &w.to_string())
        .replace("C_LAST_LOAD", &super::C_LAST_LOAD.to_string());
    c.batch_execute(&sql)
        .map_err(q(&format!("loading warehouse {w}")))
}

/// Keys, indexes, the procedures and fresh statistics of pgbench's tables, after the rows
/// are in.
pub(crate) fn finish_pgbench(c: &mut Client) -> Result<()> {
    c.batch_execute("SET maintenance_work_mem = '256MB'")
        .map_err(q("building the keys"))?;
    for k in PGBENCH_KEYS {
        c.batch_execute(k).map_err(q("building the keys"))?;
    }
    c.batch_execute(
        "VACUUM ANALYZE pgbench_branches, pgbench_tellers, pgbench_accounts, pgbench_history",
    )
    .map_err(q("vacuuming the tables"))
}

/// The read-write table's key and index, and fresh statistics, after the rows are in.
pub(crate) fn finish_rw(c: &mut Client) -> Result<()> {
    c.batch_execute(
        "SET maintenance_work_mem = '256MB';
         ALTER TABLE plumb_rw ADD PRIMARY KEY (id);
         CREATE INDEX plumb_rw_k ON plumb_rw (k)",
    )
    .map_err(q("building the keys"))?;
    c.batch_execute("VACUUM ANALYZE plumb_rw")
        .map_err(q("vacuuming the tables"))
}

/// Keys, indexes, the procedures and fresh statistics, after the rows are in.
pub fn finish(c: &mut Client) -> Result<()> {
    c.batch_execute("SET maintenance_work_mem = '256MB'")
        .map_err(q("building the keys"))?;
    for k in KEYS {
        c.batch_execute(k).map_err(q("building the keys"))?;
    }
    c.batch_execute(PROCEDURES)
        .map_err(q("creating the procedures"))?;
    c.batch_execute("ANALYZE")
        .map_err(q("analyzing the tables"))
}

/// The warehouses a kept schema holds.
pub fn warehouses(c: &mut Client) -> Result<i64> {
    let r = c
        .query_one("SELECT count(*) FROM warehouse", &[])
        .map_err(q("counting the warehouses"))?;
    Ok(r.get(0))
}

/// A number from a one-value query (a consistency check, the new-order counter).
pub fn number(c: &mut Client, sql: &str) -> Result<i64> {
    let r = c.query_one(sql, &[]).map_err(q(sql))?;
    Ok(r.try_get::<_, i64>(0).unwrap_or(0))
}

/// Commits and rollbacks of `db` as the server counts them (TPM's source).
pub fn transactions(admin: &mut Client, db: &str) -> Result<i64> {
    let r = admin
        .query_one(
            "SELECT (xact_commit + xact_rollback)::int8 FROM pg_stat_database WHERE datname = $1",
            &[&db],
        )
        .map_err(q("reading pg_stat_database"))?;
    Ok(r.get(0))
}

/// The order-entry transactions' calls, in `Tx`'s order.
const CALLS: [&str; 5] = [
    "SELECT plumb_neword($1, $2, $3, $4, $5, $6)",
    "SELECT plumb_payment($1, $2, $3, $4, $5, $6, $7::int8 / 100.0)",
    "SELECT plumb_ostat($1, $2, $3, $4)",
    "SELECT plumb_delivery($1, $2)",
    "SELECT plumb_slev($1, $2, $3)",
];

/// One client's connection with its workload's statements prepared, on plumb's lean wire
/// client (`wire`): one write and the reads of its reply a statement, as pgbench's libpq;
/// after `share`, on a thread it shares with other clients.
pub struct PgOltp {
    wire: Wire,
    /// Statement names in `Tx`'s order ("s0", "s1", …).
    names: Vec<String>,
}

impl PgOltp {
    pub fn connect(t: &Target, db: &str, w: Workload) -> Result<PgOltp> {
        let mut cfg = parse_url(t)?;
        cfg.application_name(&application_name());
        let login = Login::from_config(&cfg, db).map_err(Error::Url)?;
        let connect_err = |e: WireError| Error::Connect {
            url: format!("{} (database {db})", t.shown()),
            message: crate::with_hint(crate::Kind::Postgres, e.to_string()),
            source: Some(Box::new(e)),
        };
        let mut wire = Wire::connect(&login).map_err(connect_err)?;
        let sqls: &[&str] = match w {
            Workload::OrderEntry => &CALLS,
            Workload::TpcB => &TPCB,
            Workload::PointSelect => &TPCB[1..2],
            Workload::ReadWrite => &RW,
            Workload::InsertSingle | Workload::InsertBulk => {
                &["TRUNCATE plumb_inserts", "CHECKPOINT"]
            }
        };
        let mut names = Vec::new();
        for (i, sql) in sqls.iter().enumerate() {
            let name = format!("s{i}");
            wire.prepare(&name, sql).map_err(|e| Error::Query {
                what: "preparing the transactions".into(),
                message: e.to_string(),
                source: Some(Box::new(e)),
            })?;
            names.push(name);
        }
        if matches!(w, Workload::TpcB | Workload::ReadWrite) {
            for (name, sql) in [("begin", "BEGIN"), ("commit", "COMMIT")] {
                wire.prepare(name, sql).map_err(|e| Error::Query {
                    what: "preparing the transactions".into(),
                    message: e.to_string(),
                    source: Some(Box::new(e)),
                })?;
            }
        }
        Ok(PgOltp { wire, names })
    }

    /// Something another thread can call to cancel the running statement.
    pub fn canceller(&self) -> Box<dyn Fn() + Send + Sync> {
        self.wire.canceller()
    }

    /// Something another thread can call to close the session.
    pub fn closer(&self) -> Box<dyn Fn() + Send + Sync> {
        self.wire.closer()
    }

    /// The backend's process ID (PostgreSQL's backends are single-threaded: its TID).
    pub fn backend_pid(&self) -> Option<u32> {
        self.wire.backend_pid()
    }

    /// Let this session share a thread with others: its `exec_async` then waits in
    /// `plumb_sys::mux` instead of blocking.
    pub fn share(&mut self) -> bool {
        self.wire.set_nonblocking().is_ok()
    }

    /// Run one transaction: Ok(true) committed, Ok(false) rolled back on purpose.
    pub fn exec(&mut self, tx: &Tx) -> std::result::Result<bool, TxError> {
        plumb_sys::mux::block_on(self.exec_async(tx))
    }

    /// `exec`, waiting in `plumb_sys::mux` once the session shares a thread.
    pub async fn exec_async(&mut self, tx: &Tx) -> std::result::Result<bool, TxError> {
        use Param::{Int, Ints, Text};
        let n = &self.names;
        let c = &mut self.wire;
        let i = |v: &i32| Int(i64::from(*v));
        let r = match tx {
            Tx::NewOrder {
                w,
                d,
                c: cust,
                items,
                supply,
                qty,
            } => {
                c.run_async(
                    &n[0],
                    &[i(w), i(d), i(cust), Ints(items), Ints(supply), Ints(qty)],
                )
                .await
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
                c.run_async(
                    &n[1],
                    &[
                        i(w),
                        i(d),
                        i(c_w),
                        i(c_d),
                        i(&id),
                        Text(last),
                        Int(*amount_cents),
                    ],
                )
                .await
            }
            Tx::OrderStatus { w, d, c: cust } => {
                let (id, last) = cust.arg();
                c.run_async(&n[2], &[i(w), i(d), i(&id), Text(last)]).await
            }
            Tx::Delivery { w, carrier } => c.run_async(&n[3], &[i(w), i(carrier)]).await,
            Tx::StockLevel { w, d, threshold } => {
                c.run_async(&n[4], &[i(w), i(d), i(threshold)]).await
            }
            Tx::TpcB {
                aid,
                tid,
                bid,
                delta,
            } => tpcb(c, n, *aid, *tid, *bid, *delta).await,
            Tx::ReadWrite { .. } => read_write(c, n, tx).await,
            Tx::PointSelect { aid } => match c.run_async(&n[0], &[i(aid)]).await {
                Ok(1) => Ok(1),
                Ok(rows) => {
                    return Err(TxError {
                        failed: Failed::Other,
                        code: "rows".into(),
                        message: format!("the point select returned {rows} rows, not one"),
                    })
                }
                Err(e) => Err(e),
            },
            Tx::Truncate => c.run_async(&n[0], &[]).await,
            Tx::Checkpoint => c.run_async(&n[1], &[]).await,
            Tx::Inserts { rows, each_commits } => c
                .simple_async(&inserts_sql(*rows, *each_commits))
                .await
                .map(|_| 1),
        };
        match r {
            Ok(_) => Ok(true),
            Err(WireError::Db { code, .. }) if code == "PLRB1" => Ok(false),
            Err(e) => Err(classify(&e, c.is_dead())),
        }
    }
}

/// sysbench's oltp_read_write: BEGIN, the eighteen statements, COMMIT (twenty round trips,
/// as sysbench sends them); after a failure, ROLLBACK.
async fn read_write(c: &mut Wire, n: &[String], tx: &Tx) -> std::result::Result<u64, WireError> {
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
        return Ok(0);
    };
    let i = |v: &i32| Int(i64::from(*v));
    c.run_async("begin", &[]).await?;
    let body = async {
        for p in points {
            c.run_async(&n[0], &[i(p)]).await?;
        }
        for (q, first) in ranges.iter().enumerate() {
            let last = first + super::RW_RANGE - 1;
            c.run_async(&n[1 + q], &[i(first), i(&last)]).await?;
        }
        c.run_async(&n[5], &[i(k_id)]).await?;
        c.run_async(&n[6], &[Text(cv), i(c_id)]).await?;
        c.run_async(&n[7], &[i(del_id)]).await?;
        c.run_async(&n[8], &[i(del_id), i(k), Text(cv), Text(pad)])
            .await?;
        c.run_async("commit", &[]).await
    };
    let body = body.await;
    if body.is_err() && !c.is_dead() {
        let _ = c.simple_async("ROLLBACK").await;
    }
    body
}

/// pgbench's transaction: BEGIN, the five statements, COMMIT (seven round trips, as pgbench
/// -M prepared sends them); after a failure, ROLLBACK.
async fn tpcb(
    c: &mut Wire,
    n: &[String],
    aid: i32,
    tid: i32,
    bid: i32,
    delta: i32,
) -> std::result::Result<u64, WireError> {
    use Param::Int;
    let (aid, tid, bid, delta) = (
        i64::from(aid),
        i64::from(tid),
        i64::from(bid),
        i64::from(delta),
    );
    c.run_async("begin", &[]).await?;
    let body = async {
        c.run_async(&n[0], &[Int(delta), Int(aid)]).await?;
        // The account's balance: a transaction whose read finds nothing is a failure (an
        // emptied schema, a server that answers nothing), never a result.
        let found = c.run_async(&n[1], &[Int(aid)]).await?;
        if found != 1 {
            return Err(WireError::Db {
                code: "rows".into(),
                message: format!("the account's select found {found} rows, not one (aid {aid})"),
                fatal: false,
            });
        }
        c.run_async(&n[2], &[Int(delta), Int(tid)]).await?;
        c.run_async(&n[3], &[Int(delta), Int(bid)]).await?;
        c.run_async(&n[4], &[Int(tid), Int(bid), Int(aid), Int(delta)])
            .await?;
        c.run_async("commit", &[]).await
    };
    let body = body.await;
    if body.is_err() && !c.is_dead() {
        let _ = c.simple_async("ROLLBACK").await;
    }
    body
}
/// An error on plumb's wire client as the driver counts it.
fn classify(e: &WireError, dead: bool) -> TxError {
    match e {
        WireError::Db { code, message, .. } => TxError {
            failed: if dead || code.starts_with("57P") || code.starts_with("08") {
                Failed::Lost
            } else {
                by_code(code)
            },
            code: code.clone(),
            message: message.clone(),
        },
        WireError::Io(_) | WireError::Protocol(_) => TxError {
            failed: if dead { Failed::Lost } else { Failed::Other },
            code: "connection".into(),
            message: e.to_string(),
        },
    }
}

fn by_code(code: &str) -> Failed {
    match code {
        "40P01" => Failed::Deadlock,
        "40001" => Failed::Serialization,
        "55P03" => Failed::LockTimeout,
        _ => Failed::Other,
    }
}
