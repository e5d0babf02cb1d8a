//! Mutual proof of the shared token: each side sends a fresh random nonce, and each
//! proves it holds the token with an HMAC-SHA256 keyed by it over both nonces and its
//! role. The token itself never crosses the wire, a proof is worth nothing on another
//! connection (the other side's nonce is new each time), and one role's proof cannot be
//! replayed as the other's.
//!
//! The agent proves first, and the coordinator sends its own proof only after checking
//! the agent's: so a fake agent (a wrong `--client-hosts`, or someone on the path) learns
//! nothing of the token. The price: anyone who reaches the agent can collect proofs over
//! nonces of their choosing and try to guess the token offline, which is why tokens are
//! long and random (`head -c 24 /dev/urandom | base64`).

use base64::Engine as _;
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

use smtlab_placement::Token;

/// Bytes of a nonce: 256 random bits, never repeated in practice.
pub const NONCE_BYTES: usize = 32;

pub type Nonce = [u8; NONCE_BYTES];

/// Who proves: part of what is signed, so that a proof of one is no proof of the other.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Agent,
    Coordinator,
}

/// Why a handshake's random numbers or proofs could not be used.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    #[error("no random numbers from the system: {0}")]
    Random(String),
    #[error("{what}: expected {NONCE_BYTES} bytes in base64")]
    BadEncoding { what: &'static str },
}

/// A fresh nonce from the system's random source.
pub fn nonce() -> Result<Nonce, AuthError> {
    let mut n = [0u8; NONCE_BYTES];
    getrandom::fill(&mut n).map_err(|e| AuthError::Random(e.to_string()))?;
    Ok(n)
}

fn mac(token: &Token, role: Role, coordinator: &Nonce, agent: &Nonce) -> Hmac<Sha256> {
    // HMAC takes a key of any length; this cannot fail.
    let mut m = <Hmac<Sha256> as KeyInit>::new_from_slice(token.secret().as_bytes())
        .expect("HMAC accepts keys of any length");
    m.update(b"smtlab agent protocol 2\0");
    m.update(match role {
        Role::Agent => b"agent\0",
        Role::Coordinator => b"coord\0",
    });
    m.update(coordinator);
    m.update(agent);
    m
}

/// `role`'s proof of `token` for the connection of these two nonces, in base64.
pub fn prove(token: &Token, role: Role, coordinator: &Nonce, agent: &Nonce) -> String {
    encode(&mac(token, role, coordinator, agent).finalize().into_bytes())
}

/// Whether `proof` (base64) is `role`'s proof of `token` for these nonces, compared in
/// constant time (the time to refuse tells nothing of how much of a guess was right).
pub fn verify(token: &Token, role: Role, coordinator: &Nonce, agent: &Nonce, proof: &str) -> bool {
    let Ok(bytes) = base64::engine::general_purpose::STANDARD.decode(proof) else {
        return false;
    };
    mac(token, role, coordinator, agent)
        .verify_slice(&bytes)
        .is_ok()
}

pub fn encode(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// A nonce from its base64 text.
pub fn decode_nonce(text: &str, what: &'static str) -> Result<Nonce, AuthError> {
    // A nonce is 44 characters; a longer text is not decoded at all.
    if text.len() > 64 {
        return Err(AuthError::BadEncoding { what });
    }
    base64::engine::general_purpose::STANDARD
        .decode(text)
        .ok()
        .and_then(|b| Nonce::try_from(b.as_slice()).ok())
        .ok_or(AuthError::BadEncoding { what })
}
