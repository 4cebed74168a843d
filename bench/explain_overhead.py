#!/usr/bin/env python3
"""What `plumb load --explain` costs: the same run with and without it, side by side.

    python3 bench/explain_overhead.py [--workload tpcb] [--scale N] [--clients N]
                                      [--seconds S] [--reps N] [--out FILE.md]

1. Starts plumb's private PostgreSQL in a scratch directory; `plumb load --workload W --scale N
   --keep` creates the tables once (database plumb_load).
2. Alternates, --reps times: the run without --explain, then with it (the kept tables reused),
   each with the same clients and seconds. With --explain the kernel times every connection's
   backend: programs at every syscall, context switch, wake-up and queued bio on the host, and
   two reads of a map around each transaction.
3. Per mode: tps (the timed window's transactions over it) and plumb's own CPU per transaction
   (user + system of the plumb process over every transaction it ran, from the kernel's rusage
   of the child), medians over the reps; the ratio with/without (the goal: tps at least 0.97).

Writes the table, the machine and the command lines to --out (default
bench/results/explain-overhead-DATE.md). Run as root. A benchmark, not a test: it asserts
nothing. Needs target/release/plumb (cargo build --release).
"""

import argparse
import datetime
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PLUMB = os.path.join(ROOT, "target", "release", "plumb")


def run(cmd, log):
    """Run cmd; return (stdout, cpu seconds of the child)."""
    log.append(" ".join(cmd))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    r = subprocess.run(cmd, capture_output=True, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode != 0:
        sys.exit(f"failed ({r.returncode}): {' '.join(cmd)}\n{r.stderr}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return r.stdout, cpu


def load(d, a, log, extra=()):
    out, cpu = run(
        [PLUMB, "--json", "load", "--dir", d, "--workload", a.workload, "--scale", str(a.scale),
         "--clients", str(a.clients), "--rampup", "0s", "--duration", f"{a.seconds}s",
         "--keep", *extra],
        log,
    )
    j = json.loads(out)
    window = sum(t["committed"] + t["rolled_back"] for t in j["types"])
    ran = sum(s["done"] for s in j["seconds"]) or window
    closed = [t["explained"]["closed"] for t in j["types"] if t.get("explained")]
    return {
        "tps": window / j["window_s"],
        "cpu_us": cpu / max(ran, 1) * 1e6,
        "closed": min(closed) if closed else None,
    }


def machine():
    cpus = os.cpu_count()
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return f"{platform.node()}, Linux {platform.release()}, {cpus} CPUs, {mem:.0f} GiB"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--workload", default="tpcb")
    p.add_argument("--scale", type=int, default=1)
    p.add_argument("--clients", type=int, default=4)
    p.add_argument("--seconds", type=int, default=20)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--out")
    a = p.parse_args()
    if os.geteuid() != 0:
        sys.exit("run as root: --explain loads eBPF programs")
    if not os.path.exists(PLUMB):
        sys.exit(f"no {PLUMB}: cargo build --release first")
    log = []
    with tempfile.TemporaryDirectory(prefix="plumb-explain-bench-", dir="/var/tmp") as d:
        os.chmod(d, 0o755)
        # One instance for every run (a load reuses a running one): no start in the figures.
        run([PLUMB, "engine", "start", "--dir", d], log)
        try:
            load(d, a, log)  # creates and keeps the tables
            plain, explained = [], []
            for _ in range(a.reps):
                plain.append(load(d, a, log))
                explained.append(load(d, a, log, ["--explain"]))
        finally:
            subprocess.run([PLUMB, "engine", "stop", "--dir", d, "--remove"], capture_output=True)
    med = lambda rs, k: statistics.median(r[k] for r in rs)
    tps_p, tps_e = med(plain, "tps"), med(explained, "tps")
    cpu_p, cpu_e = med(plain, "cpu_us"), med(explained, "cpu_us")
    closed = min(r["closed"] for r in explained if r["closed"] is not None)
    each = lambda rs: ", ".join(f"{r['tps']:,.0f}" for r in rs)
    date = datetime.date.today().isoformat()
    out = a.out or os.path.join(ROOT, "bench", "results", f"explain-overhead-{date}.md")
    lines = [
        "# What `plumb load --explain` costs",
        "",
        f"Machine: {machine()}. {a.workload}, scale {a.scale}, {a.clients} clients, "
        f"{a.seconds} s a run, {a.reps} runs a mode alternating; medians.",
        "",
        "| mode | tps | plumb CPU per transaction |",
        "|---|---|---|",
        f"| without --explain | {tps_p:,.0f} | {cpu_p:.1f} µs |",
        f"| with --explain | {tps_e:,.0f} | {cpu_e:.1f} µs |",
        f"| ratio | **{tps_e / tps_p:.3f}** | {cpu_e / cpu_p:.2f} |",
        "",
        f"Every run: tps without {each(plain)}; with {each(explained)}. "
        f"Transactions whose parts closed on their wall time within 5%: at least "
        f"{100 * closed:.1f}% of each type in every run.",
        "",
        "Command: `python3 bench/explain_overhead.py "
        + " ".join(sys.argv[1:]) + "`; the runs:",
        "",
        *[f"- `{c}`" for c in log],
        "",
    ]
    with open(out, "w") as f:
        f.write("\n".join(lines))
    print("\n".join(lines[:10]))
    print(f"written: {out}")


if __name__ == "__main__":
    main()
