//! The aligned text tables of the terminal and of text reports: [`Table`] pads columns
//! to their widest cell (numbers right-aligned) once every row is known and, given a
//! width, fits them to it; [`Columns`] gives rows printed one at a time, as cells are
//! measured, fixed widths; [`wrap`] fits prose to a width.
//!
//! Fitting never cuts a number: only columns marked [`Table::shrink`] (names, models,
//! prose) give up characters, their cells ending in `…`. A row may carry a detail line
//! (a description, a long parameter list) printed under it on its own, so the columns
//! stay narrow; detail lines are cut to the width too, as prose.

pub struct Table {
    headers: Vec<String>,
    rows: Vec<(Vec<String>, Option<String>)>,
    shrink: Vec<bool>,
    /// Right-aligned columns when set; otherwise numeric-looking columns are.
    right: Option<Vec<usize>>,
}

/// How a table is drawn: the width to fit (`None`: as wide as it needs) and colour.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    pub width: Option<usize>,
    pub color: bool,
}

impl Layout {
    /// As wide as the cells need, no colour: for files, pages and tests.
    pub fn plain() -> Self {
        Self {
            width: None,
            color: false,
        }
    }

    /// Fitted to `width` characters, no colour.
    pub fn fixed(width: usize) -> Self {
        Self {
            width: Some(width),
            color: false,
        }
    }
}

/// The two terminal styles the tables use; nothing when colour is off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    Bold,
    Dim,
}

/// `text` in `style` when `color`, else as it is.
pub fn paint(text: &str, style: Style, color: bool) -> String {
    if !color || text.is_empty() {
        return text.to_string();
    }
    let code = match style {
        Style::Bold => "1",
        Style::Dim => "2",
    };
    format!("\x1b[{code}m{text}\x1b[0m")
}

/// Shrinking stops here: fewer characters than this say nothing.
const MIN_SHRUNK: usize = 8;

impl Table {
    pub fn new<I: IntoIterator<Item = S>, S: Into<String>>(headers: I) -> Self {
        let headers: Vec<String> = headers.into_iter().map(Into::into).collect();
        let n = headers.len();
        Self {
            headers,
            rows: Vec::new(),
            shrink: vec![false; n],
            right: None,
        }
    }

    /// Lets column `col` be cut (with `…`) when the table is wider than its layout.
    pub fn shrink(mut self, col: usize) -> Self {
        if let Some(s) = self.shrink.get_mut(col) {
            *s = true;
        }
        self
    }

    /// Right-aligns exactly the columns `cols` (numbers), instead of those whose cells
    /// all look numeric.
    pub fn right(mut self, cols: &[usize]) -> Self {
        self.right = Some(cols.to_vec());
        self
    }

    pub fn row<I: IntoIterator<Item = S>, S: Into<String>>(&mut self, cells: I) {
        self.rows
            .push((cells.into_iter().map(Into::into).collect(), None));
    }

    /// A row followed by `detail` on lines of their own (one per line of `detail`),
    /// indented.
    pub fn row_with_detail<I: IntoIterator<Item = S>, S: Into<String>>(
        &mut self,
        cells: I,
        detail: impl Into<String>,
    ) {
        let d: String = detail.into();
        self.rows.push((
            cells.into_iter().map(Into::into).collect(),
            (!d.is_empty()).then_some(d),
        ));
    }

    /// As wide as the cells need, no colour.
    pub fn render(&self) -> String {
        self.render_to(Layout::plain())
    }

    /// The table fitted to `width` less an indent of two spaces, each line indented
    /// (a table under a heading line).
    pub fn indented(&self, width: usize) -> String {
        let mut out = String::new();
        for line in self
            .render_to(Layout::fixed(width.saturating_sub(2)))
            .lines()
        {
            out.push_str("  ");
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }

    pub fn render_to(&self, layout: impl Into<Layout>) -> String {
        let layout: Layout = layout.into();
        let ncols = self.headers.len();
        let mut widths: Vec<usize> = self.headers.iter().map(|h| len(h)).collect();
        for (r, _) in &self.rows {
            for (i, c) in r.iter().enumerate().take(ncols) {
                widths[i] = widths[i].max(len(c));
            }
        }
        // A column is right-aligned when every non-empty cell looks numeric.
        let numeric: Vec<bool> = (0..ncols)
            .map(|i| match &self.right {
                Some(right) => right.contains(&i),
                None => self
                    .rows
                    .iter()
                    .all(|(r, _)| r.get(i).is_none_or(|c| looks_numeric(c))),
            })
            .collect();
        if let Some(limit) = layout.width {
            fit(&mut widths, &self.shrink, &numeric, &self.headers, limit);
        }
        let mut out = String::new();
        let line = |cells: &[String], header: bool, out: &mut String| {
            let mut s = String::new();
            for i in 0..ncols {
                let raw = cells.get(i).map(String::as_str).unwrap_or("");
                let c = if len(raw) > widths[i] && !looks_numeric(raw) {
                    cut(raw, widths[i])
                } else {
                    raw.to_string()
                };
                let pad = widths[i].saturating_sub(len(&c));
                if i > 0 {
                    s.push_str("  ");
                }
                let c = if header {
                    paint(&c, Style::Bold, layout.color)
                } else {
                    c
                };
                if numeric[i] {
                    s.push_str(&" ".repeat(pad));
                    s.push_str(&c);
                } else {
                    s.push_str(&c);
                    s.push_str(&" ".repeat(pad));
                }
            }
            out.push_str(s.trim_end());
            out.push('\n');
        };
        line(&self.headers, true, &mut out);
        for (r, detail) in &self.rows {
            line(r, false, &mut out);
            for d in detail.iter().flat_map(|d| d.lines()) {
                let text = format!("  {d}");
                let text = match layout.width {
                    Some(w) if len(&text) > w => cut(&text, w),
                    _ => text,
                };
                out.push_str(&paint(&text, Style::Dim, layout.color));
                out.push('\n');
            }
        }
        out
    }
}

fn len(s: &str) -> usize {
    s.chars().count()
}

/// Numbers, ratios (`1.25x`), percentages, ranges and CPU lists (`0-3,8`), exponents
/// (`5.6e-10`). At least one digit, so words made of those letters stay text.
fn looks_numeric(c: &str) -> bool {
    c.is_empty()
        || c == "-"
        || (c.chars().any(|ch| ch.is_ascii_digit())
            && c.chars()
                .all(|ch| ch.is_ascii_digit() || ".,+-%xe ".contains(ch)))
}

/// `s` in `width` characters, the last one `…`.
fn cut(s: &str, width: usize) -> String {
    if width == 0 {
        return String::new();
    }
    let mut out: String = s.chars().take(width - 1).collect();
    out = out.trim_end().to_string();
    out.push('…');
    out
}

/// Narrows the shrinkable columns, widest first, until the row fits `limit` or none can
/// give more. Numeric columns and headers are never cut.
fn fit(widths: &mut [usize], shrink: &[bool], numeric: &[bool], headers: &[String], limit: usize) {
    let total = |w: &[usize]| w.iter().sum::<usize>() + 2 * w.len().saturating_sub(1);
    let floor = |i: usize| len(&headers[i]).max(MIN_SHRUNK);
    while total(widths) > limit {
        let widest = (0..widths.len())
            .filter(|&i| shrink[i] && !numeric[i] && widths[i] > floor(i))
            .max_by_key(|&i| widths[i]);
        let Some(i) = widest else { break };
        let excess = total(widths) - limit;
        // Take from the widest column down to the next widest, so several long columns
        // share the cut instead of one losing everything.
        let next = (0..widths.len())
            .filter(|&j| j != i && shrink[j] && !numeric[j])
            .map(|j| widths[j])
            .max()
            .unwrap_or(0);
        let step = excess
            .min(widths[i] - floor(i))
            .min((widths[i] - next).max(1));
        widths[i] -= step;
    }
}

/// Fixed column widths for rows printed as they come (`bench` rows, `run` cell lines):
/// each cell padded to its width plus one space, the last column as it is.
#[derive(Debug, Clone, Copy)]
pub struct Columns<const N: usize>(pub [usize; N]);

impl<const N: usize> Columns<N> {
    /// One line (with its newline); cells beyond the widths follow unpadded.
    pub fn line(&self, cells: &[&str]) -> String {
        let mut s = String::new();
        for (i, c) in cells.iter().enumerate() {
            match self.0.get(i) {
                Some(&w) => s.push_str(&format!("{c:<w$} ")),
                None => s.push_str(c),
            }
        }
        format!("{}\n", s.trim_end())
    }
}

#[cfg(test)]
mod tests {
    use super::{Columns, Layout, Table};

    #[test]
    fn explicit_right_columns_override_the_guess() {
        let mut t = Table::new(["a", "b"]).right(&[0]);
        t.row(["x", "1"]);
        t.row(["yyy", "22"]);
        assert_eq!(t.render(), "  a  b\n  x  1\nyyy  22\n");
    }

    #[test]
    fn fixed_columns_pad_all_but_the_last() {
        let c = Columns([4, 2]);
        assert_eq!(c.line(&["ab", "c", "rest of it"]), "ab   c  rest of it\n");
        assert_eq!(c.line(&["toolong", "x"]), "toolong x\n");
    }

    #[test]
    fn aligns_text_left_and_numbers_right() {
        let mut t = Table::new(["name", "n"]);
        t.row(["a", "10"]);
        t.row(["bbb", "2"]);
        assert_eq!(t.render(), "name   n\na     10\nbbb    2\n");
    }

    #[test]
    fn fits_the_width_by_cutting_marked_text_columns_only() {
        let mut t = Table::new(["id", "model", "value"]).shrink(1);
        t.row([
            "1",
            "Intel(R) Xeon(R) Platinum 8375C CPU @ 2.90GHz",
            "123456.789",
        ]);
        let out = t.render_to(Layout::fixed(40));
        for l in out.lines() {
            assert!(l.chars().count() <= 40, "{l:?}");
        }
        assert!(out.contains("Intel(R) Xeon(R)"), "{out}");
        assert!(out.contains('…'), "{out}");
        assert!(out.contains("123456.789"), "numbers stay whole: {out}");
        // Wide: everything in full.
        assert!(t.render().contains("2.90GHz"));
    }

    #[test]
    fn unmarked_columns_and_numbers_are_never_cut_even_when_too_wide() {
        let mut t = Table::new(["a", "b"]);
        t.row(["x".repeat(50), "1234567890".into()]);
        let out = t.render_to(Layout::fixed(20));
        assert!(out.contains(&"x".repeat(50)));
        assert!(out.contains("1234567890"));
    }

    #[test]
    fn details_go_on_their_own_line_cut_to_the_width() {
        let mut t = Table::new(["name", "n"]);
        t.row_with_detail(["a", "1"], "word ".repeat(30));
        let out = t.render_to(Layout::fixed(30));
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 3, "{out}");
        assert!(lines[2].starts_with("  word"));
        assert!(lines[2].ends_with('…') && lines[2].chars().count() <= 30);
    }

    #[test]
    fn colour_wraps_the_header_without_moving_the_columns() {
        let mut t = Table::new(["name", "n"]);
        t.row(["a", "10"]);
        let plain = t.render_to(Layout::fixed(80));
        let colour = t.render_to(Layout {
            width: Some(80),
            color: true,
        });
        assert!(colour.contains("\x1b[1m"));
        let stripped = colour.replace("\x1b[1m", "").replace("\x1b[0m", "");
        assert_eq!(stripped, plain);
    }
}

/// Prose fitted to a width: `text` broken between words, every continuation indented
/// two spaces past the line's own indentation. Words are never cut (a word longer than
/// the width stays whole on its own line), so no number is split. One trailing newline.
pub fn wrap(text: &str, layout: impl Into<Layout>) -> String {
    let layout: Layout = layout.into();
    let mut out = String::new();
    for line in text.lines() {
        let Some(width) = layout.width.filter(|&w| len(line) > w) else {
            out.push_str(line);
            out.push('\n');
            continue;
        };
        let indent = len(line) - len(line.trim_start());
        let cont = " ".repeat(indent + 2);
        let mut cur = " ".repeat(indent);
        let mut has_word = false;
        for word in line.split_whitespace() {
            if has_word && len(&cur) + 1 + len(word) > width {
                out.push_str(cur.trim_end());
                out.push('\n');
                cur = cont.clone();
                has_word = false;
            }
            if has_word {
                cur.push(' ');
            }
            cur.push_str(word);
            has_word = true;
        }
        out.push_str(cur.trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod wrap_tests {
    use super::{Layout, wrap};

    #[test]
    fn wraps_between_words_and_keeps_long_words_whole() {
        let text = "note: a b 123456789.123 and then some more words here";
        let out = wrap(text, Layout::fixed(20));
        for l in out.lines() {
            assert!(l.chars().count() <= 20 || !l.trim().contains(' '), "{l:?}");
        }
        assert!(out.contains("123456789.123"));
        assert_eq!(
            out.split_whitespace().collect::<Vec<_>>(),
            text.split_whitespace().collect::<Vec<_>>()
        );
        assert!(out.lines().skip(1).all(|l| l.starts_with("  ")));
        assert_eq!(wrap("short", Layout::fixed(20)), "short\n");
    }
}
