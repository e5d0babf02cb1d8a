//! A minimal aligned text table: columns padded to their widest cell, numbers right-aligned.

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

#[cfg(test)]
mod tests {
    use super::Table;

    #[test]
    fn aligns_text_left_and_numbers_right() {
        let mut t = Table::new(["name", "n"]);
        t.row(["a", "10"]);
        t.row(["bbb", "2"]);
        assert_eq!(t.render(), "name   n\na     10\nbbb    2\n");
    }
}
