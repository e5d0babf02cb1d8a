//! The workload sections of the HTML page, from hand-built workload cells.

mod common;

use common::{run, workload_cells, workloads_demo};
use quick_xml::Reader;
use quick_xml::events::Event;

const IDS: [&str; 6] = [
    "workload-smt",
    "web",
    "workload-tables",
    "aim",
    "task-pool",
    "oltp",
];

/// The markup of one section (sections do not nest).
fn section<'a>(page: &'a str, id: &str) -> &'a str {
    let start = page
        .find(&format!("<section id=\"{id}\">"))
        .unwrap_or_else(|| panic!("no section {id}"));
    let end = page[start..].find("</section>").unwrap() + start;
    &page[start..end]
}

fn assert_well_formed(page: &str) {
    let mut reader = Reader::from_str(page);
    loop {
        match reader.read_event() {
            Ok(Event::Eof) => break,
            Ok(_) => {}
            Err(e) => panic!("not well-formed at byte {}: {e}", reader.buffer_position()),
        }
    }
}

#[test]
fn workload_sections_snapshots() {
    let page = smtlab_report::html(&workloads_demo());
    assert_well_formed(&page);
    for id in IDS {
        insta::assert_snapshot!(format!("html_workloads_{id}"), section(&page, id));
    }
}

#[test]
fn workload_speedups_are_the_one_speedup() {
    let r = workloads_demo();
    let page = smtlab_report::html(&r);
    let tables = section(&page, "workload-tables");
    // Every 1c2t/1c1t speed-up of a table row is the model's, written as fmt writes it.
    for c in r.cells.iter().filter(|c| c.benchmark == "tbench") {
        if c.placement.name != "1c1t" {
            continue;
        }
        let smt = r
            .cells
            .iter()
            .find(|d| {
                d.benchmark == c.benchmark && d.params == c.params && d.placement.name == "1c2t"
            })
            .unwrap();
        let ratio =
            smtlab_model::stats::speedup(&c.result.summary, &smt.result.summary, c.direction)
                .unwrap();
        let text = smtlab_report::fmt::ratio_ci(ratio.ratio, ratio.ci95_low, ratio.ci95_high);
        let head = text.split(" [").next().unwrap();
        assert!(tables.contains(&format!("{head}<br/>")), "{text}");
    }
    assert!(tables.contains("geometric mean of the speed-ups"));
    // Web: both pairs per server, and the refused cell's errors.
    let web = section(&page, "web");
    assert!(web.contains("1c2t/1c1t") && web.contains("2c2t/2c1t"));
    assert!(web.contains("3 requests failed"));
    assert!(web.contains("Conformance curve"));
    assert!(!web.contains("No SMT speed-ups"));
}

#[test]
fn a_run_without_1c2t_says_once_per_section_why_there_are_no_speedups() {
    let r = run(workload_cells(&["1c1t", "2c1t"]), vec![]);
    let page = smtlab_report::html(&r);
    assert_well_formed(&page);
    for id in IDS {
        let s = section(&page, id);
        assert_eq!(s.matches("No SMT speed-ups").count(), 1, "section {id}");
        assert!(
            !s.contains("speed-up<br/>"),
            "section {id} has a speed-up column"
        );
    }
    // Chart 1 draws no bars, the tables still show the values per placement.
    assert!(!section(&page, "workload-smt").contains("<svg"));
    let tables = section(&page, "workload-tables");
    assert!(tables.contains("<th>1c1t<br/>") && tables.contains("<th>2c1t<br/>"));
    assert!(section(&page, "web").contains("none of these cells was measured on both"));
}

#[test]
fn a_run_without_workloads_has_no_workload_section_and_no_mention() {
    let page = smtlab_report::html(&common::demo());
    for id in IDS {
        assert!(!page.contains(&format!("<section id=\"{id}\">")), "{id}");
    }
    assert!(!page.contains("Web servers"));
}

#[test]
fn workload_page_is_self_contained() {
    let page = smtlab_report::html(&workloads_demo());
    let stripped = page.replace("xmlns=\"http://www.w3.org/2000/svg\"", "");
    for bad in [
        "http://", "https://", "@import", "url(", "<script", "<link", "<img",
    ] {
        assert!(!stripped.contains(bad), "external reference: {bad}");
    }
}

/// `cargo test -p smtlab-report --test workloads -- --ignored` writes the workload demo
/// page to `target/smtlab-report-workloads.html` for a look in a browser.
#[test]
#[ignore]
fn write_workloads_demo_page() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target");
    let path = dir.join("smtlab-report-workloads.html");
    std::fs::write(&path, smtlab_report::html(&workloads_demo())).unwrap();
}

#[test]
fn text_summary_lists_the_recorded_figures() {
    let table = smtlab_report::html_workloads::text_summary(&workloads_demo()).unwrap();
    let t = table.render();
    // At 80 columns the figures stay whole; long parameters are cut on their own line.
    let narrow = table.render_to(smtlab_report::table::Layout::fixed(80));
    assert!(narrow.lines().all(|l| l.chars().count() <= 80), "{narrow}");
    assert!(narrow.contains("errors 0"), "{narrow}");
    assert!(t.contains("web-static") && t.contains("req/s") && t.contains("errors 0"));
    assert!(t.contains("CAS retries/task") && t.contains("server CPU/tx"));
    assert!(smtlab_report::html_workloads::text_summary(&common::demo()).is_none());
}

/// `r` with benchmark `from` called `to` in its cells, skipped cells and plan, and (when
/// `in_catalog`) in its catalog entries too.
fn renamed(
    mut r: smtlab_model::RunResults,
    from: &str,
    to: &str,
    in_catalog: bool,
) -> smtlab_model::RunResults {
    for c in r.cells.iter_mut().filter(|c| c.benchmark == from) {
        c.benchmark = to.into();
    }
    for s in r.skipped.iter_mut().filter(|s| s.key.benchmark == from) {
        s.key.benchmark = to.into();
    }
    for k in r.run.plan.iter_mut().filter(|k| k.benchmark == from) {
        k.benchmark = to.into();
    }
    r.benchmarks.retain(|b| b.name != from);
    if in_catalog {
        let mut entry = common::catalog()
            .into_iter()
            .find(|b| b.name == from)
            .unwrap();
        entry.name = to.into();
        r.benchmarks.push(entry);
    }
    r
}

#[test]
fn a_renamed_benchmark_keeps_its_section_by_its_catalog_entry() {
    let r = workloads_demo();
    let r = renamed(r, "web-static", "http-files", true);
    let r = renamed(r, "dbench", "fileserver", true);
    let r = renamed(r, "task-pool", "work-queue", true);
    let r = renamed(r, "sdet", "shell-users", true);
    let page = smtlab_report::html(&r);
    assert_well_formed(&page);
    let web = section(&page, "web");
    assert!(web.contains("Static load (http-files)"), "{web}");
    // The failed web cell is still listed under the web section by its entry.
    assert!(web.contains("apache-prefork"), "{web}");
    let tables = section(&page, "workload-tables");
    assert!(tables.contains("<h3>fileserver "), "{tables}");
    // The main parameter comes with the entry: dbench's rows are read by `clients`.
    let block = &tables[tables.find("<h3>fileserver ").unwrap()..];
    assert!(block.contains("clients"), "{block}");
    let pool = section(&page, "task-pool");
    assert!(pool.matches("<tr>").count() > 2, "{pool}");
    assert!(section(&page, "oltp").contains("shell-users"));
    // Chart 1 still has a bar per renamed workload.
    assert!(section(&page, "workload-smt").contains("http-files"));
    assert!(!page.contains("no catalog entry"));
}

#[test]
fn a_benchmark_the_catalog_does_not_know_is_named_not_dropped_silently() {
    let r = renamed(workloads_demo(), "tbench", "tbench2", false);
    let page = smtlab_report::html(&r);
    // Its section no longer holds it, and the page says why under the header.
    assert!(!section(&page, "workload-tables").contains("tbench2"));
    let absent = &page[page.find("id=\"absent\"").unwrap()..];
    let absent = &absent[..absent.find("</details>").unwrap()];
    assert!(
        absent.contains("no catalog entry for tbench2 in these results"),
        "{absent}"
    );
    // Results read without any catalog say so too.
    let mut bare = workloads_demo();
    bare.benchmarks.clear();
    let page = smtlab_report::html(&bare);
    assert!(page.contains("no catalog entry for web-static, web-capacity"));
    assert!(!page.contains("<section id=\"web\">"));
}

#[test]
fn a_renamed_os_benchmark_keeps_its_paper_row_and_missing_rows_are_named() {
    let r = renamed(common::demo(), "fork-sh", "spawn-shell", true);
    let page = smtlab_report::html(&r);
    let os = section(&page, "os-latency");
    // The paper's label comes with the entry, and the row keeps the paper's place: last.
    assert!(os.contains("Process fork+/bin/sh -c <span class=\"sub\">spawn-shell</span>"));
    let last_row = &os[os.rfind("<tr>").unwrap()..];
    assert!(last_row.contains("spawn-shell"), "{last_row}");
    // A run of one row of the table names the rows it did not measure, from the entries.
    let one: Vec<_> = common::demo()
        .cells
        .into_iter()
        .filter(|c| c.benchmark == "read")
        .collect();
    let page = smtlab_report::html(&run(one, vec![]));
    let os = section(&page, "os-latency");
    assert!(
        os.contains("not measured in this run: Simple syscall, Simple write"),
        "{os}"
    );
    assert!(os.contains("Process fork+/bin/sh -c."), "{os}");
}

#[test]
fn the_aim_rows_follow_paper_001_table_2_and_name_the_rows_left_out() {
    let page = smtlab_report::html(&workloads_demo());
    let aim = section(&page, "aim");
    // AIM9's names and units, in the paper's order whatever the run's order was.
    let at = |s: &str| aim.find(s).unwrap_or_else(|| panic!("{s} missing: {aim}"));
    let rd = at("disk_rd: Sequential Disk Reads (K) per second (aim-disk-rd)");
    let sieve = at("sieve: Integer Sieves per second (aim-sieve)");
    let fifo = at("fifo_test: FIFO Messages per second (aim-fifo)");
    assert!(rd < sieve && sieve < fifo, "{aim}");
    // A skipped row says why; a row the run did not ask for is named.
    assert!(
        aim.contains("jmp_test (aim-jmp): no unwinding in this build"),
        "{aim}"
    );
    assert!(
        aim.contains("not measured in this run: add_double."),
        "{aim}"
    );
}

#[test]
fn chat_shows_the_shape_of_its_loads_as_paper_001_table_3() {
    let page = smtlab_report::html(&workloads_demo());
    let at = page
        .find("paper 001 Table 3), as measured")
        .expect("the shape table");
    let table = &page[at..at + page[at..].find("</table>").unwrap()];
    for h in [
        "chat rooms",
        "connections",
        "threads",
        "messages sent",
        "messages received",
    ] {
        assert!(table.contains(h), "{h}: {table}");
    }
    // Rooms 2, 5 and 10 of 20 users, 100 messages each: one row per load.
    assert_eq!(table.matches("<tr>").count(), 4, "{table}");
    assert!(
        table.contains(">40<") && table.contains(">4000<"),
        "{table}"
    );
}

#[test]
fn paper_000_figures_show_the_copying_server_beside_the_others() {
    // web-static as paper 000 ran it: every built-in and real server on each placement.
    let base: Vec<_> = workload_cells(&["1c1t", "1c2t", "2c1t", "2c2t"])
        .into_iter()
        .filter(|c| c.benchmark == "web-static")
        .collect();
    let servers = [
        "event",
        "threads",
        "processes",
        "seda",
        "nginx",
        "apache-prefork",
    ];
    let mut cells = Vec::new();
    for server in servers {
        for c in base.iter().filter(|c| c.params["server"] == "event") {
            let mut c = c.clone();
            c.params.insert("server".into(), server.into());
            cells.push(c);
        }
    }
    let page = smtlab_report::html(&run(cells, Vec::new()));
    assert_well_formed(&page);
    let web = section(&page, "web");
    for server in servers {
        for place in ["1c1t", "1c2t", "2c2t"] {
            assert!(
                web.contains(&format!("{server} {place}"))
                    || web.contains(&format!("{server}, {place}")),
                "no {server} on {place} in the web figures"
            );
        }
    }
}

/// A cell with a peak search's load points (`nfs-sfs search=peak`) gets its curve as a
/// table in its section; the other cells get none.
#[test]
fn a_peak_search_shows_its_load_points_in_its_section() {
    use smtlab_model::metrics::nfs::{self as keys, PointField};
    let mut r = workloads_demo();
    assert!(!section(&smtlab_report::html(&r), "oltp").contains("Load points"));
    let cell = r
        .cells
        .iter_mut()
        .find(|c| c.benchmark == "sdet")
        .expect("an OLTP-section cell");
    for s in &mut cell.result.samples {
        for (i, (req, ach)) in [(1000.0, 990.0), (2000.0, 1713.0)].into_iter().enumerate() {
            for (f, v) in [
                (PointField::RequestedOpsPerS, req),
                (PointField::AchievedOpsPerS, ach),
                (PointField::MeanResponseMs, 0.5),
                (PointField::P99ResponseMs, 2.5),
                (PointField::KeptUp, f64::from(u8::from(i == 0))),
                (PointField::WithinLimit, 1.0),
            ] {
                s.metrics.insert(keys::point_key(i, f), v);
            }
        }
        s.metrics.insert(keys::PEAK_POINT.into(), 1.0);
        s.metrics.insert(keys::LIMIT_MS.into(), 40.0);
    }
    let page = smtlab_report::html(&r);
    assert_well_formed(&page);
    let oltp = section(&page, "oltp");
    assert!(oltp.contains("Load points of the peak searches"), "{oltp}");
    assert!(
        oltp.contains("<td class=\"num\">1713 (behind in 5)</td>"),
        "{oltp}"
    );
    assert!(oltp.contains("within the limit (40.00 ms)"), "{oltp}");
}

#[test]
fn a_parameter_value_that_departs_from_the_origin_is_said_by_the_catalog_entry() {
    // Whatever the benchmark is called: the entry's parameter says which value departs.
    let mut r = renamed(workloads_demo(), "sdet", "shell-users", true);
    let note = |r: &smtlab_model::RunResults| {
        section(&smtlab_report::html(r), "oltp").contains("mode=toy: not the measured one")
    };
    let entry = r
        .benchmarks
        .iter_mut()
        .find(|b| b.name == "shell-users")
        .unwrap();
    entry.params.push(smtlab_model::ParamInfo {
        departs: vec![smtlab_model::Departure {
            value: "toy".into(),
            note: "not the measured one".into(),
        }],
        name: "mode".into(),
        default: "real".into(),
        quick: None,
        help: "real or toy".into(),
    });
    assert!(!note(&r), "no cell ran with mode=toy");
    for c in r.cells.iter_mut().filter(|c| c.benchmark == "shell-users") {
        c.params.insert("mode".into(), "toy".into());
    }
    assert!(note(&r));
}
