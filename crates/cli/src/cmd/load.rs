//! `smtlab load URL`: the load generator alone, like wrk. Settings
//! ([`crate::settings::load`]), the load ([`smtlab_loadgen::run`]), its report
//! ([`crate::render::load`]).

use anyhow::{Result, bail};
use smtlab_loadgen::Pinning;

use crate::args::LoadArgs;
use crate::render::load::{json, text};

pub fn run(a: &LoadArgs) -> Result<()> {
    let crate::settings::load::Load { cfg, cpus, mix } = crate::settings::load::load(a)?;
    let pin = if cpus.is_empty() {
        Pinning::Unpinned
    } else {
        Pinning::Cpus(&cpus)
    };
    let report = smtlab_loadgen::run(&cfg, mix, pin).map_err(|e| anyhow::anyhow!("{e}"))?;
    if a.json {
        crate::output::emit(&crate::output::json_text(&json(a, &cfg, &cpus, &report))?)?;
    } else {
        crate::output::emit(&text(a, &cfg, &cpus, &report))?;
    }
    // What was counted is shown either way; a load that got no good answer at all
    // measured nothing, and says so with its exit status.
    if report.requests == 0 {
        bail!(
            "{}: no request succeeded in {:.1} s (errors: {})",
            a.url,
            report.seconds(),
            report.errors_line()
        );
    }
    Ok(())
}
