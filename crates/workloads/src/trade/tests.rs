use super::*;
use crate::db::testutil;
use smtlab_model::metrics::web as m;

fn params(extra: &[(&str, &str)]) -> smtlab_bench::Params {
    let given: Vec<String> = extra.iter().map(|(k, v)| format!("{k}={v}")).collect();
    smtlab_bench::Params::resolve(&AppTrade.info(), &given, true).unwrap()
}

fn installed() -> Option<PgInstall> {
    match PgInstall::find() {
        Ok(i) => Some(i),
        Err(e) => {
            smtlab_fixtures::require::skip(&e.to_string());
            None
        }
    }
}

fn small_settings() -> PgSettings {
    PgSettings {
        port: 0,
        shared_buffers_bytes: 16 << 20,
        max_connections: 20,
        fsync: false,
        synchronous_commit: false,
        extra: vec![],
    }
}

#[test]
fn parameters_are_checked_with_one_line_errors() {
    let c = Config::from_params(&params(&[])).unwrap();
    assert_eq!(c.server, Server::Builtin);
    assert!(c.db_same);
    assert_eq!((c.users, c.symbols, c.conns), (20, 40, 8));
    for (k, v, want) in [
        ("server", "tomcat", "builtin or cmd"),
        ("db", "remote", "same or apart"),
        ("users", "0", "1 to"),
        ("symbols", "3", "4 to"),
        ("conns", "0", "1 to"),
        ("pool", "0", "1 to"),
        ("port", "70000", "TCP port"),
    ] {
        let extra: Vec<(&str, &str)> = if k == "port" {
            vec![("server", "cmd"), (k, v)]
        } else {
            vec![(k, v)]
        };
        let e = Config::from_params(&params(&extra))
            .unwrap_err()
            .to_string();
        assert!(e.contains(k) && e.contains(want), "{k}={v}: {e}");
        assert!(!e.contains('\n'), "{e}");
    }
}

/// The application on its own: pinned threads, the routes' answers and failures, and
/// the books: exactly one order per buy or sell that sold something, and the audit
/// catches a book broken behind the application's back.
#[test]
fn the_application_answers_its_routes_and_keeps_the_books() {
    let Some(install) = installed() else { return };
    let pg = PgServer::start(&install, &small_settings(), None).unwrap();
    let db = db_config(pg.port());
    let scale = Scale::new(5, 8).unwrap();
    smtlab_trade::db::setup_blocking(&db, scale).unwrap();
    let cpu = testutil::placement_first_cpu().cpus[0];
    let server = TradeServer::start(&ServerConfig {
        listen: ([127, 0, 0, 1], 0).into(),
        cpus: vec![cpu],
        workers: 0,
        pool_size: 2,
        db: db.clone(),
    })
    .unwrap();
    assert_eq!(server.workers(), 1);
    let tids = server.thread_ids();
    assert!(!tids.is_empty());
    for t in tids {
        let set = smtlab_placement::pin::get_affinity(t).unwrap();
        assert_eq!(set.iter().collect::<Vec<_>>(), [cpu], "thread {t}");
    }
    let addr = server.addr();
    let sessions = login_all(addr, scale.users).unwrap();
    assert_eq!(sessions.len(), 5);
    assert_ne!(sessions[0], sessions[1]);
    let call =
        |method: &str, path: &str, s: Option<&str>| http_call(addr, method, path, s).unwrap();
    // Failures are HTTP errors, never pages.
    assert_eq!(call("GET", "/quote?s=s:1", None).0, 401);
    assert_eq!(call("GET", "/home", Some("forged")).0, 401);
    let s0 = Some(sessions[0].as_str());
    assert_eq!(call("GET", "/quote?s=nope", s0).0, 404);
    assert_eq!(call("POST", "/buy?s=s:0&q=0", s0).0, 400);
    assert_eq!(call("POST", "/login?uid=99", None).0, 404);
    let (st, body) = call("GET", "/quote?s=s:1", s0);
    assert_eq!(st, 200, "{body}");
    let q: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(q["symbol"], "s:1");
    let (st, page) = call("GET", "/portfolio", s0);
    assert_eq!(st, 200);
    // User 0 opens with s:0..s:3.
    for sym in ["s:0", "s:1", "s:2", "s:3"] {
        assert!(page.contains(&format!("<td>{sym}</td>")), "{page}");
    }
    assert!(call("GET", "/home", s0).1.contains("Welcome, user 0"));
    // Orders: every OK buy writes one; a sell writes one when it sold shares.
    let mut orders_answered = 0u64;
    for i in 0..30u32 {
        let user = (i % 5) as usize;
        let sym = scale.user_symbol(user as u32, i);
        let path = if i % 3 == 0 {
            format!("/sell?s={sym}&q=40")
        } else {
            format!("/buy?s={sym}&q={}", 1 + i % 4)
        };
        let (st, body) = call("POST", &path, Some(&sessions[user]));
        assert_eq!(st, 200, "{path}: {body}");
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        if !v["order"].is_null() {
            orders_answered += 1;
        }
    }
    // Selling more than is held sells what is held, then nothing.
    for _ in 0..6 {
        let (st, body) = call("POST", "/sell?s=s:0&q=1000", s0);
        assert_eq!(st, 200);
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        if !v["order"].is_null() {
            orders_answered += 1;
        }
    }
    let (_, last) = call("POST", "/sell?s=s:0&q=1", s0);
    assert!(last.contains("\"quantity\":0"), "{last}");
    let audit = smtlab_trade::db::audit_blocking(&db).unwrap();
    assert_eq!(audit.problem(), None);
    assert_eq!(audit.orders, orders_answered);
    assert_eq!(audit.buys + audit.sells, audit.orders);
    assert!(audit.buys >= 20 && audit.sells >= 1, "{audit:?}");
    assert_eq!(audit.accounts, 5);
    drop(server);
    assert!(
        TcpStream::connect(addr).is_err(),
        "the application still listens"
    );
    // A book broken behind the application's back fails the audit, each way.
    smtlab_trade::db::execute_blocking(
        &db,
        "UPDATE account SET cash_cents = cash_cents + 1 WHERE id = 2",
    )
    .unwrap();
    let p = smtlab_trade::db::audit_blocking(&db)
        .unwrap()
        .problem()
        .unwrap();
    assert!(p.contains("1 of 5 accounts' cash"), "{p}");
    smtlab_trade::db::execute_blocking(
        &db,
        "UPDATE account SET cash_cents = cash_cents - 1 WHERE id = 2; \
         INSERT INTO orders (account_id, symbol, kind, quantity, price_cents) VALUES (3, 's:7', 'b', 1, 0)",
    )
    .unwrap();
    let a = smtlab_trade::db::audit_blocking(&db).unwrap();
    let p = a.problem().unwrap();
    assert!(p.contains("holdings") && p.contains("volume"), "{p}");
    assert_eq!(a.bad_cash, 0);
}

fn run_quick_cell(given: &[(&str, &str)]) {
    let placement = testutil::placement_first_cpu();
    let client = testutil::client();
    let mut inst = testutil::prepare(&AppTrade, given, &placement, Some(&client)).unwrap();
    assert_eq!(inst.fixed_iterations(), Some(1));
    let mut total_orders = 0.0;
    let mut ports = (0, 0);
    for _ in 0..2 {
        let s = inst.sample(1).unwrap();
        let m = &s.metrics;
        let tps = s.work / (s.elapsed_ns as f64 / 1e9);
        assert!(tps > 0.0);
        assert!((m[keys::TRANSACTIONS_PER_S] - tps).abs() <= tps * 1e-9);
        assert!(m[m::LATENCY_P50_NS] > 0.0 && m[m::LATENCY_P50_NS] <= m[m::LATENCY_P99_NS]);
        // About 16% of transactions are orders; a sample has some.
        assert!(m[keys::ORDERS_IN_SAMPLE] > 0.0, "{m:?}");
        assert!(m[keys::ORDERS_IN_SAMPLE] < s.work * 2.0);
        assert!(
            m[keys::APP_CPU_NS_PER_TX] > 0.0 && m[keys::DB_CPU_NS_PER_TX] > 0.0,
            "{m:?}"
        );
        assert!(s.cpu_ns.unwrap() > 0);
        total_orders += m[keys::ORDERS_IN_SAMPLE];
        assert_eq!(m[keys::ORDERS_TOTAL], total_orders);
        assert_eq!(m[keys::ACCOUNTS_AUDITED], 20.0);
        ports = (m[keys::APP_PORT] as u16, m[keys::DB_PORT] as u16);
    }
    drop(inst);
    // Neither the application nor the database listens any more. (Other tests of this
    // process start servers at the same time, so their directories are not counted.)
    for port in [ports.0, ports.1] {
        assert!(
            TcpStream::connect(("127.0.0.1", port)).is_err(),
            "port {port}"
        );
    }
}

#[test]
fn a_quick_cell_runs_audited_with_the_database_beside_the_application() {
    if installed().is_none() {
        return;
    }
    run_quick_cell(&[("duration", "400ms")]);
}

#[test]
fn a_quick_cell_runs_audited_with_the_database_apart() {
    if installed().is_none() {
        return;
    }
    run_quick_cell(&[("duration", "400ms"), ("db", "apart")]);
}

#[test]
fn without_a_client_side_the_cell_is_refused_in_one_line() {
    let placement = testutil::placement_first_cpu();
    let e = testutil::prepare(&AppTrade, &[], &placement, None)
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("client side") && !e.contains('\n'), "{e}");
}

#[test]
fn a_cmd_without_a_command_or_port_is_refused_in_one_line() {
    let placement = testutil::placement_first_cpu();
    let client = testutil::client();
    let e = testutil::prepare(&AppTrade, &[("server", "cmd")], &placement, Some(&client))
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("--param cmd=") && !e.contains('\n'), "{e}");
    let e = testutil::prepare(
        &AppTrade,
        &[("server", "cmd"), ("cmd", "my-app --db {db}")],
        &placement,
        Some(&client),
    )
    .err()
    .unwrap()
    .to_string();
    assert!(e.contains("{port}") && !e.contains('\n'), "{e}");
}
