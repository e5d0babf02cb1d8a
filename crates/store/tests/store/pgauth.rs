//! Reaching a shared store as a fleet does: over TCP with a password the URL does not
//! hold (a password file), and over TLS with each `sslmode`, against a throw-away
//! server set up for it (`pg_hba.conf` asking TCP clients for a password; a test CA and
//! a server certificate made with `openssl`, the TLS case skipped without it).

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use smtlab_fixtures::require;
use smtlab_store::Store;
use smtlab_workloads::db::pg::DB_USER;

use super::pg::{Pg, server};

fn sql(url: &str, text: &str) {
    let mut c = postgres::Client::connect(url, postgres::NoTls).unwrap();
    c.batch_execute(text).unwrap();
}

/// A message and its causes, as the CLI prints it.
fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        s = format!("{s}: {c}");
        cause = c.source();
    }
    s
}

/// Polls `ready` for up to 10 s: a configuration reload is asynchronous.
fn wait_for(what: &str, ready: impl Fn() -> bool) {
    let t = Instant::now();
    while !ready() {
        assert!(t.elapsed() < Duration::from_secs(10), "{what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Writes `text` into the server's data directory as the server's user, mode 0600.
fn server_file(pg: &Pg, name: &str, text: &[u8]) {
    let data = pg.server.data_dir();
    let owner = std::fs::metadata(&data).unwrap();
    let path = data.join(name);
    std::fs::write(&path, text).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::os::unix::fs::chown(&path, Some(owner.uid()), Some(owner.gid())).unwrap();
}

fn tcp_url(pg: &Pg, params: &str) -> String {
    format!(
        "postgresql://{DB_USER}@127.0.0.1:{}/postgres?{params}",
        pg.server.port()
    )
}

#[test]
fn a_password_is_taken_from_the_password_file_and_never_shown() {
    let Some(pg) = server() else { return };
    sql(
        &pg.url,
        &format!("ALTER USER {DB_USER} PASSWORD 'pw:secret'"),
    );
    server_file(
        &pg,
        "pg_hba.conf",
        b"local all all trust\nhost all all 127.0.0.1/32 scram-sha-256\n",
    );
    sql(&pg.url, "SELECT pg_reload_conf()");
    let bare = tcp_url(&pg, "sslmode=disable");
    wait_for("the server asks for a password", || {
        postgres::Client::connect(&bare, postgres::NoTls).is_err()
    });
    let e = Store::open(&bare).unwrap_err();
    assert!(chain(&e).contains("password"), "{}", chain(&e));

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("pgpass");
    let port = pg.server.port();
    let lines = format!("other:*:*:*:wrong\n127.0.0.1:{port}:postgres:{DB_USER}:pw\\:secret\n");
    std::fs::write(&file, lines).unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let with_file = format!("{bare}&passfile={}", file.display());
    let store = Store::open(&with_file).expect("the password from the file");
    store.check_integrity().unwrap();
    drop(store);

    // A wrong password and a file others can read: errors that name no password.
    let wrong =
        format!("postgresql://{DB_USER}:wrong-pw@127.0.0.1:{port}/postgres?sslmode=disable");
    let e = chain(&Store::open(&wrong).unwrap_err());
    assert!(!e.contains("wrong-pw") && e.contains(":***@"), "{e}");
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let e = chain(&Store::open(&with_file).unwrap_err());
    assert!(
        e.contains("group or others") && !e.contains("secret"),
        "{e}"
    );
}

/// A CA, and a certificate for `localhost` only that it signed, in `dir`; `None` (with
/// the skip line) without `openssl`.
fn certificates(dir: &Path) -> Option<(PathBuf, PathBuf, PathBuf)> {
    let run = |args: &[&str]| {
        Command::new("openssl")
            .args(args)
            .current_dir(dir)
            .output()
            .is_ok_and(|o| o.status.success())
    };
    std::fs::write(dir.join("san.ext"), "subjectAltName=DNS:localhost\n").unwrap();
    let ec = "-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes";
    let made = [
        format!("req -x509 {ec} -keyout ca.key -out ca.crt -days 2 -subj /CN=smtlab-test-ca"),
        format!("req {ec} -keyout server.key -out server.csr -subj /CN=localhost"),
        "x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out server.crt \
         -days 2 -extfile san.ext"
            .to_string(),
    ]
    .iter()
    .all(|line| run(&line.split_whitespace().collect::<Vec<_>>()));
    if !made {
        require::skip("PostgreSQL TLS test: openssl could not make a test certificate");
        return None;
    }
    Some((
        dir.join("ca.crt"),
        dir.join("server.crt"),
        dir.join("server.key"),
    ))
}

/// How many of the server's sessions named `smtlab` are encrypted.
fn tls_sessions(pg: &Pg) -> i64 {
    let mut c = postgres::Client::connect(&pg.url, postgres::NoTls).unwrap();
    c.query_one(
        "SELECT count(*) FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid)
         WHERE a.application_name = 'smtlab' AND s.ssl",
        &[],
    )
    .unwrap()
    .get(0)
}

#[test]
fn tls_is_used_and_checked_as_sslmode_says() {
    let Some(pg) = server() else { return };
    let dir = tempfile::tempdir().unwrap();
    let Some((ca, cert, key)) = certificates(dir.path()) else {
        return;
    };
    server_file(&pg, "server.crt", &std::fs::read(cert).unwrap());
    server_file(&pg, "server.key", &std::fs::read(key).unwrap());
    // One statement at a time: ALTER SYSTEM refuses to run in a transaction block.
    for s in [
        "ALTER SYSTEM SET ssl_cert_file = 'server.crt'",
        "ALTER SYSTEM SET ssl_key_file = 'server.key'",
        "ALTER SYSTEM SET ssl = on",
        "SELECT pg_reload_conf()",
    ] {
        sql(&pg.url, s);
    }
    wait_for("the server takes TLS", || {
        let mut c = postgres::Client::connect(&pg.url, postgres::NoTls).unwrap();
        let on: String = c.query_one("SHOW ssl", &[]).unwrap().get(0);
        on == "on"
    });
    let root = format!("sslrootcert={}", ca.display());
    let open = |params: &str| Store::open(tcp_url(&pg, params)).map_err(|e| chain(&e));

    // Encrypted whoever the server is; then checked against the CA.
    let store = open("sslmode=require").expect("require");
    assert_eq!(tls_sessions(&pg), 1);
    drop(store);
    open(&format!("sslmode=verify-ca&{root}")).expect("verify-ca: the name is not checked");
    let by_name = format!(
        "postgresql://{DB_USER}@localhost:{}/postgres?hostaddr=127.0.0.1&sslmode=verify-full&{root}",
        pg.server.port()
    );
    Store::open(&by_name).expect("verify-full by the certificate's name");
    // 127.0.0.1 is not the certificate's name, and no system root signed it.
    let e = open(&format!("sslmode=verify-full&{root}")).unwrap_err();
    assert!(e.contains("certificate"), "{e}");
    let e = open("sslmode=verify-full").unwrap_err();
    assert!(e.contains("certificate"), "{e}");
    // Plain when asked, and TLS required where the server offers none (its socket).
    open("sslmode=disable").expect("disable");
    let e = Store::open(format!("{}?sslmode=require", pg.url)).unwrap_err();
    assert!(chain(&e).contains("does not support TLS"), "{}", chain(&e));
    let e = open("sslmode=verify-everything").unwrap_err();
    assert!(
        e.contains("sslmode=verify-everything") && e.contains("verify-full"),
        "{e}"
    );

    // A server whose TLS rustls cannot speak (TLS 1.1 at most): `prefer` connects in
    // the clear, as libpq does; `require` fails.
    for s in [
        "ALTER SYSTEM SET ssl_min_protocol_version = 'TLSv1'",
        "ALTER SYSTEM SET ssl_max_protocol_version = 'TLSv1.1'",
        "SELECT pg_reload_conf()",
    ] {
        sql(&pg.url, s);
    }
    wait_for("the server takes TLS 1.1 at most", || {
        let mut c = postgres::Client::connect(&pg.url, postgres::NoTls).unwrap();
        let max: String = c
            .query_one("SHOW ssl_max_protocol_version", &[])
            .unwrap()
            .get(0);
        max == "TLSv1.1"
    });
    let e = open("sslmode=require").unwrap_err();
    assert!(e.contains("TLS"), "{e}");
    let store = open("sslmode=prefer").expect("prefer falls back to a plain connection");
    assert_eq!(tls_sessions(&pg), 0);
    drop(store);
}
