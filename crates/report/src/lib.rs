//! plumb renderers: the only code that turns results into what the user sees. Every result is
//! a `Serialize` struct; each output format is one function behind the [`Render`] trait, so a
//! subcommand never prints by hand.

use serde::Serialize;
use std::io::{self, Write};

pub mod compare_render;
pub mod delta_render;
pub mod engine_render;
mod explain_render;
pub mod explore;
pub mod fmt;
pub mod html;
pub mod io_render;
pub mod k8s_render;
pub mod lab_render;
pub mod load_render;
pub mod mem_render;
pub mod openmetrics;
pub mod os;
pub mod out;
pub mod progress;
mod record_charts;
pub mod record_render;
mod record_run;
pub mod record_text;
pub mod repl_render;
pub mod statements_render;
pub mod svg;
pub mod table;
pub mod trace_render;
pub mod verdict_render;
pub mod view_render;
pub mod words;

/// Bump when a JSON field is renamed or removed (adding fields does not break readers).
pub const SCHEMA_VERSION: u32 = 1;
pub const PLUMB_VERSION: &str = env!("CARGO_PKG_VERSION");

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Text,
    Json,
    Csv,
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{0}")]
    Io(#[from] io::Error),
    #[error("cannot encode JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error(
        "`{kind}` output is not a table, so it has no CSV form; use --format text or --format json"
    )]
    NotTabular { kind: &'static str },
}

/// A table for CSV and aligned text (`table::write_aligned`): header names use the metric naming
/// rule.
#[derive(Debug, Clone, PartialEq)]
pub struct Table {
    pub headers: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

pub trait Render: Serialize {
    /// The result's kind, written into JSON as `kind`.
    const KIND: &'static str;
    fn text(&self, out: &mut dyn Write) -> io::Result<()>;
    /// The tabular form, where the result has one.
    fn table(&self) -> Option<Table> {
        None
    }
}

#[derive(Serialize)]
struct Envelope<'a, T: Serialize> {
    schema_version: u32,
    plumb_version: &'static str,
    kind: &'static str,
    #[serde(flatten)]
    data: &'a T,
}

/// Write a result in the chosen format.
pub fn emit<R: Render>(r: &R, format: Format, out: &mut dyn Write) -> Result<(), Error> {
    match format {
        // What a server or a file said is shown, never obeyed by the terminal.
        Format::Text => {
            let mut w = plumb_sys::visible::Writer::new(&mut *out);
            r.text(&mut w)?;
            w.flush()?;
        }
        Format::Json => {
            debug_assert!(
                !serde_json::to_value(r)
                    .ok()
                    .and_then(|v| v
                        .as_object()
                        .map(|o| o.contains_key("kind") || o.contains_key("schema_version")))
                    .unwrap_or(false),
                "a result field collides with the JSON envelope"
            );
            let env = Envelope {
                schema_version: SCHEMA_VERSION,
                plumb_version: PLUMB_VERSION,
                kind: R::KIND,
                data: r,
            };
            words::speaking(|| serde_json::to_writer_pretty(&mut *out, &env))?;
            writeln!(out)?;
        }
        Format::Csv => {
            let t = r.table().ok_or(Error::NotTabular { kind: R::KIND })?;
            write_csv(&t, out)?;
        }
    }
    out.flush()?;
    Ok(())
}

/// One JSON Lines record of a stream, with the same envelope as a whole result.
pub fn write_json_line<T: Serialize>(
    r: &T,
    kind: &'static str,
    out: &mut dyn Write,
) -> Result<(), Error> {
    let env = Envelope {
        schema_version: SCHEMA_VERSION,
        plumb_version: PLUMB_VERSION,
        kind,
        data: r,
    };
    words::speaking(|| serde_json::to_writer(&mut *out, &env))?;
    writeln!(out)?;
    out.flush()?;
    Ok(())
}

/// One CSV field, quoted when it holds a comma, a quote or a line break (RFC 4180).
pub(crate) fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

pub(crate) fn write_csv(t: &Table, out: &mut dyn Write) -> io::Result<()> {
    let line = |cells: &[String]| {
        cells
            .iter()
            .map(|c| csv_field(c))
            .collect::<Vec<_>>()
            .join(",")
    };
    writeln!(out, "{}", line(&t.headers))?;
    for r in &t.rows {
        writeln!(out, "{}", line(r))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Serialize)]
    struct Demo {
        n: u64,
    }
    impl Render for Demo {
        const KIND: &'static str = "demo";
        fn text(&self, out: &mut dyn Write) -> io::Result<()> {
            writeln!(out, "n is {}", self.n)
        }
        fn table(&self) -> Option<Table> {
            Some(Table {
                headers: vec!["name".into(), "value".into()],
                rows: vec![vec!["a,\"b\"".into(), self.n.to_string()]],
            })
        }
    }

    #[test]
    fn json_carries_schema_and_kind() {
        let mut v = Vec::new();
        emit(&Demo { n: 3 }, Format::Json, &mut v).unwrap();
        let j: serde_json::Value = serde_json::from_slice(&v).unwrap();
        assert_eq!(j["schema_version"], SCHEMA_VERSION);
        assert_eq!(j["kind"], "demo");
        assert_eq!(j["n"], 3);
        assert_eq!(j["plumb_version"], PLUMB_VERSION);
    }

    #[test]
    fn csv_quotes_what_needs_it() {
        let mut v = Vec::new();
        emit(&Demo { n: 3 }, Format::Csv, &mut v).unwrap();
        assert_eq!(
            String::from_utf8(v).unwrap(),
            "name,value\n\"a,\"\"b\"\"\",3\n"
        );
    }
}
