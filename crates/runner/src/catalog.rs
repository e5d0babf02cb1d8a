//! The whole catalog: the micro-benchmarks of `smtlab-bench` and the workloads of
//! `smtlab-workloads`, in the order `smtlab list` shows them. Assembled here, above both,
//! so neither needs to know the other.

use smtlab_bench::Benchmark;

/// Every benchmark and workload smtlab knows.
pub fn all() -> Vec<Box<dyn Benchmark>> {
    let mut v = smtlab_bench::catalog::all();
    v.extend(smtlab_workloads::benchmarks());
    v
}

/// The catalog entry of every benchmark a stored run can hold: the catalog's, the user
/// command of `smtlab exec` and the open-loop load of `smtlab util`. Readers of stored
/// runs add them to the results (`RunResults::describe`) so the report finds each
/// benchmark's section and main parameter by data.
pub fn infos() -> Vec<smtlab_model::BenchInfo> {
    let mut v: Vec<smtlab_model::BenchInfo> = all().iter().map(|b| b.info()).collect();
    let command = crate::exec::CommandBench {
        argv: Vec::new(),
        value: crate::exec::ExecValue::WallTime,
        timeout: None,
        warmup_runs: 0,
        reps: 0,
    };
    v.push(command.info());
    v.push(crate::utilisation::OpenLoop::info());
    v
}

/// The benchmark called `name`.
pub fn find(name: &str) -> Option<Box<dyn Benchmark>> {
    all().into_iter().find(|b| b.info().name == name)
}

/// The one-line error for a name the catalog does not hold (`what`: "benchmark",
/// "workload"): the closest names by edit distance when any is close, else where the
/// list is, never the whole catalog in one line.
pub fn unknown(what: &str, name: &str) -> String {
    let shown = smtlab_model::quote::quoted(name);
    let names: Vec<String> = all().into_iter().map(|b| b.info().name).collect();
    let close = closest(name, &names);
    if close.is_empty() {
        format!("unknown {what} {shown}; `smtlab list` shows them all")
    } else {
        format!(
            "unknown {what} {shown}; did you mean {}?",
            close.join(" or ")
        )
    }
}

/// Up to three of `known` within a small edit distance of `name` (a third of its
/// length, at least 2), closest first; a name that `name` is a part of counts too.
fn closest(name: &str, known: &[String]) -> Vec<String> {
    let limit = (name.chars().count() / 3).max(2);
    let mut near: Vec<(usize, &String)> = known
        .iter()
        .filter_map(|k| {
            let d = strsim::damerau_levenshtein(name, k);
            let part = name.len() >= 3 && k.contains(name);
            (d <= limit || part).then_some((if part { d.min(limit) } else { d }, k))
        })
        .collect();
    near.sort();
    near.into_iter().take(3).map(|(_, k)| k.clone()).collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_mistyped_name_gets_the_closest_names_and_a_far_one_the_list_command() {
        let typo = super::unknown("benchmark", "intops");
        assert!(typo.contains("did you mean int-ops?"), "{typo}");
        let swapped = super::unknown("benchmark", "mem-raed");
        assert!(swapped.contains("mem-read"), "{swapped}");
        let far = super::unknown("benchmark", "zzzzzzzzzz");
        assert!(far.ends_with("`smtlab list` shows them all"), "{far}");
        assert!(!far.contains("int-ops"), "{far}");
    }

    #[test]
    fn no_benchmark_declares_a_parameter_named_like_a_condition() {
        // Conditions are stored flat beside the parameters (`smtlab_model::keys`).
        use smtlab_model::keys::{COOKIE_PARAM, FORM_PARAM, PARTNER_PARAM, RATE_PARAM, SMT_PARAM};
        let reserved = [
            SMT_PARAM,
            FORM_PARAM,
            PARTNER_PARAM,
            RATE_PARAM,
            COOKIE_PARAM,
        ];
        for info in super::infos() {
            for p in &info.params {
                assert!(
                    !reserved.contains(&p.name.as_str()),
                    "{}: parameter {}",
                    info.name,
                    p.name
                );
            }
        }
    }

    #[test]
    fn every_main_parameter_is_a_declared_parameter() {
        for info in super::infos() {
            if let Some(m) = &info.main_param {
                assert!(
                    info.params.iter().any(|p| &p.name == m),
                    "{}: {m}",
                    info.name
                );
            }
        }
    }

    #[test]
    fn names_are_unique() {
        let mut names: Vec<String> = super::all().into_iter().map(|b| b.info().name).collect();
        let n = names.len();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), n);
    }
}
