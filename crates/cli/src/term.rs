//! What the terminal allows: colour and width, decided once from the flags, the
//! environment and standard output, then read by the renderers.
//!
//! Colour follows the usual conventions: on only when standard output is a terminal,
//! off whenever `NO_COLOR` is set (to anything, even empty), and `--color
//! always|never` overrides both. Width is the terminal's, else `$COLUMNS`, else 80;
//! `--wide` lifts the limit so every table keeps its columns whole.

use std::io::IsTerminal;
use std::sync::OnceLock;

use clap::ColorChoice;
use smtlab_report::table::{Layout, wrap};

use crate::args::TermArgs;

/// Width assumed when neither the terminal nor `$COLUMNS` tells.
pub const DEFAULT_WIDTH: usize = 80;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Term {
    pub color: bool,
    /// Columns to fit; `None` with `--wide`.
    pub width: Option<usize>,
    pub quiet: bool,
}

impl Default for Term {
    /// What tests and library callers get: no colour, 80 columns.
    fn default() -> Self {
        Self {
            color: false,
            width: Some(DEFAULT_WIDTH),
            quiet: false,
        }
    }
}

static TERM: OnceLock<Term> = OnceLock::new();

pub fn init(args: &TermArgs) {
    let tty = std::io::stdout().is_terminal();
    let t = Term {
        color: decide_color(args.color, std::env::var_os("NO_COLOR").is_some(), tty),
        width: decide_width(
            args.wide,
            tty.then(terminal_columns).flatten(),
            std::env::var("COLUMNS").ok().as_deref(),
        ),
        quiet: args.quiet,
    };
    let _ = TERM.set(t);
}

pub fn get() -> Term {
    TERM.get().copied().unwrap_or_default()
}

/// The terminal's layout, as decided from the flags and the environment.
pub fn term_layout() -> Layout {
    let t = get();
    Layout {
        width: t.width,
        color: t.color,
    }
}

/// Prose broken between words at the terminal's width (tables are fitted by their engine).
pub fn fit(text: &str) -> String {
    wrap(text, term_layout())
}

/// A note for the user, not a result: standard error, silent with `--quiet`.
pub fn note(text: &str) {
    if !get().quiet {
        stderr_line(text);
    }
}

/// Writes one line to standard error. A closed pipe (`smtlab advise ... 2>&1 | head`)
/// loses the line quietly, where `eprintln!` would panic; standard output's
/// [`crate::output::emit`] does the same.
pub fn stderr_line(text: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr().lock(), "{text}");
}

/// [`note`] broken between words at the width (the live commands' notes are long) when
/// standard error is a terminal; in a log or a pipe a note stays one line, so it can be
/// found with grep.
pub fn note_fit(text: &str) {
    if std::io::stderr().is_terminal() {
        note(fit(text).trim_end());
    } else {
        note(text.trim_end());
    }
}

/// Each of `notes` as a `note:` line ([`note_fit`]).
pub fn notes<N: std::fmt::Display>(notes: impl IntoIterator<Item = N>) {
    for n in notes {
        note_fit(&format!("note: {n}"));
    }
}

/// [`note`] while a progress bar may be drawn: the bar is cleared for the line and
/// drawn again under it.
pub fn note_with(bar: &indicatif::ProgressBar, text: &str) {
    bar.suspend(|| note_fit(text));
}

pub fn decide_color(when: ColorChoice, no_color_set: bool, stdout_tty: bool) -> bool {
    match when {
        ColorChoice::Always => true,
        ColorChoice::Never => false,
        ColorChoice::Auto => stdout_tty && !no_color_set,
    }
}

pub fn decide_width(
    wide: bool,
    terminal: Option<usize>,
    columns_env: Option<&str>,
) -> Option<usize> {
    if wide {
        return None;
    }
    let from_env = columns_env.and_then(|c| c.trim().parse::<usize>().ok());
    // Narrower than 40 columns nothing fits anyway; treat it as a bad reading.
    Some(
        terminal
            .or(from_env)
            .filter(|&w| w >= 40)
            .unwrap_or(DEFAULT_WIDTH),
    )
}

/// A progress bar on standard error, drawn only when standard error is a terminal and
/// neither `--quiet` nor `hidden` (a command printing JSON or Markdown) asks for
/// silence. Results never go through it: they are written to standard output around it
/// with [`ProgressBar::suspend`], so `smtlab run > file` keeps every line.
///
/// `len` counts what the bar's position counts (cells, runs, sample slots); `template`
/// is [`COUNTED`], [`SLOTS`] or [`PLANNED`].
pub fn progress_bar(len: u64, hidden: bool, template: &str) -> indicatif::ProgressBar {
    use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
    if hidden || get().quiet || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr());
    // `wide_msg` takes what is left of the line, so the bar never wraps at 80 columns.
    bar.set_style(ProgressStyle::with_template(template).expect("the template is valid"));
    // No steady tick: a drawing thread would wake on a measured CPU in the middle of a
    // sample (a placement on every CPU has no other). The bar is drawn when the
    // session reports a sample or a cell, between samples.
    bar
}

fn terminal_columns() -> Option<usize> {
    // SAFETY: winsize is plain integers; all zeroes is a valid value.
    let mut ws: libc::winsize = unsafe { std::mem::zeroed() };
    // SAFETY: TIOCGWINSZ writes one winsize into the struct we own.
    let r = unsafe { libc::ioctl(libc::STDOUT_FILENO, libc::TIOCGWINSZ, &mut ws) };
    (r == 0 && ws.ws_col > 0).then_some(ws.ws_col as usize)
}

/// `[pos/len]` and the time left, for units a user counts (runs, cells).
pub const COUNTED: &str = "[{pos}/{len}] {bar:20} eta {eta:>3} {wide_msg}";
/// Counted in sample slots, most cells stop early: the estimate is a bound.
pub const SLOTS: &str = "{bar:20} eta≤{eta:>3} {wide_msg}";
/// Cells whose time left comes from the run's plan, not from the cells' count (cells
/// differ a thousandfold in length): the caller writes it into the message.
pub const PLANNED: &str = "[{pos}/{len}] {bar:20} {wide_msg}";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colour_only_on_a_terminal_and_never_with_no_color() {
        assert!(decide_color(ColorChoice::Auto, false, true));
        assert!(!decide_color(ColorChoice::Auto, false, false));
        assert!(!decide_color(ColorChoice::Auto, true, true));
        assert!(decide_color(ColorChoice::Always, true, false));
        assert!(!decide_color(ColorChoice::Never, false, true));
    }

    #[test]
    fn width_from_terminal_then_columns_then_80() {
        assert_eq!(decide_width(false, Some(132), Some("100")), Some(132));
        assert_eq!(decide_width(false, None, Some("100")), Some(100));
        assert_eq!(decide_width(false, None, Some("wide")), Some(80));
        assert_eq!(decide_width(false, None, None), Some(80));
        assert_eq!(decide_width(false, Some(5), None), Some(80));
        assert_eq!(decide_width(true, Some(132), None), None);
    }

    #[test]
    fn paint_is_plain_without_colour() {
        use smtlab_report::table::{Style, paint};
        assert_eq!(paint("x", Style::Bold, false), "x");
        assert_eq!(paint("x", Style::Bold, true), "\x1b[1mx\x1b[0m");
    }
}
