//! Per-statement figures, as the engines keep them: PostgreSQL's pg_stat_statements, MariaDB's
//! performance_schema statement digests, SQL Server's query stats. Cumulative since the server
//! (or the view) was reset; a recording keeps the heaviest few ([`Tracker`]) and the report
//! subtracts two points.
//!
//! The text is normalized here whatever the engine did: string, number and hex literals become
//! `?` (pg_stat_statements keeps a utility statement's text as typed, `ALTER ROLE … PASSWORD
//! '…'` included; SQL Server keeps every literal), and it is cut to [`MAX_TEXT`] characters.

use std::collections::{BTreeMap, HashMap, HashSet};

/// The longest statement text kept, in characters.
pub const MAX_TEXT: usize = 240;

/// One statement's cumulative figures.
#[derive(Debug, Clone, PartialEq)]
pub struct Statement {
    /// The engine's id for the normalized statement (queryid, digest, query_hash), as text.
    pub id: String,
    pub calls: f64,
    /// Time spent executing it, in microseconds.
    pub time_us: f64,
    /// Rows returned or affected.
    pub rows: f64,
    /// Blocks (pages) read from outside the engine's cache, and found in it; None where the
    /// engine does not count them per statement.
    pub blks_read: Option<f64>,
    pub blks_hit: Option<f64>,
    /// Normalized: no literal values.
    pub text: String,
}

/// `text` with every literal replaced by `?`, whitespace runs made one space, and cut to
/// [`MAX_TEXT`] characters (ending in `…` when cut).
pub fn normalize(text: &str) -> String {
    let c: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len().min(MAX_TEXT * 4));
    let mut i = 0;
    let ident = |ch: char| ch.is_alphanumeric() || ch == '_' || ch == '$';
    while i < c.len() {
        let ch = c[i];
        let prev_ident = out.chars().last().is_some_and(ident);
        // Quoted strings: '…' with '' inside, and E'…' / N'…' / X'…' / B'…' prefixes.
        let prefixed = matches!(ch, 'e' | 'E' | 'n' | 'N' | 'x' | 'X' | 'b' | 'B')
            && c.get(i + 1) == Some(&'\'')
            && !prev_ident;
        if ch == '\'' || prefixed {
            let mut j = if prefixed { i + 2 } else { i + 1 };
            let backslash = matches!(ch, 'e' | 'E');
            while j < c.len() {
                if backslash && c[j] == '\\' {
                    j += 2;
                    continue;
                }
                if c[j] == '\'' {
                    if c.get(j + 1) == Some(&'\'') {
                        j += 2;
                        continue;
                    }
                    break;
                }
                j += 1;
            }
            out.push('?');
            i = j + 1;
            continue;
        }
        // Dollar quoting: $tag$ … $tag$ (not a $1 placeholder).
        if ch == '$' && !prev_ident {
            let mut j = i + 1;
            while j < c.len() && (c[j].is_alphanumeric() || c[j] == '_') && !c[j].is_ascii_digit() {
                j += 1;
            }
            if c.get(j) == Some(&'$') {
                let tag: String = c[i..=j].iter().collect();
                let rest: String = c[j + 1..].iter().collect();
                let end = rest
                    .find(&tag)
                    .map(|p| j + 1 + rest[..p].chars().count() + tag.chars().count())
                    .unwrap_or(c.len());
                out.push('?');
                i = end;
                continue;
            }
        }
        // Numbers not part of a name or placeholder ($1, @P1, t1).
        if ch.is_ascii_digit() && !prev_ident && !out.ends_with('$') && !out.ends_with('@') {
            let mut j = i;
            while j < c.len() && (c[j].is_ascii_alphanumeric() || c[j] == '.') {
                j += 1;
            }
            out.push('?');
            i = j;
            continue;
        }
        if ch.is_whitespace() {
            if !out.is_empty() && !out.ends_with(' ') {
                out.push(' ');
            }
            i += 1;
            continue;
        }
        out.push(ch);
        i += 1;
        if out.len() > MAX_TEXT * 4 {
            break;
        }
    }
    let t = out.trim_end();
    if t.chars().count() > MAX_TEXT {
        let mut cut: String = t.chars().take(MAX_TEXT - 1).collect();
        cut.push('…');
        cut
    } else {
        t.to_string()
    }
}

/// Which statements a recording follows: the heaviest by time at each reading join (at most
/// `top` a reading), until `cap` are followed; once followed, a statement is read every time
/// (so any two points of the recording can be subtracted).
#[derive(Debug)]
pub struct Tracker {
    top: usize,
    cap: usize,
    followed: BTreeMap<String, String>,
    /// Each statement's time at the last reading, for the heaviest since then.
    last_time: HashMap<String, f64>,
    first: bool,
}

impl Tracker {
    pub fn new(top: usize, cap: usize) -> Tracker {
        Tracker {
            top,
            cap,
            followed: BTreeMap::new(),
            last_time: HashMap::new(),
            first: true,
        }
    }

    /// The statements followed from this reading on, and (id, text) for those new now.
    pub fn update(&mut self, all: &[Statement]) -> (Vec<Statement>, Vec<(String, String)>) {
        let mut by_time: Vec<(f64, &Statement)> = all
            .iter()
            .map(|s| {
                let since = if self.first {
                    s.time_us
                } else {
                    s.time_us - self.last_time.get(&s.id).copied().unwrap_or(0.0)
                };
                (since, s)
            })
            .filter(|(t, _)| *t > 0.0)
            .collect();
        by_time.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.id.cmp(&b.1.id)));
        let mut new = Vec::new();
        for (_, s) in by_time.into_iter().take(self.top) {
            if self.followed.len() >= self.cap {
                break;
            }
            if !self.followed.contains_key(&s.id) {
                self.followed.insert(s.id.clone(), s.text.clone());
                new.push((s.id.clone(), s.text.clone()));
            }
        }
        self.first = false;
        self.last_time = all.iter().map(|s| (s.id.clone(), s.time_us)).collect();
        let seen: HashSet<&str> = self.followed.keys().map(String::as_str).collect();
        let kept = all
            .iter()
            .filter(|s| seen.contains(s.id.as_str()))
            .cloned()
            .collect();
        (kept, new)
    }
}

/// Rows of one statement id summed (the same normalized statement run by several users or in
/// several databases).
pub fn merge(rows: Vec<Statement>) -> Vec<Statement> {
    let mut by: BTreeMap<String, Statement> = BTreeMap::new();
    for r in rows {
        match by.get_mut(&r.id) {
            None => {
                by.insert(r.id.clone(), r);
            }
            Some(s) => {
                s.calls += r.calls;
                s.time_us += r.time_us;
                s.rows += r.rows;
                s.blks_read = add(s.blks_read, r.blks_read);
                s.blks_hit = add(s.blks_hit, r.blks_hit);
            }
        }
    }
    by.into_values().collect()
}

fn add(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (None, None) => None,
        (a, b) => Some(a.unwrap_or(0.0) + b.unwrap_or(0.0)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_never_reach_the_text() {
        for (raw, want) in [
            (
                "ALTER ROLE app PASSWORD 'hunter2'",
                "ALTER ROLE app PASSWORD ?",
            ),
            (
                "SELECT * FROM t WHERE a = 'it''s' AND b = 42 AND c = 1.5e3",
                "SELECT * FROM t WHERE a = ? AND b = ? AND c = ?",
            ),
            ("SELECT E'a\\'b', x'ff', N'naïve'", "SELECT ?, ?, ?"),
            ("DO $body$ BEGIN PERFORM 'secret'; END $body$", "DO ?"),
            ("SELECT $$dollar secret$$, 7", "SELECT ?, ?"),
            (
                "SELECT a FROM t1 WHERE id = $1 AND k = @P2 AND z = ?",
                "SELECT a FROM t1 WHERE id = $1 AND k = @P2 AND z = ?",
            ),
            (
                "INSERT  INTO t\n\tVALUES (1, -2)",
                "INSERT INTO t VALUES (?, -?)",
            ),
        ] {
            assert_eq!(normalize(raw), want, "{raw}");
        }
        // An unterminated string takes the rest: nothing after it leaks.
        assert_eq!(normalize("SELECT 'abc FROM secret"), "SELECT ?");
        let long = format!("SELECT {}", "col, ".repeat(200));
        let n = normalize(&long);
        assert_eq!(n.chars().count(), MAX_TEXT);
        assert!(n.ends_with('…'));
        // Multi-byte text is cut on a character.
        let wide = format!("SELECT {}", "ünïcode_col, ".repeat(60));
        assert_eq!(normalize(&wide).chars().count(), MAX_TEXT);
    }

    fn st(id: &str, time_us: f64) -> Statement {
        Statement {
            id: id.into(),
            calls: 1.0,
            time_us,
            rows: 0.0,
            blks_read: None,
            blks_hit: None,
            text: format!("q{id}"),
        }
    }

    #[test]
    fn the_heaviest_since_the_last_reading_join_up_to_the_cap() {
        let mut t = Tracker::new(2, 3);
        let (kept, new) = t.update(&[st("a", 100.0), st("b", 50.0), st("c", 10.0)]);
        assert_eq!(
            new.iter().map(|n| n.0.as_str()).collect::<Vec<_>>(),
            ["a", "b"]
        );
        assert_eq!(kept.len(), 2);
        // c was light so far but is the heaviest since: it joins; a stays followed.
        let (kept, new) = t.update(&[st("a", 101.0), st("b", 50.0), st("c", 500.0), st("d", 1.0)]);
        assert_eq!(new.iter().map(|n| n.0.as_str()).collect::<Vec<_>>(), ["c"]);
        assert_eq!(kept.len(), 3);
        // The cap: d never joins.
        let (kept, new) = t.update(&[st("a", 101.0), st("d", 900.0)]);
        assert!(new.is_empty());
        assert_eq!(
            kept.iter().map(|s| s.id.as_str()).collect::<Vec<_>>(),
            ["a"]
        );
    }

    #[test]
    fn rows_of_one_statement_are_summed() {
        let mut a = st("x", 10.0);
        a.blks_read = Some(3.0);
        let b = st("x", 5.0);
        let m = merge(vec![a, b, st("y", 1.0)]);
        assert_eq!(m.len(), 2);
        assert_eq!(m[0].time_us, 15.0);
        assert_eq!(m[0].calls, 2.0);
        assert_eq!(m[0].blks_read, Some(3.0));
    }
}
