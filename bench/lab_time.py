#!/usr/bin/env python3
"""How long `plumb lab` takes, where the time goes, and how well its progress estimate held.

Runs `plumb lab --quick` and `plumb lab` (the full lab) a few times each, one after another, on
plumb's private PostgreSQL in --dir, and prints for each kind: the wall time of every run (min,
median, max), the time of each phase (from report.json's windows, the recording's clock) and
what lies between them, and the progress estimate: the first "about M:SS left" against the
real time, and the most the predicted end (time so far + time left) ever moved later between
two readings, beside how long the step that moved it had already overrun. With --neighbour,
a process burning one CPU runs beside every lab (a busy host). Writes the tables, the machine
and the command lines to --out (default bench/results/lab-time-DATE.md). Needs root.
A benchmark, not a test: it asserts nothing. Goals: --quick under 60 s, the full lab under
3 minutes on the 2-CPU development VM.
"""

import argparse
import datetime
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
LEFT = re.compile(r"plumb lab +(\d+)% · (.*?) · about (?:(\d+):)?(\d+):(\d\d) left")


def clock(s):
    s = round(s)
    return f"{s // 60}:{s % 60:02d}"


def one_run(plumb, quick, workdir):
    """Runs one lab; returns (wall seconds, report, [(t, pct, step, left_s)])."""
    out = os.path.join(workdir, "report")
    cmd = [plumb, "lab", "--dir", workdir, "--out", out] + (["--quick"] if quick else [])
    t0 = time.monotonic()
    readings = []
    # stderr is a pipe: plumb prints a plain progress line at each step and every 10 s.
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    for line in p.stderr:
        m = LEFT.search(line)
        if m:
            h, mnt, sec = int(m.group(3) or 0), int(m.group(4)), int(m.group(5))
            readings.append((time.monotonic() - t0, int(m.group(1)), m.group(2),
                             h * 3600 + mnt * 60 + sec))
    rc = p.wait()
    wall = time.monotonic() - t0
    if rc != 0:
        sys.exit(f"{' '.join(cmd)}: exit {rc}")
    with open(os.path.join(out, "report.json")) as f:
        report = json.load(f)
    return wall, report, readings, " ".join(cmd)


def estimate(readings, wall):
    """First estimate, and the largest later move of the predicted end between two readings."""
    if not readings:
        return None
    first = readings[0][0] + readings[0][3]
    worst = (0.0, None)
    for (t0, _, s0, l0), (t1, _, s1, l1) in zip(readings, readings[1:]):
        moved = (t1 + l1) - (t0 + l0)
        if moved > worst[0]:
            worst = (moved, f"{s0} → {s1}" if s0 != s1 else s1)
    return first, worst


def phases(report):
    """(name, seconds) for each phase and each gap between phases, in order."""
    rows = []
    last_end = 0.0
    for w in report.get("windows", []):
        start, end = w["start_s"], w["end_s"]
        if start - last_end > 0.05:
            rows.append(("(between phases)" if rows else "(before the first phase)", start - last_end))
        rows.append((w["phase"], end - start))
        last_end = end
    rows.append(("(after the last phase: stats, report)", report["elapsed_s"] - last_end))
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick-runs", type=int, default=3)
    ap.add_argument("--full-runs", type=int, default=1)
    ap.add_argument("--neighbour", action="store_true",
                    help="run a process that keeps one CPU busy beside every lab")
    ap.add_argument("--plumb", default=os.path.join(ROOT, "target/release/plumb"))
    ap.add_argument("--dir", default="/var/tmp", help="where the labs run (their --dir)")
    ap.add_argument("--out", default=os.path.join(
        HERE, "results", f"lab-time-{datetime.date.today().isoformat()}.md"))
    a = ap.parse_args()
    if not os.path.exists(a.plumb):
        sys.exit(f"{a.plumb} not found: cargo build --release -j2")
    if os.geteuid() != 0:
        sys.exit("run as root: the lab's private PostgreSQL runs as the postgres user")
    version = subprocess.run([a.plumb, "--version"], capture_output=True, text=True).stdout.strip()
    neighbour = None
    if a.neighbour:
        neighbour = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    lines = []
    say = lambda s="": (print(s, flush=True), lines.append(s))
    say(f"# plumb lab: how long it takes{' beside a busy neighbour' if a.neighbour else ''}")
    say()
    say(f"- date: {datetime.datetime.now().isoformat(timespec='seconds')}")
    cpus = os.cpu_count()
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    say(f"- machine: {platform.node()}, Linux {platform.release()}, {cpus} CPUs, {mem:.0f} GiB")
    size = os.path.getsize(a.plumb)
    stripped = "not stripped" if b".symtab" in open(a.plumb, "rb").read() else "stripped"
    say(f"- plumb: {version}; the binary ({a.plumb}) is {size / 1e6:.1f} MB, {stripped}")
    say(f"- command: `python3 bench/lab_time.py {' '.join(sys.argv[1:])}`")
    if a.neighbour:
        say("- neighbour: one process burning a CPU (`python3 -c 'while True: pass'`) for the whole run")
    try:
        for quick, runs in ((True, a.quick_runs), (False, a.full_runs)):
            if runs <= 0:
                continue
            name = "plumb lab --quick" if quick else "plumb lab"
            walls, results = [], []
            for i in range(runs):
                with tempfile.TemporaryDirectory(prefix="plumb-labtime-", dir=a.dir) as d:
                    os.chmod(d, 0o755)
                    wall, report, readings, cmd = one_run(a.plumb, quick, d)
                walls.append(wall)
                results.append((wall, report, readings, cmd))
                print(f"  {name} run {i + 1}: {wall:.1f} s", file=sys.stderr, flush=True)
            say()
            say(f"## {name}: {runs} run(s)")
            say()
            say(f"Wall time: median **{clock(statistics.median(walls))}** "
                f"(min {clock(min(walls))}, max {clock(max(walls))}; "
                f"{', '.join(f'{w:.1f} s' for w in walls)})")
            say()
            say("| run | command | wall | first estimate | predicted end moved later by at most |")
            say("|---|---|---|---|---|")
            for i, (wall, report, readings, cmd) in enumerate(results):
                e = estimate(readings, wall)
                first, (moved, where) = e if e else (float("nan"), (0.0, None))
                moved_s = f"{moved:.1f} s ({where})" if where else "never"
                say(f"| {i + 1} | `{cmd}` | {wall:.1f} s | {clock(first)} | {moved_s} |")
            say()
            say("Each phase's time (seconds, recording clock), per run:")
            say()
            per_run = [phases(r[1]) for r in results]
            names = [n for n, _ in per_run[0]]
            say("| phase | " + " | ".join(f"run {i + 1}" for i in range(runs)) + " |")
            say("|---|" + "---|" * runs)
            for j, n in enumerate(names):
                vals = [f"{pr[j][1]:.1f}" if j < len(pr) and pr[j][0] == n else "-" for pr in per_run]
                say(f"| {n} | " + " | ".join(vals) + " |")
            r = results[0][1]
            sweep = r.get("sweep") or {}
            dur = r.get("durability") or {}
            say()
            say("Runs per sweep level (run 1): " + ", ".join(
                f"QD {lv['label']}: {len(lv.get('reps', []))}" for lv in sweep.get("levels", [])))
            say("Runs per durability mode (run 1): " + ", ".join(
                f"{row['mode']}: {row.get('runs')}" for row in dur.get("rows", [])))
    finally:
        if neighbour:
            neighbour.kill()
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    with open(a.out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"\nwritten to {a.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
