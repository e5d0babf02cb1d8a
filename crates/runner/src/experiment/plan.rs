//! A stored plan of cells (`smtlab run`, new or resumed) as session groups: the
//! placements of one benchmark and parameter set (SMT state included) form a group.

use smtlab_bench::Benchmark;
use smtlab_model::{CellKey, SkippedCell, Topology};

use crate::plan::{params_of, placed};
use crate::session::{CellPlan, Group, Unplaced};

/// The groups of `keys`, their benchmarks found in `catalog` and their placements
/// resolved on `topo`; the cells whose benchmark this build lacks are skipped with the
/// reason.
pub fn groups_of<'a>(
    keys: &[CellKey],
    catalog: &'a [Box<dyn Benchmark>],
    topo: &Topology,
) -> (Vec<Group<'a>>, Vec<SkippedCell>) {
    let mut groups: Vec<Group<'a>> = Vec::new();
    let mut missing = Vec::new();
    for key in keys {
        let Some(bench) = catalog.iter().find(|b| b.info().name == key.benchmark) else {
            missing.push(SkippedCell {
                key: key.clone(),
                reason: format!("no benchmark {:?} in this build", key.benchmark),
            });
            continue;
        };
        let placement = placed(&key.placement, topo).map_err(Unplaced::from);
        let cell = CellPlan::new(bench.as_ref(), params_of(key), key.clone(), placement);
        match groups.last_mut() {
            Some(g) if g[0].key.same_variant(key) => {
                g.push(cell);
            }
            _ => groups.push(vec![cell]),
        }
    }
    (groups, missing)
}
