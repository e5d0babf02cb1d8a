//! `smtlab list`: the benchmark catalog.

use anyhow::Result;
use smtlab_model::BenchInfo;
use smtlab_report::table::{Layout, Table};

use crate::args::ListArgs;
use crate::output::{emit, json_text};

pub fn run(args: &ListArgs) -> Result<()> {
    let infos: Vec<BenchInfo> = smtlab_runner::catalog::all()
        .iter()
        .map(|b| b.info())
        .collect();
    if args.json {
        return emit(&json_text(&infos)?);
    }
    emit(&table(&infos, crate::term::term_layout()))
}

/// Fitted to a width, each benchmark's description goes on a line of its own under it
/// (cut to the width) and long parameter lists are cut; `--wide` keeps one line each.
pub fn table(infos: &[BenchInfo], layout: Layout) -> String {
    let wide = layout.width.is_none();
    let mut headers = vec![
        "Benchmark",
        "Group",
        "Unit",
        "Better",
        "Parameters (default)",
    ];
    if wide {
        headers.push("About");
    }
    let mut t = Table::new(headers).shrink(4);
    for i in infos {
        let params = i
            .params
            .iter()
            .map(|p| format!("{}={}", p.name, p.default))
            .collect::<Vec<_>>()
            .join(" ");
        let mut cells = vec![
            i.name.clone(),
            i.group.clone(),
            i.unit.to_string(),
            i.direction.as_str().to_string(),
            if params.is_empty() {
                "-".into()
            } else {
                params
            },
        ];
        let about = i.description.lines().next().unwrap_or("").to_string();
        if wide {
            cells.push(about);
            t.row(cells);
        } else {
            t.row_with_detail(cells, about);
        }
    }
    t.render_to(layout)
}
