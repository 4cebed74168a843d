//! Host memory: /proc/meminfo, /proc/vmstat, /proc/swaps.

use crate::{for_each_colon_line, parse_err, parse_kb_bytes, unescape_octal, Result, Root};
use serde::Serialize;
use std::path::Path;

/// The /proc/meminfo fields a DBA needs, in bytes (huge page counts are counts).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Meminfo {
    pub mem_total_bytes: Option<u64>,
    pub mem_free_bytes: Option<u64>,
    /// None on kernels before 3.14.
    pub mem_available_bytes: Option<u64>,
    pub buffers_bytes: Option<u64>,
    pub cached_bytes: Option<u64>,
    pub swap_cached_bytes: Option<u64>,
    pub active_file_bytes: Option<u64>,
    pub inactive_file_bytes: Option<u64>,
    pub anon_pages_bytes: Option<u64>,
    pub shmem_bytes: Option<u64>,
    pub s_reclaimable_bytes: Option<u64>,
    pub dirty_bytes: Option<u64>,
    pub writeback_bytes: Option<u64>,
    pub mlocked_bytes: Option<u64>,
    pub swap_total_bytes: Option<u64>,
    pub swap_free_bytes: Option<u64>,
    pub commit_limit_bytes: Option<u64>,
    pub committed_as_bytes: Option<u64>,
    pub anon_huge_pages_bytes: Option<u64>,
    pub huge_pages_total: Option<u64>,
    pub huge_pages_free: Option<u64>,
    pub hugepage_size_bytes: Option<u64>,
}

pub fn read_meminfo(root: &Root) -> Result<Meminfo> {
    let text = root.read("/proc/meminfo")?;
    parse_meminfo(&root.path("/proc/meminfo"), &text)
}

pub(crate) fn parse_meminfo(path: &Path, text: &str) -> Result<Meminfo> {
    let mut m = Meminfo::default();
    for_each_colon_line(path, text, |k, v, line| {
        let slot = match k {
            "MemTotal" => &mut m.mem_total_bytes,
            "MemFree" => &mut m.mem_free_bytes,
            "MemAvailable" => &mut m.mem_available_bytes,
            "Buffers" => &mut m.buffers_bytes,
            "Cached" => &mut m.cached_bytes,
            "SwapCached" => &mut m.swap_cached_bytes,
            "Active(file)" => &mut m.active_file_bytes,
            "Inactive(file)" => &mut m.inactive_file_bytes,
            "AnonPages" => &mut m.anon_pages_bytes,
            "Shmem" => &mut m.shmem_bytes,
            "SReclaimable" => &mut m.s_reclaimable_bytes,
            "Dirty" => &mut m.dirty_bytes,
            "Writeback" => &mut m.writeback_bytes,
            "Mlocked" => &mut m.mlocked_bytes,
            "SwapTotal" => &mut m.swap_total_bytes,
            "SwapFree" => &mut m.swap_free_bytes,
            "CommitLimit" => &mut m.commit_limit_bytes,
            "Committed_AS" => &mut m.committed_as_bytes,
            "AnonHugePages" => &mut m.anon_huge_pages_bytes,
            "HugePages_Total" => &mut m.huge_pages_total,
            "HugePages_Free" => &mut m.huge_pages_free,
            "Hugepagesize" => &mut m.hugepage_size_bytes,
            _ => return Ok(()),
        };
        *slot = Some(parse_kb_bytes(path, line, v)?);
        Ok(())
    })?;
    if m.mem_total_bytes.is_none() {
        return Err(crate::Error::Invalid {
            path: path.to_path_buf(),
            message: "no MemTotal line".into(),
        });
    }
    Ok(m)
}

/// Cumulative /proc/vmstat counters that matter for swapping and reclaim, since boot.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Vmstat {
    pub pswpin_pages: Option<u64>,
    pub pswpout_pages: Option<u64>,
    pub pgfault: Option<u64>,
    pub pgmajfault: Option<u64>,
    pub pgscan_kswapd_pages: Option<u64>,
    pub pgscan_direct_pages: Option<u64>,
    pub pgsteal_kswapd_pages: Option<u64>,
    pub pgsteal_direct_pages: Option<u64>,
    pub oom_kill: Option<u64>,
}

pub(crate) fn read_vmstat(root: &Root) -> Result<Vmstat> {
    let text = root.read("/proc/vmstat")?;
    parse_vmstat(&root.path("/proc/vmstat"), &text)
}

pub(crate) fn parse_vmstat(path: &Path, text: &str) -> Result<Vmstat> {
    let mut v = Vmstat::default();
    for (i, line) in text.lines().enumerate() {
        let mut it = line.split_whitespace();
        let (Some(k), val) = (it.next(), it.next()) else {
            continue;
        };
        let slot = match k {
            "pswpin" => &mut v.pswpin_pages,
            "pswpout" => &mut v.pswpout_pages,
            "pgfault" => &mut v.pgfault,
            "pgmajfault" => &mut v.pgmajfault,
            "pgscan_kswapd" => &mut v.pgscan_kswapd_pages,
            "pgscan_direct" => &mut v.pgscan_direct_pages,
            "pgsteal_kswapd" => &mut v.pgsteal_kswapd_pages,
            "pgsteal_direct" => &mut v.pgsteal_direct_pages,
            "oom_kill" => &mut v.oom_kill,
            _ => continue,
        };
        *slot = Some(
            val.and_then(|s| s.parse().ok())
                .ok_or_else(|| parse_err(path, i + 1, "`name count`", line))?,
        );
    }
    Ok(v)
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SwapDevice {
    pub filename: String,
    /// `partition` or `file`.
    pub kind: String,
    pub size_bytes: u64,
    pub used_bytes: u64,
    pub priority: i64,
}

pub fn read_swaps(root: &Root) -> Result<Vec<SwapDevice>> {
    let Some(text) = root.read_optional("/proc/swaps")? else {
        return Ok(Vec::new());
    };
    parse_swaps(&root.path("/proc/swaps"), &text)
}

pub(crate) fn parse_swaps(path: &Path, text: &str) -> Result<Vec<SwapDevice>> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate().skip(1) {
        if line.trim().is_empty() {
            continue;
        }
        let f: Vec<&str> = line.split_whitespace().collect();
        let bad = || parse_err(path, i + 1, "`Filename Type Size Used Priority`", line);
        if f.len() != 5 {
            return Err(bad());
        }
        let kb = |s: &str| s.parse::<u64>().map(|v| v * 1024).map_err(|_| bad());
        out.push(SwapDevice {
            filename: unescape_octal(f[0]),
            kind: f[1].to_string(),
            size_bytes: kb(f[2])?,
            used_bytes: kb(f[3])?,
            priority: f[4].parse().map_err(|_| bad())?,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meminfo_in_bytes() {
        let m = parse_meminfo(
            Path::new("/proc/meminfo"),
            "MemTotal:       24684084 kB\nMemAvailable:   24455972 kB\nHugePages_Total:       4\nNewField:  9 kB\n",
        )
        .unwrap();
        assert_eq!(m.mem_total_bytes, Some(24684084 * 1024));
        assert_eq!(m.mem_available_bytes, Some(24455972 * 1024));
        assert_eq!(m.huge_pages_total, Some(4));
        assert_eq!(m.swap_total_bytes, None);
    }

    #[test]
    fn meminfo_truncated_value_names_the_line() {
        let e =
            parse_meminfo(Path::new("/proc/meminfo"), "MemTotal: 10 kB\nMemFree:\n").unwrap_err();
        assert!(e.to_string().starts_with("/proc/meminfo:2:"), "{e}");
        let e = parse_meminfo(Path::new("/proc/meminfo"), "MemTotal 10 kB\n").unwrap_err();
        assert!(e.to_string().starts_with("/proc/meminfo:1:"), "{e}");
        let e = parse_meminfo(Path::new("/proc/meminfo"), "MemFree: 10 kB\n").unwrap_err();
        assert!(e.to_string().contains("MemTotal"), "{e}");
    }

    #[test]
    fn vmstat_and_swaps() {
        let v = parse_vmstat(
            Path::new("/proc/vmstat"),
            "nr_free_pages 5\npswpin 7\npswpout 9\npgmajfault 503\n",
        )
        .unwrap();
        assert_eq!(
            (v.pswpin_pages, v.pswpout_pages, v.pgmajfault),
            (Some(7), Some(9), Some(503))
        );
        assert_eq!(v.oom_kill, None);
        assert!(parse_vmstat(Path::new("/proc/vmstat"), "pswpin x\n").is_err());

        let s = parse_swaps(
            Path::new("/proc/swaps"),
            "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n/dev/zram0                              partition\t1048572\t\t512\t\t100\n/swap\\040file file 10 0 -2\n",
        )
        .unwrap();
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].size_bytes, 1048572 * 1024);
        assert_eq!(s[0].used_bytes, 512 * 1024);
        assert_eq!(s[1].filename, "/swap file");
        assert_eq!(s[1].priority, -2);
        assert!(parse_swaps(Path::new("/proc/swaps"), "h\n/dev/x partition 1\n").is_err());
    }
}
