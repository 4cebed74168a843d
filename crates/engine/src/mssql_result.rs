//! A SQL Server result set as plumb holds it: column names and rows of cells (numbers, text,
//! NULL), shared by the parsers (`mssql`), the driver (`mssql_direct`) and plumb's client
//! process (`mssql_client`), which sends them over a pipe as JSON.

use crate::{Error, Result};
use serde::{Deserialize, Serialize};

/// One cell of a result set.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Cell {
    Null,
    Int(i64),
    Float(f64),
    Text(String),
}

impl Cell {
    pub fn f64(&self) -> Option<f64> {
        match self {
            Cell::Int(i) => Some(*i as f64),
            Cell::Float(f) => Some(*f),
            Cell::Text(t) => t.trim().parse().ok(),
            Cell::Null => None,
        }
    }

    pub fn text(&self) -> String {
        match self {
            Cell::Int(i) => i.to_string(),
            Cell::Float(f) => f.to_string(),
            Cell::Text(t) => t.trim_end().to_string(),
            Cell::Null => String::new(),
        }
    }
}

/// A result set: column names and rows, as the server returned them.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ResultSet {
    pub columns: Vec<String>,
    pub rows: Vec<Vec<Cell>>,
}

impl ResultSet {
    pub(crate) fn col(&self, name: &str) -> Result<usize> {
        self.columns
            .iter()
            .position(|c| c.eq_ignore_ascii_case(name))
            .ok_or_else(|| Error::Query {
                what: "SQL Server result".into(),
                message: format!("column {name} missing (have: {})", self.columns.join(", ")),
                source: None,
            })
    }

    /// Rows as (key text, values) for the named columns; missing numbers read as 0.
    pub(crate) fn pick(&self, key: &str, nums: &[&str]) -> Result<Vec<(String, Vec<f64>)>> {
        let k = self.col(key)?;
        let idx: Vec<usize> = nums.iter().map(|n| self.col(n)).collect::<Result<_>>()?;
        Ok(self
            .rows
            .iter()
            .map(|r| {
                (
                    r.get(k).map(Cell::text).unwrap_or_default(),
                    idx.iter()
                        .map(|i| r.get(*i).and_then(Cell::f64).unwrap_or(0.0))
                        .collect(),
                )
            })
            .collect())
    }

    pub(crate) fn first_f64(&self, name: &str) -> Result<Option<f64>> {
        let i = self.col(name)?;
        Ok(self.rows.first().and_then(|r| r.get(i)).and_then(Cell::f64))
    }

    pub(crate) fn first_text(&self, name: &str) -> Result<Option<String>> {
        let i = self.col(name)?;
        Ok(self.rows.first().and_then(|r| r.get(i)).map(Cell::text))
    }
}
