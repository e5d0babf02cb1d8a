//! The remote load clients of recorded cells (`--client-hosts`): the figures read back
//! from the samples, and the table of the HTML page's web section.

use smtlab_model::metrics::web as m;
use smtlab_report::remote::{line, remote_clients};

fn web_section(page: &str) -> &str {
    let start = page.find("<section id=\"web\">").expect("a web section");
    let end = page[start..].find("</section>").unwrap() + start;
    &page[start..end]
}

#[test]
fn every_recorded_cell_has_its_two_agents_and_their_shares_add_up() {
    let r = smtlab_fixtures::remote_web_run();
    assert_eq!(r.cells.len(), 8);
    for c in &r.cells {
        let a = remote_clients(c).unwrap_or_else(|| panic!("no agents: {}", c.benchmark));
        assert_eq!(a.agents.len(), 2);
        let share: f64 = a.agents.iter().map(|x| x.share).sum();
        assert!((share - 1.0).abs() < 1e-9, "{share}");
        // Each agent's requests/s is the mean of its samples' figure.
        let k = m::agent_requests_per_s(1);
        let xs: Vec<f64> = c.result.samples.iter().map(|s| s.metrics[&k]).collect();
        let mean = xs.iter().sum::<f64>() / xs.len() as f64;
        assert!((a.agents[1].requests_per_s - mean).abs() < 1e-9 * mean);
        // The widest spread of the samples.
        let widest = c
            .result
            .samples
            .iter()
            .map(|s| s.metrics[m::AGENTS_START_SPREAD_NS])
            .fold(0.0, f64::max);
        assert_eq!(a.start_spread_max_ns, widest);
    }
}

#[test]
fn a_local_cell_has_no_agents_line_or_table() {
    let mut r = smtlab_fixtures::remote_web_run();
    for c in &mut r.cells {
        for s in &mut c.result.samples {
            s.metrics.retain(|k, _| !k.starts_with("agent"));
        }
    }
    assert!(r.cells.iter().all(|c| remote_clients(c).is_none()));
    let page = smtlab_report::html(&r);
    assert!(!web_section(&page).contains("Remote load clients"));
}

#[test]
fn agents_line_and_html_table_snapshots() {
    let r = smtlab_fixtures::remote_web_run();
    let lines: Vec<String> = r
        .cells
        .iter()
        .map(|c| {
            format!(
                "{} {} {}: {}",
                c.benchmark,
                c.params["server"],
                c.placement.name,
                line(&remote_clients(c).unwrap())
            )
        })
        .collect();
    insta::assert_snapshot!("agents_lines", lines.join("\n"));
    let page = smtlab_report::html(&r);
    let web = web_section(&page);
    let table = &web[web
        .find("<h3>Remote load clients</h3>")
        .expect("the agents table")..];
    let table = &table[..table.find("</table>").unwrap() + "</table>".len()];
    // A row per agent of every cell.
    assert_eq!(table.matches("<tr>").count(), 1 + 2 * r.cells.len());
    insta::assert_snapshot!("html_agents_table", table);
}

/// Agent 0 lost after the first sample: the one left is agent 0 of the samples after,
/// so the figures are those samples' alone and the line says so.
#[test]
fn after_a_lost_agent_the_figures_are_the_agents_left_since_the_loss() {
    let r = smtlab_fixtures::remote_web_run();
    let mut c = r.cells[0].clone();
    let first = c.result.samples[0].metrics.clone();
    let left_rps = first[&m::agent_requests_per_s(1)];
    for s in c.result.samples.iter_mut().skip(1) {
        s.metrics.retain(|k, _| !k.starts_with("agent"));
        s.metrics.insert(m::AGENTS.into(), 1.0);
        s.metrics.insert(m::AGENTS_LOST.into(), 1.0);
        s.metrics.insert(m::AGENTS_START_SPREAD_NS.into(), 0.0);
        s.metrics.insert(m::agent_requests_per_s(0), 2.0 * left_rps);
    }
    let since = c.result.samples.len() - 1;
    let a = remote_clients(&c).unwrap();
    assert_eq!((a.agents.len(), a.lost, a.samples), (1, 1, since));
    assert_eq!(a.agents[0].requests_per_s, 2.0 * left_rps);
    assert_eq!(a.agents[0].share, 1.0);
    let l = line(&a);
    assert!(
        l.starts_with(&format!(
            "1 agent left (1 lost; figures from the {since} samples since)"
        )),
        "{l}"
    );
}
