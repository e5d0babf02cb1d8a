//! Aligned text tables: [`Table`] pads columns to their widest cell (numbers
//! right-aligned) once every row is known; [`Columns`] gives rows printed one at a time,
//! as cells are measured, fixed widths.

pub struct Table {
    headers: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new<I: IntoIterator<Item = S>, S: Into<String>>(headers: I) -> Self {
        Self {
            headers: headers.into_iter().map(Into::into).collect(),
            rows: Vec::new(),
        }
    }

    pub fn row<I: IntoIterator<Item = S>, S: Into<String>>(&mut self, cells: I) {
        self.rows.push(cells.into_iter().map(Into::into).collect());
    }

    pub fn render(&self) -> String {
        let ncols = self.headers.len();
        let mut widths: Vec<usize> = self.headers.iter().map(|h| h.chars().count()).collect();
        for r in &self.rows {
            for (i, c) in r.iter().enumerate().take(ncols) {
                widths[i] = widths[i].max(c.chars().count());
            }
        }
        // A column is right-aligned when every non-empty cell looks numeric.
        let numeric: Vec<bool> = (0..ncols)
            .map(|i| {
                self.rows.iter().all(|r| {
                    r.get(i).is_none_or(|c| {
                        c.is_empty()
                            || c == "-"
                            || c.chars()
                                .all(|ch| ch.is_ascii_digit() || ".,+-%x ".contains(ch))
                    })
                })
            })
            .collect();
        let mut out = String::new();
        let line = |cells: &[String], out: &mut String| {
            let mut s = String::new();
            for i in 0..ncols {
                let c = cells.get(i).map(String::as_str).unwrap_or("");
                let pad = widths[i].saturating_sub(c.chars().count());
                if i > 0 {
                    s.push_str("  ");
                }
                if numeric[i] {
                    s.push_str(&" ".repeat(pad));
                    s.push_str(c);
                } else {
                    s.push_str(c);
                    s.push_str(&" ".repeat(pad));
                }
            }
            out.push_str(s.trim_end());
            out.push('\n');
        };
        line(&self.headers, &mut out);
        for r in &self.rows {
            line(r, &mut out);
        }
        out
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
    use super::{Columns, Table};

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
}
