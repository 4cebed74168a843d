//! The recording file: append-only framed records with a CRC, so a kill -9 loses at most the
//! record being written and damage is found, named by offset, and read up to.
//!
//! ```text
//! file    := magic "PLUMBREC" record*
//! record  := len:u32le crc:u32le type:u8 payload[len]      crc = crc32(type ++ payload)
//! type 1  header   JSON Header
//! type 2  metrics  JSON [MetricDef]           new metric names, before the sample using them
//! type 3  sample   varint t_ms, varint n, n × (varint (id_delta << 1 | gone), [zigzag varint value_delta])
//! type 4  mark     JSON Mark
//! ```
//!
//! Samples store raw counters and gauges as deltas from the previous value of the same metric
//! (ids ascending within a sample). A metric whose value did not change is left out (it keeps its
//! value); one that disappeared (a process exited) is written once with the `gone` bit. So a
//! one-second OS sample takes a hundred-odd bytes. Rates are derived on read. Every record is written with a single write(2) on an O_APPEND file, so
//! other processes (marks) can append to a recording in progress.

use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

pub const MAGIC: &[u8; 8] = b"PLUMBREC";
pub const FORMAT_VERSION: u32 = 1;
/// A record larger than this is damage, not data.
const MAX_RECORD: u32 = 16 << 20;
/// The largest recording plumb opens (a day at 1 s is about 15 MB).
pub const MAX_FILE_BYTES: u64 = 4 << 30;
/// The most values a recording may decode to (metrics × samples, 8 bytes each: 2 GiB). A small
/// file can claim far more (samples that change nothing cost two bytes and stand for every
/// metric); such a file is refused before anything is allocated.
pub const MAX_VALUES: u64 = 256 << 20;
/// Times further from the start than this (ten years) are damage, not data.
pub const MAX_T_MS: u64 = 10 * 366 * 86_400_000;

const T_HEADER: u8 = 1;
const T_METRICS: u8 = 2;
const T_SAMPLE: u8 = 3;
const T_MARK: u8 = 4;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: not a plumb recording (no PLUMBREC magic at offset 0)", path.display())]
    NotARecording { path: PathBuf },
    #[error("{}: recording format {found} is newer than this plumb reads ({FORMAT_VERSION})", path.display())]
    NewerFormat { path: PathBuf, found: u32 },
    #[error("{}: no header record: nothing to read", path.display())]
    NoHeader { path: PathBuf },
    #[error("{}: {reason}", path.display())]
    Refused { path: PathBuf, reason: String },
}

pub type Result<T> = std::result::Result<T, Error>;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Header {
    pub format_version: u32,
    pub plumb_version: String,
    /// Wall-clock start, ms since the Unix epoch; sample times are offsets from it.
    pub started_unix_ms: u64,
    pub interval_ms: u64,
    /// How often the slow metrics (engine queries, smaps, process trees) were read, when less
    /// often than every sample; the samples that read them carry a new `slow.samples` count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slow_interval_ms: Option<u64>,
    pub hostname: Option<String>,
    pub kernel: Option<String>,
    pub cpus: Option<u32>,
    /// USER_HZ and page size of the recorded host, to turn ticks and pages into seconds and bytes.
    pub clock_ticks_per_s: Option<u64>,
    pub page_size_bytes: Option<u64>,
    pub command_line: String,
    /// Free-form labels (the run's name for overlays, the command recorded).
    #[serde(default)]
    pub labels: HashMap<String, String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// Only grows (a reset shows as a decrease, which readers must not turn into a rate).
    Counter,
    /// A level.
    Gauge,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MetricDef {
    pub id: u32,
    pub name: String,
    pub kind: Kind,
    /// What the metric's object is, when its name says only a number (`trace.4242.…`: the
    /// process's title when it was first seen).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// Read only in the samples that carry a new `slow.samples` count (see
    /// [`Header::slow_interval_ms`]); in the others it holds the last value read.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub slow: bool,
}

/// The counter a recorder bumps in every sample that read the slow metrics.
pub const SLOW_SAMPLES: &str = "slow.samples";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Mark {
    /// Milliseconds since the recording started.
    pub t_ms: u64,
    pub name: String,
    #[serde(default)]
    pub detail: Option<String>,
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn get_varint(b: &[u8], pos: &mut usize) -> Option<u64> {
    let mut v: u64 = 0;
    let mut shift = 0;
    loop {
        let byte = *b.get(*pos)?;
        *pos += 1;
        if shift >= 64 {
            return None;
        }
        v |= ((byte & 0x7f) as u64) << shift;
        if byte & 0x80 == 0 {
            return Some(v);
        }
        shift += 7;
    }
}

fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

fn frame(kind: u8, payload: &[u8]) -> Vec<u8> {
    let mut h = crc32fast::Hasher::new();
    h.update(&[kind]);
    h.update(payload);
    let mut out = Vec::with_capacity(payload.len() + 9);
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    out.extend_from_slice(&h.finalize().to_le_bytes());
    out.push(kind);
    out.extend_from_slice(payload);
    out
}

/// Appends records to a recording.
pub struct Writer {
    path: PathBuf,
    file: File,
    ids: HashMap<String, u32>,
    prev: Vec<u64>,
    /// Whether each metric had a value in the last sample written.
    present: Vec<bool>,
    /// Labels for the metrics of an object (`trace.4242`), given to metrics defined later.
    labels: HashMap<String, String>,
    /// Which metrics are slow (read every few samples), by name.
    slow: Option<fn(&str) -> bool>,
    /// Whether each metric is slow.
    is_slow: Vec<bool>,
    pub bytes_written: u64,
    /// Of which the header and metric definitions (written once per metric, not per sample).
    pub definition_bytes: u64,
}

impl Writer {
    /// Create a new recording. Refuses to overwrite an existing file.
    pub fn create(path: &Path, header: &Header) -> Result<Writer> {
        let file = OpenOptions::new()
            .append(true)
            .create_new(true)
            .open(path)
            .map_err(|e| Error::Io {
                path: path.into(),
                source: e,
            })?;
        let mut w = Writer {
            path: path.into(),
            file,
            ids: HashMap::new(),
            prev: Vec::new(),
            present: Vec::new(),
            labels: HashMap::new(),
            slow: None,
            is_slow: Vec::new(),
            bytes_written: 0,
            definition_bytes: 0,
        };
        let mut first = MAGIC.to_vec();
        first.extend(frame(
            T_HEADER,
            &serde_json::to_vec(header).expect("header serialises"),
        ));
        w.write(&first)?;
        w.definition_bytes = w.bytes_written;
        Ok(w)
    }

    /// A new recording that carries on from this one (`plumb record --out-dir` starting its
    /// next file): the objects' labels and the slow metrics stay; the metrics are defined
    /// again in the new file as they appear.
    pub fn successor(&self, path: &Path, header: &Header) -> Result<Writer> {
        let mut w = Writer::create(path, header)?;
        w.labels = self.labels.clone();
        w.slow = self.slow;
        Ok(w)
    }

    fn write(&mut self, b: &[u8]) -> Result<()> {
        // One write per record: a crash cuts at most this record short.
        self.file.write_all(b).map_err(|e| Error::Io {
            path: self.path.clone(),
            source: e,
        })?;
        self.bytes_written += b.len() as u64;
        Ok(())
    }

    /// Label the metrics of `object` (a name without its last dotted part) defined from now on.
    pub fn label_object(&mut self, object: &str, label: &str) {
        self.labels.insert(object.to_string(), label.to_string());
    }

    /// Say which metrics are slow: read only every few samples ([`Writer::sample_fast`]).
    pub fn set_slow(&mut self, f: fn(&str) -> bool) {
        self.slow = Some(f);
    }

    /// Write one sample. `values` are (name, kind, raw value); new names are defined first.
    pub fn sample(&mut self, t_ms: u64, values: &[(&str, Kind, u64)]) -> Result<()> {
        self.sample_inner(t_ms, values, true)
    }

    /// Write a sample that did not read the slow metrics: those it lacks keep their last value
    /// instead of being marked gone.
    pub fn sample_fast(&mut self, t_ms: u64, values: &[(&str, Kind, u64)]) -> Result<()> {
        self.sample_inner(t_ms, values, false)
    }

    fn sample_inner(&mut self, t_ms: u64, values: &[(&str, Kind, u64)], all: bool) -> Result<()> {
        let mut new_defs = Vec::new();
        let mut pairs: Vec<(u32, u64)> = Vec::with_capacity(values.len());
        for (name, kind, v) in values {
            let id = match self.ids.get(*name) {
                Some(id) => *id,
                None => {
                    let id = self.ids.len() as u32;
                    self.ids.insert(name.to_string(), id);
                    self.prev.push(0);
                    self.present.push(false);
                    let slow = self.slow.is_some_and(|f| f(name));
                    self.is_slow.push(slow);
                    new_defs.push(MetricDef {
                        id,
                        name: name.to_string(),
                        kind: *kind,
                        label: name
                            .rsplit_once('.')
                            .and_then(|(obj, _)| self.labels.get(obj).cloned()),
                        slow,
                    });
                    id
                }
            };
            pairs.push((id, *v));
        }
        pairs.sort_unstable_by_key(|p| p.0);
        pairs.dedup_by_key(|p| p.0);
        let mut buf = Vec::new();
        if !new_defs.is_empty() {
            buf.extend(frame(
                T_METRICS,
                &serde_json::to_vec(&new_defs).expect("defs serialise"),
            ));
            self.definition_bytes += buf.len() as u64;
        }
        // What changed: new or different values, and metrics that are gone.
        let mut now_present = vec![false; self.prev.len()];
        let mut entries: Vec<(u32, Option<u64>)> = Vec::with_capacity(pairs.len());
        for (id, v) in &pairs {
            now_present[*id as usize] = true;
            if !self.present[*id as usize] || self.prev[*id as usize] != *v {
                entries.push((*id, Some(*v)));
            }
        }
        for (id, was) in self.present.iter().enumerate() {
            if *was && !now_present[id] {
                if !all && self.is_slow[id] {
                    // Not read this time: it keeps its value.
                    now_present[id] = true;
                } else {
                    entries.push((id as u32, None));
                }
            }
        }
        entries.sort_unstable_by_key(|e| e.0);
        let mut p = Vec::with_capacity(entries.len() * 3 + 8);
        put_varint(&mut p, t_ms);
        put_varint(&mut p, entries.len() as u64);
        let mut last_id = 0u32;
        for (i, (id, v)) in entries.iter().enumerate() {
            let d = if i == 0 {
                *id as u64
            } else {
                (*id - last_id) as u64
            };
            last_id = *id;
            match v {
                Some(v) => {
                    put_varint(&mut p, d << 1);
                    let prev = self.prev[*id as usize];
                    put_varint(&mut p, zigzag(v.wrapping_sub(prev) as i64));
                    self.prev[*id as usize] = *v;
                }
                None => put_varint(&mut p, (d << 1) | 1),
            }
        }
        self.present = now_present;
        buf.extend(frame(T_SAMPLE, &p));
        self.write(&buf)
    }
}

/// Append a mark to a recording (the recorder's or another process's).
pub fn append_mark(path: &Path, mark: &Mark) -> Result<()> {
    let mut f = OpenOptions::new()
        .append(true)
        .open(path)
        .map_err(|e| Error::Io {
            path: path.into(),
            source: e,
        })?;
    let b = frame(T_MARK, &serde_json::to_vec(mark).expect("mark serialises"));
    f.write_all(&b).map_err(|e| Error::Io {
        path: path.into(),
        source: e,
    })
}

/// Where and why reading stopped early.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Damage {
    pub offset: u64,
    pub reason: String,
}

/// A decoded recording: one column per metric (`u64::MAX` where a sample lacks the metric).
#[derive(Debug, Clone)]
pub struct Recording {
    pub path: PathBuf,
    pub header: Header,
    pub metrics: Vec<MetricDef>,
    pub times_ms: Vec<u64>,
    pub columns: Vec<Vec<u64>>,
    pub marks: Vec<Mark>,
    pub damage: Option<Damage>,
    pub file_bytes: u64,
}

pub const MISSING: u64 = u64::MAX;

impl Recording {
    pub fn metric(&self, name: &str) -> Option<&MetricDef> {
        self.metrics.iter().find(|m| m.name == name)
    }

    /// The label of an object's metrics (`trace.4242`), when the recorder gave one.
    pub fn object_label(&self, object: &str) -> Option<&str> {
        self.metrics
            .iter()
            .filter(|m| m.name.rsplit_once('.').is_some_and(|(o, _)| o == object))
            .find_map(|m| m.label.as_deref())
    }

    /// Which samples read the slow metrics (those with a new `slow.samples` count); None when
    /// every sample read everything.
    pub fn slow_rows(&self) -> Option<Vec<bool>> {
        let c = self.column(SLOW_SAMPLES)?;
        Some(
            (0..c.len())
                .map(|i| c[i] != MISSING && (i == 0 || c[i - 1] == MISSING || c[i] != c[i - 1]))
                .collect(),
        )
    }

    pub fn column(&self, name: &str) -> Option<&[u64]> {
        self.metric(name)
            .map(|m| self.columns[m.id as usize].as_slice())
    }
}

/// Read a recording, stopping at the first damaged or cut-off record with a note naming its offset.
pub fn read(path: &Path) -> Result<Recording> {
    use std::io::Read;
    let io = |e| Error::Io {
        path: path.into(),
        source: e,
    };
    // Opened without waiting: a FIFO with no writer would hold a plain open for ever. Only a
    // regular file is read, and O_NONBLOCK means nothing to one.
    let f = {
        use std::os::unix::fs::OpenOptionsExt;
        OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(path)
            .map_err(io)?
    };
    let meta = f.metadata().map_err(io)?;
    if !meta.is_file() {
        return Err(Error::Refused {
            path: path.into(),
            reason: "not a regular file (a recording is a file plumb record wrote)".into(),
        });
    }
    if meta.len() > MAX_FILE_BYTES {
        return Err(Error::Refused {
            path: path.into(),
            reason: format!(
                "{} bytes, more than plumb opens ({MAX_FILE_BYTES})",
                meta.len()
            ),
        });
    }
    let mut data = Vec::with_capacity(meta.len() as usize);
    f.take(MAX_FILE_BYTES).read_to_end(&mut data).map_err(io)?;
    decode(path, &data)
}

/// Samples and metric definitions in a recording's frames (an upper bound: damage found later
/// only shortens it), counted without decoding.
fn census(data: &[u8]) -> (u64, u64) {
    let (mut samples, mut metrics) = (0u64, 0u64);
    let mut pos = 8usize;
    while data.len().saturating_sub(pos) >= 9 {
        let len = u32::from_le_bytes(data[pos..pos + 4].try_into().expect("4 bytes"));
        if len > MAX_RECORD || pos + 9 + len as usize > data.len() {
            break;
        }
        let payload = &data[pos + 9..pos + 9 + len as usize];
        match data[pos + 8] {
            T_SAMPLE => samples += 1,
            T_METRICS => {
                metrics += serde_json::from_slice::<Vec<serde::de::IgnoredAny>>(payload)
                    .map(|v| v.len() as u64)
                    .unwrap_or(0)
            }
            _ => {}
        }
        pos += 9 + len as usize;
    }
    (samples, metrics)
}

/// One record's frame at `pos`: its kind, its payload (its checksum checked) and where the
/// next record starts; or why there is none.
fn read_frame(data: &[u8], pos: usize) -> std::result::Result<(u8, &[u8], usize), String> {
    if data.len() - pos < 9 {
        return Err(format!(
            "the last record is cut short ({} of at least 9 bytes): the recording was interrupted",
            data.len() - pos
        ));
    }
    let len = u32::from_le_bytes(data[pos..pos + 4].try_into().expect("4 bytes"));
    let crc = u32::from_le_bytes(data[pos + 4..pos + 8].try_into().expect("4 bytes"));
    let kind = data[pos + 8];
    if len > MAX_RECORD {
        return Err(format!(
            "record length {len} is impossible: the file is damaged here"
        ));
    }
    let end = pos + 9 + len as usize;
    if end > data.len() {
        return Err(format!(
            "the last record is cut short ({} of {} bytes): the recording was interrupted",
            data.len() - pos - 9,
            len
        ));
    }
    let payload = &data[pos + 9..end];
    let mut h = crc32fast::Hasher::new();
    h.update(&[kind]);
    h.update(payload);
    if h.finalize() != crc {
        return Err("checksum mismatch: the record is damaged".into());
    }
    Ok((kind, payload, end))
}

/// What the records so far defined and sampled: a column per metric, a row per sample.
struct Columns {
    metrics: Vec<MetricDef>,
    times: Vec<u64>,
    columns: Vec<Vec<u64>>,
    /// Each metric's last value, and whether it is present.
    prev: Vec<u64>,
    present: Vec<bool>,
    /// The samples the file holds, for each column's capacity.
    n_samples: u64,
}

impl Columns {
    /// Metric definitions: each the next id, its column missing until now.
    fn define(&mut self, defs: Vec<MetricDef>) -> std::result::Result<(), String> {
        for d in defs {
            if d.id as usize != self.metrics.len() {
                return Err(format!(
                    "metric id {} out of order (expected {})",
                    d.id,
                    self.metrics.len()
                ));
            }
            self.metrics.push(d);
            let mut c = Vec::with_capacity(self.n_samples as usize);
            c.resize(self.times.len(), MISSING);
            self.columns.push(c);
            self.prev.push(0);
            self.present.push(false);
        }
        Ok(())
    }

    /// A sample: its time, then the changed metrics as deltas (or gone); a malformed one adds
    /// no row.
    fn sample(&mut self, payload: &[u8]) -> std::result::Result<(), String> {
        let mut p = 0;
        let (Some(t), Some(n)) = (get_varint(payload, &mut p), get_varint(payload, &mut p)) else {
            return Err("no time or count".into());
        };
        if t > MAX_T_MS {
            return Err(format!("time {t} ms after the start is impossible"));
        }
        let row = self.times.len();
        self.times.push(t);
        let mut id = 0u64;
        let mut ok = true;
        for i in 0..n {
            let Some(d) = get_varint(payload, &mut p) else {
                ok = false;
                break;
            };
            id = if i == 0 { d >> 1 } else { id + (d >> 1) };
            let Some(slot) = self.prev.get_mut(id as usize) else {
                ok = false;
                break;
            };
            if d & 1 == 1 {
                self.present[id as usize] = false;
                continue;
            }
            let Some(v) = get_varint(payload, &mut p) else {
                ok = false;
                break;
            };
            *slot = slot.wrapping_add(unzigzag(v) as u64);
            self.present[id as usize] = true;
        }
        // Unchanged metrics keep their value; gone ones are missing from here on.
        let values = self.prev.iter().zip(self.present.iter());
        for (c, (v, here)) in self.columns.iter_mut().zip(values) {
            c.push(if *here { *v } else { MISSING });
        }
        if !ok || p != payload.len() {
            self.times.pop();
            for c in self.columns.iter_mut() {
                c.truncate(row);
            }
            return Err("values do not match the metric definitions".into());
        }
        Ok(())
    }
}

pub fn decode(path: &Path, data: &[u8]) -> Result<Recording> {
    if data.len() < 8 || &data[..8] != MAGIC {
        return Err(Error::NotARecording { path: path.into() });
    }
    let (n_samples, n_metrics) = census(data);
    if n_samples.saturating_mul(n_metrics) > MAX_VALUES {
        return Err(Error::Refused {
            path: path.into(),
            reason: format!(
                "{n_metrics} metrics × {n_samples} samples would decode to {} values, more than plumb holds at once ({MAX_VALUES}); the file is damaged or was not written by plumb record",
                n_samples.saturating_mul(n_metrics)
            ),
        });
    }
    let mut pos = 8usize;
    let mut header: Option<Header> = None;
    let mut cols = Columns {
        metrics: Vec::new(),
        times: Vec::new(),
        columns: Vec::new(),
        prev: Vec::new(),
        present: Vec::new(),
        n_samples,
    };
    let mut marks = Vec::new();
    let mut damage = None;
    while pos < data.len() {
        let at = pos as u64;
        let stop = |reason: String| Some(Damage { offset: at, reason });
        let (kind, payload, end) = match read_frame(data, pos) {
            Ok(f) => f,
            Err(reason) => {
                damage = stop(reason);
                break;
            }
        };
        match kind {
            T_HEADER => match serde_json::from_slice::<Header>(payload) {
                Ok(hd) => {
                    if hd.format_version > FORMAT_VERSION {
                        return Err(Error::NewerFormat {
                            path: path.into(),
                            found: hd.format_version,
                        });
                    }
                    header = Some(hd)
                }
                Err(e) => {
                    damage = stop(format!("unreadable header: {e}"));
                    break;
                }
            },
            T_METRICS => {
                let defined = serde_json::from_slice::<Vec<MetricDef>>(payload)
                    .map_err(|e| format!("unreadable metric definitions: {e}"))
                    .and_then(|defs| cols.define(defs));
                if let Err(reason) = defined {
                    damage = stop(reason);
                    break;
                }
            }
            T_SAMPLE => {
                if let Err(what) = cols.sample(payload) {
                    damage = stop(format!("malformed sample: {what}"));
                    break;
                }
            }
            T_MARK => match serde_json::from_slice::<Mark>(payload) {
                Ok(m) if m.t_ms > MAX_T_MS => {
                    damage = stop(format!(
                        "a mark at {} ms after the start is impossible",
                        m.t_ms
                    ));
                    break;
                }
                Ok(m) => marks.push(m),
                Err(e) => {
                    damage = stop(format!("unreadable mark: {e}"));
                    break;
                }
            },
            // Records of a newer kind are skipped: their frame says how long they are.
            _ => {}
        }
        pos = end;
    }
    let header = header.ok_or_else(|| Error::NoHeader { path: path.into() })?;
    Ok(Recording {
        path: path.into(),
        header,
        metrics: cols.metrics,
        times_ms: cols.times,
        columns: cols.columns,
        marks,
        damage,
        file_bytes: data.len() as u64,
    })
}

#[cfg(test)]
mod fuzz;

#[cfg(test)]
mod tests {
    use super::*;

    pub(super) fn header() -> Header {
        Header {
            format_version: FORMAT_VERSION,
            plumb_version: "test".into(),
            started_unix_ms: 1_700_000_000_000,
            interval_ms: 1000,
            slow_interval_ms: None,
            hostname: Some("h".into()),
            kernel: None,
            cpus: Some(2),
            clock_ticks_per_s: Some(100),
            page_size_bytes: Some(4096),
            command_line: "plumb record".into(),
            labels: HashMap::new(),
        }
    }

    fn write_some(p: &Path, n: u64) {
        let mut w = Writer::create(p, &header()).unwrap();
        for i in 0..n {
            let mut v = vec![
                ("cpu.all.user_ticks", Kind::Counter, 1000 + i * 37),
                ("mem.available_bytes", Kind::Gauge, 8_000_000_000 - i * 4096),
            ];
            if i >= 2 {
                v.push(("disk.vda.reads", Kind::Counter, i * 10));
            }
            w.sample(i * 1000 + 3, &v).unwrap();
        }
    }

    #[test]
    fn round_trip_with_metrics_appearing_later_and_marks() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("r.plumb");
        write_some(&p, 5);
        append_mark(
            &p,
            &Mark {
                t_ms: 2500,
                name: "phase 1".into(),
                detail: None,
            },
        )
        .unwrap();
        let r = read(&p).unwrap();
        assert_eq!(r.times_ms, vec![3, 1003, 2003, 3003, 4003]);
        assert_eq!(r.column("cpu.all.user_ticks").unwrap()[4], 1000 + 4 * 37);
        assert_eq!(
            r.column("mem.available_bytes").unwrap()[1],
            8_000_000_000 - 4096
        );
        let reads = r.column("disk.vda.reads").unwrap();
        assert_eq!(reads[0], MISSING);
        assert_eq!(reads[3], 30);
        assert_eq!(r.marks[0].name, "phase 1");
        assert!(r.damage.is_none());
        assert!(Writer::create(&p, &header()).is_err(), "never overwrites");
    }

    #[test]
    fn an_objects_label_is_kept_with_its_metrics() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("r.plumb");
        let mut w = Writer::create(&p, &header()).unwrap();
        w.sample(0, &[("trace.7.syscalls", Kind::Counter, 1)])
            .unwrap();
        // Labels apply to metrics defined after them, of that object only.
        w.label_object("trace.9", "postgres: walwriter");
        w.sample(
            1000,
            &[
                ("trace.7.syscalls", Kind::Counter, 2),
                ("trace.9.syscalls", Kind::Counter, 5),
                ("trace.9.fdatasyncs", Kind::Counter, 1),
            ],
        )
        .unwrap();
        let r = read(&p).unwrap();
        assert_eq!(r.object_label("trace.9"), Some("postgres: walwriter"));
        assert_eq!(r.object_label("trace.7"), None);
        assert_eq!(r.object_label("trace"), None);
        assert_eq!(r.column("trace.9.syscalls").unwrap(), [MISSING, 5]);
    }

    #[test]
    fn slow_metrics_keep_their_value_between_the_samples_that_read_them() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("r.plumb");
        let mut w = Writer::create(&p, &header()).unwrap();
        w.set_slow(|n| n.starts_with("engine."));
        let slow = |t: u64, n: u64, v: u64| {
            vec![
                ("cpu.all.user_ticks", Kind::Counter, t),
                (SLOW_SAMPLES, Kind::Counter, n),
                ("engine.db.xact_commit", Kind::Counter, v),
            ]
        };
        w.sample(0, &slow(0, 1, 100)).unwrap();
        w.sample_fast(100, &[("cpu.all.user_ticks", Kind::Counter, 1)])
            .unwrap();
        w.sample_fast(200, &[("cpu.all.user_ticks", Kind::Counter, 2)])
            .unwrap();
        w.sample(300, &slow(3, 2, 130)).unwrap();
        // Gone for real in a sample that read the slow metrics: marked gone.
        w.sample(
            400,
            &[
                ("cpu.all.user_ticks", Kind::Counter, 4),
                (SLOW_SAMPLES, Kind::Counter, 3),
            ],
        )
        .unwrap();
        let r = read(&p).unwrap();
        assert!(r.metric("engine.db.xact_commit").unwrap().slow);
        assert!(!r.metric("cpu.all.user_ticks").unwrap().slow);
        assert_eq!(
            r.column("engine.db.xact_commit").unwrap(),
            [100, 100, 100, 130, MISSING]
        );
        assert_eq!(r.slow_rows().unwrap(), [true, false, false, true, true]);
    }

    #[test]
    fn truncation_and_bit_flips_read_up_to_the_damage() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("r.plumb");
        write_some(&p, 10);
        let full = std::fs::read(&p).unwrap();
        // Cut in the middle of the last record: nine samples survive.
        let r = decode(&p, &full[..full.len() - 3]).unwrap();
        assert_eq!(r.times_ms.len(), 9);
        let dmg = r.damage.unwrap();
        assert!(dmg.reason.contains("cut short"), "{dmg:?}");
        // Flip a bit in the middle: a checksum error names the record's offset.
        let mut bad = full.clone();
        // Inside one of the last samples (the header takes most of a short file).
        let mid = full.len() - 30;
        bad[mid] ^= 0x10;
        let r = decode(&p, &bad).unwrap();
        let dmg = r.damage.unwrap();
        assert!(
            dmg.offset as usize <= mid && dmg.reason.contains("checksum"),
            "{dmg:?}"
        );
        assert!(r.times_ms.len() < 10 && r.times_ms.len() >= 3);
        // Not a recording at all.
        assert!(matches!(
            decode(&p, b"hello world"),
            Err(Error::NotARecording { .. })
        ));
        assert!(matches!(decode(&p, MAGIC), Err(Error::NoHeader { .. })));
    }

    #[test]
    fn varints_and_zigzag() {
        for v in [0i64, 1, -1, 63, -64, i64::MAX, i64::MIN] {
            assert_eq!(unzigzag(zigzag(v)), v);
        }
        let mut b = Vec::new();
        for v in [0u64, 127, 128, u64::MAX] {
            put_varint(&mut b, v);
        }
        let mut p = 0;
        for v in [0u64, 127, 128, u64::MAX] {
            assert_eq!(get_varint(&b, &mut p), Some(v));
        }
    }

    #[test]
    fn a_day_of_samples_is_small() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("r.plumb");
        let mut w = Writer::create(&p, &header()).unwrap();
        let names: Vec<String> = (0..120).map(|i| format!("m.{i}")).collect();
        for s in 0..600u64 {
            let vals: Vec<(&str, Kind, u64)> = names
                .iter()
                .enumerate()
                .map(|(i, n)| (n.as_str(), Kind::Counter, s * (i as u64 * 50 + 3)))
                .collect();
            w.sample(s * 1000, &vals).unwrap();
        }
        // 120 slowly moving counters: a few hundred bytes per sample.
        let per_sample = w.bytes_written / 600;
        assert!(per_sample < 400, "{per_sample} bytes per sample");
        let r = read(&p).unwrap();
        assert_eq!(r.column("m.7").unwrap()[599], 599 * (7 * 50 + 3));
    }

    #[test]
    fn unchanged_values_carry_and_gone_ones_go_missing() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("r.plumb");
        let mut w = Writer::create(&p, &header()).unwrap();
        w.sample(
            0,
            &[
                ("a", Kind::Gauge, 5),
                ("proc.9.rss_bytes", Kind::Gauge, 100),
            ],
        )
        .unwrap();
        let before = w.bytes_written;
        w.sample(
            1000,
            &[
                ("a", Kind::Gauge, 5),
                ("proc.9.rss_bytes", Kind::Gauge, 100),
            ],
        )
        .unwrap();
        assert!(
            w.bytes_written - before < 16,
            "an unchanged sample is a few bytes"
        );
        w.sample(2000, &[("a", Kind::Gauge, 6)]).unwrap();
        w.sample(
            3000,
            &[
                ("a", Kind::Gauge, 6),
                ("proc.9.rss_bytes", Kind::Gauge, 100),
            ],
        )
        .unwrap();
        let r = read(&p).unwrap();
        assert_eq!(r.column("a").unwrap(), &[5, 5, 6, 6]);
        assert_eq!(
            r.column("proc.9.rss_bytes").unwrap(),
            &[100, 100, MISSING, 100]
        );
    }
}
