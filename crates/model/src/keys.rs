//! The conditions a cell was measured under that are the runner's, not the benchmark's:
//! the SMT state (`--smt off,on`, utilisation curves), the co-run form and partner of
//! `corun`/`penalty` cells, the offered rate of a utilisation step, and the
//! core-scheduling cookie of a security-mode cell ([`CookieScope`], [`SecurityMode`]:
//! `smt-on`, `coresched`, `smt-off` are the SMT state plus the cookie). They are typed
//! fields of the cell key ([`Conditions`], `CellKey::conditions`), so writers and readers
//! agree by type rather than by a string both must spell alike.
//!
//! Stored flat: the store's `params` columns and the CSV/text `params` carry each
//! condition as a `name=value` pair beside the benchmark's parameters, under the names
//! below, exactly as smtlab wrote them before conditions were typed. [`Conditions::pairs`]
//! writes them and [`Conditions::take_from`] reads them back (also from results JSON
//! written before the `conditions` field existed), so old and new databases read alike.
//! No benchmark may declare a parameter of these names (the catalog's tests check).

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Stored/flat name of [`Conditions::form`].
pub const FORM_PARAM: &str = "corun_form";
/// Stored/flat name of [`Conditions::partner`].
pub const PARTNER_PARAM: &str = "corun_partner";
/// Stored/flat name of [`Conditions::rate`].
pub const RATE_PARAM: &str = "rate_pct";
/// Stored/flat name of [`Conditions::smt`].
pub const SMT_PARAM: &str = "smt";
/// Stored/flat name of [`Conditions::cookie`].
pub const COOKIE_PARAM: &str = "core_cookie";

named_enum! {
    /// Where the partner runs relative to the measured workload.
    #[derive(Hash, PartialOrd, Ord, Serialize, Deserialize)]
    #[serde(rename_all = "lowercase")]
    pub enum Form {
        /// No partner: the reference.
        Alone = "alone",
        /// The partner on the other hardware thread of the same core.
        Sibling = "sibling",
        /// The partner on another core: sharing caches, memory and the package, not a core.
        Cores = "cores",
    }
}

impl Form {
    /// How tables and charts call it.
    pub fn label(self) -> &'static str {
        match self {
            Form::Alone => "alone",
            Form::Sibling => "partner on the SMT sibling",
            Form::Cores => "partner on another core",
        }
    }
}

named_enum! {
    /// The SMT state a cell was measured in, named as keys, tables and JSON name it.
    #[derive(Hash, PartialOrd, Ord)]
    pub enum SmtState {
        /// SMT switched off for the cell (`--smt off`).
        Off = "off",
        /// SMT switched on for the cell (`--smt on`).
        On = "on",
        /// Measured in the state the machine was found in, without switching (a
        /// utilisation curve without `--smt`).
        AsFound = "as found",
    }
}

impl SmtState {
    /// `Some(true)` for on, `Some(false)` for off, `None` for the state found.
    pub fn is_on(self) -> Option<bool> {
        match self {
            SmtState::On => Some(true),
            SmtState::Off => Some(false),
            SmtState::AsFound => None,
        }
    }
}

named_enum! {
    /// Which of the workload's tasks one core-scheduling cookie covers: the kernel's
    /// `PIDTYPE_*` of `prctl(PR_SCHED_CORE, PR_SCHED_CORE_CREATE, pid, type)`, named as
    /// keys and `--security` name it. Tasks of one cookie may share a core; a task of
    /// another cookie (or of none) never runs on its sibling at the same time, which is
    /// then forced idle.
    #[derive(Hash, PartialOrd, Ord)]
    pub enum CookieScope {
        /// `PIDTYPE_PID`: the cell's own thread, before the workload starts; every thread
        /// and process the workload then starts inherits that one cookie.
        Thread = "thread",
        /// `PIDTYPE_TGID`: each process the workload started, its threads together.
        Process = "process",
        /// `PIDTYPE_PGID`: the workload's process group, all of it in one cookie.
        ProcessGroup = "pgroup",
        /// Every process of each cgroup the workload's processes are in (the cgroup smtlab
        /// makes for what it starts), one cookie per cgroup: its processes that left their
        /// process group included.
        Cgroup = "cgroup",
    }
}

named_enum! {
    /// What protects a workload from its SMT sibling: nothing (`smt-on`), core scheduling
    /// (`coresched`: SMT on, the workload in a cookie of its own) or no sibling at all
    /// (`smt-off`). Not a condition of its own: read from the SMT state and the cookie
    /// ([`Conditions::security`]), so one vocabulary keys both.
    #[derive(Hash, PartialOrd, Ord)]
    pub enum SecurityMode {
        SmtOn = "smt-on",
        CoreSched = "coresched",
        SmtOff = "smt-off",
    }
}

impl SecurityMode {
    /// The conditions a cell of this mode is keyed with (`scope`: the cookie's, for
    /// `coresched`).
    pub fn conditions(self, scope: CookieScope) -> Conditions {
        match self {
            SecurityMode::SmtOn => Conditions::smt(SmtState::On),
            SecurityMode::CoreSched => Conditions {
                cookie: Some(scope),
                ..Conditions::smt(SmtState::On)
            },
            SecurityMode::SmtOff => Conditions::smt(SmtState::Off),
        }
    }
}

/// The load a utilisation step offered: the maximum, or a share of it in percent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum OfferedRate {
    /// As fast as the machine serves (the step that finds the maximum).
    Max,
    /// This percentage of the maximum.
    Percent(u32),
}

impl OfferedRate {
    /// The percentage of the maximum, `None` for the maximum step itself.
    pub fn percent(self) -> Option<u32> {
        match self {
            OfferedRate::Max => None,
            OfferedRate::Percent(p) => Some(p),
        }
    }

    /// `max` or the whole percentage (`25`).
    pub fn parse(text: &str) -> Option<OfferedRate> {
        match text {
            "max" => Some(OfferedRate::Max),
            t => t.parse().ok().map(OfferedRate::Percent),
        }
    }
}

impl fmt::Display for OfferedRate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OfferedRate::Max => f.write_str("max"),
            OfferedRate::Percent(p) => write!(f, "{p}"),
        }
    }
}

/// A value serialised as its text and read back with a parser (`on`, `max`, `25`).
macro_rules! text_serde {
    ($t:ty, $what:literal) => {
        impl Serialize for $t {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_str(self)
            }
        }
        impl<'de> Deserialize<'de> for $t {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let text = String::deserialize(d)?;
                <$t>::parse(&text).ok_or_else(|| {
                    serde::de::Error::custom(format!("{text:?}: expected {}", $what))
                })
            }
        }
    };
}
text_serde!(SmtState, "on, off or as found");
text_serde!(OfferedRate, "max or a whole percentage");
text_serde!(CookieScope, "thread, process, pgroup or cgroup");

/// The runner's conditions of a cell; every field is `None` for a plain benchmark cell.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Conditions {
    /// The SMT state the cell was measured in, when the run switched it or a
    /// utilisation curve recorded it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub smt: Option<SmtState>,
    /// How a co-run cell ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub form: Option<Form>,
    /// The partner workload of a co-run cell (`none` on an `alone` cell).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partner: Option<String>,
    /// The load offered in a utilisation step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<OfferedRate>,
    /// The core-scheduling cookie the workload ran in (a `coresched` cell; on a co-run
    /// cell, each side in a cookie of its own: distrusting tenants).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cookie: Option<CookieScope>,
}

impl Conditions {
    pub fn is_empty(&self) -> bool {
        *self == Conditions::default()
    }

    /// Only the SMT state.
    pub fn smt(state: SmtState) -> Conditions {
        Conditions {
            smt: Some(state),
            ..Conditions::default()
        }
    }

    /// The security mode these conditions are one of: `None` where the SMT state was
    /// not switched (nor a cookie asked for).
    pub fn security(&self) -> Option<SecurityMode> {
        match (self.smt, self.cookie) {
            (_, Some(_)) => Some(SecurityMode::CoreSched),
            (Some(SmtState::On), None) => Some(SecurityMode::SmtOn),
            (Some(SmtState::Off), None) => Some(SecurityMode::SmtOff),
            _ => None,
        }
    }

    /// The same conditions without the SMT state: what pairs an `off` cell with its
    /// `on` cell.
    pub fn without_smt(&self) -> Conditions {
        Conditions {
            smt: None,
            ..self.clone()
        }
    }

    /// The conditions as flat `name=value` pairs, in the names the store and the
    /// text/CSV outputs use (module docs).
    pub fn pairs(&self) -> Vec<(&'static str, String)> {
        [
            (FORM_PARAM, self.form.map(|f| f.to_string())),
            (PARTNER_PARAM, self.partner.clone()),
            (RATE_PARAM, self.rate.map(|r| r.to_string())),
            (SMT_PARAM, self.smt.map(|s| s.to_string())),
            (COOKIE_PARAM, self.cookie.map(|c| c.to_string())),
        ]
        .into_iter()
        .filter_map(|(name, value)| Some((name, value?)))
        .collect()
    }

    /// `params` with the conditions added as flat pairs: how the store keeps a key
    /// and how text and CSV show it.
    pub fn flatten(&self, params: &BTreeMap<String, String>) -> BTreeMap<String, String> {
        let mut all = params.clone();
        all.extend(self.pairs().into_iter().map(|(k, v)| (k.to_string(), v)));
        all
    }

    /// The compatibility reader: takes the flat condition pairs out of `params` (a
    /// stored key, or results JSON written before conditions were typed) and returns
    /// them typed. A value that does not parse stays in `params` as it was, so
    /// nothing stored is lost.
    pub fn take_from(params: &mut BTreeMap<String, String>) -> Conditions {
        fn take<T>(
            params: &mut BTreeMap<String, String>,
            name: &str,
            parse: impl Fn(&str) -> Option<T>,
        ) -> Option<T> {
            let v = parse(params.get(name)?)?;
            params.remove(name);
            Some(v)
        }
        Conditions {
            smt: take(params, SMT_PARAM, SmtState::parse),
            form: take(params, FORM_PARAM, Form::parse),
            partner: take(params, PARTNER_PARAM, |p| Some(p.to_string())),
            rate: take(params, RATE_PARAM, OfferedRate::parse),
            cookie: take(params, COOKIE_PARAM, CookieScope::parse),
        }
    }

    /// Merges conditions read from flat pairs into these (typed fields win).
    pub(crate) fn or(self, other: Conditions) -> Conditions {
        Conditions {
            smt: self.smt.or(other.smt),
            form: self.form.or(other.form),
            partner: self.partner.or(other.partner),
            rate: self.rate.or(other.rate),
            cookie: self.cookie.or(other.cookie),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::CellKey;

    #[test]
    fn forms_parse_their_own_names_only() {
        for f in Form::ALL {
            assert_eq!(Form::parse(f.name()), Some(f));
        }
        assert_eq!(Form::parse("both"), None);
    }

    #[test]
    fn states_and_rates_parse_their_own_text_only() {
        for s in SmtState::ALL {
            assert_eq!(SmtState::parse(s.name()), Some(s));
        }
        assert_eq!(SmtState::parse("maybe"), None);
        assert_eq!(OfferedRate::parse("max"), Some(OfferedRate::Max));
        assert_eq!(OfferedRate::parse("25"), Some(OfferedRate::Percent(25)));
        assert_eq!(OfferedRate::Percent(25).to_string(), "25");
        assert_eq!(OfferedRate::parse("25.5"), None);
    }

    #[test]
    fn flat_pairs_round_trip_and_leave_other_params_alone() {
        let c = Conditions {
            smt: Some(SmtState::AsFound),
            form: Some(Form::Sibling),
            partner: Some("int-ops".into()),
            rate: Some(OfferedRate::Percent(50)),
            cookie: Some(CookieScope::ProcessGroup),
        };
        let params: BTreeMap<String, String> = [("size".to_string(), "4KiB".to_string())].into();
        let mut flat = c.flatten(&params);
        assert_eq!(flat.len(), 6);
        assert_eq!(flat[COOKIE_PARAM], "pgroup");
        assert_eq!(flat[SMT_PARAM], "as found");
        assert_eq!(Conditions::take_from(&mut flat), c);
        assert_eq!(flat, params);
    }

    #[test]
    fn a_flat_value_that_does_not_parse_stays_a_parameter() {
        let mut p: BTreeMap<String, String> = [
            (SMT_PARAM.to_string(), "sometimes".to_string()),
            (RATE_PARAM.to_string(), "max".to_string()),
        ]
        .into();
        let c = Conditions::take_from(&mut p);
        assert_eq!(c.smt, None);
        assert_eq!(c.rate, Some(OfferedRate::Max));
        assert_eq!(p[SMT_PARAM], "sometimes");
    }

    #[test]
    fn conditions_serialise_as_typed_words_and_skip_what_is_absent() {
        let c = Conditions::smt(SmtState::On);
        assert_eq!(serde_json::to_string(&c).unwrap(), r#"{"smt":"on"}"#);
        let back: Conditions = serde_json::from_str(r#"{"rate":"max","form":"cores"}"#).unwrap();
        assert_eq!(back.rate, Some(OfferedRate::Max));
        assert_eq!(back.form, Some(Form::Cores));
        assert!(serde_json::from_str::<Conditions>(r#"{"smt":"maybe"}"#).is_err());
    }

    #[test]
    fn a_key_written_before_conditions_were_typed_reads_them_typed() {
        let old = r#"{"benchmark":"open-loop-int","params":{"job_us":"200","rate_pct":"max","smt":"on"},"placement":"1c2t"}"#;
        let k: CellKey = serde_json::from_str(old).unwrap();
        assert_eq!(k.conditions.smt, Some(SmtState::On));
        assert_eq!(k.conditions.rate, Some(OfferedRate::Max));
        assert_eq!(k.params.keys().collect::<Vec<_>>(), ["job_us"]);
        // Written back, the conditions have their own field.
        let json = serde_json::to_string(&k).unwrap();
        assert!(
            json.contains(r#""conditions":{"smt":"on","rate":"max"}"#),
            "{json}"
        );
        assert_eq!(serde_json::from_str::<CellKey>(&json).unwrap(), k);
        let corun = r#"{"benchmark":"int-ops","params":{"corun_form":"sibling","corun_partner":"mem-read"},"placement":"corun-sibling"}"#;
        let k: CellKey = serde_json::from_str(corun).unwrap();
        assert_eq!(k.conditions.form, Some(Form::Sibling));
        assert_eq!(k.conditions.partner.as_deref(), Some("mem-read"));
        assert!(k.params.is_empty());
    }

    #[test]
    fn security_modes_are_the_smt_state_and_the_cookie() {
        for m in SecurityMode::ALL {
            assert_eq!(SecurityMode::parse(m.name()), Some(m));
            let c = m.conditions(CookieScope::Process);
            assert_eq!(c.security(), Some(m));
        }
        assert_eq!(SecurityMode::parse("smt"), None);
        assert_eq!(Conditions::smt(SmtState::AsFound).security(), None);
        assert_eq!(Conditions::default().security(), None);
        let c = SecurityMode::CoreSched.conditions(CookieScope::Thread);
        assert_eq!(c.smt, Some(SmtState::On));
        assert_eq!(
            serde_json::to_string(&c).unwrap(),
            r#"{"smt":"on","cookie":"thread"}"#
        );
        for s in CookieScope::ALL {
            assert_eq!(CookieScope::parse(s.name()), Some(s));
        }
        assert_eq!(CookieScope::parse("cgroups"), None);
    }

    #[test]
    fn setting_the_smt_state_changes_the_condition_only() {
        let mut k = CellKey {
            benchmark: "int-ops".into(),
            params: BTreeMap::new(),
            conditions: Conditions::default(),
            placement: "1c2t".into(),
        };
        let plain = k.clone();
        k.conditions.smt = Some(SmtState::Off);
        assert!(!k.same_variant(&plain));
        assert_eq!(k.flat_params()[SMT_PARAM], "off");
        k.conditions.smt = None;
        assert_eq!(k, plain);
    }
}
