//! `plumb record`'s lines on stderr: where the figures go as it starts, and its summary at the
//! end (from [`RecordSummary`], numbers only).

use plumb_analyze::record::RecordSummary;
use plumb_sys::units::format_duration;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

/// "serving the live figures on http://ADDR/metrics (this host only)".
pub fn serving(addr: SocketAddr) -> String {
    format!(
        "serving the live figures on http://{addr}/metrics{}",
        if addr.ip().is_loopback() {
            " (this host only)"
        } else {
            "\nplumb: warning: that is beyond this host: anyone who reaches it reads your processes', cgroups' and databases' names and figures, without a password (plumb serves no TLS and no login); give 127.0.0.1:PORT, or let a firewall admit only your Prometheus"
        }
    )
}

/// "recording to FILE every 1s (…); Ctrl-C to stop".
pub fn recording(
    file: Option<&Path>,
    every: Option<Duration>,
    interval: Duration,
    slow: Option<Duration>,
    duration: Option<Duration>,
) -> String {
    format!(
        "recording {}{} every {}{}{}; Ctrl-C to stop",
        match file {
            Some(f) => format!("to {}", f.display()),
            None => "(no file: --out FILE keeps one)".to_string(),
        },
        every
            .map(|e| format!(" (then a new file every {})", format_duration(e)))
            .unwrap_or_default(),
        format_duration(interval),
        slow.map(|s| format!(
            " (engine, process trees, smaps and cgroups every {})",
            format_duration(s)
        ))
        .unwrap_or_default(),
        duration
            .map(|d| format!(" for {}", format_duration(d)))
            .unwrap_or_default()
    )
}

/// The summary's lines: the command killed, the trace's totals, the samples and what a day of
/// them takes.
pub fn summary(s: &RecordSummary) -> Vec<String> {
    let mut lines = Vec::new();
    if s.killed {
        lines.push(format!(
            "{} did not end within {} s of the signal and was killed",
            s.command.as_deref().unwrap_or("the command"),
            s.grace_s
        ));
    }
    if let Some(t) = &s.trace {
        lines.push(format!(
            "traced {} process(es): {} syscalls, {} fsync/fdatasync/sync_file_range, {} FLUSH requests{}",
            t.processes,
            t.syscalls,
            t.sync_calls,
            t.flushes,
            if t.lost > 0 {
                format!(
                    "; {} updates or events lost (the recorded rates are lower bounds)",
                    t.lost
                )
            } else {
                String::new()
            }
        ));
    }
    match &s.file {
        None => lines.push(format!("{} samples served", s.samples)),
        Some(f) => lines.push(format!(
            "{} samples in {} ({} bytes; samples about {} bytes each: {:.1} MB per day at this interval){}",
            s.samples,
            if s.files > 1 {
                format!("{} files, the last {}", s.files, f.display())
            } else {
                f.display().to_string()
            },
            s.bytes_written,
            s.bytes_per_sample(),
            s.bytes_per_day() / 1e6,
            if s.late_ticks > 0 {
                format!(
                    "; {} tick(s) skipped because plumb fell behind",
                    s.late_ticks
                )
            } else {
                String::new()
            }
        )),
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use plumb_analyze::record::TraceTotals;

    #[test]
    fn a_day_of_samples_is_worked_out_from_the_samples_alone() {
        let s = RecordSummary {
            file: Some("r.plumb".into()),
            samples: 10,
            interval_ms: 1000,
            files: 1,
            bytes_written: 50_000,
            sample_bytes: 4_000,
            late_ticks: 2,
            trace: Some(TraceTotals {
                processes: 3,
                syscalls: 900,
                sync_calls: 12,
                flushes: 7,
                lost: 0,
            }),
            command: Some("sleep".into()),
            exit_code: Some(0),
            killed: true,
            grace_s: 10,
        };
        let l = summary(&s);
        assert_eq!(
            l[0],
            "sleep did not end within 10 s of the signal and was killed"
        );
        assert_eq!(
            l[1],
            "traced 3 process(es): 900 syscalls, 12 fsync/fdatasync/sync_file_range, 7 FLUSH requests"
        );
        // 400 bytes a sample, 86,400 samples a day.
        assert_eq!(
            l[2],
            "10 samples in r.plumb (50000 bytes; samples about 400 bytes each: 34.6 MB per day at this interval); 2 tick(s) skipped because plumb fell behind"
        );
        let served = RecordSummary {
            file: None,
            trace: None,
            killed: false,
            ..s
        };
        assert_eq!(summary(&served), ["10 samples served"]);
    }
}
