//! The command's output as it streams by: each line goes through the `--throughput`
//! regex until it matches, and only the last few KiB are kept for error messages, so a
//! command printing gigabytes costs no memory.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

use regex::Regex;

/// Longest piece of the command's output quoted in an error.
const QUOTE_MAX: usize = 160;
/// Output kept for error messages (the end of it).
const TAIL_BYTES: usize = 8 * 1024;
/// An unfinished line longer than this (plus one read) is searched on its first part only.
const LINE_MAX: usize = 64 * 1024;

/// The command's output as it streams by: the regex's first match and the tail.
pub(super) struct Output {
    re: Option<Regex>,
    line: Vec<u8>,
    matched: Option<Result<f64, String>>,
    tail: Vec<u8>,
    bytes: u64,
}

impl Output {
    pub(super) fn new(re: Option<Regex>) -> Output {
        Output {
            re,
            line: Vec::new(),
            matched: None,
            tail: Vec::new(),
            bytes: 0,
        }
    }

    /// Reads what the pipe holds now; `false` once it is closed.
    pub(super) fn read_some(&mut self, fd: &OwnedFd) -> bool {
        let mut buf = [0u8; 64 * 1024];
        loop {
            let e = match smtlab_loadgen::sys::read(fd.as_raw_fd(), &mut buf) {
                Ok(0) => {
                    self.end_line();
                    return false;
                }
                Ok(n) => {
                    self.feed(&buf[..n]);
                    continue;
                }
                Err(e) => e,
            };
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return e.kind() == io::ErrorKind::WouldBlock;
        }
    }

    /// Reads what is left without waiting for writers that are still around.
    pub(super) fn drain(&mut self, fd: &OwnedFd) {
        let _ = self.read_some(fd);
        self.end_line();
    }

    fn feed(&mut self, data: &[u8]) {
        self.bytes += data.len() as u64;
        if data.len() >= TAIL_BYTES {
            self.tail.clear();
            self.tail
                .extend_from_slice(&data[data.len() - TAIL_BYTES..]);
        } else {
            self.tail.extend_from_slice(data);
            if self.tail.len() > 2 * TAIL_BYTES {
                self.tail.drain(..self.tail.len() - TAIL_BYTES);
            }
        }
        if self.re.is_none() || self.matched.is_some() {
            return;
        }
        // A line ends at LF or CR (a progress bar redraws itself after CRs, and the
        // value may follow it on the same terminal line). The pending line ends at the
        // first terminator; the complete lines after it are searched a chunk at a time
        // (one search per read, not per line), never cut by what came before; the
        // unfinished last line waits for the rest of it.
        let ends = |b: &u8| *b == b'\n' || *b == b'\r';
        let (Some(first), Some(last)) = (data.iter().position(ends), data.iter().rposition(ends))
        else {
            self.push_line(data);
            return;
        };
        self.push_line(&data[..first]);
        self.end_line();
        if self.matched.is_none() && last > first {
            self.line.extend_from_slice(&data[first + 1..last]);
            self.end_line();
        }
        if self.matched.is_none() {
            self.push_line(&data[last + 1..]);
        }
    }

    /// Adds to the text waiting to be searched; an endless line is searched on its
    /// first `LINE_MAX` bytes only.
    fn push_line(&mut self, part: &[u8]) {
        let room = (LINE_MAX + 64 * 1024).saturating_sub(self.line.len());
        self.line.extend_from_slice(&part[..part.len().min(room)]);
    }

    /// Searches the text waiting to be searched.
    fn end_line(&mut self) {
        if let (Some(re), None) = (&self.re, &self.matched)
            && !self.line.is_empty()
        {
            // CRs as line ends, so no match runs across a progress bar's redraws.
            let text = String::from_utf8_lossy(&self.line).replace('\r', "\n");
            if let Some(caps) = re.captures(&text) {
                self.matched = Some(captured(re, &caps));
            }
        }
        self.line.clear();
    }

    /// The last non-empty line, shortened, for error messages.
    fn last_line(&self) -> Option<String> {
        let text = String::from_utf8_lossy(&self.tail);
        let line = text.lines().rev().find(|l| !l.trim().is_empty())?.trim();
        let mut s: String = line.chars().take(QUOTE_MAX).collect();
        if line.chars().count() > QUOTE_MAX {
            s.push_str("...");
        }
        Some(s)
    }

    pub(super) fn last_line_text(&self) -> String {
        match self.last_line() {
            Some(l) => format!("; its last output line: {l:?}"),
            None => String::new(),
        }
    }

    /// The throughput the command printed, or why there is none.
    pub(super) fn value(&self, re: &Regex) -> Result<f64, String> {
        match &self.matched {
            Some(r) => r.clone(),
            None => {
                let tail = match self.last_line() {
                    Some(l) => format!("; its last output line: {l:?}"),
                    None => "; it printed nothing".into(),
                };
                Err(format!(
                    "--throughput {:?} did not match the output{tail}",
                    re.as_str()
                ))
            }
        }
    }
}

fn captured(re: &Regex, caps: &regex::Captures<'_>) -> Result<f64, String> {
    let Some(m) = caps.get(1) else {
        return Err(format!(
            "--throughput {:?} matched but its first capture group did not take part in the match",
            re.as_str()
        ));
    };
    let text = m.as_str().trim();
    match text.parse::<f64>() {
        Ok(x) if x.is_finite() && x > 0.0 => Ok(x),
        // A rate of zero or less has no speed-up: a yield or verdict from it is nonsense.
        Ok(x) if x.is_finite() => Err(format!(
            "--throughput {:?} captured {text:?}: a throughput must be above 0 \
             (no yield or verdict comes from {x})",
            re.as_str()
        )),
        _ => Err(format!(
            "--throughput {:?} captured {text:?}, which is not a number",
            re.as_str()
        )),
    }
}

/// Reads a whole stream (used by tests of the output handling).
#[cfg(test)]
fn feed_all(output: &mut Output, mut r: impl std::io::Read) {
    let mut buf = [0u8; 4096];
    while let Ok(n) = r.read(&mut buf) {
        if n == 0 {
            break;
        }
        output.feed(&buf[..n]);
    }
    output.end_line();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn throughput_takes_the_first_group_of_the_first_match() {
        let re = Regex::new(r"ops/s: ([0-9.]+)").unwrap();
        let mut o = Output::new(Some(re.clone()));
        feed_all(&mut o, &b"warming\nops/s: 1234.5\nops/s: 9\n"[..]);
        assert_eq!(o.value(&re), Ok(1234.5));
        let mut o = Output::new(Some(re.clone()));
        feed_all(&mut o, &b"nothing here\n\n"[..]);
        let err = o.value(&re).unwrap_err();
        assert!(err.contains("did not match"), "{err}");
        assert!(err.contains("\"nothing here\""), "{err}");
        let re = Regex::new(r"rate: (\S+)").unwrap();
        let mut o = Output::new(Some(re.clone()));
        feed_all(&mut o, &b"rate: fast"[..]);
        assert!(o.value(&re).unwrap_err().contains("not a number"));
        for bad in ["rate: 0", "rate: -3.5"] {
            let mut o = Output::new(Some(re.clone()));
            feed_all(&mut o, bad.as_bytes());
            let e = o.value(&re).unwrap_err();
            assert!(e.contains("must be above 0"), "{e}");
        }
    }

    #[test]
    fn output_memory_stays_bounded() {
        let re = Regex::new(r"done: ([0-9]+)").unwrap();
        let mut o = Output::new(Some(re.clone()));
        let chunk = vec![b'x'; 1 << 20];
        for _ in 0..64 {
            o.feed(&chunk);
            o.feed(b"\n");
        }
        o.feed(b"done: 42\nbye\n");
        o.end_line();
        assert_eq!(o.value(&re), Ok(42.0));
        assert!(o.tail.len() <= 2 * TAIL_BYTES && o.line.len() <= LINE_MAX + 64 * 1024);
        assert_eq!(o.last_line().as_deref(), Some("bye"));
        assert_eq!(o.bytes, 64 * ((1 << 20) + 1) + 13);
    }

    #[test]
    fn the_value_after_a_long_progress_line_is_found() {
        let re = Regex::new(r"ops/s: ([0-9.]+)").unwrap();
        // 128 KiB of progress bar redrawn after CRs, then the value on the same line.
        let mut bar = Vec::new();
        let mut i = 0;
        while bar.len() < 128 * 1024 {
            bar.extend_from_slice(format!("progress {}%\r", i % 100).as_bytes());
            i += 1;
        }
        for tail in [&b"ops/s: 77.5\n"[..], b"\nops/s: 77.5\n", b"ops/s: 77.5"] {
            let mut data = bar.clone();
            data.extend_from_slice(tail);
            let mut o = Output::new(Some(re.clone()));
            feed_all(&mut o, &data[..]);
            assert_eq!(
                o.value(&re),
                Ok(77.5),
                "{:?}",
                String::from_utf8_lossy(tail)
            );
            // One read holding everything, as a pipe may deliver it.
            let mut o = Output::new(Some(re.clone()));
            o.feed(&data);
            o.end_line();
            assert_eq!(o.value(&re), Ok(77.5));
        }
        // A 128 KiB line without any terminator, then the value on the next line, in
        // the same read.
        let mut data = vec![b'x'; 128 * 1024];
        data.extend_from_slice(b"\nops/s: 3\n");
        let mut o = Output::new(Some(re.clone()));
        o.feed(&data);
        o.end_line();
        assert_eq!(o.value(&re), Ok(3.0));
    }
}
