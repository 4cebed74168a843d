//! diskspd's command-line syntax, so a DBA can paste `diskspd -d15 -o32 -t2 -b64K -h -r -L -w0
//! file` as they run it on Windows. Flags take their value attached (`-b64K`, `-w30`).
//! Flags that only change diskspd's own output or CPU affinity are accepted and listed as
//! ignored; flags plumb cannot honour are refused by name rather than silently dropped.

use crate::job::{Burst, Durability, Job, Pattern};
use plumb_sys::units::{parse_size, Rate};
use std::time::Duration;

/// The job, and notes on flags that were accepted without effect.
#[derive(Debug)]
pub struct Parsed {
    pub job: Job,
    pub notes: Vec<String>,
}

/// A diskspd command line plumb does not take, naming the flag.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct DiskspdError(pub String);

impl From<String> for DiskspdError {
    fn from(s: String) -> DiskspdError {
        DiskspdError(s)
    }
}

impl From<&str> for DiskspdError {
    fn from(s: &str) -> DiskspdError {
        DiskspdError(s.to_string())
    }
}

fn num<T: std::str::FromStr>(flag: &str, v: &str) -> Result<T, String> {
    v.parse()
        .map_err(|_| format!("diskspd flag {flag}: {v:?} is not a number"))
}

fn size(flag: &str, v: &str) -> Result<u64, String> {
    parse_size(v).map_err(|e| format!("diskspd flag {flag}: {e}"))
}

/// `-S`: diskspd's caching modes as plumb's durability.
fn caching(a: &str, val: &str, notes: &mut Vec<String>) -> Result<Durability, DiskspdError> {
    Ok(match val {
        "" | "u" => Durability::Direct,
        "h" | "uw" | "wu" => Durability::DirectDsync,
        "w" => Durability::Dsync,
        "b" => Durability::None,
        "r" => {
            notes.push(format!(
                "{a}: remote caching does not apply on Linux; using the OS cache"
            ));
            Durability::None
        }
        _ => return Err(format!("diskspd flag {a}: unknown caching mode {val:?}").into()),
    })
}

/// `-g`: diskspd's throughput limit, bytes per millisecond (or IOPS with `i`), per thread per
/// target.
fn throughput(a: &str, val: &str) -> Result<Rate, DiskspdError> {
    let (v, iops) = match val.strip_suffix('i') {
        Some(v) => (v, true),
        None => (val, false),
    };
    let v: f64 = num(a, v)?;
    if v <= 0.0 {
        return Err(format!("diskspd flag {a}: the throughput limit must be more than 0").into());
    }
    Ok(if iops {
        Rate::Iops(v)
    } else {
        Rate::BytesPerS(v * 1000.0)
    })
}

pub fn parse(args: &[String]) -> Result<Parsed, DiskspdError> {
    let mut job = Job::new("diskspd");
    // diskspd's defaults differ from plumb's: 10 s, 5 s warm-up, 2 outstanding, 64K, sequential,
    // reads, and the OS cache on.
    job.duration = Duration::from_secs(10);
    job.warmup = Duration::from_secs(5);
    job.queue_depth = 2;
    job.block_size = 64 << 10;
    job.pattern = Pattern::Sequential;
    job.durability = Durability::None;
    let mut notes = Vec::new();
    let mut total_threads: Option<u32> = None;
    let mut burst_ios: Option<u32> = None;
    let mut think: Option<Duration> = None;
    let mut per_thread_rate: Option<Rate> = None;
    let mut sized = false;
    for a in args {
        let Some(flag) = a.strip_prefix('-').filter(|_| a.len() > 1) else {
            if let Some(n) = a.strip_prefix('#') {
                return Err(format!(
                    "diskspd target {a}: #{n} names a Windows physical drive; name the Linux device (e.g. /dev/sdb) and pass --destroy-data-on for writes"
                ).into());
            }
            job.targets.push(a.into());
            continue;
        };
        // The flag's letter, then its value (a letter may be any character a user pastes).
        let first = flag.chars().next().map_or(0, char::len_utf8);
        let (name, val) = flag.split_at(first);
        if !name.is_ascii() {
            return Err(format!("diskspd flag {a}: not a diskspd flag").into());
        }
        match name {
            "d" => job.duration = Duration::from_secs(num(a, val)?),
            "W" => job.warmup = Duration::from_secs(if val.is_empty() { 5 } else { num(a, val)? }),
            "C" => {
                job.cooldown = Duration::from_secs(if val.is_empty() { 0 } else { num(a, val)? })
            }
            "o" | "O" => job.queue_depth = num(a, val)?,
            "t" => job.threads = num(a, val)?,
            "F" => total_threads = Some(num(a, val)?),
            "b" => job.block_size = size(a, val)? as u32,
            "r" => {
                job.pattern = Pattern::Random;
                if !val.is_empty() {
                    job.align = Some(size(a, val)?);
                }
            }
            "s" => {
                job.pattern = Pattern::Sequential;
                match val {
                    "" => {}
                    v if v.starts_with('i') => {
                        notes.push(format!("{a}: threads share one sequential stream in diskspd; plumb gives each thread its own region"));
                        if v.len() > 1 {
                            job.stride = Some(size(a, &v[1..])?);
                        }
                    }
                    v => job.stride = Some(size(a, v)?),
                }
            }
            "w" => {
                let p: u8 = if val.is_empty() { 100 } else { num(a, val)? };
                if p > 100 {
                    return Err(
                        format!("diskspd flag {a}: write percentage must be 0 to 100").into(),
                    );
                }
                job.write_pct = p;
            }
            "h" => job.durability = Durability::DirectDsync,
            "S" => job.durability = caching(a, val, &mut notes)?,
            "c" => {
                job.file_size = size(a, val)?;
                sized = true;
            }
            "g" => per_thread_rate = Some(throughput(a, val)?),
            "i" => burst_ios = Some(num(a, val)?),
            "j" => think = Some(Duration::from_millis(num(a, val)?)),
            "z" => {
                if !val.is_empty() {
                    job.seed = num(a, val)?;
                }
            }
            "Z" => notes.push(format!(
                "{a}: plumb always writes random, per-write-varied data"
            )),
            "L" => {}
            "D" | "R" | "a" | "n" | "x" | "P" | "v" | "I" | "N" | "l" => notes.push(format!(
                "{a}: ignored (diskspd output, affinity or scheduling option)"
            )),
            _ => return Err(format!("diskspd flag {a} is not supported by plumb").into()),
        }
    }
    if let Some(f) = total_threads {
        let n = job.targets.len().max(1) as u32;
        job.threads = f.div_ceil(n).max(1);
        if f % n != 0 {
            notes.push(format!(
                "-F{f}: {f} threads over {n} targets rounds up to {} per target",
                job.threads
            ));
        }
    }
    if let Some(r) = per_thread_rate {
        job.rate = Some(r);
        job.rate_per_thread = true;
    }
    match (burst_ios, think) {
        (Some(ios), Some(t)) => job.burst = Some(Burst { ios, think: t }),
        (None, None) => {}
        _ => return Err(
            "diskspd flags -i and -j go together (I/Os per burst, and milliseconds between bursts)"
                .into(),
        ),
    }
    if job.targets.is_empty() {
        return Err("the diskspd command has no target file".into());
    }
    if !sized {
        notes.push(format!(
            "no -c: a target that does not exist is made {} MiB (diskspd itself needs -c to make one); give -c for another size",
            job.file_size >> 20
        ));
    }
    Ok(Parsed { job, notes })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Result<Parsed, String> {
        parse(&s.split_whitespace().map(str::to_string).collect::<Vec<_>>()).map_err(|e| e.0)
    }

    #[test]
    fn without_c_the_default_size_is_said_and_z_and_r_are_noted() {
        let n = p("-d1 -Z1M -Rxml /tmp/x.dat").unwrap().notes.join("\n");
        assert!(
            n.contains("no -c: a target that does not exist is made 1024 MiB"),
            "{n}"
        );
        assert!(n.contains("-Z1M: plumb always writes random"), "{n}");
        assert!(n.contains("-Rxml: ignored"), "{n}");
        let n = p("-d1 -c64M /tmp/x.dat").unwrap().notes.join("\n");
        assert!(!n.contains("no -c"), "{n}");
    }

    #[test]
    fn the_seed_command() {
        let j = p("-d15 -o32 -t2 -b64K -h -r -L -w0 /data/test.dat")
            .unwrap()
            .job;
        assert_eq!(j.duration, Duration::from_secs(15));
        assert_eq!(j.queue_depth, 32);
        assert_eq!(j.threads, 2);
        assert_eq!(j.block_size, 65536);
        assert_eq!(j.durability, Durability::DirectDsync);
        assert_eq!(j.pattern, Pattern::Random);
        assert_eq!(j.write_pct, 0);
        assert_eq!(j.warmup, Duration::from_secs(5));
        assert_eq!(j.targets, vec![std::path::PathBuf::from("/data/test.dat")]);
    }

    #[test]
    fn log_write_style_and_rates() {
        let j = p("-c2G -b60K -o1 -t1 -s -w100 -Sh -g100 -d20 f")
            .unwrap()
            .job;
        assert_eq!(j.file_size, 2 << 30);
        assert_eq!(j.pattern, Pattern::Sequential);
        assert_eq!(j.write_pct, 100);
        assert_eq!(j.rate, Some(Rate::BytesPerS(100_000.0)));
        assert!(j.rate_per_thread);
        let j = p("-g500i -i64 -j100 f").unwrap().job;
        assert_eq!(j.rate, Some(Rate::Iops(500.0)));
        assert_eq!(j.burst.unwrap().ios, 64);
    }

    #[test]
    fn refusals_name_the_flag() {
        assert!(p("-d15 -Q9 f").unwrap_err().contains("-Q9"));
        assert!(p("-d15").unwrap_err().contains("no target"));
        assert!(p("-dfifteen f").unwrap_err().contains("-dfifteen"));
        assert!(p("-b64K #1").unwrap_err().contains("physical drive"));
        assert!(p("-i5 f").unwrap_err().contains("-i and -j"));
        let n = p("-Rxml -a0,1 -Z1M -c1M f").unwrap().notes;
        assert_eq!(n.len(), 3, "{n:?}");
    }
}
