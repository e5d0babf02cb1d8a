//! `smtlab topo`.

use anyhow::{Context, Result};

use crate::args::{TopoArgs, TopoView};
use crate::output::{emit, json_text};
use crate::render;
use crate::settings::load_topology;

pub fn run(args: &TopoArgs, machine: &dyn smtlab_runner::machine::Machine) -> Result<()> {
    let topo = load_topology(&args.sysfs, machine)?;
    if let Some(path) = &args.svg {
        std::fs::write(path, render::topo::svg(&topo))
            .with_context(|| format!("cannot write {}", smtlab_model::quote::path(path)))?;
        crate::term::stderr_line(&format!("wrote {}", smtlab_model::quote::path(path)));
    }
    if args.probe_siblings {
        let window = std::time::Duration::from_millis(args.probe_ms);
        let figures = smtlab_runner::experiment::siblings::probe(&topo, window)?;
        return emit(&render::topo::sibling_probe(&topo, &figures, args.json));
    }
    if args.json {
        return emit(&json_text(&topo)?);
    }
    let mut out = String::new();
    if matches!(args.view, TopoView::Tables | TopoView::Both) {
        out.push_str(&render::topo::tables(&topo));
    }
    if matches!(args.view, TopoView::Boxes | TopoView::Both) {
        out.push_str(&render::topo::boxes(&topo));
        out.push('\n');
    }
    out.push_str(&render::topo::verdict(&topo));
    out.push('\n');
    emit(&out)
}
