//! How model values are written into columns and read back, and how keys are named in
//! messages.

use serde::{Serialize, de::DeserializeOwned};
use smtlab_model::result::StopReason;
use std::collections::BTreeMap;

use smtlab_model::keys::Conditions;
use smtlab_model::{CellKey, Direction, RunStatus};

use super::{Fail, Step};

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

pub(crate) fn status_text(s: RunStatus) -> &'static str {
    match s {
        RunStatus::Running => "running",
        RunStatus::Finished => "finished",
        RunStatus::Interrupted => "interrupted",
    }
}

pub(crate) fn parse_status(s: &str) -> Step<RunStatus> {
    Ok(match s {
        "running" => RunStatus::Running,
        "finished" => RunStatus::Finished,
        "interrupted" => RunStatus::Interrupted,
        _ => return Err(Fail::Decode(format!("unknown run status {s:?}"))),
    })
}

pub(crate) fn direction_text(d: Direction) -> &'static str {
    d.as_str()
}

pub(crate) fn parse_direction(s: &str) -> Step<Direction> {
    Ok(match s {
        "higher" => Direction::Higher,
        "lower" => Direction::Lower,
        _ => return Err(Fail::Decode(format!("unknown direction {s:?}"))),
    })
}

pub(crate) fn stop_text(s: StopReason) -> &'static str {
    match s {
        StopReason::Converged => "converged",
        StopReason::MaxSamples => "max_samples",
        StopReason::TimeBudget => "time_budget",
    }
}

pub(crate) fn parse_stop(s: &str) -> Step<StopReason> {
    Ok(match s {
        "converged" => StopReason::Converged,
        "max_samples" => StopReason::MaxSamples,
        "time_budget" => StopReason::TimeBudget,
        _ => return Err(Fail::Decode(format!("unknown stop reason {s:?}"))),
    })
}

/// Series are stored as raw little-endian f64: exact, and an eighth of the JSON size for
/// the 10^5-value series of the thread benchmarks.
pub(crate) fn encode_series(values: &[f64]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

pub(crate) fn decode_series(blob: &[u8]) -> Option<Vec<f64>> {
    let chunks = blob.chunks_exact(8);
    if !chunks.remainder().is_empty() {
        return None;
    }
    Some(
        chunks
            .map(|c| f64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
            .collect(),
    )
}

/// `mem-read size=1GiB @ 1c2t`, for messages.
pub(crate) fn describe_key(key: &CellKey) -> String {
    let mut s = key.benchmark.clone();
    for (k, v) in &key.flat_params() {
        s.push_str(&format!(" {k}={v}"));
    }
    s.push_str(" @ ");
    s.push_str(&key.placement);
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use smtlab_model::result::StopReason;

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
    fn enum_texts_match_the_serde_names() {
        for s in [
            RunStatus::Running,
            RunStatus::Finished,
            RunStatus::Interrupted,
        ] {
            assert_eq!(serde_json::to_value(s).unwrap(), status_text(s));
            assert_eq!(parse_status(status_text(s)).unwrap(), s);
        }
        for d in [Direction::Higher, Direction::Lower] {
            assert_eq!(serde_json::to_value(d).unwrap(), direction_text(d));
            assert_eq!(parse_direction(direction_text(d)).unwrap(), d);
        }
        for s in [
            StopReason::Converged,
            StopReason::MaxSamples,
            StopReason::TimeBudget,
        ] {
            assert_eq!(serde_json::to_value(s).unwrap(), stop_text(s));
            assert_eq!(parse_stop(stop_text(s)).unwrap(), s);
        }
        assert!(parse_status("paused").is_err());
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
