//! What the page's sections share, kept apart from the page frame in
//! [`html`](crate::html) that lists them, so a section never reaches back into it:
//! [`Absent`], [`BR`] and the value a cell is drawn by ([`headline`]).

use maud::PreEscaped;
use smtlab_model::{CellRecord, Direction};

/// `<br/>` written XML-style: maud writes void elements as `<br>`, which an XML parser
/// refuses.
pub(crate) const BR: PreEscaped<&str> = PreEscaped("<br/>");

/// Why a section has nothing to show, named under the page's header.
pub(crate) struct Absent(pub(crate) String);

/// The value a cell is drawn and tabulated by, with its error bar: the mean and its 95%
/// CI for higher-is-better cells, the median and p25..p75 for lower-is-better ones.
pub(crate) fn headline(c: &CellRecord) -> (f64, f64, f64) {
    let s = &c.result.summary;
    match c.direction {
        Direction::Higher => (
            s.mean,
            s.mean - s.ci95_half_width,
            s.mean + s.ci95_half_width,
        ),
        Direction::Lower => (s.median, s.p25, s.p75),
    }
}
