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

    #[test]
    fn human_output_ends_with_the_verdict() {
        let out = smtlab()
            .arg("topo")
            .assert()
            .success()
            .get_output()
            .stdout
            .clone();
        let text = String::from_utf8(out).unwrap();
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
        let out = smtlab()
            .args(["topo", "--view", "both", "--sysfs"])
            .arg(&root)
            .assert()
            .success()
            .get_output()
            .stdout
            .clone();
        let text = String::from_utf8(out).unwrap();
        let text = text.replace(&root.display().to_string(), "<root>");
        insta::assert_snapshot!("topo_32intel64", text);
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
        let out = smtlab()
            .arg("placements")
            .assert()
            .success()
            .get_output()
            .stdout
            .clone();
        let text = String::from_utf8(out).unwrap();
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
        let out = smtlab()
            .args(["placements", "--sysfs"])
            .arg(&root)
            .args(["2P", "1c2t", "cpus=0,3"])
            .assert()
            .success()
            .get_output()
            .stdout
            .clone();
        let text = String::from_utf8(out).unwrap();
        insta::assert_snapshot!("placements_16amd64_explicit", text);
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
        let out = smtlab()
            .arg("list")
            .assert()
            .success()
            .get_output()
            .stdout
            .clone();
        let text = String::from_utf8(out).unwrap();
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

    #[test]
    fn bench_compares_placements_to_the_first() {
        let out = smtlab()
            .args(["bench", "int-ops", "--quick", "-p", "1c1t", "-p", "2c1t"])
            .assert()
            .success()
            .get_output()
            .stdout
            .clone();
        let text = String::from_utf8(out).unwrap();
        let row = text
            .lines()
            .find(|l| l.starts_with("2c1t"))
            .expect("2c1t row");
        assert!(row.contains("x ["), "{row}");
        assert!(text.contains("iterations/sample"), "{text}");
    }

    #[test]
    fn bench_errors_name_what_exists() {
        smtlab()
            .args(["bench", "nope"])
            .assert()
            .failure()
            .stderr(predicate::str::contains("unknown benchmark \"nope\""))
            .stderr(predicate::str::contains("mem-read"));
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
