//! Fuzzing the diskspd command-line parser (issue 11): any arguments a user could paste give
//! a job or an error naming the flag, never a panic; a job it accepts can be validated. A
//! bounded number of cases runs with every `cargo test`; `PLUMB_FUZZ_CASES` raises it.

use proptest::prelude::*;

fn cases(default: u32) -> u32 {
    std::env::var("PLUMB_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// diskspd's flags, real ones and near misses.
const FLAGS: &[&str] = &[
    "-d",
    "-W",
    "-C",
    "-o",
    "-O",
    "-t",
    "-T",
    "-b",
    "-s",
    "-si",
    "-r",
    "-w",
    "-h",
    "-S",
    "-Su",
    "-Sh",
    "-Sb",
    "-L",
    "-g",
    "-gi",
    "-i",
    "-j",
    "-c",
    "-Z",
    "-z",
    "-a",
    "-n",
    "-B",
    "-f",
    "-F",
    "-p",
    "-x",
    "-X",
    "-Rxml",
    "-D",
    "-e",
    "-l",
    "-N",
    "-v",
    "-?",
    "-",
    "--",
    "-é",
    "-ß",
    "-\u{1F4BE}",
    "#",
    "#1",
];

/// Values: numbers of every size, sizes with units, and junk.
fn value() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        any::<u8>().prop_map(|v| v.to_string()),
        any::<u32>().prop_map(|v| v.to_string()),
        any::<u64>().prop_map(|v| v.to_string()),
        Just("18446744073709551616".to_string()),
        Just("99999999999999999999".to_string()),
        (
            1u32..4096,
            prop_oneof![
                Just("K"),
                Just("M"),
                Just("G"),
                Just("T"),
                Just("k"),
                Just("b")
            ]
        )
            .prop_map(|(n, u)| format!("{n}{u}")),
        Just("-1".to_string()),
        Just("0".to_string()),
        Just("1.5".to_string()),
        Just("é".to_string()),
        proptest::collection::vec(any::<char>(), 0..6).prop_map(|v| v.into_iter().collect()),
    ]
}

fn arg() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => (proptest::sample::select(FLAGS), value()).prop_map(|(f, v)| format!("{f}{v}")),
        1 => Just("/tmp/plumb-fuzz-target.dat".to_string()),
        1 => proptest::collection::vec(any::<char>(), 0..8).prop_map(|v| v.into_iter().collect()),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(3000), ..ProptestConfig::default() })]

    #[test]
    fn diskspd_command_lines_never_panic(args in proptest::collection::vec(arg(), 0..10)) {
        if let Ok(p) = crate::diskspd::parse(&args) {
            let _ = p.job.validate();
        }
    }
}
