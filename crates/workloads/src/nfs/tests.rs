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
            port: port_rx.recv().unwrap(),
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
    for (k, v, want) in [
        ("clients", "0", "1 to"),
        ("files", "0", "1 to"),
        ("file_size", "0", "1 byte to"),
        ("nfsd_threads", "0", "1 to"),
        ("server", "nfsd", "kernel or user"),
    ] {
        let e = Config::from_params(&resolve(&[(k, v)]))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(k) && e.contains(want) && !e.contains('\n'),
            "{e}"
        );
    }
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
    let server = TestServer::start();
    let client = testutil::client();
    let sh = shape(2);
    let clients = Clients::start(&client, sh.clients, None).unwrap();
    let target = server.target();
    let handles = Arc::new(setup_on(&clients, &target, sh).unwrap());
    assert_eq!(handles.dirs.len(), 2);
    // A first load, as an earlier sample would be: the next must find its file set as
    // SFS's would (its removes have files to remove again).
    let first = run_load(
        &clients,
        &target,
        &handles,
        sh,
        Duration::from_millis(700),
        2,
    )
    .unwrap();
    assert_eq!(first.errors, 0, "{:?}", first.first_error);
    assert!(
        !first.latencies_ns[Op::Remove.index()].is_empty(),
        "no remove in the first load"
    );
    let r = run_load(
        &clients,
        &target,
        &handles,
        sh,
        Duration::from_millis(700),
        3,
    )
    .unwrap();
    assert_eq!(r.errors, 0, "{:?}", r.first_error);
    assert_eq!(r.content_mismatches, 0);
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
    let clients = Clients::start(&client, 1, None).unwrap();
    let target = server.target();
    let handles = Arc::new(setup_on(&clients, &target, sh).unwrap());
    // Overwrite the one file with zeros behind the load's back.
    let (t, file) = (target.clone(), handles.dirs[0].1[0].clone());
    clients
        .run_on(0, move || {
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
        })
        .recv()
        .unwrap();
    let r = run_load(
        &clients,
        &target,
        &handles,
        sh,
        Duration::from_millis(400),
        5,
    )
    .unwrap();
    assert!(r.content_mismatches > 0, "reads saw no change");
    let e = sample_from(&r, Duration::from_secs(1))
        .unwrap_err()
        .to_string();
    assert!(e.contains("did not match the file set"), "{e}");
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
    let clients = Clients::start(&client, sh.clients, None).unwrap();
    let handles = Arc::new(setup_on(&clients, &target, sh).unwrap());
    let r = run_load(
        &clients,
        &target,
        &handles,
        sh,
        Duration::from_millis(500),
        4,
    )
    .unwrap();
    assert_eq!(r.errors, 0, "{:?}", r.first_error);
    assert_eq!(r.content_mismatches, 0);
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
