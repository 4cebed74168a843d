//! The workloads `plumb load` runs, and each engine's schema, loader and transactions (`pg`):
//!
//! - order-entry, derived from TPC-C (TPC-C-like: not a TPC result): its scale, its five
//!   transactions and their inputs, the consistency conditions checked after a run;
//! - tpcb, the TPC-B-like transaction pgbench runs by default, on pgbench's own tables, statement
//!   by statement as pgbench sends it;
//! - point-select, pgbench's `-S`: one account's balance by its key;
//! - read-write, sysbench's `oltp_read_write`: ten point selects, four range queries (rows,
//!   a sum, ordered, distinct), an update of an indexed and of an unindexed column, a delete
//!   and an insert of the same key, all in one transaction, on a table shaped as sysbench's;
//! - insert-single and insert-bulk, the insert/CHECKPOINT loops: 100 single-row commits, or
//!   10,000 inserts in one transaction, each round followed by a checkpoint (and preceded by
//!   emptying the table, so it stays one round's size).
//!
//! Inputs follow TPC-C's clause 2 (NURand for customers and items, 60% of payments and order
//! statuses by last name, 1% of new orders rolled back on an unused item, 15% of payments and 1%
//! of order lines from a remote warehouse when there are several); the mix is HammerDB's (10/23
//! new-order, 10/23 payment, 1/23 each of delivery, stock-level, order-status).

pub mod driver;
pub mod explain;
pub mod holdings;
pub mod maria;
pub mod mssql;
pub mod mywire;
pub mod pg;
pub mod server;
pub mod waits;
pub mod wire;

/// Items in the catalogue (TPC-C's fixed 100,000).
pub const ITEMS: i32 = 100_000;
/// Districts per warehouse.
pub const DISTRICTS: i32 = 10;
/// Customers (and initial orders) per district.
pub const CUSTOMERS: i32 = 3000;
/// The first initial order that is still undelivered (a new_order row).
pub const FIRST_NEW_ORDER: i32 = 2101;
/// Warehouses at most: beyond, the load takes hours and `--warehouses` is refused.
pub const MAX_WAREHOUSES: u32 = 10_000;

/// A workload `plumb load` runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Workload {
    OrderEntry,
    TpcB,
    PointSelect,
    ReadWrite,
    InsertSingle,
    InsertBulk,
}

/// Rows a round of the insert loops writes: single-row commits, or one transaction's inserts.
pub const SINGLE_ROWS: u32 = 100;
pub const BULK_ROWS: u32 = 10_000;

/// Accounts per unit of pgbench's scale.
pub const ACCOUNTS: i64 = 100_000;
/// Tellers per branch (one branch a unit of scale).
pub const TELLERS: i64 = 10;

impl Workload {
    pub const ALL: [Workload; 6] = [
        Workload::OrderEntry,
        Workload::TpcB,
        Workload::PointSelect,
        Workload::ReadWrite,
        Workload::InsertSingle,
        Workload::InsertBulk,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Workload::OrderEntry => "order-entry",
            Workload::TpcB => "tpcb",
            Workload::PointSelect => "point-select",
            Workload::ReadWrite => "read-write",
            Workload::InsertSingle => "insert-single",
            Workload::InsertBulk => "insert-bulk",
        }
    }

    /// The insert/CHECKPOINT loops: one client, the types in order, no scale, nothing loaded.
    pub fn is_loop(self) -> bool {
        matches!(self, Workload::InsertSingle | Workload::InsertBulk)
    }

    /// Whether the types run in the mix's order (see `load::oltp::Plan::in_order`).
    pub fn in_order(self) -> bool {
        self.is_loop()
    }

    pub fn parse(s: &str) -> Option<Workload> {
        Workload::ALL.into_iter().find(|w| w.name() == s)
    }

    /// The workload a name from another tool means (HammerDB's TPC-C, pgbench's TPC-B or -S,
    /// sysbench's oltp_read_write), for an error that suggests it.
    pub fn suggest(s: &str) -> Option<Workload> {
        let k: String = s
            .chars()
            .filter(|c| c.is_ascii_alphanumeric())
            .collect::<String>()
            .to_ascii_lowercase();
        Some(match k.as_str() {
            "tpcc" | "tproc" | "tprocc" | "hammerdb" | "neworder" | "orderentry" | "oltp" => {
                Workload::OrderEntry
            }
            "tpcb" | "pgbench" | "tpcblike" | "simpleupdate" => Workload::TpcB,
            "selectonly" | "s" | "pointselect" | "oltppointselect" | "select" => {
                Workload::PointSelect
            }
            "oltpreadwrite" | "readwrite" | "sysbench" | "rw" => Workload::ReadWrite,
            "insertsingle" | "singleinsert" | "insert" => Workload::InsertSingle,
            "insertbulk" | "bulkinsert" | "bulk" => Workload::InsertBulk,
            _ => return None,
        })
    }

    /// `--workload`'s check: a workload's name, or an error naming the nearest one
    /// ("tpc-c: order-entry is plumb's TPC-C-like workload").
    pub fn parse_arg(s: &str) -> Result<Workload, String> {
        if let Some(w) = Workload::parse(s) {
            return Ok(w);
        }
        let names: Vec<&str> = Workload::ALL.iter().map(|w| w.name()).collect();
        Err(match Workload::suggest(s) {
            Some(w) => format!(
                "not a workload plumb runs; did you mean {} ({})? The workloads: {}",
                w.name(),
                w.like(),
                names.join(", ")
            ),
            None => format!("not a workload plumb runs: {}", names.join(", ")),
        })
    }

    /// What it is shaped as, in a few words.
    pub fn like(self) -> &'static str {
        match self {
            Workload::OrderEntry => "TPC-C-like, HammerDB's five transactions",
            Workload::TpcB => "pgbench's TPC-B-like transaction",
            Workload::PointSelect => "pgbench -S's select by key",
            Workload::ReadWrite => "sysbench's oltp_read_write",
            Workload::InsertSingle => "100 single-row commits, then CHECKPOINT",
            Workload::InsertBulk => "10,000 inserts in one transaction, then CHECKPOINT",
        }
    }

    /// The transaction types and their weights.
    pub fn mix(self) -> Vec<(&'static str, u32)> {
        match self {
            Workload::OrderEntry => MIX.to_vec(),
            Workload::TpcB => vec![("tpcb", 1)],
            Workload::PointSelect => vec![("point-select", 1)],
            Workload::ReadWrite => vec![("read-write", 1)],
            Workload::InsertSingle => {
                vec![("truncate", 1), ("single-commits", 1), ("checkpoint", 1)]
            }
            Workload::InsertBulk => vec![("truncate", 1), ("bulk-insert", 1), ("checkpoint", 1)],
        }
    }

    /// What the scale counts: warehouses (order-entry), or pgbench's scale (100,000 accounts,
    /// or read-write rows, a unit).
    pub fn scale_flag(self) -> &'static str {
        match self {
            Workload::OrderEntry => "--warehouses",
            _ => "--scale",
        }
    }

    /// The schema it runs on: the two pgbench shapes share pgbench's tables.
    pub fn schema(self) -> &'static str {
        match self {
            Workload::OrderEntry => "order-entry",
            Workload::InsertSingle | Workload::InsertBulk => "inserts",
            Workload::ReadWrite => "read-write",
            _ => "pgbench",
        }
    }

    /// The scale from `--warehouses` (order-entry's) or `--scale` (the others'), 1 by default;
    /// the wrong one for the workload is refused with the reason.
    pub fn scale_of(
        self,
        warehouses: Option<u32>,
        scale: Option<u32>,
    ) -> std::result::Result<u32, &'static str> {
        match (self, warehouses, scale) {
            (w, Some(_), _) | (w, _, Some(_)) if w.is_loop() => Err("--warehouses and --scale size the loaded workloads; the insert loops load nothing (leave them out)"),
            (Workload::OrderEntry, _, Some(_)) => Err("--scale is pgbench's scale, for --workload tpcb, point-select or read-write; order-entry's is --warehouses"),
            (w, Some(_), _) if w != Workload::OrderEntry => Err("--warehouses is order-entry's scale; tpcb, point-select and read-write take --scale"),
            (_, w, s) => Ok(w.or(s).unwrap_or(1)),
        }
    }

    /// What the load's jobs are, in words (the progress line's).
    pub fn jobs_words(self) -> &'static str {
        match self {
            Workload::OrderEntry => "the items and each warehouse",
            Workload::ReadWrite => "100,000 rows at a time",
            _ => "each branch with its tellers and accounts",
        }
    }

    /// The load's jobs: the items and each warehouse, or each branch with its accounts.
    pub fn jobs(self, scale: u32) -> u32 {
        match self {
            Workload::OrderEntry => scale + 1,
            Workload::InsertSingle | Workload::InsertBulk => 0,
            _ => scale,
        }
    }

    /// The tables its schema holds, on every engine.
    pub fn tables(self) -> &'static [&'static str] {
        match self {
            Workload::OrderEntry => &[
                "warehouse",
                "district",
                "customer",
                "history",
                "new_order",
                "orders",
                "order_line",
                "item",
                "stock",
            ],
            Workload::InsertSingle | Workload::InsertBulk => &["plumb_inserts"],
            Workload::ReadWrite => &["plumb_rw"],
            _ => &PGBENCH_TABLES,
        }
    }

    /// Every name plumb gives an object in this workload's database: its tables, the routines
    /// plumb creates beside them on any engine, and MariaDB's mark table. A database that
    /// holds anything else is not plumb's alone, and is never reused or dropped.
    pub fn objects(self) -> Vec<String> {
        self.tables()
            .iter()
            .chain(ROUTINES.iter())
            .chain(std::iter::once(&MARK_TABLE))
            .map(|s| s.to_string())
            .collect()
    }

    /// The rows a whole schema holds at `scale`, table by table: a kept one is reused only
    /// when it still holds them (a schema emptied under plumb's mark passes the balance checks,
    /// and would give a run of reads that find nothing).
    pub fn sizes(self, scale: u32) -> Vec<(&'static str, i64)> {
        let s = i64::from(scale);
        match self {
            Workload::OrderEntry => vec![
                ("warehouse", s),
                ("district", s * i64::from(DISTRICTS)),
                ("customer", s * i64::from(DISTRICTS * CUSTOMERS)),
                ("item", i64::from(ITEMS)),
                ("stock", s * i64::from(ITEMS)),
            ],
            Workload::InsertSingle | Workload::InsertBulk => Vec::new(),
            Workload::ReadWrite => vec![("plumb_rw", s * ACCOUNTS)],
            _ => vec![
                ("pgbench_branches", s),
                ("pgbench_tellers", s * TELLERS),
                ("pgbench_accounts", s * ACCOUNTS),
            ],
        }
    }

    /// What plumb writes on a database it created and loaded whole: a later run reuses a kept
    /// one only when it finds this mark, with the same tables and scale.
    pub fn mark(self, scale: u32) -> String {
        match self {
            Workload::OrderEntry => format!("plumb load: order-entry, {scale} warehouses"),
            Workload::InsertSingle | Workload::InsertBulk => "plumb load: insert loops".into(),
            Workload::ReadWrite => format!("plumb load: read-write table, scale {scale}"),
            _ => format!("plumb load: pgbench tables, scale {scale}"),
        }
    }

    /// The conditions checked after a run (and on a kept schema before one).
    pub fn checks(self) -> &'static [(&'static str, &'static str)] {
        match self {
            Workload::OrderEntry => &CHECKS,
            Workload::InsertSingle | Workload::InsertBulk => &[],
            Workload::ReadWrite => &RW_CHECKS,
            _ => &TPCB_CHECKS,
        }
    }
}

/// pgbench's four tables (pgbench's TPC-B-like transaction and point select, and the lab's
/// pgbench runs).
pub const PGBENCH_TABLES: [&str; 4] = [
    "pgbench_branches",
    "pgbench_tellers",
    "pgbench_accounts",
    "pgbench_history",
];

/// The routines plumb creates in a load's database, on any engine (PostgreSQL's functions,
/// MariaDB's and SQL Server's procedures).
pub const ROUTINES: [&str; 11] = [
    "plumb_str",
    "plumb_nurand",
    "plumb_last",
    "plumb_neword",
    "plumb_customer",
    "plumb_payment",
    "plumb_ostat",
    "plumb_delivery",
    "plumb_slev",
    "plumb_single",
    "plumb_bulk",
];

/// MariaDB's mark: a table of plumb's own in a database it loaded whole, holding the mark
/// ([`Workload::mark`]). A schema comment anyone with ALTER can write is not enough there.
pub const MARK_TABLE: &str = "plumb_mark";

/// What plumb writes on a server-side database the moment it creates it: which run made it (a
/// random token that only that run, and root's ledger, know). A run killed before it finished
/// leaves this mark; the next run that finds the same token in a dead plumb's ledger drops it.
pub(crate) fn loading_mark(run: &str) -> String {
    format!("plumb: loading, run {run}")
}

/// The mark of a database loaded whole by run `run`: the workload's mark and the run.
pub(crate) fn final_mark(mark: &str, run: &str) -> String {
    format!("{mark}; run {run}")
}

/// What a database's mark (a comment, an extended property, MariaDB's mark table) says.
pub(crate) fn parse_mark(m: Option<&str>) -> holdings::Found {
    use holdings::Found;
    match m {
        Some(m) if m.starts_with("plumb load:") => {
            let (mark, run) = match m.split_once("; run ") {
                Some((mark, run)) => (mark.to_string(), Some(run.trim().to_string())),
                None => (m.to_string(), None),
            };
            Found::Plumbs { mark, run }
        }
        Some(m) if m.starts_with("plumb: loading, run ") => Found::Unfinished {
            run: m["plumb: loading, run ".len()..].trim().to_string(),
        },
        _ => Found::Other,
    }
}

/// The TPC-B-like schema's balances agree: what the accounts, tellers and branches gained is
/// what the history recorded.
pub const TPCB_CHECKS: [(&str, &str); 2] = [
    (
        "sum(abalance) = sum(bbalance) = sum(tbalance)",
        "SELECT count(*) FROM (SELECT (SELECT sum(abalance) FROM pgbench_accounts) a, (SELECT sum(bbalance) FROM pgbench_branches) b, (SELECT sum(tbalance) FROM pgbench_tellers) t) x WHERE a <> b OR b <> t",
    ),
    (
        "sum(abalance) = sum(delta) of pgbench_history",
        "SELECT count(*) FROM (SELECT (SELECT sum(abalance) FROM pgbench_accounts) a, (SELECT coalesce(sum(delta), 0) FROM pgbench_history) h) x WHERE a <> h",
    ),
];

/// The read-write table keeps one row a key from 1 up: each transaction deletes a row and
/// inserts it again under the same key.
pub const RW_CHECKS: [(&str, &str); 1] = [(
    "count(*) = max(id) of plumb_rw (no row lost or doubled)",
    "SELECT count(*) FROM (SELECT count(*) n, max(id) m FROM plumb_rw) x WHERE n <> m",
)];

/// The read-write transaction's shape, as sysbench's defaults: point selects, and rows a range.
pub const RW_POINTS: usize = 10;
pub const RW_RANGE: i32 = 100;

/// The transaction types and HammerDB's weights, in the order results list them.
pub const MIX: [(&str, u32); 5] = [
    ("new-order", 10),
    ("payment", 10),
    ("delivery", 1),
    ("stock-level", 1),
    ("order-status", 1),
];
pub const NEW_ORDER: usize = 0;
pub const PAYMENT: usize = 1;
pub const DELIVERY: usize = 2;
pub const STOCK_LEVEL: usize = 3;
pub const ORDER_STATUS: usize = 4;

/// A customer, by number or by last name.
#[derive(Debug, Clone, PartialEq)]
pub enum Customer {
    Id(i32),
    Last(String),
}

/// One transaction's inputs.
#[derive(Debug, Clone, PartialEq)]
pub enum Tx {
    NewOrder {
        w: i32,
        d: i32,
        c: i32,
        /// Item, supplying warehouse and quantity per line, sorted by (warehouse, item) so
        /// concurrent new orders take their stock locks in one order.
        items: Vec<i32>,
        supply: Vec<i32>,
        qty: Vec<i32>,
    },
    Payment {
        w: i32,
        d: i32,
        c_w: i32,
        c_d: i32,
        c: Customer,
        /// In cents.
        amount_cents: i64,
    },
    OrderStatus {
        w: i32,
        d: i32,
        c: Customer,
    },
    Delivery {
        w: i32,
        carrier: i32,
    },
    StockLevel {
        w: i32,
        d: i32,
        threshold: i32,
    },
    /// pgbench's TPC-B-like transaction: an account, its teller and branch, a delta.
    TpcB {
        aid: i32,
        tid: i32,
        bid: i32,
        delta: i32,
    },
    PointSelect {
        aid: i32,
    },
    /// sysbench's oltp_read_write: point selects, the four ranges' first keys (rows, sum,
    /// ordered, distinct), the keys of the indexed and the unindexed update, the key deleted
    /// and inserted again with `k`, `c` and `pad`.
    ReadWrite {
        points: [i32; RW_POINTS],
        ranges: [i32; 4],
        k_id: i32,
        c_id: i32,
        del_id: i32,
        k: i32,
        c: String,
        pad: String,
    },
    /// Empty the insert loops' table.
    Truncate,
    /// `rows` inserts of a default row: each its own transaction (`each_commits`), or all in one.
    Inserts {
        rows: u32,
        each_commits: bool,
    },
    /// The engine's checkpoint (MariaDB: the nearest it has, `innodb_log_checkpoint_now`).
    Checkpoint,
}

impl Customer {
    /// As the procedures take it: (number, "") or (0, last name).
    pub fn arg(&self) -> (i32, &str) {
        match self {
            Customer::Id(id) => (*id, ""),
            Customer::Last(l) => (0, l.as_str()),
        }
    }
}

/// Numbers as a JSON array (`[1,2,3]`), for engines without arrays.
pub(crate) fn json_array(v: &[i32]) -> String {
    format!(
        "[{}]",
        v.iter()
            .map(|x| x.to_string())
            .collect::<Vec<_>>()
            .join(",")
    )
}

/// A uniform draw in `lo..=hi`.
pub type Uniform<'a> = &'a mut dyn FnMut(i64, i64) -> i64;

/// NURand's run-time constants (TPC-C 2.1.6): C for last names, customer numbers and items.
const C_LAST: i64 = 208;
const C_ID: i64 = 37;
const C_ITEM: i64 = 4711;
/// The load's C for last names (a different one, as clause 2.1.6.1 asks of the run's).
pub const C_LAST_LOAD: i64 = 157;

/// TPC-C's non-uniform random: `(((random(0, a) | random(x, y)) + c) % (y - x + 1)) + x`.
pub(crate) fn nurand(u: Uniform, a: i64, x: i64, y: i64, c: i64) -> i64 {
    (((u(0, a) | u(x, y)) + c) % (y - x + 1)) + x
}

const SYLLABLES: [&str; 10] = [
    "BAR", "OUGHT", "ABLE", "PRI", "PRES", "ESE", "ANTI", "CALLY", "ATION", "EING",
];

/// The last name of number `n` (0..=999): three syllables by its digits.
pub(crate) fn last_name(n: i64) -> String {
    let n = n.clamp(0, 999) as usize;
    format!(
        "{}{}{}",
        SYLLABLES[n / 100],
        SYLLABLES[n / 10 % 10],
        SYLLABLES[n % 10]
    )
}

/// The syllables as an SQL array literal's items, for the loaders.
pub(crate) fn syllables_sql() -> String {
    SYLLABLES
        .iter()
        .map(|s| format!("'{s}'"))
        .collect::<Vec<_>>()
        .join(",")
}

fn customer(u: Uniform) -> Customer {
    if u(1, 100) <= 60 {
        Customer::Last(last_name(nurand(u, 255, 0, 999, C_LAST)))
    } else {
        Customer::Id(nurand(u, 1023, 1, CUSTOMERS as i64, C_ID) as i32)
    }
}

fn other_warehouse(u: Uniform, w: i32, warehouses: i32) -> i32 {
    let o = u(1, warehouses as i64 - 1) as i32;
    if o >= w {
        o + 1
    } else {
        o
    }
}

/// The inputs of one transaction of `workload`'s type `kind` at `scale`, for a client whose
/// home (warehouse) is `home`. The pgbench shapes draw uniformly, as pgbench does.
pub fn generate_for(workload: Workload, kind: usize, scale: i32, home: i32, u: Uniform) -> Tx {
    match workload {
        Workload::OrderEntry => generate(kind, scale, home, u),
        Workload::TpcB => Tx::TpcB {
            aid: u(1, ACCOUNTS * scale as i64) as i32,
            tid: u(1, TELLERS * scale as i64) as i32,
            bid: u(1, scale as i64) as i32,
            delta: u(-5000, 5000) as i32,
        },
        Workload::PointSelect => Tx::PointSelect {
            aid: u(1, ACCOUNTS * scale as i64) as i32,
        },
        Workload::ReadWrite => {
            let rows = ACCOUNTS * scale as i64;
            let mut id = || u(1, rows) as i32;
            let points = std::array::from_fn(|_| id());
            let ranges = std::array::from_fn(|_| id());
            let (k_id, c_id, del_id, k) = (id(), id(), id(), id());
            Tx::ReadWrite {
                points,
                ranges,
                k_id,
                c_id,
                del_id,
                k,
                c: digit_groups(u, 10),
                pad: digit_groups(u, 5),
            }
        }
        Workload::InsertSingle | Workload::InsertBulk => match kind {
            0 => Tx::Truncate,
            1 if workload == Workload::InsertSingle => Tx::Inserts {
                rows: SINGLE_ROWS,
                each_commits: true,
            },
            1 => Tx::Inserts {
                rows: BULK_ROWS,
                each_commits: false,
            },
            _ => Tx::Checkpoint,
        },
    }
}

/// sysbench's filler: `groups` groups of 11 random digits joined by dashes (119 characters for
/// `c`, 59 for `pad`).
fn digit_groups(u: Uniform, groups: usize) -> String {
    let mut s = String::with_capacity(groups * 12);
    for g in 0..groups {
        if g > 0 {
            s.push('-');
        }
        let n = u(0, 99_999_999_999);
        let _ = std::fmt::Write::write_fmt(&mut s, format_args!("{n:011}"));
    }
    s
}

/// The inputs of one order-entry transaction of type `kind` for a client whose home is `w`.
pub fn generate(kind: usize, warehouses: i32, w: i32, u: Uniform) -> Tx {
    let d = u(1, DISTRICTS as i64) as i32;
    match kind {
        NEW_ORDER => {
            let n = u(5, 15) as usize;
            let rollback = u(1, 100) == 1;
            let mut lines: Vec<(i32, i32, i32)> = (0..n)
                .map(|i| {
                    let item = if rollback && i == n - 1 {
                        ITEMS + 1
                    } else {
                        nurand(u, 8191, 1, ITEMS as i64, C_ITEM) as i32
                    };
                    let supply = if warehouses > 1 && u(1, 100) == 1 {
                        other_warehouse(u, w, warehouses)
                    } else {
                        w
                    };
                    (supply, item, u(1, 10) as i32)
                })
                .collect();
            // The unused item stays last: the procedure meets it after the real lines.
            let last = rollback.then(|| lines.pop()).flatten();
            lines.sort_unstable();
            lines.extend(last);
            Tx::NewOrder {
                w,
                d,
                c: nurand(u, 1023, 1, CUSTOMERS as i64, C_ID) as i32,
                items: lines.iter().map(|l| l.1).collect(),
                supply: lines.iter().map(|l| l.0).collect(),
                qty: lines.iter().map(|l| l.2).collect(),
            }
        }
        PAYMENT => {
            let (c_w, c_d) = if warehouses > 1 && u(1, 100) <= 15 {
                (
                    other_warehouse(u, w, warehouses),
                    u(1, DISTRICTS as i64) as i32,
                )
            } else {
                (w, d)
            };
            Tx::Payment {
                w,
                d,
                c_w,
                c_d,
                c: customer(u),
                amount_cents: u(100, 500_000),
            }
        }
        DELIVERY => Tx::Delivery {
            w,
            carrier: u(1, 10) as i32,
        },
        STOCK_LEVEL => Tx::StockLevel {
            w,
            d,
            threshold: u(10, 20) as i32,
        },
        _ => Tx::OrderStatus {
            w,
            d,
            c: customer(u),
        },
    }
}

/// Why a transaction failed, as the driver counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failed {
    Deadlock,
    Serialization,
    LockTimeout,
    Lost,
    Other,
}

/// A failed transaction: the class, the engine's code (SQLSTATE, error number), its message.
#[derive(Debug, Clone)]
pub struct TxError {
    pub failed: Failed,
    pub code: String,
    pub message: String,
}

/// TPC-C's consistency conditions 1-4 (clause 3.3.2), each a query counting the rows that
/// break it: 0 when it holds. Plain SQL every engine runs.
pub const CHECKS: [(&str, &str); 4] = [
    (
        "W_YTD = sum(D_YTD) for every warehouse",
        "SELECT count(*) FROM warehouse w WHERE w.w_ytd <> (SELECT sum(d.d_ytd) FROM district d WHERE d.d_w_id = w.w_id)",
    ),
    (
        "D_NEXT_O_ID - 1 = max(O_ID) = max(NO_O_ID) for every district",
        "SELECT count(*) FROM district d WHERE d.d_next_o_id - 1 <> (SELECT max(o.o_id) FROM orders o WHERE o.o_w_id = d.d_w_id AND o.o_d_id = d.d_id) OR d.d_next_o_id - 1 <> coalesce((SELECT max(n.no_o_id) FROM new_order n WHERE n.no_w_id = d.d_w_id AND n.no_d_id = d.d_id), d.d_next_o_id - 1)",
    ),
    (
        "max(NO_O_ID) - min(NO_O_ID) + 1 = the new_order rows of every district",
        "SELECT count(*) FROM (SELECT no_w_id, no_d_id FROM new_order GROUP BY no_w_id, no_d_id HAVING max(no_o_id) - min(no_o_id) + 1 <> count(*)) x",
    ),
    (
        "sum(O_OL_CNT) = the order_line rows of every district",
        "SELECT count(*) FROM (SELECT o_w_id, o_d_id, sum(o_ol_cnt) s FROM orders GROUP BY o_w_id, o_d_id) o JOIN (SELECT ol_w_id, ol_d_id, count(*) c FROM order_line GROUP BY ol_w_id, ol_d_id) l ON o.o_w_id = l.ol_w_id AND o.o_d_id = l.ol_d_id WHERE o.s <> l.c",
    ),
];

/// The new orders committed so far: TPC-C's NOPM counts the change of this over a window.
pub const NEW_ORDERS_SQL: &str = "SELECT sum(d_next_o_id) FROM district";

/// The tables, in the order they are dropped.
pub const TABLES: [&str; 9] = [
    "new_order",
    "order_line",
    "orders",
    "history",
    "customer",
    "district",
    "stock",
    "item",
    "warehouse",
];

/// Whether a database name is one plumb may create, use and drop: letters, digits and `_`,
/// starting with a letter, at most 63 characters (quoted nowhere, the same on every engine).
pub fn valid_database_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.chars().next().is_some_and(|c| c.is_ascii_lowercase())
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A repeatable uniform draw for the tests (a linear congruential generator).
    fn lcg(seed: u64) -> impl FnMut(i64, i64) -> i64 {
        let mut x = seed;
        move |lo, hi| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            lo + ((x >> 33) % (hi - lo + 1) as u64) as i64
        }
    }

    /// A mark says which run made a database and whether it was loaded whole; anything else,
    /// an old-style or a hand-written comment included, makes no database plumb's by itself.
    #[test]
    fn marks_name_the_run_and_the_state() {
        use holdings::Found;
        let m = final_mark(&Workload::TpcB.mark(2), "00ff");
        assert_eq!(
            parse_mark(Some(&m)),
            Found::Plumbs {
                mark: "plumb load: pgbench tables, scale 2".into(),
                run: Some("00ff".into())
            }
        );
        assert_eq!(
            parse_mark(Some(&loading_mark("ab12"))),
            Found::Unfinished { run: "ab12".into() }
        );
        assert_eq!(parse_mark(Some("my database")), Found::Other);
        assert_eq!(parse_mark(None), Found::Other);
    }

    /// What a database holds beyond plumb's names, or under another owner, is named; plumb's
    /// own objects under the connecting role are not.
    #[test]
    fn foreign_objects_are_named_with_their_owner() {
        let allowed = Workload::TpcB.objects();
        let o = |k: &str, n: &str, owner: Option<&str>| {
            (k.to_string(), n.to_string(), owner.map(str::to_string))
        };
        let objects = vec![
            o("table", "pgbench_accounts", Some("plumb")),
            o("table", "notes", Some("plumb")),
            o("table", "pgbench_history", Some("alice")),
            o("extension", "pg_trgm", None),
            o("table", "plumb_mark", None),
        ];
        let foreign = holdings::foreign_objects(&objects, &allowed, "plumb");
        assert_eq!(
            foreign,
            vec![
                "table notes",
                "table pgbench_history (owned by alice)",
                "extension pg_trgm"
            ]
        );
        let h = holdings::Holdings {
            owner: Some("alice".into()),
            me: "plumb".into(),
            foreign: Vec::new(),
        };
        assert!(h.not_ours().unwrap().contains("owned by alice"));
        let h = holdings::Holdings {
            owner: Some("plumb".into()),
            me: "plumb".into(),
            foreign: (0..7).map(|i| format!("table t{i}")).collect(),
        };
        let why = h.not_ours().unwrap();
        assert!(
            why.contains("table t0") && why.contains("and 2 more"),
            "{why}"
        );
        // Order-entry's tables are not pgbench's: another workload's table is foreign.
        assert!(!Workload::OrderEntry
            .objects()
            .contains(&"pgbench_accounts".to_string()));
    }

    /// SQL Server's sys.objects rows: dbo's objects by their plain names, others with their
    /// schema, triggers never passing as one of plumb's tables.
    #[test]
    fn sql_servers_objects_read_as_kind_name_owner() {
        let row = |a: &str, b: &str, c: &str, d: &str| {
            vec![a.to_string(), b.to_string(), c.to_string(), d.to_string()]
        };
        let objects = mssql::mssql_objects(&[
            row("USER_TABLE", "dbo", "item", "dbo"),
            row("SQL_STORED_PROCEDURE", "app", "plumb_neword", "dbo"),
            row("SQL_TRIGGER", "dbo", "item", "dbo"),
        ]);
        let foreign = holdings::foreign_objects(&objects, &Workload::OrderEntry.objects(), "dbo");
        assert_eq!(
            foreign,
            vec![
                "sql stored procedure app.plumb_neword",
                "sql trigger dbo.item"
            ]
        );
    }

    #[test]
    fn last_names_are_three_syllables() {
        assert_eq!(last_name(0), "BARBARBAR");
        assert_eq!(last_name(371), "PRICALLYOUGHT");
        assert_eq!(last_name(999), "EINGEINGEING");
    }

    #[test]
    fn nurand_stays_in_range() {
        let mut u = lcg(1);
        for _ in 0..10_000 {
            let v = nurand(&mut u, 8191, 1, ITEMS as i64, C_ITEM);
            assert!((1..=ITEMS as i64).contains(&v));
        }
    }

    #[test]
    fn new_orders_roll_back_about_one_in_a_hundred_on_the_last_line() {
        let mut u = lcg(2);
        let (mut rb, n) = (0, 20_000);
        for _ in 0..n {
            let Tx::NewOrder {
                items, supply, qty, ..
            } = generate(NEW_ORDER, 4, 2, &mut u)
            else {
                panic!()
            };
            assert!((5..=15).contains(&items.len()));
            assert_eq!(items.len(), supply.len());
            assert!(qty.iter().all(|q| (1..=10).contains(q)));
            if items.last() == Some(&(ITEMS + 1)) {
                rb += 1;
            }
            // Sorted by (warehouse, item) but for the unused item.
            let real = items.iter().filter(|&&i| i <= ITEMS).count();
            let pairs: Vec<_> = supply.iter().zip(&items).take(real).collect();
            assert!(pairs.windows(2).all(|p| p[0] <= p[1]));
        }
        assert!((100..300).contains(&rb), "{rb} of {n}");
    }

    #[test]
    fn one_warehouse_never_goes_remote() {
        let mut u = lcg(3);
        for _ in 0..2000 {
            match generate(PAYMENT, 1, 1, &mut u) {
                Tx::Payment { c_w, .. } => assert_eq!(c_w, 1),
                t => panic!("{t:?}"),
            }
            if let Tx::NewOrder { supply, .. } = generate(NEW_ORDER, 1, 1, &mut u) {
                assert!(supply.iter().all(|&s| s == 1));
            }
        }
        let remote = (0..2000)
            .filter(
                |_| matches!(generate(PAYMENT, 3, 2, &mut u), Tx::Payment { c_w, .. } if c_w != 2),
            )
            .count();
        assert!((200..420).contains(&remote), "{remote}");
    }

    #[test]
    fn the_pgbench_shapes_draw_within_the_scale() {
        let mut u = lcg(4);
        for _ in 0..5000 {
            match generate_for(Workload::TpcB, 0, 3, 1, &mut u) {
                Tx::TpcB {
                    aid,
                    tid,
                    bid,
                    delta,
                } => {
                    assert!((1..=300_000).contains(&aid) && (1..=30).contains(&tid));
                    assert!((1..=3).contains(&bid) && (-5000..=5000).contains(&delta));
                }
                t => panic!("{t:?}"),
            }
        }
        assert_eq!(Workload::parse("tpcb"), Some(Workload::TpcB));
        assert_eq!(Workload::parse("tpcc"), None);
        assert_eq!(Workload::OrderEntry.jobs(4), 5);
        assert_eq!(Workload::PointSelect.jobs(4), 4);
    }

    #[test]
    fn database_names_are_plain() {
        assert!(valid_database_name("plumb_load"));
        for bad in ["", "Plumb", "1x", "a-b", "a;drop", "a b", &"x".repeat(64)] {
            assert!(!valid_database_name(bad), "{bad}");
        }
    }
}
