//! How each [`CounterEvent`] maps onto perf_event's generic events, and which events
//! are opened together as a group.

use perf_event_open_sys::bindings as b;
use smtlab_model::counters::CounterEvent;

/// `(type, config)` of the generic perf event behind `event`.
pub(crate) fn type_config(event: CounterEvent) -> (u32, u64) {
    let hw = |c: u32| (b::PERF_TYPE_HARDWARE, u64::from(c));
    let sw = |c: u32| (b::PERF_TYPE_SOFTWARE, u64::from(c));
    // PERF_TYPE_HW_CACHE config: cache id | op << 8 | result << 16.
    let cache = |id: u32, miss: bool| {
        let result = if miss {
            b::PERF_COUNT_HW_CACHE_RESULT_MISS
        } else {
            b::PERF_COUNT_HW_CACHE_RESULT_ACCESS
        };
        (
            b::PERF_TYPE_HW_CACHE,
            u64::from(id)
                | u64::from(b::PERF_COUNT_HW_CACHE_OP_READ) << 8
                | u64::from(result) << 16,
        )
    };
    match event {
        CounterEvent::Cycles => hw(b::PERF_COUNT_HW_CPU_CYCLES),
        CounterEvent::Instructions => hw(b::PERF_COUNT_HW_INSTRUCTIONS),
        CounterEvent::RefCycles => hw(b::PERF_COUNT_HW_REF_CPU_CYCLES),
        CounterEvent::Branches => hw(b::PERF_COUNT_HW_BRANCH_INSTRUCTIONS),
        CounterEvent::BranchMisses => hw(b::PERF_COUNT_HW_BRANCH_MISSES),
        CounterEvent::StalledCyclesFrontend => hw(b::PERF_COUNT_HW_STALLED_CYCLES_FRONTEND),
        CounterEvent::StalledCyclesBackend => hw(b::PERF_COUNT_HW_STALLED_CYCLES_BACKEND),
        CounterEvent::L1dReads => cache(b::PERF_COUNT_HW_CACHE_L1D, false),
        CounterEvent::L1dReadMisses => cache(b::PERF_COUNT_HW_CACHE_L1D, true),
        CounterEvent::L1iReads => cache(b::PERF_COUNT_HW_CACHE_L1I, false),
        CounterEvent::L1iReadMisses => cache(b::PERF_COUNT_HW_CACHE_L1I, true),
        CounterEvent::LlcReads => cache(b::PERF_COUNT_HW_CACHE_LL, false),
        CounterEvent::LlcReadMisses => cache(b::PERF_COUNT_HW_CACHE_LL, true),
        CounterEvent::DtlbReads => cache(b::PERF_COUNT_HW_CACHE_DTLB, false),
        CounterEvent::DtlbReadMisses => cache(b::PERF_COUNT_HW_CACHE_DTLB, true),
        CounterEvent::ItlbReads => cache(b::PERF_COUNT_HW_CACHE_ITLB, false),
        CounterEvent::ItlbReadMisses => cache(b::PERF_COUNT_HW_CACHE_ITLB, true),
        CounterEvent::TaskClock => sw(b::PERF_COUNT_SW_TASK_CLOCK),
        CounterEvent::ContextSwitches => sw(b::PERF_COUNT_SW_CONTEXT_SWITCHES),
        CounterEvent::CpuMigrations => sw(b::PERF_COUNT_SW_CPU_MIGRATIONS),
        CounterEvent::PageFaults => sw(b::PERF_COUNT_SW_PAGE_FAULTS),
    }
}

/// Hardware events that are opened as one group, so the kernel schedules them onto
/// counters together and their ratio (misses / accesses, cycles / instructions) comes
/// from the same stretches of time even when multiplexed. Groups are kept to two
/// events: a group larger than the free counters can never be scheduled at all.
/// Events not listed (software events) are opened alone.
pub(crate) const GROUPS: [&[CounterEvent]; 9] = [
    &[CounterEvent::Cycles, CounterEvent::Instructions],
    &[CounterEvent::RefCycles],
    &[CounterEvent::Branches, CounterEvent::BranchMisses],
    &[CounterEvent::L1dReads, CounterEvent::L1dReadMisses],
    &[CounterEvent::L1iReads, CounterEvent::L1iReadMisses],
    &[CounterEvent::LlcReads, CounterEvent::LlcReadMisses],
    &[CounterEvent::DtlbReads, CounterEvent::DtlbReadMisses],
    &[CounterEvent::ItlbReads, CounterEvent::ItlbReadMisses],
    &[
        CounterEvent::StalledCyclesFrontend,
        CounterEvent::StalledCyclesBackend,
    ],
];

/// Splits the requested events into open groups: the [`GROUPS`] restricted to what was
/// asked for, then every other requested event alone. Duplicates are dropped.
pub(crate) fn plan_groups(requested: &[CounterEvent]) -> Vec<Vec<CounterEvent>> {
    let mut wanted: Vec<CounterEvent> = Vec::new();
    for &e in requested {
        if !wanted.contains(&e) {
            wanted.push(e);
        }
    }
    let mut groups: Vec<Vec<CounterEvent>> = GROUPS
        .iter()
        .map(|g| {
            g.iter()
                .copied()
                .filter(|e| wanted.contains(e))
                .collect::<Vec<_>>()
        })
        .filter(|g| !g.is_empty())
        .collect();
    for e in wanted {
        if !groups.iter().any(|g| g.contains(&e)) {
            groups.push(vec![e]);
        }
    }
    groups
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_event_lands_in_exactly_one_group() {
        let groups = plan_groups(&CounterEvent::ALL);
        for e in CounterEvent::ALL {
            assert_eq!(groups.iter().filter(|g| g.contains(&e)).count(), 1, "{e}");
        }
        let some = plan_groups(&[
            CounterEvent::Instructions,
            CounterEvent::PageFaults,
            CounterEvent::Instructions,
        ]);
        assert_eq!(
            some,
            vec![
                vec![CounterEvent::Instructions],
                vec![CounterEvent::PageFaults]
            ]
        );
    }

    #[test]
    fn cache_config_encoding() {
        assert_eq!(
            type_config(CounterEvent::LlcReadMisses),
            (b::PERF_TYPE_HW_CACHE, 2 | (1 << 16))
        );
        assert_eq!(
            type_config(CounterEvent::DtlbReads),
            (b::PERF_TYPE_HW_CACHE, 3)
        );
    }
}
