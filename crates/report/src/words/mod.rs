//! The words for what analysis says. Analysis hands over codes, severities and facts (numbers
//! with their units as types, and names: `plumb_analyze::said`); each code's sentence is here,
//! one per code, for the terminal, the HTML report and JSON alike.

use crate::fmt::{bytes, duration};
use plumb_analyze::lab::{Evidence, Finding};
use plumb_analyze::said::{Facts, Quantity, Said, Speaker};
use plumb_analyze::Note;

mod host;
mod k8s;
mod lab;
mod measure;

/// The speaker `crate::emit` and the lab's report put in place while they write JSON.
pub struct Words;

pub static WORDS: Words = Words;

impl Speaker for Words {
    fn note(&self, n: &Note) -> String {
        note(n)
    }
    fn finding(&self, f: &Finding) -> String {
        statement(f)
    }
    fn evidence(&self, f: &Finding) -> Vec<String> {
        evidence(f)
    }
    fn said(&self, s: &Said) -> String {
        said(s)
    }
}

/// Serialize (or anything else) with the notes and findings it meets put into words.
pub fn speaking<R>(f: impl FnOnce() -> R) -> R {
    plumb_analyze::said::speaking(&WORDS, f)
}

/// A note's sentence.
pub fn note(n: &Note) -> String {
    let f = &n.facts;
    lab::note(n.code, f)
        .or_else(|| host::note(n.code, f))
        .or_else(|| measure::note(n.code, f))
        .or_else(|| k8s::said(n.code, f))
        .unwrap_or_else(|| unknown(n.code, f))
}

/// A finding's statement, with what its disturbed phases did to it.
pub fn statement(x: &Finding) -> String {
    let mut s = lab::finding(&x.rule, &x.facts).unwrap_or_else(|| unknown(&x.rule, &x.facts));
    if x.disturbed.as_ref().is_some_and(|d| d.lowered) {
        s.push_str(
            " (measured while other work used the host: lowered to info until a clean run shows it)",
        );
    }
    s
}

/// A finding's evidence, a line each; the last says which phases were disturbed, and by whom.
pub fn evidence(x: &Finding) -> Vec<String> {
    let mut out: Vec<String> = x
        .evidence
        .iter()
        .map(|e| match e {
            Evidence::Note(n) => note(n),
            Evidence::Said(s) => said(s),
        })
        .collect();
    if let Some(d) = &x.disturbed {
        let who = d
            .neighbour
            .as_ref()
            .map(|(pid, comm)| format!("; the busiest other process: PID {pid} ({comm})"))
            .unwrap_or_default();
        out.push(format!(
            "measured while other work used the host, in: {}{who} (the phases table gives each phase's evidence)",
            d.phases.join(", ")
        ));
    }
    out
}

/// What disturbed a measured window, in one line ("clean" when nothing did).
/// A neighbour below the disturbing share is noted after "clean".
pub fn interference(i: &plumb_analyze::interference::Interference) -> String {
    let line = measure::disturbance(&i.warnings());
    let noted: Vec<&Note> = i
        .notes
        .iter()
        .filter(|n| n.level == plumb_analyze::Level::Info && n.code == "neighbour-io")
        .collect();
    match noted.first() {
        Some(n) if i.warnings().is_empty() => format!("{line}; noted: {}", note(n)),
        _ => line,
    }
}

/// A directory with less room than a run needs.
/// What the start of a command says of something a killed plumb left (its ledger's line).
pub fn reclaimed(r: &plumb_sys::ledger::Reclaimed) -> String {
    let (pid, what) = (r.pid, &r.what);
    match &r.outcome {
        Ok(()) => format!("plumb: removed what a plumb that was killed (PID {pid}) left: {what}"),
        Err(later) if r.deferred => {
            format!("plumb: a plumb that was killed (PID {pid}) left {what}: {later}")
        }
        Err(why) => format!(
            "plumb: warning: a plumb that was killed (PID {pid}) left {what}, which could not be removed: {why}"
        ),
    }
}

pub fn no_room(flag: &str, dir: &std::path::Path, free: u64, need: u64) -> String {
    format!(
        "{flag} {}: only {} free; the lab needs about {} there",
        dir.display(),
        bytes(free),
        bytes(need)
    )
}

/// A statement of evidence, or what an experiment set up.
pub fn said(s: &Said) -> String {
    lab::said(&s.code, &s.facts)
        .or_else(|| k8s::said(&s.code, &s.facts))
        .or_else(|| measure::said(&s.code, &s.facts))
        .or_else(|| host::said(&s.code, &s.facts))
        .unwrap_or_else(|| unknown(&s.code, &s.facts))
}

/// Notes inside a note, in words, joined.
fn joined_notes(v: &[Note], sep: &str) -> String {
    v.iter().map(note).collect::<Vec<_>>().join(sep)
}

/// A code no sentence is written for (a report from a newer plumb): the code and its facts.
fn unknown(code: &str, f: &Facts) -> String {
    let nums: Vec<String> = f
        .numbers()
        .map(|(k, v)| format!("{k}={}", num(v)))
        .collect();
    if nums.is_empty() {
        code.to_string()
    } else {
        format!("{code} ({})", nums.join(", "))
    }
}

/// A number as its unit reads: bytes as IEC, seconds as a duration, percent with a sign.
pub fn quantity(q: Quantity) -> String {
    match q {
        Quantity::Bytes(b) => bytes(b.max(0.0) as u64),
        Quantity::Seconds(s) => duration(s),
        Quantity::Percent(p) => format!("{p:.0}%"),
        Quantity::PerSecond(r) => format!("{}/s", num(r)),
        Quantity::BytesPerSecond(r) => format!("{}/s", bytes(r.max(0.0) as u64)),
        Quantity::Count(c) | Quantity::Ratio(c) => num(c),
    }
}

/// A number as plainly as it reads: whole numbers without decimals, "unknown" when missing.
fn num(v: f64) -> String {
    if !v.is_finite() {
        "unknown".into()
    } else if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v:.2}")
    }
}

/// A whole number (a count, a PID); "unknown" when missing.
fn int(v: f64) -> String {
    if v.is_finite() {
        format!("{}", v.round() as i64)
    } else {
        "unknown".into()
    }
}

/// Bytes as IEC (`1.50 GiB`); "unknown" when missing.
fn b(v: f64) -> String {
    if v.is_finite() && v >= 0.0 {
        bytes(v as u64)
    } else {
        "unknown".into()
    }
}

/// Who a note is about: "plumb", "PID 123", or a name given.
fn who(f: &Facts) -> String {
    if f.has("who") {
        f.text("who").to_string()
    } else {
        format!("PID {}", int(f.num("pid")))
    }
}

#[cfg(test)]
mod tests;
