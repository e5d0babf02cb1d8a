//! smtlab on kernels that have SMT siblings: each test boots a Linux guest under QEMU
//! software emulation (`scripts/smt-vm.sh`) with an SMT topology, runs a script of
//! smtlab commands in it (`tests/guest/*.sh`) and checks the results against the
//! guest kernel's own sibling lists.
//!
//! The guest checks behaviour only (timings under emulation mean nothing): topology and
//! placements resolve to true siblings, bench/run/exec work on 1c2t, SMT switches off
//! and on and is restored after SIGTERM and kill -9, and the 1T-UP placement takes
//! the other CPUs offline for its cell only; `irq=sibling|other-core` steers loopback's
//! receive processing (`rps_cpus`) for a cell of the copying web server and puts it back,
//! also after kill -9; and a second 1s2c2t guest, given the kernel NFS server (`smt-vm.sh
//! --nfsd`: nfsd's modules and nfs-kernel-server's programs from this machine), runs
//! `nfs-sfs` on the kernel's nfsd on 1c1t and 1c2t, its threads pinned to the core, over
//! UDP and with the peak search, and leaves no nfsd thread, daemon or mount behind, also
//! after kill -9. The 2s2c2t guest also runs `predict` in both forms (profiles, models,
//! validation, every cell on the CPUs of its form). Every SMT guest boots the kernel
//! `scripts/smt-vm.sh` builds with core scheduling (`--kernel sched-core`); the
//! uniprocessor guest its build without SMP.
//!
//! Skipped, with the reason printed, where QEMU, busybox, cpio or the guest kernels
//! (`scripts/smt-vm.sh [--kernel up] --fetch-kernel`) are missing, unless `SMTLAB_GUEST_TESTS=require`
//! or `SMTLAB_REQUIRE_TOOLS=1` (CI sets both, so there a missing piece fails).
//! `SMTLAB_GUEST_TESTS=skip` skips them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use serde_json::Value;

struct Guest {
    topo: &'static str,
    script: &'static str,
    packages: usize,
    cores: usize,
    threads_per_core: usize,
    numa_nodes: usize,
    /// Give the guest the kernel NFS server (`smt-vm.sh --nfsd`).
    nfsd: bool,
    /// The guest kernel (`smt-vm.sh --kernel`): `sched-core`, built from Debian's
    /// kernel source with core scheduling (every SMT guest's); `up`, the same built
    /// without SMP; or `debian`, Debian's cloud kernel.
    kernel: &'static str,
    /// The limit for the guest's boot, script and power-off (`smt-vm.sh --timeout`).
    timeout_s: u32,
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join(program).is_file()))
        .unwrap_or(false)
}

/// Why the guests cannot run here with these kernels, if they cannot.
fn missing(kernels: &[&str]) -> Option<String> {
    if !on_path("qemu-system-x86_64") {
        return Some("qemu-system-x86_64 not found (apt-get install qemu-system-x86)".into());
    }
    if !Path::new("/bin/busybox").is_file() {
        return Some("/bin/busybox not found (apt-get install busybox-static)".into());
    }
    if !on_path("cpio") {
        return Some("cpio not found (apt-get install cpio)".into());
    }
    for kernel in kernels {
        let out = Command::new(repo().join("scripts/smt-vm.sh"))
            .args(["--kernel", kernel, "--check-kernel"])
            .output();
        match out {
            Ok(o) if o.status.success() => {}
            Ok(o) => return Some(String::from_utf8_lossy(&o.stderr).trim().to_string()),
            Err(e) => return Some(format!("cannot run scripts/smt-vm.sh: {e}")),
        }
    }
    None
}

/// The nfs-kernel-server programs `smt-vm.sh --nfsd` copies into the guest, if one is
/// missing here.
fn nfs_programs_missing() -> Option<String> {
    ["rpcbind", "rpcinfo", "rpc.mountd", "rpc.nfsd", "exportfs"]
        .iter()
        .find(|p| !on_path(p) && !Path::new("/usr/sbin").join(p).is_file())
        .map(|p| format!("{p} not found (apt-get install nfs-kernel-server)"))
}

/// Runs one guest and checks its output, giving its sections; the error holds the
/// guest's output.
fn run(g: &Guest) -> Result<BTreeMap<String, String>, String> {
    let started = Instant::now();
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/guest");
    let mut cmd = Command::new(repo().join("scripts/smt-vm.sh"));
    if g.nfsd {
        match nfs_programs_missing() {
            None => {
                cmd.arg("--nfsd");
            }
            Some(why) => {
                // The guest script says it skipped the NFS checks.
                assert!(
                    !smtlab_fixtures::require::required(),
                    "the NFS guest checks are required but cannot run: {why}"
                );
                eprintln!("guest {}: NFS checks skipped: {why}", g.topo);
            }
        }
    }
    let out = cmd
        .args(["--kernel", g.kernel, "--topo", g.topo, "--bin"])
        .arg(env!("CARGO_BIN_EXE_smtlab"))
        .arg("--timeout")
        .arg(g.timeout_s.to_string())
        .arg("--add")
        .arg(dir.join("lib.sh"))
        .arg(dir.join(g.script))
        .output()
        .map_err(|e| format!("cannot run scripts/smt-vm.sh: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    eprintln!(
        "guest {} ({}): {:.1} s",
        g.topo,
        g.script,
        started.elapsed().as_secs_f64()
    );
    let fail = |why: String| {
        Err(format!(
            "guest {} ({}): {why}\n--- guest output ---\n{text}\n--- stderr ---\n{}",
            g.topo,
            g.script,
            String::from_utf8_lossy(&out.stderr)
        ))
    };
    let failed: Vec<&str> = text.lines().filter(|l| l.starts_with("FAIL:")).collect();
    if !failed.is_empty() {
        return fail(failed.join("\n"));
    }
    if !out.status.success() {
        return fail(format!("the guest script ended with {}", out.status));
    }
    let sections = sections(&text);
    if !sections.contains_key("end") {
        return fail("the guest script stopped before its end".into());
    }
    match check_topology(g, &sections)
        .and_then(|()| check_corun(&sections))
        .and_then(|()| check_predict(&sections))
        .and_then(|()| check_nfs(&sections))
        .and_then(|()| check_security(&sections))
        .and_then(|()| check_up_web(&sections))
        .and_then(|()| check_compare_run(&sections))
    {
        Ok(()) => Ok(sections),
        Err(why) => fail(why),
    }
}

/// The `smp-run` or `up-run` section (when the guest ran one): `report --json` of a run
/// of null-syscall and web-static, one cell of each per placement, named as the
/// kernel names them (`1t-up-kernel` once on the uniprocessor kernel, though the run
/// listed 1c1t too).
fn check_compare_run(s: &BTreeMap<String, String>) -> Result<(), String> {
    for (name, want) in [
        ("smp-run", &["1c1t", "1c1t-up", "1c2t"][..]),
        ("up-run", &["1t-up-kernel"][..]),
    ] {
        let Some(text) = s.get(name) else { continue };
        let run: Value =
            serde_json::from_str(text).map_err(|e| format!("{name}: report --json: {e}"))?;
        for bench in ["null-syscall", "web-static"] {
            let mut names: Vec<&str> = run["cells"]
                .as_array()
                .ok_or(format!("{name}: no cells"))?
                .iter()
                .filter(|c| c["benchmark"] == bench)
                .filter_map(|c| c["placement"]["name"].as_str())
                .collect();
            names.sort_unstable();
            if names != want {
                return Err(format!(
                    "{name}: {bench}'s cells on {names:?}, expected {want:?}"
                ));
            }
        }
    }
    Ok(())
}

/// `smtlab compare` of the SMP kernel's run and the uniprocessor kernel's (the guests'
/// `smp-run` and `up-run` sections, as results JSON files): paper 000's 2T vs 1T-UP,
/// each workload's `1t-up-kernel` cell beside the SMP kernel's 1c2t, 1c1t-up and 1c1t,
/// each with a speed-up over it.
fn check_up_beside_smp(
    smp: &BTreeMap<String, String>,
    up: &BTreeMap<String, String>,
) -> Result<(), String> {
    let dir = tempfile::tempdir().map_err(|e| format!("a temporary directory: {e}"))?;
    let mut files = Vec::new();
    for (name, s) in [("smp-run", smp), ("up-run", up)] {
        let path = dir.path().join(format!("{name}.json"));
        std::fs::write(&path, s.get(name).ok_or(format!("no {name} section"))?)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        files.push(path);
    }
    let out = Command::new(env!("CARGO_BIN_EXE_smtlab"))
        .arg("compare")
        .args(&files)
        .args(["--json", "--db"])
        .arg(dir.path().join("none.db"))
        .output()
        .map_err(|e| format!("smtlab compare: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(format!(
            "smtlab compare: {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let v: Value = serde_json::from_str(&text).map_err(|e| format!("compare --json: {e}"))?;
    let rows = v["up_kernel"]
        .as_array()
        .ok_or(format!("compare: no up_kernel rows: {text}"))?;
    let mut benches: Vec<&str> = rows
        .iter()
        .filter_map(|r| r["benchmark"].as_str())
        .collect();
    benches.sort_unstable();
    if benches != ["null-syscall", "web-static"] {
        return Err(format!("compare: up_kernel rows for {benches:?}"));
    }
    for r in rows {
        let beside: Vec<&str> = r["beside"]
            .as_array()
            .map(|b| b.iter().filter_map(|p| p["placement"].as_str()).collect())
            .unwrap_or_default();
        let ratios = r["beside"].as_array().is_some_and(|b| {
            b.iter().all(|p| {
                p["verdict"]["speedup"]["ratio"]
                    .as_f64()
                    .is_some_and(|x| x > 0.0)
            })
        });
        if r["up_kernel_in"] != "B" || beside != ["1c2t", "1c1t-up", "1c1t"] || !ratios {
            return Err(format!("compare: up_kernel row {r}"));
        }
    }
    Ok(())
}

/// The guest kernel's sibling list of each CPU (the `siblings` section).
fn siblings(s: &BTreeMap<String, String>) -> Result<BTreeMap<u64, Vec<u64>>, String> {
    Ok(s.get("siblings")
        .ok_or("no siblings section")?
        .lines()
        .filter_map(|l| l.split_once(' '))
        .map(|(cpu, list)| (cpu.parse().unwrap(), parse_list(list)))
        .collect())
}

/// The co-run cells of the `corun` section (when the script has one): the sibling form on
/// two CPUs of one kernel core, the two-core form on two cores, and a partner reported
/// by every co-run sample (none by the alone cell's).
fn check_corun(s: &BTreeMap<String, String>) -> Result<(), String> {
    let Some(text) = s.get("corun") else {
        return Ok(());
    };
    let siblings = siblings(s)?;
    let run: Value = serde_json::from_str(text).map_err(|e| format!("corun report --json: {e}"))?;
    let cells = run["cells"].as_array().ok_or("corun: no cells")?;
    let mut forms = Vec::new();
    for c in cells {
        let form = corun_form(c, &siblings).map_err(|e| format!("corun: {e}"))?;
        forms.push(form.to_string());
        // Every co-run sample reports its partner (the partner is inside a sample of
        // its own before the measured one starts); how many partner samples fit inside
        // is a matter of timing, which means nothing under emulation.
        let samples = c["result"]["samples"]
            .as_array()
            .ok_or("corun: no samples")?;
        let reported = samples
            .iter()
            .all(|x| x["metrics"]["partner_samples"].as_f64().is_some());
        if (form != "alone") != reported {
            return Err(format!(
                "corun: the {form} cell's samples report a partner: {reported}"
            ));
        }
    }
    forms.sort();
    if forms != ["alone", "cores", "sibling"] {
        return Err(format!("corun: cells {forms:?}"));
    }
    Ok(())
}

/// A co-run cell's form, checked against the CPUs it ran on: `alone` on one CPU,
/// `sibling` on two CPUs of one kernel core, `cores` on two cores.
fn corun_form<'a>(c: &'a Value, siblings: &BTreeMap<u64, Vec<u64>>) -> Result<&'a str, String> {
    let form = c["conditions"]["form"].as_str().unwrap_or("?");
    let cpus = numbers(&c["placement"]["cpus"]);
    let same_core = |a: u64, b: u64| siblings.get(&a).is_some_and(|l| l.contains(&b));
    let ok = match (form, cpus.as_slice()) {
        ("alone", [_]) => true,
        ("sibling", [a, b]) => a != b && same_core(*a, *b),
        ("cores", [a, b]) => !same_core(*a, *b),
        _ => false,
    };
    match ok {
        true => Ok(form),
        false => Err(format!("{form} cell on CPUs {cpus:?}")),
    }
}

/// The `predict` and `predict-run` sections (when the guest ran them): the profile
/// document in both forms, each with a model or the reason it has none, validated where
/// fitted (fewer validations only where pairs were held back); every pair stored (11 pairs of 3 cells: 8 profile, 2
/// training, 1 held out), each cell on the CPUs of its form.
fn check_predict(s: &BTreeMap<String, String>) -> Result<(), String> {
    let (Some(doc), Some(run)) = (s.get("predict"), s.get("predict-run")) else {
        return Ok(());
    };
    let doc: Value = serde_json::from_str(doc).map_err(|e| format!("predict --json: {e}"))?;
    let run: Value =
        serde_json::from_str(run).map_err(|e| format!("predict report --json: {e}"))?;
    if doc["forms"] != serde_json::json!(["sibling", "cores"]) {
        return Err(format!("predict: forms {}", doc["forms"]));
    }
    let models = doc["models"].as_array().ok_or("predict: no models")?;
    let fitted = models.iter().filter(|m| !m["model"].is_null()).count();
    let explained = models
        .iter()
        .filter(|m| m["not_fitted"].is_string())
        .count();
    if models.len() != 2 || fitted + explained != 2 {
        return Err(format!("predict: models {}", doc["models"]));
    }
    let validated = doc["validation"].as_array().map_or(0, Vec::len);
    let held_back = doc["held_back"].as_array().is_some_and(|h| !h.is_empty());
    if validated > fitted || (validated < fitted && !held_back) {
        return Err(format!(
            "predict: {validated} validations of {fitted} models"
        ));
    }
    let siblings = siblings(s)?;
    let cells = run["cells"].as_array().ok_or("predict: no cells")?;
    let mut forms = cells
        .iter()
        .map(|c| corun_form(c, &siblings))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("predict: {e}"))?;
    let stored = cells.len() + run["skipped"].as_array().map_or(0, Vec::len);
    forms.sort();
    forms.dedup();
    if stored != 33 || forms != ["alone", "cores", "sibling"] {
        return Err(format!("predict: {stored} cells stored, forms {forms:?}"));
    }
    Ok(())
}

/// The `nfs` section (when the guest ran it): `bench nfs-sfs --json` on the kernel's
/// nfsd, a cell for 1c1t and one for 1c2t on two siblings, every sample with
/// operations, reads and writes done, no content mismatch and nfsd's CPU time; and the
/// `nfs-udp` section: the same over UDP on 1c2t, retransmissions counted.
fn check_nfs(s: &BTreeMap<String, String>) -> Result<(), String> {
    let Some(text) = s.get("nfs") else {
        return Ok(());
    };
    check_nfs_cells(s, "nfs", text, &["1c1t", "1c2t"], "tcp")?;
    let udp = s.get("nfs-udp").ok_or("no nfs-udp section")?;
    check_nfs_cells(s, "nfs-udp", udp, &["1c2t"], "udp")
}

/// The cells of one `bench nfs-sfs --json` (section `name`): on `want` placements, over
/// `transport`.
fn check_nfs_cells(
    s: &BTreeMap<String, String>,
    name: &str,
    text: &str,
    want: &[&str],
    transport: &str,
) -> Result<(), String> {
    let siblings = siblings(s)?;
    let run: Value =
        serde_json::from_str(text).map_err(|e| format!("{name}: bench nfs-sfs --json: {e}"))?;
    let cells = run["cells"].as_array().ok_or(format!("{name}: no cells"))?;
    let mut specs = Vec::new();
    for c in cells {
        let spec = c["placement_spec"].as_str().unwrap_or("?").to_string();
        if c["params"]["server"] != "kernel" || c["params"]["transport"] != transport {
            return Err(format!(
                "{name}: the {spec} cell's params are {}",
                c["params"]
            ));
        }
        let cpus = numbers(&c["placement"]["cpus"]);
        let same_core = |a: u64, b: u64| siblings.get(&a).is_some_and(|l| l.contains(&b));
        let placed = match (spec.as_str(), cpus.as_slice()) {
            ("1c1t", [_]) => true,
            ("1c2t", [a, b]) => a != b && same_core(*a, *b),
            _ => false,
        };
        if !placed {
            return Err(format!("{name}: {spec} cell on CPUs {cpus:?}"));
        }
        let samples = c["result"]["samples"]
            .as_array()
            .ok_or(format!("{name}: no samples"))?;
        if samples.is_empty() {
            return Err(format!("{name}: the {spec} cell has no samples"));
        }
        for x in samples {
            let m = &x["metrics"];
            let get = |k: &str| m[k].as_f64().unwrap_or(-1.0);
            let good = x["value"].as_f64().unwrap_or(0.0) > 0.0
                && get("read_ops") > 0.0
                && get("write_ops") > 0.0
                && get("content_mismatches") == 0.0
                && x["cpu_ns"].as_u64().unwrap_or(0) > 0
                // Counted over UDP only.
                && (get("udp_retransmits") >= 0.0) == (transport == "udp");
            if !good {
                return Err(format!("{name}: a {spec} sample: {x}"));
            }
        }
        specs.push(spec);
    }
    specs.sort();
    if specs != want {
        return Err(format!("{name}: cells {specs:?}, expected {want:?}"));
    }
    Ok(())
}

/// The `security-NAME` sections (when the guest ran them): `advise --security --json`
/// on a kernel with core scheduling. Every mode measured, none skipped; forced idle
/// recorded for the `coresched` cell only, schedstats off as found too (`thread` and
/// `cgroup`, one thread or process beside a task of no cookie busy on its sibling: above
/// zero); the partners as distrusting tenants, each pair's `coresched` cell forcing a
/// sibling idle.
fn check_security(s: &BTreeMap<String, String>) -> Result<(), String> {
    let ran: Vec<&str> = s
        .keys()
        .filter_map(|k| k.strip_prefix("security-"))
        .collect();
    let every = [
        "cgroup",
        "partners",
        "pgroup",
        "process",
        "thread",
        "thread-schedstats-off",
    ];
    if !ran.is_empty() && ran != every {
        return Err(format!("security cells {ran:?}, expected {every:?}"));
    }
    for (name, text) in s
        .iter()
        .filter_map(|(k, v)| Some((k.strip_prefix("security-")?, v)))
    {
        let v: Value = serde_json::from_str(text)
            .map_err(|e| format!("security {name}: advise --security --json: {e}"))?;
        if v["schema"] != "smtlab.security/1" {
            return Err(format!("security {name}: schema {}", v["schema"]));
        }
        let answers = v["answers"]
            .as_array()
            .ok_or(format!("security {name}: no answers"))?;
        for a in answers {
            let modes = a["modes"]
                .as_array()
                .ok_or(format!("security {name}: no modes"))?;
            let names: Vec<&str> = modes.iter().filter_map(|m| m["mode"].as_str()).collect();
            if names != ["smt-on", "coresched", "smt-off"] {
                return Err(format!("security {name}: modes {names:?}"));
            }
            for m in modes {
                if m.get("skipped").is_some() || m["value"]["value"].as_f64().is_none() {
                    return Err(format!("security {name}: {} not measured: {m}", m["mode"]));
                }
            }
            let idle = |m: &Value| m["forced_idle_share"]["value"].as_f64();
            if idle(&modes[0]).is_some() || idle(&modes[2]).is_some() {
                return Err(format!(
                    "security {name}: forced idle outside coresched: {a}"
                ));
            }
            let tenants = a["workload"]
                .as_str()
                .unwrap_or("")
                .contains("distrusting tenants");
            let coresched = idle(&modes[1]);
            let good = match name {
                "thread" | "cgroup" => coresched.is_some_and(|x| x > 0.0),
                _ if tenants => coresched.is_some_and(|x| x > 0.0),
                _ => coresched.is_some_and(|x| x >= 0.0),
            };
            if !good {
                return Err(format!(
                    "security {name}: {}'s forced idle share {coresched:?}",
                    a["workload"]
                ));
            }
        }
        let tenants = answers
            .iter()
            .filter(|a| {
                a["workload"]
                    .as_str()
                    .unwrap_or("")
                    .contains("distrusting tenants")
            })
            .count();
        if tenants != if name == "partners" { 5 } else { 0 } {
            return Err(format!("security {name}: {tenants} tenant pairs"));
        }
    }
    Ok(())
}

/// The `up-web` section (when the guest ran it): `bench web-static --json` on the
/// uniprocessor kernel, one cell named `1t-up-kernel` on CPU 0 whose samples served
/// requests.
fn check_up_web(s: &BTreeMap<String, String>) -> Result<(), String> {
    let Some(text) = s.get("up-web") else {
        return Ok(());
    };
    let run: Value =
        serde_json::from_str(text).map_err(|e| format!("up-web: bench web-static --json: {e}"))?;
    let cells = run["cells"].as_array().ok_or("up-web: no cells")?;
    let [c] = cells.as_slice() else {
        return Err(format!("up-web: {} cells", cells.len()));
    };
    if c["placement"]["name"] != "1t-up-kernel" || numbers(&c["placement"]["cpus"]) != [0] {
        return Err(format!(
            "up-web: the cell's placement is {}",
            c["placement"]
        ));
    }
    let samples = c["result"]["samples"]
        .as_array()
        .ok_or("up-web: no samples")?;
    if samples.is_empty()
        || samples
            .iter()
            .any(|x| x["value"].as_f64().unwrap_or(0.0) <= 0.0)
    {
        return Err(format!("up-web: samples {samples:?}"));
    }
    Ok(())
}

/// `@@ NAME` lines start sections; the text up to the next one is the section's.
fn sections(text: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        if let Some(name) = line.strip_prefix("@@ ") {
            current = Some(name.trim().to_string());
            out.insert(name.trim().to_string(), String::new());
        } else if let Some(name) = &current {
            let s = out.get_mut(name).expect("inserted above");
            s.push_str(line);
            s.push('\n');
        }
    }
    out
}

fn parse_list(s: &str) -> Vec<u64> {
    let mut out = Vec::new();
    for part in s.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => out.extend(a.parse::<u64>().unwrap()..=b.parse::<u64>().unwrap()),
            None => out.push(part.parse().unwrap()),
        }
    }
    out
}

fn numbers(v: &Value) -> Vec<u64> {
    let mut x: Vec<u64> = v
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_u64).collect())
        .unwrap_or_default();
    x.sort_unstable();
    x
}

/// smtlab's topology and placements against the kernel's `thread_siblings_list`.
fn check_topology(g: &Guest, s: &BTreeMap<String, String>) -> Result<(), String> {
    // CPU -> its siblings, as the guest kernel says.
    let siblings = siblings(s)?;
    if siblings.is_empty() {
        return Err("the guest listed no siblings".into());
    }
    let topo: Value = serde_json::from_str(s.get("topo").ok_or("no topo section")?)
        .map_err(|e| format!("smtlab topo --json: {e}"))?;
    let packages = topo["packages"].as_array().ok_or("topo: no packages")?;
    if packages.len() != g.packages {
        return Err(format!(
            "topo: {} packages, expected {}",
            packages.len(),
            g.packages
        ));
    }
    let cores: Vec<Vec<u64>> = packages
        .iter()
        .flat_map(|p| p["cores"].as_array().cloned().unwrap_or_default())
        .map(|c| numbers(&c["cpus"]))
        .collect();
    if cores.len() != g.cores {
        return Err(format!("topo: {} cores, expected {}", cores.len(), g.cores));
    }
    for core in &cores {
        if core.len() != g.threads_per_core || siblings.get(&core[0]) != Some(core) {
            return Err(format!(
                "topo: core {core:?} is not the kernel's sibling list {:?}",
                siblings.get(&core[0])
            ));
        }
    }
    let numa = topo["numa_nodes"].as_array().map_or(0, Vec::len);
    if numa != g.numa_nodes {
        return Err(format!(
            "topo: {numa} NUMA nodes, expected {}",
            g.numa_nodes
        ));
    }
    if topo["smt"]["threads_per_core_max"].as_u64() != Some(g.threads_per_core as u64) {
        return Err(format!("topo: smt is {}", topo["smt"]));
    }

    let listing: Value = serde_json::from_str(s.get("placements").ok_or("no placements section")?)
        .map_err(|e| format!("smtlab placements --json: {e}"))?;
    let package_of = |cpu: u64| {
        packages.iter().position(|p| {
            p["cores"]
                .as_array()
                .is_some_and(|cs| cs.iter().any(|c| numbers(&c["cpus"]).contains(&cpu)))
        })
    };
    for entry in listing["placements"]
        .as_array()
        .ok_or("placements: no list")?
    {
        let spec = entry["spec"].as_str().unwrap_or("?");
        let cpus = numbers(&entry["placement"]["cpus"]);
        if cpus.is_empty() {
            return Err(format!(
                "placements: {spec} did not resolve: {}",
                entry["error"]
            ));
        }
        // The placement's CPUs grouped by the kernel's cores.
        let mut groups: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
        for &c in &cpus {
            let first = siblings
                .get(&c)
                .and_then(|l| l.first().copied())
                .unwrap_or(c);
            groups.entry(first).or_default().push(c);
        }
        let (want_cores, want_threads) = grid(spec);
        let per_core: Vec<usize> = groups.values().map(Vec::len).collect();
        if groups.len() != want_cores || per_core.iter().any(|&n| n != want_threads) {
            return Err(format!(
                "placements: {spec} resolved to {cpus:?}, which is {per_core:?} threads on {} kernel cores",
                groups.len()
            ));
        }
        if spec.ends_with("/scatter") {
            let mut pk: Vec<Option<usize>> = cpus.iter().map(|&c| package_of(c)).collect();
            pk.sort();
            pk.dedup();
            if pk.len() != want_cores.min(g.packages) {
                return Err(format!(
                    "placements: {spec} resolved to {cpus:?}, not spread over packages"
                ));
            }
        }
    }
    Ok(())
}

/// Cores and threads per core of an `NcMt[/...]` name.
fn grid(spec: &str) -> (usize, usize) {
    let base = spec.split('/').next().unwrap();
    let (c, t) = base.trim_end_matches('t').split_once('c').unwrap();
    (c.parse().unwrap(), t.parse().unwrap())
}

/// Whether guests with these kernels can run here; says why not, and fails where they
/// are required.
fn may_run(kernels: &[&str]) -> bool {
    let mode = std::env::var("SMTLAB_GUEST_TESTS").unwrap_or_default();
    if mode == "skip" {
        eprintln!("skipped: SMTLAB_GUEST_TESTS=skip");
        return false;
    }
    if let Some(why) = missing(kernels) {
        // SMTLAB_REQUIRE_TOOLS=1 (every tool-dependent test must run) requires them too.
        assert!(
            mode != "require" && !smtlab_fixtures::require::required(),
            "guest tests required but cannot run: {why}"
        );
        eprintln!("skipped: {why}");
        return false;
    }
    true
}

fn guests(which: &[&Guest]) {
    let mut kernels: Vec<&str> = which.iter().map(|g| g.kernel).collect();
    kernels.dedup();
    if !may_run(&kernels) {
        return;
    }
    let errors: Vec<String> = which.iter().filter_map(|g| run(g).err()).collect();
    assert!(errors.is_empty(), "{}", errors.join("\n\n"));
}

// One test runs the guests one after another: each guest uses every host CPU.
#[test]
fn smt_guests() {
    guests(&[
        &Guest {
            topo: "1s2c2t",
            script: "smt4.sh",
            packages: 1,
            cores: 2,
            threads_per_core: 2,
            numa_nodes: 1,
            nfsd: false,
            kernel: "sched-core",
            timeout_s: 360,
        },
        &Guest {
            topo: "2s2c2t",
            script: "numa8.sh",
            packages: 2,
            cores: 4,
            threads_per_core: 2,
            numa_nodes: 2,
            nfsd: false,
            kernel: "sched-core",
            timeout_s: 360,
        },
        &Guest {
            topo: "1s1c4t",
            script: "core4t.sh",
            packages: 1,
            cores: 1,
            threads_per_core: 4,
            numa_nodes: 1,
            nfsd: false,
            kernel: "sched-core",
            timeout_s: 360,
        },
        &Guest {
            topo: "1s2c2t",
            script: "nfs4.sh",
            packages: 1,
            cores: 2,
            threads_per_core: 2,
            numa_nodes: 1,
            nfsd: true,
            kernel: "sched-core",
            // Two nfs-sfs benches under emulation; it has taken up to 362 s on a busy host.
            timeout_s: 600,
        },
    ]);
}

/// Each security mode on a kernel with core scheduling (its own guest: the SMT checks
/// of smt4.sh fill theirs).
#[test]
fn coresched_guest() {
    guests(&[&Guest {
        topo: "1s2c2t",
        script: "coresched4.sh",
        packages: 1,
        cores: 2,
        threads_per_core: 2,
        numa_nodes: 1,
        nfsd: false,
        kernel: "sched-core",
        // Five advise runs of three modes each, under emulation.
        timeout_s: 1200,
    }]);
}

/// Paper 000's 1T-UP on a kernel built without `CONFIG_SMP`, one CPU, and its runs set
/// beside the SMP kernel's 1c2t, 1c1t-up and 1c1t by `smtlab compare`.
#[test]
fn uniprocessor_kernel_guest() {
    let smp = Guest {
        topo: "1s2c2t",
        script: "upsmp4.sh",
        packages: 1,
        cores: 2,
        threads_per_core: 2,
        numa_nodes: 1,
        nfsd: false,
        kernel: "sched-core",
        timeout_s: 600,
    };
    let up = Guest {
        topo: "1s1c1t",
        script: "up1.sh",
        packages: 1,
        cores: 1,
        threads_per_core: 1,
        numa_nodes: 1,
        nfsd: false,
        kernel: "up",
        timeout_s: 600,
    };
    if !may_run(&["sched-core", "up"]) {
        return;
    }
    let result = run(&smp).and_then(|s| Ok((s, run(&up)?)));
    let (smp, up) = result.unwrap_or_else(|e| panic!("{e}"));
    if let Err(e) = check_up_beside_smp(&smp, &up) {
        panic!("{e}");
    }
}
