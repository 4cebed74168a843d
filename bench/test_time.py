#!/usr/bin/env python3
"""How long the test suite takes, binary by binary.

Runs the README's test command (`cargo test -j2 --workspace --locked`, the tests only: run
`scripts/setup --test` first) and reads cargo's output, or reads a log of an earlier run
(`--log FILE`, e.g. what `.ci/run` printed). Prints each test binary's time as its harness
reported it (`finished in N s`), the slowest first, their sum, the wall time of the whole
command (building included) and the slowest tests where the log has them.

    python3 bench/test_time.py --out bench/results/test-time-DATE.md
    python3 bench/test_time.py --log /tmp/ci.log

`--groups FILE` reads instead what tests/together wrote to PLUMB_TEST_LOG=FILE: each test's
hold on the binary's group (alone or beside), and prints where the binary's time went: the
tests that ran alone, longest first, the time the beside tests had the binary (and how many ran
at once), and the time the group was held by nobody (a test ending, the next one starting).

    PLUMB_TEST_LOG=/tmp/groups.tsv cargo test -j2 --test together
    python3 bench/test_time.py --groups /tmp/groups.tsv
"""

import argparse
import datetime
import os
import platform
import re
import subprocess
import sys
import time

COMMAND = ["cargo", "test", "-j2", "--workspace", "--locked"]


def binaries(log):
    """(name, tests, seconds) for each test binary in a cargo test log, in the order run."""
    out = []
    name = None
    for line in log.splitlines():
        m = re.match(r"\s+Running (unittests )?(\S+) \((\S+)\)", line)
        if m:
            # A crate's library tests by the crate's name (every one is src/lib.rs).
            crate = re.sub(r"-[0-9a-f]+$", "", m.group(3).rsplit("/", 1)[-1])
            name = f"{crate} (library)" if m.group(1) else m.group(2)
            continue
        m = re.match(r"\s+Doc-tests (\S+)", line)
        if m:
            name = "doc-tests " + m.group(1)
            continue
        m = re.match(
            r"test result: \w+\. (\d+) passed; (\d+) failed; .* (\d+) filtered out;"
            r" finished in ([\d.]+)s",
            line,
        )
        # A run with a filter (.ci/run's longer fuzz run) is not the suite's.
        if m and name and m.group(3) == "0":
            out.append((name, int(m.group(1)) + int(m.group(2)), float(m.group(4))))
        if m:
            name = None
    return out


def groups(path):
    """Lines for the time a tests/together run spent alone, beside and between, from its log."""
    held = []
    for line in open(path, encoding="utf-8"):
        parts = line.rstrip("\n").split("\t")
        if len(parts) == 4:
            held.append((parts[0], parts[1], float(parts[2]), float(parts[3])))
    if not held:
        raise SystemExit(f"test_time: no group lines in {path}")
    end = max(h[3] for h in held)
    alone = sorted((h for h in held if h[1] == "alone"), key=lambda h: h[2] - h[3])
    alone_s = sum(h[3] - h[2] for h in alone)
    # The beside tests' time, cut at each start and end: how many held the group at once.
    edges = sorted({0.0, end} | {h[2] for h in held} | {h[3] for h in held})
    at_once = {}
    for a, b in zip(edges, edges[1:]):
        mid = (a + b) / 2
        n = sum(1 for h in held if h[1] == "beside" and h[2] <= mid < h[3])
        if n:
            at_once[n] = at_once.get(n, 0.0) + (b - a)
        elif not any(h[1] == "alone" and h[2] <= mid < h[3] for h in held):
            at_once[0] = at_once.get(0, 0.0) + (b - a)
    beside_s = sum(v for k, v in at_once.items() if k)
    modules = {}
    for h in alone:
        m = h[0].split("::")[0]
        modules[m] = modules.get(m, 0.0) + h[3] - h[2]
    out = [
        f"The binary's tests from the first start to the last end: **{end:.0f} s**; "
        f"{len(alone)} tests alone **{alone_s:.0f} s**, the {len(held) - len(alone)} beside "
        f"{beside_s:.0f} s, nobody holding the group {at_once.get(0, 0.0):.0f} s.",
        "",
        "Beside tests at once: "
        + ", ".join(f"{k}: {v:.0f} s" for k, v in sorted(at_once.items()) if k)
        + ".",
        "",
        "Alone, by module: "
        + ", ".join(f"{m} {s:.0f} s" for m, s in sorted(modules.items(), key=lambda x: -x[1]))
        + ".",
        "",
        "| test that ran alone | seconds | from (s) |",
        "|---|---|---|",
    ]
    for name, _, a, b in alone:
        out.append(f"| {name} | {b - a:.1f} | {a:.0f} |")
    return out


def machine():
    cpus = os.cpu_count()
    try:
        mem = int(open("/proc/meminfo").read().split()[1]) / 1048576
    except OSError:
        mem = 0
    return f"{platform.node()}, Linux {platform.release()}, {cpus} CPUs, {mem:.0f} GiB"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--log", help="read this log of a test run instead of running one")
    ap.add_argument("--groups", help="read a PLUMB_TEST_LOG file of tests/together instead")
    ap.add_argument("--out", help="also write the table here (markdown)")
    a = ap.parse_args()
    if a.groups:
        text = "\n".join(groups(a.groups)) + "\n"
        print(text)
        if a.out:
            with open(a.out, "w") as f:
                f.write(text)
        return 0
    wall = None
    if a.log:
        log = open(a.log, encoding="utf-8", errors="replace").read()
        how = f"read from {a.log}"
    else:
        t0 = time.monotonic()
        p = subprocess.run(COMMAND, capture_output=True, text=True, errors="replace")
        wall = time.monotonic() - t0
        log = p.stdout + p.stderr
        how = f"`{' '.join(COMMAND)}` (exit {p.returncode})"
    # .ci/run runs the fast tier first and then the whole suite: a binary run twice counts once,
    # its last run (the README's command).
    last = {}
    for name, n, s in binaries(log):
        last[name] = (name, n, s)
    rows = list(last.values())
    if not rows:
        print("test_time: no test results in the log", file=sys.stderr)
        return 2
    total = sum(s for _, _, s in rows)
    lines = [
        "# The test suite's time, binary by binary",
        "",
        f"- date: {datetime.datetime.now().isoformat(timespec='seconds')}",
        f"- machine: {machine()}",
        f"- command: `python3 bench/test_time.py{' --log ' + a.log if a.log else ''}`; the tests: {how}",
        "",
        f"Sum of the binaries' own times: **{total:.0f} s** ({total / 60:.1f} min)"
        + (f"; the command's wall time, building included: **{wall:.0f} s**" if wall else ""),
        "",
        "| test binary | tests | seconds | share |",
        "|---|---|---|---|",
    ]
    for name, n, s in sorted(rows, key=lambda r: -r[2]):
        if s >= 0.5:
            lines.append(f"| {name} | {n} | {s:.1f} | {100 * s / total:.0f}% |")
    quick = [r for r in rows if r[2] < 0.5]
    lines.append(f"| {len(quick)} binaries under 0.5 s each | {sum(r[1] for r in quick)} | "
                 f"{sum(r[2] for r in quick):.1f} | |")
    text = "\n".join(lines) + "\n"
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
