#!/usr/bin/env python3
"""Holds smtlab's counter formulas against the published ones, with no PMU needed.

The same counts go to smtlab (`smtlab counters import --json`, as `perf stat -x,`
would have written them: split over CPUs, some multiplexed) and to two references:

* pmu-tools' top-down models (toplev's `*_ratios.py`, Intel), evaluated node by node;
* the Linux kernel's perf metric tables (`tools/perf/pmu-events/arch/x86/<uarch>/*.json`),
  evaluated with a small evaluator of their expression language.

A share (top-down) may differ by at most 0.1 percentage point, a ratio (IPC, CPI, MPKI)
by at most 0.1%.

Besides the synthetic counts, the counts `perf stat` recorded on real machines
(crates/cli/tests/recorded/, one file per run; see its README) go to smtlab and to the
kernel's tables for their CPU: Sapphire Rapids, Tiger Lake, Skylake with SMT on, Zen 4. (Those
files also carry the figures perf printed beside the counts; `cargo test -p smtlab
--test recorded_counts` holds smtlab against those.) Prints one row per microarchitecture, figure and reference; exits 1 on
any difference over the limit. Called by scripts/check-formulas.sh, which fetches the
references.

    check_formulas.py SMTLAB PMU_TOOLS_DIR KERNEL_X86_DIR [--trials N]
"""

import argparse
import glob
import importlib
import json
import os
import random
import re
import subprocess
import sys
import tempfile

SHARE_LIMIT = 0.001  # 0.1 percentage point
RATIO_LIMIT = 0.001  # 0.1 %

# smtlab's --cpu-model, pmu-tools' model module, the kernel's list directory.
UARCHS = {
    "skylake-sp": ("skx_server_ratios", "skylakex"),
    "icelake-sp": ("icx_server_ratios", "icelakex"),
    "sapphire-rapids": ("spr_server_ratios", "sapphirerapids"),
    "granite-rapids": ("gnr_server_ratios", "graniterapids"),
    "zen3": (None, "amdzen3"),
    "zen4": (None, "amdzen4"),
    "zen5": (None, "amdzen5"),
}

TOPDOWN = ["retiring", "bad_speculation", "frontend_bound", "backend_bound"]
# Shares beside level 1: the memory part of back-end bound (level 2), AMD's SMT contention.
SHARES = TOPDOWN + ["backend_memory", "smt_contention", "smt_2t_share", "dram_bus_utilisation",
                    "branch_mispredicts", "machine_clears"]
# The CPI stack's pipeline-clear parts as shares of the cycles (level 2 of bad speculation).
CLEARS = {"branch_mispredict": "branch_mispredicts", "machine_clears": "machine_clears"}

# smtlab's instruction-mix names, and what the kernel's `tma_info_inst_mix_ip*` divides by.
MIX = {"loads": "load", "stores": "store", "calls": "call", "branches-taken": "taken branch"}
KERNEL_MIX = {"load": "tma_info_inst_mix_ipload", "store": "tma_info_inst_mix_ipstore",
              "call": "tma_info_inst_mix_ipcall", "taken branch": "tma_info_inst_mix_iptb"}


def synthetic(uarch, rng):
    """One plausible set of counts, by the names perf prints for `-e NAME`."""
    cycles = rng.uniform(1e8, 5e9)
    inst = cycles * rng.uniform(0.2, 3.5)
    c = {"cycles": cycles, "instructions": inst}
    if not uarch.startswith("zen"):
        # Reference clocks: the core's (both threads' on Skylake, any=1) and those this
        # thread ran alone.
        ref = cycles * rng.uniform(0.3, 1.0)
        c["cpu_clk_unhalted.one_thread_active"] = ref * rng.uniform(0.0, 1.0)
        if uarch == "skylake-sp":
            c["cpu_clk_unhalted.ref_xclk_any"] = 2 * ref
        else:
            c["cpu_clk_unhalted.ref_distributed"] = ref
    # Memory-controller CAS commands over perf's wall time (DRAM bandwidth).
    c["duration_time"] = rng.uniform(0.5, 20.0) * 1e9
    rd, wr = (c["duration_time"] * rng.uniform(0.0, 0.3) for _ in range(2))
    if uarch in ("zen4", "zen5"):
        clk = c["duration_time"] * rng.uniform(1.0, 3.0)
        c.update({"umc_cas_cmd.rd": rd, "umc_cas_cmd.wr": wr, "umc_cas_cmd.all": rd + wr,
                  "umc_mem_clk": clk, "umc_data_slot_clks.all": 2 * clk * rng.uniform(0, 1)})
    elif not uarch.startswith("zen"):
        c.update({"unc_m_cas_count.rd": rd, "unc_m_cas_count.wr": wr})
    if uarch.startswith("zen"):
        mix = {"loads": "ls_dispatch.ld_dispatch", "stores": "ls_dispatch.store_dispatch"}
    else:
        mix = {"loads": "mem_inst_retired.all_loads", "stores": "mem_inst_retired.all_stores",
               "calls": "br_inst_retired.near_call", "branches-taken": "br_inst_retired.near_taken"}
    for vendor in mix.values():
        c[vendor] = inst * rng.uniform(0.01, 0.4)
    if not uarch.startswith("zen"):
        # Pipeline clears: mispredicts and machine clears (the CPI stack's split of bad
        # speculation).
        c["branch-misses"] = inst * rng.uniform(0.0, 0.02)
        c["machine_clears.count"] = c["branch-misses"] * rng.uniform(0.0, 0.5)
    if uarch == "skylake-sp":
        slots = 4 * cycles
        retired = slots * rng.uniform(0.1, 0.7)
        issued = retired * rng.uniform(1.0, 1.3)
        recovery = cycles * rng.uniform(0.0, 0.05)
        fetch = (slots - issued) * rng.uniform(0.0, 0.6)
        c.update({
            "topdown-total-slots": slots,
            "topdown-slots-issued": issued,
            "topdown-slots-retired": retired,
            "topdown-fetch-bubbles": fetch,
            "topdown-recovery-bubbles": 4 * recovery,
            "l2_rqsts.miss": inst * rng.uniform(0.0, 0.05),
        })
    if uarch in ("skylake-sp", "icelake-sp"):
        # The cycles behind memory bound (level 2) on cores without the perf metric.
        total = cycles * rng.uniform(0.1, 0.6)
        c.update({
            "cycle_activity.stalls_total": total,
            "cycle_activity.stalls_mem_any": total * rng.uniform(0.0, 1.0),
            "exe_activity.bound_on_stores": cycles * rng.uniform(0.0, 0.05),
            "exe_activity.1_ports_util": cycles * rng.uniform(0.0, 0.2),
            "exe_activity.2_ports_util": cycles * rng.uniform(0.0, 0.2),
        })
    if uarch == "skylake-sp":
        pass
    elif uarch in ("icelake-sp", "sapphire-rapids", "granite-rapids"):
        width = 5 if uarch == "icelake-sp" else 6
        slots = width * cycles
        parts = [rng.uniform(0.05, 1.0) for _ in range(4)]
        total = sum(parts)
        for name, p in zip(["topdown-retiring", "topdown-bad-spec",
                            "topdown-fe-bound", "topdown-be-bound"], parts):
            # Each metric reads as its share of slots, in slots (the kernel's 8-bit
            # fractions do not sum to exactly 1).
            c[name] = slots * p / total * rng.uniform(0.98, 1.02)
        c["slots"] = slots
        if uarch != "icelake-sp":
            # Level 2: memory bound, a part of back-end bound; mispredicts, a part of bad
            # speculation (at times a little more than it, as the 8-bit metrics allow).
            c["topdown-mem-bound"] = c["topdown-be-bound"] * rng.uniform(0.1, 0.9)
            c["topdown-br-mispredict"] = c["topdown-bad-spec"] * rng.uniform(0.0, 1.05)
        c["int_misc.uop_dropping"] = slots * rng.uniform(0.0, 0.02)
        if uarch == "icelake-sp":
            c["int_misc.clears_count"] = cycles * rng.uniform(0.0, 0.005)
            c["l2_rqsts.all_demand_miss"] = inst * rng.uniform(0.0, 0.05)
        else:
            c["l2_rqsts.miss"] = inst * rng.uniform(0.0, 0.05)
    else:
        width = {"zen3": None, "zen4": 6, "zen5": 8}[uarch]
        c["l2_cache_req_stat.ic_dc_miss_in_l2"] = inst * rng.uniform(0.0, 0.05)
        if width:
            slots = width * cycles
            ret = slots * rng.uniform(0.1, 0.6)
            c.update({
                "ls_not_halted_cyc": cycles,
                "ex_ret_ops": ret,
                "de_src_op_disp.all": ret * rng.uniform(1.0, 1.3),
                "de_no_dispatch_per_slot.no_ops_from_frontend": slots * rng.uniform(0, 0.3),
                "de_no_dispatch_per_slot.backend_stalls": slots * rng.uniform(0, 0.3),
                "de_no_dispatch_per_slot.smt_contention": slots * rng.uniform(0, 0.2),
            })
            stalls = cycles * rng.uniform(0.1, 0.5)
            c["ex_no_retire.not_complete"] = stalls
            c["ex_no_retire.load_not_complete"] = stalls * rng.uniform(0.0, 1.0)
    return c


def perf_stat_csv(counts, rng):
    """The counts as `perf stat -x, -A` writes them: per CPU, some multiplexed (perf
    prints the scaled value and the running share)."""
    lines = ["# synthetic perf stat -x, -A"]
    for name, value in counts.items():
        first = value * rng.uniform(0.2, 0.8)
        for cpu, part in ((0, first), (1, value - first)):
            pct = rng.choice([100.0, 100.0, 62.5, 50.0])
            lines.append(f"CPU{cpu},{part:.6f},,{name},1000000,{pct:.2f},,")
    return "\n".join(lines) + "\n"


def smtlab_figures(smtlab, uarch, csv):
    with tempfile.NamedTemporaryFile("w", suffix=".csv", delete=False) as f:
        f.write(csv)
        path = f.name
    try:
        out = subprocess.run([smtlab, "counters", "import", "--json", "--cpu-model", uarch, path],
                             check=True, capture_output=True, text=True).stdout
    finally:
        os.unlink(path)
    r = json.loads(out)["ratios"]
    figs = {}
    t = r.get("topdown") or {}
    for k in TOPDOWN + ["smt_contention", "backend_memory"]:
        if t.get(k) is not None:
            figs[k] = t[k]
    d = r.get("dram")
    if d:
        figs["dram_gb_per_s"] = d["gb_per_s"]
        figs["dram_read_mb_per_s"] = d["read_bytes"] / d["window_s"] / 1e6
        figs["dram_write_mb_per_s"] = d["write_bytes"] / d["window_s"] / 1e6
        if d.get("bus_utilisation") is not None:
            figs["dram_bus_utilisation"] = d["bus_utilisation"]
    s = r.get("cpi_stack") or {}
    for p in s.get("parts", []):
        if p["key"] in CLEARS and p["source"] == "topdown":
            figs[CLEARS[p["key"]]] = p["cpi"] / s["measured_cpi"]
    for x in r["ratios"]:
        if x["key"] in ("ipc", "cpi", "l2-misses_pki", "smt_2t_share"):
            figs[x["key"]] = x["value"]
        # The kernel gives the mix as instructions per event (`IpLoad`).
        mix = x["key"].removesuffix("_pki")
        if x["key"].endswith("_pki") and mix in MIX and x["value"]:
            figs["instructions per " + MIX[mix]] = 1000.0 / x["value"]
    return figs


def vendor_counts(uarch, c):
    """The counts by the vendor's event names, as both references ask for them: the
    table's vendor names as they are, the kernel's aliases by what they count."""
    v = {k.upper(): x for k, x in c.items() if "." in k}
    v["INST_RETIRED.ANY"] = c["instructions"]
    if "branch-misses" in c:
        v["BR_MISP_RETIRED.ALL_BRANCHES"] = c["branch-misses"]
    v["CPU_CLK_UNHALTED.THREAD"] = c["cycles"]
    if uarch == "skylake-sp":
        v.update({
            "IDQ_UOPS_NOT_DELIVERED.CORE": c["topdown-fetch-bubbles"],
            "UOPS_ISSUED.ANY": c["topdown-slots-issued"],
            "UOPS_RETIRED.RETIRE_SLOTS": c["topdown-slots-retired"],
            "INT_MISC.RECOVERY_CYCLES": c["topdown-recovery-bubbles"] / 4,
        })
    elif "slots" in c:
        v.update({
            "TOPDOWN.SLOTS": c["slots"],
            "PERF_METRICS.RETIRING": c["topdown-retiring"],
            "PERF_METRICS.BAD_SPECULATION": c["topdown-bad-spec"],
            "PERF_METRICS.FRONTEND_BOUND": c["topdown-fe-bound"],
            "PERF_METRICS.BACKEND_BOUND": c["topdown-be-bound"],
            "PERF_METRICS.MEMORY_BOUND": c.get("topdown-mem-bound", 0.0),
            "PERF_METRICS.BRANCH_MISPREDICTS": c.get("topdown-br-mispredict", 0.0),
            "INT_MISC.CLEARS_COUNT": c.get("int_misc.clears_count", 0.0),
        })
    return v


# ---- pmu-tools ----------------------------------------------------------------

def pmu_tools_figures(module, uarch, c):
    """Level 1 and IPC/CPI from toplev's model, fed the same counts."""
    m = importlib.import_module(module)
    m.smt_enabled = False
    if hasattr(m, "topdown_use_fixed"):
        m.topdown_use_fixed = True  # the perf-metrics path, as the kernel counts it
    ev_of = vendor_counts(uarch, c)

    def EV(name, level):
        if name not in ev_of:
            raise KeyError(f"pmu-tools asks for {name}, which the check does not feed")
        return ev_of[name]

    class Runner:
        def __init__(self):
            self.nodes = {}

        def run(self, n):
            self.nodes[n.name] = n

        def __getattr__(self, _name):
            return lambda *a, **k: None

    r = Runner()
    m.Setup(r)
    for n in r.nodes.values():  # what toplev sets before a level-1 node is computed
        n.errcount = 0
        if not hasattr(n, "thresh"):
            n.thresh = False
    figs = {}
    for key, node in [("frontend_bound", "Frontend_Bound"), ("backend_bound", "Backend_Bound"),
                      ("retiring", "Retiring"), ("bad_speculation", "Bad_Speculation")]:
        figs[key] = r.nodes[node].compute(EV)
    for key, node in (("backend_memory", "Memory_Bound"), ("branch_mispredicts", "Branch_Mispredicts"),
                      ("machine_clears", "Machine_Clears")):
        try:
            figs[key] = r.nodes[node].compute(EV)
        except KeyError:
            pass  # toplev's model asks for an event this check does not feed
    figs["ipc"] = m.IPC(None, EV, 0)
    figs["cpi"] = m.CPI(None, EV, 0)
    # The mix, as instructions per event; the functions set a threshold on `self`.
    class Node:
        thresh = False

    for fn, what in (("IpLoad", "load"), ("IpStore", "store"), ("IpCall", "call"),
                     ("IpTB", "taken branch")):
        figs["instructions per " + what] = getattr(m, fn)(Node(), EV, 0)
    # Both threads' share is only defined with SMT on.
    m.smt_enabled = True
    figs["smt_2t_share"] = m.SMT_2T_Utilization(None, EV, 0)
    m.smt_enabled = False
    return figs


# ---- the kernel's metric tables -----------------------------------------------

def kernel_metrics(directory):
    out = {}
    for f in glob.glob(os.path.join(directory, "*.json")):
        with open(f) as fh:
            for e in json.load(fh):
                if isinstance(e, dict) and "MetricName" in e:
                    out[e["MetricName"].lower()] = e["MetricExpr"]
    return out


TOKEN = re.compile(r"(?<![0-9.])(?:\\.|[A-Za-z_#])(?:\\.|[A-Za-z0-9_.#])*(?::[a-zA-Z]+)?")
KEYWORDS = {"if", "else", "min", "max", "d_ratio", "and", "or", "not"}


def kernel_eval(name, metrics, counts, depth=0, smt_on=0):
    """A metric of the kernel's tables: event and metric names become lookups, the rest
    (arithmetic, `a if c else b`, min, max, d_ratio) is Python's own syntax."""
    if depth > 20:
        raise RecursionError(name)
    expr = metrics[name.lower()]

    def lookup(token):
        plain = token.replace("\\", "")
        low = plain.lower()
        if low in KEYWORDS:
            return plain
        return f"V({low!r})"

    def value(low):
        # Counted per thread, SMT off unless the metric is about SMT.
        if low in ("#smt_on", "#core_wide"):
            return {"#smt_on": smt_on, "#core_wide": 1}[low]
        if low in metrics:
            return kernel_eval(low, metrics, counts, depth + 1, smt_on)
        if low in counts:
            return counts[low]
        raise KeyError(f"{name} needs {low}, which the check does not feed")

    # Lazily: `a if c else b` looks up only the branch taken.
    py = TOKEN.sub(lambda mo: lookup(mo.group(0)), expr)
    return eval(py, {"__builtins__": {}},
                {"V": value, "min": min, "max": max,
                 "d_ratio": lambda a, b: a / b if b else 0.0})


def kernel_figures(kdir, uarch, c):
    metrics = kernel_metrics(kdir)
    # The kernel's tables name events by the vendor's names, any case.
    low = {k.lower(): v for k, v in c.items()}
    low.update({k.lower(): v for k, v in vendor_counts(uarch, c).items()})
    low["duration_time"] = c["duration_time"] / 1e9  # seconds in the kernel's metrics
    figs = {}
    if uarch.startswith("zen"):
        names = {k: k for k in TOPDOWN + ["smt_contention"]}
        names["backend_memory"] = "backend_bound_memory"
        names.update({"dram_read_mb_per_s": "umc_mem_read_bandwidth",
                      "dram_write_mb_per_s": "umc_mem_write_bandwidth",
                      "dram_bus_utilisation": "umc_data_bus_utilization"})
    else:
        names = {k: "tma_" + k for k in TOPDOWN}
        names["backend_memory"] = "tma_memory_bound"
        names.update({"branch_mispredicts": "tma_branch_mispredicts",
                      "machine_clears": "tma_machine_clears"})
        names["dram_gb_per_s"] = "tma_info_system_dram_bw_use"
        names.update({"ipc": "tma_info_thread_ipc", "cpi": "tma_info_thread_cpi"})
        if "l2_rqsts.miss" in low:
            names["l2-misses_pki"] = "tma_info_memory_l2mpki_all"
        names["smt_2t_share"] = "tma_info_system_smt_2t_utilization"
        names.update({"instructions per " + k: v for k, v in KERNEL_MIX.items()})
    for key, metric in names.items():
        if metric in metrics:
            figs[key] = kernel_eval(metric, metrics, low, smt_on=int(key == "smt_2t_share"))
    return figs


# ---- counts recorded on real machines ----------------------------------------

RECORDED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "crates", "cli",
                        "tests", "recorded")
# A recording's file-name prefix: smtlab's --cpu-model, the kernel's table, SMT on.
# smtlab has no Tiger Lake; it reads Tiger Lake's runs as Ice Lake-SP, the same core
# generation with the same level-1 formula. The Ice Lake-class CPU (icl-) is not named.
RECORDED_CPUS = {"spr-": ("sapphire-rapids", "sapphirerapids", 0),
                 "tgl-": ("icelake-sp", "tigerlake", 0),
                 "skl-": ("skylake-sp", "skylakex", 1),
                 "zen4-": ("zen4", "amdzen4", 0)}
# perf's spelling of an event in a metric's terms, and the event the tables name: the
# recovery cycles' edges are the clears count (the same code, mask, counter mask, edge).
RECORDED_ALIASES = {"int_misc.recovery_cycles,cmask=1,edge": "int_misc.clears_count"}
MODIFIERS = set("ukhHGpPSDIWe")


def recorded_counts(text):
    """A recording's counts by lower-case event name, modifiers dropped, the lines of one
    event (perf's `-M` counts it once per metric group) averaged, as smtlab reads them."""
    lines = {}
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        f = line.split(";" if ";" in line else ",")
        try:
            value = float(f[0])
        except ValueError:
            continue
        event = f[2]
        if "/" in event:
            event = event.split("/")[1]
        elif ":" in event and set(event.rsplit(":", 1)[1]) <= MODIFIERS:
            event = event.rsplit(":", 1)[0]
        event = RECORDED_ALIASES.get(event.lower(), event.lower())
        lines.setdefault(event, []).append(value)
    return {k: sum(v) / len(v) for k, v in lines.items()}


def recorded_rows(smtlab, kernel):
    """(file, figure, kernel's value, smtlab's value) for every top-down share (level 1,
    SMT contention, back-end memory bound) the kernel's table for the recording's CPU
    or smtlab derives from the events it recorded."""
    for path in sorted(glob.glob(os.path.join(RECORDED, "*.csv"))):
        name = os.path.basename(path)
        cpu = next((v for k, v in RECORDED_CPUS.items() if name.startswith(k)), None)
        if cpu is None:
            continue
        uarch, kdir, smt_on = cpu
        with open(path) as fh:
            text = fh.read()
        ours = smtlab_figures(smtlab, uarch, text)
        metrics = kernel_metrics(os.path.join(kernel, kdir))
        counts = recorded_counts(text)
        zen = uarch.startswith("zen")
        names = {k: k if zen else "tma_" + k for k in TOPDOWN + ["smt_contention"]}
        names["backend_memory"] = "backend_bound_memory" if zen else "tma_memory_bound"
        for key, metric in names.items():
            if metric not in metrics:
                continue
            try:
                want = kernel_eval(metric, metrics, counts, smt_on=smt_on)
            except KeyError:
                want = None  # the run did not record an event the table's formula needs
            got = ours.get(key)
            # A figure neither side has (no top-down events in a `-ddd` run, no
            # smt_contention asked for) is no row; one side alone is a failure.
            if want is not None or got is not None:
                yield name, key, want, got


# ---- comparison ---------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("smtlab")
    ap.add_argument("pmu_tools")
    ap.add_argument("kernel")
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    sys.path.insert(0, a.pmu_tools)
    rng = random.Random(a.seed)
    worst = {}  # (uarch, figure, reference) -> (max difference, limit kind, cases)
    for uarch, (module, kdir) in UARCHS.items():
        for _ in range(a.trials):
            c = synthetic(uarch, rng)
            ours = smtlab_figures(a.smtlab, uarch, perf_stat_csv(c, rng))
            refs = {"kernel " + kdir: kernel_figures(os.path.join(a.kernel, kdir), uarch, c)}
            if module:
                refs["pmu-tools " + module] = pmu_tools_figures(module, uarch, c)
            for ref, theirs in refs.items():
                for fig, want in theirs.items():
                    got = ours.get(fig)
                    share = fig in SHARES
                    if got is None:
                        diff = float("inf")
                    elif share:
                        diff = abs(got - want)
                    else:
                        diff = abs(got - want) / abs(want) if want else abs(got)
                    key = (uarch, fig, ref)
                    prev = worst.get(key, (0.0, share, 0))
                    worst[key] = (max(prev[0], diff), share, prev[2] + 1)
    for name, fig, want, got in recorded_rows(a.smtlab, a.kernel):
        diff = float("inf") if got is None or want is None else abs(got - want)
        key = ("recorded " + name.removesuffix(".csv"), fig, "kernel (real counts)")
        prev = worst.get(key, (0.0, True, 0))
        worst[key] = (max(prev[0], diff), True, prev[2] + 1)
    failed = 0
    print(f"{'microarchitecture':<34} {'figure':<28} {'reference':<34} {'cases':>5} "
          f"{'max difference':>16}  result")
    for (uarch, fig, ref), (diff, share, n) in sorted(worst.items()):
        limit = SHARE_LIMIT if share else RATIO_LIMIT
        shown = f"{100 * diff:.4f} pt" if share else f"{100 * diff:.4f} %"
        ok = diff <= limit
        failed += not ok
        print(f"{uarch:<34} {fig:<28} {ref:<34} {n:>5} {shown:>16}  {'ok' if ok else 'DIFFERS'}")
    for uarch, (_, kdir) in UARCHS.items():
        if not any(k[0] == uarch for k in worst):
            print(f"{uarch:<34} (nothing: neither reference defines a figure smtlab derives on "
                  f"{uarch})")
    print(f"\n{len(worst) - failed} of {len(worst)} (figure, reference) pairs within "
          f"0.1 pt / 0.1%" + (f"; {failed} differ" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
