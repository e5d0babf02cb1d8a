//! Pure exporters, hyperfine style: a run in, bytes out; the caller decides where they
//! go. Neither touches the database, so `--json`/`--csv` work on a run that was never
//! stored.

use smtlab_model::{CellRecord, RunResults};

/// The CSV header, one column per name, in order.
pub const CSV_COLUMNS: [&str; 21] = [
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
];

/// The run as pretty-printed `smtlab.results/1` JSON with a trailing newline: every
/// cell with every raw sample, as [`RunResults`] serialises.
pub fn json(results: &RunResults) -> Vec<u8> {
    // Cannot fail: every map in RunResults has string keys, every type derives
    // Serialize, and writing to a Vec does no I/O. (Non-finite floats would become
    // `null`; the store refuses to save them.)
    let mut out = serde_json::to_vec_pretty(results).unwrap_or_default();
    out.push(b'\n');
    out
}

/// One row per cell, for spreadsheets: the summary of the cell's values plus how it was
/// measured. Columns are [`CSV_COLUMNS`]:
///
/// * `params`: `k=v;k=v` in key order; `placement`: the canonical resolved name
///   (`1c2t`, `2c1t/scatter`); `cpus`: the resolved CPUs as a Linux list (`0-3,8`),
///   empty for `os`.
/// * `ci95_low`/`ci95_high` are `mean -/+ ci95_half_width`; they and `stddev` are empty
///   when the cell has fewer than two samples (there is no spread to report).
/// * `cpu_rate_mean` is work per CPU-second, empty when the cell did not measure it.
/// * Numbers are written in Rust's shortest round-trip form.
pub fn csv(results: &RunResults) -> Vec<u8> {
    let mut w = csv::Writer::from_writer(Vec::new());
    // Writing records to a Vec cannot fail (no I/O, rows of equal length), so the
    // results are ignored rather than unwrapped.
    let _ = w.write_record(CSV_COLUMNS);
    for cell in &results.cells {
        let _ = w.write_record(row(results.run.id, cell));
    }
    w.into_inner().unwrap_or_default()
}

fn row(run_id: i64, cell: &CellRecord) -> [String; 21] {
    let s = &cell.result.summary;
    let spread = s.n >= 2;
    let num = |x: f64| x.to_string();
    let if_spread = |x: f64| if spread { num(x) } else { String::new() };
    let params = cell
        .params
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(";");
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testdata;

    #[test]
    fn csv_has_one_row_per_cell_and_a_fixed_header() {
        let results = testdata::results(7);
        let text = String::from_utf8(csv(&results)).unwrap();
        let mut rd = csv::Reader::from_reader(text.as_bytes());
        assert_eq!(
            rd.headers().unwrap().iter().collect::<Vec<_>>(),
            CSV_COLUMNS
        );
        let rows: Vec<csv::StringRecord> = rd.records().map(Result::unwrap).collect();
        assert_eq!(rows.len(), results.cells.len());
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
    fn json_ends_with_a_newline_and_parses_back() {
        let results = testdata::results(3);
        let bytes = json(&results);
        assert_eq!(bytes.last(), Some(&b'\n'));
        let back: RunResults = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(back, results);
    }
}
