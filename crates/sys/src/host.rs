//! The host itself: kernel, distribution, uptime, virtualisation hints.

use crate::{parse_err, Result, Root};
use serde::Serialize;

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct HostInfo {
    pub hostname: Option<String>,
    pub kernel_release: Option<String>,
    pub kernel_version: Option<String>,
    /// PRETTY_NAME from /etc/os-release.
    pub os_pretty_name: Option<String>,
    pub uptime_s: Option<f64>,
    /// DMI vendor and product (`QEMU`, `Amazon EC2`, `Microsoft Corporation Virtual Machine`).
    pub dmi_vendor: Option<String>,
    pub dmi_product: Option<String>,
    /// /sys/hypervisor/type where the kernel exposes it (Xen).
    pub hypervisor_type: Option<String>,
    /// The kernel command line asks for PSI or turns it off.
    pub kernel_cmdline: Option<String>,
}

fn first_line(root: &Root, abs: &str) -> Result<Option<String>> {
    Ok(root
        .read_optional(abs)?
        .map(|s| s.lines().next().unwrap_or("").trim().to_string())
        .filter(|s| !s.is_empty()))
}

/// Read what there is; files are optional, so only I/O errors other than absence fail.
pub fn read(root: &Root) -> Result<HostInfo> {
    let uptime = match root.read_optional("/proc/uptime")? {
        None => None,
        Some(t) => {
            let first = t.split_whitespace().next().unwrap_or("");
            Some(first.parse::<f64>().map_err(|_| {
                parse_err(
                    &root.path("/proc/uptime"),
                    1,
                    "seconds since boot",
                    t.trim(),
                )
            })?)
        }
    };
    let os_pretty_name = root
        .read_optional("/etc/os-release")?
        .or(root.read_optional("/usr/lib/os-release")?)
        .and_then(|t| {
            t.lines().find_map(|l| {
                l.strip_prefix("PRETTY_NAME=")
                    .map(|v| v.trim().trim_matches('"').to_string())
            })
        });
    // Unreadable DMI files (root-only on some systems) are simply absent here.
    let dmi = |f: &str| first_line(root, f).ok().flatten();
    Ok(HostInfo {
        hostname: first_line(root, "/proc/sys/kernel/hostname")?,
        kernel_release: first_line(root, "/proc/sys/kernel/osrelease")?,
        kernel_version: first_line(root, "/proc/sys/kernel/version")?,
        os_pretty_name,
        uptime_s: uptime,
        dmi_vendor: dmi("/sys/class/dmi/id/sys_vendor"),
        dmi_product: dmi("/sys/class/dmi/id/product_name"),
        hypervisor_type: first_line(root, "/sys/hypervisor/type").ok().flatten(),
        kernel_cmdline: first_line(root, "/proc/cmdline").ok().flatten(),
    })
}

/// USER_HZ, the unit of /proc/stat and /proc/PID/stat times, of the running kernel.
pub fn clock_ticks_per_s() -> Option<u64> {
    // SAFETY: sysconf has no preconditions.
    let v = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    (v > 0).then_some(v as u64)
}

pub fn page_size_bytes() -> Option<u64> {
    // SAFETY: sysconf has no preconditions.
    let v = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    (v > 0).then_some(v as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::put;

    #[test]
    fn reads_what_exists() {
        let d = tempfile::tempdir().unwrap();
        put(d.path(), "proc/sys/kernel/osrelease", "6.1.0-18-amd64\n");
        put(d.path(), "proc/uptime", "132.72 210.83\n");
        put(
            d.path(),
            "etc/os-release",
            "NAME=\"Debian GNU/Linux\"\nPRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\n",
        );
        let h = read(&Root::new(d.path())).unwrap();
        assert_eq!(h.kernel_release.as_deref(), Some("6.1.0-18-amd64"));
        assert_eq!(
            h.os_pretty_name.as_deref(),
            Some("Debian GNU/Linux 12 (bookworm)")
        );
        assert_eq!(h.uptime_s, Some(132.72));
        assert_eq!(h.hostname, None);
        put(d.path(), "proc/uptime", "soon\n");
        assert!(read(&Root::new(d.path()))
            .unwrap_err()
            .to_string()
            .contains("uptime:1"));
    }

    #[test]
    fn sysconf_values_are_sane() {
        assert!(clock_ticks_per_s().unwrap() >= 100);
        assert!(page_size_bytes().unwrap() >= 4096);
    }
}
