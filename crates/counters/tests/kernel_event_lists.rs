//! Every row of the built-in model-event table held against the Linux kernel's own perf
//! event lists (tools/perf/pmu-events/arch/x86/<uarch>/*.json): for each
//! microarchitecture a row claims, the vendor's event name is in that list with the
//! same event code, unit mask, counter mask, edge, invert and any-thread bits as the row's terms.
//!
//! The lists are not in this repository: `scripts/kernel-pmu-events.sh` fetches them
//! from Debian's kernel source package and prints the directory, which the test reads
//! from `SMTLAB_PMU_EVENTS` (CI sets it; without it the test says so and is skipped).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use smtlab_counters::model_events::{MODEL_EVENTS, Uarch};

fn lists_dir() -> Option<PathBuf> {
    let dir = PathBuf::from(std::env::var_os("SMTLAB_PMU_EVENTS")?);
    dir.join("mapfile.csv").is_file().then_some(dir)
}

fn number(v: Option<&serde_json::Value>) -> u64 {
    let Some(v) = v else { return 0 };
    match v {
        serde_json::Value::Number(n) => n.as_u64().unwrap_or(0),
        serde_json::Value::String(s) => {
            let s = s.trim();
            match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
                Some(h) => u64::from_str_radix(h, 16).unwrap_or(u64::MAX),
                None => s.parse().unwrap_or(u64::MAX),
            }
        }
        _ => u64::MAX,
    }
}

/// The fields that make an encoding, from a kernel list entry.
fn kernel_fields(e: &serde_json::Value) -> BTreeMap<&'static str, u64> {
    BTreeMap::from([
        ("event", number(e.get("EventCode"))),
        ("umask", number(e.get("UMask"))),
        ("cmask", number(e.get("CounterMask"))),
        ("edge", number(e.get("EdgeDetect"))),
        ("inv", number(e.get("Invert"))),
        ("any", number(e.get("AnyThread"))),
    ])
}

/// The same fields from the table's perf-style terms.
fn term_fields(terms: &str) -> BTreeMap<&'static str, u64> {
    let mut out = BTreeMap::from([
        ("event", 0),
        ("umask", 0),
        ("cmask", 0),
        ("edge", 0),
        ("inv", 0),
        ("any", 0),
    ]);
    for t in terms.split(',') {
        let (k, v) = t.split_once('=').unwrap_or((t, "1"));
        let key = *out
            .keys()
            .find(|x| **x == k)
            .unwrap_or_else(|| panic!("term {k} of {terms:?} is not compared"));
        out.insert(key, number(Some(&serde_json::Value::String(v.into()))));
    }
    out
}

/// Every event entry of one microarchitecture's lists, by upper-case name.
fn events_of(dir: &Path) -> BTreeMap<String, serde_json::Value> {
    let mut out = BTreeMap::new();
    for f in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = f.unwrap().path();
        if path.extension().is_none_or(|x| x != "json") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        for e in v.as_array().into_iter().flatten() {
            if let Some(name) = e.get("EventName").and_then(|n| n.as_str()) {
                out.insert(name.to_ascii_uppercase(), e.clone());
            }
        }
    }
    out
}

#[test]
fn every_table_encoding_is_the_kernels() {
    let Some(dir) = lists_dir() else {
        smtlab_fixtures::require::skip(
            "no kernel event lists: set SMTLAB_PMU_EVENTS=$(scripts/kernel-pmu-events.sh)",
        );
        return;
    };
    let mut checked = 0;
    let mut wrong = Vec::new();
    for u in Uarch::ALL {
        let lists = events_of(&dir.join(u.kernel_list()));
        for row in MODEL_EVENTS.iter().filter(|r| r.uarchs.contains(&u)) {
            let Some(e) = lists.get(row.vendor_name) else {
                wrong.push(format!(
                    "{}: {} not in the kernel's list",
                    u.label(),
                    row.vendor_name
                ));
                continue;
            };
            let (theirs, ours) = (kernel_fields(e), term_fields(row.terms));
            if theirs != ours {
                wrong.push(format!(
                    "{}: {} ({}) is {ours:?} here, {theirs:?} in the kernel's list",
                    u.label(),
                    row.vendor_name,
                    row.name
                ));
            }
            checked += 1;
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    let pairs: usize = MODEL_EVENTS.iter().map(|e| e.uarchs.len()).sum();
    assert_eq!(
        checked, pairs,
        "every (row, microarchitecture) pair checked"
    );
}
