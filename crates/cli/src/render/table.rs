//! The terminal's tables: the one table engine of [`smtlab_report::table`] ([`Table`],
//! [`Columns`], [`wrap`]) with the terminal's [`Layout`] (width and colour as decided
//! from the flags and the environment).

pub use smtlab_report::table::{Columns, Table, wrap};

/// How a table is drawn: the width to fit (`None`: as wide as it needs) and colour.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    pub width: Option<usize>,
    pub color: bool,
}

impl Layout {
    /// The terminal's, as decided from the flags and the environment.
    pub fn term() -> Self {
        let t = crate::term::get();
        Self {
            width: t.width,
            color: t.color,
        }
    }

    #[cfg(test)]
    pub fn fixed(width: usize) -> Self {
        Self {
            width: Some(width),
            color: false,
        }
    }
}

impl From<Layout> for smtlab_report::table::Layout {
    fn from(l: Layout) -> Self {
        Self {
            width: l.width,
            color: l.color,
        }
    }
}
