#!/usr/bin/env python3
"""How long the test suite takes, binary by binary.

Runs the README's test command (`cargo test -j2 --workspace --locked`, the tests only: run
`scripts/setup --test` first) and reads cargo's output, or reads a log of an earlier run
(`--log FILE`, e.g. what `.ci/run` printed). Prints each test binary's time as its harness
reported it (`finished in N s`), the slowest first, their sum, the wall time of the whole
command (building included) and the slowest tests where the log has them.

    python3 bench/test_time.py --out bench/results/test-time-DATE.md
    python3 bench/test_time.py --log /tmp/ci.log
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
    ap.add_argument("--out", help="also write the table here (markdown)")
    a = ap.parse_args()
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
