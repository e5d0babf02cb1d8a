//! Quoting input in error messages: one line, and short, however long the input was
//! (a 1 MB sysfs file must not become a 1 MB error line, a 5,000-byte `--db` path not
//! a 5,000-byte error): [`quoted`] for text, [`path`] for paths.

/// Most bytes of an input an error quotes; the rest is counted, not shown.
pub const QUOTE_MAX_BYTES: usize = 200;

/// `input` as a Rust string literal (`"..."`, control characters escaped), cut to
/// [`QUOTE_MAX_BYTES`] on a character boundary, with how much was left out.
pub fn quoted(input: &str) -> String {
    if input.len() <= QUOTE_MAX_BYTES {
        return format!("{input:?}");
    }
    let mut end = QUOTE_MAX_BYTES;
    while !input.is_char_boundary(end) {
        end -= 1;
    }
    format!("{:?}... ({} bytes in all)", &input[..end], input.len())
}

/// A path as an error names it: as it is when it is short and plain, else with control
/// characters escaped (no raw newline can split the error's line) and cut to
/// [`QUOTE_MAX_BYTES`] with how much was left out. The one way every error of smtlab
/// shows a path it was given.
pub fn path(p: &std::path::Path) -> String {
    let text = p.to_string_lossy();
    let plain = |c: char| !c.is_control();
    if text.len() <= QUOTE_MAX_BYTES && text.chars().all(plain) {
        return text.into_owned();
    }
    let mut shown = String::new();
    for c in text.chars() {
        let escaped: String = if plain(c) {
            c.to_string()
        } else {
            c.escape_debug().collect()
        };
        if shown.len() + escaped.len() > QUOTE_MAX_BYTES {
            return format!("{shown}... ({} bytes in all)", p.as_os_str().len());
        }
        shown.push_str(&escaped);
    }
    shown
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_shown_whole_when_plain_and_escaped_and_cut_otherwise() {
        use std::path::Path;
        assert_eq!(path(Path::new("/tmp/r.db")), "/tmp/r.db");
        assert_eq!(path(Path::new("/tmp/a\nb")), "/tmp/a\\nb");
        let long = format!("/tmp/{}", "x\n".repeat(3000));
        let shown = path(Path::new(&long));
        assert!(!shown.contains('\n'), "{shown}");
        assert!(shown.len() <= QUOTE_MAX_BYTES + 30, "{}", shown.len());
        assert!(shown.ends_with("... (6005 bytes in all)"), "{shown}");
        let wide = format!("/{}", "é".repeat(300));
        assert!(path(Path::new(&wide)).starts_with("/éé"));
        assert!(path(Path::new(&wide)).len() <= QUOTE_MAX_BYTES + 30);
    }

    #[test]
    fn short_inputs_are_quoted_whole_and_long_ones_cut() {
        assert_eq!(quoted("a\nb"), "\"a\\nb\"");
        let long = "é".repeat(500_000);
        let q = quoted(&long);
        assert!(q.len() < QUOTE_MAX_BYTES + 40, "{}", q.len());
        assert!(q.ends_with("... (1000000 bytes in all)"), "{q}");
    }
}
