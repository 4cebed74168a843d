//! Syscall numbers to names, from this system's own table: the kernel headers' `unistd_64.h`
//! (`#define __NR_read 0`), which linux-libc-dev installs for the machine's architecture. The
//! `raw_syscalls` tracepoints report numbers only; names come from here, and a number the table
//! lacks (a kernel newer than its headers) is shown as `syscall_N`, never guessed.

use crate::Root;
use std::collections::BTreeMap;

/// Where the table lives for this architecture, inside `root`.
pub(crate) fn table_path() -> Option<&'static str> {
    match std::env::consts::ARCH {
        "x86_64" => Some("/usr/include/x86_64-linux-gnu/asm/unistd_64.h"),
        _ => None,
    }
}

/// The `#define __NR_name N` lines of a header.
pub fn parse(text: &str) -> BTreeMap<u32, String> {
    text.lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            (f.next()? == "#define").then_some(())?;
            let name = f.next()?.strip_prefix("__NR_")?;
            let nr = f.next()?.parse().ok()?;
            Some((nr, name.to_string()))
        })
        .collect()
}

/// This system's table, read through `root`.
pub fn table(root: &Root) -> Result<BTreeMap<u32, String>, crate::KernelError> {
    let path =
        table_path().ok_or_else(|| format!("no syscall table for {}", std::env::consts::ARCH))?;
    let text = root
        .read(path)
        .map_err(|e| format!("the syscall table ({e}); install linux-libc-dev"))?;
    let t = parse(&text);
    if t.is_empty() {
        return Err(format!("{path}: no __NR_ definitions").into());
    }
    Ok(t)
}

/// A number's name, or `syscall_N`.
pub fn name(table: &BTreeMap<u32, String>, nr: u32) -> String {
    table
        .get(&nr)
        .cloned()
        .unwrap_or_else(|| format!("syscall_{nr}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn definitions_are_read_and_unknown_numbers_named_by_number() {
        let t = parse(
            "#ifndef _ASM_UNISTD_64_H\n#define _ASM_UNISTD_64_H\n\n#define __NR_read 0\n#define __NR_fdatasync 75\n#define __NR_newfstatat 262\n#endif\n",
        );
        assert_eq!(t.len(), 3, "{t:?}");
        assert_eq!(name(&t, 75), "fdatasync");
        assert_eq!(name(&t, 262), "newfstatat");
        assert_eq!(name(&t, 999), "syscall_999");
    }

    #[test]
    fn this_machines_table_has_the_calls_a_database_makes() {
        let Ok(t) = table(&Root::host()) else {
            if std::env::var("CI").as_deref() == Ok("true") {
                panic!("no syscall table on this machine (linux-libc-dev)");
            }
            eprintln!("skipped: no syscall table here");
            return;
        };
        if std::env::consts::ARCH == "x86_64" {
            assert_eq!(name(&t, 75), "fdatasync");
            assert_eq!(name(&t, 74), "fsync");
            assert_eq!(name(&t, 18), "pwrite64");
        }
        assert!(t.len() > 300, "{}", t.len());
    }
}
