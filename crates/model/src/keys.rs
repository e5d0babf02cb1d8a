//! Names of the cell conditions the runner's experiments write into a cell's parameters
//! and the report reads back: the co-run form and partner of `corun`/`penalty` cells, the
//! offered rate and SMT state of `util` cells. One home, so writer and reader agree.

use serde::{Deserialize, Serialize};

/// Cell parameter: how a co-run cell ran ([`Form`]).
pub const FORM_PARAM: &str = "corun_form";
/// Cell parameter: the partner workload of a co-run cell.
pub const PARTNER_PARAM: &str = "corun_partner";
/// Cell parameter: `max`, or the percentage of the maximum offered (utilisation curve).
pub const RATE_PARAM: &str = "rate_pct";
/// Cell parameter: the SMT state of a utilisation step (`on`, `off`, or `as found`).
pub const SMT_PARAM: &str = "smt";

/// Where the partner runs relative to the measured workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Form {
    /// No partner: the reference.
    Alone,
    /// The partner on the other hardware thread of the same core.
    Sibling,
    /// The partner on another core: sharing caches, memory and the package, not a core.
    Cores,
}

impl Form {
    pub const ALL: [Form; 3] = [Form::Alone, Form::Sibling, Form::Cores];

    pub fn name(self) -> &'static str {
        match self {
            Form::Alone => "alone",
            Form::Sibling => "sibling",
            Form::Cores => "cores",
        }
    }

    /// How tables and charts call it.
    pub fn label(self) -> &'static str {
        match self {
            Form::Alone => "alone",
            Form::Sibling => "partner on the SMT sibling",
            Form::Cores => "partner on another core",
        }
    }

    pub fn parse(text: &str) -> Option<Form> {
        Form::ALL.into_iter().find(|f| f.name() == text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forms_parse_their_own_names_only() {
        for f in Form::ALL {
            assert_eq!(Form::parse(f.name()), Some(f));
        }
        assert_eq!(Form::parse("both"), None);
    }
}
