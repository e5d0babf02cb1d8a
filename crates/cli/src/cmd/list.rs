//! `smtlab list`: the benchmark catalog.

use anyhow::Result;
use smtlab_model::BenchInfo;

use super::{emit, json_text};
use crate::args::ListArgs;
use crate::render::table::Table;

pub fn run(args: &ListArgs) -> Result<()> {
    let infos: Vec<BenchInfo> = smtlab_runner::catalog::all()
        .iter()
        .map(|b| b.info())
        .collect();
    if args.json {
        return emit(&json_text(&infos)?);
    }
    emit(&table(&infos))
}

pub fn table(infos: &[BenchInfo]) -> String {
    let mut t = Table::new([
        "Benchmark",
        "Group",
        "Unit",
        "Better",
        "Parameters (default)",
        "About",
    ]);
    for i in infos {
        let params = i
            .params
            .iter()
            .map(|p| format!("{}={}", p.name, p.default))
            .collect::<Vec<_>>()
            .join(" ");
        t.row([
            i.name.clone(),
            i.group.clone(),
            i.unit.clone(),
            i.direction.as_str().to_string(),
            if params.is_empty() {
                "-".into()
            } else {
                params
            },
            i.description.lines().next().unwrap_or("").to_string(),
        ]);
    }
    t.render()
}
