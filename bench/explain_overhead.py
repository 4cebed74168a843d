#!/usr/bin/env python3
"""What `plumb load --explain` costs: the same run with and without it, side by side.

    python3 bench/explain_overhead.py [--workload tpcb] [--scale N] [--clients N]
                                      [--seconds S] [--reps N] [--again]
                                      [--variant LABEL=BINARY] [--out FILE.md]

1. Starts plumb's private PostgreSQL in a scratch directory; `plumb load --workload W --scale N
   --keep` (order-entry: --warehouses N) creates the tables once (database plumb_load).
2. Runs each mode once a rep, the modes' order turning from rep to rep (the kept tables
   reused), each with the same clients and seconds: without --explain, with it, with --again a
   second run without it (the noise of a ratio of equals), and each --variant's binary with
   --explain (a build made for a measurement). With --explain the kernel times every
   connection's backend: programs at every syscall, context switch, wake-up and queued bio on
   the host, and two reads of a map around each transaction.
3. Per mode: tps (the timed window's transactions over it) and plumb's own CPU per transaction
   (user + system of the plumb process over every transaction it ran, from the kernel's rusage
   of the child), medians over the reps; each mode's ratio to the runs without --explain, as a
   ratio of medians and as the median of each rep's paired ratio (the goal: at least 0.97).

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


def load(d, a, log, extra=(), plumb=PLUMB):
    out, cpu = run(
        [plumb, "--json", "load", "--dir", d, "--workload", a.workload,
         "--warehouses" if a.workload == "order-entry" else "--scale", str(a.scale),
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
    p.add_argument("--again", action="store_true",
                   help="a second mode without --explain: the noise of a ratio of equals")
    p.add_argument("--variant", action="append", default=[], metavar="LABEL=BINARY",
                   help="another plumb binary run with --explain (a build for a measurement)")
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
            # Each mode: (label, binary, extra arguments). The order turns each rep, so that
            # no mode always runs after the same one.
            modes = [("without --explain", PLUMB, []), ("with --explain", PLUMB, ["--explain"])]
            if a.again:
                modes.append(("without, again", PLUMB, []))
            for v in a.variant:
                label, _, binary = v.partition("=")
                modes.append((f"with --explain, {label}", binary, ["--explain"]))
            runs = {m[0]: [] for m in modes}
            for rep in range(a.reps):
                for i in range(len(modes)):
                    label, binary, extra = modes[(rep + i) % len(modes)]
                    runs[label].append(load(d, a, log, extra, binary))
        finally:
            subprocess.run([PLUMB, "engine", "stop", "--dir", d, "--remove"], capture_output=True)
    med = lambda rs, k: statistics.median(r[k] for r in rs)
    plain = runs["without --explain"]
    explained = runs["with --explain"]
    tps_p, cpu_p = med(plain, "tps"), med(plain, "cpu_us")
    closed = min(r["closed"] for r in explained if r["closed"] is not None)
    each = lambda rs: ", ".join(f"{r['tps']:,.0f}" for r in rs)
    # The ratio of each rep's pair (same rep, adjacent runs): less moved by the host's drift
    # than the ratio of medians.
    paired = lambda rs: statistics.median(r["tps"] / p["tps"] for r, p in zip(rs, plain))
    date = datetime.date.today().isoformat()
    out = a.out or os.path.join(ROOT, "bench", "results", f"explain-overhead-{date}.md")
    lines = [
        "# What `plumb load --explain` costs",
        "",
        f"Machine: {machine()}. {a.workload}, "
        f"{'warehouses' if a.workload == 'order-entry' else 'scale'} {a.scale}, {a.clients} clients, "
        f"{a.seconds} s a run, {a.reps} runs a mode alternating; medians.",
        "",
        "| mode | tps | ratio of medians | median of paired ratios | plumb CPU per transaction |",
        "|---|---|---|---|---|",
        *[
            f"| {label} | {med(rs, 'tps'):,.0f} | {med(rs, 'tps') / tps_p:.3f} | "
            f"{'' if rs is plain else f'**{paired(rs):.3f}**'} | {med(rs, 'cpu_us'):.1f} µs "
            f"({med(rs, 'cpu_us') / cpu_p:.2f}x) |"
            for label, rs in runs.items()
        ],
        "",
        "Every run: " + "; ".join(f"{label} {each(rs)}" for label, rs in runs.items()) + ". "
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
    print("\n".join(lines[:12]))
    print(f"written: {out}")


if __name__ == "__main__":
    main()
