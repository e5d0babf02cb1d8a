//! How model values are written into columns and read back, how keys are named in
//! messages, and how a run's key is made (from this host's name, among others).

use serde::{Serialize, de::DeserializeOwned};
use std::collections::BTreeMap;

use smtlab_model::CellKey;
use smtlab_model::keys::Conditions;

use super::{Fail, Step};

/// A new run's key ([`crate::SCHEMA_VERSION`] 6): 128 bits of SHA-256 over this host,
/// process, the time in nanoseconds and a counter, so two runs never share one, even
/// two started in the same second on two hosts with the same command.
pub(crate) fn new_uid(started_unix_s: u64) -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    uid_of(&[
        this_host().as_bytes(),
        &std::process::id().to_le_bytes(),
        &nanos.to_le_bytes(),
        &COUNTER.fetch_add(1, Ordering::Relaxed).to_le_bytes(),
        &started_unix_s.to_le_bytes(),
    ])
}

/// This machine's host name (the kernel's), or `unknown`.
pub fn this_host() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "unknown".into())
}

/// The key of a run stored before runs had one: derived from what the file holds for it
/// (its id there, host name, start time, command line and environment), so upgrading a
/// file and reading an old one read-only give the same key, and pushing it twice from
/// either stores it once.
pub(crate) fn derived_uid(
    id: i64,
    hostname: Option<&str>,
    started_unix_s: i64,
    command_line: &str,
    environment: &str,
) -> String {
    uid_of(&[
        b"smtlab-run",
        &id.to_le_bytes(),
        hostname.unwrap_or("").as_bytes(),
        &started_unix_s.to_le_bytes(),
        command_line.as_bytes(),
        environment.as_bytes(),
    ])
}

/// 32 hex digits: the first 128 bits of SHA-256 over the parts, each length-prefixed so
/// that moving bytes from one part to the next changes the key.
fn uid_of(parts: &[&[u8]]) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    for p in parts {
        h.update((p.len() as u64).to_le_bytes());
        h.update(p);
    }
    h.finalize()[..16]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

pub(crate) fn to_json<T: Serialize + ?Sized>(v: &T) -> Step<String> {
    serde_json::to_string(v).map_err(|e| Fail::Invalid(format!("cannot encode as JSON: {e}")))
}

pub(crate) fn from_json<T: DeserializeOwned>(text: &str, what: &str) -> Step<T> {
    serde_json::from_str(text).map_err(|e| Fail::Decode(format!("{what}: {e}")))
}

/// A key's `params` column: the benchmark's parameters and the cell's conditions as one
/// JSON object with sorted keys, the conditions under their flat names
/// (`smtlab_model::keys`), as every version has written it.
pub(crate) fn key_params_json(
    params: &BTreeMap<String, String>,
    conditions: &Conditions,
) -> Step<String> {
    to_json(&conditions.flatten(params))
}

/// A `params` column read back: the parameters, and the conditions typed.
pub(crate) fn key_params_from_json(
    text: &str,
    what: &str,
) -> Step<(BTreeMap<String, String>, Conditions)> {
    let mut params: BTreeMap<String, String> = from_json(text, what)?;
    let conditions = Conditions::take_from(&mut params);
    Ok((params, conditions))
}

/// An enum as its column holds it: its serde name (`running`, `max_samples`), as every
/// version has written it.
pub(crate) fn enum_text<T: Serialize>(v: T) -> Step<String> {
    match serde_json::to_value(v) {
        Ok(serde_json::Value::String(s)) => Ok(s),
        _ => Err(Fail::Invalid("a value without a name to store".into())),
    }
}

/// An enum column read back; `what` names it in the error (`run status`).
pub(crate) fn parse_enum<T: DeserializeOwned>(s: &str, what: &str) -> Step<T> {
    serde_json::from_value(serde_json::Value::String(s.to_string()))
        .map_err(|_| Fail::Decode(format!("unknown {what} {s:?}")))
}

/// Series are stored as raw little-endian f64: exact, and an eighth of the JSON size for
/// the 10^5-value series of the thread benchmarks.
pub(crate) fn encode_series(values: &[f64]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

pub(crate) fn decode_series(blob: &[u8]) -> Option<Vec<f64>> {
    let chunks = blob.chunks_exact(8);
    let whole = chunks.remainder().is_empty();
    let value = |c: &[u8]| f64::from_le_bytes(c.try_into().unwrap_or([0; 8]));
    whole.then(|| chunks.map(value).collect())
}

/// `mem-read size=1GiB @ 1c2t`, for messages.
pub(crate) fn describe_key(key: &CellKey) -> String {
    let mut s = key.benchmark.clone();
    for (k, v) in &key.flat_params() {
        s.push_str(&format!(" {k}={v}"));
    }
    format!("{s} @ {}", key.placement)
}

#[cfg(test)]
mod tests {
    use super::*;
    use smtlab_model::result::StopReason;
    use smtlab_model::{Direction, RunStatus};

    #[test]
    fn run_keys_are_32_hex_digits_new_ones_unique_derived_ones_stable() {
        let a = new_uid(1);
        let b = new_uid(1);
        assert_eq!(a.len(), 32);
        assert!(a.chars().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
        let d = derived_uid(3, Some("h"), 10, "[\"smtlab\"]", "{}");
        assert_eq!(d, derived_uid(3, Some("h"), 10, "[\"smtlab\"]", "{}"));
        assert_ne!(d, derived_uid(4, Some("h"), 10, "[\"smtlab\"]", "{}"));
        assert_ne!(d, derived_uid(3, None, 10, "[\"smtlab\"]", "{}"));
    }

    #[test]
    fn series_blobs_round_trip_exactly() {
        let xs = vec![
            0.1 + 0.2,
            -0.0,
            f64::MAX,
            f64::MIN_POSITIVE,
            1e-300,
            12345.678,
        ];
        let back = decode_series(&encode_series(&xs)).unwrap();
        assert_eq!(
            back.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
            xs.iter().map(|x| x.to_bits()).collect::<Vec<_>>()
        );
        assert_eq!(decode_series(&[]), Some(vec![]));
        assert_eq!(decode_series(&[0; 7]), None);
    }

    #[test]
    fn enum_columns_hold_the_names_every_version_wrote() {
        for (status, text) in [
            (RunStatus::Running, "running"),
            (RunStatus::Finished, "finished"),
            (RunStatus::Interrupted, "interrupted"),
        ] {
            assert_eq!(enum_text(status).unwrap(), text);
            assert_eq!(parse_enum::<RunStatus>(text, "run status").unwrap(), status);
        }
        for (stop, text) in [
            (StopReason::Converged, "converged"),
            (StopReason::MaxSamples, "max_samples"),
            (StopReason::TimeBudget, "time_budget"),
        ] {
            assert_eq!(enum_text(stop).unwrap(), text);
            assert_eq!(parse_enum::<StopReason>(text, "stop reason").unwrap(), stop);
        }
        for d in [Direction::Higher, Direction::Lower] {
            assert_eq!(enum_text(d).unwrap(), d.as_str());
            assert_eq!(parse_enum::<Direction>(d.as_str(), "direction").unwrap(), d);
        }
        let Err(Fail::Decode(why)) = parse_enum::<RunStatus>("paused", "run status") else {
            panic!("an unknown status read")
        };
        assert_eq!(why, "unknown run status \"paused\"");
    }

    #[test]
    fn keys_are_described_for_messages() {
        let key = CellKey {
            benchmark: "mem-read".into(),
            params: [("size".to_string(), "1GiB".to_string())].into(),
            conditions: Conditions::default(),
            placement: "1c2t".into(),
        };
        assert_eq!(describe_key(&key), "mem-read size=1GiB @ 1c2t");
    }
}
