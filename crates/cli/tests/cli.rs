//! End-to-end tests of the `smtlab` binary: one test binary for the whole CLI.

use std::path::PathBuf;

use assert_cmd::Command;
use predicates::prelude::*;
use serde_json::Value;

fn smtlab() -> Command {
    Command::cargo_bin("smtlab").expect("the smtlab binary is built")
}

fn json_of(cmd: &mut Command) -> Value {
    let out = cmd.assert().success().get_output().stdout.clone();
    serde_json::from_slice(&out).expect("stdout is JSON")
}

/// Standard output of a command that must succeed.
fn stdout_of(cmd: &mut Command) -> String {
    let out = cmd.assert().success().get_output().stdout.clone();
    String::from_utf8(out).expect("stdout is UTF-8")
}

fn fixture(name: &str) -> (tempfile::TempDir, PathBuf) {
    smtlab_fixtures::extract(name)
}

fn sorted(v: &Value) -> Vec<u64> {
    let mut x: Vec<u64> = v
        .as_array()
        .expect("array")
        .iter()
        .map(|n| n.as_u64().expect("number"))
        .collect();
    x.sort();
    x
}

/// All cores of a topology JSON, with and without a package.
fn cores(topo: &Value) -> Vec<Value> {
    let mut out: Vec<Value> = topo["packages"]
        .as_array()
        .expect("packages")
        .iter()
        .flat_map(|p| p["cores"].as_array().expect("cores").clone())
        .collect();
    if let Some(loose) = topo["cores_without_package"].as_array() {
        out.extend(loose.iter().cloned());
    }
    out
}

mod topo {
    use super::*;

    /// The output the guide's topology page shows under `$ COMMAND`, up to the next
    /// prompt or the end of its block.
    fn guide_output(command: &str) -> String {
        let page = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../docs/guide/topology.md"
        ))
        .unwrap();
        let start = page
            .find(&format!("$ {command}\n"))
            .unwrap_or_else(|| panic!("docs/guide/topology.md has no `$ {command}`"));
        let rest = &page[start + command.len() + 3..];
        let end = [rest.find("\n$ "), rest.find("```")]
            .into_iter()
            .flatten()
            .min()
            .unwrap();
        rest[..end].trim_end().to_string()
    }

    #[test]
    fn the_guide_saved_tree_examples_are_what_smtlab_prints() {
        // The guide unpacks this fixture into `skx` and reads it.
        let (_keep, dir) = fixture("32intel64-2p8co2t+8ve");
        for (command, args) in [
            (
                "smtlab topo --sysfs skx --view boxes",
                &["topo", "--view", "boxes"][..],
            ),
            ("smtlab placements --sysfs skx", &["placements"][..]),
        ] {
            let out = stdout_of(smtlab().args(args).arg("--sysfs").arg(&dir));
            assert_eq!(out.trim_end(), guide_output(command), "{command}");
        }
    }

    #[test]
    fn human_output_ends_with_the_verdict() {
        let text = stdout_of(smtlab().arg("topo"));
        let last = text.lines().last().unwrap();
        assert!(last.contains(" CPUs") || last.contains(" CPU;"), "{last}");
        assert!(last.contains("SMT"), "{last}");
        assert!(text.contains("CPU  Package"), "{text}");
    }

    #[test]
    fn json_on_this_machine_follows_the_contract() {
        let t = json_of(smtlab().args(["topo", "--json"]));
        assert_eq!(t["schema"], "smtlab.topology/1");
        assert!(!t["cpus"].as_array().unwrap().is_empty());
        for key in ["offline_cpus", "packages", "numa_nodes", "caches"] {
            assert!(t[key].is_array(), "{key} missing");
        }
        assert!(t["smt"]["threads_per_core_min"].as_u64().unwrap() >= 1);
        assert!(t["smt"].get("control").is_some());
    }

    #[test]
    fn smt_fixture_table_and_verdict() {
        let (_dir, root) = fixture("32intel64-2p8co2t+8ve");
        let text = stdout_of(
            smtlab()
                .args(["topo", "--view", "both", "--sysfs"])
                .arg(&root),
        );
        let text = text.replace(&root.display().to_string(), "<root>");
        insta::assert_snapshot!("topo_32intel64", text);
    }

    #[test]
    fn svg_picture_of_smt_fixtures() {
        for (name, cpus, cores, packages) in [
            ("32intel64-2p8co2t+8ve", 32, 16, 2),
            ("16em64t-4s2c2t", 16, 8, 4),
        ] {
            let (dir, root) = fixture(name);
            let file = dir.path().join("topo.svg");
            smtlab()
                .args(["topo", "--view", "boxes", "--sysfs"])
                .arg(&root)
                .arg("--svg")
                .arg(&file)
                .assert()
                .success();
            let svg = std::fs::read_to_string(&file).unwrap();
            assert!(svg.starts_with("<?xml"), "{name}");
            assert!(svg.trim_end().ends_with("</svg>"), "{name}");
            for cpu in 0..cpus {
                assert!(
                    svg.contains(&format!(">CPU {cpu}</text>")),
                    "{name}: CPU {cpu}"
                );
            }
            assert_eq!(svg.matches("<title>Core ").count(), cores, "{name}");
            assert_eq!(svg.matches(">Package ").count(), packages, "{name}");
            assert!(svg.contains("SMT sibling of CPUs"), "{name}");
        }
        smtlab()
            .args(["topo", "--svg", "/nonexistent/dir/t.svg"])
            .assert()
            .failure()
            .stderr(predicate::str::contains(
                "cannot write /nonexistent/dir/t.svg",
            ));
    }

    #[test]
    fn hybrid_and_packageless_verdicts() {
        let verdict = |name: &str| {
            let (_dir, root) = fixture(name);
            let out = smtlab()
                .args(["topo", "--sysfs"])
                .arg(&root)
                .output()
                .unwrap();
            assert!(out.status.success());
            String::from_utf8(out.stdout)
                .unwrap()
                .lines()
                .last()
                .unwrap()
                .to_string()
        };
        let hybrid = verdict("20em64t-hybrid-1p6c2t+2ca4co1t");
        assert!(
            hybrid.starts_with("14 cores (6 x 2 threads + 8 x 1 thread) = 20 CPUs"),
            "{hybrid}"
        );
        assert!(hybrid.contains("SMT on some cores"), "{hybrid}");
        assert!(verdict("2ps3-2t").starts_with("1 core x 2 threads = 2 CPUs; SMT on"));
        assert!(
            verdict("16amd64-8n2c")
                .starts_with("8 packages x 2 cores x 1 thread = 16 CPUs; no SMT visible")
        );
    }

    #[test]
    fn json_reproduces_hwloc_on_every_fixture() {
        let truth = smtlab_fixtures::ground_truth();
        let mut mismatches = Vec::new();
        for m in truth.as_array().unwrap() {
            let name = m["name"].as_str().unwrap();
            let (_dir, root) = fixture(name);
            let t = json_of(smtlab().args(["topo", "--json", "--sysfs"]).arg(&root));
            let cores = cores(&t);
            let mut groups: Vec<Vec<u64>> = cores.iter().map(|c| sorted(&c["cpus"])).collect();
            groups.sort();
            let mut want_groups: Vec<Vec<u64>> = m["sibling_groups"]
                .as_array()
                .unwrap()
                .iter()
                .map(sorted)
                .collect();
            want_groups.sort();
            let checks = [
                (
                    "packages",
                    t["packages"].as_array().unwrap().len() as u64
                        == m["packages"].as_u64().unwrap(),
                ),
                ("cores", cores.len() as u64 == m["cores"].as_u64().unwrap()),
                (
                    "pus",
                    t["cpus"].as_array().unwrap().len() as u64 == m["pus"].as_u64().unwrap(),
                ),
                ("sibling_groups", groups == want_groups),
                (
                    "offline_cpus",
                    sorted(&t["offline_cpus"]) == sorted(&m["offline_cpus"]),
                ),
            ];
            for (field, ok) in checks {
                if !ok {
                    mismatches.push(format!("{name}: {field}"));
                }
            }
        }
        assert!(
            mismatches.is_empty(),
            "disagreements with hwloc: {mismatches:#?}"
        );
    }

    #[test]
    fn a_missing_tree_is_one_clear_line() {
        smtlab()
            .args(["topo", "--sysfs", "/nonexistent/smtlab-tree"])
            .assert()
            .failure()
            .stderr(predicate::str::contains("/nonexistent/smtlab-tree"))
            .stderr(predicate::function(|s: &str| s.lines().count() == 1));
    }
}

mod placements {
    use super::*;

    #[test]
    fn this_machine_lists_what_it_can_and_cannot_do() {
        let text = stdout_of(smtlab().arg("placements"));
        assert!(text.contains("1c1t"), "{text}");
        let t = json_of(smtlab().args(["topo", "--json"]));
        if t["smt"]["threads_per_core_max"].as_u64() == Some(1) {
            assert!(text.contains("Not possible on this machine"), "{text}");
            assert!(text.contains("no SMT"), "{text}");
        }
    }

    #[test]
    fn smt_fixture_json_has_exact_cpus() {
        let (_dir, root) = fixture("32intel64-2p8co2t+8ve");
        let v = json_of(
            smtlab()
                .args(["placements", "--json", "--sysfs"])
                .arg(&root),
        );
        assert_eq!(v["schema"], "smtlab.placements/1");
        let find = |spec: &str| {
            v["placements"]
                .as_array()
                .unwrap()
                .iter()
                .find(|e| e["spec"] == spec)
                .unwrap_or_else(|| panic!("{spec} listed"))
                .clone()
        };
        assert_eq!(
            find("1c2t")["placement"]["cpus"],
            serde_json::json!([0, 16])
        );
        assert_eq!(find("2c1t")["placement"]["packages"], 1);
        assert_eq!(find("2c1t/scatter")["placement"]["packages"], 2);
        assert_eq!(
            find("all")["placement"]["cpus"].as_array().unwrap().len(),
            32
        );
    }

    #[test]
    fn explicit_placements_and_their_errors() {
        let (_dir, root) = fixture("16amd64-8n2c");
        // 1c2t cannot be had there: listed with its reason, and the command fails.
        let out = smtlab()
            .args(["placements", "--sysfs"])
            .arg(&root)
            .args(["2P", "1c2t", "cpus=0,3"])
            .assert()
            .code(1);
        let text = String::from_utf8_lossy(&out.get_output().stdout).to_string();
        insta::assert_snapshot!("placements_16amd64_explicit", text);
    }

    #[test]
    fn a_named_placement_the_machine_cannot_satisfy_fails_the_command() {
        let (_dir, root) = fixture("16amd64-8n2c");
        let out = smtlab()
            .args(["placements", "--sysfs"])
            .arg(&root)
            .args(["1c1t,cpus=0,3", "64c1t"])
            .assert()
            .code(1);
        let text = String::from_utf8_lossy(&out.get_output().stdout).to_string();
        assert!(text.contains("cpus=0,3"), "comma list kept whole: {text}");
        assert!(text.contains("64c1t"), "{text}");
        assert!(text.contains("Not possible on this machine"), "{text}");
    }

    #[test]
    fn a_malformed_placement_is_rejected_with_what_exists() {
        smtlab()
            .args(["placements", "3x"])
            .assert()
            .failure()
            .stderr(predicate::str::contains("\"3x\""))
            .stderr(predicate::str::contains("1c2t"));
    }
}

mod catalog {
    use super::*;

    #[test]
    fn list_shows_every_group_with_units_and_direction() {
        let text = stdout_of(smtlab().arg("list"));
        for name in [
            "int-ops",
            "mem-read",
            "pthread-create",
            "null-syscall",
            "fork-sh",
        ] {
            assert!(text.contains(name), "{name} missing from list");
        }
        let v = json_of(smtlab().args(["list", "--json"]));
        let all = v.as_array().unwrap();
        assert!(all.len() >= 26, "{} benchmarks", all.len());
        for b in all {
            assert!(!b["unit"].as_str().unwrap().is_empty());
            assert!(["higher", "lower"].contains(&b["direction"].as_str().unwrap()));
        }
    }

    #[test]
    fn list_names_the_copying_server_and_the_irq_setting_of_the_network_workloads() {
        let v = json_of(smtlab().args(["list", "--json"]));
        let all = v.as_array().unwrap();
        let param = |bench: &str, name: &str| -> Option<serde_json::Value> {
            let b = all.iter().find(|b| b["name"] == bench)?;
            b["params"]
                .as_array()?
                .iter()
                .find(|p| p["name"] == name)
                .cloned()
        };
        for bench in ["web-static", "web-capacity", "web-slo"] {
            let server = param(bench, "server").unwrap().to_string();
            assert!(server.contains("seda"), "{bench}: {server}");
        }
        for bench in [
            "web-static",
            "web-capacity",
            "web-slo",
            "chat",
            "tbench",
            "tcp-stream",
            "tcp-rr",
        ] {
            let irq = param(bench, "irq").unwrap_or_else(|| panic!("{bench} has no irq"));
            assert_eq!(irq["default"], "none", "{bench}");
        }
        // Not a network workload: no irq.
        assert!(param("dbench", "irq").is_none());
        let text = stdout_of(smtlab().args(["list", "--wide"]));
        assert!(text.contains("seda: staged and copying"), "{text}");
    }

    #[test]
    fn bench_json_keeps_raw_samples_and_placement_cpus() {
        let v = json_of(smtlab().args(["bench", "null-syscall", "--quick", "--json"]));
        assert_eq!(v["schema"], "smtlab.results/1");
        assert!(v["run"]["environment"]["kernel"].is_string());
        assert_eq!(v["run"]["topology"]["schema"], "smtlab.topology/1");
        let cell = &v["cells"][0];
        assert_eq!(cell["benchmark"], "null-syscall");
        assert_eq!(cell["unit"], "ns");
        assert_eq!(cell["direction"], "lower");
        assert_eq!(cell["placement"]["name"], "1c1t");
        let cpu = cell["placement"]["cpus"][0].as_u64().unwrap();
        let samples = cell["result"]["samples"].as_array().unwrap();
        assert!(samples.len() >= 3);
        for s in samples {
            assert!(s["value"].as_f64().unwrap() > 0.0);
            assert_eq!(
                s["cpus"][0].as_u64().unwrap(),
                cpu,
                "ran on the placement's CPU"
            );
        }
        assert!(cell["result"]["summary"]["median"].as_f64().unwrap() > 0.0);
    }

    /// The os rows measure in a lean child of the smtlab binary, alone in its process:
    /// a shared descriptor table would make `read` 1.3-1.5x slower.
    #[test]
    fn os_benchmarks_measure_in_a_single_threaded_process() {
        let v = json_of(smtlab().args(["bench", "read", "--quick", "--json"]));
        let cell = &v["cells"][0];
        assert_eq!(cell["benchmark"], "read");
        let samples = cell["result"]["samples"].as_array().unwrap();
        assert!(!samples.is_empty());
        for s in samples {
            assert_eq!(
                s["metrics"]["measuring_process_threads"].as_f64(),
                Some(1.0),
                "{s}"
            );
        }
    }

    /// Without smtlab-os-child beside it, smtlab measures from a copy of itself: still one
    /// thread, and the fork rows say why they read high.
    #[test]
    fn without_the_small_program_smtlab_measures_from_itself() {
        let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
        let exe = dir.path().join("smtlab");
        let built = assert_cmd::cargo::cargo_bin("smtlab");
        if std::fs::hard_link(&built, &exe).is_err() {
            std::fs::copy(&built, &exe).unwrap();
        }
        let out = Command::new(&exe)
            .args(["bench", "read,fork-exit", "--quick", "--json"])
            .assert()
            .success()
            .get_output()
            .clone();
        let v: Value = serde_json::from_slice(&out.stdout).expect("stdout is JSON");
        let cells = v["cells"].as_array().unwrap();
        assert_eq!(cells.len(), 2);
        for cell in cells {
            for s in cell["result"]["samples"].as_array().unwrap() {
                assert_eq!(s["metrics"]["measuring_process_threads"], 1.0, "{s}");
            }
        }
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("fork-exit: measured from the smtlab binary itself"),
            "{err}"
        );
        assert!(!err.contains("read: measured from"), "{err}");
        // A run keeps the note with its results, not only on standard error.
        let db = dir.path().join("r.db");
        Command::new(&exe)
            .args([
                "run",
                "--suite",
                "quick",
                "--bench",
                "fork-exit",
                "--placements",
                "1c1t",
            ])
            .arg("--db")
            .arg(&db)
            .assert()
            .success();
        let out = Command::new(&exe)
            .args(["report", "--json"])
            .arg("--db")
            .arg(&db)
            .assert()
            .success()
            .get_output()
            .stdout
            .clone();
        let v: Value = serde_json::from_slice(&out).expect("report JSON");
        let notes = v["run"]["notes"].to_string();
        assert!(
            notes.contains("fork-exit: measured from the smtlab binary itself"),
            "{notes}"
        );
    }

    #[test]
    fn bench_compares_placements_to_the_first() {
        let text =
            stdout_of(smtlab().args(["bench", "int-ops", "--quick", "-p", "1c1t", "-p", "2c1t"]));
        let row = text
            .lines()
            .find(|l| l.starts_with("2c1t"))
            .expect("2c1t row");
        assert!(row.contains("x ["), "{row}");
        assert!(text.contains("iterations/sample"), "{text}");
    }

    #[test]
    fn repeated_rounds_take_turns_and_pool_their_samples() {
        let v = json_of(smtlab().args([
            "bench", "int-ops", "--quick", "--repeat", "3", "-p", "1c1t", "-p", "cpus=0", "--json",
        ]));
        let cells = v["cells"].as_array().unwrap();
        assert_eq!(cells.len(), 2, "one pooled cell per placement");
        for cell in cells {
            let rounds = cell["result"]["rounds"].as_array().unwrap();
            assert_eq!(rounds.len(), 3);
            let per_round: u64 = rounds
                .iter()
                .map(|r| r["summary"]["n"].as_u64().unwrap())
                .sum();
            let samples = cell["result"]["samples"].as_array().unwrap().len() as u64;
            assert_eq!(per_round, samples);
            assert_eq!(cell["result"]["summary"]["n"].as_u64().unwrap(), samples);
        }
        assert_eq!(v["comparisons"].as_array().unwrap().len(), 1);

        let text = stdout_of(smtlab().args(["bench", "int-ops", "--quick", "--repeat", "2"]));
        assert!(text.contains("2 rounds, medians"), "{text}");
        // One round is the plain measurement: no rounds recorded.
        let one = json_of(smtlab().args(["bench", "int-ops", "--quick", "--json"]));
        assert!(one["cells"][0]["result"].get("rounds").is_none());
    }

    #[test]
    fn interleaved_placements_are_measured_together() {
        let v = json_of(smtlab().args([
            "bench",
            "null-syscall",
            "mem-read",
            "--quick",
            "--interleave",
            "-p",
            "1c1t",
            "-p",
            "cpus=0",
            "--json",
        ]));
        let cells = v["cells"].as_array().unwrap();
        assert_eq!(cells.len(), 4);
        for cell in cells {
            // At least one sample each (a busy machine may use up the quick budget early).
            assert!(cell["result"]["summary"]["n"].as_u64().unwrap() >= 1);
            assert_eq!(cell["result"]["samples"][0]["cpus"][0], 0);
        }
        assert_eq!(v["comparisons"].as_array().unwrap().len(), 2);
    }

    #[test]
    fn interleaved_rounds_count_each_cell_on_its_own() {
        let v = json_of(smtlab().args([
            "bench",
            "null-syscall",
            "--quick",
            "--interleave",
            "--repeat",
            "2",
            "--counters",
            "-p",
            "1c1t",
            "-p",
            "cpus=0",
            "--json",
        ]));
        let cells = v["cells"].as_array().unwrap();
        assert_eq!(cells.len(), 2);
        for cell in cells {
            assert_eq!(cell["result"]["rounds"].as_array().unwrap().len(), 2);
            let counters = &cell["counters"];
            assert!(counters.is_object(), "counters recorded: {cell}");
            let window = counters["window"].as_str().unwrap();
            assert!(window.contains("own samples"), "{window}");
            // Interleaved cells share CPUs: /proc/stat is read only while each cell
            // works, so each keeps its own OS time series.
            assert!(counters["os_time"]["intervals"].is_array(), "{counters}");
            assert!(counters["os_time_unavailable"].is_null(), "{counters}");
        }
    }

    #[test]
    fn a_repeated_param_is_a_sweep_compared_within_each_value() {
        let v = json_of(smtlab().args([
            "bench",
            "select-file",
            "--quick",
            "--param",
            "fds=3",
            "--param",
            "fds=5",
            "-p",
            "1c1t",
            "-p",
            "cpus=0",
            "--json",
        ]));
        let fds: Vec<&str> = v["cells"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["params"]["fds"].as_str().unwrap())
            .collect();
        assert_eq!(fds, ["3", "3", "5", "5"]);
        assert_eq!(v["comparisons"].as_array().unwrap().len(), 2);
    }

    #[test]
    fn bad_repeat_counts_are_refused() {
        smtlab()
            .args(["bench", "int-ops", "--repeat", "0"])
            .assert()
            .failure()
            .stderr(predicate::str::contains("--repeat"));
    }

    #[test]
    fn bench_errors_name_what_exists() {
        smtlab()
            .args(["bench", "nope"])
            .assert()
            .failure()
            .stderr(predicate::str::contains("unknown benchmark \"nope\""))
            .stderr(predicate::str::contains("`smtlab list` shows them all"));
        smtlab()
            .args(["bench", "mem-raed"])
            .assert()
            .failure()
            .stderr(predicate::str::contains("did you mean mem-read"));
        smtlab()
            .args(["bench", "select-tcp", "--param", "fd=3"])
            .assert()
            .failure()
            .stderr(predicate::str::contains("it accepts: fds"));
        smtlab()
            .args(["bench", "null-syscall", "-p", "9c9t"])
            .assert()
            .failure()
            .stderr(predicate::str::contains("9c9t"));
        // A value the benchmark cannot take fails before any table is printed.
        smtlab()
            .args(["bench", "int-ops", "--quick", "--param", "threads=lots"])
            .assert()
            .failure()
            .stdout(predicate::str::is_empty())
            .stderr(predicate::str::contains("threads"));
        // A client CPU list that is not one.
        smtlab()
            .args(["bench", "null-syscall", "--client-cpus", "x"])
            .assert()
            .failure()
            .stderr(predicate::str::contains("CPU list"));
    }

    #[test]
    fn bench_refuses_smt_placements_without_smt() {
        let t = json_of(smtlab().args(["topo", "--json"]));
        if t["smt"]["threads_per_core_max"].as_u64() != Some(1) {
            eprintln!("skipped: this machine has SMT");
            return;
        }
        smtlab()
            .args(["bench", "null-syscall", "-p", "1c2t"])
            .assert()
            .failure()
            .stderr(predicate::str::contains("no SMT"));
    }
}

mod runs {
    use super::*;
    use std::path::Path;
    use std::time::{Duration, Instant};

    fn db_arg(db: &Path) -> [String; 2] {
        ["--db".into(), db.display().to_string()]
    }

    fn listing(db: &Path) -> Vec<Value> {
        let v = json_of(smtlab().arg("runs").args(db_arg(db)).arg("--json"));
        v.as_array().unwrap().clone()
    }

    /// A run whose every cell is skipped (c2c-latency needs two CPUs, `1c1t` has one)
    /// stored nothing: it fails, and stays interrupted for `--resume`.
    #[test]
    fn a_run_that_stores_no_cell_fails_and_is_not_finished() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("r.db");
        let out = smtlab()
            .args(["run", "--suite", "quick", "--bench", "c2c-latency"])
            .args(["--placements", "1c1t"])
            .args(db_arg(&db))
            .assert()
            .failure()
            .get_output()
            .clone();
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert!(
            stderr.contains("run 1 stored no cell (1 skipped"),
            "{stderr}"
        );
        assert!(!stderr.contains("finished"), "{stderr}");
        let runs = listing(&db);
        assert_eq!(runs[0]["status"], "interrupted");
        assert_eq!(runs[0]["cells_done"], 0);
        assert_eq!(runs[0]["cells_skipped"], 1);
    }

    #[test]
    fn quick_suite_end_to_end_with_exports() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("r.db");
        let out = smtlab()
            .args([
                "run",
                "--suite",
                "quick",
                "--bench",
                "null-syscall,int-ops,c2c-latency",
            ])
            .args(["--placements", "1c1t,2c1t"])
            .args(db_arg(&db))
            .assert()
            .success()
            .get_output()
            .clone();
        let stdout = String::from_utf8(out.stdout).unwrap();
        assert!(
            stdout.contains("int-ops"),
            "cells printed as they finish: {stdout}"
        );
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert!(stderr.contains("run 1 finished"), "{stderr}");
        // Where the time went: each benchmark's row, c2c-latency's skipped cell said.
        assert!(
            stderr.contains("where it went and what it bought"),
            "{stderr}"
        );
        let c2c = stderr.lines().find(|l| l.starts_with("c2c-latency "));
        assert!(c2c.is_some_and(|l| l.contains(" 1/2 ")), "{stderr}");

        let runs = listing(&db);
        assert_eq!(runs.len(), 1);
        assert_eq!(runs[0]["status"], "finished");
        // c2c-latency cannot run on one CPU: skipped with its reason, not lost.
        assert_eq!(runs[0]["cells_done"], 5);
        assert_eq!(runs[0]["cells_skipped"], 1);
        assert_eq!(runs[0]["cells_planned"], 6);

        let json = json_of(
            smtlab()
                .args(["report", "latest", "--json"])
                .args(db_arg(&db)),
        );
        assert_eq!(json["schema"], "smtlab.results/1");
        assert_eq!(json["cells"].as_array().unwrap().len(), 5);
        assert!(json["skipped"][0]["reason"].as_str().unwrap().contains("2"));

        let csv = stdout_of(smtlab().args(["report", "1", "--csv"]).args(db_arg(&db)));
        assert_eq!(
            csv.lines().count(),
            7,
            "header + one row per cell and skip:\n{csv}"
        );
        assert!(csv.starts_with("run_id,benchmark,"));

        let html = dir.path().join("report.html");
        smtlab()
            .args(["report", "1", "-o"])
            .arg(&html)
            .args(db_arg(&db))
            .assert()
            .success();
        let page = std::fs::read_to_string(&html).unwrap();
        for id in ["machine", "scaling", "os-latency", "cells"] {
            assert!(
                page.contains(&format!("id=\"{id}\"")),
                "section {id} missing"
            );
        }
        // No thread benchmark ran: no empty latency section, one line saying why.
        assert!(page.contains("<li>Latency distributions: no per-event times"));
        // Without SMT there is no yield: the section is named at the top with the reason.
        assert!(
            page.contains("id=\"smt-yield\"") || page.contains("<li>SMT yield: "),
            "SMT yield neither drawn nor explained"
        );

        let text = smtlab()
            .arg("report")
            .args(db_arg(&db))
            .assert()
            .success()
            .get_output()
            .stdout
            .clone();
        let text = String::from_utf8(text).unwrap();
        assert!(text.contains("null-syscall (ns, lower is better)"));
        // The run measured the core clock; time figures read in cycles at it.
        let ghz = json["run"]["environment"]["core_clock_ghz"]
            .as_f64()
            .unwrap();
        assert!((0.4..7.0).contains(&ghz), "{ghz} GHz");
        assert!(
            text.contains(&format!("median in cycles at {ghz:.3} GHz: 1c1t ")),
            "{text}"
        );
    }

    #[test]
    fn dry_run_prints_the_plan_with_time_and_memory_and_stores_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("r.db");
        let out = stdout_of(
            smtlab()
                .args([
                    "run",
                    "--suite",
                    "quick",
                    "--bench",
                    "null-syscall,mem-read",
                ])
                .args(["--placements", "1c1t,cpus=0", "--dry-run", "--wide"])
                .args(db_arg(&db)),
        );
        assert!(
            out.contains("null-syscall") && out.contains("mem-read"),
            "{out}"
        );
        assert!(out.contains("plan: 4 cells in 2 groups"), "{out}");
        assert!(out.contains("time: about "), "{out}");
        // Two placements of mem-read at 16 MiB a thread, interleaved: 32 MiB at once.
        assert!(out.contains("memory: at most 32 MiB"), "{out}");
        assert!(out.contains("bound "), "{out}");
        assert!(!db.exists(), "a dry run stores nothing");
        // It cannot be combined with a resume.
        smtlab()
            .args(["run", "--dry-run", "--resume"])
            .args(db_arg(&db))
            .assert()
            .failure();
    }

    #[test]
    fn run_interleaves_each_benchmarks_placements_unless_told_not_to() {
        for (flags, interleaved) in [
            (vec!["--repeat", "2"], true),
            (vec!["--no-interleave"], false),
        ] {
            let dir = tempfile::tempdir().unwrap();
            let db = dir.path().join("r.db");
            let out = smtlab()
                .args(["run", "--suite", "quick", "--bench", "null-syscall"])
                .args(["--placements", "1c1t,cpus=0", "--counters"])
                .args(&flags)
                .args(db_arg(&db))
                .assert()
                .success()
                .get_output()
                .stdout
                .clone();
            // The rounds of --repeat reach the records (one line per cell says so).
            let rounds = String::from_utf8(out)
                .unwrap()
                .matches("in 2 rounds")
                .count();
            assert_eq!(rounds, if interleaved { 2 } else { 0 }, "{flags:?}");
            let r = json_of(smtlab().args(["report", "--json"]).args(db_arg(&db)));
            let cells = r["cells"].as_array().unwrap();
            assert_eq!(cells.len(), 2);
            for cell in cells {
                // The counted window says whether other placements took turns.
                match cell["counters"]["window"].as_str() {
                    Some(w) => assert_eq!(w.contains("own samples"), interleaved, "{w}"),
                    None => eprintln!("no counters here: {}", cell["counters"]),
                }
            }
        }
    }

    #[test]
    fn a_killed_run_keeps_its_cells_and_resumes() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("r.db");
        let bin = assert_cmd::cargo::cargo_bin("smtlab");
        let mut child = std::process::Command::new(&bin)
            .args(["run", "--bench", "null-syscall,read,write,fstat"])
            .args(["--placements", "1c1t,2c1t"])
            .args(db_arg(&db))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let t0 = Instant::now();
        let mut done = 0;
        while done == 0 && t0.elapsed() < Duration::from_secs(60) {
            std::thread::sleep(Duration::from_millis(20));
            if db.exists()
                && let Ok(out) = std::process::Command::new(&bin)
                    .args(["runs", "--json"])
                    .args(db_arg(&db))
                    .output()
                && let Ok(v) = serde_json::from_slice::<Value>(&out.stdout)
            {
                done = v[0]["cells_done"].as_u64().unwrap_or(0);
            }
        }
        // SIGKILL: no chance to clean up, as in a crash.
        child.kill().unwrap();
        smtlab_fixtures::bounded::wait(&mut child, "the child process");
        assert!(done >= 1, "a first cell was saved before the kill");
        let runs = listing(&db);
        let saved = runs[0]["cells_done"].as_u64().unwrap();
        assert!(saved >= done);
        if saved < 8 {
            // Stored as running, but no live process measures it any more.
            assert_eq!(runs[0]["status"], "interrupted");
        }
        smtlab()
            .args(["run", "--resume"])
            .args(db_arg(&db))
            .assert()
            .success();
        let runs = listing(&db);
        assert_eq!(runs.len(), 1, "resumed, not restarted");
        assert_eq!(runs[0]["status"], "finished");
        assert_eq!(runs[0]["cells_done"], 8);
        smtlab()
            .args(["run", "--resume"])
            .args(db_arg(&db))
            .assert()
            .failure()
            .stderr(predicate::str::contains("no unfinished run"));
    }

    #[test]
    fn compare_two_runs_and_results_files() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("r.db");
        for _ in 0..2 {
            smtlab()
                .args(["run", "--suite", "quick", "--bench", "null-syscall,int-ops"])
                .args(["--placements", "1c1t"])
                .args(db_arg(&db))
                .assert()
                .success();
        }
        let text = stdout_of(smtlab().args(["compare", "1", "2"]).args(db_arg(&db)));
        assert!(
            text.contains("null-syscall") && text.contains("int-ops"),
            "{text}"
        );
        assert!(text.to_lowercase().contains("geometric mean"), "{text}");
        // Two runs and nothing else: the default floor, named as such.
        assert!(
            text.contains("between runs (default floor (not measured))"),
            "{text}"
        );
        smtlab()
            .args(["compare", "1", "2", "--between-runs", "store"])
            .args(db_arg(&db))
            .assert()
            .failure()
            .stderr(predicate::str::contains("--between-runs store: "));
        // A third run of the same setup is a stored repeat of A's (B never joins A).
        smtlab()
            .args(["run", "--suite", "quick", "--bench", "null-syscall,int-ops"])
            .args(["--placements", "1c1t"])
            .args(db_arg(&db))
            .assert()
            .success();
        let v = json_of(
            smtlab()
                .args(["compare", "1", "2", "--json"])
                .args(db_arg(&db)),
        );
        // The estimate needs two cells steady in runs 1 and 3; on a busy machine they
        // may not be, and then the floor stands in, saying so.
        let between = &v["between_runs"];
        match between["source"].as_str().unwrap() {
            "stored_repeats" => assert!(
                between["basis"].as_str().unwrap().starts_with("runs 1, 3 "),
                "{v}"
            ),
            "default_floor" => {}
            other => panic!("between-run estimate {other}: {v}"),
        }
        let v = json_of(
            smtlab()
                .args(["compare", "1", "2", "--json", "--between-runs", "none"])
                .args(db_arg(&db)),
        );
        assert_eq!(v["between_runs"]["source"], "none", "{v}");

        // A run exported on one machine compares against a run stored on another.
        let file = dir.path().join("a.json");
        smtlab()
            .args(["report", "1", "--json", "-o"])
            .arg(&file)
            .args(db_arg(&db))
            .assert()
            .success();
        let v = json_of(
            smtlab()
                .arg("compare")
                .arg(&file)
                .arg("latest")
                .arg("--json")
                .args(db_arg(&db)),
        );
        assert!(v.is_object(), "{v}");
    }

    #[test]
    fn compare_writes_a_page_and_markdown() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("r.db");
        for label in ["before", "after"] {
            smtlab()
                .args(["run", "--suite", "quick", "--bench", "null-syscall"])
                .args(["--placements", "1c1t", "--label", label])
                .args(db_arg(&db))
                .assert()
                .success();
        }
        // The names the runs were given lead their lines and the report's header.
        let text = stdout_of(smtlab().args(["compare", "1", "2"]).args(db_arg(&db)));
        assert!(text.starts_with("A: before: "), "{text}");
        assert!(text.contains("\nB: after: "), "{text}");
        let report = dir.path().join("report.html");
        smtlab()
            .args(["report", "after", "-o"])
            .arg(&report)
            .args(db_arg(&db))
            .assert()
            .success();
        let report = std::fs::read_to_string(&report).unwrap();
        assert!(report.contains("<h1>smtlab report: after ("), "{report}");
        assert!(
            report.contains(", labelled <code>after</code>,"),
            "{report}"
        );
        let page = dir.path().join("compare.html");
        smtlab()
            .args(["compare", "1", "2", "-o"])
            .arg(&page)
            .args(db_arg(&db))
            .assert()
            .success();
        let html = std::fs::read_to_string(&page).unwrap();
        assert!(html.starts_with("<!DOCTYPE html>"));
        assert!(html.contains("null-syscall") && html.contains("id=\"environments\""));
        assert!(html.contains("before: "), "the runs' names on the page");
        let md = stdout_of(
            smtlab()
                .args(["compare", "1", "2", "--markdown"])
                .args(db_arg(&db)),
        );
        assert!(md.contains("| os | null-syscall | - | 1c1t |"), "{md}");
        smtlab()
            .args(["compare", "1", "2", "--markdown", "--json"])
            .args(db_arg(&db))
            .assert()
            .failure();
    }

    #[test]
    fn foreign_and_missing_databases_are_one_line_errors() {
        let dir = tempfile::tempdir().unwrap();
        let junk = dir.path().join("junk.db");
        std::fs::write(&junk, b"this is not a database at all, just some bytes").unwrap();
        for args in [
            vec!["runs"],
            vec!["report"],
            vec!["run", "--suite", "quick"],
        ] {
            smtlab()
                .args(&args)
                .args(db_arg(&junk))
                .assert()
                .failure()
                .stderr(predicate::str::contains("junk.db"))
                .stderr(predicate::function(|s: &str| s.lines().count() == 1));
        }
        smtlab()
            .args(["report"])
            .args(db_arg(&dir.path().join("none.db")))
            .assert()
            .failure()
            .stderr(predicate::str::contains("none.db"));
        smtlab()
            .args(["run", "--suite", "fast"])
            .args(db_arg(&dir.path().join("x.db")))
            .assert()
            .failure()
            .stderr(predicate::str::contains(
                "[possible values: quick, default, full]",
            ));
        assert!(
            !dir.path().join("x.db").exists(),
            "a bad request creates no database"
        );
    }
}

mod counters {
    use super::*;

    /// The `events` entry of one counter in a cell's `counters.values`.
    fn event<'a>(counters: &'a Value, name: &str) -> Option<&'a Value> {
        counters["values"]["events"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["event"] == name)
    }

    #[test]
    fn bench_json_records_software_counters_and_says_why_hardware_is_missing() {
        let v =
            json_of(smtlab().args(["bench", "null-syscall", "--quick", "--counters", "--json"]));
        let cell = &v["cells"][0];
        let c = &cell["counters"];
        assert!(c.is_object(), "no counters in {cell}");
        assert_eq!(v["run"]["config"]["counters"], true);
        let task_clock = event(c, "task-clock").expect("task-clock counted");
        assert!(task_clock["all"]["scaled"].as_f64().unwrap() > 0.0);
        assert!(event(c, "page-faults").is_some(), "page faults counted");
        // Per-unit figures use the measured samples' work.
        assert_eq!(c["work"]["unit"], "op");
        let work: f64 = cell["result"]["samples"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["work"].as_f64().unwrap())
            .sum();
        assert_eq!(c["work"]["amount"].as_f64().unwrap(), work);
        assert!(c["per_unit"]["cpu_ns_per_unit"].as_f64().unwrap() > 0.0);
        let cycles_counted = event(c, "cycles").is_some();
        if !cycles_counted {
            // This machine (a KVM guest without a PMU): every hardware event is listed
            // as unavailable with a reason, none is made up.
            let unavailable = c["values"]["unavailable"].as_array().unwrap();
            let cycles = unavailable
                .iter()
                .find(|u| u["event"] == "cycles")
                .expect("cycles listed as unavailable");
            assert!(!cycles["reason"].as_str().unwrap().is_empty());
            assert!(
                c["hardware_unavailable"]
                    .as_str()
                    .unwrap()
                    .contains("hardware")
            );
            assert!(c["per_unit"]["instructions_per_unit"].is_null());
        }
        // OS time of the placement's CPU, and syscall time or the reason it is missing.
        assert_eq!(c["os_time"]["cpus"], serde_json::json!([0]));
        assert!(c["syscalls"].is_object() || c["syscalls_unavailable"].is_string());
        // Without --counters nothing is recorded.
        let v = json_of(smtlab().args(["bench", "null-syscall", "--quick", "--json"]));
        assert!(v["cells"][0].get("counters").is_none());
    }

    #[test]
    fn bench_events_counts_what_resolves_and_says_why_for_the_rest() {
        // `msr/tsc/` is a sysfs alias most x86 kernels offer (also to guests without a
        // PMU); `machine-clears` is a built-in model event; `bogus-event` is nothing.
        let out = smtlab()
            .args([
                "bench",
                "null-syscall",
                "--quick",
                "--counters",
                "--events",
                "msr/tsc/,machine-clears,bogus-event",
                "--json",
            ])
            .assert()
            .success()
            .get_output()
            .clone();
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(
            v["run"]["config"]["counter_events"],
            "msr/tsc/,machine-clears,bogus-event"
        );
        let c = &v["cells"][0]["counters"]["values"];
        let mut said: Vec<String> = Vec::new();
        for key in ["named", "named_unavailable"] {
            for e in c[key].as_array().into_iter().flatten() {
                said.push(e["name"].as_str().unwrap().to_string());
                if key == "named_unavailable" {
                    let reason = e["reason"].as_str().unwrap();
                    assert!(!reason.is_empty() && !reason.contains('\n'), "{e}");
                }
            }
        }
        for name in ["msr/tsc/", "machine-clears", "bogus-event"] {
            assert!(
                said.iter().any(|s| s == name),
                "{name} neither counted nor explained: {c}"
            );
        }
    }

    #[test]
    fn bad_event_lists_are_one_line_errors() {
        for (args, want) in [
            (
                vec!["--counters", "--events", "cpu/event=0x3c"],
                "expected a closing `/`",
            ),
            (vec!["--counters", "--events", "cycles:p"], "modifier `p`"),
            (vec!["--events", "cycles"], "--counters"),
            (
                vec!["--counters", "--events", "dram", "--dram-peak", "0"],
                "expected a positive number of GB/s",
            ),
            (vec!["--counters", "--dram-peak", "100"], "--events"),
        ] {
            let out = smtlab()
                .args(["bench", "null-syscall", "--quick"])
                .args(&args)
                .assert()
                .failure()
                .get_output()
                .clone();
            let stderr = String::from_utf8(out.stderr).unwrap();
            assert!(stderr.contains(want), "{args:?}: {stderr}");
        }
    }

    #[test]
    fn bench_prints_one_counters_line_per_cell_and_the_missing_pmu_once() {
        let out = smtlab()
            .args([
                "bench",
                "null-syscall",
                "fstat",
                "--quick",
                "--counters",
                "--wide",
            ])
            .assert()
            .success()
            .get_output()
            .clone();
        let stdout = String::from_utf8(out.stdout).unwrap();
        let stderr = String::from_utf8(out.stderr).unwrap();
        let lines: Vec<&str> = stdout
            .lines()
            .filter(|l| l.trim_start().starts_with("counters:"))
            .collect();
        assert_eq!(lines.len(), 2, "{stdout}");
        assert!(lines[0].contains("task-clock") && lines[0].contains("page fault"));
        let hw_notes = stderr
            .lines()
            .filter(|l| l.contains("hardware counters"))
            .count();
        let pmu = !stderr.contains("hardware counters");
        if !pmu {
            assert_eq!(hw_notes, 1, "said once: {stderr}");
            assert!(!stdout.contains("CPI"), "no PMU, no CPI: {stdout}");
        }
    }

    #[test]
    fn run_stores_counters_and_the_report_shows_them() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("r.db");
        let db_arg = ["--db".to_string(), db.display().to_string()];
        smtlab()
            .args(["run", "--suite", "quick", "--bench", "null-syscall"])
            .args(["--placements", "1c1t", "--counters"])
            .args(&db_arg)
            .assert()
            .success()
            .stdout(predicate::str::contains("counters: task-clock"));
        let json = json_of(smtlab().args(["report", "--json"]).args(&db_arg));
        assert!(json["cells"][0]["counters"]["values"].is_object());
        let html = dir.path().join("r.html");
        smtlab()
            .args(["report", "-o"])
            .arg(&html)
            .args(&db_arg)
            .assert()
            .success();
        let page = std::fs::read_to_string(&html).unwrap();
        let start = page
            .find("<section id=\"counters\">")
            .expect("counters section");
        let section = &page[start..start + page[start..].find("</section>").unwrap()];
        assert!(section.contains("task-clock"), "{section}");
        assert!(section.contains("OS time"), "{section}");
        assert!(!section.contains("Not recorded"), "{section}");

        // A run without --counters says how to get them.
        smtlab()
            .args(["run", "--suite", "quick", "--bench", "null-syscall"])
            .args(["--placements", "1c1t"])
            .args(&db_arg)
            .assert()
            .success();
        smtlab()
            .args(["report", "-o"])
            .arg(&html)
            .args(&db_arg)
            .assert()
            .success();
        let page = std::fs::read_to_string(&html).unwrap();
        assert!(page.contains("<li>Counters: not recorded (use --counters)</li>"));
        // Both runs compare; the counters part needs counters on both sides.
        let text = smtlab()
            .args(["compare", "1", "2"])
            .args(&db_arg)
            .assert()
            .success()
            .get_output()
            .stdout
            .clone();
        assert!(!String::from_utf8(text).unwrap().contains("counters (cells"));
        let text = smtlab()
            .args(["compare", "1", "1"])
            .args(&db_arg)
            .assert()
            .success()
            .get_output()
            .stdout
            .clone();
        assert!(String::from_utf8(text).unwrap().contains("CPU ns/op"));
    }

    /// Zen 4 counts as `perf stat -x,` writes them, per CPU: summed, the cycles scaled
    /// into dispatch slots by the table, top-down by the kernel's Zen 4 formulas.
    const ZEN4_PERF_STAT: &str = "# perf stat -x, -A\n\
        CPU0,1000000,,ls_not_halted_cyc,1000,100.00,,\n\
        CPU1,1000000,,ls_not_halted_cyc,1000,100.00,,\n\
        CPU0,4800000,,ex_ret_ops,1000,100.00,,\n\
        CPU0,6000000,,de_src_op_disp.all,1000,100.00,,\n\
        CPU0,2400000,,de_no_dispatch_per_slot.no_ops_from_frontend,1000,100.00,,\n\
        CPU0,3000000,,de_no_dispatch_per_slot.backend_stalls,1000,100.00,,\n\
        CPU0,600000,,de_no_dispatch_per_slot.smt_contention,1000,100.00,,\n\
        CPU0,4000000,,instructions:u,1000,100.00,,\n";

    #[test]
    fn counters_import_derives_top_down_from_recorded_perf_stat() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("zen4.csv");
        std::fs::write(&file, ZEN4_PERF_STAT).unwrap();
        let v = json_of(
            smtlab()
                .args(["counters", "import", "--json", "--cpu-model", "zen4"])
                .arg(&file),
        );
        assert_eq!(v["schema"], "smtlab.counters-import/1");
        let t = &v["ratios"]["topdown"];
        // 12 M dispatch slots: 2 M cycles x 6.
        assert_eq!(t["slots"].as_f64(), Some(12e6));
        for (key, want) in [
            ("retiring", 0.4),
            ("bad_speculation", 0.1),
            ("frontend_bound", 0.2),
            ("backend_bound", 0.25),
            ("smt_contention", 0.05),
        ] {
            let got = t[key].as_f64().unwrap();
            assert!((got - want).abs() < 1e-12, "{key}: {got}, expected {want}");
        }
        let text = stdout_of(
            smtlab()
                .args(["counters", "import", "--cpu-model", "Zen 4"])
                .arg(&file),
        );
        // Wrapped to the terminal's width: read as words.
        let words = text.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(words.contains("SMT contention 5.0%"), "{text}");
        let csv = stdout_of(
            smtlab()
                .args(["counters", "import", "--csv", "--cpu-model", "zen4"])
                .arg(&file),
        );
        assert!(csv.starts_with("key,label,value\n"), "{csv}");
        assert!(
            csv.contains("topdown_smt_contention,SMT contention,0.05"),
            "{csv}"
        );
        // Without the model, cycles cannot become slots (6 per cycle on Zen 4, 8 on Zen 5).
        let out = smtlab()
            .args(["counters", "import"])
            .arg(&file)
            .assert()
            .failure();
        let err = String::from_utf8(out.get_output().stderr.clone()).unwrap();
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(
            err.contains("zen4.csv")
                && err.contains("ls_not_halted_cyc")
                && err.contains("--cpu-model"),
            "{err}"
        );
    }

    /// `perf stat -x, -A` lines of `counts` (name, value), split over two CPUs.
    fn perf_stat(counts: &[(&str, f64)]) -> String {
        let mut out = String::from("# perf stat -x, -A\n");
        for (name, value) in counts {
            out.push_str(&format!("CPU0,{},,{name},1000,100.00,,\n", value * 0.25));
            out.push_str(&format!("CPU1,{},,{name},1000,100.00,,\n", value * 0.75));
        }
        out
    }

    /// The CPI stack from a Skylake-SP recording, by hand: 1 M cycles, 0.5 M
    /// instructions (CPI 2), latencies given as L1 5, L2 15, LLC 45, DRAM 245 cycles.
    /// L1D misses 10 k x 10 = 0.2 per instruction, L2 misses 2 k x 30 = 0.12, LLC misses
    /// 500 x 200 = 0.2; top-down bad speculation (1.2 M - 1 M + 0.4 M) / 4 M = 15% of
    /// the cycles, 150 k, split 3:1 between 3 k mispredicts and 1 k machine clears (37.5
    /// cycles each): 0.225 and 0.075; 50 k store-buffer cycles 0.1; other/base 1.08.
    #[test]
    fn counters_import_cpi_stack_from_model_events() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("skx.csv");
        let counts = [
            ("cycles", 1e6),
            ("instructions", 5e5),
            ("L1-dcache-load-misses", 1e4),
            ("l2_rqsts.miss", 2e3),
            ("LLC-load-misses", 500.0),
            ("branch-misses", 3e3),
            ("machine_clears.count", 1e3),
            ("resource_stalls.sb", 5e4),
            ("topdown-total-slots", 4e6),
            ("topdown-slots-issued", 1.2e6),
            ("topdown-slots-retired", 1e6),
            ("topdown-fetch-bubbles", 8e5),
            ("topdown-recovery-bubbles", 4e5),
        ];
        std::fs::write(&file, perf_stat(&counts)).unwrap();
        let args = [
            "counters",
            "import",
            "--cpu-model",
            "skylake-sp",
            "--latencies",
            "l1=5,l2=15,llc=45,dram=245",
        ];
        let v = json_of(smtlab().args(args).arg("--json").arg(&file));
        let s = &v["ratios"]["cpi_stack"];
        let part = |key: &str| {
            s["parts"]
                .as_array()
                .unwrap()
                .iter()
                .find(|p| p["key"] == key)
                .unwrap_or_else(|| panic!("{key} in {s}"))
                .clone()
        };
        for (key, want, source) in [
            ("l1d_miss", 0.2, "measured"),
            ("l2_miss", 0.12, "measured"),
            ("llc_miss", 0.2, "measured"),
            ("branch_mispredict", 0.225, "topdown"),
            ("machine_clears", 0.075, "topdown"),
            ("store_buffer", 0.1, "cycles"),
        ] {
            let p = part(key);
            let got = p["cpi"].as_f64().unwrap();
            assert!((got - want).abs() < 1e-9, "{key}: {got}, expected {want}");
            assert_eq!(p["source"], source, "{key}");
        }
        let clear = part("machine_clears")["penalty_cycles"].as_f64().unwrap();
        assert!((clear - 37.5).abs() < 1e-9, "{clear}");
        let other = s["other_cpi"].as_f64().unwrap();
        assert!((other - 1.08).abs() < 1e-9, "{s}");
        let text = stdout_of(smtlab().args(args).arg(&file));
        let words = text.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(
            words.contains("CPI stack 2.000 = L1D miss to L2 0.2000"),
            "{text}"
        );
        assert!(words.contains("other/base 1.080"), "{text}");
        let csv = stdout_of(smtlab().args(args).arg("--csv").arg(&file));
        assert!(
            csv.contains("\ncpi_stack_other,CPI stack: other/base,1.08"),
            "{csv}"
        );
        // Levels not given are assumed, and say so.
        let v = json_of(smtlab().args(&args[..4]).arg("--json").arg(&file));
        assert_eq!(
            v["ratios"]["cpi_stack"]["parts"][0]["source"], "assumed",
            "{v}"
        );
        let out = smtlab()
            .args(["counters", "import", "--latencies", "l3=40"])
            .arg(&file)
            .assert()
            .failure();
        let err = String::from_utf8(out.get_output().stderr.clone()).unwrap();
        assert!(err.contains("bad latencies \"l3=40\""), "{err}");
    }

    /// Ice Lake-like perf metrics by hand (the model's unit test, in millions): alone
    /// 1 M cycles, 5 M slots; with the sibling 1.6 M cycles and half the core's slots.
    /// Loss 37.5%: SMT contention +50 pt, back-end core -7.5, memory -2.5, front-end
    /// -2.5; the parts add to the loss. A second recording of other work (retiring per
    /// instruction doubled) fails the sum check in one line.
    #[test]
    fn counters_import_against_attributes_the_1c2t_loss() {
        let dir = tempfile::tempdir().unwrap();
        let m = |x: f64| x * 1e6;
        let alone = dir.path().join("1c1t.csv");
        let smt = dir.path().join("1c2t.csv");
        let other = dir.path().join("other.csv");
        let common = |cycles, fe, be, mem, ret, bad| {
            vec![
                ("cycles", m(cycles)),
                ("instructions", m(1.0)),
                (
                    "slots",
                    m(5.0 * cycles) * if cycles > 1.0 { 0.5 } else { 1.0 },
                ),
                ("topdown-retiring", m(ret)),
                ("topdown-bad-spec", m(bad)),
                ("topdown-fe-bound", m(fe)),
                ("topdown-be-bound", m(be)),
                ("topdown-mem-bound", m(mem)),
            ]
        };
        std::fs::write(&alone, perf_stat(&common(1.0, 1.0, 2.0, 1.2, 1.5, 0.5))).unwrap();
        std::fs::write(&smt, perf_stat(&common(1.6, 0.8, 1.2, 1.0, 1.5, 0.5))).unwrap();
        std::fs::write(&other, perf_stat(&common(1.6, 0.5, 0.5, 0.25, 3.0, 0.0))).unwrap();
        let v = json_of(
            smtlab()
                .args(["counters", "import", "--json"])
                .arg(&smt)
                .arg("--against")
                .arg(&alone),
        );
        let l = &v["smt_loss"];
        let loss = l["measured_loss"].as_f64().unwrap();
        assert!((loss - 0.375).abs() < 1e-9, "{l}");
        assert!(
            (l["slot_share"].as_f64().unwrap() - 0.5).abs() < 1e-9,
            "{l}"
        );
        let parts = l["parts"].as_array().unwrap();
        let sum: f64 = parts.iter().map(|p| p[1].as_f64().unwrap()).sum();
        assert!((sum - loss).abs() <= 0.02, "parts {sum} vs loss {loss}");
        assert_eq!(parts[3][0], "backend_core");
        assert!((parts[3][1].as_f64().unwrap() + 0.075).abs() < 1e-9, "{l}");
        let text = stdout_of(
            smtlab()
                .args(["counters", "import"])
                .arg(&smt)
                .arg("--against")
                .arg(&alone),
        );
        let words = text.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(words.contains("37.5% lost"), "{text}");
        assert!(words.contains("SMT contention +50.0 pt"), "{text}");
        assert!(words.contains("back-end memory 25.0%, core 5.0%"), "{text}");
        let out = smtlab()
            .args(["counters", "import"])
            .arg(&other)
            .arg("--against")
            .arg(&alone)
            .assert()
            .failure();
        let err = String::from_utf8(out.get_output().stderr.clone()).unwrap();
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains("same work"), "{err}");
    }
}

mod exec {
    use super::*;
    use std::path::Path;

    const LOOP: &str = "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done";

    fn db_arg(db: &Path) -> [String; 2] {
        ["--db".into(), db.display().to_string()]
    }

    #[test]
    fn a_cpu_bound_command_on_two_placements_gets_a_verdict_and_is_stored() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("r.db");
        let out = smtlab()
            .args(["exec", "--reps", "2", "--placements", "1c1t,2c1t"])
            .args(db_arg(&db))
            .args(["--", "sh", "-c", LOOP])
            .assert()
            .success()
            .get_output()
            .clone();
        let stdout = String::from_utf8(out.stdout).unwrap();
        let rows: Vec<&str> = stdout
            .lines()
            .filter(|l| l.starts_with("1c1t ") || l.starts_with("2c1t "))
            .collect();
        assert_eq!(rows.len(), 2, "{stdout}");
        assert!(stdout.contains("2 cores give "), "verdict: {stdout}");
        assert!(stdout.contains("CPU time per run"), "{stdout}");
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert!(stderr.contains("saved as run 1"), "{stderr}");

        let runs = json_of(smtlab().args(["runs", "--json"]).args(db_arg(&db)));
        assert_eq!(runs[0]["suite"], "exec");
        assert_eq!(runs[0]["status"], "finished");
        assert_eq!(runs[0]["cells_done"], 2);
        let r = json_of(smtlab().args(["report", "--json"]).args(db_arg(&db)));
        let cell = &r["cells"][0];
        assert_eq!(cell["benchmark"], "exec");
        assert_eq!(cell["unit"], "s");
        assert_eq!(cell["direction"], "lower");
        assert!(
            cell["params"]["command"]
                .as_str()
                .unwrap()
                .contains("while")
        );
        assert_eq!(cell["result"]["samples"].as_array().unwrap().len(), 2);
        assert!(cell["result"]["summary"]["mean"].as_f64().unwrap() > 0.0);
        assert_eq!(
            r["cells"][1]["placement"]["cpus"],
            serde_json::json!([0, 1])
        );
    }

    #[test]
    fn throughput_is_the_number_the_command_prints() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("r.db");
        smtlab()
            .args(["exec", "--reps", "2", "--placements", "1c1t"])
            .args(["--throughput", r"rate: ([0-9.]+)", "--counters"])
            .args(db_arg(&db))
            .args(["--", "sh", "-c", "echo rate: 42"])
            .assert()
            .success()
            .stdout(predicate::str::contains("42"))
            .stdout(predicate::str::contains("counters: task-clock"));
        let r = json_of(smtlab().args(["report", "--json"]).args(db_arg(&db)));
        let cell = &r["cells"][0];
        assert_eq!(cell["unit"], "units/s");
        assert_eq!(cell["direction"], "higher");
        assert_eq!(cell["result"]["summary"]["mean"].as_f64(), Some(42.0));
        assert_eq!(cell["counters"]["work"]["unit"], "run");
        assert_eq!(cell["counters"]["work"]["amount"].as_f64(), Some(2.0));
    }

    #[test]
    fn bad_regexes_failed_commands_and_missing_programs_are_one_line_errors() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("r.db");
        let one_line = || predicate::function(|s: &str| s.lines().count() == 1);
        let cases: [(&[&str], &[&str], &str); 5] = [
            (
                &["--throughput", "rate: ([0-9.]+"],
                &["sh", "-c", "echo rate: 42"],
                "not a valid regular expression",
            ),
            (
                &["--throughput", "rate: [0-9.]+"],
                &["sh", "-c", "echo rate: 42"],
                "no capture group",
            ),
            (
                &["--throughput", "speed: ([0-9.]+)"],
                &["sh", "-c", "echo rate: 42"],
                "did not match the output",
            ),
            (
                &[],
                &["sh", "-c", "echo oops; exit 3"],
                "exited with status 3",
            ),
            (&[], &["smtlab-no-such-command"], "not found"),
        ];
        for (opts, cmd, expected) in cases {
            smtlab()
                .args(["exec", "--reps", "1", "--placements", "1c1t"])
                .args(opts)
                .args(db_arg(&db))
                .arg("--")
                .args(cmd)
                .assert()
                .failure()
                .stderr(predicate::str::contains(expected))
                .stderr(predicate::str::contains("smtlab: error:"))
                .stderr(predicate::function(|s: &str| {
                    s.lines()
                        .filter(|l| l.starts_with("smtlab: error:"))
                        .count()
                        == 1
                }));
        }
        // The failing command is named with its status.
        smtlab()
            .args(["exec", "--reps", "1", "--placements", "1c1t"])
            .args(db_arg(&db))
            .args(["--", "sh", "-c", "exit 7"])
            .assert()
            .failure()
            .stderr(predicate::str::contains(
                "command `sh -c 'exit 7'` exited with status 7",
            ));
        smtlab()
            .args(["exec", "--throughput", "("])
            .args(db_arg(&db))
            .args(["--", "true"])
            .assert()
            .failure()
            .stderr(one_line());
        assert!(!db.exists(), "failed requests store nothing");
    }

    fn alive(pid: i32) -> bool {
        // A zombie waiting for its new parent to reap it is gone for our purposes.
        match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            Ok(stat) => !stat.contains(") Z "),
            Err(_) => false,
        }
    }

    fn wait_for_pid(file: &Path) -> i32 {
        let t0 = std::time::Instant::now();
        loop {
            if let Ok(s) = std::fs::read_to_string(file)
                && let Ok(pid) = s.trim().parse::<i32>()
            {
                return pid;
            }
            assert!(
                t0.elapsed() < std::time::Duration::from_secs(60),
                "the command did not start"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    fn gone_within(pid: i32, secs: u64) -> bool {
        let t0 = std::time::Instant::now();
        while alive(pid) && t0.elapsed() < std::time::Duration::from_secs(secs) {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        !alive(pid)
    }

    #[test]
    fn the_commands_children_die_with_smtlab_whatever_kills_it() {
        smtlab_fixtures::signals::deliverable();
        let bin = assert_cmd::cargo::cargo_bin("smtlab");
        for signal in [libc::SIGKILL, libc::SIGTERM, libc::SIGINT] {
            let dir = tempfile::tempdir().unwrap();
            let pidfile = dir.path().join("pid");
            let script = format!("sleep 300 & echo $! > {}; wait", pidfile.display());
            let mut child = std::process::Command::new(&bin)
                .args(["exec", "--reps", "1", "--warmup", "0", "-p", "1c1t"])
                .args(db_arg(&dir.path().join("r.db")))
                .args(["--", "sh", "-c", &script])
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .unwrap();
            let grandchild = wait_for_pid(&pidfile);
            assert!(alive(grandchild));
            // SAFETY: signalling our own child.
            unsafe { libc::kill(child.id() as i32, signal) };
            smtlab_fixtures::bounded::wait(&mut child, "the child process");
            let ok = gone_within(grandchild, 10);
            if !ok {
                // SAFETY: cleaning up what the test started.
                unsafe { libc::kill(grandchild, libc::SIGKILL) };
            }
            assert!(
                ok,
                "signal {signal}: the command's child {grandchild} outlived smtlab"
            );
        }
    }

    #[test]
    fn background_jobs_of_a_run_are_swept_when_it_ends() {
        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("pid");
        let script = format!("sleep 300 & echo $! > {}", pidfile.display());
        smtlab()
            .args(["exec", "--reps", "1", "--warmup", "0", "-p", "1c1t"])
            .args(db_arg(&dir.path().join("r.db")))
            .args(["--", "sh", "-c", &script])
            .timeout(std::time::Duration::from_secs(120))
            .assert()
            .success();
        let left = wait_for_pid(&pidfile);
        let ok = gone_within(left, 10);
        if !ok {
            // SAFETY: cleaning up what the test started.
            unsafe { libc::kill(left, libc::SIGKILL) };
        }
        assert!(ok, "the background sleep {left} outlived the run");
    }

    #[test]
    fn a_command_that_leaves_its_placement_fails_naming_the_cpu() {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        if cpus < 2 {
            eprintln!("skipped: needs 2 CPUs");
            return;
        }
        if std::process::Command::new("taskset")
            .arg("-V")
            .output()
            .is_err()
        {
            smtlab_fixtures::require::skip("taskset is not installed");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("r.db");
        // The command itself, and a child of the command, move to CPU 1.
        for cmd in [
            vec!["taskset", "-c", "1", "sh", "-c", LOOP],
            vec![
                "sh",
                "-c",
                "taskset -c 1 sh -c 'i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done'; true",
            ],
        ] {
            smtlab()
                .args(["exec", "--reps", "1", "--warmup", "0", "-p", "1c1t"])
                .args(db_arg(&db))
                .arg("--")
                .args(&cmd)
                .assert()
                .failure()
                .stderr(predicate::str::contains("escaped placement 1c1t (CPUs 0)"))
                .stderr(predicate::str::contains("CPU").and(predicate::str::contains(" 1")))
                .stderr(predicate::function(|s: &str| s.lines().count() == 1));
        }
        assert!(!db.exists(), "nothing stored for an escaped command");
    }

    #[test]
    fn a_run_longer_than_the_timeout_is_killed_with_one_line() {
        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("pid");
        let script = format!("sleep 300 & echo $! > {}; wait", pidfile.display());
        smtlab()
            .args(["exec", "--reps", "1", "--warmup", "0", "-p", "1c1t"])
            .args(["--timeout", "1"])
            .args(db_arg(&dir.path().join("r.db")))
            .args(["--", "sh", "-c", &script])
            .timeout(std::time::Duration::from_secs(120))
            .assert()
            .failure()
            .stderr(predicate::str::contains("ran longer than --timeout 1 s"))
            .stderr(predicate::function(|s: &str| s.lines().count() == 1));
        let left = wait_for_pid(&pidfile);
        assert!(
            gone_within(left, 10),
            "the timed-out command's child is gone"
        );
        smtlab()
            .args(["exec", "--timeout", "0", "--", "true"])
            .assert()
            .failure()
            .stderr(predicate::str::contains("positive number of seconds"));
    }

    #[test]
    fn a_command_printing_a_lot_costs_smtlab_little_memory() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("r.db");
        // The command reports smtlab's own peak memory (its parent's VmHWM, in KiB)
        // after printing 300 MB, and that figure is what is measured.
        let script = "yes 0123456789abcdef | head -c 300000000; grep VmHWM /proc/$PPID/status";
        smtlab()
            .args(["exec", "--reps", "1", "--warmup", "0", "-p", "1c1t"])
            .args(["--throughput", r"VmHWM:\s+([0-9]+)"])
            .args(db_arg(&db))
            .args(["--", "sh", "-c", script])
            .timeout(std::time::Duration::from_secs(300))
            .assert()
            .success();
        let r = json_of(smtlab().args(["report", "--json"]).args(db_arg(&db)));
        let peak_kib = r["cells"][0]["result"]["summary"]["max"].as_f64().unwrap();
        assert!(peak_kib > 0.0);
        assert!(
            peak_kib < 100_000.0,
            "smtlab's peak RSS was {peak_kib} KiB for 300 MB of output"
        );
    }
}

/// The results database seen from the read-only commands, errors printed once, run
/// references, leases and signals.
mod store {
    use super::*;

    fn stderr_of(cmd: &mut Command) -> String {
        let out = cmd.assert().failure().get_output().stderr.clone();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn an_error_prints_its_cause_once() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("file");
        std::fs::write(&file, "").unwrap();
        for sub in ["runs", "report"] {
            // A path through a regular file: the system's reason, once.
            let err = stderr_of(smtlab().args([sub, "--db"]).arg(file.join("r.db")));
            let cause = std::io::Error::from_raw_os_error(libc::ENOTDIR).to_string();
            assert_eq!(err.matches(&cause).count(), 1, "{sub}: {err}");
            assert_eq!(err.lines().count(), 1, "{sub}: {err}");
            // A directory: refused before SQLite sees it.
            let err = stderr_of(smtlab().args([sub, "--db"]).arg(dir.path()));
            assert_eq!(
                err.matches("is not a regular file").count(),
                1,
                "{sub}: {err}"
            );
            assert_eq!(err.lines().count(), 1, "{sub}: {err}");
        }
    }

    fn db_arg(db: &std::path::Path) -> [String; 2] {
        ["--db".into(), db.display().to_string()]
    }

    /// A database holding `runs` runs of `true` (a second or so each).
    fn db_with_runs(dir: &std::path::Path, runs: usize) -> PathBuf {
        let db = dir.join("r.db");
        for _ in 0..runs {
            smtlab()
                .args([
                    "exec",
                    "--reps",
                    "2",
                    "--warmup",
                    "0",
                    "--placements",
                    "1c1t",
                ])
                .args(db_arg(&db))
                .args(["--", "true"])
                .assert()
                .success();
        }
        db
    }

    fn names_in(dir: &std::path::Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn read_only_commands_on_an_empty_or_missing_file_change_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("empty.db");
        std::fs::write(&empty, "").unwrap();
        for args in [vec!["runs"], vec!["report"], vec!["compare", "1", "2"]] {
            let err = stderr_of(smtlab().args(&args).args(db_arg(&empty)));
            assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
            assert!(err.contains("is empty"), "{args:?}: {err}");
            assert_eq!(std::fs::metadata(&empty).unwrap().len(), 0, "{args:?}");
            let missing = dir.path().join("sub/none.db");
            let err = stderr_of(smtlab().args(&args).args(db_arg(&missing)));
            assert!(err.contains("does not exist"), "{args:?}: {err}");
            assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        }
        assert_eq!(names_in(dir.path()), ["empty.db"]);
    }

    #[test]
    fn relative_run_references_reach_the_parser() {
        let dir = tempfile::tempdir().unwrap();
        let db = db_with_runs(dir.path(), 2);
        let report = json_of(smtlab().args(["report", "-2", "--json"]).args(db_arg(&db)));
        assert_eq!(report["run"]["id"], 1);
        let report = json_of(smtlab().args(["report", "-1", "--json"]).args(db_arg(&db)));
        assert_eq!(report["run"]["id"], 2);
        let cmp = json_of(
            smtlab()
                .args(["compare", "latest", "-2", "--json"])
                .args(db_arg(&db)),
        );
        assert_eq!(
            (cmp["a"]["id"].clone(), cmp["b"]["id"].clone()),
            (2.into(), 1.into())
        );
        let cmp = json_of(
            smtlab()
                .args(["compare", "-2", "-1", "--json"])
                .args(db_arg(&db)),
        );
        assert_eq!(
            (cmp["a"]["id"].clone(), cmp["b"]["id"].clone()),
            (1.into(), 2.into())
        );
        let err = stderr_of(smtlab().args(["report", "-3"]).args(db_arg(&db)));
        assert!(
            err.contains("no run -3") && err.contains("runs 1-2 exist"),
            "{err}"
        );
        // Still a flag where a flag is meant.
        let err = stderr_of(smtlab().args(["report", "-x"]).args(db_arg(&db)));
        assert!(err.contains("-x"), "{err}");
    }

    /// `unshare --user` runs a command as an unprivileged user (nobody) for whom file
    /// permissions hold even when the tests run as root.
    fn unprivileged() -> Option<std::process::Command> {
        let ok = std::process::Command::new("unshare")
            .args(["--user", "true"])
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            smtlab_fixtures::require::skip(
                "`unshare --user` is not available here, so permissions cannot be enforced on root",
            );
            return None;
        }
        let mut c = std::process::Command::new("unshare");
        c.arg("--user").arg(assert_cmd::cargo::cargo_bin("smtlab"));
        Some(c)
    }

    #[test]
    fn a_database_in_a_read_only_directory_is_readable() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let ro = dir.path().join("ro");
        std::fs::create_dir(&ro).unwrap();
        let db = db_with_runs(&ro, 1);
        let set = |p: &std::path::Path, mode| {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
        };
        set(dir.path(), 0o755);
        set(&db, 0o444);
        set(&ro, 0o555);
        let before = names_in(&ro);
        if let Some(mut cmd) = unprivileged() {
            for args in [vec!["runs", "--json"], vec!["report", "-1", "--json"]] {
                let out = cmd.args(&args).args(db_arg(&db)).output().unwrap();
                let err = String::from_utf8_lossy(&out.stderr);
                assert!(out.status.success(), "{args:?}: {err}");
                let v: Value = serde_json::from_slice(&out.stdout).unwrap();
                assert!(!v.is_null(), "{args:?}");
                cmd = unprivileged().unwrap();
            }
        }
        assert_eq!(names_in(&ro), before);
        set(&ro, 0o755);
    }

    /// Starts `smtlab run` on a few cells and returns it once its first cell is saved.
    fn run_with_a_saved_cell(db: &std::path::Path) -> std::process::Child {
        let bin = assert_cmd::cargo::cargo_bin("smtlab");
        let child = std::process::Command::new(&bin)
            .args(["run", "--bench", "null-syscall,read,write,fstat"])
            .args(["--placements", "1c1t,2c1t"])
            .args(db_arg(db))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let t0 = std::time::Instant::now();
        while t0.elapsed() < std::time::Duration::from_secs(60) {
            std::thread::sleep(std::time::Duration::from_millis(20));
            if db.exists()
                && let Ok(out) = std::process::Command::new(&bin)
                    .args(["runs", "--json"])
                    .args(db_arg(db))
                    .output()
                && let Ok(v) = serde_json::from_slice::<Value>(&out.stdout)
                && v[0]["cells_done"].as_u64().unwrap_or(0) >= 1
            {
                break;
            }
        }
        child
    }

    fn run_listing(db: &std::path::Path) -> Value {
        json_of(smtlab().args(["runs", "--json"]).args(db_arg(db)))[0].clone()
    }

    #[test]
    fn sigterm_sighup_and_sigquit_interrupt_a_run_like_ctrl_c_with_their_own_exit_codes() {
        smtlab_fixtures::signals::deliverable();
        for sig in [libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT] {
            let dir = tempfile::tempdir().unwrap();
            let db = dir.path().join("r.db");
            let child = run_with_a_saved_cell(&db);
            // SAFETY: kill(2) on our own child's pid.
            assert_eq!(unsafe { libc::kill(child.id() as i32, sig) }, 0);
            let out = smtlab_fixtures::bounded::output(child, "the interrupted run");
            let err = String::from_utf8_lossy(&out.stderr);
            // 128 plus the signal's number, as a shell reports it.
            assert_eq!(out.status.code(), Some(128 + sig), "signal {sig}: {err}");
            assert!(err.contains("interrupted:"), "signal {sig}: {err}");
            let run = run_listing(&db);
            assert_eq!(run["status"], "interrupted", "signal {sig}");
            assert!(run["cells_done"].as_u64().unwrap() >= 1);
            if sig == libc::SIGTERM {
                smtlab()
                    .args(["run", "--resume"])
                    .args(db_arg(&db))
                    .assert()
                    .success();
                let run = run_listing(&db);
                assert_eq!(run["status"], "finished");
                assert_eq!(run["cells_done"], 8);
            }
        }
    }

    #[test]
    fn resume_refuses_a_run_another_live_process_measures_and_takes_over_a_dead_ones() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("r.db");
        let mut child = run_with_a_saved_cell(&db);
        let pid = child.id();
        for resume in [vec!["run", "--resume", "1"], vec!["run", "--resume"]] {
            let err = stderr_of(smtlab().args(&resume).args(db_arg(&db)));
            assert!(
                err.contains(&format!("run 1 is being measured by pid {pid} on ")),
                "{resume:?}: {err}"
            );
            assert_eq!(err.lines().count(), 1, "{err}");
        }
        // The refused attempts changed nothing: the run goes on.
        assert_eq!(run_listing(&db)["status"], "running");
        // SIGKILL leaves the lease behind; a resume on this host sees the pid is gone.
        child.kill().unwrap();
        smtlab_fixtures::bounded::wait(&mut child, "the child process");
        let out = smtlab()
            .args(["run", "--resume"])
            .args(db_arg(&db))
            .assert()
            .success()
            .get_output()
            .stderr
            .clone();
        let err = String::from_utf8(out).unwrap();
        assert!(
            err.contains(&format!("run 1 was leased by pid {pid}"))
                && err.contains("takes it over"),
            "{err}"
        );
        assert_eq!(run_listing(&db)["status"], "finished");
    }

    #[test]
    fn exec_and_report_print_the_same_speedup_for_the_same_pair() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("r.db");
        let exec = stdout_of(
            smtlab()
                .args(["exec", "--wide", "--reps", "3", "--placements", "1c1t,2c1t"])
                .args(db_arg(&db))
                .args([
                    "--",
                    "sh",
                    "-c",
                    "i=0; while [ $i -lt 3000 ]; do i=$((i+1)); done",
                ]),
        );
        let figure = regex::Regex::new(
            r"[0-9]+\.[0-9]{3}x (\[-?[0-9.]+, -?[0-9.]+\] )?(faster|slower|not significant at 95%|interval unbounded|unsteady)",
        )
        .unwrap();
        let found = |text: &str, line_start: &str| -> String {
            let line = text
                .lines()
                .find(|l| l.starts_with(line_start))
                .unwrap_or_else(|| panic!("no line {line_start:?} in {text}"));
            figure
                .find(line)
                .unwrap_or_else(|| panic!("no speed-up in {line:?}"))
                .as_str()
                .to_string()
        };
        let in_table = found(&exec, "2c1t");
        let in_verdict = found(&exec, "2 cores vs 1 (2c1t/1c1t): ");
        assert_eq!(in_table, in_verdict, "{exec}");
        let report = stdout_of(
            smtlab()
                .args(["report", "latest", "--wide"])
                .args(db_arg(&db)),
        );
        assert_eq!(found(&report, "2c1t"), in_table, "{report}");
        // The page finds the exec verdict by the stored run's catalog entries, which the
        // reader adds (the store keeps none): every benchmark of the run has one.
        let html = dir.path().join("exec.html");
        smtlab()
            .args(["report", "latest", "-o"])
            .arg(&html)
            .args(db_arg(&db))
            .assert()
            .success();
        let page = std::fs::read_to_string(&html).unwrap();
        assert!(page.contains("<section id=\"exec\">"), "no exec verdict");
        assert!(!page.contains("no catalog entry"));
        let json = json_of(
            smtlab()
                .args(["report", "latest", "--json"])
                .args(db_arg(&db)),
        );
        assert_eq!(json["benchmarks"][0]["name"], "exec");
        assert_eq!(json["benchmarks"][0]["report"], "exec");
        // Wall time is lower-is-better: above 1 means 2c1t took less time.
        let means: Vec<f64> = ["1c1t", "2c1t"]
            .iter()
            .map(|p| {
                let line = exec.lines().find(|l| l.starts_with(p)).unwrap();
                line.split_whitespace().nth(4).unwrap().parse().unwrap()
            })
            .collect();
        let ratio: f64 = in_table.split('x').next().unwrap().parse().unwrap();
        assert!(
            (ratio - means[0] / means[1]).abs() < 0.01 * ratio,
            "{ratio} vs {means:?}"
        );
    }
}

mod load {
    use super::*;
    use std::io::{BufRead, BufReader, Write};
    use std::net::TcpListener;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

    const BODY: &[u8] = b"0123456789abcdef0123456789abcdef";

    /// A keep-alive HTTP server on loopback that answers every request with `BODY` and
    /// counts the requests it answered; stops when `stop` is set.
    fn server(stop: Arc<AtomicBool>, served: Arc<AtomicU64>) -> u16 {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let Ok((conn, _)) = listener.accept() else {
                    std::thread::sleep(std::time::Duration::from_millis(5));
                    continue;
                };
                conn.set_nonblocking(false).unwrap();
                conn.set_read_timeout(Some(std::time::Duration::from_secs(10)))
                    .unwrap();
                let (stop, served) = (Arc::clone(&stop), Arc::clone(&served));
                std::thread::spawn(move || {
                    let mut out = conn.try_clone().unwrap();
                    let mut lines = BufReader::new(conn);
                    let mut line = String::new();
                    while !stop.load(Ordering::Relaxed) {
                        line.clear();
                        match lines.read_line(&mut line) {
                            Ok(0) | Err(_) => return,
                            Ok(_) if line == "\r\n" => {
                                let head = format!(
                                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n",
                                    BODY.len()
                                );
                                if out.write_all(head.as_bytes()).is_err()
                                    || out.write_all(BODY).is_err()
                                {
                                    return;
                                }
                                served.fetch_add(1, Ordering::Relaxed);
                            }
                            Ok(_) => {}
                        }
                    }
                });
            }
        });
        port
    }

    #[test]
    fn load_counts_the_requests_the_server_answered() {
        let stop = Arc::new(AtomicBool::new(false));
        let served = Arc::new(AtomicU64::new(0));
        let port = server(Arc::clone(&stop), Arc::clone(&served));
        let out = smtlab()
            .args(["load", &format!("http://127.0.0.1:{port}/x")])
            .args(["-c", "2", "-d", "0.5", "--json"])
            .assert()
            .success()
            .get_output()
            .stdout
            .clone();
        stop.store(true, Ordering::Relaxed);
        let v: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["schema"], "smtlab.load/1");
        // An unpinned client may share a CPU with the server: it does not poll.
        assert_eq!(v["busy_poll_ns"], 0, "{v}");
        let requests = v["requests"].as_u64().unwrap();
        assert!(requests > 0, "{v}");
        // Every counted request got its whole body, and none was counted twice.
        assert_eq!(
            v["body_bytes"].as_u64().unwrap(),
            requests * BODY.len() as u64,
            "{v}"
        );
        assert!(requests <= served.load(Ordering::Relaxed), "{v}");
        // The slow counts shrink as the bound grows and never exceed the requests.
        let slow: Vec<u64> = ["1", "10", "100", "1000"]
            .iter()
            .map(|k| v["slower_than_ms"][k].as_u64().unwrap())
            .collect();
        assert!(
            slow[0] <= requests && slow.windows(2).all(|w| w[0] >= w[1]),
            "{v}"
        );
        assert!(
            v["errors"].as_object().unwrap().values().all(|e| e == 0),
            "{v}"
        );
    }

    #[test]
    fn other_hosts_and_bad_urls_are_one_line_errors() {
        for (url, expect) in [
            ("https://127.0.0.1/", "https is not supported"),
            ("http:///", "no host"),
            ("http://192.0.2.1:80/", "192.0.2.1"),
        ] {
            let out = smtlab().args(["load", url, "-d", "0.2"]).output().unwrap();
            assert!(!out.status.success(), "{url}");
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(err.trim().lines().count(), 1, "{url}: {err}");
            assert!(err.contains(expect), "{url}: {err}");
        }
    }

    #[test]
    fn bad_load_settings_are_one_line_errors() {
        for (args, expect) in [
            (&["--busy-poll", "soon"][..], "--busy-poll"),
            (&["--busy-poll", "2000000"][..], "--busy-poll"),
            (&["--rate", "0"][..], "--rate"),
            (&["-c", "0"][..], "-c 0"),
        ] {
            let out = smtlab()
                .args(["load", "http://127.0.0.1:9/", "-d", "0.2"])
                .args(args)
                .output()
                .unwrap();
            assert!(!out.status.success(), "{args:?}");
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
            assert!(err.contains(expect), "{args:?}: {err}");
        }
    }
}

/// Work that failed gives an error with the count of failures, never a figure.
mod failed_work {
    use super::*;
    use std::net::TcpListener;

    /// `unshare` with a private mount namespace (and a user namespace when not root),
    /// or `None` where it cannot make one.
    fn private_mounts() -> Option<std::process::Command> {
        let mut args = vec!["--mount", "--propagation", "private"];
        // SAFETY: geteuid() takes nothing and cannot fail.
        if unsafe { libc::geteuid() } != 0 {
            args.insert(0, "--map-root-user");
        }
        let ok = std::process::Command::new("unshare")
            .args(&args)
            .args(["sh", "-c", "mount -t tmpfs -o size=64k tmpfs /mnt 2>/dev/null || mount -t tmpfs -o size=64k tmpfs /tmp"])
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            smtlab_fixtures::require::skip(
                "`unshare --mount` cannot make a private mount namespace with a tmpfs here",
            );
            return None;
        }
        let mut c = std::process::Command::new("unshare");
        c.args(&args);
        Some(c)
    }

    #[test]
    fn dbench_on_a_full_file_system_fails_with_the_count() {
        let Some(mut cmd) = private_mounts() else {
            return;
        };
        // A 256 KiB tmpfs, mounted only inside the namespace (gone with it), holds the
        // clients' directories but not their writes.
        let dir = tempfile::tempdir().unwrap();
        let mnt = dir.path().display().to_string();
        let bin = assert_cmd::cargo::cargo_bin("smtlab");
        let script = format!(
            "mount -t tmpfs -o size=256k tmpfs '{mnt}' && exec '{}' bench dbench -p 1c1t --quick \
             --param clients=2 --param duration=300ms --param dir='{mnt}'",
            bin.display()
        );
        let out = cmd.args(["sh", "-c", &script]).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(!out.status.success(), "{stdout}\n{err}");
        assert!(err.contains("operations failed"), "{err}");
        assert!(err.contains("No space left on device"), "{err}");
        assert!(err.contains("no throughput reported"), "{err}");
        // "N of M operations failed": a real count, at least one.
        let error_line = err
            .lines()
            .find(|l| l.starts_with("smtlab: error:"))
            .unwrap_or_default();
        let n: u64 = error_line
            .split(" of ")
            .next()
            .and_then(|s| s.rsplit(' ').next())
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("no failure count in {err}"));
        assert!(n > 0, "{err}");
        // No figure was printed for the cell.
        assert!(!stdout.contains("MB/s"), "{stdout}");
        // Nothing is mounted here: the tmpfs lived in the namespace only.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn run_and_exec_refuse_a_database_that_is_not_a_regular_file() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("pipe.db");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid C string naming a path in our own temporary directory.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let db = fifo.to_str().unwrap();
        for args in [
            &[
                "run",
                "--bench",
                "null-syscall",
                "--suite",
                "quick",
                "--db",
                db,
            ][..],
            &["exec", "-p", "1c1t", "--db", db, "--", "true"][..],
        ] {
            let out = smtlab()
                .args(args)
                .timeout(std::time::Duration::from_secs(60))
                .output()
                .unwrap();
            assert!(!out.status.success(), "{args:?}");
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(err.contains("is not a regular file"), "{args:?}: {err}");
            assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
        }
        // No journal or -wal beside it.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn a_run_whose_placements_cannot_run_here_stores_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("r.db");
        let topo = json_of(smtlab().args(["topo", "--json"]));
        let mut cases = vec!["cpus=4000"];
        if topo["smt"]["threads_per_core_max"] == 1 {
            cases.push("1c2t");
        }
        for p in cases {
            let out = smtlab()
                .args([
                    "run",
                    "--suite",
                    "quick",
                    "--bench",
                    "null-syscall",
                    "--placements",
                    p,
                ])
                .arg("--db")
                .arg(&db)
                .output()
                .unwrap();
            assert!(!out.status.success(), "{p}");
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(err.contains("none can run on this machine"), "{p}: {err}");
            assert!(err.contains(p), "{p}: {err}");
            assert!(!db.exists(), "{p}: a run was stored");
        }
    }

    #[test]
    fn a_run_whose_disk_fills_up_is_interrupted_not_running() {
        let Some(mut cmd) = private_mounts() else {
            return;
        };
        // The database on a 3 MiB tmpfs (inside the namespace only); once the run has
        // started, a file takes every block left, so the next cell cannot be saved.
        let dir = tempfile::tempdir().unwrap();
        let mnt = dir.path().display().to_string();
        let bin = assert_cmd::cargo::cargo_bin("smtlab");
        let script = format!(
            r#"mount -t tmpfs -o size=3m tmpfs '{mnt}' || exit 99
            '{bin}' run --suite quick --bench os,threads,compute --placements 1c1t \
                --db '{mnt}/r.db' >/dev/null 2>'{mnt}/err' &
            pid=$!
            for i in $(seq 1 200); do
                grep -q 'cells to measure' '{mnt}/err' && break
                sleep 0.1
            done
            sleep 0.3
            dd if=/dev/zero of='{mnt}/fill' bs=64k 2>/dev/null
            wait $pid
            echo "rc=$?"
            rm -f '{mnt}/fill'
            cat '{mnt}/err' >&2
            '{bin}' runs --db '{mnt}/r.db'"#,
            bin = bin.display()
        );
        let out = cmd.args(["sh", "-c", &script]).output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(stdout.contains("rc=1"), "{stdout}\n{err}");
        assert!(err.contains("disk is full"), "{err}");
        assert!(
            err.contains("run 1 interrupted; finish it with: smtlab run --resume 1"),
            "{err}"
        );
        let row = stdout
            .lines()
            .find(|l| l.trim_start().starts_with("1 "))
            .unwrap();
        assert!(row.contains("interrupted"), "{stdout}");
    }

    /// A loopback port nothing listens on (bound, then closed).
    fn closed_port() -> u16 {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    }

    #[test]
    fn load_against_a_closed_port_fails() {
        let port = closed_port();
        let out = smtlab()
            .args([
                "load",
                &format!("http://127.0.0.1:{port}/"),
                "-c",
                "2",
                "-d",
                "0.5",
            ])
            .output()
            .unwrap();
        assert!(!out.status.success());
        let stdout = String::from_utf8_lossy(&out.stdout);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(stdout.contains("connect"), "{stdout}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(err.contains("no request succeeded"), "{err}");
        assert!(err.contains("connect"), "{err}");
    }

    #[test]
    fn a_server_that_never_answers_is_counted_as_timeouts() {
        // Accepts (the backlog does) and never reads or answers.
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let out = smtlab()
            .args([
                "load",
                &format!("http://127.0.0.1:{port}/"),
                "-c",
                "3",
                "-d",
                "0.5",
            ])
            .args(["--json"])
            .output()
            .unwrap();
        drop(l);
        assert!(!out.status.success());
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["requests"], 0, "{v}");
        assert_eq!(v["errors"]["timeout"], 3, "{v}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("no request succeeded") && err.contains("timeout 3"),
            "{err}"
        );
    }
}

mod errors {
    use super::*;

    /// Each cause of an error is said once: its type says it, and `main` prints the
    /// chain as it is (no text filter behind it).
    #[test]
    fn every_cause_is_printed_once() {
        let dir = tempfile::tempdir().unwrap();
        let not_a_db = dir.path().join("x.db");
        std::fs::write(&not_a_db, "not a database").unwrap();
        let cases: Vec<Vec<String>> = vec![
            vec![
                "topo".into(),
                "--sysfs".into(),
                "/nonexistent/smtlab-tree".into(),
            ],
            vec!["runs".into(), "--db".into(), not_a_db.display().to_string()],
            vec![
                "report".into(),
                "--db".into(),
                "/nonexistent/dir/x.db".into(),
            ],
            vec![
                "run".into(),
                "--suite".into(),
                "quick".into(),
                "--bench".into(),
                "null-syscall".into(),
                "--db".into(),
                "/proc/smtlab/x.db".into(),
            ],
        ];
        for args in cases {
            let out = smtlab().args(&args).output().unwrap();
            assert!(!out.status.success(), "{args:?}");
            let err = String::from_utf8_lossy(&out.stderr);
            let line = err
                .lines()
                .find(|l| l.starts_with("smtlab: error: "))
                .unwrap_or_else(|| panic!("{args:?}: {err}"));
            let parts: Vec<&str> = line.split(": ").skip(2).collect();
            for (i, p) in parts.iter().enumerate() {
                assert!(
                    !parts[i + 1..].iter().any(|q| q.contains(p) && p.len() > 3),
                    "{args:?}: {p:?} said twice in {line:?}"
                );
            }
        }
    }
}

#[test]
fn every_aim_row_of_paper_001_table_2_runs_in_its_quick_form() {
    let list = json_of(smtlab().args(["list", "--json"]));
    let aim: Vec<(String, String)> = list
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| b["group"] == "aim")
        .map(|b| {
            let origin = b["origin"].as_str().unwrap();
            let row = origin
                .strip_prefix("paper 001 Table 2 (AIM9 ")
                .and_then(|r| r.strip_suffix(')'))
                .unwrap_or_else(|| panic!("{origin}"));
            (b["name"].as_str().unwrap().to_string(), row.to_string())
        })
        .collect();
    // The paper's 59 rows, each once.
    let mut rows: Vec<&str> = aim.iter().map(|(_, r)| r.as_str()).collect();
    rows.sort_unstable();
    rows.dedup();
    assert_eq!(rows.len(), 59, "{rows:?}");
    let dir = tempfile::tempdir().unwrap();
    let v = json_of(
        smtlab()
            .arg("bench")
            .args(aim.iter().map(|(n, _)| n.as_str()))
            .args(["-p", "1c1t", "--quick", "--max-samples", "3", "--json"])
            .env("TMPDIR", dir.path()),
    );
    let cells = v["cells"].as_array().unwrap();
    assert_eq!(v["skipped"], serde_json::json!([]));
    assert_eq!(cells.len(), 59);
    for c in cells {
        let mean = c["result"]["summary"]["mean"].as_f64().unwrap();
        assert!(mean > 0.0, "{}: {mean}", c["benchmark"]);
        assert!(c["unit"].as_str().unwrap().ends_with("/s"), "{}", c["unit"]);
    }
    // Files, FIFOs and directories of the disk and system rows are gone.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}
