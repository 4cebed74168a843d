#!/usr/bin/env python3
"""plumb record and plumb report benchmarks (issue 5), in one go.

    python3 bench/record_bench.py [--seconds 300] [--out FILE.md]

1. Recorder overhead at 1 Hz with the OS metric set: plumb's CPU time over the run divided by
   wall time (goal: at most 0.3% of one core), with `sar -A 1` (sysstat) recording in the same run
   for comparison. CPU times come from wait4(2) of each child (sar's includes its sadc).
   Also the recording's size per sample and per day.
2. Report speed: the recording from (1) is replayed into a 24-hour, 1-second recording (86400
   samples, examples/synth_recording.rs), then `plumb report` renders it (goal: at most 2 s;
   median of 3 runs).

Needs sysstat (apt-get install sysstat) for the sar comparison; without it that column is empty.
A benchmark, not a test: it asserts nothing. Results go to --out (default
bench/results/record-DATE.md) with the machine and command line.
"""

import argparse
import datetime
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PLUMB = os.path.join(ROOT, "target", "release", "plumb")
SYNTH = os.path.join(ROOT, "target", "release", "examples", "synth_recording")


def cpu_of(p):
    _, status, ru = os.wait4(p.pid, 0)
    return ru.ru_utime + ru.ru_stime, status


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=int, default=300)
    ap.add_argument("--out")
    a = ap.parse_args()
    for f in (PLUMB, SYNTH):
        if not os.path.exists(f):
            sys.exit("build first: cargo build --release -j2 && cargo build --release -j2 --examples")
    tmp = tempfile.mkdtemp(prefix="plumb-bench-")
    rec = os.path.join(tmp, "os.plumb")
    cmds = []
    try:
        pc = [PLUMB, "record", "--interval", "1s", "--duration", f"{a.seconds}s", "--out", rec]
        cmds.append(" ".join(pc))
        t0 = time.time()
        p = subprocess.Popen(pc, stderr=subprocess.PIPE)
        s = None
        sar_file = os.path.join(tmp, "sa.bin")
        if shutil.which("sar"):
            sc = ["sar", "-A", "-o", sar_file, "1", str(a.seconds)]
            cmds.append(" ".join(sc))
            s = subprocess.Popen(sc, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        plumb_cpu, _ = cpu_of(p)
        wall = time.time() - t0
        sar_cpu = cpu_of(s)[0] if s else None
        err = p.stderr.read().decode()
        size = os.path.getsize(rec)
        samples = a.seconds + 1
        per_sample = size / samples
        rows = [
            ("plumb record, CPU per wall time (% of one core)", f"{plumb_cpu / wall * 100:.3f}%", "<= 0.3%"),
            ("sar -A 1, CPU per wall time (% of one core)", f"{sar_cpu / wall * 100:.3f}%" if sar_cpu is not None else "not installed", ""),
            ("plumb recording size", f"{size} bytes, {per_sample:.0f} bytes/sample, {per_sample * 86400 / 1e6:.1f} MB/day", "< 30 MB/day"),
        ]
        if s:
            rows.append(("sar file size", f"{os.path.getsize(sar_file)} bytes for the same run", ""))

        day = os.path.join(tmp, "day.plumb")
        sc = [SYNTH, rec, day, "86400"]
        cmds.append(" ".join(sc))
        subprocess.run(sc, check=True, stdout=subprocess.DEVNULL)
        times = []
        for i in range(3):
            out = os.path.join(tmp, f"rep{i}")
            rc = [PLUMB, "report", day, "--out", out]
            cmds.append(" ".join(rc))
            t = time.time()
            subprocess.run(rc, check=True, stdout=subprocess.DEVNULL)
            times.append(time.time() - t)
        html = os.path.getsize(os.path.join(tmp, "rep0", "index.html"))
        rows.append(("plumb report of a 24-hour 1-second recording (86400 samples)", f"{statistics.median(times):.2f} s (runs: {', '.join(f'{x:.2f}' for x in times)}); {os.path.getsize(day) / 1e6:.1f} MB in, {html / 1e6:.2f} MB HTML out", "<= 2 s"))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    table = "| measure | result | goal |\n|---|---|---|\n" + "\n".join(f"| {a} | {b} | {c} |" for a, b, c in rows)
    print(table)
    u = platform.uname()
    cpu = subprocess.run(["sh", "-c", "grep -m1 'model name' /proc/cpuinfo | cut -d: -f2"], capture_output=True, text=True).stdout.strip()
    now = datetime.datetime.now(datetime.timezone.utc)
    out = a.out or os.path.join(ROOT, "bench", "results", f"record-{now:%Y-%m-%d}.md")
    with open(out, "w") as f:
        f.write(f"# plumb record / report benchmarks, {now:%Y-%m-%d %H:%M} UTC\n\n")
        f.write(f"Machine: {u.node}, Linux {u.release}, {os.cpu_count()} CPUs ({cpu}). {a.seconds} s recording at 1 Hz, sar in the same run.\n\n")
        f.write(f"Command: `python3 bench/record_bench.py {' '.join(sys.argv[1:])}`\n\n")
        f.write(table + "\n\n")
        f.write("plumb's own summary line:\n\n```\n" + err.strip() + "\n```\n\n")
        f.write("<details><summary>Command lines run</summary>\n\n```\n" + "\n".join(cmds) + "\n```\n</details>\n")
    print(f"recorded in {out}")


if __name__ == "__main__":
    main()
