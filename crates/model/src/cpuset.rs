//! Sets of logical CPU numbers and their two Linux text forms.
//!
//! * list form, as in `/sys/devices/system/cpu/online`: `0-3,8,10-11`;
//! * mask form, as in `thread_siblings` on old kernels: comma-separated 32-bit hex words,
//!   most significant first (`00000000,0000ff00`).
//!
//! Both parsers accept the trailing newline and NUL padding that sysfs files carry and
//! reject anything else with an error that quotes the input.

use std::collections::BTreeSet;
use std::fmt;

use serde::{Deserialize, Serialize};

/// Highest CPU number accepted by the parsers. Linux's NR_CPUS tops out at 8192 today;
/// the margin keeps room for growth while refusing `0-4294967295`, which would otherwise
/// allocate gigabytes from one typo.
pub const MAX_CPU: u32 = (1 << 16) - 1;

/// A set of logical CPU numbers, iterated in increasing order.
#[derive(Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct CpuSet(BTreeSet<u32>);

/// A CPU list or mask that could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid CPU {form} {input}: {reason}")]
pub struct CpuListError {
    /// `list` or `mask`.
    pub form: &'static str,
    /// The input as given, quoted (shortened when very long).
    pub input: String,
    /// What was expected.
    pub reason: String,
}

fn err(form: &'static str, input: &str, reason: impl Into<String>) -> CpuListError {
    CpuListError {
        form,
        input: crate::quote::quoted(input),
        reason: reason.into(),
    }
}

/// Strips what sysfs puts around the payload: whitespace, newlines and NUL padding.
fn trim_sysfs(s: &str) -> &str {
    s.trim_matches(|c: char| c.is_whitespace() || c == '\0')
}

impl CpuSet {
    /// The empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Parses the list form (`0-3,8,10-11`). An empty string is the empty set.
    pub fn parse_list(input: &str) -> Result<Self, CpuListError> {
        let s = trim_sysfs(input);
        let mut set = BTreeSet::new();
        if s.is_empty() {
            return Ok(Self(set));
        }
        for part in s.split(',') {
            let part = part.trim();
            if part.is_empty() {
                return Err(err("list", input, "empty element (expected e.g. 0-3,8)"));
            }
            let (lo, hi) = match part.split_once('-') {
                Some((a, b)) => (parse_cpu(a, input)?, parse_cpu(b, input)?),
                None => {
                    let n = parse_cpu(part, input)?;
                    (n, n)
                }
            };
            if lo > hi {
                return Err(err(
                    "list",
                    input,
                    format!("range {lo}-{hi} runs backwards (expected low-high)"),
                ));
            }
            set.extend(lo..=hi);
        }
        Ok(Self(set))
    }

    /// Parses the hex mask form (`ff,00000001`): 32-bit words, most significant first.
    /// An optional `0x` prefix is accepted; an all-zero mask is the empty set.
    pub fn parse_mask(input: &str) -> Result<Self, CpuListError> {
        let s = trim_sysfs(input);
        let s = s
            .strip_prefix("0x")
            .or_else(|| s.strip_prefix("0X"))
            .unwrap_or(s);
        if s.is_empty() {
            return Err(err(
                "mask",
                input,
                "empty (expected hex words such as ff,00000001)",
            ));
        }
        let words: Vec<&str> = s.split(',').collect();
        let mut set = BTreeSet::new();
        for (i, word) in words.iter().rev().enumerate() {
            if word.is_empty() || word.len() > 8 {
                return Err(err(
                    "mask",
                    input,
                    format!("word {} is not 1-8 hex digits", crate::quote::quoted(word)),
                ));
            }
            let bits = u32::from_str_radix(word, 16).map_err(|_| {
                err(
                    "mask",
                    input,
                    format!("word {} is not hexadecimal", crate::quote::quoted(word)),
                )
            })?;
            if bits == 0 {
                continue;
            }
            let base = u32::try_from(i)
                .ok()
                .and_then(|i| i.checked_mul(32))
                .filter(|b| *b <= MAX_CPU)
                .ok_or_else(|| err("mask", input, format!("more than {} CPUs", MAX_CPU + 1)))?;
            for bit in 0..32 {
                if bits & (1 << bit) != 0 {
                    set.insert(base + bit);
                }
            }
        }
        Ok(Self(set))
    }

    /// Formats in list form with ranges merged (`0-3,8,10-11`); empty set is `""`.
    pub fn to_list_string(&self) -> String {
        let mut out = String::new();
        let mut iter = self.0.iter().copied().peekable();
        while let Some(lo) = iter.next() {
            let mut hi = lo;
            while iter.peek() == Some(&(hi + 1)) {
                hi += 1;
                iter.next();
            }
            if !out.is_empty() {
                out.push(',');
            }
            if lo == hi {
                out.push_str(&lo.to_string());
            } else {
                out.push_str(&format!("{lo}-{hi}"));
            }
        }
        out
    }

    /// Formats in mask form as the kernel does: 8-digit words, most significant first.
    pub fn to_mask_string(&self) -> String {
        let nwords = self.0.last().map_or(1, |m| (*m / 32 + 1) as usize);
        let mut words = vec![0u32; nwords];
        for &c in &self.0 {
            words[(c / 32) as usize] |= 1 << (c % 32);
        }
        words
            .iter()
            .rev()
            .map(|w| format!("{w:08x}"))
            .collect::<Vec<_>>()
            .join(",")
    }

    pub fn insert(&mut self, cpu: u32) -> bool {
        self.0.insert(cpu)
    }
    pub fn remove(&mut self, cpu: u32) -> bool {
        self.0.remove(&cpu)
    }
    pub fn contains(&self, cpu: u32) -> bool {
        self.0.contains(&cpu)
    }
    pub fn len(&self) -> usize {
        self.0.len()
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    /// Lowest CPU, if any.
    pub fn first(&self) -> Option<u32> {
        self.0.first().copied()
    }
    /// Highest CPU, if any.
    pub fn last(&self) -> Option<u32> {
        self.0.last().copied()
    }
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = u32> + '_ {
        self.0.iter().copied()
    }
    pub fn to_vec(&self) -> Vec<u32> {
        self.0.iter().copied().collect()
    }
    pub fn union(&self, other: &CpuSet) -> CpuSet {
        CpuSet(self.0.union(&other.0).copied().collect())
    }
    pub fn intersection(&self, other: &CpuSet) -> CpuSet {
        CpuSet(self.0.intersection(&other.0).copied().collect())
    }
    pub fn difference(&self, other: &CpuSet) -> CpuSet {
        CpuSet(self.0.difference(&other.0).copied().collect())
    }
    pub fn is_subset(&self, other: &CpuSet) -> bool {
        self.0.is_subset(&other.0)
    }
    pub fn is_disjoint(&self, other: &CpuSet) -> bool {
        self.0.is_disjoint(&other.0)
    }
}

fn parse_cpu(s: &str, input: &str) -> Result<u32, CpuListError> {
    let t = s.trim();
    if t.is_empty() || !t.bytes().all(|b| b.is_ascii_digit()) {
        return Err(err(
            "list",
            input,
            format!(
                "{} is not a CPU number (expected e.g. 0-3,8,10-11)",
                crate::quote::quoted(t)
            ),
        ));
    }
    match t.parse::<u32>() {
        Ok(n) if n <= MAX_CPU => Ok(n),
        _ => Err(err(
            "list",
            input,
            format!("CPU {t} is above the supported maximum {MAX_CPU}"),
        )),
    }
}

impl FromIterator<u32> for CpuSet {
    fn from_iter<I: IntoIterator<Item = u32>>(iter: I) -> Self {
        CpuSet(iter.into_iter().collect())
    }
}

impl<'a> IntoIterator for &'a CpuSet {
    type Item = u32;
    type IntoIter = std::iter::Copied<std::collections::btree_set::Iter<'a, u32>>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.iter().copied()
    }
}

impl std::str::FromStr for CpuSet {
    type Err = CpuListError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        CpuSet::parse_list(s)
    }
}

impl fmt::Display for CpuSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_list_string())
    }
}

impl fmt::Debug for CpuSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CpuSet({})", self.to_list_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn set(v: &[u32]) -> CpuSet {
        v.iter().copied().collect()
    }

    #[test]
    fn parses_lists_as_sysfs_writes_them() {
        assert_eq!(
            CpuSet::parse_list("0-3,8,10-11\n").unwrap(),
            set(&[0, 1, 2, 3, 8, 10, 11])
        );
        assert_eq!(CpuSet::parse_list("5").unwrap(), set(&[5]));
        assert_eq!(CpuSet::parse_list("\n").unwrap(), CpuSet::new());
        assert_eq!(CpuSet::parse_list("1,0\0\0\0").unwrap(), set(&[0, 1]));
    }

    #[test]
    fn rejects_malformed_lists_with_the_input_named() {
        for bad in [
            "0-",
            "-3",
            "a",
            "1,,2",
            "3-1",
            "1-2-3",
            "0x10",
            "99999999999",
            "1 2",
            "0-70000",
        ] {
            let e = CpuSet::parse_list(bad).unwrap_err();
            let msg = e.to_string();
            assert!(msg.contains("invalid CPU list"), "{msg}");
            assert!(msg.contains(&format!("{bad:?}")), "{msg}");
        }
    }

    #[test]
    fn parses_masks_including_short_leading_words() {
        assert_eq!(CpuSet::parse_mask("00000003\n").unwrap(), set(&[0, 1]));
        assert_eq!(
            CpuSet::parse_mask("00000100,00000001").unwrap(),
            set(&[0, 40])
        );
        // 48-CPU kernels write a 16-bit leading word.
        assert_eq!(CpuSet::parse_mask("8000,00000000").unwrap(), set(&[47]));
        assert_eq!(CpuSet::parse_mask("0x5").unwrap(), set(&[0, 2]));
        assert_eq!(CpuSet::parse_mask("00000000").unwrap(), CpuSet::new());
        assert_eq!(
            CpuSet::parse_mask("ff\0\0").unwrap(),
            set(&[0, 1, 2, 3, 4, 5, 6, 7])
        );
    }

    #[test]
    fn rejects_malformed_masks() {
        for bad in ["", "g", "123456789", "ff,,ff", "0x"] {
            assert!(CpuSet::parse_mask(bad).is_err(), "{bad:?} should fail");
        }
    }

    #[test]
    fn formats_both_forms() {
        let s = set(&[0, 1, 2, 3, 8, 10, 11, 40]);
        assert_eq!(s.to_list_string(), "0-3,8,10-11,40");
        assert_eq!(s.to_mask_string(), "00000100,00000d0f");
        assert_eq!(CpuSet::new().to_mask_string(), "00000000");
        assert_eq!(CpuSet::new().to_list_string(), "");
    }

    #[test]
    fn serialises_as_a_plain_array() {
        assert_eq!(serde_json::to_string(&set(&[3, 1])).unwrap(), "[1,3]");
    }

    proptest! {
        #[test]
        fn list_round_trip(v in proptest::collection::btree_set(0u32..4096, 0..200)) {
            let s: CpuSet = v.into_iter().collect();
            prop_assert_eq!(CpuSet::parse_list(&s.to_list_string()).unwrap(), s);
        }

        #[test]
        fn mask_round_trip(v in proptest::collection::btree_set(0u32..4096, 0..200)) {
            let s: CpuSet = v.into_iter().collect();
            prop_assert_eq!(CpuSet::parse_mask(&s.to_mask_string()).unwrap(), s);
        }

        #[test]
        fn arbitrary_text_never_panics(t in "\\PC{0,40}") {
            let _ = CpuSet::parse_list(&t);
            let _ = CpuSet::parse_mask(&t);
        }

        #[test]
        fn list_like_text_never_panics(t in "[0-9,\\- ]{0,30}") {
            if let Ok(s) = CpuSet::parse_list(&t) {
                prop_assert_eq!(CpuSet::parse_list(&s.to_list_string()).unwrap(), s);
            }
        }
    }
}
