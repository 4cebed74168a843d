//! Make a long recording for the report-speed benchmark by replaying real samples.
//!
//!     cargo run --release --example synth_recording -- SOURCE.plumb OUT.plumb SAMPLES
//!
//! It cycles through SOURCE's samples, carrying counters forward (each replayed sample adds the
//! same increments the real one did), so rates, gauges and marks look like the real host's.

use plumb_store::{Kind, Writer, MISSING};
use std::path::PathBuf;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 4 {
        eprintln!("usage: synth_recording SOURCE.plumb OUT.plumb SAMPLES");
        std::process::exit(2);
    }
    let src = plumb_store::read(&PathBuf::from(&args[1])).unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(2)
    });
    let n: usize = args[3].parse().expect("SAMPLES is a number");
    let rows = src.times_ms.len();
    assert!(rows >= 3, "the source needs a few samples");
    let mut header = src.header.clone();
    header.labels.insert(
        "run".into(),
        format!("synthetic {n} samples from {}", args[1]),
    );
    let mut w = Writer::create(&PathBuf::from(&args[2]), &header).expect("create OUT");
    let mut offset: Vec<u64> = vec![0; src.metrics.len()];
    let interval = header.interval_ms.max(1);
    for i in 0..n {
        let r = 1 + i % (rows - 1);
        if i > 0 && r == 1 {
            // Wrapping around: counters continue from where the last lap ended.
            for (m, o) in src.metrics.iter().zip(offset.iter_mut()) {
                let c = &src.columns[m.id as usize];
                if m.kind == Kind::Counter && c[rows - 1] != MISSING && c[0] != MISSING {
                    *o += c[rows - 1] - c[0];
                }
            }
        }
        let vals: Vec<(&str, Kind, u64)> = src
            .metrics
            .iter()
            .filter_map(|m| {
                let v = src.columns[m.id as usize][r];
                (v != MISSING).then(|| {
                    (
                        m.name.as_str(),
                        m.kind,
                        if m.kind == Kind::Counter {
                            v + offset[m.id as usize]
                        } else {
                            v
                        },
                    )
                })
            })
            .collect();
        w.sample(i as u64 * interval, &vals).expect("write");
    }
    println!("{} samples, {} bytes", n, w.bytes_written);
}
