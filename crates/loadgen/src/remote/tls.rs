//! TLS between a coordinator and its agents (`smtlab agent --tls`, `--client-tls`), keyed
//! by the token they share: nothing to hand out beyond the token file.
//!
//! The agent's TLS key is an Ed25519 key derived from the token (HMAC-SHA256 keyed by
//! the token over a label of its own, used as the key's seed). The agent presents its
//! public key alone (a raw public key, RFC 7250: no certificate, no authority, no expiry)
//! and the coordinator, which derives the same key from its copy of the token, accepts
//! that one key and no other. So whoever holds the token can be the agent, and no one
//! else can: a peer on the path can neither read the messages nor take over the
//! connection, and a fake agent fails the handshake before it sees a byte of the
//! protocol. The proof of the token ([`super::auth`]) then runs inside the channel, as it
//! does without TLS, and is what lets the coordinator in.
//!
//! TLS 1.3 only, with rustls and its ring provider; no session tickets (a coordinator
//! connects once per run), so after the handshake nothing arrives that the coordinator
//! did not send: the agent's watch during a load can still treat any byte as a message.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hmac::{Hmac, KeyInit, Mac};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, WebPkiSupportedAlgorithms};
use rustls::pki_types::{
    CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName, SubjectPublicKeyInfoDer,
    UnixTime,
};
use rustls::server::AlwaysResolvesServerRawPublicKeys;
use rustls::sign::CertifiedKey;
use rustls::{ClientConfig, ClientConnection, DigitallySignedStruct, ServerConfig};
use rustls::{Connection, ServerConnection, SignatureScheme};
use sha2::Sha256;

use smtlab_placement::Token;

/// Whether a coordinator's connections to its agents run inside TLS.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Channel {
    /// The proof of the token only; what follows travels in the clear.
    #[default]
    Plain,
    /// TLS 1.3 with the agent's key derived from the token.
    Tls,
}

impl Channel {
    /// TLS when `tls`, else plain (a command-line switch's meaning).
    pub fn tls_if(tls: bool) -> Channel {
        if tls { Channel::Tls } else { Channel::Plain }
    }
}

/// Why a TLS channel could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("setting up TLS: {0}")]
    Setup(#[from] rustls::Error),
    #[error("the TLS handshake did not finish in time")]
    TimedOut,
    #[error("TLS handshake: {0}")]
    Handshake(io::Error),
}

/// The name the coordinator asks for; only the agent's key is checked, never a name.
const AGENT_NAME: &str = "smtlab-agent";
/// What the key's seed is derived under, so that it is no other use of the token.
const KEY_LABEL: &[u8] = b"smtlab agent tls key 1\0";
/// A PKCS#8 (version 1) Ed25519 private key is this prefix and the 32-byte seed
/// (RFC 8410, section 7).
const ED25519_PKCS8_PREFIX: [u8; 16] = [
    0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x04, 0x22, 0x04, 0x20,
];

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The agent's key pair as the token determines it.
fn agent_key(token: &Token) -> Result<Arc<CertifiedKey>, TlsError> {
    // HMAC takes a key of any length; this cannot fail.
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(token.secret().as_bytes())
        .expect("HMAC accepts keys of any length");
    mac.update(KEY_LABEL);
    let seed = mac.finalize().into_bytes();
    let mut pkcs8 = ED25519_PKCS8_PREFIX.to_vec();
    pkcs8.extend_from_slice(&seed);
    let key = provider()
        .key_provider
        .load_private_key(PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(pkcs8)))?;
    let public = key
        .public_key()
        .ok_or(rustls::Error::General(
            "an Ed25519 key without its public key".into(),
        ))?
        .as_ref()
        .to_vec();
    Ok(Arc::new(CertifiedKey::new(
        vec![CertificateDer::from(public)],
        key,
    )))
}

/// The agent's side: its token-derived key, TLS 1.3, no tickets.
pub fn server_config(token: &Token) -> Result<Arc<ServerConfig>, TlsError> {
    let mut config = ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])?
        .with_no_client_auth()
        .with_cert_resolver(Arc::new(AlwaysResolvesServerRawPublicKeys::new(agent_key(
            token,
        )?)));
    config.send_tls13_tickets = 0;
    Ok(Arc::new(config))
}

/// The coordinator's side: accepts the one agent key `token` determines.
pub fn client_config(token: &Token) -> Result<Arc<ClientConfig>, TlsError> {
    let provider = provider();
    let pinned = PinnedAgentKey {
        spki: agent_key(token)?.cert[0].as_ref().to_vec(),
        algorithms: provider.signature_verification_algorithms,
    };
    let config = ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(pinned))
        .with_no_client_auth();
    Ok(Arc::new(config))
}

/// Accepts the agent's public key if, and only if, it is the one derived from the token.
#[derive(Debug)]
struct PinnedAgentKey {
    spki: Vec<u8>,
    algorithms: WebPkiSupportedAlgorithms,
}

impl ServerCertVerifier for PinnedAgentKey {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        if end_entity.as_ref() == self.spki.as_slice() {
            Ok(ServerCertVerified::assertion())
        } else {
            Err(rustls::Error::General(
                "the agent's key is not the one this token gives (a different token, \
                 or not an smtlab agent)"
                    .into(),
            ))
        }
    }

    fn verify_tls12_signature(
        &self,
        _message: &[u8],
        _cert: &CertificateDer<'_>,
        _dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        Err(rustls::Error::General("TLS 1.2: expected TLS 1.3".into()))
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        let spki = SubjectPublicKeyInfoDer::from(cert.as_ref());
        rustls::crypto::verify_tls13_signature_with_raw_key(message, &spki, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        vec![SignatureScheme::ED25519]
    }

    fn requires_raw_public_keys(&self) -> bool {
        true
    }
}

/// A TLS connection over a TCP stream, read and written as plaintext. Timeouts are the
/// TCP stream's; the stream stays reachable for them and for its descriptor.
pub struct TlsStream {
    conn: Connection,
    sock: TcpStream,
}

impl TlsStream {
    /// The agent's end: the handshake done by `deadline`.
    pub fn accept(
        sock: TcpStream,
        config: Arc<ServerConfig>,
        deadline: Instant,
    ) -> Result<TlsStream, TlsError> {
        let conn = ServerConnection::new(config)?;
        TlsStream::handshake(conn.into(), sock, deadline)
    }

    /// The coordinator's end: the handshake done by `deadline`.
    pub fn connect(
        sock: TcpStream,
        config: Arc<ClientConfig>,
        deadline: Instant,
    ) -> Result<TlsStream, TlsError> {
        let name = ServerName::try_from(AGENT_NAME).expect("a valid DNS name");
        let conn = ClientConnection::new(config, name)?;
        TlsStream::handshake(conn.into(), sock, deadline)
    }

    fn handshake(
        conn: Connection,
        sock: TcpStream,
        deadline: Instant,
    ) -> Result<TlsStream, TlsError> {
        let mut tls = TlsStream { conn, sock };
        let (read_timeout, write_timeout) = (tls.sock.read_timeout(), tls.sock.write_timeout());
        while tls.conn.is_handshaking() {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(TlsError::TimedOut);
            }
            let left = left.max(Duration::from_millis(1));
            let set = (tls.sock.set_read_timeout(Some(left)))
                .and_then(|()| tls.sock.set_write_timeout(Some(left)));
            set.map_err(TlsError::Handshake)?;
            match tls.conn.complete_io(&mut tls.sock) {
                Ok((0, 0)) if tls.conn.is_handshaking() => {
                    return Err(TlsError::Handshake(io::ErrorKind::UnexpectedEof.into()));
                }
                Ok(_) => {}
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(TlsError::Handshake(e)),
            }
        }
        let restore = (tls.sock.set_read_timeout(read_timeout.unwrap_or(None)))
            .and_then(|()| tls.sock.set_write_timeout(write_timeout.unwrap_or(None)));
        restore.map_err(TlsError::Handshake)?;
        Ok(tls)
    }

    pub fn tcp(&self) -> &TcpStream {
        &self.sock
    }

    /// Whether plaintext already arrived that was not read yet (records read from the
    /// socket and decrypted, or waiting to be).
    pub fn has_pending(&mut self) -> bool {
        self.conn
            .process_new_packets()
            .map_or(true, |state| state.plaintext_bytes_to_read() > 0)
    }

    /// Sends what rustls has queued (records, an alert).
    fn flush_tls(&mut self) -> io::Result<()> {
        while self.conn.wants_write() {
            self.conn.write_tls(&mut self.sock)?;
        }
        Ok(())
    }
}

impl Read for TlsStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            match self.conn.reader().read(buf) {
                Ok(n) => return Ok(n),
                // A peer that closed without close_notify: closed all the same.
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(0),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
            if self.conn.read_tls(&mut self.sock)? == 0 {
                return Ok(0);
            }
            if let Err(e) = self.conn.process_new_packets() {
                // rustls queued an alert saying why; the connection is over either way.
                let _ = self.flush_tls();
                return Err(io::Error::new(io::ErrorKind::InvalidData, e));
            }
            self.flush_tls()?;
        }
    }
}

impl Write for TlsStream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.conn.writer().write(buf)?;
        self.flush_tls()?;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.conn.writer().flush()?;
        self.flush_tls()
    }
}
