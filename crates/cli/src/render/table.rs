//! The terminal's tables: the one table engine of [`smtlab_report::table`] ([`Table`],
//! [`Columns`], [`wrap`]), drawn to the [`Layout`] the terminal allows (width and colour,
//! decided in `term`).

pub use smtlab_report::table::{Columns, Layout, Table, wrap};
