//! Placement names as users write them, parsed into [`PlacementSpec`].

use smtlab_model::cpuset::MAX_CPU;
use smtlab_model::{CoreOrder, CpuOrder, CpuSet, PlacementKind, PlacementSpec};

use crate::PlacementError;

/// What [`parse`] accepts, as quoted in its error messages.
pub const EXPECTED: &str = "NcMt (1c1t, 1c2t, 2c1t, 2c2t, ...), 1T, 2T, 2P, 4T, all, cores, \
     half-cores-Mt (half-cores-1t, half-cores-2t), cpus=LIST, os, 1c1t-up (1T-UP) or 1t-up-kernel, optionally followed by /compact|/scatter and /spread|/siblings|/linear";

/// Largest core or thread count accepted: no machine has more CPUs than the CPU-list
/// parser accepts, and capping here keeps later arithmetic far from overflow.
const MAX_COUNT: u64 = MAX_CPU as u64 + 1;

/// What `half-cores-Mt` starts with.
pub const HALF_CORES_PREFIX: &str = "half-cores-";

/// Parses a placement name (see the [crate] documentation for the grammar).
///
/// Surrounding whitespace is ignored and case does not matter; [`PlacementSpec::text`]
/// keeps the trimmed input so reports can show what the user asked for.
pub fn parse(text: &str) -> Result<PlacementSpec, PlacementError> {
    let trimmed = text.trim();
    let lower = trimmed.to_ascii_lowercase();
    let mut parts = lower.split('/');
    // split always yields at least one item, even for "".
    let base = parts.next().unwrap_or_default();
    let kind = parse_base(base, trimmed)?;

    let mut core_order = None;
    let mut cpu_order = None;
    for suffix in parts {
        if let Some(order) = CoreOrder::parse(suffix) {
            if let Some(prev) = core_order.replace(order) {
                return Err(invalid(
                    trimmed,
                    format!("core order given twice (/{prev} and /{order})"),
                ));
            }
        } else if let Some(order) = CpuOrder::parse(suffix) {
            if let Some(prev) = cpu_order.replace(order) {
                return Err(invalid(
                    trimmed,
                    format!("CPU order given twice (/{prev} and /{order})"),
                ));
            }
        } else {
            return Err(invalid(
                trimmed,
                format!(
                    "unknown suffix {:?}: expected /compact|/scatter and /spread|/siblings|/linear",
                    shorten(&format!("/{suffix}"))
                ),
            ));
        }
    }
    let one_cpu = matches!(
        kind,
        PlacementKind::Uniprocessor | PlacementKind::UniprocessorKernel
    );
    if one_cpu && (core_order.is_some() || cpu_order.is_some()) {
        return Err(invalid(
            trimmed,
            format!(
                "{base} is one CPU, so it takes no /compact, /scatter, /spread, /siblings or /linear"
            ),
        ));
    }
    if kind == PlacementKind::Os && (core_order.is_some() || cpu_order.is_some()) {
        return Err(invalid(
            trimmed,
            "os does not pin, so it takes no /compact, /scatter, /spread, /siblings or /linear",
        ));
    }
    Ok(PlacementSpec {
        text: trimmed.to_string(),
        kind,
        core_order: core_order.unwrap_or_default(),
        cpu_order: cpu_order.unwrap_or_default(),
    })
}

/// The canonical name of a spec: `NcMt`, `all`, `cores`, `cpus=LIST` (ranges merged) or
/// `os`, followed by `/scatter` and `/siblings` or `/linear` when those were asked for.
pub fn canonical_name(spec: &PlacementSpec) -> String {
    let mut name = match &spec.kind {
        PlacementKind::Grid {
            cores,
            threads_per_core,
        } => format!("{cores}c{threads_per_core}t"),
        PlacementKind::All => "all".to_string(),
        PlacementKind::Cores => "cores".to_string(),
        PlacementKind::HalfCores { threads_per_core } => {
            format!("{HALF_CORES_PREFIX}{threads_per_core}t")
        }
        PlacementKind::Cpus { cpus } => format!("cpus={}", cpus.to_list_string()),
        PlacementKind::Os => "os".to_string(),
        PlacementKind::Uniprocessor => smtlab_model::placement::UNIPROCESSOR_NAME.to_string(),
        PlacementKind::UniprocessorKernel => smtlab_model::placement::UP_KERNEL_NAME.to_string(),
    };
    if spec.core_order != CoreOrder::default() {
        name.push_str(&format!("/{}", spec.core_order));
    }
    if spec.cpu_order != CpuOrder::default() {
        name.push_str(&format!("/{}", spec.cpu_order));
    }
    name
}

fn parse_base(base: &str, input: &str) -> Result<PlacementKind, PlacementError> {
    let grid = |cores, threads_per_core| PlacementKind::Grid {
        cores,
        threads_per_core,
    };
    match base {
        "1t" => return Ok(grid(1, 1)),
        "2t" => return Ok(grid(1, 2)),
        "2p" => return Ok(grid(2, 1)),
        "4t" => return Ok(grid(2, 2)),
        "all" => return Ok(PlacementKind::All),
        "cores" => return Ok(PlacementKind::Cores),
        "os" => return Ok(PlacementKind::Os),
        "1c1t-up" | "1t-up" => return Ok(PlacementKind::Uniprocessor),
        "1t-up-kernel" => return Ok(PlacementKind::UniprocessorKernel),
        _ => {}
    }
    if let Some(rest) = base.strip_prefix(HALF_CORES_PREFIX) {
        let m = rest.strip_suffix('t').unwrap_or("");
        if !is_number(m) {
            return Err(invalid(
                input,
                "expected half-cores-Mt with M threads per core, e.g. half-cores-1t or half-cores-2t",
            ));
        }
        let threads_per_core = count(m, "thread-per-core", input)?;
        return Ok(PlacementKind::HalfCores { threads_per_core });
    }
    if let Some(list) = base.strip_prefix("cpus=") {
        let cpus = CpuSet::parse_list(list).map_err(|e| {
            invalid(
                input,
                format!(
                    "bad CPU list: {} (expected e.g. cpus=0,4 or cpus=0-3)",
                    e.reason
                ),
            )
        })?;
        if cpus.is_empty() {
            return Err(invalid(
                input,
                "empty CPU list (expected e.g. cpus=0,4 or cpus=0-3)",
            ));
        }
        return Ok(PlacementKind::Cpus { cpus });
    }
    if base == "cpus" {
        return Err(invalid(
            input,
            "expected cpus=LIST, e.g. cpus=0,4 or cpus=0-3",
        ));
    }
    if let Some((n, m)) = base.strip_suffix('t').and_then(|s| s.split_once('c'))
        && is_number(n)
        && is_number(m)
    {
        let cores = count(n, "core", input)?;
        let threads_per_core = count(m, "thread-per-core", input)?;
        return Ok(grid(cores, threads_per_core));
    }
    Err(PlacementError::Unknown {
        input: shorten(input),
    })
}

fn is_number(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}

fn count(digits: &str, what: &str, input: &str) -> Result<u32, PlacementError> {
    // Leading zeros are harmless, and stripping them lets a 40-digit "000...1" through
    // while any real overflow still fails below.
    let significant = digits.trim_start_matches('0');
    let value = if significant.is_empty() {
        Some(0)
    } else if significant.len() > 19 {
        None
    } else {
        significant.parse::<u64>().ok()
    };
    match value {
        Some(0) => Err(invalid(input, format!("{what} count must be at least 1"))),
        Some(v) if v <= MAX_COUNT => Ok(v as u32),
        _ => Err(invalid(
            input,
            format!(
                "{what} count {} is too large (at most {MAX_COUNT})",
                shorten(significant)
            ),
        )),
    }
}

fn invalid(input: &str, reason: impl Into<String>) -> PlacementError {
    PlacementError::Invalid {
        input: shorten(input),
        reason: reason.into(),
    }
}

/// Keeps error messages one readable line even when the input is a pasted novel.
pub(crate) fn shorten(s: &str) -> String {
    const MAX_CHARS: usize = 60;
    let mut out: String = s.chars().take(MAX_CHARS).collect();
    if s.chars().nth(MAX_CHARS).is_some() {
        out.push_str("...");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn grid(spec: &str) -> (u32, u32) {
        match parse(spec).unwrap().kind {
            PlacementKind::Grid {
                cores,
                threads_per_core,
            } => (cores, threads_per_core),
            other => panic!("{spec} parsed as {other:?}"),
        }
    }

    #[test]
    fn canonical_grid_names() {
        assert_eq!(grid("1c1t"), (1, 1));
        assert_eq!(grid("1c2t"), (1, 2));
        assert_eq!(grid("2c1t"), (2, 1));
        assert_eq!(grid("2c2t"), (2, 2));
        assert_eq!(grid("4c2t"), (4, 2));
        assert_eq!(grid("64c4t"), (64, 4));
        assert_eq!(grid("1C2T"), (1, 2));
        assert_eq!(grid(" 2c1t\n"), (2, 1));
        assert_eq!(grid("01c02t"), (1, 2));
    }

    #[test]
    fn half_cores_names() {
        for (text, m) in [
            ("half-cores-1t", 1),
            ("HALF-CORES-2t", 2),
            ("half-cores-4t", 4),
        ] {
            let spec = parse(text).unwrap();
            assert_eq!(
                spec.kind,
                PlacementKind::HalfCores {
                    threads_per_core: m
                }
            );
            assert_eq!(canonical_name(&spec), format!("half-cores-{m}t"));
        }
        for bad in [
            "half-cores-",
            "half-cores-t",
            "half-cores-0t",
            "half-cores-xt",
        ] {
            let e = parse(bad).unwrap_err().to_string();
            assert!(e.contains("half-cores"), "{bad}: {e}");
        }
    }

    #[test]
    fn paper_aliases() {
        assert_eq!(grid("1T"), (1, 1));
        assert_eq!(grid("2T"), (1, 2));
        assert_eq!(grid("2P"), (2, 1));
        assert_eq!(grid("4T"), (2, 2));
        assert_eq!(grid("2t"), (1, 2));
        assert_eq!(grid("2p"), (2, 1));
    }

    #[test]
    fn keywords_and_explicit_lists() {
        assert_eq!(parse("all").unwrap().kind, PlacementKind::All);
        assert_eq!(parse("ALL").unwrap().kind, PlacementKind::All);
        assert_eq!(parse("cores").unwrap().kind, PlacementKind::Cores);
        assert_eq!(parse("os").unwrap().kind, PlacementKind::Os);
        assert_eq!(
            parse("cpus=0,4").unwrap().kind,
            PlacementKind::Cpus {
                cpus: [0, 4].into_iter().collect()
            }
        );
        assert_eq!(
            parse("CPUS=0-3").unwrap().kind,
            PlacementKind::Cpus {
                cpus: (0..4).collect()
            }
        );
    }

    #[test]
    fn suffixes_in_either_order() {
        let s = parse("2c2t/scatter/siblings").unwrap();
        assert_eq!(
            (s.core_order, s.cpu_order),
            (CoreOrder::Scatter, CpuOrder::Siblings)
        );
        let s = parse("2c2t/linear/scatter").unwrap();
        assert_eq!(
            (s.core_order, s.cpu_order),
            (CoreOrder::Scatter, CpuOrder::Linear)
        );
        let s = parse("2c1t/scatter").unwrap();
        assert_eq!(
            (s.core_order, s.cpu_order),
            (CoreOrder::Scatter, CpuOrder::Spread)
        );
        let s = parse("all/COMPACT/Spread").unwrap();
        assert_eq!(
            (s.core_order, s.cpu_order),
            (CoreOrder::Compact, CpuOrder::Spread)
        );
        let s = parse("cpus=0-3/siblings").unwrap();
        assert_eq!(s.cpu_order, CpuOrder::Siblings);
        assert_eq!(parse("2T/scatter").unwrap().text, "2T/scatter");
    }

    #[test]
    fn canonical_names_drop_defaults_and_aliases() {
        let name = |s: &str| canonical_name(&parse(s).unwrap());
        assert_eq!(name("2T"), "1c2t");
        assert_eq!(name("4T"), "2c2t");
        assert_eq!(name("2c1t/compact/spread"), "2c1t");
        assert_eq!(name("2P/scatter"), "2c1t/scatter");
        assert_eq!(name("2c2t/siblings/scatter"), "2c2t/scatter/siblings");
        assert_eq!(name("ALL/linear"), "all/linear");
        assert_eq!(name("cpus=4,0"), "cpus=0,4");
        assert_eq!(name("cpus=3,0-2"), "cpus=0-3");
        assert_eq!(name("os"), "os");
        assert_eq!(name("1T-UP"), "1c1t-up");
        assert_eq!(name("1c1t-up"), "1c1t-up");
    }

    #[test]
    fn the_uniprocessor_placement_takes_no_orders() {
        assert_eq!(parse("1t-up").unwrap().kind, PlacementKind::Uniprocessor);
        let msg = parse("1T-UP/scatter").unwrap_err().to_string();
        assert!(msg.contains("takes no /compact"), "{msg}");
        assert_eq!(
            parse("1t-up-kernel").unwrap().kind,
            PlacementKind::UniprocessorKernel
        );
        let msg = parse("1t-up-kernel/linear").unwrap_err().to_string();
        assert!(msg.contains("1t-up-kernel is one CPU"), "{msg}");
    }

    #[test]
    fn unknown_names_list_what_is_accepted() {
        let msg = parse("3x").unwrap_err().to_string();
        assert_eq!(
            msg,
            "unknown placement \"3x\": expected NcMt (1c1t, 1c2t, 2c1t, 2c2t, ...), 1T, 2T, 2P, \
             4T, all, cores, half-cores-Mt (half-cores-1t, half-cores-2t), cpus=LIST, os, \
             1c1t-up (1T-UP) or 1t-up-kernel, optionally followed by /compact|/scatter and /spread|/siblings|/linear"
        );
        for bad in [
            "", "  ", "c1t", "1ct", "1c", "2c2", "3T", "1c-1t", "+1c1t", "1c1t1", "nope",
        ] {
            let e = parse(bad).unwrap_err();
            assert!(
                matches!(e, PlacementError::Unknown { .. }),
                "{bad:?} gave {e:?}"
            );
        }
    }

    #[test]
    fn malformed_placements_say_what_is_wrong() {
        let cases = [
            ("0c1t", "core count must be at least 1"),
            ("1c0t", "thread-per-core count must be at least 1"),
            ("99999999999c1t", "core count 99999999999 is too large"),
            ("1c99999999999999999999999999t", "is too large"),
            ("65537c1t", "is too large (at most 65536)"),
            ("cpus=", "empty CPU list"),
            ("cpus", "expected cpus=LIST"),
            ("cpus=3-1", "bad CPU list"),
            ("cpus=a", "bad CPU list"),
            ("cpus=0,,1", "bad CPU list"),
            ("cpus=0-99999999", "bad CPU list"),
            ("2c1t/sideways", "unknown suffix \"/sideways\""),
            ("2c1t/", "unknown suffix \"/\""),
            (
                "2c1t/scatter/compact",
                "core order given twice (/scatter and /compact)",
            ),
            ("2c1t/linear/siblings", "CPU order given twice"),
            ("os/scatter", "os does not pin"),
        ];
        for (input, want) in cases {
            let msg = parse(input).unwrap_err().to_string();
            assert!(
                msg.starts_with(&format!("invalid placement {input:?}: ")),
                "{input}: {msg}"
            );
            assert!(msg.contains(want), "{input}: {msg}");
            assert!(!msg.contains('\n'), "{input}: {msg}");
        }
        assert!(parse("65536c1t").is_ok());
    }

    #[test]
    fn long_input_is_shortened_in_errors() {
        let long = "x".repeat(10_000);
        let msg = parse(&long).unwrap_err().to_string();
        assert!(msg.len() < 400, "{msg}");
        assert!(msg.contains("..."));
    }

    proptest! {
        #[test]
        fn arbitrary_text_never_panics(t in "\\PC{0,60}") {
            if let Ok(spec) = parse(&t) {
                // Whatever parses, its canonical name parses back to the same request.
                let again = parse(&canonical_name(&spec)).unwrap();
                prop_assert_eq!(again.kind, spec.kind);
                prop_assert_eq!(again.core_order, spec.core_order);
                prop_assert_eq!(again.cpu_order, spec.cpu_order);
            }
        }

        #[test]
        fn placement_like_text_never_panics(
            t in "[0-9]{0,25}[cCtTpP]?[0-9]{0,25}[tT]?(/(scatter|compact|spread|siblings|linear|x))?"
        ) {
            let _ = parse(&t);
        }

        #[test]
        fn cpu_lists_never_panic(t in "cpus=[0-9,\\- ]{0,30}(/linear)?") {
            let _ = parse(&t);
        }

        #[test]
        fn grid_round_trip(n in 1u32..=65536, m in 1u32..=65536) {
            let spec = parse(&format!("{n}c{m}t")).unwrap();
            prop_assert_eq!(&spec.kind, &PlacementKind::Grid { cores: n, threads_per_core: m });
            prop_assert_eq!(canonical_name(&spec), format!("{n}c{m}t"));
        }
    }
}
