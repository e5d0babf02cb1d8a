//! The terminal's tables: the one table engine of [`smtlab_report::table`] ([`Table`],
//! [`Columns`], [`wrap`]) with the terminal's [`Layout`] (width and colour as decided
//! from the flags and the environment).

pub use smtlab_report::table::{Columns, Layout, Table, wrap};

/// The terminal's layout, as decided from the flags and the environment.
pub fn term_layout() -> Layout {
    let t = crate::term::get();
    Layout {
        width: t.width,
        color: t.color,
    }
}

/// Prose broken between words at the terminal's width (tables are fitted by their engine).
pub fn fit(text: &str) -> String {
    wrap(text, term_layout())
}
