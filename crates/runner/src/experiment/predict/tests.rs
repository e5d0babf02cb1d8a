use super::*;

fn topo() -> Topology {
    // One package of two cores of two threads, 1 MiB L2 per core, 8 MiB L3; no L1.
    smtlab_fixtures::build::with_caches(smtlab_fixtures::build::intel(1, 2, 2), 1 << 20, 8 << 20)
}

fn workload(name: &str) -> Workload {
    Workload::catalog(name, &[], &[("threads", "1")]).unwrap()
}

fn two_forms(topo: &Topology) -> (CpuPair, Vec<(Form, u32)>) {
    let pair = crate::corun::cpu_pair(topo).unwrap();
    let (forms, notes) = corun::forms(&[], &pair).unwrap();
    assert!(notes.is_empty());
    (pair, forms)
}

/// The rulers `asked` for on `t` in both forms (those it has).
fn rulers_on(asked: &[&str], t: &Topology) -> Result<(Vec<Ruler>, Vec<String>), ExperimentError> {
    let pair = crate::corun::cpu_pair(t).unwrap();
    let (forms, _) = corun::forms(&[], &pair).unwrap();
    let asked: Vec<String> = asked.iter().map(|a| a.to_string()).collect();
    rulers(&asked, t, &pair, &forms)
}

#[test]
fn rulers_are_sized_from_the_topology_and_the_unsizable_named() {
    let t = topo();
    let (rulers, notes) = rulers_on(&[], &t).unwrap();
    let names: Vec<&str> = rulers.iter().map(|r| r.name).collect();
    assert_eq!(
        names,
        [
            "int",
            "fp",
            "l2",
            "llc",
            "dram",
            "dram-wide",
            "syscall",
            "frontend"
        ]
    );
    assert_eq!(notes.len(), 2, "{notes:?}");
    assert!(notes[0].starts_with("ruler load-store left out: the topology gives no L1D size"));
    let l2 = rulers[2].spec();
    assert_eq!(
        l2.workload,
        "mem-latency pages=huge seed=1 size=1048576 threads=1"
    );
    assert_eq!(
        rulers[3].spec().workload,
        "mem-latency pages=huge seed=1 size=8388608 threads=1"
    );
    // Every definition is listed under its name.
    let all: Vec<&str> = ruler_definitions(&t, 0).iter().map(|d| d.name).collect();
    assert_eq!(all, RULERS);
}

#[test]
fn asked_rulers_only_and_unknown_ones_are_named() {
    let t = topo();
    let (r, _) = rulers_on(&["dram", "int"], &t).unwrap();
    assert_eq!(
        r.iter().map(|r| r.name).collect::<Vec<_>>(),
        ["int", "dram"]
    );
    let e = rulers_on(&["l9"], &t).err().unwrap().to_string();
    assert!(
        e.starts_with("--rulers \"l9\": unknown ruler; expected some of int, fp"),
        "{e}"
    );
    let e = rulers_on(&["l1d"], &t).err().unwrap().to_string();
    assert!(e.contains("no ruler can be measured here"), "{e}");
}

#[test]
fn the_plan_costs_n_by_r_twice_plus_the_chosen_pairs() {
    let t = topo();
    let (pair, forms) = two_forms(&t);
    let ws = [
        workload("mem-read"),
        workload("mem-latency"),
        workload("null-syscall"),
    ];
    let (rs, _) = rulers_on(&["fp", "llc"], &t).unwrap();
    let choice = Choice {
        train: Some(2),
        validate: 3,
        seed: 1,
    };
    let p = plan(&ws, &rs, &forms, &pair, &t, choice).unwrap();
    let c = p.cost;
    assert_eq!((c.workloads, c.rulers, c.cells_per_pair), (3, 2, 3));
    assert_eq!(
        (c.profile_pairs, c.training_pairs, c.held_out_pairs),
        (12, 2, 3)
    );
    assert_eq!(c.shared_pairs, 0);
    assert_eq!(c.cells, (12 + 2 + 3) * 3);
    assert_eq!(c.matrix_cells, 27);
    assert_eq!(p.counted().count(), 17);
    // Each cell planned once; the ruler is named apart from workloads as a partner.
    let keys: BTreeSet<&CellKey> = p.counted().flatten().map(|c| &c.key).collect();
    assert_eq!(keys.len(), c.cells);
    let s = &p.keys.sensitivity[1];
    assert_eq!((s.a.as_str(), s.b.as_str()), ("mem-read", "llc"));
    assert_eq!(s.alone.conditions.partner.as_deref(), Some("ruler:llc"));
    assert_eq!(s.co.len(), 2);
    let k = &p.keys.contentiousness[1];
    assert_eq!(
        k.alone.params.get("size").map(String::as_str),
        Some("8388608")
    );
    // Held-out and training pairs never meet.
    let pairs = |l: &[PairKeys]| {
        l.iter()
            .map(|k| (k.a.clone(), k.b.clone()))
            .collect::<BTreeSet<_>>()
    };
    assert!(pairs(&p.keys.training).is_disjoint(&pairs(&p.keys.held_out)));
}

#[test]
fn a_ruler_that_is_also_a_workload_is_measured_once() {
    let t = topo();
    let (pair, forms) = two_forms(&t);
    // int-ops with one thread is the "int" ruler: beside itself, one experiment.
    let ws = [workload("int-ops"), workload("fp-ops")];
    let (rs, _) = rulers_on(&["int"], &t).unwrap();
    let choice = Choice {
        train: Some(3),
        validate: 0,
        seed: 1,
    };
    let p = plan(&ws, &rs, &forms, &pair, &t, choice).unwrap();
    // int-ops as a ruler beside the workload int-ops has the same cells as the
    // workload pair (int-ops, int-ops); so has fp-ops's contentiousness pair.
    assert!(p.cost.shared_pairs >= 1, "{:?}", p.cost);
    assert_eq!(p.cost.cells, p.counted().count() * 3);
    let keys: BTreeSet<&CellKey> = p.counted().flatten().map(|c| &c.key).collect();
    assert_eq!(keys.len(), p.cost.cells);
}

#[test]
fn the_training_pairs_are_taken_from_the_candidates_once_chosen() {
    let t = topo();
    let (pair, forms) = two_forms(&t);
    let ws = [
        workload("int-ops"),
        workload("fp-ops"),
        workload("mem-read"),
    ];
    let (rs, _) = rulers_on(&["int"], &t).unwrap();
    let choice = Choice {
        train: Some(2),
        validate: 1,
        seed: 3,
    };
    let mut p = plan(&ws, &rs, &forms, &pair, &t, choice).unwrap();
    // Six pairs, one held out: five candidates, none of them held out.
    assert_eq!((p.candidates.len(), p.train), (5, 2));
    let held = (&p.keys.held_out[0].a, &p.keys.held_out[0].b);
    assert!(p.candidates.iter().all(|c| (&c.keys.a, &c.keys.b) != held));
    // No candidate's cells are among those measured first.
    let first: BTreeSet<CellKey> = p.groups.iter().flatten().map(|c| c.key.clone()).collect();
    for c in p.candidates.iter().filter_map(|c| c.group.as_ref()) {
        assert!(c.iter().all(|cell| !first.contains(&cell.key)));
    }
    // A pair with int-ops (the int ruler) is measured by the profiles: no group.
    let free = p
        .candidates
        .iter()
        .position(|c| c.keys.a == "int-ops" || c.keys.b == "int-ops")
        .unwrap();
    assert!(p.candidates[free].group.is_none());
    let paid = p.candidates.iter().position(|c| c.group.is_some()).unwrap();
    let groups = p.train_on(&[free, paid]);
    assert_eq!(groups.len(), 1);
    assert_eq!(groups[0].len(), 3);
    let names: Vec<(&str, &str)> = p
        .keys
        .training
        .iter()
        .map(|k| (k.a.as_str(), k.b.as_str()))
        .collect();
    let want = [free, paid].map(|i| {
        (
            p.candidates[i].keys.a.as_str(),
            p.candidates[i].keys.b.as_str(),
        )
    });
    assert_eq!(names, want);
}

/// The placements of the co-run cells of `k` in `p`, by form.
fn placements(p: &PredictPlan, k: &PairKeys) -> Vec<(Form, Vec<u32>)> {
    let cells = p.counted().flatten();
    let of = |key: &CellKey| cells.clone().find(|c| c.key == *key).unwrap();
    k.co.iter()
        .map(|(form, key)| (*form, of(key).placement.cpus.clone()))
        .collect()
}

#[test]
fn dram_wide_streams_from_every_cpu_outside_the_measured_core_as_the_partner_only() {
    // Four cores of two threads: core n holds CPUs n and n + 4.
    let t = smtlab_fixtures::build::with_caches(
        smtlab_fixtures::build::intel(1, 4, 2),
        1 << 20,
        8 << 20,
    );
    let (pair, forms) = two_forms(&t);
    let (rs, notes) = rulers_on(&["dram", "dram-wide"], &t).unwrap();
    assert!(notes.is_empty(), "{notes:?}");
    let wide = &rs[1];
    assert_eq!(
        wide.spec().workload,
        "mem-read pages=huge size=auto threads=auto"
    );
    assert!(wide.spec().partner_only && !rs[0].spec().partner_only);
    let ws = [workload("int-ops"), workload("fp-ops")];
    let choice = Choice {
        train: Some(1),
        validate: 0,
        seed: 1,
    };
    let p = plan(&ws, &rs, &forms, &pair, &t, choice).unwrap();
    // Each workload beside both rulers; only dram beside each workload.
    assert_eq!(p.keys.sensitivity.len(), 4);
    let cont: Vec<&str> = p
        .keys
        .contentiousness
        .iter()
        .map(|k| k.a.as_str())
        .collect();
    assert_eq!(cont, ["dram", "dram"]);
    let c = p.cost;
    assert_eq!(
        (c.profile_pairs, c.partner_only, c.training_pairs),
        (6, 1, 1)
    );
    assert_eq!(c.cells, 7 * 3);
    let keys: BTreeSet<&CellKey> = p.counted().flatten().map(|c| &c.key).collect();
    assert_eq!(keys.len(), c.cells, "no key of dram-wide is one of dram's");
    // The measured CPU first, then the partner's: the sibling and every CPU of the
    // other cores, or those CPUs only.
    let s = &p.keys.sensitivity[1];
    assert_eq!((s.a.as_str(), s.b.as_str()), ("int-ops", "dram-wide"));
    assert_eq!(
        s.alone.conditions.partner.as_deref(),
        Some("ruler:dram-wide")
    );
    assert_eq!(pair.cpu, 0);
    assert_eq!(
        placements(&p, s),
        [
            (Form::Sibling, vec![0, 4, 1, 2, 3, 5, 6, 7]),
            (Form::Cores, vec![0, 1, 2, 3, 5, 6, 7]),
        ]
    );
    assert_eq!(
        placements(&p, &p.keys.sensitivity[0]),
        [(Form::Sibling, vec![0, 4]), (Form::Cores, vec![0, 1])]
    );
    let partner = |k: &CellKey| {
        let cell = p.counted().flatten().find(|c| c.key == *k).unwrap();
        let spec = cell.corun.partner.as_ref().unwrap();
        param_map(&spec.params).get("threads").cloned()
    };
    assert_eq!(partner(&s.co[1].1).as_deref(), Some("auto"));
    assert_eq!(
        partner(&p.keys.sensitivity[0].co[1].1).as_deref(),
        Some("1")
    );
}

#[test]
fn dram_wide_is_left_out_by_default_where_its_partner_is_one_cpu() {
    // Two CPUs without SMT: the cores form only, its partner CPU 1 in either ruler.
    let t = smtlab_fixtures::build::with_llc(
        smtlab_fixtures::build::one_cpu_per_core(&[0, 1]),
        8 << 20,
    );
    let (rs, notes) = rulers_on(&[], &t).unwrap();
    assert!(!rs.iter().any(|r| r.name == "dram-wide"));
    assert!(
        notes
            .iter()
            .any(|n| n.starts_with("ruler dram-wide left out: one CPU outside the measured core")),
        "{notes:?}"
    );
    // Asked for, it is measured: beside dram's cells, apart from them.
    let (rs, _) = rulers_on(&["dram-wide", "dram"], &t).unwrap();
    let pair = crate::corun::cpu_pair(&t).unwrap();
    let (forms, _) = corun::forms(&[], &pair).unwrap();
    let choice = Choice {
        train: Some(1),
        validate: 0,
        seed: 1,
    };
    let p = plan(&[workload("int-ops")], &rs, &forms, &pair, &t, choice).unwrap();
    assert_eq!(
        placements(&p, &p.keys.sensitivity[0]),
        placements(&p, &p.keys.sensitivity[1])
    );
    assert_eq!(p.keys.contentiousness.len(), 1);
    // int-ops: 2 beside rulers, 1 dram beside it, 1 training pair; 2 cells each.
    assert_eq!(p.cost.cells, 4 * 2);
    let keys: BTreeSet<&CellKey> = p.counted().flatten().map(|c| &c.key).collect();
    assert_eq!(keys.len(), p.cost.cells);
}

#[test]
fn a_server_workload_is_a_ruler_s_partner_but_never_paired_with_another_server() {
    let t = topo();
    let (pair, forms) = two_forms(&t);
    let server = |name| Workload::any(name, &[], &[("threads", "1")]).unwrap();
    assert!(Workload::catalog("web-static", &[], &[]).is_err());
    let ws = [server("web-static"), workload("mem-read"), server("tbench")];
    let (rs, _) = rulers_on(&["fp", "llc"], &t).unwrap();
    let choice = Choice {
        train: None,
        validate: 0,
        seed: 3,
    };
    let p = plan(&ws, &rs, &forms, &pair, &t, choice).unwrap();
    assert!(p.keys.never_partners.is_empty());
    // Every workload beside every ruler, and every ruler beside every workload.
    assert_eq!(p.keys.sensitivity.len(), 6);
    assert_eq!(p.keys.contentiousness.len(), 6);
    let partners: BTreeSet<&str> = p
        .keys
        .contentiousness
        .iter()
        .map(|k| k.b.as_str())
        .collect();
    assert_eq!(
        partners,
        BTreeSet::from(["mem-read", "tbench", "web-static"])
    );
    // The pairs that can be measured: a server with mem-read (the server measured) and
    // mem-read with itself; two servers never.
    assert_eq!(p.keys.training.len(), 3, "{:?}", p.keys.training);
    for k in &p.keys.training {
        assert_eq!(k.b, "mem-read", "{} measured beside {}", k.a, k.b);
    }
    let is_server =
        |name: Option<&str>| name.is_some_and(|n| ["web-static", "tbench"].contains(&n));
    for c in p.counted().flatten() {
        let a = is_server(Some(&c.key.benchmark));
        let partner = is_server(
            c.corun
                .partner
                .as_ref()
                .map(|b| b.bench.info().name)
                .as_deref(),
        );
        assert!(!(a && partner), "two servers in {:?}", c.key);
        assert_eq!(
            smtlab_bench::Benchmark::client_side(&c.corun),
            a || partner,
            "a server's cells need its client side: {:?}",
            c.key
        );
    }
    let too_many = Choice {
        train: Some(4),
        ..choice
    };
    let Err(e) = plan(&ws, &rs, &forms, &pair, &t, too_many) else {
        panic!("4 training pairs planned where 3 can be measured");
    };
    assert!(
        e.to_string().contains("none of two server workloads"),
        "{e}"
    );
}

#[test]
fn a_server_s_client_side_is_kept_apart_from_every_co_run_cpu() {
    // Two packages of two cores of two threads: CPUs 0-7, the co-runs on CPU 0, its
    // sibling and the next core.
    let t = smtlab_fixtures::build::intel(2, 2, 2);
    let pair = crate::corun::cpu_pair(&t).unwrap();
    let used: Vec<u32> = [
        pair.cpu,
        pair.sibling.clone().unwrap(),
        pair.other_core.clone().unwrap(),
    ]
    .into();
    let Ok(ClientRule::Cpus { cpus, shared }) = client_rule(ClientRule::Apart, &pair, &t) else {
        panic!("no client CPUs");
    };
    assert!(!shared);
    assert_eq!(cpus.len(), 4, "{cpus:?}");
    for c in used {
        assert!(!cpus.contains(c), "client on co-run CPU {c}");
    }
    let named = ClientRule::Cpus {
        cpus: smtlab_model::CpuSet::parse_list("1").unwrap(),
        shared: true,
    };
    assert_eq!(client_rule(named.clone(), &pair, &t).unwrap(), named);
    // One core of two threads: nothing is left.
    let small = smtlab_fixtures::build::intel(1, 1, 2);
    let pair = crate::corun::cpu_pair(&small).unwrap();
    let e = client_rule(ClientRule::Apart, &pair, &small)
        .unwrap_err()
        .to_string();
    assert!(e.contains("no CPU left for the client side"), "{e}");
}

#[test]
fn a_wide_ruler_keeps_off_a_server_s_client_cpus() {
    let t = smtlab_fixtures::build::with_llc(smtlab_fixtures::build::intel(1, 4, 2), 8 << 20);
    let pair = crate::corun::cpu_pair(&t).unwrap();
    let (forms, _) = corun::forms(&[], &pair).unwrap();
    let (mut rs, _) = rulers(&["dram-wide".into()], &t, &pair, &forms).unwrap();
    let Ok(ClientRule::Cpus { cpus, .. }) = client_rule(ClientRule::Apart, &pair, &t) else {
        panic!("no client CPUs");
    };
    let before = rs[0].partners.clone().unwrap();
    rs[0].keep_off(&cpus);
    for ((form, kept), (_, all)) in rs[0].partners.clone().unwrap().iter().zip(&before) {
        assert_eq!(kept[0], all[0], "{form:?}: the form's own CPU first");
        assert!(kept.len() < all.len(), "{form:?}: {kept:?}");
        assert!(
            kept.iter().all(|&c| !cpus.contains(c)),
            "{form:?}: {kept:?} on {cpus:?}"
        );
    }
}

/// The stand-in training pairs and the held-out ones of `n` workloads.
fn choose_n(n: usize, c: Choice) -> Result<(Pairs, Pairs), ExperimentError> {
    let chosen = choose(&vec![false; n], c, |_, _| true, &[])?;
    Ok((chosen.candidates[..chosen.train].to_vec(), chosen.held_out))
}
fn choose4(c: Choice) -> Result<(Pairs, Pairs), ExperimentError> {
    choose_n(4, c)
}
fn choose2(c: Choice) -> Result<(Pairs, Pairs), ExperimentError> {
    choose_n(2, c)
}
fn choose1(c: Choice) -> Result<(Pairs, Pairs), ExperimentError> {
    choose_n(1, c)
}

#[test]
fn pairs_with_a_workload_that_is_a_ruler_are_never_held_out() {
    let t = topo();
    let (pair, forms) = two_forms(&t);
    // int-ops with one thread is the "int" ruler; fp-ops and null-syscall are not
    // rulers here: three pairs of them may be held out.
    let ws = [
        workload("int-ops"),
        workload("fp-ops"),
        workload("null-syscall"),
    ];
    let (rs, _) = rulers_on(&["int", "llc"], &t).unwrap();
    let choice = Choice {
        train: Some(3),
        validate: 3,
        seed: 4,
    };
    let p = plan(&ws, &rs, &forms, &pair, &t, choice).unwrap();
    assert_eq!(p.keys.held_out.len(), 3);
    assert!(
        p.keys
            .held_out
            .iter()
            .all(|k| k.a != "int-ops" && k.b != "int-ops")
    );
    // Training pairs may have it.
    assert_eq!(p.keys.training.len(), 3);
    let four = Choice {
        validate: 4,
        ..choice
    };
    let e = plan(&ws, &rs, &forms, &pair, &t, four)
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.starts_with("--validate 4: only 3 pairs can be held out; a pair with a workload that is a ruler itself (int-ops)"),
        "{e}"
    );
}

#[test]
fn the_choice_is_seeded_and_bounded() {
    let c = |train, validate, seed| Choice {
        train,
        validate,
        seed,
    };
    let a = choose4(c(None, 3, 9)).unwrap();
    assert_eq!(a, choose4(c(None, 3, 9)).unwrap());
    // As many training pairs as workloads by default.
    assert_eq!((a.0.len(), a.1.len()), (4, 3));
    assert_ne!(
        a,
        choose4(c(None, 3, 10)).unwrap(),
        "another seed, another choice"
    );
    // Four workloads make ten pairs.
    let e = choose4(c(Some(8), 3, 1)).unwrap_err().to_string();
    assert!(
        e.starts_with("--train 8 and --validate 3: expected at most 10 pairs")
            && e.contains("4 workloads make 10 pairs"),
        "{e}"
    );
    let e = choose1(c(None, 1, 1)).unwrap_err().to_string();
    assert!(
        e.starts_with("--validate 1: leaves no pair to fit the model on"),
        "{e}"
    );
    let e = choose2(c(Some(0), 1, 1)).unwrap_err().to_string();
    assert!(e.starts_with("--train 0"), "{e}");
    assert_eq!(choose1(c(None, 0, 1)).unwrap().0, [(0, 0)]);
}

#[test]
fn a_plans_time_holds_a_ruler_beside_a_server_to_the_servers_samples() {
    let t = topo();
    let (pair, forms) = two_forms(&t);
    let (rs, _) = rulers_on(&["int"], &t).unwrap();
    let cfg = crate::RunConfig::quick();
    let time = |w: Workload| {
        let choice = Choice {
            train: Some(1),
            validate: 0,
            seed: 1,
        };
        let mate = workload("mem-read");
        let p = plan(&[w, mate], &rs, &forms, &pair, &t, choice).unwrap();
        corun::plan_time(p.counted(), &t, &cfg)
    };
    let (likely, most) = time(workload("fp-ops"));
    assert!(0 < likely && likely <= most, "{likely} {most}");
    // tcp-rr's cost says a sample lasts up to 10 runs of 100 ms (its max_iterations):
    // the ruler's samples beside it hold five of those, then as long again for the
    // partner's own reference, and a cell takes at least its minimum of them, in each
    // of the two forms, whatever the budget (0.5 s).
    let server = Workload::any("tcp-rr", &["duration=100ms".into()], &[]).unwrap();
    let (likely, most) = time(server);
    let beside = 2 * 5 * 1_000_000_000 * cfg.guaranteed_samples(true) as u64;
    assert!(likely >= 2 * beside, "{likely}");
    assert!(most >= likely, "{likely} {most}");
}
