//! The client side against a user-space NFSv3 server (`nfs3_server`'s in-memory file
//! system, a test dependency): the mix, the latencies by operation and the content
//! checks run here, where the kernel has no nfsd. The kernel server's path is tested
//! only for its refusal here (see `kernel::tests`).

use super::*;
use crate::db::testutil;
use nfs3_server::memfs::{MemFs, MemFsConfig};
use nfs3_server::tcp::{NFSTcp, NFSTcpListener};
use sfs::Op;

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
    let e = testutil::prepare(&NfsSfs, &[], &placement, Some(&client))
        .err()
        .unwrap();
    assert!(matches!(e, BenchError::Unsupported { .. }), "{e}");
    let text = e.to_string();
    assert!(text.contains(&why) && !text.contains('\n'), "{text}");
    assert_eq!(NfsSfs.notes(), vec![format!("{NAME}: {why}")]);
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
    let mut inst =
        testutil::prepare(&NfsSfs, &[("duration", "300ms")], &placement, Some(&client)).unwrap();
    let s = inst.sample(1).unwrap();
    assert!(s.work > 0.0 && s.metrics["content_mismatches"] == 0.0);
    assert!(s.metrics["nfsd_threads"] >= 1.0);
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
