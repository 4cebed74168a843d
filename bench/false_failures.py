#!/usr/bin/env python3
"""How often a test fails on this host when nothing is wrong: each named test run N times.

A test that asserts a measured figure (a comparison's verdict, a rate, a disturbed window) can
fail on noise alone, and a red CI that is only noise throws away a day's work. This runs each
named test N times, one run at a time and alone on the host (nothing else of the suite beside
it), as CI runs it (CI=true, so a missing part is a failure, not a skip), and prints for each:
runs, failures, the failure rate and its 95% upper bound (Clopper-Pearson; with no failure in
20 runs the rate is below 14%, in 100 below 3%), and the first line of each failure.

    python3 bench/false_failures.py --runs 20 together::io::three_short_runs_a_side_are_enough_when_the_change_is_plain
    python3 bench/false_failures.py --runs 20 --out bench/results/false-failures-DATE.md \\
        together::load::compare_finds_a_slower_server_worse_and_a_rate_not_comparable \\
        together::lab::pressure_and_write_throttle_change_the_results

A test is named FILE::NAME: its test binary (a file under tests/ without .rs, or a folder of
tests/ such as together), then the test's full name in it (e.g. together::versions::pg16::lab,
together::record::a_100ms_recording_reads_the_slow_metrics_once_a_second). Run `scripts/setup --test` first; the host should be
quiet (no compiles, no other tests).
"""

import argparse
import datetime
import json
import os
import subprocess
import sys
import time

from test_time import machine  # bench/test_time.py: the same machine line


def executables():
    """Each integration test file's executable, by file name, built as `cargo test` builds it."""
    out = subprocess.run(
        ["cargo", "test", "-j2", "--workspace", "--locked", "--no-run", "--message-format=json"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    found = {}
    for line in out.splitlines():
        try:
            m = json.loads(line)
        except ValueError:
            continue
        if m.get("reason") != "compiler-artifact" or not m.get("executable"):
            continue
        if "test" in m["target"]["kind"]:
            found[m["target"]["name"]] = m["executable"]
    return found


def upper_bound(failures, runs, confidence=0.95):
    """The one-sided Clopper-Pearson upper bound of a failure rate, by bisection."""
    if failures >= runs:
        return 1.0
    alpha = 1 - confidence

    def tail(p):  # P(X <= failures) for X ~ Binomial(runs, p)
        total, term = 0.0, (1 - p) ** runs
        for k in range(failures + 1):
            total += term
            term *= (runs - k) / (k + 1) * p / (1 - p) if p < 1 else 0
        return total

    lo, hi = failures / runs, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        if tail(mid) > alpha:
            lo = mid
        else:
            hi = mid
    return hi


def first_failure_line(text):
    for line in text.splitlines():
        if "panicked at" in line:
            return line.strip()[:200]
    lines = [l for l in text.splitlines() if l.strip()]
    return (lines[-1] if lines else "(no output)")[:200]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("tests", nargs="+", help="FILE::NAME, e.g. together::io::history_names_the_run_where_iops_moved")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--out", help="also write the table here (markdown)")
    a = ap.parse_args()
    if a.runs < 1:
        sys.exit(f"--runs {a.runs}: at least 1")
    exes = executables()
    plan = []
    for t in a.tests:
        file, _, name = t.partition("::")
        if not name or file not in exes:
            sys.exit(f"{t}: not FILE::NAME of a test file ({', '.join(sorted(exes))})")
        plan.append((t, exes[file], name))
    env = dict(os.environ, CI="true", RUST_TEST_THREADS="1")
    rows = []
    for label, exe, name in plan:
        fails, times = [], []
        for i in range(a.runs):
            t0 = time.monotonic()
            p = subprocess.run(
                [exe, "--exact", name, "--test-threads=1", "--nocapture"],
                env=env,
                capture_output=True,
                text=True,
            )
            times.append(time.monotonic() - t0)
            text = p.stdout + p.stderr
            ran = "1 passed" in text or "1 failed" in text
            if not ran:
                sys.exit(f"{label}: no such test in {exe}")
            if p.returncode != 0:
                fails.append((i + 1, first_failure_line(text)))
            print(f"{label} run {i + 1}/{a.runs}: {'FAILED' if p.returncode else 'ok'} "
                  f"({times[-1]:.1f} s)", file=sys.stderr, flush=True)
        rows.append((label, a.runs, fails, sum(times) / len(times)))
    lines = [
        f"- machine: {machine()}",
        f"- date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC",
        f"- command: `python3 bench/false_failures.py --runs {a.runs} {' '.join(a.tests)}`",
        "",
        "| test | runs | failed | rate | 95% upper bound | mean s |",
        "|---|---|---|---|---|---|",
    ]
    for label, runs, fails, mean in rows:
        lines.append(
            f"| {label} | {runs} | {len(fails)} | {len(fails) / runs:.1%} | "
            f"{upper_bound(len(fails), runs):.1%} | {mean:.1f} |"
        )
    for label, runs, fails, mean in rows:
        for i, why in fails:
            lines.append(f"\n- {label}, run {i}: {why}")
    text = "\n".join(lines) + "\n"
    print(text)
    if a.out:
        with open(a.out, "a") as f:
            f.write(text)


if __name__ == "__main__":
    main()
