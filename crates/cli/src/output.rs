//! Writing to standard output: text (a closed pipe is not an error), JSON, Markdown
//! exports, and the check that only one output owns standard output.

use std::path::Path;

use anyhow::{Context, Result};

/// Writes to stdout, treating a closed pipe (`smtlab topo | head`) as success.
pub fn emit(text: &str) -> Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|_| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other.context("cannot write to standard output"),
    }
}

/// Pretty JSON with a trailing newline.
pub fn json_text<T: serde::Serialize>(value: &T) -> Result<String> {
    let mut s = serde_json::to_string_pretty(value).context("cannot encode JSON")?;
    s.push('\n');
    Ok(s)
}

/// Refuses two outputs that both want standard output; whether the text (tables, lines,
/// summaries) has standard output, which JSON or Markdown there (`-`) take instead.
pub fn check_stdout_owner(json: bool, markdown: Option<&Path>) -> Result<bool> {
    let md_stdout = markdown.is_some_and(|p| p.as_os_str() == "-");
    if json && md_stdout {
        anyhow::bail!(
            "--json and --export-markdown - both write to standard output: give --export-markdown a file"
        );
    }
    Ok(!json && !md_stdout)
}

/// `--export-markdown`: the cells as a Markdown table, to `path` or (`-`) standard output;
/// whether they went to standard output.
pub fn export_markdown(path: &Path, cells: &[smtlab_model::CellRecord]) -> Result<bool> {
    export(path, smtlab_report::markdown::cells(cells).as_bytes())
}

/// A stored run as `--export-markdown` (its cells, to `markdown`) and `--json`
/// (smtlab.results/1 on standard output) ask.
pub fn stored_run(
    run: &smtlab_model::RunResults,
    json: bool,
    markdown: Option<&Path>,
) -> Result<()> {
    if let Some(path) = markdown {
        export_markdown(path, &run.cells)?;
    }
    if json {
        emit(&String::from_utf8_lossy(&smtlab_report::export::json(run)))?;
    }
    Ok(())
}

/// Writes `bytes` to the file `path`, or to standard output when it is `-`; whether
/// they went to standard output.
pub fn export(path: &Path, bytes: &[u8]) -> Result<bool> {
    if path.as_os_str() == "-" {
        return emit(&String::from_utf8_lossy(bytes)).map(|()| true);
    }
    write_file(path, bytes).map(|()| false)
}

/// Writes `bytes` to the file `path` and says so on standard error.
pub fn write_file(path: &Path, bytes: &[u8]) -> Result<()> {
    std::fs::write(path, bytes)
        .with_context(|| format!("cannot write {}", smtlab_model::quote::path(path)))?;
    crate::term::note(&format!("wrote {}", smtlab_model::quote::path(path)));
    Ok(())
}
