#!/usr/bin/env python3
"""plumb load against pgbench, in one go, on the same private PostgreSQL and the same tables.

    python3 bench/load_vs_pgbench.py [--scale N] [--clients N] [--seconds S] [--reps N]
                                     [--threads N] [--rate N] [--out FILE.md]

1. Starts plumb's private PostgreSQL in a scratch directory; `plumb load --workload tpcb
   --scale N --keep` creates pgbench's four tables there (database plumb_load).
2. Alternates, --reps times: `plumb load --workload tpcb` (the kept tables, reused) and
   `pgbench -M prepared -n` (the same transaction: BEGIN, the five statements, END; -n so it
   neither vacuums nor truncates pgbench_history, which plumb's balance check reads) with the
   same clients and seconds; then the same pair for the point select (`--workload
   point-select` against `pgbench -S`). Both run the clients on `min(clients, CPUs)` threads
   (pgbench's -j, plumb's --threads: several connections a thread, each thread waiting on all
   of its sockets at once) unless --threads says otherwise; `--threads CLIENTS` gives each
   a thread a connection.
3. Per tool: tps (plumb: the transactions of the timed window over it; pgbench: its "tps"
   line) and the client's CPU per transaction (user + system of the tool's process over every
   transaction it ran, from the kernel's rusage of the child), medians over the reps; the
   ratios plumb / pgbench.
4. With --rate: `plumb load --workload tpcb --rate N/s` for 60 s, the achieved rate against the
   target; then the same with the server stopped for one second (SIGSTOP to its processes,
   SIGCONT after) halfway: the p99 from the intended start against the service time's.

Writes the table, the machine and the command lines to --out (default
bench/results/load-vs-pgbench-DATE.md). Run as root (the private instance runs as postgres).
A benchmark, not a test: it asserts nothing. Needs target/release/plumb (cargo build --release).
"""

import argparse
import datetime
import json
import os
import platform
import re
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PLUMB = os.path.join(ROOT, "target", "release", "plumb")
PGBENCH = "/usr/lib/postgresql/15/bin/pgbench"


def timed(cmd, log, env=None):
    """Run cmd; return (stdout, cpu seconds of the child)."""
    log.append(" ".join(cmd))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode != 0:
        sys.exit(f"failed ({r.returncode}): {' '.join(cmd)}\n{r.stderr}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return r.stdout, cpu


def plumb_load(d, workload, scale, clients, seconds, log, extra=()):
    out, cpu = timed(
        [PLUMB, "--json", "load", "--dir", d, "--workload", workload, "--scale", str(scale),
         "--clients", str(clients), "--rampup", "0s", "--duration", f"{seconds}s", "--keep",
         *extra],
        log,
    )
    j = json.loads(out)
    window = sum(t["committed"] + t["rolled_back"] for t in j["types"])
    ran = sum(s["done"] for s in j["seconds"]) or window
    return {"tps": window / j["window_s"], "cpu_us": cpu / max(ran, 1) * 1e6, "json": j}


def pgbench(status, select_only, clients, seconds, log, threads):
    host = re.search(r"host=([^&]+)", status["url"]).group(1)
    port = re.search(r"port=(\d+)", status["url"]).group(1)
    cmd = [PGBENCH, "-h", host, "-p", port, "-U", "plumb", "-M", "prepared", "-n",
           "-c", str(clients), "-j", str(threads), "-T", str(seconds)]
    if select_only:
        cmd.append("-S")
    cmd.append("plumb_load")
    out, cpu = timed(cmd, log)
    n = int(re.search(r"number of transactions actually processed: (\d+)", out).group(1))
    tps = float(re.search(r"tps = ([\d.]+)", out).group(1))
    return {"tps": tps, "cpu_us": cpu / max(n, 1) * 1e6}


def server_pids(status):
    pid = status["instance"]["pid"]
    kids = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout
    return [pid] + [int(p) for p in kids.split()]


def stalled_run(d, status, scale, clients, rate, log):
    """An open-loop run with the server stopped for one second halfway."""
    def stall():
        time.sleep(15)
        pids = server_pids(status)
        for p in pids:
            os.kill(p, signal.SIGSTOP)
        time.sleep(1.0)
        for p in pids:
            os.kill(p, signal.SIGCONT)
    t = threading.Thread(target=stall)
    t.start()
    r = plumb_load(d, "tpcb", scale, clients, 30, log, ["--rate", f"{rate}/s"])
    t.join()
    return r["json"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--scale", type=int, default=10)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--seconds", type=int, default=20)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--rate", type=int, default=0, help="also the open-loop checks at N/s")
    ap.add_argument("--threads", type=int, default=0,
                    help="pgbench's -j and plumb's --threads (default: min(clients, CPUs))")
    ap.add_argument("--out")
    a = ap.parse_args()
    threads = a.threads or min(a.clients, os.cpu_count() or 2)
    log = []
    tmp = tempfile.mkdtemp(prefix="plumb-load-bench", dir="/tmp")
    os.chmod(tmp, 0o755)
    d = os.path.join(tmp, "pg")
    timed([PLUMB, "engine", "start", "--dir", d], log)
    try:
        status = json.loads(timed([PLUMB, "--json", "engine", "status", "--dir", d], log)[0])
        plumb_load(d, "tpcb", a.scale, 1, 1, log)  # creates and keeps the tables
        rows = []
        for workload, select_only in (("tpcb", False), ("point-select", True)):
            p, g = [], []
            for i in range(a.reps):
                pair = [
                    lambda: p.append(plumb_load(d, workload, a.scale, a.clients, a.seconds, log,
                                               ["--threads", str(threads)])),
                    lambda: g.append(pgbench(status, select_only, a.clients, a.seconds, log, threads)),
                ]
                for f in pair if i % 2 == 0 else reversed(pair):
                    f()
            med = lambda v, k: statistics.median(x[k] for x in v)
            rows.append((workload, med(p, "tps"), med(g, "tps"), med(p, "cpu_us"), med(g, "cpu_us"),
                         [round(x["tps"]) for x in p], [round(x["tps"]) for x in g]))
        rate_lines = []
        if a.rate:
            j = plumb_load(d, "tpcb", a.scale, a.clients, 60, log, ["--rate", f"{a.rate}/s"])["json"]
            got = sum(t["committed"] for t in j["types"]) / j["window_s"]
            rate_lines.append(f"- `--rate {a.rate}/s` for 60 s: achieved {got:.1f}/s "
                              f"({(got / a.rate - 1) * 100:+.2f}%), {j['late']} started over 1 ms late")
            j = stalled_run(d, status, a.scale, a.clients, a.rate, log)
            t = j["types"][0]
            rate_lines.append(
                f"- the server stopped for 1 s halfway (SIGSTOP/SIGCONT): p99 from the intended start "
                f"{t['latency']['p99_s'] * 1000:.1f} ms, max {t['latency']['max_s'] * 1000:.0f} ms; "
                f"service time p99 {t['service']['p99_s'] * 1000:.1f} ms, max {t['service']['max_s'] * 1000:.0f} ms")
    finally:
        subprocess.run([PLUMB, "engine", "stop", "--dir", d, "--remove"], capture_output=True)
        os.rmdir(tmp) if os.path.isdir(tmp) and not os.listdir(tmp) else None

    lines = [
        f"# plumb load against pgbench, {datetime.date.today()}",
        "",
        f"Machine: {platform.node()}, {os.cpu_count()} CPUs, {platform.release()}; "
        f"PostgreSQL 15 (Debian's), plumb's private instance.",
        f"Scale {a.scale}, {a.clients} clients on {threads} threads each (pgbench -j, plumb "
        f"--threads: {a.clients / threads:g} connection(s) a thread), {a.seconds} s a run, "
        f"{a.reps} runs a tool, alternating; medians.",
        "",
        "| workload | plumb tps | pgbench tps | ratio | plumb CPU µs/tx | pgbench CPU µs/tx | ratio | runs (plumb; pgbench) |",
        "|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for w, pt, gt, pc, gc, pr, gr in rows:
        lines.append(f"| {w} | {pt:.0f} | {gt:.0f} | {pt / gt:.3f} | {pc:.1f} | {gc:.1f} | {pc / gc:.2f} | {pr}; {gr} |")
    lines += [""] + rate_lines + ["", "Commands:", "", "```"] + log + ["```", ""]
    text = "\n".join(lines)
    print(text)
    out = a.out or os.path.join(ROOT, "bench", "results", f"load-vs-pgbench-{datetime.date.today()}.md")
    with open(out, "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
