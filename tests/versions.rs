//! Every PostgreSQL version plumb claims, run live: the private instance started on each
//! server build (Debian's 15; 16, 17 and 18 from `scripts/setup --test`), and each version's
//! snapshot holding the views that version has (pg_stat_io from 16, pg_stat_checkpointer from
//! 17) and saying which version adds them where they are absent.

mod common;
use common::{engine_psql, is_root, plumb, skip};

#[test]
fn the_private_instance_and_its_snapshot_on_every_version() {
    if !is_root() {
        return skip(
            "skipped: the private instance is tested as root (the server runs as postgres)",
        );
    }
    if let Some(why) = common::no_postgres() {
        return skip(why);
    }
    let versions = common::pg_versions();
    let tmp = common::server_tempdir("plumb-versions-");
    for (major, bin) in versions {
        eprintln!("PostgreSQL {major}: {}", bin.display());
        let d = tmp.path().join(format!("pg{major}"));
        let o = plumb()
            .env("PLUMB_PG_BIN", &bin)
            .args(["engine", "start", "--json", "--dir"])
            .arg(&d)
            .output()
            .unwrap();
        let stop = || {
            let _ = plumb()
                .env("PLUMB_PG_BIN", &bin)
                .args(["engine", "stop", "--remove", "--dir"])
                .arg(&d)
                .output();
        };
        if o.status.code() != Some(0) {
            stop();
            panic!("PostgreSQL {major}: {}", String::from_utf8_lossy(&o.stderr));
        }
        let check = || {
            let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
            let url = v["url"].as_str().unwrap().to_string();
            let num: u32 = engine_psql(&d, "SHOW server_version_num").parse().unwrap();
            assert_eq!(
                num / 10000,
                major,
                "the server that runs is the one asked for"
            );
            let mut obs = plumb_engine::observer(&plumb_engine::Target::new(&url)).unwrap();
            let s = obs.snapshot().unwrap();
            assert!(s.version.starts_with(&format!("{major}.")), "{}", s.version);
            let io = s.objects.get("io");
            let says_16 = s
                .unavailable
                .iter()
                .any(|u| u.contains("pg_stat_io: arrives in PostgreSQL 16"));
            if major >= 16 {
                let io = io.unwrap_or_else(|| panic!("PostgreSQL {major}: no pg_stat_io rows"));
                assert!(
                    io.keys().any(|k| k.starts_with("client backend/relation/")),
                    "PostgreSQL {major}: {:?}",
                    io.keys().collect::<Vec<_>>()
                );
                assert!(!says_16);
            } else {
                assert!(io.is_none() && says_16, "{:?}", s.unavailable);
            }
            assert!(s.counters.contains_key("checkpointer.checkpoints_timed"));
            assert!(s.counters.contains_key("bgwriter.buffers_alloc"));
            assert!(s.counters.contains_key("db.xact_commit"));
            assert!(s.counters.contains_key("db.blks_read"));
        };
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(check));
        stop();
        if let Err(e) = r {
            std::panic::resume_unwind(e);
        }
    }
}
