//! An engine view's rows as file content (`plumb fs`): tab-separated with a header for awk and
//! `column -t -s $'\t'`, JSON Lines for jq, an aligned table for eyes; and a failed query's
//! error in each of those forms.
//!
//! Tab-separated text escapes as PostgreSQL's COPY and MariaDB's `SELECT … INTO OUTFILE` do:
//! a backslash, tab, newline or carriage return inside a value becomes `\\`, `\t`, `\n`, `\r`,
//! so a row is always one line and a column is always between the same tabs. NULL is an empty
//! field (the JSON form tells NULL from an empty string).

use plumb_engine::views::{Table, Val};
use serde::Serialize;

/// How a view's file shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ViewFormat {
    /// `name`: tab-separated, a header line first.
    Tsv,
    /// `name.json`: one JSON object per row.
    Json,
    /// `name.txt`: an aligned table.
    Txt,
}

impl ViewFormat {
    pub const ALL: [ViewFormat; 3] = [ViewFormat::Tsv, ViewFormat::Json, ViewFormat::Txt];

    /// The file name suffix of this form.
    pub fn suffix(self) -> &'static str {
        match self {
            ViewFormat::Tsv => "",
            ViewFormat::Json => ".json",
            ViewFormat::Txt => ".txt",
        }
    }

    /// The form a file name asks for, and the view's name without the suffix.
    pub fn of_file(name: &str) -> (&str, ViewFormat) {
        if let Some(v) = name.strip_suffix(".json") {
            (v, ViewFormat::Json)
        } else if let Some(v) = name.strip_suffix(".txt") {
            (v, ViewFormat::Txt)
        } else {
            (name, ViewFormat::Tsv)
        }
    }
}

/// One value as text (the server's own), escaped for a tab-separated line.
fn tsv_cell(v: &Val, out: &mut String) {
    let text = match v {
        Val::Null => return,
        Val::Bool(true) => "t",
        Val::Bool(false) => "f",
        Val::Num(s) | Val::Text(s) | Val::Json(s) => s.as_str(),
    };
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c => push_visible(c, out),
        }
    }
}

fn push_visible(c: char, out: &mut String) {
    plumb_sys::visible::push(c, out)
}

/// Text for a terminal: line breaks and tabs kept, every other control character escaped.
fn visible_lines(s: &str) -> String {
    plumb_sys::visible::lines(s).into_owned()
}

fn tsv_text(s: &str) -> String {
    let mut out = String::new();
    tsv_cell(&Val::Text(s.to_string()), &mut out);
    out
}

/// Tab-separated values with a header line.
pub fn tsv(t: &Table) -> Vec<u8> {
    let mut out = String::new();
    let header: Vec<String> = t.columns.iter().map(|c| tsv_text(c)).collect();
    out.push_str(&header.join("\t"));
    out.push('\n');
    for r in &t.rows {
        for (i, v) in r.iter().enumerate() {
            if i > 0 {
                out.push('\t');
            }
            tsv_cell(v, &mut out);
        }
        out.push('\n');
    }
    if t.cut {
        out.push_str(&format!("# {}\n", cut_note(t)));
    }
    out.into_bytes()
}

/// What a cut result says at its end.
pub(crate) fn cut_note(t: &Table) -> String {
    format!(
        "plumb cut the result here, after {} rows: it keeps at most {} rows or {} MiB of one result; narrow the query",
        t.rows.len(),
        plumb_engine::views::MAX_ROWS,
        plumb_engine::views::MAX_BYTES >> 20
    )
}

/// Column names made unique for JSON objects (`name`, `name_2`, …), in order.
fn unique_names(cols: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::with_capacity(cols.len());
    for c in cols {
        let mut name = c.clone();
        let mut n = 1;
        while out.contains(&name) {
            n += 1;
            name = format!("{c}_{n}");
        }
        out.push(name);
    }
    out
}

fn is_json_number(s: &str) -> bool {
    // serde_json accepts exactly JSON's number grammar.
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_digit() || matches!(b, b'-' | b'+' | b'.' | b'e' | b'E'))
        && serde_json::from_str::<serde_json::Number>(s).is_ok()
}

fn json_value(v: &Val, out: &mut String) {
    let quoted = |s: &str| serde_json::to_string(s).unwrap_or_else(|_| "null".into());
    match v {
        Val::Null => out.push_str("null"),
        Val::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        // Numbers as the server wrote them; NaN and Infinity are not JSON numbers.
        Val::Num(s) if is_json_number(s) => out.push_str(s),
        Val::Json(s) if serde_json::from_str::<serde_json::Value>(s).is_ok() => {
            out.push_str(&s.replace('\n', " "))
        }
        Val::Num(s) | Val::Json(s) | Val::Text(s) => out.push_str(&quoted(s)),
    }
}

/// JSON Lines: one object per row, keys in the view's column order.
pub fn jsonl(t: &Table) -> Vec<u8> {
    let names = unique_names(&t.columns);
    let keys: Vec<String> = names
        .iter()
        .map(|n| serde_json::to_string(n).unwrap_or_else(|_| "\"\"".into()))
        .collect();
    let mut out = String::new();
    for r in &t.rows {
        out.push('{');
        for (i, v) in r.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str(keys.get(i).map(String::as_str).unwrap_or("\"?\""));
            out.push(':');
            json_value(v, &mut out);
        }
        out.push_str("}\n");
    }
    if t.cut {
        let note = serde_json::to_string(&cut_note(t)).unwrap_or_default();
        out.push_str(&format!("{{\"plumb_cut\":{note}}}\n"));
    }
    out.into_bytes()
}

/// An aligned table: numbers right-aligned, text left, a rule under the header, the row count
/// at the end (as psql prints it). With `text_column`, a one-row view that is a report
/// (InnoDB's status) is printed as its text.
pub fn txt(t: &Table, text_column: Option<&str>) -> Vec<u8> {
    if let Some(col) = text_column {
        if let Some(i) = t.columns.iter().position(|c| c.eq_ignore_ascii_case(col)) {
            let mut out = String::new();
            for r in &t.rows {
                if let Some(Val::Text(s)) = r.get(i) {
                    out.push_str(&visible_lines(s.trim_end()));
                    out.push('\n');
                }
            }
            return out.into_bytes();
        }
    }
    let cells: Vec<Vec<String>> = t
        .rows
        .iter()
        .map(|r| {
            r.iter()
                .map(|v| {
                    let mut s = String::new();
                    tsv_cell(v, &mut s);
                    s
                })
                .collect()
        })
        .collect();
    let n = t.columns.len();
    let mut width: Vec<usize> = t
        .columns
        .iter()
        .map(|c| tsv_text(c).chars().count())
        .collect();
    // A column is right-aligned when every value in it is a number.
    let mut numeric = vec![!t.rows.is_empty(); n];
    for (r, row) in t.rows.iter().zip(&cells) {
        for i in 0..n.min(row.len()) {
            width[i] = width[i].max(row[i].chars().count());
            if !matches!(r[i], Val::Num(_) | Val::Null) {
                numeric[i] = false;
            }
        }
    }
    let line = |vals: &[String], right: &dyn Fn(usize) -> bool| -> String {
        let mut s = String::new();
        for (i, v) in vals.iter().enumerate().take(n) {
            if i > 0 {
                s.push_str(" | ");
            }
            let pad = " ".repeat(width[i] - v.chars().count());
            if right(i) {
                s.push_str(&pad);
                s.push_str(v);
            } else {
                s.push_str(v);
                s.push_str(&pad);
            }
        }
        s.trim_end().to_string()
    };
    let mut out = String::new();
    let columns: Vec<String> = t.columns.iter().map(|c| tsv_text(c)).collect();
    out.push_str(&line(&columns, &|_| false));
    out.push('\n');
    let rule: Vec<String> = width.iter().map(|w| "-".repeat(*w)).collect();
    out.push_str(&rule.join("-+-"));
    out.push('\n');
    for row in &cells {
        out.push_str(&line(row, &|i| numeric[i]));
        out.push('\n');
    }
    let count = t.rows.len();
    out.push_str(&format!(
        "({count} {})\n",
        if count == 1 { "row" } else { "rows" }
    ));
    if t.cut {
        out.push_str(&format!("{}\n", cut_note(t)));
    }
    out.into_bytes()
}

/// A view's rows in a form.
pub fn render(t: &Table, form: ViewFormat, text_column: Option<&str>) -> Vec<u8> {
    match form {
        ViewFormat::Tsv => tsv(t),
        ViewFormat::Json => jsonl(t),
        ViewFormat::Txt => txt(t, text_column),
    }
}

/// A failed query as the file's content: `error: …` as a line of text, `{"error": …}` in the
/// JSON form, so that `cat` shows it and `jq` can read it.
pub fn error(message: &str, form: ViewFormat) -> Vec<u8> {
    let one_line = message.trim().replace('\n', " ");
    match form {
        ViewFormat::Json => format!(
            "{{\"error\":{}}}\n",
            serde_json::to_string(&one_line).unwrap_or_else(|_| "\"\"".into())
        )
        .into_bytes(),
        _ => format!("error: {}\n", visible_lines(&one_line)).into_bytes(),
    }
}

/// What the README at a mount's root says.
#[derive(Debug, Clone, Serialize)]
pub struct MountFacts {
    /// "PostgreSQL", "MariaDB", "SQL Server".
    pub engine: String,
    pub version: String,
    /// The URL, password masked.
    pub url: String,
    pub mountpoint: String,
    /// Each directory and how many views it holds.
    pub dirs: Vec<(String, usize)>,
    /// The directory the user's query files come from.
    pub queries: Option<String>,
    pub cache_ms: u64,
    pub timeout_ms: u64,
    /// How the user's queries are kept from changing anything, in this engine's terms.
    pub read_only_how: String,
}

/// The README at a mount's root: what is here, how each file reads, and how to leave.
pub fn readme(f: &MountFacts) -> Vec<u8> {
    let mut l: Vec<String> = vec![
        format!(
            "plumb fs: {} {} at {}, mounted on {} (read-only)",
            f.engine, f.version, f.url, f.mountpoint
        ),
        String::new(),
        "Every view is three files:".into(),
        "  NAME       tab-separated, a header line first (awk -F'\\t', column -t -s $'\\t');".into(),
        "             a tab, newline or backslash in a value is written \\t, \\n, \\\\; NULL is empty".into(),
        "  NAME.json  JSON Lines: one object per row, the columns in order (jq)".into(),
        "  NAME.txt   an aligned table, for eyes".into(),
        String::new(),
        "A file's content is taken when it is opened and kept until it is closed: every read".into(),
        "of one open sees one moment.".into(),
        "ls -l shows the size of each file's newest result (0 before its first read): a".into(),
        "listing sends no query; only opening a file does.".into(),
    ];
    if f.cache_ms > 0 {
        l.push(format!(
            "Results are kept for {} (--cache): the opens within that time share one query.",
            setting(f.cache_ms)
        ));
    } else {
        l.push("Every open runs its query (--cache 0).".into());
    }
    l.push(format!(
        "Queries stop after {} (--timeout). A query that fails shows its error as the file's",
        setting(f.timeout_ms)
    ));
    l.push("content, and .errors lists every file whose last read failed.".into());
    l.push(String::new());
    l.push("Directories:".into());
    let w = f
        .dirs
        .iter()
        .map(|(d, _)| d.len())
        .chain(f.queries.iter().map(|_| "queries".len()))
        .max()
        .unwrap_or(0);
    for (d, n) in &f.dirs {
        l.push(format!(
            "  {d:<w$}  {n} {}",
            if *n == 1 { "view" } else { "views" }
        ));
    }
    if let Some(q) = &f.queries {
        l.push(format!(
            "  {:<w$}  your queries: each NAME.sql in {q} as NAME, NAME.json, NAME.txt,",
            "queries"
        ));
        l.push(format!("  {:<w$}  run {}", "", f.read_only_how));
    }
    l.push(String::new());
    l.push(format!(
        "To unmount: plumb fs --unmount {} (or stop the plumb serving it).",
        f.mountpoint
    ));
    let mut s = l.join("\n");
    s.push('\n');
    s.into_bytes()
}

/// A setting's time as given: `1 s`, `250 ms`, `1.5 s`.
fn setting(ms: u64) -> String {
    if ms % 1000 == 0 {
        format!("{} s", ms / 1000)
    } else if ms > 1000 {
        format!("{:.1} s", ms as f64 / 1000.0)
    } else {
        format!("{ms} ms")
    }
}

/// The `.errors` file: each file whose last read failed, when, and the error (tab-separated).
pub fn errors(rows: &[(String, u64, String)]) -> Vec<u8> {
    let t = Table {
        cut: false,
        columns: vec!["file".into(), "time".into(), "error".into()],
        rows: rows
            .iter()
            .map(|(f, ms, e)| {
                vec![
                    Val::Text(f.clone()),
                    Val::Text(crate::record_render::iso_utc(*ms)),
                    Val::Text(e.trim().to_string()),
                ]
            })
            .collect(),
    };
    tsv(&t)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> Table {
        Table {
            cut: false,
            columns: vec![
                "pid".into(),
                "query".into(),
                "ok".into(),
                "extra".into(),
                "pid".into(),
            ],
            rows: vec![
                vec![
                    Val::Num("12".into()),
                    Val::Text("SELECT 1\n\tFROM t -- a\\b".into()),
                    Val::Bool(true),
                    Val::Json("{\"a\": [1, 2]}".into()),
                    Val::Null,
                ],
                vec![
                    Val::Num("NaN".into()),
                    Val::Text(String::new()),
                    Val::Bool(false),
                    Val::Null,
                    Val::Num("-1.5e3".into()),
                ],
            ],
        }
    }

    #[test]
    fn a_row_stays_one_line_and_a_column_stays_between_its_tabs() {
        let out = String::from_utf8(tsv(&table())).unwrap();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 3, "{out}");
        assert_eq!(lines[0], "pid\tquery\tok\textra\tpid");
        for l in &lines {
            assert_eq!(l.split('\t').count(), 5, "{l}");
        }
        assert_eq!(
            lines[1].split('\t').nth(1),
            Some("SELECT 1\\n\\tFROM t -- a\\\\b")
        );
        assert_eq!(lines[2], "NaN\t\tf\t\t-1.5e3");
    }

    #[test]
    fn json_lines_keep_order_types_and_null() {
        let out = String::from_utf8(jsonl(&table())).unwrap();
        let rows: Vec<serde_json::Value> = out
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0]["pid"], 12);
        assert_eq!(rows[0]["query"], "SELECT 1\n\tFROM t -- a\\b");
        assert_eq!(rows[0]["ok"], true);
        assert_eq!(rows[0]["extra"]["a"][1], 2);
        assert!(rows[0]["pid_2"].is_null());
        assert_eq!(rows[1]["pid"], "NaN");
        assert_eq!(rows[1]["pid_2"], -1500.0);
        assert!(out
            .lines()
            .next()
            .unwrap()
            .starts_with("{\"pid\":12,\"query\""));
    }

    #[test]
    fn the_aligned_table_lines_up() {
        let out = String::from_utf8(txt(&table(), None)).unwrap();
        let lines: Vec<&str> = out.lines().collect();
        assert!(lines[1].starts_with("----+-"), "{out}");
        let bar = lines[0].find('|').unwrap();
        assert_eq!(lines[2].find('|'), Some(bar));
        assert_eq!(lines[3].find('|'), Some(bar));
        assert_eq!(lines.last(), Some(&"(2 rows)"));
        // Numbers to the right.
        assert!(lines[2].starts_with(" 12 |"), "{out}");
    }

    #[test]
    fn a_report_column_is_shown_as_text() {
        let t = Table {
            cut: false,
            columns: vec!["Type".into(), "Name".into(), "Status".into()],
            rows: vec![vec![
                Val::Text("InnoDB".into()),
                Val::Text(String::new()),
                Val::Text("\n=====\nBUFFER POOL\n".into()),
            ]],
        };
        assert_eq!(txt(&t, Some("Status")), b"\n=====\nBUFFER POOL\n");
    }

    #[test]
    fn terminal_control_bytes_are_escaped_in_every_text_form() {
        // A query text that would retitle the reader's terminal, and C1's CSI.
        let hostile = "SELECT 1 /* \u{1b}]0;pwned\u{7} \u{9b}2J \u{8}\u{7f} */";
        let t = Table {
            cut: false,
            columns: vec!["query\u{1b}[31m".into()],
            rows: vec![vec![Val::Text(hostile.into())]],
        };
        let want = "SELECT 1 /* \\x1b]0;pwned\\x07 \\u{9b}2J \\b\\x7f */";
        let tsv = String::from_utf8(render(&t, ViewFormat::Tsv, None)).unwrap();
        assert_eq!(tsv, format!("query\\x1b[31m\n{want}\n"));
        let txt = String::from_utf8(render(&t, ViewFormat::Txt, None)).unwrap();
        assert!(txt.contains(want), "{txt}");
        let t2 = Table {
            cut: false,
            columns: vec!["Status".into()],
            rows: vec![vec![Val::Text(format!("line one\n{hostile}\n"))]],
        };
        let report = String::from_utf8(render(&t2, ViewFormat::Txt, Some("Status"))).unwrap();
        assert_eq!(report, format!("line one\n{want}\n"));
        let err = String::from_utf8(error(hostile, ViewFormat::Tsv)).unwrap();
        assert_eq!(err, format!("error: {want}\n"));
        for out in [tsv, txt, report, err] {
            assert!(!out.chars().any(|c| c.is_control() && c != '\n'), "{out:?}");
        }
    }

    #[test]
    fn errors_read_as_text_and_as_json() {
        assert_eq!(
            error("relation \"x\" does not exist", ViewFormat::Tsv),
            b"error: relation \"x\" does not exist\n"
        );
        let j: serde_json::Value =
            serde_json::from_slice(&error("a\nb", ViewFormat::Json)).unwrap();
        assert_eq!(j["error"], "a b");
        assert_eq!(ViewFormat::of_file("x.json"), ("x", ViewFormat::Json));
        assert_eq!(ViewFormat::of_file("x"), ("x", ViewFormat::Tsv));
    }
}
