#!/usr/bin/env python3
"""How much plumb lab's figures move between runs on one machine, and whether its findings do.

Runs `plumb lab --quick` N times (default 5) one after another, reads each report.json, and
prints for every figure the lab reports (durability modes, sweep levels, the sequential read,
pgbench, the insert/CHECKPOINT loops) its median, min, max and relative spread
((max - min) / median), then each run's finding codes and phase verdicts, and whether the codes
agree across runs. Writes the tables, the machine and the command lines to --out (default
bench/results/lab-stability-DATE.md). Needs root (plumb's private PostgreSQL runs as postgres).
A benchmark, not a test: it asserts nothing.
"""

import argparse
import datetime
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def figures(r):
    """Every figure of one report, by a stable name."""
    out = {}
    d = r.get("durability") or {}
    for row in d.get("rows", []):
        key = f"durability {row['mode']} {row['block_size'] // 1024}K"
        if row.get("mean_s") is not None:
            out[f"{key} mean µs"] = row["mean_s"] * 1e6
        if row.get("p99_s") is not None:
            out[f"{key} p99 µs"] = row["p99_s"] * 1e6
        pw = row.get("per_write")
        if pw:
            out[f"{key} FLUSH per write"] = pw["flushes"]
    s = r.get("sweep") or {}
    for lv in s.get("levels", []):
        if lv.get("iops"):
            out[f"sweep QD {lv['label']} IOPS"] = lv["iops"]["median"]
        if lv.get("lat_mean_s"):
            out[f"sweep QD {lv['label']} mean ms"] = lv["lat_mean_s"]["median"] * 1e3
    knee = s.get("knee")
    out["sweep knee QD (medians)"] = float(knee["level"]) if knee else float("nan")
    sr = r.get("seq_read")
    if sr:
        out["sequential read MiB/s"] = sr["bytes_per_s"] / 2**20
    pg = r.get("pgbench")
    if pg:
        out["pgbench tps"] = pg["tps"]
        lat = pg.get("latency") or {}
        if lat.get("p99_s") is not None:
            out["pgbench p99 ms"] = lat["p99_s"] * 1000
    for lp in r.get("loops", []):
        key = f"loops {lp['scenario']} {lp['wal_sync_method']}"
        if lp.get("insert"):
            out[f"{key} inserts median ms"] = lp["insert"]["p50_s"] * 1000
        if lp.get("commit"):
            out[f"{key} commit p50 ms"] = lp["commit"]["p50_s"] * 1000
        if lp.get("flushes_per_commit") is not None:
            out[f"{key} FLUSH per commit"] = lp["flushes_per_commit"]
    return out


def loops_conclusions(r):
    """What the wal_sync_method finding concluded per scenario: "faster with X", "not
    distinguishable", "too few" (read from its statement)."""
    out = []
    for f in r["findings"]:
        if f["rule"] != "wal-sync-method":
            continue
        for what in ("10,000-row transactions", "single-row commits"):
            part = f["statement"].split(what + ": ", 1)
            if len(part) < 2:
                continue
            said = part[1]
            if said.startswith("not distinguishable"):
                out.append(f"{what}: not distinguishable")
            elif " iterations a side are too few" in said.split("(")[0]:
                out.append(f"{what}: too few")
            elif "faster with " in said.split("(")[0]:
                out.append(f"{what}: faster with {said.split('faster with ', 1)[1].split(' (')[0]}")
    return "; ".join(out) or "(none)"


def durability_conclusions(r):
    """The durability probe's comparisons (by plumb compare's rule over the runs' tenths): the
    codes of its fastest, wal_sync_method and durability-cost statements, in order."""
    keep = ("fastest-", "wal-sync-", "durability-cost")
    d = r.get("durability") or {}
    return ", ".join(c["code"] for c in d.get("conclusions", [])
                     if c["code"].startswith(keep)) or "(none)"


def knee_range(r):
    """The knee as the lab states it: "QD 16", "QD 4 to 16", or "none"."""
    k = (r.get("sweep") or {}).get("knee")
    if not k:
        return "none"
    lo, hi = k.get("from", k["level"]), k.get("to", k["level"])
    return f"QD {lo}" if lo == hi else f"QD {lo} to {hi}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--plumb", default=os.path.join(ROOT, "target/release/plumb"))
    ap.add_argument("--dir", default="/var/tmp", help="where the labs run (their --dir)")
    ap.add_argument("--out", default=os.path.join(
        HERE, "results", f"lab-stability-{datetime.date.today().isoformat()}.md"))
    a = ap.parse_args()
    if not os.path.exists(a.plumb):
        sys.exit(f"{a.plumb} not found: cargo build --release -j2")
    if os.geteuid() != 0:
        sys.exit("run as root: the lab's private PostgreSQL runs as the postgres user")
    reports, commands = [], []
    for i in range(a.runs):
        work = tempfile.mkdtemp(prefix="plumb-stability-", dir=a.dir)
        os.chmod(work, 0o755)
        out = os.path.join(work, "report")
        cmd = [a.plumb, "lab", "--quick", "--dir", work, "--out", out]
        commands.append(" ".join(cmd))
        print(f"run {i + 1}/{a.runs}: {' '.join(cmd)}", flush=True)
        r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if r.returncode != 0:
            sys.exit(f"the lab failed ({r.returncode}):\n{r.stderr}")
        with open(os.path.join(out, "report.json")) as f:
            reports.append(json.load(f))
        shutil.rmtree(work)

    per_run = [figures(r) for r in reports]
    names = sorted({k for f in per_run for k in f})
    lines = ["| figure | median | min | max | spread | runs |", "|---|---|---|---|---|---|"]
    for n in names:
        v = [f[n] for f in per_run if n in f and f[n] == f[n]]
        if not v:
            lines.append(f"| {n} | - | - | - | - | 0 |")
            continue
        med = statistics.median(v)
        spread = (max(v) - min(v)) / abs(med) if med else 0.0
        lines.append(f"| {n} | {med:.3f} | {min(v):.3f} | {max(v):.3f} | {spread * 100:.1f}% | {len(v)} |")
    table = "\n".join(lines)

    codes = [sorted({f["rule"] for f in r["findings"]}) for r in reports]
    severities = [sorted(f"{f['rule']}:{f['severity']}" for f in r["findings"]) for r in reports]
    verdicts = [
        ", ".join(f"{w['phase']}={(w.get('interference') or {}).get('verdict', '-')}" for w in r["windows"])
        for r in reports
    ]
    loops = [loops_conclusions(r) for r in reports]
    same_loops = all(x == loops[0] for x in loops)
    loops_lines = [f"- run {i + 1}: {x}" for i, x in enumerate(loops)]
    durs = [durability_conclusions(r) for r in reports]
    same_durs = all(x == durs[0] for x in durs)
    dur_lines = [f"- run {i + 1}: {x}" for i, x in enumerate(durs)]
    knees = [knee_range(r) for r in reports]
    same_knee = all(k == knees[0] for k in knees)
    knee_lines = [f"- run {i + 1}: {k}" for i, k in enumerate(knees)]
    same = all(c == codes[0] for c in codes)
    same_sev = all(s == severities[0] for s in severities)
    code_lines = [f"- run {i + 1}: {', '.join(c) or '(none)'}" for i, c in enumerate(codes)]
    sev_lines = [f"- run {i + 1}: {', '.join(s) or '(none)'}" for i, s in enumerate(severities)]
    verdict_lines = [f"- run {i + 1}: {v}" for i, v in enumerate(verdicts)]
    print(table)
    print()
    print("finding codes per run:")
    print("\n".join(code_lines))
    print(f"same codes in every run: {'yes' if same else 'NO'}; same severities: {'yes' if same_sev else 'NO'}")
    print("stated knee per run:")
    print("\n".join(knee_lines))
    print(f"same stated knee in every run: {'yes' if same_knee else 'NO'}")
    print("the loops' conclusions per run:")
    print("\n".join(loops_lines))
    print(f"same conclusions in every run: {'yes' if same_loops else 'NO'}")
    print("the durability probe's conclusions per run:")
    print("\n".join(dur_lines))
    print(f"same in every run: {'yes' if same_durs else 'NO'}")

    uname = platform.uname()
    cpu = subprocess.run(["sh", "-c", "grep -m1 'model name' /proc/cpuinfo | cut -d: -f2"],
                         capture_output=True, text=True).stdout.strip()
    version = subprocess.run([a.plumb, "--version"], capture_output=True, text=True).stdout.strip()
    body = f"""# plumb lab --quick, {a.runs} runs: how much each figure moves

- date: {datetime.datetime.now().isoformat(timespec='seconds')}
- machine: {uname.node}, Linux {uname.release}, {os.cpu_count()} CPUs ({cpu}), {round(os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30)} GiB
- plumb: {version}
- command: `python3 bench/lab_stability.py --runs {a.runs}`; each run:
{chr(10).join(f'  - `{c}`' for c in commands)}

Spread is (max − min) / median over the runs.

{table}

## Findings

Same codes in every run: **{'yes' if same else 'no'}**; same severities: **{'yes' if same_sev else 'no'}**.

{chr(10).join(code_lines)}

With severities:

{chr(10).join(sev_lines)}

## The stated knee

The knee as the lab states it (its range where the repetitions allow more than one reading).
Same in every run: **{'yes' if same_knee else 'no'}**.

{chr(10).join(knee_lines)}

## The loops' conclusions

Which wal_sync_method the insert/CHECKPOINT loops called faster (by `plumb compare`'s rule for one
run a side). Same in every run: **{'yes' if same_loops else 'no'}**.

{chr(10).join(loops_lines)}

## The durability probe's conclusions

Which durable-write mode the probe called fastest, what it said of wal_sync_method, and whether
durability's cost was beyond the rule (by `plumb compare`'s rule over the runs' tenths). Same in
every run: **{'yes' if same_durs else 'no'}**.

{chr(10).join(dur_lines)}

## Phase verdicts

{chr(10).join(verdict_lines)}
"""
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    with open(a.out, "w") as f:
        f.write(body)
    print(f"written to {a.out}")


if __name__ == "__main__":
    main()
