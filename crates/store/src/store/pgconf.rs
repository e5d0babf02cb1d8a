//! What a PostgreSQL URL asks that the postgres crate leaves to its caller, read as
//! libpq reads it, so that a URL that works with `psql` works with smtlab:
//!
//! * `sslmode`: `disable` (plain), `prefer` (the default: TLS when the server offers it,
//!   the certificate not checked, plain after a handshake that fails), `require` (TLS or no connection; the certificate is
//!   checked against `sslrootcert` when one is named, as libpq does), `verify-ca` (the
//!   certificate chains to `sslrootcert`, or to the system's roots when none is named)
//!   and `verify-full` (that, and the certificate names the host). TLS is rustls.
//! * The password, when the URL has none: `PGPASSWORD`, else the first matching line of
//!   the password file (`passfile=` in the URL, else `PGPASSFILE`, else `~/.pgpass`):
//!   `host:port:database:user:password`, `*` matching anything, `\:` and `\\` escaping,
//!   a socket directory matched as `localhost`. A file that matches but that group or
//!   others can read is refused (libpq ignores it, which leaves the user guessing why
//!   the password was not taken).

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use postgres::config::{Host, SslMode};
use postgres::{Client, Config, NoTls};
use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
};
use tokio_postgres_rustls::MakeRustlsConnect;

use smtlab_model::quote;

/// A connection setting smtlab cannot use.
#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    #[error(
        "sslmode={0} is not a mode smtlab knows (expected disable, prefer, require, verify-ca or verify-full)"
    )]
    SslMode(String),
    #[error("sslrootcert {} cannot be read", quote::path(path))]
    RootCertRead {
        path: PathBuf,
        source: rustls::pki_types::pem::Error,
    },
    #[error(
        "sslrootcert {} holds no usable certificate (expected PEM)",
        quote::path(path)
    )]
    RootCertEmpty { path: PathBuf },
    #[error(
        "no system root certificates were found ({errors} errors reading them); name the server's CA with sslrootcert=FILE"
    )]
    NoSystemRoots { errors: usize },
    #[error("sslrootcert: the verifier cannot be built")]
    Verifier(#[source] rustls::client::VerifierBuilderError),
    #[error("password file {} cannot be read", quote::path(path))]
    PassFileRead { path: PathBuf, source: io::Error },
    #[error(
        "password file {} matches this connection but group or others can read it (permissions should be u=rw, 0600, or less)",
        quote::path(path)
    )]
    PassFileOpen { path: PathBuf },
}

smtlab_model::named_enum! {
    /// libpq's `sslmode` values smtlab takes (`allow`, plain first, is not one).
    enum Ssl {
        Disable = "disable",
        Prefer = "prefer",
        Require = "require",
        VerifyCa = "verify-ca",
        VerifyFull = "verify-full",
    }
}

impl Ssl {
    /// The URL's `sslmode`, `prefer` when it names none.
    fn of(v: Option<&str>) -> Result<Ssl, SettingsError> {
        let v = v.unwrap_or("prefer");
        Ssl::parse(v).ok_or_else(|| SettingsError::SslMode(v.to_string()))
    }
}

/// The parameters of a URL that are read here, percent-decoded.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct OwnParams {
    sslmode: Option<String>,
    sslrootcert: Option<PathBuf>,
    passfile: Option<PathBuf>,
}

/// `url` without `sslmode`, `sslrootcert` and `passfile`, for the postgres crate (it
/// refuses `verify-full` and knows neither of the others), and their values.
pub(crate) fn split_url(url: &str) -> (String, OwnParams) {
    let Some((base, query)) = url.split_once('?') else {
        return (url.to_string(), OwnParams::default());
    };
    let mut own = OwnParams::default();
    let mut rest = Vec::new();
    for kv in query.split('&') {
        let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
        let v = percent_encoding::percent_decode_str(v)
            .decode_utf8_lossy()
            .into_owned();
        match k {
            "sslmode" => own.sslmode = Some(v),
            // `system` (as libpq 16 spells it): the system's roots, as when none is named.
            "sslrootcert" if v == "system" => own.sslrootcert = None,
            "sslrootcert" => own.sslrootcert = Some(PathBuf::from(v)),
            "passfile" => own.passfile = Some(PathBuf::from(v)),
            _ => rest.push(kv),
        }
    }
    match rest.is_empty() {
        true => (base.to_string(), own),
        false => (format!("{base}?{}", rest.join("&")), own),
    }
}

/// What libpq reads from the environment for a password.
#[derive(Debug, Default, Clone)]
pub(crate) struct PassEnv {
    pub password: Option<String>,
    pub passfile: Option<PathBuf>,
    pub home: Option<PathBuf>,
}

impl PassEnv {
    pub(crate) fn of_process() -> PassEnv {
        let var = |k| std::env::var_os(k).filter(|v| !v.is_empty());
        PassEnv {
            password: var("PGPASSWORD").and_then(|v| v.into_string().ok()),
            passfile: var("PGPASSFILE").map(PathBuf::from),
            home: var("HOME").map(PathBuf::from),
        }
    }
}

/// The settings of a connection and the TLS to open it with: what a retry needs.
pub(crate) struct Connector {
    config: Config,
    tls: Option<MakeRustlsConnect>,
    /// `prefer`: a TLS handshake that fails is followed by a plain connection, as libpq
    /// does (a server whose TLS rustls cannot speak stays reachable).
    plain_after_tls: bool,
}

impl Connector {
    /// `config` (parsed from the URL without `own`) completed by `own` and `env`.
    pub(crate) fn new(
        mut config: Config,
        own: &OwnParams,
        env: &PassEnv,
    ) -> Result<Connector, SettingsError> {
        let ssl = Ssl::of(own.sslmode.as_deref())?;
        config.ssl_mode(match ssl {
            Ssl::Disable => SslMode::Disable,
            Ssl::Prefer => SslMode::Prefer,
            Ssl::Require | Ssl::VerifyCa | Ssl::VerifyFull => SslMode::Require,
        });
        let tls = match ssl {
            Ssl::Disable => None,
            _ => Some(MakeRustlsConnect::new(client_config(
                ssl,
                own.sslrootcert.as_deref(),
            )?)),
        };
        if config.get_password().is_none()
            && let Some(pw) = password(&config, own.passfile.as_deref(), env)?
        {
            config.password(pw);
        }
        Ok(Connector {
            config,
            tls,
            plain_after_tls: ssl == Ssl::Prefer,
        })
    }

    #[cfg(test)]
    fn config(&self) -> &Config {
        &self.config
    }

    /// A new session (retries are the caller's).
    pub(crate) fn connect(&self) -> Result<Client, postgres::Error> {
        let Some(tls) = &self.tls else {
            return self.config.connect(NoTls);
        };
        match self.config.connect(tls.clone()) {
            // The postgres crate tells a failed handshake only by its message.
            Err(e) if self.plain_after_tls && e.to_string() == "error performing TLS handshake" => {
                let mut plain = self.config.clone();
                plain.ssl_mode(SslMode::Disable);
                plain.connect(NoTls)
            }
            other => other,
        }
    }
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// rustls's settings for `ssl`: what the server's certificate must be.
fn client_config(ssl: Ssl, rootcert: Option<&Path>) -> Result<ClientConfig, SettingsError> {
    let provider = provider();
    // libpq: `require` with a root certificate named checks the chain, as `verify-ca`.
    let ssl = match (ssl, rootcert) {
        (Ssl::Require, Some(_)) => Ssl::VerifyCa,
        (s, _) => s,
    };
    let chain = match ssl {
        Ssl::Disable | Ssl::Prefer | Ssl::Require => None,
        Ssl::VerifyCa | Ssl::VerifyFull => {
            let roots = Arc::new(roots(rootcert)?);
            let webpki = WebPkiServerVerifier::builder_with_provider(roots, provider.clone());
            Some(webpki.build().map_err(SettingsError::Verifier)?)
        }
    };
    let verifier = Verifier {
        provider: provider.clone(),
        chain,
        check_name: ssl == Ssl::VerifyFull,
    };
    let config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("ring supports rustls's default protocol versions")
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier))
        .with_no_client_auth();
    Ok(config)
}

/// The certificates of `file` (PEM), or the system's when none is named.
fn roots(file: Option<&Path>) -> Result<RootCertStore, SettingsError> {
    let mut store = RootCertStore::empty();
    match file {
        Some(path) => {
            let certs = CertificateDer::pem_file_iter(path)
                .and_then(|it| it.collect::<Result<Vec<_>, _>>())
                .map_err(|source| SettingsError::RootCertRead {
                    path: path.to_path_buf(),
                    source,
                })?;
            let (added, _) = store.add_parsable_certificates(certs);
            if added == 0 {
                return Err(SettingsError::RootCertEmpty {
                    path: path.to_path_buf(),
                });
            }
        }
        None => {
            let found = rustls_native_certs::load_native_certs();
            let (added, _) = store.add_parsable_certificates(found.certs);
            if added == 0 {
                return Err(SettingsError::NoSystemRoots {
                    errors: found.errors.len(),
                });
            }
        }
    }
    Ok(store)
}

/// What the server's certificate must be. Without `chain` (`prefer` and `require`):
/// encrypted, whoever the server is (libpq's meaning of both); with it, the chain is
/// checked (`verify-ca`), and the name too when `check_name` (`verify-full`). The
/// handshake's signatures are checked either way, so the session key is the server's.
#[derive(Debug)]
struct Verifier {
    provider: Arc<CryptoProvider>,
    chain: Option<Arc<WebPkiServerVerifier>>,
    check_name: bool,
}

impl ServerCertVerifier for Verifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let Some(chain) = &self.chain else {
            return Ok(ServerCertVerified::assertion());
        };
        let checked =
            chain.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now);
        match checked {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) if !self.check_name => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        let algs = &self.provider.signature_verification_algorithms;
        rustls::crypto::verify_tls12_signature(message, cert, dss, algs)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        let algs = &self.provider.signature_verification_algorithms;
        rustls::crypto::verify_tls13_signature(message, cert, dss, algs)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// What a password file line is matched against.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PassKey {
    pub host: String,
    pub port: String,
    pub database: String,
    pub user: String,
}

impl PassKey {
    /// libpq's defaults: a socket directory is `localhost`, the port 5432, the database
    /// the user's name, the user this process's.
    fn of(config: &Config) -> PassKey {
        let host = match config.get_hosts().first() {
            Some(Host::Tcp(h)) => h.clone(),
            Some(Host::Unix(_)) | None => "localhost".into(),
        };
        let port = config.get_ports().first().copied().unwrap_or(5432);
        let user = match config.get_user() {
            Some(u) => u.to_string(),
            None => whoami::username().unwrap_or_default(),
        };
        PassKey {
            host,
            port: port.to_string(),
            database: config.get_dbname().unwrap_or(&user).to_string(),
            user,
        }
    }
}

/// The password for `config` from the environment or the password file, if any.
fn password(
    config: &Config,
    url_passfile: Option<&Path>,
    env: &PassEnv,
) -> Result<Option<String>, SettingsError> {
    if let Some(pw) = &env.password {
        return Ok(Some(pw.clone()));
    }
    let file = match (url_passfile, &env.passfile, &env.home) {
        (Some(f), _, _) => f.to_path_buf(),
        (None, Some(f), _) => f.clone(),
        (None, None, Some(home)) => home.join(".pgpass"),
        (None, None, None) => return Ok(None),
    };
    let text = match std::fs::read_to_string(&file) {
        Ok(t) => t,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(source) => return Err(SettingsError::PassFileRead { path: file, source }),
    };
    let Some(pw) = lookup(&text, &PassKey::of(config)) else {
        return Ok(None);
    };
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&file)
        .map_err(|source| SettingsError::PassFileRead {
            path: file.clone(),
            source,
        })?
        .permissions()
        .mode();
    if mode & 0o077 != 0 {
        return Err(SettingsError::PassFileOpen { path: file });
    }
    Ok(Some(pw))
}

/// The password of the first line of a password file that matches `key`.
pub(crate) fn lookup(text: &str, key: &PassKey) -> Option<String> {
    text.lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .filter_map(fields)
        .find(|f| {
            [&key.host, &key.port, &key.database, &key.user]
                .iter()
                .zip(f)
                .all(|(want, got)| got == "*" || got == *want)
        })
        .map(|mut f| f.swap_remove(4))
}

/// A line's five fields, `\` escaping the character after it; `None` for fewer than
/// five (a field ends at an unescaped `:`, so the password ends there too).
fn fields(line: &str) -> Option<Vec<String>> {
    let mut out = vec![String::new()];
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => out.last_mut()?.push(chars.next().unwrap_or('\\')),
            ':' if out.len() == 5 => break,
            ':' => out.push(String::new()),
            c => out.last_mut()?.push(c),
        }
    }
    (out.len() == 5).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(host: &str, port: &str, db: &str, user: &str) -> PassKey {
        PassKey {
            host: host.into(),
            port: port.into(),
            database: db.into(),
            user: user.into(),
        }
    }

    #[test]
    fn the_first_matching_line_gives_the_password() {
        let text = "# comment:1:2:3:4\n\
                    db1:5432:results:smtlab:first\n\
                    *:5432:results:smtlab:any-host\n\
                    db2:*:*:*:wild\n\
                    db2:6432:*:*:never\n";
        let k = |h, p, d, u| lookup(text, &key(h, p, d, u));
        assert_eq!(
            k("db1", "5432", "results", "smtlab").as_deref(),
            Some("first")
        );
        assert_eq!(
            k("db9", "5432", "results", "smtlab").as_deref(),
            Some("any-host")
        );
        assert_eq!(k("db9", "5433", "results", "smtlab"), None);
        assert_eq!(k("db2", "6432", "other", "bob").as_deref(), Some("wild"));
        assert_eq!(k("db1", "5432", "results", "bob"), None);
        assert_eq!(k("db1", "5432", "other", "smtlab"), None);
        assert_eq!(lookup("# only:*:*:*:x", &key("only", "1", "d", "u")), None);
    }

    #[test]
    fn escapes_and_short_lines() {
        let text = "short:line\nh\\:1:5432:d\\\\b:u:p\\:w\\\\d:tail\n";
        assert_eq!(
            lookup(text, &key("h:1", "5432", "d\\b", "u")).as_deref(),
            Some("p:w\\d")
        );
        assert_eq!(lookup(text, &key("short", "line", "d", "u")), None);
        assert_eq!(
            fields("a:b:c:d:"),
            Some(
                vec!["a", "b", "c", "d", ""]
                    .into_iter()
                    .map(String::from)
                    .collect()
            )
        );
    }

    #[test]
    fn the_url_keeps_what_the_postgres_crate_reads() {
        let (base, own) = split_url(
            "postgresql://u@h/db?sslmode=verify-full&connect_timeout=3&sslrootcert=%2Fetc%2Fca.pem",
        );
        assert_eq!(base, "postgresql://u@h/db?connect_timeout=3");
        assert_eq!(own.sslmode.as_deref(), Some("verify-full"));
        assert_eq!(own.sslrootcert, Some(PathBuf::from("/etc/ca.pem")));
        let (base, own) = split_url("postgresql://u@h/db?sslmode=disable");
        assert_eq!((base.as_str(), own.passfile), ("postgresql://u@h/db", None));
        let (_, own) = split_url("postgresql://u@h/db?sslmode=verify-full&sslrootcert=system");
        assert_eq!(own.sslrootcert, None);
        assert!(matches!(
            Ssl::of(Some("allow")),
            Err(SettingsError::SslMode(m)) if m == "allow"
        ));
        assert_eq!(Ssl::of(None).unwrap(), Ssl::Prefer);
    }

    #[test]
    fn passwords_come_from_the_url_then_pgpassword_then_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("pass");
        std::fs::write(&file, "127.0.0.1:5432:results:smtlab:from-file\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        let with = |url: &str, env: &PassEnv| {
            let (base, own) = split_url(url);
            let c = Connector::new(base.parse().unwrap(), &own, env).unwrap();
            c.config()
                .get_password()
                .map(|p| String::from_utf8(p.to_vec()).unwrap())
        };
        let env = PassEnv {
            passfile: Some(file.clone()),
            ..PassEnv::default()
        };
        let url = "postgresql://smtlab@127.0.0.1/results?sslmode=disable";
        assert_eq!(with(url, &env).as_deref(), Some("from-file"));
        let in_url = "postgresql://smtlab:given@127.0.0.1/results?sslmode=disable";
        assert_eq!(with(in_url, &env).as_deref(), Some("given"));
        let env_pw = PassEnv {
            password: Some("from-env".into()),
            ..env.clone()
        };
        assert_eq!(with(url, &env_pw).as_deref(), Some("from-env"));
        let other = "postgresql://smtlab@127.0.0.1/other?sslmode=disable";
        assert_eq!(with(other, &env), None);
        // passfile= in the URL comes before PGPASSFILE.
        let named = format!("{url}&passfile={}", file.display());
        assert_eq!(
            with(&named, &PassEnv::default()).as_deref(),
            Some("from-file")
        );
        // A matching file others can read is refused, by name.
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        let (base, own) = split_url(url);
        let e = Connector::new(base.parse().unwrap(), &own, &env)
            .err()
            .unwrap();
        assert!(matches!(e, SettingsError::PassFileOpen { .. }), "{e}");
        assert!(e.to_string().contains("0600"), "{e}");
    }
}
