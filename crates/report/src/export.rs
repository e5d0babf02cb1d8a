//! Pure exporters, hyperfine style: a run in, bytes out; the caller decides where they
//! go. Neither touches the database, so `--json`/`--csv` work on a run that was never
//! stored.

use smtlab_model::{CellRecord, RunResults};

/// The CSV header, one column per name, in order: these, then the counter ratios
/// ([`crate::counter_ratios::CSV_RATIO_COLUMNS`], empty where not measured, and the
/// reasons some are not).
pub fn csv_columns() -> Vec<&'static str> {
    let mut v = CELL_COLUMNS.to_vec();
    v.extend(crate::counter_ratios::CSV_RATIO_COLUMNS);
    v.extend(OS_COLUMNS);
    v.extend(DISTURBANCE_COLUMNS);
    v
}

/// What disturbed the cell (`CellResult::disturbance`), each a percentage of the CPU
/// time its CPUs had over its samples, and `disturbed`: why the cell is disturbed,
/// empty when it is not. Empty where nothing was recorded.
const DISTURBANCE_COLUMNS: [&str; 4] = [
    "steal_pct",
    "other_processes_pct",
    "smtlab_other_pct",
    "disturbed",
];

fn disturbance_values(cell: Option<&CellRecord>) -> Vec<String> {
    let Some(d) = cell.and_then(|c| c.result.disturbance.as_ref()) else {
        return vec![String::new(); DISTURBANCE_COLUMNS.len()];
    };
    let pct = |x: Option<f64>| x.map(|x| format!("{:.3}", 100.0 * x)).unwrap_or_default();
    vec![
        pct(d.steal_share()),
        pct(d.foreign_share()),
        pct(d.smtlab_other_share()),
        d.reason().unwrap_or_default(),
    ]
}

/// The OS-time columns after the ratios: the `/proc/stat` split of the cell's CPUs
/// (`os_phase` says whether over the steady state or the whole cell; fractions of
/// `os_ticks`), kernel time by system call of the traced sample as CPU and wall
/// time, and its kernel time in page faults, contended-lock waits and TLB shootdowns
/// received as CPU time and as a percentage of the traced tasks' CPU time.
const OS_COLUMNS: [&str; 17] = [
    "os_phase",
    "os_ticks",
    "os_user",
    "os_system",
    "os_irq",
    "os_softirq",
    "os_iowait",
    "os_idle",
    "os_steal",
    "syscall_cpu_ns",
    "syscall_wall_ns",
    "fault_cpu_ns",
    "fault_cpu_pct",
    "lock_wait_cpu_ns",
    "lock_wait_cpu_pct",
    "tlb_shootdown_cpu_ns",
    "tlb_shootdown_cpu_pct",
];

fn os_values(cell: Option<&CellRecord>) -> Vec<String> {
    let Some(k) = cell.and_then(|c| c.counters.as_ref()) else {
        return vec![String::new(); OS_COLUMNS.len()];
    };
    let mut out = match crate::counters::os_summary(k) {
        Some((phase, ticks, f)) => vec![
            phase.to_string(),
            ticks.to_string(),
            (f.user + f.nice).to_string(),
            f.system.to_string(),
            f.irq.to_string(),
            f.softirq.to_string(),
            f.iowait.to_string(),
            f.idle.to_string(),
            f.steal.to_string(),
        ],
        None => vec![String::new(); 9],
    };
    let text = |x: Option<u64>| x.map(|v| v.to_string()).unwrap_or_default();
    let sys = k.syscalls.as_ref();
    out.push(text(sys.and_then(|s| s.cpu_ns())));
    out.push(text(sys.map(|s| s.wall_ns())));
    let causes = k.kernel_time.as_ref();
    let faults = causes.and_then(|p| p.faults());
    let find = |cause| causes.and_then(|p| p.find(cause).copied());
    use smtlab_model::counters::kernel_time::KernelCause;
    let locks = find(KernelCause::LockWait);
    let tlb = find(KernelCause::TlbShootdownReceived);
    for stat in [faults, locks, tlb] {
        let cpu = stat.and_then(|s| s.cpu_ns);
        out.push(text(cpu));
        out.push(
            cpu.zip(causes)
                .and_then(|(c, p)| p.share(c))
                .map(|f| format!("{:.3}", 100.0 * f))
                .unwrap_or_default(),
        );
    }
    out
}

/// The `/proc/stat` time series of every cell as CSV (paper 003 Figs 1 and 5 as data):
/// one row per cell and sampling interval, the ticks of the cell's CPUs summed, with
/// `steady` true for the intervals of the counted window. Cells without a series have
/// no rows. Times are nanoseconds since the cell's sampler started; intervals of
/// other cells' turns were not sampled, so the rows of an interleaved cell have gaps.
pub fn os_time_csv(results: &RunResults) -> Vec<u8> {
    let mut w = csv::Writer::from_writer(Vec::new());
    let _ = w.write_record([
        "run_id",
        "benchmark",
        "params",
        "placement",
        "cpus",
        "interval",
        "start_ns",
        "end_ns",
        "steady",
        "user_hz",
        "user",
        "nice",
        "system",
        "irq",
        "softirq",
        "iowait",
        "idle",
        "steal",
    ]);
    for cell in &results.cells {
        let Some(k) = cell.counters.as_ref() else {
            continue;
        };
        let Some(series) = k.os_time.as_ref() else {
            continue;
        };
        for (i, iv) in series.intervals.iter().enumerate() {
            let t = iv.all_cpus();
            let steady = k
                .steady_from_ns
                .map(|st| (iv.start_ns + iv.end_ns) / 2 >= st);
            let mut r = vec![
                results.run.id.to_string(),
                cell.benchmark.clone(),
                params_text(&cell.flat_params()),
                cell.placement.name.clone(),
                series.cpus.to_list_string(),
                i.to_string(),
                iv.start_ns.to_string(),
                iv.end_ns.to_string(),
                steady.map(|b| b.to_string()).unwrap_or_default(),
                series.user_hz.to_string(),
            ];
            r.extend(
                [
                    t.user, t.nice, t.system, t.irq, t.softirq, t.iowait, t.idle, t.steal,
                ]
                .iter()
                .map(u64::to_string),
            );
            let _ = w.write_record(r);
        }
    }
    w.into_inner().unwrap_or_default()
}

/// The columns of a cell before its counter ratios.
const CELL_COLUMNS: [&str; 35] = [
    "run_id",
    "benchmark",
    "group",
    "params",
    "placement",
    "cpus",
    "unit",
    "direction",
    "n",
    "median",
    "mean",
    "ci95_low",
    "ci95_high",
    "min",
    "max",
    "p25",
    "p75",
    "stddev",
    "converged",
    "iterations",
    "cpu_rate_mean",
    // Added after the first 21, so scripts that index columns keep working.
    "status",
    "skip_reason",
    "work_unit",
    "instructions_per_unit",
    "cycles_per_unit",
    "cpu_ns_per_unit",
    "context_switches_per_unit",
    "page_faults_per_unit",
    "hostname",
    "kernel",
    "cpu_model",
    "smt_control",
    "tool_version",
    "git_commit",
];

/// The run as pretty-printed `smtlab.results/1` JSON with a trailing newline: every
/// cell with every raw sample, as [`RunResults`] serialises, and `speedups`: the
/// verdict on every pair of placements the terminal and the report judge
/// ([`smtlab_model::verdict::pairs`]: 1c2t over 1c1t, 2c2t over 2c1t, all over cores,
/// half-cores-2t over half-cores-1t,
/// 2c1t over 1c1t), the same figure, interval and words they print, and, for runs with
/// counters, `counter_ratios`: per benchmark the ratios of each placement (CPI, miss
/// rates, per-unit costs, top-down, DRAM bandwidth, the reasons for those left out)
/// and their SMT changes ([`crate::counter_ratios`]). Both are derived from the cells,
/// so a reader of the file ignores them and loses nothing.
pub fn json(results: &RunResults) -> Vec<u8> {
    // Cannot fail: every map in RunResults has string keys, every type derives
    // Serialize, and writing to a Vec does no I/O. (Non-finite floats would become
    // `null`; the store refuses to save them.)
    #[derive(serde::Serialize)]
    struct WithSpeedups<'a> {
        #[serde(flatten)]
        results: &'a RunResults,
        speedups: Vec<smtlab_model::verdict::PairVerdict>,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        counter_ratios: Vec<crate::counter_ratios::RatioGroup>,
    }
    let doc = WithSpeedups {
        results,
        speedups: smtlab_model::verdict::pairs(&results.cells),
        counter_ratios: crate::counter_ratios::groups(results),
    };
    let mut out = serde_json::to_vec_pretty(&doc).unwrap_or_default();
    out.push(b'\n');
    out
}

/// One row per cell, for spreadsheets: the summary of the cell's values plus how it was
/// measured. Columns are [`csv_columns`]:
///
/// * `params`: `k=v;k=v` in key order; `placement`: the canonical resolved name
///   (`1c2t`, `2c1t/scatter`); `cpus`: the resolved CPUs as a Linux list (`0-3,8`),
///   empty for `os`.
/// * `ci95_low`/`ci95_high` are `mean -/+ ci95_half_width`; they and `stddev` are empty
///   when the cell has fewer than two samples (there is no spread to report).
/// * `cpu_rate_mean` is work per CPU-second, empty when the cell did not measure it.
/// * `status` is `measured`, or `skipped` for a cell that could not be measured: its
///   key (`placement` as planned) and `skip_reason`, every figure empty. Skipped cells
///   follow the measured ones.
/// * `work_unit` .. `page_faults_per_unit`: the cell's performance counters per unit of
///   work (`--counters`), empty where not counted (no PMU, run without counters).
/// * `cpi` .. `ratios_omitted`: the counter ratios and top-down and DRAM figures
///   ([`crate::counter_ratios`]), empty where their events were not counted;
///   `ratios_omitted` says why, one reason per `;`.
/// * `os_phase` .. `syscall_wall_ns`: the `/proc/stat` split of the cell's CPUs (iowait
///   apart from idle) and the traced kernel time by system call, CPU and wall; the
///   series itself is [`os_time_csv`].
/// * `hostname` .. `git_commit`: the run's environment, the same on every row, so rows
///   of several runs' CSV files can be concatenated and still say where they were
///   measured. One rectangular table, no comment lines: spreadsheets and data-frame
///   readers take it as it is.
/// * Numbers are written in Rust's shortest round-trip form.
pub fn csv(results: &RunResults) -> Vec<u8> {
    let mut w = csv::Writer::from_writer(Vec::new());
    // Writing records to a Vec cannot fail (no I/O, rows of equal length), so the
    // results are ignored rather than unwrapped.
    let _ = w.write_record(csv_columns());
    let latencies = crate::cpi_latencies::measured(results);
    let mut write = |mut r: Vec<String>, cell: Option<&CellRecord>, skipped: Option<&str>| {
        r.extend(extra(results, cell, skipped));
        r.extend(crate::counter_ratios::csv_values(cell, &latencies));
        r.extend(os_values(cell));
        r.extend(disturbance_values(cell));
        let _ = w.write_record(r);
    };
    for cell in &results.cells {
        write(row(results.run.id, cell).to_vec(), Some(cell), None);
    }
    for skip in &results.skipped {
        let k = &skip.key;
        let mut r = vec![String::new(); 21];
        r[0] = results.run.id.to_string();
        r[1] = k.benchmark.clone();
        r[3] = params_text(&k.flat_params());
        r[4] = k.placement.clone();
        write(r, None, Some(&skip.reason));
    }
    w.into_inner().unwrap_or_default()
}

fn params_text(p: &std::collections::BTreeMap<String, String>) -> String {
    p.iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(";")
}

/// The columns after the first 21: status, counters, environment.
fn extra(results: &RunResults, cell: Option<&CellRecord>, skipped: Option<&str>) -> Vec<String> {
    let opt = |x: Option<f64>| x.map(|v| v.to_string()).unwrap_or_default();
    let per = cell
        .and_then(|c| c.counters.as_ref())
        .and_then(|k| k.per_unit.as_ref());
    let env = &results.run.environment;
    let text = |s: &Option<String>| s.clone().unwrap_or_default();
    vec![
        if skipped.is_some() {
            "skipped"
        } else {
            "measured"
        }
        .to_string(),
        skipped.unwrap_or_default().to_string(),
        per.map(|p| p.unit.clone()).unwrap_or_default(),
        opt(per.and_then(|p| p.instructions_per_unit)),
        opt(per.and_then(|p| p.cycles_per_unit)),
        opt(per.and_then(|p| p.cpu_ns_per_unit)),
        opt(per.and_then(|p| p.context_switches_per_unit)),
        opt(per.and_then(|p| p.page_faults_per_unit)),
        text(&env.hostname),
        text(&env.kernel),
        text(&env.cpu_model),
        text(&env.smt_control),
        env.tool_version.clone(),
        text(&env.git_commit),
    ]
}

fn row(run_id: i64, cell: &CellRecord) -> [String; 21] {
    let s = &cell.result.summary;
    let spread = s.n >= 2;
    let num = |x: f64| x.to_string();
    let if_spread = |x: f64| if spread { num(x) } else { String::new() };
    let params = params_text(&cell.flat_params());
    [
        run_id.to_string(),
        cell.benchmark.clone(),
        cell.group.clone(),
        params,
        cell.placement.name.clone(),
        cell.placement.cpu_set().to_list_string(),
        cell.unit.clone(),
        cell.direction.as_str().to_string(),
        s.n.to_string(),
        num(s.median),
        num(s.mean),
        if_spread(s.mean - s.ci95_half_width),
        if_spread(s.mean + s.ci95_half_width),
        num(s.min),
        num(s.max),
        num(s.p25),
        num(s.p75),
        if_spread(s.stddev),
        cell.result.converged.to_string(),
        cell.result.iterations.to_string(),
        cell.result
            .cpu_rate
            .as_ref()
            .map(|c| num(c.mean))
            .unwrap_or_default(),
    ]
}

// The store's fixture (every field filled, a skipped and a counted cell); one copy
// serves the store's tests and these.
#[cfg(test)]
#[path = "../../store/tests/store/testdata.rs"]
mod testdata;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::export::testdata;

    #[test]
    fn csv_and_json_carry_the_counter_ratios() {
        use smtlab_model::counters::{CountMode, CounterEvent, Reading};
        assert_eq!(
            csv_columns()[35..60],
            crate::counter_ratios::CSV_RATIO_COLUMNS
        );
        assert_eq!(csv_columns()[60..77], OS_COLUMNS);
        assert_eq!(csv_columns()[77..], DISTURBANCE_COLUMNS);
        let mut results = testdata::results(7);
        let i = results
            .cells
            .iter()
            .position(|c| c.counters.is_some())
            .expect("the fixture has a counted cell");
        let k = results.cells[i].counters.as_mut().unwrap();
        k.values
            .events
            .retain(|e| e.event.class() == smtlab_model::counters::EventClass::Software);
        k.values
            .set(CounterEvent::Cycles, CountMode::All, Reading::exact(3000));
        k.values.set(
            CounterEvent::Instructions,
            CountMode::All,
            Reading::exact(2000),
        );
        // 10 mispredicts x 20 assumed cycles over 2000 instructions: 0.1 of the CPI 1.5.
        k.values.set(
            CounterEvent::BranchMisses,
            CountMode::All,
            Reading::exact(10),
        );
        let text = String::from_utf8(csv(&results)).unwrap();
        let mut rd = csv::Reader::from_reader(text.as_bytes());
        let row = rd.records().nth(i).unwrap().unwrap();
        assert_eq!(
            (&row[35], &row[36]),
            ("1.5", &*(2000.0f64 / 3000.0).to_string())
        );
        assert_eq!(&row[37], "", "L1I not counted");
        assert_eq!(csv_columns()[55], "cpi_stack_branch_mispredict");
        assert_eq!((&row[55], &row[58]), ("0.1", "1.4"));
        assert_eq!(&row[49], "", "no L1D miss counted: no stack part");
        assert!(row[59].contains("L1I miss rate"), "{}", &row[59]);
        let doc: serde_json::Value = serde_json::from_slice(&json(&results)).unwrap();
        let groups = doc["counter_ratios"].as_array().expect("counter_ratios");
        let cpi = groups
            .iter()
            .flat_map(|g| g["placements"].as_array().unwrap())
            .flat_map(|p| p[1]["ratios"].as_array().unwrap())
            .find(|r| r["key"] == "cpi")
            .expect("cpi in the JSON");
        assert_eq!(cpi["value"], 1.5);
        let stack = groups
            .iter()
            .flat_map(|g| g["placements"].as_array().unwrap())
            .find_map(|p| p[1].get("cpi_stack"))
            .expect("cpi_stack in the JSON");
        assert_eq!(stack["parts"][0]["key"], "branch_mispredict");
        assert_eq!(stack["other_cpi"], 1.4);
    }

    #[test]
    fn csv_has_one_row_per_cell_and_a_fixed_header() {
        let results = testdata::results(7);
        let text = String::from_utf8(csv(&results)).unwrap();
        let mut rd = csv::Reader::from_reader(text.as_bytes());
        assert_eq!(
            rd.headers().unwrap().iter().collect::<Vec<_>>(),
            csv_columns()
        );
        let rows: Vec<csv::StringRecord> = rd.records().map(Result::unwrap).collect();
        assert_eq!(rows.len(), results.cells.len() + results.skipped.len());
        assert!(
            !results.skipped.is_empty(),
            "the fixture has a skipped cell"
        );
        for (row, skip) in rows[results.cells.len()..].iter().zip(&results.skipped) {
            assert_eq!((&row[21], &row[22]), ("skipped", skip.reason.as_str()));
            assert_eq!(&row[1], skip.key.benchmark);
            assert_eq!(&row[10], "", "no figure for a skipped cell");
        }
        let counted = results.cells.iter().position(|c| {
            c.counters
                .as_ref()
                .and_then(|k| k.per_unit.as_ref())
                .and_then(|p| p.cpu_ns_per_unit)
                .is_some()
        });
        let i = counted.expect("the fixture has a counted cell");
        let want = results.cells[i]
            .counters
            .as_ref()
            .unwrap()
            .per_unit
            .as_ref()
            .unwrap();
        assert_eq!(
            rows[i][26].parse::<f64>().unwrap(),
            want.cpu_ns_per_unit.unwrap()
        );
        for row in &rows {
            assert_eq!(
                row[29].to_string(),
                results.run.environment.hostname.clone().unwrap_or_default()
            );
        }
        for (row, cell) in rows.iter().zip(&results.cells) {
            assert_eq!(&row[0], "7");
            assert_eq!(&row[1], cell.benchmark);
            let mean: f64 = row[10].parse().unwrap();
            assert_eq!(mean, cell.result.summary.mean, "numbers round-trip");
        }
    }

    #[test]
    fn single_sample_cells_leave_spread_columns_empty() {
        let results = testdata::results(1);
        let bytes = csv(&results);
        let mut rd = csv::Reader::from_reader(bytes.as_slice());
        let single = rd
            .records()
            .map(Result::unwrap)
            .find(|r| &r[1] == "syscall")
            .expect("the fixture has a one-sample syscall cell");
        assert_eq!(&single[8], "1");
        assert_eq!((&single[11], &single[12], &single[17]), ("", "", ""));
        assert_eq!(&single[20], "", "no cpu rate measured");
        assert_eq!(&single[5], "0-1");
    }

    #[test]
    fn a_disturbed_cell_carries_its_figures_in_the_csv_and_the_json() {
        let mut results = testdata::results(3);
        results.cells[0].result.disturbance = Some(smtlab_model::Disturbance {
            windows: 100,
            window_ns: 1_000_000_000,
            cpus: 2,
            tick_ns: 10_000_000,
            steal_ns: 400_000_000,
            foreign_ns: Some(20_000_000),
            smtlab_other_ns: Some(4_000_000),
            ..Default::default()
        });
        let bytes = csv(&results);
        let mut rd = csv::Reader::from_reader(bytes.as_slice());
        let header = rd.headers().unwrap().clone();
        let col = |name: &str| header.iter().position(|h| h == name).unwrap();
        let rows: Vec<csv::StringRecord> = rd.records().map(Result::unwrap).collect();
        assert_eq!(&rows[0][col("steal_pct")], "20.000");
        assert_eq!(&rows[0][col("other_processes_pct")], "1.000");
        assert_eq!(&rows[0][col("smtlab_other_pct")], "0.200");
        assert_eq!(&rows[0][col("disturbed")], "steal 20.0%");
        // A cell without the record leaves the columns empty.
        assert_eq!(&rows[1][col("steal_pct")], "");
        let doc: serde_json::Value = serde_json::from_slice(&json(&results)).unwrap();
        assert_eq!(
            doc["cells"][0]["result"]["disturbance"]["steal_ns"],
            400_000_000
        );
        let note = crate::html::machine::disturbed_note(&results).unwrap();
        assert!(note.starts_with("1 cells disturbed"), "{note}");
        assert!(note.contains("steal 20.0%"), "{note}");
    }

    #[test]
    fn cells_whose_cpus_moved_are_one_clause_of_the_note_and_steal_stays_per_cell() {
        let mut results = testdata::results(3);
        let moved = |cell_ns| smtlab_model::HandoffChange {
            from_cpu: 0,
            to_cpu: 1,
            start_ns: 226.3,
            cell_ns,
        };
        for (cell, ns) in results.cells.iter_mut().zip([23.4, 26.1]) {
            cell.result.disturbance = Some(smtlab_model::Disturbance {
                handoff_changed: vec![moved(ns)],
                ..Default::default()
            });
        }
        let steal = results.cells[1].result.disturbance.as_mut().unwrap();
        (steal.windows, steal.window_ns, steal.cpus) = (100, 1_000_000_000, 2);
        (steal.tick_ns, steal.steal_ns) = (10_000_000, 400_000_000);
        let note = crate::html::machine::disturbed_note(&results).unwrap();
        let names = &results.cells[1].benchmark;
        let expected = "2 cells disturbed (steal or other processes took more than 2% of their \
             CPUs' time, or their CPUs moved; called neither faster nor slower): 2 on two CPUs \
             or more measured while their CPUs had moved (CPU 0-1 handoff 23-26 ns, 226 ns at \
             the run's start): ";
        assert!(note.starts_with(expected), "{note}");
        let steal_part = format!(
            "; {names} on {}: steal 20.0%;",
            results.cells[1].placement.name
        );
        assert!(note.contains(&steal_part), "{note}");
        assert_eq!(note.matches("CPUs had moved").count(), 1, "{note}");
    }

    #[test]
    fn json_ends_with_a_newline_and_parses_back() {
        let results = testdata::results(3);
        let bytes = json(&results);
        assert_eq!(bytes.last(), Some(&b'\n'));
        let back: RunResults = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(back, results);
    }
}
