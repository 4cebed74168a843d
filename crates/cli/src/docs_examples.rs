//! The examples each command's man page shows: data, kept apart from the page writer.

/// Examples for each command's help and man page, by the command's path ("" for plumb).
#[rustfmt::skip]
pub(crate) const EXAMPLES: &[(&[&str], &[(&str, &str)])] = &[
    (&[""], &[
        ("The whole lab on a private PostgreSQL, with an HTML report", "sudo plumb lab --quick"),
        ("This host as a database sees it", "plumb os --path /var/lib/postgresql"),
    ]),
    (&["lab"], &[
        ("The whole lab on plumb's private PostgreSQL", "sudo plumb lab --out lab-report"),
        ("Against an existing server, read-only", "plumb lab --engine postgres://monitor@db1/postgres --dir /var/lib/postgresql"),
    ]),
    (&["os"], &[("The host and the storage under the data directory", "plumb os --path /var/lib/postgresql")]),
    (&["io", "io run"], &[
        ("The WAL-shaped preset on a file plumb creates and removes", "plumb io run --preset log-write /data/plumb-test.dat"),
        ("Random 8K reads, 16 deep, for 30 s", "plumb io run --bs 8K --qd 16 --pattern random --duration 30s /data/t.dat"),
    ]),
    (&["io diskspd"], &[("A diskspd command line, as written", "plumb io diskspd -- -d15 -o32 -t2 -b64K -h -r -L -w0 /data/t.dat")]),
    (&["io durability"], &[("What a durable write costs in each mode, under the data", "sudo plumb io durability /var/lib/postgresql")]),
    (&["io sweep"], &[("Queue depths 1 to 64, three runs each, with the knee", "plumb io sweep --preset data-read --qd-levels 1,2,4,8,16,32,64 --reps 3 /data/t.dat")]),
    (&["io presets"], &[("The database-shaped presets", "plumb io presets")]),
    (&["mem"], &[
        ("Each database process's memory, swap included", "sudo plumb mem"),
        ("Beside what the server believes it caches", "sudo plumb mem --engine postgres://monitor@localhost/postgres"),
    ]),
    (&["mem assume"], &[("What SQL Server will take in a 3 GiB container", "plumb mem assume --kind mssql --host-memory 7113152Ki --limit 3Gi")]),
    (&["mem pressure"], &[("Hold 700 MiB in a 400 MiB cgroup with zram swap", "sudo plumb mem pressure 700M --hold 30s --cgroup-limit 400M --swap zram:1G")]),
    (&["k8s", "k8s advise"], &[("The pod that fits a 16 GiB AKS node", "plumb k8s advise --preset aks --node-memory 16Gi --kind postgres")]),
    (&["k8s lint"], &[("Check manifests", "plumb k8s lint db.yaml")]),
    (&["k8s manifest"], &[
        ("A PostgreSQL StatefulSet with 4 GiB", "plumb k8s manifest --kind postgres --memory 4Gi --workload statefulset > pg.yaml"),
        ("plumb on every node, for Prometheus", "plumb k8s manifest --plumb > plumb-daemonset.yaml"),
    ]),
    (&["record"], &[
        ("Record while a command runs", "plumb record --out run.plumb -- pgbench -c 8 -T 60 shop"),
        ("A server's process tree and its engine, every 100 ms", "sudo plumb record --interval 100ms --engine-server --engine postgres:///postgres --out db.plumb"),
        ("Serve the live figures to Prometheus", "plumb record --serve :9494"),
        ("Left running: a file an hour, a week kept", "plumb record --out-dir /var/lib/plumb --keep-for 7d --keep-size 1G"),
    ]),
    (&["mark"], &[("Mark a phase in a recording (also while it records)", "plumb mark run.plumb \"checkpoint start\"")]),
    (&["report"], &[
        ("An HTML report of two recordings, overlaid", "plumb report before.plumb after.plumb --out report"),
        ("The heaviest statements between two points", "plumb report db.plumb --statements --from 10m --to 25m"),
    ]),
    (&["compare"], &[
        ("Three runs before a change against three after", "plumb compare before1.json before2.json before3.json -- after1.json after2.json after3.json"),
        ("In a pipeline: fail when anything got worse", "plumb compare --fail-on worse base.json -- cand.json"),
        ("From a script, the runs as options", "plumb compare --baseline before/*.json --candidate after/*.json"),
        ("Two lab reports: the figures, and what differed between the runs", "plumb compare lab-before -- lab-after"),
        ("Where did each figure move over a month of nightly results?", "plumb compare --history nightly/"),
        ("The hour before a change against the hour after, from one recording", "plumb compare db.plumb@0s-1h -- db.plumb@2h-3h"),
    ]),
    (&["plot"], &[("One metric as an SVG picture", "plumb plot run.plumb --metric disk.vda.write_bytes_per_s --out writes.svg")]),
    (&["export"], &[
        ("Every metric, one row per sample", "plumb export run.plumb > run.csv"),
        ("One row per value, for DuckDB or pandas", "plumb export run.plumb --long > run-long.csv"),
        ("For promtool's backfill", "plumb export run.plumb --format openmetrics > run.om"),
    ]),
    (&["cpu"], &[("Who waits for a CPU, every second", "plumb cpu --watch --pid 4242")]),
    (&["engine", "engine start"], &[("Start plumb's private PostgreSQL", "plumb engine start --dir /var/tmp/plumb-pg")]),
    (&["engine stop"], &[("Stop it and remove what plumb created", "plumb engine stop --dir /var/tmp/plumb-pg --remove")]),
    (&["engine status"], &[("Is it running, and where", "plumb engine status --json")]),
    (&["engine psql"], &[("A query on it", "plumb engine psql -- -c \"SELECT version()\"")]),
    (&["delta"], &[
        ("Cold and warm, three times each, on the private instance", "plumb delta --both --repeat 3 --sql \"SELECT count(*) FROM orders\""),
        ("Around a command, on your server", "plumb delta --engine postgres://app@db1/shop -- ./nightly-report.sh"),
    ]),
    (&["load"], &[
        ("Four warehouses, eight clients, on the private instance, checked after", "plumb load --warehouses 4 --clients 8 --check"),
        ("Open loop at 200 transactions a second on your server", "plumb load --engine postgres://app@db1/postgres --allow-writes --rate 200/s"),
    ]),
    (&["trace"], &[
        ("What a command asks of the kernel", "sudo plumb trace -- pgbench -c 4 -T 10 shop"),
        ("The database server's processes for 30 s", "sudo plumb trace --engine-server --duration 30s"),
    ]),
    (&["repl xe-session"], &[
        ("The session, to run on both replicas with sqlcmd", "plumb repl xe-session > ag-commit.sql"),
    ]),
    (&["repl xe-timeline"], &[
        ("From both replicas, after one INSERT on the primary", "plumb repl xe-timeline --primary 'mssql://plumb@sql1/master' --standby 'mssql://plumb@sql2/master' --password-file ~/.sqlpw"),
        ("From files of the read-back query's rows", "plumb repl xe-timeline --primary-events sql1.xml --standby-events sql2.xml"),
    ]),
    (&["repl watch"], &[
        ("A standby plumb made, live, 10 readings a second", "plumb repl watch --standby-dir /var/tmp/pg-standby"),
        ("Your primary for an hour, kept for plumb report", "plumb repl watch --primary 'postgres:///shop?host=/run/postgresql' --duration 1h --out repl.plumb"),
    ]),
    (&["repl", "repl timeline"], &[
        ("One commit through plumb's own primary and standby", "sudo plumb repl timeline --standby-dir /var/tmp/pg-standby --sql \"INSERT INTO t VALUES (1)\""),
        ("Twenty commits, with a swimlane", "sudo plumb repl timeline --primary 'postgres:///shop?host=/run/postgresql' --standby 'postgres:///shop?host=/run/postgresql&port=5433' --sql \"INSERT INTO t VALUES (1)\" --repeat 20 --svg commit.svg"),
    ]),
    (&["fs"], &[
        ("A server's views and your queries as files, in the background", "plumb fs /tmp/pgfs --engine postgres://fs_reader@db1/postgres --password-file ~/.fs_reader.pw --queries ~/sql"),
        ("Who waits on a lock, by column", "awk -F'\\t' -v OFS='\\t' '{ print $3, $15, $16 }' /tmp/pgfs/activity/pg_stat_activity | column -t -s $'\\t'"),
        ("Unmount", "plumb fs --unmount /tmp/pgfs"),
    ]),
    (&["completions"], &[("Bash completion", "plumb completions bash > /etc/bash_completion.d/plumb")]),
    (&["man"], &[("Install every page", "sudo plumb man --out /usr/local/share/man/man1")]),
];
