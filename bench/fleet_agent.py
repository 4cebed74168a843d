#!/usr/bin/env python3
"""The fleet agent's cost: plumb record serving /metrics beside postgres_exporter, in one go.

    python3 bench/fleet_agent.py [--seconds 300] [--out FILE.md]

A private PostgreSQL (plumb engine start) with pg_stat_statements loaded and created, under a
steady pgbench load (-c 4 -R 200), is watched at the same time by

- plumb record --interval 1s --pid POSTMASTER --engine URL --statements 10 --serve PORT
  --out-dir DIR (the host, the server's tree, the engine, its heaviest statements, kept on
  disk), and
- Debian's postgres_exporter (prometheus-postgres-exporter) with pg_stat_statements added as
  its queries file adds it (the same figures per queryid, role and database: calls, time, rows,
  shared blocks read and hit), which keeps nothing on disk,

each scraped every second, as a 1-second Prometheus job would. Reported for each: CPU time per
wall time (% of one core, from /proc/PID/stat over the run, after a warm-up), peak resident
memory (VmHWM), the bytes a scrape returns; for plumb also the recording's growth in MB a day.
postgres_exporter reads the server only, not the host or the processes: it is the peer for the
engine part of what plumb does. A benchmark, not a test: it asserts nothing. Results go to --out
(default bench/results/fleet-agent-DATE.md) with the machine and command line.
"""

import argparse
import datetime
import json
import os
import platform
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PLUMB = os.path.join(ROOT, "target", "release", "plumb")
EXPORTER = "/usr/bin/prometheus-postgres-exporter"

QUERIES = """pg_stat_statements:
  query: "SELECT r.rolname, d.datname, s.queryid::text AS queryid, s.calls, s.total_exec_time / 1000 AS total_time_seconds, s.rows, s.shared_blks_read, s.shared_blks_hit FROM pg_stat_statements s JOIN pg_roles r ON r.oid = s.userid JOIN pg_database d ON d.oid = s.dbid"
  master: true
  metrics:
    - rolname:
        usage: "LABEL"
        description: "role"
    - datname:
        usage: "LABEL"
        description: "database"
    - queryid:
        usage: "LABEL"
        description: "query id"
    - calls:
        usage: "COUNTER"
        description: "calls"
    - total_time_seconds:
        usage: "COUNTER"
        description: "time executing"
    - rows:
        usage: "COUNTER"
        description: "rows"
    - shared_blks_read:
        usage: "COUNTER"
        description: "blocks read"
    - shared_blks_hit:
        usage: "COUNTER"
        description: "blocks hit"
"""


def pg_bin():
    base = "/usr/lib/postgresql"
    for v in sorted(os.listdir(base), reverse=True) if os.path.isdir(base) else []:
        b = os.path.join(base, v, "bin")
        if os.path.exists(os.path.join(b, "pgbench")):
            return b
    return None


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def cpu_s(pid):
    """utime + stime of a process, in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def hwm_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024 / 1e6
    return None


class Scraper(threading.Thread):
    """GET /metrics every second; counts the scrapes, their bytes and failures."""

    def __init__(self, port):
        super().__init__(daemon=True)
        self.url = f"http://127.0.0.1:{port}/metrics"
        self.n = self.bytes = self.failed = 0
        self.last = b""
        self.stop = threading.Event()

    def run(self):
        nxt = time.monotonic()
        while not self.stop.is_set():
            try:
                with urllib.request.urlopen(self.url, timeout=5) as r:
                    self.last = r.read()
                self.n += 1
                self.bytes += len(self.last)
            except OSError:
                self.failed += 1
            nxt += 1.0
            self.stop.wait(max(0.0, nxt - time.monotonic()))


def wait_for(port, secs=30):
    t = time.time()
    while time.time() - t < secs:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2).read()
            return True
        except OSError:
            time.sleep(0.3)
    return False


def series(body):
    return sum(1 for line in body.decode(errors="replace").splitlines() if line and not line.startswith("#"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=int, default=300)
    ap.add_argument("--out")
    a = ap.parse_args()
    if not os.path.exists(PLUMB):
        sys.exit("build first: cargo build --release -j2")
    bin_dir = pg_bin()
    if not bin_dir:
        sys.exit("no PostgreSQL server binaries (apt-get install postgresql)")
    have_exporter = os.path.exists(EXPORTER)
    tmp = tempfile.mkdtemp(prefix="plumb-fleet-bench-")
    os.chmod(tmp, 0o755)
    pg = os.path.join(tmp, "pg")
    keep = os.path.join(tmp, "rec")
    os.mkdir(keep)
    cmds, rows, procs = [], [], []
    started = False
    try:
        e = json.loads(subprocess.run([PLUMB, "engine", "start", "--dir", pg, "--json", "--set", "shared_preload_libraries=pg_stat_statements"], check=True, capture_output=True, text=True).stdout)
        started = True
        pm, port, url = e["instance"]["pid"], e["instance"]["port"], e["url"]
        conn = ["-h", f"{pg}/sock", "-p", str(port), "-U", "plumb", "postgres"]
        subprocess.run([f"{bin_dir}/psql", "-qc", "CREATE EXTENSION pg_stat_statements"] + conn, check=True, capture_output=True)
        subprocess.run([f"{bin_dir}/pgbench", "-i", "-q", "-s", "5"] + conn, check=True, capture_output=True)
        load = subprocess.Popen([f"{bin_dir}/pgbench", "-n", "-c", "4", "-R", "200", "-T", str(a.seconds + 120)] + conn, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        procs.append(load)
        cmds.append(f"pgbench -n -c 4 -R 200 -T {a.seconds + 120}")

        pport = free_port()
        pc = [PLUMB, "record", "--interval", "1s", "--pid", str(pm), "--engine", url, "--statements", "10", "--serve", str(pport), "--out-dir", keep]
        cmds.append(" ".join(pc))
        plumb = subprocess.Popen(pc, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        procs.append(plumb)
        agents = [("plumb record", plumb, pport)]
        if have_exporter:
            qf = os.path.join(tmp, "queries.yaml")
            with open(qf, "w") as f:
                f.write(QUERIES)
            eport = free_port()
            env = dict(os.environ, DATA_SOURCE_NAME=f"host={pg}/sock port={port} user=plumb dbname=postgres sslmode=disable")
            ec = [EXPORTER, f"--web.listen-address=127.0.0.1:{eport}", f"--extend.query-path={qf}"]
            cmds.append("DATA_SOURCE_NAME='host=… port=… user=plumb dbname=postgres' " + " ".join(ec))
            exp = subprocess.Popen(ec, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            procs.append(exp)
            agents.append(("postgres_exporter " + subprocess.run([EXPORTER, "--version"], capture_output=True, text=True).stderr.split()[2], exp, eport))
        for name, p, prt in agents:
            if not wait_for(prt):
                sys.exit(f"{name} did not serve /metrics")
        scrapers = [Scraper(prt) for _, _, prt in agents]
        for s in scrapers:
            s.start()
        # Warm-up: every metric defined, every statement seen once.
        time.sleep(20)
        c0 = [cpu_s(p.pid) for _, p, _ in agents]
        size0 = sum(os.path.getsize(os.path.join(keep, f)) for f in os.listdir(keep))
        t0 = time.time()
        time.sleep(a.seconds)
        wall = time.time() - t0
        c1 = [cpu_s(p.pid) for _, p, _ in agents]
        size1 = sum(os.path.getsize(os.path.join(keep, f)) for f in os.listdir(keep))
        for s in scrapers:
            s.stop.set()
        for (name, p, _), s, a0, a1 in zip(agents, scrapers, c0, c1):
            rows.append((
                name,
                f"{(a1 - a0) / wall * 100:.3f}%",
                f"{hwm_mb(p.pid):.1f} MB",
                f"{s.bytes / max(s.n, 1) / 1000:.1f} kB, {series(s.last)} series",
                f"{s.n} ({s.failed} failed)",
            ))
        per_day = (size1 - size0) / wall * 86400 / 1e6
        stmt_series = sum(1 for line in scrapers[0].last.decode().splitlines() if line.startswith("plumb_stmt_"))
    finally:
        for p in reversed(procs):
            p.terminate()
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()
        if started:
            subprocess.run([PLUMB, "engine", "stop", "--dir", pg, "--remove"], capture_output=True)
        shutil.rmtree(tmp, ignore_errors=True)

    today = datetime.date.today().isoformat()
    out = a.out or os.path.join(ROOT, "bench", "results", f"fleet-agent-{today}.md")
    lines = [
        f"# The fleet agent's cost, {today}",
        "",
        f"Machine: {platform.node()}, {os.cpu_count()} CPUs, {platform.platform()}; plumb {subprocess.run([PLUMB, '--version'], capture_output=True, text=True).stdout.strip()} (release build).",
        f"Command: `python3 bench/fleet_agent.py --seconds {a.seconds}`; measured over {wall:.0f} s after a 20 s warm-up, each agent scraped every second.",
        "",
        "Commands run:",
        "",
        *[f"    {c}" for c in cmds],
        "",
        "| agent | CPU per wall time (% of one core) | peak resident memory | a scrape | scrapes |",
        "|---|---|---|---|---|",
        *[f"| {' | '.join(r)} |" for r in rows],
        "",
        f"plumb's recording (host, the server's tree, the engine, {stmt_series} statement series on /metrics) grew {per_day:.1f} MB a day at 1 s.",
        "postgres_exporter reads the server's statistics and pg_stat_statements only (no host, no processes, nothing kept on disk).",
    ]
    if not have_exporter:
        lines.append("postgres_exporter is not installed here (apt-get install prometheus-postgres-exporter): plumb's figures alone.")
    text = "\n".join(lines) + "\n"
    with open(out, "w") as f:
        f.write(text)
    print(text)
    print(f"written: {out}")


if __name__ == "__main__":
    main()
