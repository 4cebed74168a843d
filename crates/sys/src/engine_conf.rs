//! What an engine is configured to use for memory, read from its command line, environment
//! and configuration files (no connection needed): PostgreSQL's postgresql.conf and
//! postgresql.auto.conf, SQL Server's MSSQL_MEMORY_LIMIT_MB and mssql.conf, MariaDB's my.cnf.

use crate::smaps::EngineKind;
use crate::Root;
use serde::Serialize;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct EngineSettings {
    /// Files and other sources that were read, in order (later ones win).
    pub sources: Vec<String>,
    /// Sources that could not be read, and why.
    pub unreadable: Vec<String>,
    pub shared_buffers_bytes: Option<u64>,
    pub work_mem_bytes: Option<u64>,
    pub maintenance_work_mem_bytes: Option<u64>,
    pub effective_cache_size_bytes: Option<u64>,
    pub max_connections: Option<u64>,
    /// SQL Server: MSSQL_MEMORY_LIMIT_MB or memory.memorylimitmb.
    pub memory_limit_mb: Option<u64>,
    pub innodb_buffer_pool_size_bytes: Option<u64>,
}

/// A PostgreSQL memory setting: `128MB`, `4GB`, `'1GB'`, or a bare number in the setting's unit
/// (8 kB pages for shared_buffers and effective_cache_size, kB for the work_mem family).
pub fn pg_memory(value: &str, bare_unit_bytes: u64) -> Option<u64> {
    let v = value.trim().trim_matches('\'').trim();
    let end = v.find(|c: char| !c.is_ascii_digit()).unwrap_or(v.len());
    let (num, unit) = v.split_at(end);
    let n: u64 = num.parse().ok()?;
    let mult = match unit.trim() {
        "" => bare_unit_bytes,
        "B" => 1,
        "kB" => 1 << 10,
        "MB" => 1 << 20,
        "GB" => 1 << 30,
        "TB" => 1 << 40,
        _ => return None,
    };
    n.checked_mul(mult)
}

/// Parse `name = value # comment` lines of postgresql.conf into (name, value, line).
pub(crate) fn parse_pg_conf(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for line in text.lines() {
        let mut l = line.trim();
        if l.is_empty() || l.starts_with('#') {
            continue;
        }
        // Strip a trailing comment outside quotes.
        let mut in_q = false;
        let mut cut = l.len();
        for (i, c) in l.char_indices() {
            match c {
                '\'' => in_q = !in_q,
                '#' if !in_q => {
                    cut = i;
                    break;
                }
                _ => {}
            }
        }
        l = l[..cut].trim();
        let (k, v) = match l.split_once('=') {
            Some((k, v)) => (k.trim(), v.trim()),
            None => match l.split_once(char::is_whitespace) {
                Some((k, v)) => (k.trim(), v.trim()),
                None => continue,
            },
        };
        out.push((k.to_ascii_lowercase(), v.trim_matches('\'').to_string()));
    }
    out
}

fn apply_pg(s: &mut EngineSettings, name: &str, value: &str) {
    match name {
        "shared_buffers" => {
            s.shared_buffers_bytes = pg_memory(value, 8192).or(s.shared_buffers_bytes)
        }
        "effective_cache_size" => {
            s.effective_cache_size_bytes = pg_memory(value, 8192).or(s.effective_cache_size_bytes)
        }
        "work_mem" => s.work_mem_bytes = pg_memory(value, 1024).or(s.work_mem_bytes),
        "maintenance_work_mem" => {
            s.maintenance_work_mem_bytes = pg_memory(value, 1024).or(s.maintenance_work_mem_bytes)
        }
        "max_connections" => s.max_connections = value.trim().parse().ok().or(s.max_connections),
        _ => {}
    }
}

fn read_pg_file(
    root: &Root,
    s: &mut EngineSettings,
    path: &Path,
    depth: u32,
) -> Vec<(String, String)> {
    match root.read(path) {
        Ok(t) => {
            s.sources.push(path.display().to_string());
            let kv = parse_pg_conf(&t);
            let dir = path.parent().unwrap_or(Path::new("/")).to_path_buf();
            let mut out = Vec::new();
            for (k, v) in kv {
                match k.as_str() {
                    "include" | "include_if_exists" if depth < 4 => {
                        let p = if Path::new(&v).is_absolute() {
                            PathBuf::from(&v)
                        } else {
                            dir.join(&v)
                        };
                        out.extend(read_pg_file(root, s, &p, depth + 1));
                    }
                    "include_dir" if depth < 4 => {
                        let d = if Path::new(&v).is_absolute() {
                            PathBuf::from(&v)
                        } else {
                            dir.join(&v)
                        };
                        let mut files: Vec<PathBuf> = std::fs::read_dir(root.path(&d))
                            .map(|rd| {
                                rd.flatten()
                                    .map(|e| d.join(e.file_name()))
                                    .filter(|p| p.extension().is_some_and(|x| x == "conf"))
                                    .collect()
                            })
                            .unwrap_or_default();
                        files.sort();
                        for f in files {
                            out.extend(read_pg_file(root, s, &f, depth + 1));
                        }
                    }
                    _ => out.push((k, v)),
                }
            }
            out
        }
        Err(e) => {
            if !e.is_not_found() || depth == 0 {
                s.unreadable.push(e.to_string());
            }
            Vec::new()
        }
    }
}

fn cmdline(root: &Root, pid: u32) -> Vec<String> {
    root.read(format!("/proc/{pid}/cmdline"))
        .map(|t| {
            t.split('\0')
                .filter(|x| !x.is_empty())
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// PostgreSQL: the postmaster's `-D` and `-c` options, then its config files.
pub fn postgres(root: &Root, pid: u32) -> EngineSettings {
    let mut s = EngineSettings::default();
    let args = cmdline(root, pid);
    let mut data_dir = None;
    let mut config_file = None;
    let mut cli: Vec<(String, String)> = Vec::new();
    let mut it = args.iter().skip(1).peekable();
    while let Some(a) = it.next() {
        let mut set = |kv: &str| {
            if let Some((k, v)) = kv.split_once('=') {
                let k = k.trim().replace('-', "_").to_ascii_lowercase();
                if k == "config_file" {
                    config_file = Some(PathBuf::from(v));
                } else if k == "data_directory" {
                    data_dir = Some(PathBuf::from(v));
                } else {
                    cli.push((k, v.to_string()));
                }
            }
        };
        match a.as_str() {
            "-D" => data_dir = it.next().map(PathBuf::from),
            "-c" => {
                if let Some(kv) = it.next() {
                    set(kv)
                }
            }
            "-B" => {
                if let Some(v) = it.next() {
                    cli.push(("shared_buffers".into(), v.clone()))
                }
            }
            "-N" => {
                if let Some(v) = it.next() {
                    cli.push(("max_connections".into(), v.clone()))
                }
            }
            x if x.starts_with("--") => set(&x[2..]),
            _ => {}
        }
    }
    let conf = config_file.or_else(|| data_dir.as_ref().map(|d| d.join("postgresql.conf")));
    let mut kv = Vec::new();
    if let Some(c) = &conf {
        kv.extend(read_pg_file(root, &mut s, c, 0));
    } else {
        s.unreadable
            .push("no -D or config_file on the postmaster's command line".into());
    }
    if let Some(d) = &data_dir {
        kv.extend(read_pg_file(
            root,
            &mut s,
            &d.join("postgresql.auto.conf"),
            1,
        ));
    }
    if !cli.is_empty() {
        s.sources.push(format!("/proc/{pid}/cmdline"));
    }
    kv.extend(cli);
    // PostgreSQL's defaults where nothing set them.
    s.shared_buffers_bytes = Some(128 << 20);
    s.work_mem_bytes = Some(4 << 20);
    s.maintenance_work_mem_bytes = Some(64 << 20);
    s.effective_cache_size_bytes = Some(4 << 30);
    s.max_connections = Some(100);
    for (k, v) in kv {
        apply_pg(&mut s, &k, &v);
    }
    s
}

/// SQL Server: MSSQL_MEMORY_LIMIT_MB (environment) wins over memorylimitmb (mssql.conf).
pub fn mssql(root: &Root, pid: Option<u32>) -> EngineSettings {
    let mut s = EngineSettings::default();
    let conf = Path::new("/var/opt/mssql/mssql.conf");
    match root.read_optional(conf) {
        Ok(Some(t)) => {
            s.sources.push(conf.display().to_string());
            let mut section = String::new();
            for line in t.lines() {
                let l = line.trim();
                if let Some(sec) = l.strip_prefix('[').and_then(|x| x.strip_suffix(']')) {
                    section = sec.trim().to_ascii_lowercase();
                } else if let Some((k, v)) = l.split_once('=') {
                    if section == "memory" && k.trim().eq_ignore_ascii_case("memorylimitmb") {
                        s.memory_limit_mb = v.trim().parse().ok();
                    }
                }
            }
        }
        Ok(None) => {}
        Err(e) => s.unreadable.push(e.to_string()),
    }
    if let Some(pid) = pid {
        match root.read(format!("/proc/{pid}/environ")) {
            Ok(t) => {
                for kv in t.split('\0') {
                    if let Some(v) = kv.strip_prefix("MSSQL_MEMORY_LIMIT_MB=") {
                        s.sources
                            .push(format!("/proc/{pid}/environ MSSQL_MEMORY_LIMIT_MB"));
                        s.memory_limit_mb = v.trim().parse().ok();
                    }
                }
            }
            Err(e) => s.unreadable.push(e.to_string()),
        }
    }
    s
}

/// A MariaDB size: `8G`, `512M`, `134217728`.
pub fn my_size(v: &str) -> Option<u64> {
    let v = v.trim().trim_matches('"').trim_matches('\'');
    let (num, mult) = match v.chars().last()? {
        'K' | 'k' => (&v[..v.len() - 1], 1u64 << 10),
        'M' | 'm' => (&v[..v.len() - 1], 1 << 20),
        'G' | 'g' => (&v[..v.len() - 1], 1 << 30),
        'T' | 't' => (&v[..v.len() - 1], 1 << 40),
        _ => (v, 1),
    };
    num.trim().parse::<u64>().ok()?.checked_mul(mult)
}

/// MariaDB: innodb_buffer_pool_size from the usual my.cnf files and the server's command line.
pub fn mariadb(root: &Root, pid: Option<u32>) -> EngineSettings {
    let mut s = EngineSettings::default();
    let mut files: Vec<PathBuf> = vec![
        "/etc/my.cnf".into(),
        "/etc/mysql/my.cnf".into(),
        "/etc/mysql/mariadb.cnf".into(),
    ];
    for d in [
        "/etc/mysql/conf.d",
        "/etc/mysql/mariadb.conf.d",
        "/etc/my.cnf.d",
    ] {
        if let Ok(rd) = std::fs::read_dir(root.path(d)) {
            let mut v: Vec<PathBuf> = rd
                .flatten()
                .map(|e| Path::new(d).join(e.file_name()))
                .filter(|p| p.extension().is_some_and(|x| x == "cnf"))
                .collect();
            v.sort();
            files.extend(v);
        }
    }
    for f in files {
        let Ok(Some(t)) = root.read_optional(&f) else {
            continue;
        };
        s.sources.push(f.display().to_string());
        let mut section = String::new();
        for line in t.lines() {
            let l = line.trim();
            if let Some(sec) = l.strip_prefix('[').and_then(|x| x.strip_suffix(']')) {
                section = sec.trim().to_ascii_lowercase();
            } else if matches!(
                section.as_str(),
                "mysqld" | "mariadb" | "mariadbd" | "server"
            ) {
                if let Some((k, v)) = l.split_once('=') {
                    if k.trim().replace('-', "_") == "innodb_buffer_pool_size" {
                        s.innodb_buffer_pool_size_bytes = my_size(v);
                    }
                }
            }
        }
    }
    if let Some(pid) = pid {
        for a in cmdline(root, pid) {
            if let Some(v) = a
                .strip_prefix("--innodb-buffer-pool-size=")
                .or_else(|| a.strip_prefix("--innodb_buffer_pool_size="))
            {
                s.sources.push(format!("/proc/{pid}/cmdline"));
                s.innodb_buffer_pool_size_bytes = my_size(v);
            }
        }
    }
    if s.innodb_buffer_pool_size_bytes.is_none() {
        s.innodb_buffer_pool_size_bytes = Some(128 << 20);
    }
    s
}

pub fn read(root: &Root, kind: EngineKind, pid: Option<u32>) -> EngineSettings {
    match (kind, pid) {
        (EngineKind::Postgres, Some(p)) => postgres(root, p),
        (EngineKind::Postgres, None) => {
            let mut s = EngineSettings::default();
            s.unreadable
                .push("no running PostgreSQL to read settings from".into());
            s
        }
        (EngineKind::Mssql, p) => mssql(root, p),
        (EngineKind::Mariadb, p) => mariadb(root, p),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::put;

    #[test]
    fn pg_units() {
        assert_eq!(pg_memory("128MB", 8192), Some(128 << 20));
        assert_eq!(pg_memory("'4GB'", 8192), Some(4 << 30));
        assert_eq!(pg_memory("16384", 8192), Some(128 << 20));
        assert_eq!(pg_memory("4096", 1024), Some(4 << 20));
        assert_eq!(pg_memory("lots", 1), None);
        assert_eq!(pg_memory("1XB", 1), None);
    }

    #[test]
    fn postgres_settings_follow_includes_and_auto_conf() {
        let d = tempfile::tempdir().unwrap();
        let r = d.path();
        put(r, "proc/42/cmdline", "/usr/lib/postgresql/15/bin/postgres\0-D\0/var/lib/postgresql/15/main\0-c\0config_file=/etc/postgresql/15/main/postgresql.conf\0");
        put(r, "etc/postgresql/15/main/postgresql.conf", "shared_buffers = 128MB  # min 128kB\nmax_connections = 100\ninclude_dir = 'conf.d'\nwork_mem = '8MB'\n");
        put(
            r,
            "etc/postgresql/15/main/conf.d/tune.conf",
            "shared_buffers = '2GB'\n",
        );
        put(
            r,
            "var/lib/postgresql/15/main/postgresql.auto.conf",
            "# Do not edit\nmax_connections = '300'\n",
        );
        let s = postgres(&Root::new(r), 42);
        assert_eq!(s.shared_buffers_bytes, Some(2 << 30));
        assert_eq!(s.work_mem_bytes, Some(8 << 20));
        assert_eq!(s.max_connections, Some(300));
        assert_eq!(s.sources.len(), 3, "{:?}", s.sources);
    }

    #[test]
    fn mssql_env_wins_over_conf() {
        let d = tempfile::tempdir().unwrap();
        let r = d.path();
        put(
            r,
            "var/opt/mssql/mssql.conf",
            "[memory]\nmemorylimitmb = 12288\n",
        );
        assert_eq!(mssql(&Root::new(r), None).memory_limit_mb, Some(12288));
        put(
            r,
            "proc/7/environ",
            "ACCEPT_EULA=Y\0MSSQL_MEMORY_LIMIT_MB=10240\0",
        );
        assert_eq!(mssql(&Root::new(r), Some(7)).memory_limit_mb, Some(10240));
    }

    #[test]
    fn mariadb_pool_from_cnf() {
        let d = tempfile::tempdir().unwrap();
        let r = d.path();
        put(
            r,
            "etc/mysql/mariadb.conf.d/50-server.cnf",
            "[mysqld]\ninnodb_buffer_pool_size = 6G\n[client]\ninnodb_buffer_pool_size = 1G\n",
        );
        assert_eq!(
            mariadb(&Root::new(r), None).innodb_buffer_pool_size_bytes,
            Some(6 << 30)
        );
        assert_eq!(my_size("512M"), Some(512 << 20));
    }
}
