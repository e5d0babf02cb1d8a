//! The client side against user-space NFSv3 servers (`nfs3_server`'s in-memory file
//! system, and `server=user`'s directory on disk): the mix, the latencies by operation
//! and the content checks run here, where the kernel has no nfsd. The kernel server's
//! path is tested only for its refusal here (see `kernel::tests`).

use super::*;
use crate::db::testutil;
use nfs3_server::memfs::{MemFs, MemFsConfig};
use nfs3_server::tcp::{NFSTcp, NFSTcpListener};
use sfs::Op;

/// Held by the tests that start `server=user` servers: one counts the server threads
/// of its process, which another's would add to.
static USER_SERVERS: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_user_server_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    USER_SERVERS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A user-space NFS server on 127.0.0.1 for the test's lifetime.
struct TestServer {
    port: u16,
    _stop: std::sync::mpsc::Sender<()>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl TestServer {
    fn start() -> TestServer {
        let (port_tx, port_rx) = std::sync::mpsc::channel();
        let (stop_tx, stop_rx) = std::sync::mpsc::channel::<()>();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let fs = MemFs::new(MemFsConfig::default()).unwrap();
                let l = NFSTcpListener::bind("127.0.0.1:0", fs).await.unwrap();
                port_tx.send(l.get_listen_port()).unwrap();
                let serve = tokio::spawn(async move {
                    let _ = l.handle_forever().await;
                });
                let _ = tokio::task::spawn_blocking(move || stop_rx.recv()).await;
                serve.abort();
            });
            rt.shutdown_timeout(Duration::from_secs(1));
        });
        TestServer {
            port: smtlab_fixtures::bounded::recv(&port_rx, "the test server's port"),
            _stop: stop_tx,
            thread: Some(thread),
        }
    }

    fn target(&self) -> Target {
        Target {
            ip: IpAddr::V4(Ipv4Addr::LOCALHOST),
            portmap_port: self.port,
            mount_port: Some(self.port),
            nfs_port: Some(self.port),
            export: "/".into(),
            privileged: false,
            transport: Transport::Tcp,
        }
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        let (tx, _) = std::sync::mpsc::channel();
        self._stop = tx;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// An in-memory server, client threads and the file set made on it.
struct Loaded {
    // Held until the test ends: dropping them stops the server and the client side.
    _server: TestServer,
    _client: ClientSide,
    sh: Shape,
    clients: Clients,
    target: Target,
    handles: Arc<Handles>,
}

fn loaded(sh: Shape) -> Loaded {
    let server = TestServer::start();
    let client = testutil::client();
    let clients = start_clients(&client, sh.clients, None).unwrap();
    let target = server.target();
    let handles = Arc::new(setup_on(&clients, &target, sh).unwrap());
    Loaded {
        _server: server,
        _client: client,
        sh,
        clients,
        target,
        handles,
    }
}

fn shape(clients: u32) -> Shape {
    Shape {
        clients,
        dirs: 2,
        files_per_dir: 3,
        file_bytes: 20_000,
    }
}

#[test]
fn parameters_are_checked_with_one_line_errors() {
    let info = NfsSfs.info();
    let resolve = |extra: &[(&str, &str)]| {
        let given: Vec<String> = extra.iter().map(|(k, v)| format!("{k}={v}")).collect();
        smtlab_bench::Params::resolve(&info, &given, true).unwrap()
    };
    let c = Config::from_params(&resolve(&[])).unwrap();
    assert_eq!(c.shape.clients, 2);
    assert_eq!(c.limit, Duration::from_millis(40));
    // Unset, a cell runs as before these parameters existed: back to back, no search.
    assert_eq!((c.rate, c.search), (None, Search::Off));
    let c = Config::from_params(&resolve(&[("rate", "1500"), ("points", "4")])).unwrap();
    assert_eq!((c.rate, c.points), (Some(1500.0), 4));
    assert!(!c.udp);
    let c = Config::from_params(&resolve(&[("server", "kernel"), ("transport", "udp")])).unwrap();
    assert!(c.udp && c.server == ServerKind::Kernel);
    for (k, v, want) in [
        ("clients", "0", "1 to"),
        ("files", "0", "1 to"),
        ("file_size", "0", "1 byte to"),
        ("nfsd_threads", "0", "1 to"),
        ("server", "nfsd", "kernel or user"),
        ("rate", "-1", "operations per second above 0"),
        ("rate", "0", "operations per second above 0"),
        ("rate", "fast", "operations per second above 0"),
        ("points", "0", "1 to 20"),
        ("points", "21", "1 to 20"),
        ("search", "x", "off or peak"),
        ("transport", "sctp", "tcp or udp"),
    ] {
        let e = Config::from_params(&resolve(&[(k, v)]))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(k) && e.contains(want) && !e.contains('\n'),
            "{e}"
        );
    }
    // A search chooses its own rates, and each of its loads needs time to measure.
    for (given, k, want) in [
        (
            &[("search", "peak"), ("rate", "100")][..],
            "rate",
            "empty with search=peak",
        ),
        (
            &[("search", "peak"), ("points", "20"), ("duration", "500ms")][..],
            "duration",
            "at least 1050 ms",
        ),
        // The quick form's server (user) speaks TCP only.
        (
            &[("transport", "udp")][..],
            "transport",
            "udp needs server=kernel",
        ),
    ] {
        let e = Config::from_params(&resolve(given))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(&format!("parameter {k}=")) && e.contains(want) && !e.contains('\n'),
            "{e}"
        );
    }
}

fn point(requested: f64, achieved: f64, mean_ms: f64) -> Point {
    Point {
        requested_ops_per_s: requested,
        achieved_ops_per_s: achieved,
        mean_response_ms: mean_ms,
        p99_response_ms: mean_ms * 3.0,
    }
}

#[test]
fn the_peak_is_the_highest_achieved_rate_within_the_limit() {
    let limit = Duration::from_millis(10);
    let curve = [
        point(100.0, 100.0, 1.0),
        point(200.0, 199.0, 2.0),
        point(300.0, 290.0, 9.5),
        // The most achieved, but over the limit: not chosen.
        point(400.0, 320.0, 12.0),
    ];
    assert_eq!(choose_peak(&curve, limit), Ok(2));
    // At exactly the limit a point is within it.
    assert_eq!(choose_peak(&curve, Duration::from_millis(12)), Ok(3));
    // A later point achieving less than an earlier one (past the knee) is not chosen.
    let past_knee = [
        point(100.0, 100.0, 1.0),
        point(200.0, 180.0, 3.0),
        point(300.0, 150.0, 4.0),
    ];
    assert_eq!(choose_peak(&past_knee, limit), Ok(1));
    assert!(curve[1].kept_up() && !curve[3].kept_up());
}

#[test]
fn no_point_within_the_limit_fails_with_one_line_and_both_figures() {
    let curve = [point(100.0, 98.0, 41.5), point(200.0, 150.0, 60.0)];
    let e = choose_peak(&curve, Duration::from_millis(40))
        .unwrap_err()
        .to_string();
    assert!(!e.contains('\n'), "{e}");
    // The closest point's mean response and the limit, and its rates.
    assert!(
        e.contains("41.50 ms") && e.contains("the 40ms limit"),
        "{e}"
    );
    assert!(e.contains("98 of 100 requested ops/s"), "{e}");
    assert_eq!(
        choose_peak(&[], Duration::from_millis(40)),
        Err(NoPeak::Empty)
    );
}

/// Paced loads against a quick in-memory server: a rate well under its capacity is
/// achieved (within 10%), and one far above it is not kept up, the clients dropping
/// the slots they missed rather than sending more than one operation at a time.
#[test]
fn a_paced_load_achieves_its_requested_rate_and_shows_when_it_cannot() {
    let Loaded {
        _server,
        _client,
        sh,
        clients,
        target,
        handles,
    } = loaded(shape(2));
    let load =
        |seed: u64, rate: Option<f64>| clean_load(&clients, &target, &handles, sh, 600, seed, rate);
    let closed = load(10, None);
    let capacity = closed.ops_per_s();
    assert!(capacity > 100.0, "{capacity} ops/s back to back");
    assert_eq!(closed.missed, 0);
    let requested = (capacity / 4.0).min(2000.0);
    let paced = load(11, Some(requested));
    let got = paced.ops_per_s();
    assert!(
        (got - requested).abs() <= 0.1 * requested,
        "{got:.0} ops/s achieved of {requested:.0} requested (closed loop {capacity:.0})"
    );
    assert!(Point::of(requested, &paced).kept_up());
    let over = 20.0 * capacity;
    let flooded = load(12, Some(over));
    let p = Point::of(over, &flooded);
    assert!(
        !p.kept_up() && p.achieved_ops_per_s < 0.5 * over,
        "{p:?} (closed loop {capacity:.0})"
    );
    assert!(flooded.missed > 0);
}

/// A peak search on the `server=user` cell: every point's figures are in the sample's
/// metrics, the value is the achieved rate of the best point within the limit, and
/// with a limit no point can meet the sample fails in one line.
#[test]
fn a_peak_search_reports_its_curve_and_the_best_point_within_the_limit() {
    use smtlab_model::metrics::nfs::{self as keys, PointField as F};
    let _one = one_user_server_at_a_time();
    let placement = testutil::placement_first_cpu();
    let client = testutil::client();
    let mut inst = testutil::prepare(
        &NfsSfs,
        &[
            ("server", "user"),
            ("search", "peak"),
            ("duration", "800ms"),
        ],
        &placement,
        Some(&client),
    )
    .unwrap();
    let s = inst.sample(1).unwrap();
    let m = &s.metrics;
    assert_eq!(m[keys::POINTS], 3.0, "the quick form's points");
    let value = s.work / (s.elapsed_ns as f64 / 1e9);
    let probe = m[keys::PROBE_OPS_PER_S];
    let mut best = None::<(usize, f64)>;
    for i in 0..3 {
        let get = |f| m[&keys::point_key(i, f)];
        // The points request rising shares of the probe's capacity.
        let want = probe * (i + 1) as f64 / 3.0;
        assert!((get(F::RequestedOpsPerS) - want).abs() < 1e-6 * want.max(1.0));
        assert!(get(F::AchievedOpsPerS) > 0.0);
        assert!(get(F::P99ResponseMs) >= get(F::MeanResponseMs) * 0.5);
        let within = get(F::MeanResponseMs) <= 40.0;
        assert_eq!(get(F::WithinLimit) == 1.0, within);
        if within && best.is_none_or(|(_, a)| get(F::AchievedOpsPerS) > a) {
            best = Some((i, get(F::AchievedOpsPerS)));
        }
    }
    let (i, achieved) = best.expect("a point within 40 ms on a quick server");
    assert_eq!(m[keys::PEAK_POINT], i as f64);
    assert!(
        (value - achieved).abs() < 1e-6 * achieved,
        "{value} vs {achieved}"
    );
    assert!((m["ops_per_s"] - value).abs() < 1e-6 * value);
    assert!(m["lookup_ops"] > 0.0, "latency by operation at the peak");
    assert!(s.cpu_ns.unwrap() > 0);
    drop(inst);
    let mut inst = testutil::prepare(
        &NfsSfs,
        &[
            ("server", "user"),
            ("search", "peak"),
            ("duration", "400ms"),
            ("limit", "1us"),
        ],
        &placement,
        Some(&client),
    )
    .unwrap();
    let e = inst.sample(1).unwrap_err().to_string();
    assert!(
        e.contains("no load point within the 0.001ms limit") && !e.contains('\n'),
        "{e}"
    );
}

#[test]
fn where_the_kernel_has_no_nfsd_the_cell_is_skipped_with_the_reason() {
    let Some(why) = kernel::why_not() else {
        // A machine that can serve: nothing to refuse here.
        return;
    };
    let placement = testutil::placement_first_cpu();
    let client = testutil::client();
    let e = testutil::prepare(&NfsSfs, &[("server", "kernel")], &placement, Some(&client))
        .err()
        .unwrap();
    assert!(matches!(e, BenchError::Unsupported { .. }), "{e}");
    let text = e.to_string();
    assert!(text.contains(&why) && !text.contains('\n'), "{text}");
    assert!(text.contains("server=user"), "{text}");
    // The plan knows it before the run: the cell is skipped there with the same reason.
    let planned = testutil::cost(&NfsSfs, &[("server", "kernel")], &placement).unwrap_err();
    assert_eq!(planned.to_string(), text);
    assert!(testutil::cost(&NfsSfs, &[("server", "user")], &placement).is_ok());
    let notes = NfsSfs.notes();
    assert_eq!(notes.len(), 1);
    assert!(
        notes[0].starts_with(&format!("{NAME}: {why}")) && notes[0].contains("server=user"),
        "{notes:?}"
    );
    // The user-space server is not refused for it.
    let _one = one_user_server_at_a_time();
    let mut inst = testutil::prepare(
        &NfsSfs,
        &[("server", "user"), ("duration", "200ms")],
        &placement,
        Some(&client),
    )
    .unwrap();
    assert!(inst.sample(1).unwrap().work > 0.0);
}

#[test]
fn the_mix_runs_against_a_user_space_server_with_every_answer_checked() {
    let Loaded {
        _server,
        _client,
        sh,
        clients,
        target,
        handles,
    } = loaded(shape(2));
    assert_eq!(handles.dirs.len(), 2);
    // A first load, as an earlier sample would be: the next must find its file set as
    // SFS's would (its removes have files to remove again).
    let first = clean_load(&clients, &target, &handles, sh, 700, 2, None);
    assert!(
        !first.latencies_ns[Op::Remove.index()].is_empty(),
        "no remove in the first load"
    );
    let r = clean_load(&clients, &target, &handles, sh, 700, 3, None);
    let ops = r.ops();
    assert!(ops > 100, "{ops} operations");
    // The mix: lookups are the most common operation, as SFS's 27% makes them.
    let lookups = r.latencies_ns[0].len() as f64 / ops as f64;
    assert!((0.17..0.38).contains(&lookups), "lookups {lookups}");
    let s = sample_from(&r, Duration::from_secs(1)).unwrap();
    let m = &s.metrics;
    assert!((m["ops_per_s"] - s.work / (s.elapsed_ns as f64 / 1e9)).abs() < 1e-6);
    assert!(m["lookup_ops"] > 0.0 && m["read_ops"] > 0.0 && m["readdirplus_ops"] > 0.0);
    assert!(m["lookup_p50_ms"] <= m["lookup_p99_ms"]);
    assert!(m["bytes_read"] > 0.0);
    // The same load judged against a limit it cannot meet fails with both figures.
    let e = sample_from(&r, Duration::from_nanos(1))
        .unwrap_err()
        .to_string();
    assert!(e.contains("over the") && e.contains("limit"), "{e}");
}

#[test]
fn a_file_whose_contents_changed_fails_the_sample() {
    let server = TestServer::start();
    let client = testutil::client();
    let sh = Shape {
        clients: 1,
        dirs: 1,
        files_per_dir: 1,
        file_bytes: 8192,
    };
    let clients = start_clients(&client, 1, None).unwrap();
    let target = server.target();
    let handles = Arc::new(setup_on(&clients, &target, sh).unwrap());
    // Overwrite the one file with zeros behind the load's back.
    let (t, file) = (target.clone(), handles.dirs[0].1[0].clone());
    let overwritten = clients.run_on(0, move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let mut c = Nfs3ConnectionBuilderForTest::connect(&t).await;
            let zeros = vec![0u8; 8192];
            let r = c
                .write(&nfs3_client::nfs3_types::nfs3::WRITE3args {
                    file,
                    offset: 0,
                    count: 8192,
                    stable: nfs3_client::nfs3_types::nfs3::stable_how::FILE_SYNC,
                    data: nfs3_client::nfs3_types::xdr_codec::Opaque::borrowed(&zeros),
                })
                .await
                .unwrap();
            assert!(matches!(
                r,
                nfs3_client::nfs3_types::nfs3::Nfs3Result::Ok(_)
            ));
        });
    });
    smtlab_fixtures::bounded::recv(&overwritten, "the overwrite");
    let r = run_load(
        &clients,
        &target,
        &handles,
        sh,
        Duration::from_millis(400),
        5,
        None,
    )
    .unwrap();
    assert!(r.content_mismatches > 0, "reads saw no change");
    let e = sample_from(&r, Duration::from_secs(1))
        .unwrap_err()
        .to_string();
    assert!(e.contains("did not match the file set"), "{e}");
}

/// A load on every client thread that must come back clean: no failed operation and
/// no wrong answer.
fn clean_load(
    clients: &Clients,
    target: &Target,
    handles: &Arc<Handles>,
    sh: Shape,
    ms: u64,
    seed: u64,
    rate: Option<f64>,
) -> LoadResult {
    let r = run_load(
        clients,
        target,
        handles,
        sh,
        Duration::from_millis(ms),
        seed,
        rate,
    )
    .unwrap();
    assert_eq!(r.errors, 0, "{:?}", r.first_error);
    assert_eq!(r.content_mismatches, 0);
    r
}

/// A raw NFSv3 connection for the test to change the file set with.
struct Nfs3ConnectionBuilderForTest;

impl Nfs3ConnectionBuilderForTest {
    async fn connect(
        t: &Target,
    ) -> nfs3_client::Nfs3Client<nfs3_client::tokio::TokioIo<tokio::net::TcpStream>> {
        nfs3_client::Nfs3ConnectionBuilder::new(
            nfs3_client::tokio::TokioConnector,
            t.ip.to_string(),
            t.export.clone(),
        )
        .connect_from_privileged_port(false)
        .mount_port(t.mount_port.unwrap())
        .nfs3_port(t.nfs_port.unwrap())
        .mount()
        .await
        .unwrap()
        .into_nfs3_client()
    }
}

/// The served path, where the kernel can serve (root, nfsd, nfs-kernel-server): a quick
/// cell runs, its reads checked, and afterwards none of its nfsd threads, daemons or
/// namespace is left. Where the kernel cannot (this project's machines), the refusal
/// is what `where_the_kernel_has_no_nfsd_the_cell_is_skipped_with_the_reason` tests.
#[test]
fn where_the_kernel_can_serve_a_quick_cell_runs_and_leaves_nothing() {
    if kernel::why_not().is_some() {
        return;
    }
    let placement = testutil::placement_first_cpu();
    let client = testutil::client();
    let mut inst = testutil::prepare(
        &NfsSfs,
        &[("server", "kernel"), ("duration", "300ms")],
        &placement,
        Some(&client),
    )
    .unwrap();
    let s = inst.sample(1).unwrap();
    assert!(s.work > 0.0 && s.metrics["content_mismatches"] == 0.0);
    assert!(s.metrics["server_threads"] >= 1.0 && s.metrics["user_space_server"] == 0.0);
    drop(inst);
    let left: Vec<String> = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let cmd = std::fs::read(e.path().join("cmdline")).ok()?;
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            cmd.contains("smtlab-nfs-").then_some(cmd)
        })
        .collect();
    assert!(left.is_empty(), "left running: {left:?}");
}

/// The user-space server's threads in this process (named by its runtime).
fn user_server_threads() -> Vec<(i32, smtlab_model::CpuSet)> {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let tid: i32 = e.file_name().to_str()?.parse().ok()?;
            let comm = std::fs::read_to_string(e.path().join("comm")).ok()?;
            (comm.trim() == "smtlab-nfsu")
                .then(|| (tid, smtlab_placement::pin::get_affinity(tid).unwrap()))
        })
        .collect()
}

/// `server=user`: the quick cell runs against the user-space server, every answer
/// checked, its threads (one per placement CPU) pinned to the placement; dropping the
/// cell leaves none of them. (Tests run in parallel: other tests' servers may be up
/// meanwhile, so the threads counted are the ones pinned to this placement and
/// named, and the ones after the drop only this cell's.)
#[test]
fn a_user_space_cell_runs_pinned_checked_and_leaves_nothing() {
    let _one = one_user_server_at_a_time();
    let placement = testutil::placement_first_cpu();
    let client = testutil::client();
    let before: Vec<i32> = user_server_threads().into_iter().map(|t| t.0).collect();
    let mut inst = testutil::prepare(
        &NfsSfs,
        &[("server", "user"), ("duration", "300ms")],
        &placement,
        Some(&client),
    )
    .unwrap();
    let mine: Vec<(i32, smtlab_model::CpuSet)> = user_server_threads()
        .into_iter()
        .filter(|t| !before.contains(&t.0))
        .collect();
    assert_eq!(mine.len(), placement.cpus.len(), "{mine:?}");
    for (tid, cpus) in &mine {
        assert_eq!(*cpus, placement.cpu_set(), "thread {tid}");
    }
    for _ in 0..2 {
        let s = inst.sample(1).unwrap();
        let m = &s.metrics;
        assert!(s.work > 0.0 && m["ops_per_s"] > 0.0, "{m:?}");
        assert_eq!(m["content_mismatches"], 0.0);
        assert_eq!(m["user_space_server"], 1.0);
        assert_eq!(m["server_threads"], placement.cpus.len() as f64);
        assert!(m["read_ops"] > 0.0 && m["write_ops"] > 0.0 && m["readlink_ops"] > 0.0);
        assert!(s.cpu_ns.unwrap() > 0, "the server's threads did the work");
    }
    drop(inst);
    let left: Vec<i32> = user_server_threads()
        .into_iter()
        .map(|t| t.0)
        .filter(|t| mine.iter().any(|m| m.0 == *t))
        .collect();
    assert!(left.is_empty(), "server threads left: {left:?}");
}

/// The user-space server writes through to the directory it exports: after loads
/// (their writes put the pattern back where they write), the files on disk hold the
/// pattern, the symlinks point at `f0`, and each client's directory is there.
#[test]
fn the_user_space_server_serves_a_directory_on_disk() {
    let _one = one_user_server_at_a_time();
    let t = tempfile::tempdir().unwrap();
    let server = user::UserNfs::start(t.path(), &[], 2).unwrap();
    let target = Target {
        ip: IpAddr::V4(Ipv4Addr::LOCALHOST),
        portmap_port: server.port(),
        mount_port: Some(server.port()),
        nfs_port: Some(server.port()),
        export: "/".into(),
        privileged: false,
        transport: Transport::Tcp,
    };
    let client = testutil::client();
    let sh = shape(2);
    let clients = start_clients(&client, sh.clients, None).unwrap();
    let handles = Arc::new(setup_on(&clients, &target, sh).unwrap());
    let r = clean_load(&clients, &target, &handles, sh, 500, 4, None);
    assert!(r.bytes_written > 0);
    for i in 0..sh.dirs {
        let d = t.path().join(format!("sfs/d{i}"));
        for j in 0..sh.files_per_dir {
            let got = std::fs::read(d.join(format!("f{j}"))).unwrap();
            let want: Vec<u8> = (0..u64::from(sh.file_bytes))
                .map(|o| sfs::pattern(i, j, o))
                .collect();
            assert!(got == want, "sfs/d{i}/f{j} on disk differs");
        }
        assert_eq!(
            std::fs::read_link(d.join("l")).unwrap(),
            std::path::Path::new("f0")
        );
    }
    assert!(t.path().join("sfs/w1").is_dir());
    drop(clients);
    drop(server);
    // Stopped: nothing listens on its port any more.
    assert!(std::net::TcpStream::connect(("127.0.0.1", target.nfs_port.unwrap())).is_err());
}

#[test]
fn the_quick_form_is_the_user_space_server_and_the_default_the_kernels() {
    let info = NfsSfs.info();
    let quick = Config::from_params(&smtlab_bench::Params::resolve(&info, &[], true).unwrap());
    assert_eq!(quick.unwrap().server, ServerKind::User);
    let full = Config::from_params(&smtlab_bench::Params::resolve(&info, &[], false).unwrap());
    assert_eq!(full.unwrap().server, ServerKind::Kernel);
}
