#!/usr/bin/env python3
"""plumb record and plumb report benchmarks, in one go.

    python3 bench/record_bench.py [--seconds 300] [--out FILE.md]

1. Recorder overhead: plumb's CPU time over the run divided by wall time, and the recording's
   size per sample and per day, for the OS metric set at 1 s (with `sar -A 1` (sysstat) recording
   in the same run for comparison) and at 100 ms, then for a private PostgreSQL's process tree
   and engine (--pid POSTMASTER --engine URL, pgbench -c 4 -R 100 running) at 1 s and 100 ms.
   Goals: at most 0.3% of one core at 1 s, 1% at 100 ms; at most 30 MB a day at 1 s. CPU times
   come from wait4(2) of each child (sar's includes its sadc).
2. Report speed: the recording from (1) is replayed into a 24-hour, 1-second recording (86400
   samples, examples/synth_recording.rs), then `plumb report` renders it (goal: at most 2 s;
   median of 3 runs).

Needs sysstat (apt-get install sysstat) for the sar comparison; without it that column is empty.
A benchmark, not a test: it asserts nothing. Results go to --out (default
bench/results/record-DATE.md) with the machine and command line.
"""

import argparse
import datetime
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PLUMB = os.path.join(ROOT, "target", "release", "plumb")
SYNTH = os.path.join(ROOT, "target", "release", "examples", "synth_recording")


def parse_ms(interval):
    return float(interval[:-2]) if interval.endswith("ms") else float(interval[:-1]) * 1000


def pg_bin():
    base = "/usr/lib/postgresql"
    if not os.path.isdir(base):
        return None
    for v in sorted(os.listdir(base), reverse=True):
        b = os.path.join(base, v, "bin")
        if os.path.exists(os.path.join(b, "pgbench")):
            return b
    return None


PEAK_RSS = {}


def cpu_of(p):
    """The child's CPU seconds and exit status; its peak resident memory (ru_maxrss, KiB) is
    kept in PEAK_RSS by PID."""
    _, status, ru = os.wait4(p.pid, 0)
    PEAK_RSS[p.pid] = ru.ru_maxrss
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
    os.chmod(tmp, 0o755)  # the private server runs as postgres and must reach its directory
    rec = os.path.join(tmp, "os-1s.plumb")
    cmds = []
    rows = []
    err = ""
    pg = os.path.join(tmp, "pg")
    pg_started = False
    load = None
    try:
        def record(name, interval, extra, sar=False):
            """One recording of --seconds; plumb's CPU per wall time, its size per sample."""
            out = os.path.join(tmp, name)
            pc = [PLUMB, "record", "--interval", interval, "--duration", f"{a.seconds}s", "--out", out] + extra
            cmds.append(" ".join(pc))
            t0 = time.time()
            p = subprocess.Popen(pc, stderr=subprocess.PIPE)
            s = None
            sar_file = os.path.join(tmp, "sa.bin")
            if sar and shutil.which("sar"):
                sc = ["sar", "-A", "-o", sar_file, "1", str(a.seconds)]
                cmds.append(" ".join(sc))
                s = subprocess.Popen(sc, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            # How a day grows: the file's growth after a warm-up (the first samples define
            # every metric once; later definitions, for processes that start later, count).
            warm = min(20.0, a.seconds / 4)
            time.sleep(warm)
            size_warm = os.path.getsize(out)
            t_warm = time.time()
            plumb_cpu, _ = cpu_of(p)
            record.peak_mb = PEAK_RSS[p.pid] * 1024 / 1e6
            t_end = time.time()
            wall = t_end - t0
            sar_cpu = cpu_of(s)[0] if s else None
            text = p.stderr.read().decode()
            size = os.path.getsize(out)
            grown_s = max(t_end - t_warm, 1e-3)
            per_sample = (size - size_warm) / (grown_s * 1000 / parse_ms(interval))
            per_day = (size - size_warm) / grown_s * 86400 / 1e6
            return plumb_cpu / wall * 100, sar_cpu / wall * 100 if sar_cpu is not None else None, size, per_sample, per_day, text, (os.path.getsize(sar_file) if s else None)

        cpu, sar_cpu, size, per_sample, per_day, err, sar_size = record("os-1s.plumb", "1s", [], sar=True)
        rows += [
            ("OS set at 1 s: plumb record, CPU per wall time (% of one core)", f"{cpu:.3f}%", "<= 0.3%"),
            ("sar -A 1 in the same run, CPU per wall time (% of one core)", f"{sar_cpu:.3f}%" if sar_cpu is not None else "not installed", ""),
            ("OS set at 1 s: recording size (growth after the first samples)", f"{size} bytes in all, {per_sample:.0f} bytes/sample, {per_day:.1f} MB/day", "<= 30 MB/day"),
            ("OS set at 1 s: plumb record's peak resident memory (ru_maxrss)", f"{record.peak_mb:.1f} MB", ""),
        ]
        if sar_size is not None:
            rows.append(("sar file size", f"{sar_size} bytes for the same run", ""))
        cpu, _, size, per_sample, per_day, _, _ = record("os-100ms.plumb", "100ms", [])
        rows += [
            ("OS set at 100 ms: CPU per wall time (% of one core)", f"{cpu:.3f}%", "<= 1%"),
            ("OS set at 100 ms: recording size", f"{per_sample:.0f} bytes/sample, {per_day:.1f} MB/day", ""),
        ]
        # A PostgreSQL server's tree and engine, under a light steady load (pgbench -R 100):
        # a private instance of plumb's own.
        bin_dir = pg_bin()
        if bin_dir:
            e = json.loads(subprocess.run([PLUMB, "engine", "start", "--dir", pg, "--json"], check=True, capture_output=True, text=True).stdout)
            pg_started = True
            pm, port, url = e["instance"]["pid"], e["instance"]["port"], e["url"]
            conn = ["-h", f"{pg}/sock", "-p", str(port), "-U", "plumb", "postgres"]
            subprocess.run([f"{bin_dir}/pgbench", "-i", "-q", "-s", "5"] + conn, check=True, capture_output=True)
            load = subprocess.Popen([f"{bin_dir}/pgbench", "-n", "-c", "4", "-R", "100", "-T", str(4 * a.seconds + 60)] + conn, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            server = ["--pid", str(pm), "--engine", url]
            for interval, goal in [("1s", "<= 0.3%"), ("100ms", "<= 1%")]:
                cpu, _, size, per_sample, per_day, _, _ = record(f"pg-{interval}.plumb", interval, server)
                rows += [
                    (f"PostgreSQL tree (4 clients) and engine at {interval}: CPU per wall time (% of one core)", f"{cpu:.3f}%", goal),
                    (f"PostgreSQL tree and engine at {interval}: recording size", f"{per_sample:.0f} bytes/sample, {per_day:.1f} MB/day", "<= 30 MB/day" if interval == "1s" else ""),
                    (f"PostgreSQL tree and engine at {interval}: peak resident memory", f"{record.peak_mb:.1f} MB", ""),
                ]
        else:
            rows.append(("PostgreSQL tree and engine", "skipped: no PostgreSQL server binaries", ""))

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
        if load:
            load.kill()
            load.wait()
        if pg_started:
            subprocess.run([PLUMB, "engine", "stop", "--dir", pg, "--remove"], capture_output=True)
        shutil.rmtree(tmp, ignore_errors=True)

    table = "| measure | result | goal |\n|---|---|---|\n" + "\n".join(f"| {a} | {b} | {c} |" for a, b, c in rows)
    print(table)
    u = platform.uname()
    cpu = subprocess.run(["sh", "-c", "grep -m1 'model name' /proc/cpuinfo | cut -d: -f2"], capture_output=True, text=True).stdout.strip()
    now = datetime.datetime.now(datetime.timezone.utc)
    out = a.out or os.path.join(ROOT, "bench", "results", f"record-{now:%Y-%m-%d}.md")
    with open(out, "w") as f:
        f.write(f"# plumb record / report benchmarks, {now:%Y-%m-%d %H:%M} UTC\n\n")
        f.write(f"Machine: {u.node}, Linux {u.release}, {os.cpu_count()} CPUs ({cpu}). Each recording {a.seconds} s; sar beside the first.\n\n")
        f.write(f"Command: `python3 bench/record_bench.py {' '.join(sys.argv[1:])}`\n\n")
        f.write(table + "\n\n")
        f.write("plumb's own summary line:\n\n```\n" + err.strip() + "\n```\n\n")
        f.write("<details><summary>Command lines run</summary>\n\n```\n" + "\n".join(cmds) + "\n```\n</details>\n")
    print(f"recorded in {out}")


if __name__ == "__main__":
    main()
