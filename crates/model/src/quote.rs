//! Quoting input in error messages: one line, and short, however long the input was
//! (a 1 MB sysfs file must not become a 1 MB error line).

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_inputs_are_quoted_whole_and_long_ones_cut() {
        assert_eq!(quoted("a\nb"), "\"a\\nb\"");
        let long = "é".repeat(500_000);
        let q = quoted(&long);
        assert!(q.len() < QUOTE_MAX_BYTES + 40, "{}", q.len());
        assert!(q.ends_with("... (1000000 bytes in all)"), "{q}");
    }
}
