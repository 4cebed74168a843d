//! Fuzzing the recording decoder (issue 11): files that are damaged, cut, or crafted with valid
//! checksums around hostile payloads. The decoder must never panic, must stay within its
//! bounds, and what it returns must be consistent. A bounded number of cases runs with every
//! `cargo test`; `PLUMB_FUZZ_CASES` raises it for a longer run.

use super::*;
use proptest::prelude::*;

fn cases(default: u32) -> u32 {
    std::env::var("PLUMB_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A real recording: header, metric definitions, samples with values that come and go, marks.
fn valid_recording() -> Vec<u8> {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("r.plumb");
    let header = super::tests::header();
    let mut w = Writer::create(&p, &header).unwrap();
    for t in 0..12u64 {
        let mut rows = vec![
            ("cpu.all.user_ticks", Kind::Counter, t * 37),
            ("mem.available_bytes", Kind::Gauge, (1 << 30) - t * 4096),
        ];
        if t % 3 != 0 {
            rows.push(("proc.42.rss_bytes", Kind::Gauge, 1 << 20));
        }
        w.sample(t * 1000, &rows).unwrap();
        if t == 5 {
            append_mark(
                &p,
                &Mark {
                    t_ms: 5000,
                    name: "phase".into(),
                    detail: Some("x".into()),
                },
            )
            .unwrap();
        }
    }
    drop(w);
    std::fs::read(&p).unwrap()
}

/// What a decoded recording must satisfy, whatever the input.
fn check(data: &[u8]) {
    if let Ok(r) = decode(Path::new("fuzz.plumb"), data) {
        assert_eq!(r.columns.len(), r.metrics.len());
        assert!(r.columns.iter().all(|c| c.len() == r.times_ms.len()));
        assert!(r.times_ms.iter().all(|t| *t <= MAX_T_MS));
        assert!(r.marks.iter().all(|m| m.t_ms <= MAX_T_MS));
        assert!((r.times_ms.len() as u64) * (r.metrics.len() as u64) <= MAX_VALUES);
        assert_eq!(r.file_bytes, data.len() as u64);
        if let Some(d) = &r.damage {
            assert!(d.offset <= data.len() as u64);
        }
    }
}

#[derive(Debug, Clone)]
enum Mutation {
    Flip(usize, u8),
    Truncate(usize),
    Insert(usize, Vec<u8>),
    Overwrite(usize, Vec<u8>),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), 1u8..=255).prop_map(|(i, b)| Mutation::Flip(i, b)),
        any::<usize>().prop_map(Mutation::Truncate),
        (
            any::<usize>(),
            proptest::collection::vec(any::<u8>(), 1..16)
        )
            .prop_map(|(i, v)| Mutation::Insert(i, v)),
        (any::<usize>(), proptest::collection::vec(any::<u8>(), 1..9))
            .prop_map(|(i, v)| Mutation::Overwrite(i, v)),
    ]
}

fn apply(data: &mut Vec<u8>, m: &Mutation) {
    if data.is_empty() {
        return;
    }
    match m {
        Mutation::Flip(i, b) => {
            let i = i % data.len();
            data[i] ^= b;
        }
        Mutation::Truncate(i) => data.truncate(i % (data.len() + 1)),
        Mutation::Insert(i, v) => {
            let i = i % (data.len() + 1);
            data.splice(i..i, v.iter().copied());
        }
        Mutation::Overwrite(i, v) => {
            let i = i % data.len();
            for (k, b) in v.iter().enumerate() {
                if let Some(x) = data.get_mut(i + k) {
                    *x = *b;
                }
            }
        }
    }
}

/// A sample payload with arbitrary varints: times, counts, ids and deltas.
fn sample_payload() -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(
        prop_oneof![
            Just(0u64),
            0u64..300,
            any::<u64>(),
            Just(1u64 << 50),
            Just(u64::MAX)
        ],
        0..12,
    )
    .prop_map(|vals| {
        let mut out = Vec::new();
        for v in vals {
            put_varint(&mut out, v);
        }
        out
    })
}

/// JSON for a metrics, header or mark record: valid, almost valid, or hostile.
fn json_payload() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        (0u32..5, proptest::collection::vec(any::<u32>(), 0..4)).prop_map(|(n, ids)| {
            let defs: Vec<String> = (0..n)
                .map(|i| {
                    let id = ids.get(i as usize).copied().unwrap_or(i);
                    format!(r#"{{"id":{},"name":"m.x{i}_bytes","kind":"gauge"}}"#, id % 6)
                })
                .collect();
            format!("[{}]", defs.join(",")).into_bytes()
        }),
        any::<u64>().prop_map(|t| format!(r#"{{"t_ms":{t},"name":"m"}}"#).into_bytes()),
        Just(br#"{"format_version":9,"plumb_version":"x","started_unix_ms":0,"interval_ms":0,"hostname":null,"kernel":null,"cpus":null,"clock_ticks_per_s":null,"page_size_bytes":null,"command_line":""}"#.to_vec()),
        proptest::collection::vec(any::<u8>(), 0..64),
    ]
}

/// Records with correct checksums around arbitrary payloads: what gets past the CRC.
fn crafted() -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(
        prop_oneof![
            sample_payload().prop_map(|p| (T_SAMPLE, p)),
            json_payload().prop_map(|p| (T_METRICS, p)),
            json_payload().prop_map(|p| (T_MARK, p)),
            json_payload().prop_map(|p| (T_HEADER, p)),
            (5u8..=255, proptest::collection::vec(any::<u8>(), 0..16)),
        ],
        0..24,
    )
    .prop_map(|records| {
        let mut out = valid_recording();
        for (kind, payload) in records {
            out.extend_from_slice(&frame(kind, &payload));
        }
        out
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(1500), ..ProptestConfig::default() })]

    #[test]
    fn damaged_recordings_never_panic(muts in proptest::collection::vec(mutation(), 1..6)) {
        let mut data = valid_recording();
        for m in &muts {
            apply(&mut data, m);
        }
        check(&data);
    }

    #[test]
    fn crafted_records_with_valid_checksums_never_panic(data in crafted()) {
        check(&data);
    }

    #[test]
    fn arbitrary_bytes_after_the_magic_never_panic(
        tail in proptest::collection::vec(any::<u8>(), 0..512)
    ) {
        let mut data = MAGIC.to_vec();
        data.extend_from_slice(&tail);
        check(&data);
    }
}
