//! `plumb report FILE --statements`: the statements a recording followed, between two points.

use crate::GlobalArgs;
use anyhow::{bail, Result};

/// `plumb report FILE --statements`: the table between two points of one recording.
pub fn statements(
    g: &GlobalArgs,
    from: &Option<String>,
    to: &Option<String>,
    top: usize,
    recs: &[plumb_store::Recording],
) -> Result<i32> {
    if recs.len() != 1 {
        bail!("--statements: give one recording (got {})", recs.len());
    }
    let rec = &recs[0];
    let end_s = rec.times_ms.last().copied().unwrap_or(0) as f64 / 1000.0;
    let at = |flag: &str, v: &Option<String>| -> Result<Option<f64>> {
        let Some(v) = v else { return Ok(None) };
        let d =
            plumb_sys::units::parse_duration(v).map_err(|e| anyhow::anyhow!("{flag} {v}: {e}"))?;
        if d.as_secs_f64() > end_s {
            bail!(
                "{flag} {v}: past the recording's end ({})",
                plumb_sys::units::format_duration(std::time::Duration::from_secs_f64(end_s))
            );
        }
        Ok(Some(d.as_secs_f64()))
    };
    let (from_s, to_s) = (at("--from", from)?, at("--to", to)?);
    if let (Some(f), Some(t)) = (from_s, to_s) {
        if f >= t {
            bail!(
                "--from {}: not before --to {}",
                from.as_deref().unwrap_or(""),
                to.as_deref().unwrap_or("")
            );
        }
    }
    let t = plumb_analyze::statements::table(rec, from_s, to_s, top);
    plumb_report::emit(
        &plumb_report::statements_render::Statements(t),
        g.format(),
        &mut std::io::stdout().lock(),
    )?;
    Ok(0)
}
