#!/usr/bin/env python3
"""What tracing a database server costs it: pgbench's throughput untraced, under `plumb trace`,
under `perf trace -s` and under `strace -c -f`, in one run, on one private PostgreSQL; and under
empty programs on the four tracepoints plumb trace uses (the floor: what the kernel's tracepoint
machinery costs before anything is counted; crates/sys/examples/tracepoint_floor.rs).

For each tracer and each workload (select-only, `-S`: syscall-bound, the worst case for a
tracer; and the default TPC-B-like one: commit-bound), pgbench runs for --seconds with progress
every second; after two seconds the tracer attaches to the postmaster and every backend (the
connections are open by then), and only the seconds the tracer covered are averaged. Tracers
take turns in interleaved rounds (--rounds, default 3) so that a drift of the machine touches
them all; the median of the rounds is printed with the ratio to untraced, and written with the
machine and the command lines to --out (default bench/results/trace-overhead-DATE.md). Needs root.

Then, once per workload, where plumb's cost goes: a run of `plumb trace` with the kernel's BPF
statistics on (kernel.bpf_stats_enabled, which adds a little cost of its own, so this run is not
among the rounds) gives the CPU time its eBPF programs took, per program, and /proc gives plumb's
own CPU time (reading the block trace, its start-up); what the tps loss holds beyond both is the
kernel's tracepoint machinery (syscalls take the slow path while any syscall tracepoint is on).
A benchmark, not a test: it asserts nothing.
"""

import argparse
import datetime
import json
import math
import os
import platform
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PLUMB = os.path.join(ROOT, "target", "release", "plumb")


def pg_bin():
    for v in sorted(os.listdir("/usr/lib/postgresql"), reverse=True):
        b = f"/usr/lib/postgresql/{v}/bin"
        if os.path.exists(f"{b}/pgbench"):
            return b
    sys.exit("no pgbench (apt-get install postgresql)")


def descendants(pid):
    kids = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
                kids.setdefault(ppid, []).append(int(d))
            except (OSError, ValueError, IndexError):
                pass
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        for c in kids.get(p, []):
            out.append(c)
            todo.append(c)
    return out


# Programs that return at once on the four raw tracepoints plumb trace uses: what the kernel's
# tracepoint machinery costs before plumb counts anything.
FLOOR = "empty programs"
FLOOR_BIN = os.path.join(ROOT, "target", "release", "examples", "tracepoint_floor")
EVERY = "plumb trace --time-every-call"
# Without the block trace (a tracefs instance on three block events, read by plumb's process):
# what that part costs, beside the eBPF programs.
NO_BLOCK = "plumb trace --no-block"
KINDS = ["untraced", FLOOR, "plumb trace", EVERY, NO_BLOCK, "perf trace -s", "strace -c -f"]
# Another build of plumb in the same rounds (--compare-build): what a change to plumb trace did.
OTHER = "plumb trace ("


def tracer_cmd(kind, postmaster):
    pids = [postmaster] + descendants(postmaster)
    if kind == "plumb trace":
        return [PLUMB, "trace", "--pid", str(postmaster)]
    if kind == EVERY:
        return [PLUMB, "trace", "--time-every-call", "--pid", str(postmaster)]
    if kind == NO_BLOCK:
        return [PLUMB, "trace", "--no-block", "--pid", str(postmaster)]
    if kind.startswith(OTHER):
        return [kind[len(OTHER):].rstrip(")"), "trace", "--pid", str(postmaster)]
    if kind == FLOOR:
        return [FLOOR_BIN]
    if kind == "perf trace -s":
        return ["perf", "trace", "-s", "-o", "/dev/null", "-p", ",".join(map(str, pids))]
    if kind == "strace -c -f":
        cmd = ["strace", "-c", "-f", "-o", "/dev/null"]
        for p in pids:
            cmd += ["-p", str(p)]
        return cmd
    return None


def prog_name(pid, fd):
    """An eBPF program's name, from another process's descriptor (pidfd_getfd, then
    BPF_OBJ_GET_INFO_BY_FD: struct bpf_prog_info has the name at offset 64)."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    try:
        pidfd = os.pidfd_open(pid)
    except OSError:
        return None
    try:
        mine = libc.syscall(438, pidfd, fd, 0)  # pidfd_getfd
        if mine < 0:
            return None
        try:
            info = ctypes.create_string_buffer(256)
            attr = ctypes.create_string_buffer(16)
            ctypes.memmove(attr, ctypes.byref(ctypes.c_uint32(mine)), 4)
            ctypes.memmove(ctypes.byref(attr, 4), ctypes.byref(ctypes.c_uint32(256)), 4)
            ctypes.memmove(ctypes.byref(attr, 8), ctypes.byref(ctypes.c_uint64(ctypes.addressof(info))), 8)
            if libc.syscall(321, 15, attr, 16) != 0:  # bpf(BPF_OBJ_GET_INFO_BY_FD)
                return None
            return info.raw[64:80].split(b"\0")[0].decode() or None
        finally:
            os.close(mine)
    finally:
        os.close(pidfd)


def prog_stats(pid):
    """(name, runs, ns) of the eBPF programs process `pid` holds, from /proc/PID/fdinfo."""
    out = []
    for fd in os.listdir(f"/proc/{pid}/fdinfo"):
        try:
            with open(f"/proc/{pid}/fdinfo/{fd}") as f:
                kv = dict(l.split(":\t", 1) for l in f.read().splitlines() if ":\t" in l)
        except OSError:
            continue
        if "prog_tag" in kv:
            name = prog_name(pid, int(fd)) or f"prog {kv['prog_id'].strip()}"
            out.append((name,
                        int(kv.get("run_cnt", "0")), int(kv.get("run_time_ns", "0"))))
    return out


def cpu_s(pid):
    with open(f"/proc/{pid}/stat") as f:
        st = f.read().rsplit(")", 1)[1].split()
    return (int(st[11]) + int(st[12])) / os.sysconf("SC_CLK_TCK")


def median_ci(xs, conf=0.95):
    """A distribution-free interval for the median: order statistics k and n-k+1, the widest
    pair whose coverage (binomial, p = 1/2) is at least `conf`; None when n is too small."""
    xs = sorted(x for x in xs if x == x)
    n = len(xs)
    best = None
    for k in range(1, n // 2 + 1):
        cover = 1 - 2 * sum(math.comb(n, i) for i in range(k)) / 2 ** n
        if cover >= conf:
            best = (xs[k - 1], xs[n - k])
    return best


def cost_run(workload, conn, pgbench, postmaster, seconds, cmd=None):
    """One traced run with BPF statistics on: (tps, seconds traced, programs, plumb's CPU
    seconds to start and after). `cmd`: another tracer (the empty programs) instead of plumb
    trace; it says it is attached on stdout."""
    with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
        f.write("1")
    try:
        args = [pgbench, "-n", "-c", "2", "-j", "2", "-T", str(seconds)] + workload + conn
        bench = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(2)
        if cmd:
            tracer = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
            tracer.stdout.readline()
        else:
            tracer = subprocess.Popen([PLUMB, "trace", "--pid", str(postmaster)],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            tracer.stderr.readline()
        t0 = time.monotonic()
        started_cpu = cpu_s(tracer.pid)
        out, _ = bench.communicate()
        traced = time.monotonic() - t0
        progs = prog_stats(tracer.pid)
        plumb_cpu = (started_cpu, cpu_s(tracer.pid) - started_cpu)
        tracer.send_signal(signal.SIGINT)
        tracer.wait(timeout=60)
    finally:
        with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
            f.write("0")
    m = re.search(r"tps = ([\d.]+)", out)
    return (float(m.group(1)) if m else float("nan")), traced, progs, plumb_cpu


def stop(tracer):
    """Ask a tracer to end (SIGINT: it prints what it gathered), and kill it if it hangs."""
    if not tracer:
        return
    tracer.send_signal(signal.SIGINT)
    try:
        tracer.wait(timeout=60)
    except subprocess.TimeoutExpired:
        tracer.kill()
        tracer.wait()


def run_one(kind, workload, conn, pgbench, postmaster, seconds):
    args = [pgbench, "-n", "-c", "2", "-j", "2", "-T", str(seconds), "-P", "1"] + workload + conn
    bench = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(2)
    tracer = None
    cmd = tracer_cmd(kind, postmaster)
    if cmd:
        tracer = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    out, err = bench.communicate()
    stop(tracer)
    # progress: 5.0 s, 1234.5 tps, lat 1.6 ms stddev 0.3, 0 failed
    tps = []
    for line in err.splitlines():
        m = re.match(r"progress: ([\d.]+) s, ([\d.]+) tps", line)
        if m and 4.0 <= float(m.group(1)) <= seconds - 1:
            tps.append(float(m.group(2)))
    if not tps:
        sys.exit(f"no progress lines from pgbench:\n{err}")
    return statistics.mean(tps), cmd


def segments_run(kinds, workload, conn, pgbench, postmaster, cycles, seg, settle):
    """One pgbench run for the whole workload, the tracers taking turns in segments of `seg`
    seconds (the order rotated each cycle); a segment's first `settle` seconds (a tracer
    starting) are not measured. Returns {kind: [tps per cycle]} and the commands: neighbours
    in time, so the host's drift over minutes, which swamps a few percent between runs minutes
    apart, cancels out of each cycle's ratios."""
    # Slack: stopping a tracer (it prints its report) delays the next segment a little.
    total = cycles * len(kinds) * (seg + 1) + 6
    args = [pgbench, "-n", "-c", "2", "-j", "2", "-T", str(total), "-P", "1"] + workload + conn
    t0 = time.monotonic()
    bench = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(2)
    plan, cmds = [], {}
    for c in range(cycles):
        r = c % len(kinds)
        for k in kinds[r:] + kinds[:r]:
            start = time.monotonic() - t0
            cmd = tracer_cmd(k, postmaster)
            tracer = None
            if cmd:
                cmds[k] = cmd
                tracer = subprocess.Popen(cmd, stdout=subprocess.DEVNULL,
                                          stderr=subprocess.DEVNULL)
            time.sleep(max(0.0, start + seg - (time.monotonic() - t0)))
            end = time.monotonic() - t0
            stop(tracer)
            plan.append((c, k, start, end))
    _, err = bench.communicate()
    seconds = []
    for line in err.splitlines():
        m = re.match(r"progress: ([\d.]+) s, ([\d.]+) tps", line)
        if m:
            seconds.append((float(m.group(1)), float(m.group(2))))
    out = {k: [float("nan")] * cycles for k in kinds}
    for c, k, start, end in plan:
        v = [tps for t, tps in seconds if t - 1 >= start + settle and t <= end]
        if v:
            out[k][c] = statistics.mean(v)
    return out, cmds


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=14)
    ap.add_argument("--out")
    ap.add_argument("--tracers", default=",".join(KINDS),
                    help="which of them, comma-separated (untraced is always run); default: all")
    ap.add_argument("--segments", type=int, metavar="CYCLES",
                    help="instead of a pgbench run per tracer and round: one pgbench run per "
                         "workload, the tracers taking turns in 7-second segments, CYCLES times "
                         "(each cycle is a round)")
    ap.add_argument("--workloads", default="select-only,tpcb",
                    help="which pgbench workloads, comma-separated: select-only (-S), tpcb "
                         "(the TPC-B-like default); default: both")
    ap.add_argument("--compare-build", metavar="PLUMB",
                    help="another plumb binary traced in the same rounds (an earlier build, to "
                         "see what a change did)")
    a = ap.parse_args()
    short = {"select-only": ("select-only (-S)", ["-S"]), "tpcb": ("TPC-B-like", [])}
    wanted = [w.strip() for w in a.workloads.split(",")]
    if any(w not in short for w in wanted):
        sys.exit(f"--workloads: {a.workloads!r}; choose from {', '.join(short)}")
    workloads = dict(short[w] for w in short if w in wanted)
    if os.geteuid() != 0:
        sys.exit("needs root (eBPF, perf, strace -p and the private PostgreSQL)")
    subprocess.run(["cargo", "build", "--release", "-j2", "-q"], cwd=ROOT, check=True)
    subprocess.run(["cargo", "build", "--release", "-j2", "-q", "-p", "plumb-sys", "--example",
                    "tracepoint_floor"], cwd=ROOT, check=True)
    bin_dir = pg_bin()
    pgbench = f"{bin_dir}/pgbench"
    tmp = tempfile.mkdtemp(prefix="plumb-trace-bench", dir="/tmp")
    os.chmod(tmp, 0o755)  # the server runs as postgres and must reach its directory
    d = os.path.join(tmp, "pg")
    e = json.loads(
        subprocess.run(
            [PLUMB, "engine", "start", "--dir", d, "--set", "wal_sync_method=fdatasync", "--json"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    )
    postmaster, port = e["instance"]["pid"], e["instance"]["port"]
    conn = ["-h", f"{d}/sock", "-p", str(port), "-U", "plumb", "postgres"]
    results = {}
    cmds = {}
    try:
        subprocess.run([pgbench, "-i", "-q", "-s", "10"] + conn, check=True, capture_output=True)
        chosen = [k.strip() for k in a.tracers.split(",")]
        unknown = [k for k in chosen if k not in KINDS]
        if unknown:
            sys.exit(f"--tracers: unknown {unknown}; choose from {KINDS}")
        kinds = [k for k in KINDS if k == "untraced" or k in chosen]
        if a.compare_build:
            if not os.access(a.compare_build, os.X_OK):
                sys.exit(f"--compare-build: {a.compare_build} is not an executable file")
            kinds.append(f"{OTHER}{a.compare_build})")
        if a.segments:
            a.rounds = 0
            for wname, w in workloads.items():
                got, used = segments_run(kinds, w, conn, pgbench, postmaster, a.segments, 7, 2)
                for k, v in got.items():
                    results[(wname, k)] = v
                    print(f"{wname:17} {k:30} " + " ".join(f"{x:.0f}" for x in v), flush=True)
                for k, cmd in used.items():
                    cmds[k] = " ".join(cmd[:6]) + (" …" if len(cmd) > 6 else "")
        for r in range(a.rounds):
            for wname, w in workloads.items():
                for k in kinds:
                    tps, cmd = run_one(k, w, conn, pgbench, postmaster, a.seconds)
                    results.setdefault((wname, k), []).append(tps)
                    if cmd:
                        cmds[k] = " ".join(cmd[:6]) + (" …" if len(cmd) > 6 else "")
                    print(f"round {r + 1}: {wname:17} {k:14} {tps:10.1f} tps", flush=True)
        costs, floor_costs = {}, {}
        for wname, w in workloads.items():
            costs[wname] = cost_run(w, conn, pgbench, postmaster, a.seconds)
            print(f"cost: {wname}: {costs[wname]}", flush=True)
            floor_costs[wname] = cost_run(w, conn, pgbench, postmaster, a.seconds, [FLOOR_BIN])
            print(f"floor cost: {wname}: {floor_costs[wname]}", flush=True)
    finally:
        subprocess.run([PLUMB, "engine", "stop", "--dir", d, "--remove"], capture_output=True)
        shutil.rmtree(tmp, ignore_errors=True)
    lines = []
    lines.append(f"# plumb trace overhead, {datetime.date.today()}\n")
    lines.append(
        f"Machine: {platform.node()}, {os.cpu_count()} CPUs, Linux {platform.release()}; "
        + (
            f"pgbench -c 2 -j 2 -T {a.seconds} -P 1 against plumb's private PostgreSQL "
            f"(scale 10, wal_sync_method=fdatasync); traced seconds 4..{a.seconds - 1} averaged; "
            f"median of {a.rounds} interleaved rounds.\n"
            if not a.segments
            else f"one pgbench -c 2 -j 2 -P 1 run per workload against plumb's private "
            f"PostgreSQL (scale 10, wal_sync_method=fdatasync), the tracers taking turns in "
            f"7-second segments (the first 2 seconds of each, a tracer starting, not measured), "
            f"{a.segments} cycles, the order rotated each cycle; a cycle is a round below.\n"
        )
    )
    lines.append("Command: `python3 bench/trace_overhead.py " + " ".join(sys.argv[1:]) + "`\n")
    for k, c in cmds.items():
        lines.append(f"- {k}: `{c}`")
    lines.append("")
    lines.append(
        "| workload | tracer | tps (median) | rounds | ratio to untraced | ratio per round (min..max) |")
    lines.append("|---|---|---:|---|---:|---|")
    for wname in workloads:
        base = statistics.median([x for x in results[(wname, "untraced")] if x == x])
        for k in kinds:
            v = results[(wname, k)]
            med = statistics.median([x for x in v if x == x])
            per = [x / u for x, u in zip(v, results[(wname, "untraced")]) if x == x and u == u]
            lines.append(
                f"| {wname} | {k} | {med:.0f} | {', '.join(f'{x:.0f}' for x in v)} | {med / base:.3f} "
                f"| {min(per):.3f}..{max(per):.3f} |"
            )
    if FLOOR in kinds and "plumb trace" in kinds:
        lines.append("")
        lines.append("plumb trace against the floor, paired within each round (the target: "
                     "no more than 3% below it):")
        lines.append("")
        lines.append("| workload | tracer | tracer / empty programs (median) | 95% interval of "
                     "the median | per round |")
        lines.append("|---|---|---:|---|---|")
        for wname in workloads:
            for k in [k for k in kinds if k.startswith("plumb trace")]:
                per = [p / f for p, f in zip(results[(wname, k)], results[(wname, FLOOR)])
                       if p == p and f == f]
                ci = median_ci(per)
                ci = f"{ci[0]:.3f}..{ci[1]:.3f}" if ci else "too few rounds"
                lines.append(f"| {wname} | {k} | {statistics.median(per):.3f} | {ci} "
                             f"| {', '.join(f'{x:.3f}' for x in per)} |")
    cpus = os.cpu_count()
    lines.append("")
    lines.append("Where plumb's cost goes (one run per workload with kernel.bpf_stats_enabled=1, "
                 "which itself adds a little; share of the machine's CPU time):")
    lines.append("")
    lines.append("| workload | program | runs/s | ns per run | CPU ms/s | share of the machine |")
    lines.append("|---|---|---:|---:|---:|---:|")
    for wname, (tps, traced, progs, plumb_cpu) in costs.items():
        total = 0.0
        for name, runs, ns in sorted(progs, key=lambda p: -p[2]):
            if runs == 0:
                continue
            ms = ns / traced / 1e6
            total += ms
            lines.append(f"| {wname} | {name} | {runs / traced:.0f} | {ns / runs:.0f} | {ms:.1f} "
                         f"| {ms / 10 / cpus:.2f}% |")
        lines.append(f"| {wname} | all programs | | | {total:.1f} | {total / 10 / cpus:.2f}% |")
        own = plumb_cpu[1] * 1000 / traced
        lines.append(f"| {wname} | plumb's own process (reading the block trace) | | | {own:.1f} "
                     f"| {own / 10 / cpus:.2f}% |")
        lines.append(f"| {wname} | plumb's start-up (maps allocated, programs loaded; once) | | "
                     f"| {plumb_cpu[0] * 1000:.0f} ms | |")
    lines.append("")
    lines.append("Per transaction, from the same accounting and a run under the empty programs "
                 "just after (the machine's state shifts both alike): what plumb's programs "
                 "take beyond the empty ones, against all the CPU time a transaction has on "
                 "this machine (CPUs / tps). For a CPU-bound run this is the throughput plumb "
                 "costs beyond the floor, without pgbench's second-to-second noise:")
    lines.append("")
    lines.append("| workload | programs' CPU per transaction: empty | plumb trace (+ its own "
                 "process) | machine's CPU per transaction | plumb beyond the floor |")
    lines.append("|---|---:|---:|---:|---:|")
    for wname, (tps, traced, progs, plumb_cpu) in costs.items():
        ftps, ftraced, fprogs, _ = floor_costs[wname]
        mine = (sum(ns for _, _, ns in progs) / traced + plumb_cpu[1] * 1e9 / traced) / tps
        floor = sum(ns for _, _, ns in fprogs) / ftraced / ftps
        machine = cpus * 1e9 / tps
        lines.append(f"| {wname} | {floor / 1e3:.2f} µs | {mine / 1e3:.2f} µs "
                     f"| {machine / 1e3:.1f} µs | {(mine - floor) / machine:.1%} |")
    text = "\n".join(lines) + "\n"
    print()
    print(text)
    out = a.out or os.path.join(HERE, "results", f"trace-overhead-{datetime.date.today()}.md")
    with open(out, "w") as f:
        f.write(text)
    print(f"written to {out}")


if __name__ == "__main__":
    main()
