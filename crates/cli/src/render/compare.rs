//! `smtlab compare` on the terminal. Wide (`--wide`), the report crate's one-line-per-
//! cell table; fitted to a width, each cell's speed-up goes on a line under it, because
//! a ratio with its interval and verdict does not fit beside six other columns.

use smtlab_report::fmt::{num, params, ratio_ci};
use smtlab_report::table::{Layout, Table, wrap};
use smtlab_report::{Comparison, GroupMean};

pub fn table(c: &Comparison, layout: Layout) -> String {
    if layout.width.is_none() {
        return smtlab_report::compare_table(c);
    }
    let mut head = smtlab_report::compare::head_text(c);
    head.push('\n');
    let mut out = wrap(&head, layout);
    if c.rows.is_empty() {
        out.push_str("\nno cell was measured in both runs\n");
    }
    for g in &c.groups {
        out.push_str(&format!("\n[{}]\n", g.group));
        let mut t = Table::new(["benchmark", "params", "placement", "unit", "A", "B"]).shrink(1);
        for r in c.rows.iter().filter(|r| r.group == g.group) {
            let up = r.speedup_text();
            t.row_with_detail(
                [
                    r.benchmark.clone(),
                    params(&r.params),
                    r.placement.clone(),
                    r.unit.clone(),
                    num(r.a),
                    num(r.b),
                ],
                format!("speed-up ({}): {up}", r.statistic.name()),
            );
        }
        out.push_str(&t.render_to(layout));
        out.push_str(&wrap(
            &geomean(g, &format!("geometric mean ({})", g.rows)),
            layout,
        ));
    }
    if !c.rows.is_empty() {
        out.push('\n');
        out.push_str(&wrap(
            &geomean(
                &c.overall,
                &format!("overall geometric mean ({})", c.overall.rows),
            ),
            layout,
        ));
    }
    let counted: Vec<_> = c.rows.iter().filter(|r| !r.counters.is_empty()).collect();
    if !counted.is_empty() {
        out.push_str("\ncounters (cells counted in both runs; lower is usually better):\n");
        // One small table per cell under its name: the cell's key and the figure's name
        // side by side would not fit.
        for r in counted {
            out.push_str(&wrap(
                &format!("{} {} on {}", r.benchmark, params(&r.params), r.placement),
                layout,
            ));
            let mut t = Table::new(["  figure", "A", "B", "B/A"]);
            for k in &r.counters {
                t.row([
                    format!("  {}", k.metric),
                    num(k.a),
                    num(k.b),
                    k.ratio.map_or("-".into(), |x| format!("{}x", num(x))),
                ]);
            }
            out.push_str(&t.render_to(layout));
        }
    }
    out.push_str(&smtlab_report::compare::tail_text(c, |l| wrap(l, layout)));
    out
}

fn geomean(g: &GroupMean, label: &str) -> String {
    let mut s = label.to_string();
    if let (Some(unit), Some(a), Some(b)) = (&g.unit, g.a, g.b) {
        s.push_str(&format!(": A {} {unit}, B {} {unit}", num(a), num(b)));
    }
    s.push_str(&format!(
        ", speed-up {}",
        g.speedup
            .map_or("-".into(), |x| ratio_ci(x, g.ci95_low, g.ci95_high))
    ));
    if g.unsteady > 0 {
        s.push_str(&format!(", {} unsteady left out", g.unsteady));
    }
    s
}
