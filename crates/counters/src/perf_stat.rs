//! Counts recorded by `perf stat` on another machine, read back into smtlab's
//! [`CounterValues`] so the same derivations (ratios, top-down, per-unit costs) apply to
//! them as to counts smtlab took itself.
//!
//! Two formats, told apart by the first line that is not a comment:
//!
//! * `perf stat -x,` CSV: `value,unit,event,running_ns,percent_running,...`, optionally
//!   after a time stamp (`-I`), a CPU (`-A`), a core or socket (`--per-core`) or a
//!   thread (`--per-thread`). The event is the first field two places after a value.
//! * `perf stat -j` JSON, one object per line (`counter-value`, `unit`, `event`,
//!   `event-runtime`, `pcnt-running`).
//!
//! perf prints counts already scaled for multiplexing; the reading keeps that value and
//! rebuilds the raw count and enabled time from the running share, so the multiplexing
//! shows as it does for smtlab's own counts. Lines for the same event under different
//! prefixes (per CPU, per interval, per thread) are summed; lines for the same event
//! under the same prefix are one count measured more than once (`perf stat -M` puts
//! `ls_not_halted_cyc` or `cycles` in every metric's group, each line perf's own
//! estimate of the whole run) and are averaged. `task-clock` in milliseconds becomes
//! nanoseconds.
//!
//! Names: perf's generic names become [`CounterEvent`]s (`cycles:u` in user mode);
//! vendor names in smtlab's table ([`crate::model_events`]) become smtlab's portable
//! names with the table's scale (`ls_not_halted_cyc` on Zen 4 is
//! `total_dispatch_slots`, six per cycle), which needs the microarchitecture when the
//! rows differ between them; perf's metric-table spellings of the kernel's events
//! ([`PERF_SPELLINGS`]: `TOPDOWN.SLOTS` for `slots`) become those events; every other
//! name is kept as written.

use smtlab_model::counters::named::NamedUnavailable;
use smtlab_model::counters::{
    CountMode, CounterEvent, CounterTarget, CounterValues, NamedReading, Reading, UnavailableEvent,
};

use crate::model_events::{self, MODEL_EVENTS, ModelEvent, Uarch};

/// Why a recorded file could not be read.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ImportError {
    #[error("line {line}: {what}")]
    Line { line: usize, what: String },
    #[error(
        "no counts found (expected `perf stat -x,` CSV lines `value,unit,event,...` \
         or `perf stat -j` JSON lines)"
    )]
    Empty,
    #[error(
        "event {event} means different things on {uarchs}: say which CPU counted it \
         with --cpu-model"
    )]
    NeedsModel { event: String, uarchs: String },
}

/// What is wrong with one line, before its number is known.
struct BadLine(String);

/// Names perf prints for events smtlab knows by another name, with the kernel event's
/// scale: the metric tables' spellings (`perf stat` with no events, `-M`, `--topdown`
/// on perf 6.x) of the kernel's `slots`; Ice Lake and Tiger Lake's spelling of
/// pipeline clears (the recovery cycles' edges, the encoding of
/// `INT_MISC.CLEARS_COUNT`); and Skylake's `TopdownL1` events with SMT on, which are
/// the kernel's slot-formula events (`topdown-total-slots` is the core's cycles,
/// `any=1`, two slots a thread's cycle; `topdown-recovery-bubbles` likewise). Matched
/// without case. A name the table also knows keeps its table rows as well.
pub const PERF_SPELLINGS: [(&str, &str, Option<f64>); 8] = [
    ("TOPDOWN.SLOTS", "slots", None),
    (
        "INT_MISC.RECOVERY_CYCLES,cmask=1,edge",
        "INT_MISC.CLEARS_COUNT",
        None,
    ),
    (
        "INT_MISC.RECOVERY_CYCLES,cmask=1,edge=1",
        "INT_MISC.CLEARS_COUNT",
        None,
    ),
    (
        "CPU_CLK_UNHALTED.THREAD_ANY",
        "topdown-total-slots",
        Some(2.0),
    ),
    (
        "INT_MISC.RECOVERY_CYCLES_ANY",
        "topdown-recovery-bubbles",
        Some(2.0),
    ),
    ("UOPS_ISSUED.ANY", "topdown-slots-issued", None),
    ("UOPS_RETIRED.RETIRE_SLOTS", "topdown-slots-retired", None),
    ("IDQ_UOPS_NOT_DELIVERED.CORE", "topdown-fetch-bubbles", None),
];

/// perf's other names for its generic events (`perf list` shows `cpu-cycles OR
/// cycles`); perf 6.x prints `cpu-cycles` where older perf printed `cycles`.
const GENERIC_ALIASES: [(&str, &str); 7] = [
    ("cpu-cycles", "cycles"),
    ("branch-instructions", "branches"),
    ("idle-cycles-frontend", "stalled-cycles-frontend"),
    ("idle-cycles-backend", "stalled-cycles-backend"),
    ("faults", "page-faults"),
    ("cs", "context-switches"),
    ("migrations", "cpu-migrations"),
];

/// One line of perf's output: an event's count (`None`: not counted or not supported).
#[derive(Debug, Clone, PartialEq)]
struct Row {
    /// What comes before the value (time stamp, CPU, core, thread), joined: lines of one
    /// event under different prefixes are different counts, under one prefix the same.
    prefix: String,
    event: String,
    value: Option<f64>,
    unit: String,
    running_ns: Option<u64>,
    percent_running: Option<f64>,
    /// perf's text when there is no value (`<not supported>`).
    missing: Option<String>,
}

/// Reads `perf stat -x,` CSV or `perf stat -j` JSON into counter values, vendor names
/// resolved for `uarch` when given.
pub fn import(text: &str, uarch: Option<Uarch>) -> Result<CounterValues, ImportError> {
    let mut rows: Vec<Row> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let parsed = if line.starts_with('{') {
            json_row(line)
        } else {
            // `-x,` as asked; `-x;` for events whose terms hold commas.
            csv_row(line, ',').or_else(|e| csv_row(line, ';').map_err(|_| e))
        };
        match parsed {
            Ok(Some(r)) => rows.push(r),
            Ok(None) => {}
            Err(BadLine(what)) => return Err(ImportError::Line { line: i + 1, what }),
        }
    }
    if rows.is_empty() {
        return Err(ImportError::Empty);
    }
    let mut v = CounterValues::new(CounterTarget::Recorded);
    for row in merge(rows) {
        add(&mut v, row, uarch)?;
    }
    Ok(v)
}

fn is_value(s: &str) -> bool {
    s.starts_with("<not ") || s.parse::<f64>().is_ok()
}

/// A CSV line; `None` for lines that carry no count (perf's metric-only lines).
fn csv_row(line: &str, sep: char) -> Result<Option<Row>, BadLine> {
    let f: Vec<&str> = line.split(sep).map(str::trim).collect();
    // Prefix fields (time stamp, CPU, core, thread) come before the value; the event
    // is the first non-numeric, non-empty field two places after a value.
    let start = (0..f.len().min(4)).find(|&i| {
        i + 2 < f.len() && is_value(f[i]) && !f[i + 2].is_empty() && !is_value(f[i + 2])
    });
    let Some(i) = start else {
        return if f.iter().any(|x| is_value(x)) {
            Ok(None)
        } else {
            Err(BadLine(format!(
                "expected `value,unit,event,...` as `perf stat -x,` writes it, found {line:?}"
            )))
        };
    };
    let value = f[i].parse::<f64>().ok();
    Ok(Some(Row {
        prefix: f[..i].join(","),
        event: f[i + 2].to_string(),
        value,
        unit: f[i + 1].to_string(),
        running_ns: f.get(i + 3).and_then(|x| x.parse().ok()),
        percent_running: f.get(i + 4).and_then(|x| x.parse().ok()),
        missing: value.is_none().then(|| f[i].to_string()),
    }))
}

/// A number that perf writes either as a JSON number or as a string.
fn json_number(v: Option<&serde_json::Value>) -> Option<f64> {
    match v? {
        serde_json::Value::Number(n) => n.as_f64(),
        serde_json::Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// A `perf stat -j` line; `None` for metric-only objects (no `event`).
fn json_row(line: &str) -> Result<Option<Row>, BadLine> {
    let o: serde_json::Value =
        serde_json::from_str(line).map_err(|e| BadLine(format!("not a JSON object: {e}")))?;
    let Some(event) = o.get("event").and_then(|e| e.as_str()) else {
        return Ok(None);
    };
    let value = json_number(o.get("counter-value"));
    let prefix = ["interval", "cpu", "core", "socket", "die", "node", "thread"]
        .iter()
        .filter_map(|k| o.get(*k).map(|x| format!("{k}={x}")))
        .collect::<Vec<_>>()
        .join(",");
    Ok(Some(Row {
        prefix,
        event: event.to_string(),
        value,
        unit: o
            .get("unit")
            .and_then(|u| u.as_str())
            .unwrap_or("")
            .to_string(),
        running_ns: json_number(o.get("event-runtime")).map(|x| x as u64),
        percent_running: json_number(o.get("pcnt-running")),
        missing: value.is_none().then(|| {
            o.get("counter-value")
                .and_then(|x| x.as_str())
                .unwrap_or("<not counted>")
                .to_string()
        }),
    }))
}

/// One count per event, in first-seen order: the repeats of an event under one prefix
/// averaged ([`average_repeats`]), then its lines under different prefixes (per CPU,
/// per interval, per thread) summed.
fn merge(rows: Vec<Row>) -> Vec<Row> {
    let mut out: Vec<Row> = Vec::new();
    for r in average_repeats(rows) {
        match out.iter_mut().find(|o| o.event == r.event) {
            None => out.push(r),
            Some(acc) => {
                acc.value = either(acc.value, r.value, |a, b| a + b);
                acc.running_ns = either(acc.running_ns, r.running_ns, |a, b| a + b);
                acc.percent_running = either(acc.percent_running, r.percent_running, f64::min);
            }
        }
    }
    out
}

/// `f` of both when both are there, else the one that is.
fn either<T>(a: Option<T>, b: Option<T>, f: impl FnOnce(T, T) -> T) -> Option<T> {
    match (a, b) {
        (Some(a), Some(b)) => Some(f(a, b)),
        (a, b) => a.or(b),
    }
}

/// One row per (prefix, event): an event counted in several groups of one run (`perf
/// stat -M` gives each metric its own group, each with its own `ls_not_halted_cyc`)
/// is one quantity measured several times, each line perf's estimate of the whole run,
/// so the counted lines are averaged; their running times add up, as does their share
/// of the run (at most all of it). Summing them would count the run's cycles once per
/// group.
fn average_repeats(rows: Vec<Row>) -> Vec<Row> {
    let mut out: Vec<(Row, usize)> = Vec::new();
    for r in rows {
        let same = out
            .iter_mut()
            .find(|(o, _)| o.prefix == r.prefix && o.event == r.event);
        let Some((acc, n)) = same else {
            let n = usize::from(r.value.is_some());
            out.push((r, n));
            continue;
        };
        let Some(value) = r.value else { continue };
        acc.value = Some(acc.value.unwrap_or(0.0) + value);
        acc.running_ns = either(acc.running_ns, r.running_ns, |a, b| a + b);
        acc.percent_running = either(acc.percent_running, r.percent_running, |a, b| {
            (a + b).min(100.0)
        });
        acc.missing = None;
        *n += 1;
    }
    out.into_iter()
        .map(|(mut r, n)| {
            if n > 1 {
                r.value = r.value.map(|v| v / n as f64);
            }
            r
        })
        .collect()
}

/// The event's name without its PMU and modifiers, and the privilege mode they ask
/// for: `cpu/cycles/u` and `cycles:u` are `("cycles", User)`.
fn split_name(event: &str) -> (String, CountMode) {
    let (name, modifiers) = if event.contains('/') {
        // `pmu/name/mods`: the middle part; raw terms (`cpu/event=0x3c/`) stay whole.
        // A named event with terms after it (`cpu/NAME,cmask=1,edge/u`) is named too.
        match event.split('/').collect::<Vec<_>>().as_slice() {
            [_, inner, mods] if !inner.split(',').next().unwrap_or("").contains('=') => {
                (inner.to_string(), *mods)
            }
            _ => (event.to_string(), ""),
        }
    } else {
        match event.rsplit_once(':') {
            Some((n, m)) if m.chars().all(|c| "ukhHGpPSDIWe".contains(c)) => (n.to_string(), m),
            _ => (event.to_string(), ""),
        }
    };
    (name, crate::event_list::mode_of(modifiers))
}

/// The reading perf's scaled value stands for.
fn reading(value: f64, running_ns: Option<u64>, percent: Option<f64>) -> Reading {
    let running = running_ns.unwrap_or(0);
    let share = percent.filter(|p| *p > 0.0 && *p <= 100.0).unwrap_or(100.0) / 100.0;
    Reading {
        raw: (value * share).round().max(0.0) as u64,
        time_enabled_ns: (running as f64 / share).round() as u64,
        time_running_ns: running,
        scaled: Some(value),
    }
}

fn add(v: &mut CounterValues, row: Row, uarch: Option<Uarch>) -> Result<(), ImportError> {
    let (name, mode) = split_name(&row.event);
    let generic = GENERIC_ALIASES
        .iter()
        .find(|(alias, _)| alias.eq_ignore_ascii_case(&name))
        .map_or(name.as_str(), |(_, perf)| perf)
        .parse::<CounterEvent>()
        .ok();
    let Some(value) = row.value else {
        let reason = format!("{} in the recorded run", row.missing.unwrap_or_default());
        match generic {
            Some(event) => v.unavailable.push(UnavailableEvent {
                event,
                mode,
                reason,
            }),
            None => v.named_unavailable.push(NamedUnavailable { name, reason }),
        }
        return Ok(());
    };
    let value = if row.unit == "msec" {
        value * 1e6
    } else {
        value
    };
    let r = reading(value, row.running_ns, row.percent_running);
    if let Some(event) = generic {
        v.set(event, mode, r);
        return Ok(());
    }
    let spelling = PERF_SPELLINGS
        .iter()
        .find(|(perf, _, _)| perf.eq_ignore_ascii_case(&name));
    let mut rows = table_rows(&name, uarch)?;
    let source = format!("recorded by perf stat as {}", row.event);
    // (name, source, scale) of each reading to keep.
    let mut keep: Vec<(String, &str, Option<f64>)> = Vec::new();
    match spelling {
        // The kernel's event, and the table's rows for either name.
        Some(&(_, kernel, scale)) => {
            keep.push((kernel.to_string(), &source, scale));
            for e in table_rows(kernel, uarch)? {
                if !rows.iter().any(|x| x.name == e.name) {
                    rows.push(e);
                }
            }
        }
        None if rows.is_empty() => keep.push((name, "recorded by perf stat", None)),
        None => {}
    }
    keep.extend(
        rows.iter()
            .map(|e| (e.name.to_string(), source.as_str(), e.scale)),
    );
    for (name, source, scale) in keep {
        v.named.push(NamedReading {
            name,
            source: source.to_string(),
            encodings: Vec::new(),
            mode,
            scale,
            unit: (!row.unit.is_empty()).then(|| row.unit.clone()),
            scope: "recorded".into(),
            reading: r,
            parts: 1,
        });
    }
    Ok(())
}

/// The table rows a vendor name stands for on `uarch` (or on every microarchitecture
/// that has it, when they agree), one per smtlab name.
fn table_rows(name: &str, uarch: Option<Uarch>) -> Result<Vec<&'static ModelEvent>, ImportError> {
    let mut rows: Vec<&'static ModelEvent> = MODEL_EVENTS
        .iter()
        .filter(|e| model_events::matches(e, name))
        .filter(|e| uarch.is_none_or(|u| e.uarchs.contains(&u)))
        .collect();
    if uarch.is_none() {
        let differ = rows
            .iter()
            .any(|a| rows.iter().any(|b| a.name == b.name && a.scale != b.scale));
        if differ {
            let mut uarchs: Vec<&str> = rows
                .iter()
                .flat_map(|e| e.uarchs.iter().map(|u| u.label()))
                .collect();
            uarchs.dedup();
            return Err(ImportError::NeedsModel {
                event: name.to_string(),
                uarchs: uarchs.join(", "),
            });
        }
    }
    let mut seen: Vec<&str> = Vec::new();
    rows.retain(|e| {
        let new = !seen.contains(&e.name);
        seen.push(e.name);
        new
    });
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_with_and_without_prefixes_sums_per_event() {
        let text = "# started on Sun\n\
                    \n\
                    1000,,cycles,2000,50.00,,\n\
                    CPU1,500,,cycles,1000,50.00,,\n\
                    250,,instructions:u,2000,100.00,0.25,insn per cycle\n\
                    1.5,msec,task-clock,1500000,100.00,0.5,CPUs utilized\n\
                    <not supported>,,branches,0,100.00,,\n";
        let v = import(text, None).unwrap();
        assert_eq!(v.count(CounterEvent::Cycles, CountMode::All), Some(1500.0));
        let c = v.get(CounterEvent::Cycles).unwrap().all.unwrap();
        assert_eq!(c.raw, 750);
        assert_eq!(c.time_running_ns, 3000);
        assert!(c.multiplexed());
        assert_eq!(
            v.count(CounterEvent::Instructions, CountMode::User),
            Some(250.0)
        );
        assert_eq!(v.count(CounterEvent::Instructions, CountMode::All), None);
        assert_eq!(
            v.count(CounterEvent::TaskClock, CountMode::All),
            Some(1_500_000.0)
        );
        let why = v
            .unavailable_reason(CounterEvent::Branches, CountMode::All)
            .unwrap();
        assert!(why.contains("<not supported>"), "{why}");
    }

    #[test]
    fn interval_lines_are_summed() {
        let text = "1.001,100,,instructions,10,100.00,,\n2.002,300,,instructions,10,100.00,,\n";
        let v = import(text, None).unwrap();
        assert_eq!(
            v.count(CounterEvent::Instructions, CountMode::All),
            Some(400.0)
        );
    }

    #[test]
    fn one_event_in_several_groups_is_averaged_then_summed_per_cpu() {
        // `perf stat -M -A`: cycles in two metric groups on each of two CPUs.
        let text = "CPU0,1000,,ls_not_halted_cyc,10,50.00,,\n\
                    CPU0,1010,,ls_not_halted_cyc,10,50.00,,\n\
                    CPU1,500,,ls_not_halted_cyc,10,50.00,,\n\
                    CPU1,<not counted>,,ls_not_halted_cyc,0,0.00,,\n";
        let v = import(text, Some(Uarch::Zen4)).unwrap();
        // (1000 + 1010) / 2 + 500 cycles, 6 slots each.
        assert_eq!(v.named_value("total_dispatch_slots"), Some(6.0 * 1505.0));
        let no_prefix = "100,,cycles,10,50.00,,\n300,,cycles,10,50.00,,\n";
        let v = import(no_prefix, None).unwrap();
        assert_eq!(v.count(CounterEvent::Cycles, CountMode::All), Some(200.0));
        let c = v.get(CounterEvent::Cycles).unwrap().all.unwrap();
        assert!(!c.multiplexed(), "two halves of the run make all of it");
    }

    #[test]
    fn perfs_other_spellings_become_the_kernels_events() {
        let text = "998790;;TOPDOWN.SLOTS:u;;100.00;;\n\
                    3434;;cpu/INT_MISC.RECOVERY_CYCLES,cmask=1,edge/u;;100.00;;\n\
                    2402;;CPU_CLK_UNHALTED.THREAD_ANY;;100.00;;\n\
                    860;;UOPS_ISSUED.ANY;;100.00;;\n\
                    287017;;cpu-cycles:u;;100.00;;\n";
        let v = import(text, Some(Uarch::IceLakeSp)).unwrap();
        assert_eq!(v.named_value("slots"), Some(998790.0));
        assert_eq!(v.named_value("clears-slots"), Some(5.0 * 3434.0));
        assert_eq!(v.named_value("topdown-total-slots"), Some(2.0 * 2402.0));
        assert_eq!(v.named_value("topdown-slots-issued"), Some(860.0));
        assert_eq!(v.named_value("uops-issued"), Some(860.0));
        assert_eq!(
            v.count(CounterEvent::Cycles, CountMode::User),
            Some(287017.0)
        );
        // Terms after a named event keep it named; raw terms stay whole.
        assert_eq!(
            split_name("cpu/de_no_dispatch_per_slot.no_ops_from_frontend,cmask=0x6/"),
            (
                "de_no_dispatch_per_slot.no_ops_from_frontend,cmask=0x6".into(),
                CountMode::All
            )
        );
    }

    #[test]
    fn json_lines_read_like_csv() {
        let text = r#"{"counter-value" : "4000.000000", "unit" : "", "event" : "cycles", "event-runtime" : 100, "pcnt-running" : 100.00}
{"counter-value" : 1000, "unit" : "", "event" : "topdown-retiring", "event-runtime" : 100, "pcnt-running" : 100.00}
{"metric-value" : "0.5", "metric-unit" : "insn per cycle"}"#;
        let v = import(text, None).unwrap();
        assert_eq!(v.count(CounterEvent::Cycles, CountMode::All), Some(4000.0));
        assert_eq!(v.named_value("topdown-retiring"), Some(1000.0));
    }

    #[test]
    fn vendor_names_become_portable_names_with_the_tables_scale() {
        let text = "1000,,ls_not_halted_cyc,10,100.00,,\n\
                    3000,,ex_ret_ops,10,100.00,,\n\
                    20,,l2_cache_req_stat.ic_dc_miss_in_l2,10,100.00,,\n";
        let v = import(text, Some(Uarch::Zen4)).unwrap();
        assert_eq!(v.named_value("total_dispatch_slots"), Some(6000.0));
        assert_eq!(v.named_value("ex_ret_ops"), Some(3000.0));
        assert_eq!(v.named_value("uops-retired"), Some(3000.0));
        assert_eq!(v.named_value("l2-misses"), Some(20.0));
        let v5 = import(text, Some(Uarch::Zen5)).unwrap();
        assert_eq!(v5.named_value("total_dispatch_slots"), Some(8000.0));
        let e = import(text, None).unwrap_err();
        assert!(
            matches!(&e, ImportError::NeedsModel { event, .. } if event == "ls_not_halted_cyc"),
            "{e}"
        );
    }

    #[test]
    fn pmu_syntax_and_modifiers() {
        assert_eq!(
            split_name("cpu_core/cycles/u"),
            ("cycles".into(), CountMode::User)
        );
        assert_eq!(split_name("cycles:k"), ("cycles".into(), CountMode::Kernel));
        assert_eq!(split_name("cycles:uk"), ("cycles".into(), CountMode::All));
        assert_eq!(
            split_name("cpu/event=0x3c,umask=0x1/"),
            ("cpu/event=0x3c,umask=0x1/".into(), CountMode::All)
        );
        assert_eq!(
            split_name("uncore_imc/cas_count_read/"),
            ("cas_count_read".into(), CountMode::All)
        );
    }

    #[test]
    fn bad_input_names_the_line() {
        let e = import("cycles\nhello,world,x\n", None).unwrap_err();
        assert_eq!(
            e.to_string(),
            "line 1: expected `value,unit,event,...` as `perf stat -x,` writes it, found \"cycles\""
        );
        assert_eq!(import("# nothing\n", None).unwrap_err(), ImportError::Empty);
        let e = import("{not json\n", None).unwrap_err();
        assert!(
            e.to_string().starts_with("line 1: not a JSON object"),
            "{e}"
        );
    }
}
