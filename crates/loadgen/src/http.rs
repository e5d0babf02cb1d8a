//! The HTTP side: requests rendered once, and an incremental response parser that
//! checks what it reads against what the request expects. The head's syntax is
//! httparse's (the parser under hyper, fuzzed upstream); the body's framing (length,
//! chunks, the end of the connection) and what counts as an error are here, with a
//! property test that feeds arbitrary bytes split anywhere and a replay of the seeds of
//! `corpus/http-response/` (`scripts/fuzz.sh` runs them longer).

use std::sync::Arc;

smtlab_model::named_enum! {
    fn as_str;
    /// Why a request did not end in a good response; `as_str` gives the word output and
    /// JSON use.
    #[derive(PartialOrd, Ord, Hash)]
    pub enum ErrorKind {
        /// The connection could not be made (refused, unreachable).
        Connect = "connect",
        /// A reset or broken pipe while writing or reading.
        Reset = "reset",
        /// The server closed the connection before the response's headers were complete.
        Closed = "closed",
        /// The server closed the connection in the middle of the body.
        ShortBody = "short_body",
        /// The body length differs from the size the request expects, or bytes followed
        /// the body on a kept-alive connection.
        WrongLength = "wrong_length",
        /// A status outside 2xx.
        BadStatus = "bad_status",
        /// Not an HTTP response (bad status line, headers too long, a bad Content-Length,
        /// a broken chunked encoding, an unknown transfer encoding).
        Malformed = "malformed",
        /// No complete response within the request timeout.
        Timeout = "timeout",
    }
}

/// One request a load may send, before it is rendered for a connection mode; on the
/// wire to an agent as it is (checked there by `RequestSpec::check`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RequestSpec {
    pub method: String,
    /// Path and query, starting with `/`.
    pub path: String,
    /// Extra header lines without CRLF (`Cookie: ad=3`).
    pub headers: Vec<String>,
    pub body: Vec<u8>,
    /// The body length a good response has, when known (static files); checked.
    pub expect_body_len: Option<u64>,
}

impl RequestSpec {
    pub fn get(path: impl Into<String>) -> RequestSpec {
        RequestSpec {
            method: "GET".into(),
            path: path.into(),
            headers: Vec::new(),
            body: Vec::new(),
            expect_body_len: None,
        }
    }

    pub fn expect_len(mut self, len: u64) -> RequestSpec {
        self.expect_body_len = Some(len);
        self
    }
}

/// A request rendered to bytes for one connection mode.
#[derive(Debug, Clone)]
pub struct Rendered {
    pub bytes: Arc<[u8]>,
    pub expect_body_len: Option<u64>,
}

/// Renders `spec`: HTTP/1.1 on a kept-alive connection, HTTP/1.0 (one request per
/// connection, as SPECweb96 clients send) otherwise.
pub fn render(spec: &RequestSpec, host: &str, keep_alive: bool) -> Rendered {
    let version = if keep_alive { "HTTP/1.1" } else { "HTTP/1.0" };
    let mut s = format!(
        "{} {} {version}\r\nHost: {host}\r\n",
        spec.method, spec.path
    );
    for h in &spec.headers {
        s.push_str(h);
        s.push_str("\r\n");
    }
    if !spec.body.is_empty() || spec.method == "POST" {
        s.push_str(&format!("Content-Length: {}\r\n", spec.body.len()));
    }
    s.push_str("\r\n");
    let mut bytes = s.into_bytes();
    bytes.extend_from_slice(&spec.body);
    Rendered {
        bytes: bytes.into(),
        expect_body_len: spec.expect_body_len,
    }
}

/// Longest response head accepted.
const MAX_HEAD: usize = 16 * 1024;
/// Most header fields a response may carry.
const MAX_FIELDS: usize = 64;

/// Where a response stands after some bytes were fed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Feed {
    NeedMore,
    /// Complete; `keep` says whether the connection may carry another request.
    Done {
        keep: bool,
    },
    Error(ErrorKind),
}

/// Incremental parser of one response.
#[derive(Debug, Default)]
pub struct Response {
    head: Vec<u8>,
    in_body: bool,
    pub status: u16,
    content_length: Option<u64>,
    pub body_bytes: u64,
    /// All bytes of this response, head included.
    pub total_bytes: u64,
    close: bool,
    expect: Option<u64>,
    chunked: bool,
    chunk: Chunk,
    csize: u64,
    csize_seen: bool,
    cext: bool,
}

/// Where a chunked body stands.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
enum Chunk {
    /// Reading a chunk-size line: its value so far, whether a digit was seen, whether
    /// an extension (`;...`) started.
    #[default]
    Size,
    Data(u64),
    /// The CRLF after a chunk's data.
    DataEnd,
    /// Trailer lines after the last chunk; the count is the current line's length.
    Trailer(usize),
}

/// Largest chunk accepted (1 TiB): anything larger is not a response we asked for.
const MAX_CHUNK: u64 = 1 << 40;

impl Response {
    /// Starts a response to a request that expects `expect` body bytes.
    pub fn reset(&mut self, expect: Option<u64>) {
        // The head's buffer is kept, its capacity reused.
        let mut head = std::mem::take(&mut self.head);
        head.clear();
        *self = Response {
            head,
            expect,
            ..Response::default()
        };
    }

    /// Whether any byte of the response arrived.
    pub fn started(&self) -> bool {
        self.total_bytes > 0
    }

    pub fn feed(&mut self, data: &[u8]) -> Feed {
        if self.chunked && self.in_body {
            self.total_bytes += data.len() as u64;
            return self.feed_chunked(data);
        }
        self.total_bytes += data.len() as u64;
        let body = if self.in_body {
            data.len()
        } else {
            self.head.extend_from_slice(data);
            let end = match self.parse_head() {
                Ok(Some(end)) => end,
                Ok(None) => return Feed::NeedMore,
                Err(kind) => return Feed::Error(kind),
            };
            self.in_body = true;
            let body = self.head.len() - end;
            if self.chunked {
                let rest = self.head.split_off(end);
                self.head.clear();
                return self.feed_chunked(&rest);
            }
            self.head.clear();
            body
        };
        self.body_bytes += body as u64;
        match self.content_length {
            Some(n) if self.body_bytes == n => Feed::Done { keep: !self.close },
            Some(n) if self.body_bytes > n => Feed::Error(ErrorKind::WrongLength),
            _ => Feed::NeedMore,
        }
    }

    fn finish_chunked(&mut self, extra: bool) -> Feed {
        if extra {
            return Feed::Error(ErrorKind::WrongLength);
        }
        match self.expect {
            Some(n) if n != self.body_bytes => Feed::Error(ErrorKind::WrongLength),
            _ => Feed::Done { keep: !self.close },
        }
    }

    fn feed_chunked(&mut self, mut b: &[u8]) -> Feed {
        while !b.is_empty() {
            match self.chunk {
                Chunk::Data(rem) => {
                    let n = rem.min(b.len() as u64);
                    self.body_bytes += n;
                    b = &b[n as usize..];
                    self.chunk = if rem == n {
                        Chunk::DataEnd
                    } else {
                        Chunk::Data(rem - n)
                    };
                }
                Chunk::DataEnd => {
                    let c = b[0];
                    b = &b[1..];
                    match c {
                        b'\r' => {}
                        b'\n' => self.chunk = Chunk::Size,
                        _ => return Feed::Error(ErrorKind::Malformed),
                    }
                }
                Chunk::Size => {
                    let c = b[0];
                    b = &b[1..];
                    match c {
                        b'\n' => {
                            if !self.csize_seen {
                                return Feed::Error(ErrorKind::Malformed);
                            }
                            self.chunk = if self.csize == 0 {
                                Chunk::Trailer(0)
                            } else {
                                Chunk::Data(self.csize)
                            };
                            self.csize = 0;
                            self.csize_seen = false;
                            self.cext = false;
                        }
                        b'\r' | b' ' | b'\t' => {}
                        _ if self.cext => {}
                        b';' => self.cext = true,
                        _ => {
                            let Some(d) = (c as char).to_digit(16) else {
                                return Feed::Error(ErrorKind::Malformed);
                            };
                            self.csize = self.csize * 16 + d as u64;
                            self.csize_seen = true;
                            if self.csize > MAX_CHUNK {
                                return Feed::Error(ErrorKind::Malformed);
                            }
                        }
                    }
                }
                Chunk::Trailer(len) => {
                    let c = b[0];
                    b = &b[1..];
                    match c {
                        b'\n' if len == 0 => return self.finish_chunked(!b.is_empty()),
                        b'\n' => self.chunk = Chunk::Trailer(0),
                        b'\r' => {}
                        _ => self.chunk = Chunk::Trailer(len + 1),
                    }
                }
            }
        }
        Feed::NeedMore
    }

    /// The peer closed the connection: a body without Content-Length ends here.
    pub fn eof(&mut self) -> Feed {
        if !self.in_body {
            return Feed::Error(ErrorKind::Closed);
        }
        if self.chunked {
            return Feed::Error(ErrorKind::ShortBody);
        }
        match self.content_length {
            Some(_) => Feed::Error(ErrorKind::ShortBody),
            None => match self.expect {
                Some(n) if n != self.body_bytes => Feed::Error(ErrorKind::WrongLength),
                _ => Feed::Done { keep: false },
            },
        }
    }

    /// Parses the head buffered so far: its length once complete, `None` before.
    fn parse_head(&mut self) -> Result<Option<usize>, ErrorKind> {
        let mut fields = [httparse::EMPTY_HEADER; MAX_FIELDS];
        let mut resp = httparse::Response::new(&mut fields);
        let end = match resp.parse(&self.head) {
            Ok(httparse::Status::Complete(n)) => n,
            Ok(httparse::Status::Partial) if self.head.len() > MAX_HEAD => {
                return Err(ErrorKind::Malformed);
            }
            Ok(httparse::Status::Partial) => return Ok(None),
            Err(_) => return Err(ErrorKind::Malformed),
        };
        let (Some(version), Some(status)) = (resp.version, resp.code) else {
            return Err(ErrorKind::Malformed);
        };
        if end > MAX_HEAD || !(100..1000).contains(&status) {
            return Err(ErrorKind::Malformed);
        }
        self.status = status;
        self.close = version == 0;
        let mut unknown_encoding = false;
        for h in resp.headers.iter() {
            let value = std::str::from_utf8(h.value)
                .map_err(|_| ErrorKind::Malformed)?
                .trim_matches([' ', '\t']);
            let name = h.name;
            if name.eq_ignore_ascii_case("content-length") {
                // Digits only (RFC 9110 section 8.6): `+5` is no length.
                if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) {
                    return Err(ErrorKind::Malformed);
                }
                let n = value.parse().map_err(|_| ErrorKind::Malformed)?;
                self.content_length = Some(n);
            } else if name.eq_ignore_ascii_case("connection") {
                if value.eq_ignore_ascii_case("close") {
                    self.close = true;
                } else if value.eq_ignore_ascii_case("keep-alive") {
                    self.close = false;
                }
            } else if name.eq_ignore_ascii_case("transfer-encoding") {
                if value.eq_ignore_ascii_case("chunked") {
                    self.chunked = true;
                } else if !value.eq_ignore_ascii_case("identity") {
                    unknown_encoding = true;
                }
            }
        }
        // A bad status is said as such, whatever its body's encoding.
        if !(200..300).contains(&status) {
            return Err(ErrorKind::BadStatus);
        }
        if unknown_encoding {
            return Err(ErrorKind::Malformed);
        }
        if self.chunked {
            // The chunks say where the body ends; a Content-Length beside them is ignored.
            self.content_length = None;
            return Ok(Some(end));
        }
        if let (Some(want), Some(got)) = (self.expect, self.content_length)
            && want != got
        {
            return Err(ErrorKind::WrongLength);
        }
        if self.content_length.is_none() {
            // Without a length only the end of the connection ends the body.
            self.close = true;
        }
        Ok(Some(end))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(chunks: &[&[u8]], expect: Option<u64>) -> Feed {
        let mut r = Response::default();
        r.reset(expect);
        for c in chunks {
            match r.feed(c) {
                Feed::NeedMore => {}
                other => return other,
            }
        }
        r.eof()
    }

    #[test]
    fn a_response_split_anywhere_parses_alike() {
        let full = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello";
        for cut in 0..full.len() {
            let (a, b) = full.split_at(cut);
            assert_eq!(parse(&[a, b], Some(5)), Feed::Done { keep: true }, "{cut}");
        }
    }

    #[test]
    fn errors_by_kind() {
        let short = b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nhello";
        assert_eq!(parse(&[short], None), Feed::Error(ErrorKind::ShortBody));
        let wrong = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello";
        assert_eq!(
            parse(&[wrong], Some(6)),
            Feed::Error(ErrorKind::WrongLength)
        );
        let status = b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n";
        assert_eq!(parse(&[status], None), Feed::Error(ErrorKind::BadStatus));
        assert_eq!(
            parse(&[b"HTTP/1.1 2"], None),
            Feed::Error(ErrorKind::Closed)
        );
        assert_eq!(
            parse(&[b"SSH-2.0\r\n\r\n"], None),
            Feed::Error(ErrorKind::Malformed)
        );
        let extra = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhello";
        assert_eq!(parse(&[extra], None), Feed::Error(ErrorKind::WrongLength));
        let gzip = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n";
        assert_eq!(parse(&[gzip], None), Feed::Error(ErrorKind::Malformed));
        let bad = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n";
        assert_eq!(parse(&[bad], None), Feed::Error(ErrorKind::Malformed));
        let cut = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab";
        assert_eq!(parse(&[cut], None), Feed::Error(ErrorKind::ShortBody));
    }

    #[test]
    fn chunked_bodies_split_anywhere() {
        let full: &[u8] = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1a\r\nsmtlab cgi page, pid 22609\r\n3;x=y\r\nabc\r\n0\r\nX-T: 1\r\n\r\n";
        for cut in 0..full.len() {
            let (a, b) = full.split_at(cut);
            assert_eq!(parse(&[a, b], Some(29)), Feed::Done { keep: true }, "{cut}");
        }
        assert_eq!(
            parse(&[full], Some(30)),
            Feed::Error(ErrorKind::WrongLength)
        );
        let mut r = Response::default();
        r.reset(None);
        assert_eq!(r.feed(full), Feed::Done { keep: true });
        assert_eq!(r.body_bytes, 29);
    }

    #[test]
    fn http10_and_close_bodies() {
        let r = b"HTTP/1.0 200 OK\r\n\r\nabc";
        assert_eq!(parse(&[r], Some(3)), Feed::Done { keep: false });
        assert_eq!(parse(&[r], Some(4)), Feed::Error(ErrorKind::WrongLength));
        let c = b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 1\r\n\r\nx";
        assert_eq!(parse(&[c], None), Feed::Done { keep: false });
    }

    use proptest::prelude::*;

    /// Split and whole feeds answer alike, except where the split ends right after a
    /// complete response: the bytes after it are then the next read's, not this
    /// response's extra bytes.
    fn same_but_for_what_follows(split: Feed, whole: Feed) -> Result<(), TestCaseError> {
        let follows =
            matches!(split, Feed::Done { .. }) && whole == Feed::Error(ErrorKind::WrongLength);
        prop_assert!(
            split == whole || follows,
            "split {:?}, whole {:?}",
            split,
            whole
        );
        Ok(())
    }

    proptest! {
        /// Whatever bytes arrive, split wherever the reads split them, the parser
        /// answers the same without panicking.
        #[test]
        fn any_bytes_split_anywhere_parse_alike(
            buf in prop::collection::vec(any::<u8>(), 0..400),
            cut in any::<prop::sample::Index>(),
            expect in prop::option::of(0u64..64),
        ) {
            let cut = cut.index(buf.len() + 1);
            let (a, b) = buf.split_at(cut);
            same_but_for_what_follows(parse(&[a, b], expect), parse(&[&buf], expect))?;
        }

        /// A response head followed by any body bytes, split anywhere, parses alike.
        #[test]
        fn a_good_head_then_any_bytes_split_anywhere(
            body in prop::collection::vec(any::<u8>(), 0..200),
            cut in any::<prop::sample::Index>(),
            chunked in any::<bool>(),
        ) {
            let head: &[u8] = if chunked {
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
            } else {
                b"HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\n"
            };
            let mut full = head.to_vec();
            full.extend_from_slice(&body);
            let cut = cut.index(full.len() + 1);
            let (a, b) = full.split_at(cut);
            same_but_for_what_follows(parse(&[a, b], None), parse(&[&full], None))?;
        }
    }

    /// The seeds of `corpus/http-response/` (heads as nginx and Apache send them,
    /// chunked bodies, 1xx, malformed and cut responses), each fed whole and followed by
    /// the end of the connection, get the answer their name says.
    #[test]
    fn the_corpus_gets_its_answers() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus/http-response");
        smtlab_fixtures::corpus::replay(&dir, |bytes| match parse(&[bytes], None) {
            Feed::Done { keep: true } => "done-keep".into(),
            Feed::Done { keep: false } => "done-close".into(),
            Feed::NeedMore => "need-more".into(),
            Feed::Error(kind) => kebab(&format!("{kind:?}")),
        });
    }

    /// `ShortBody` as `short-body`.
    fn kebab(name: &str) -> String {
        let mut out = String::new();
        for c in name.chars() {
            if c.is_ascii_uppercase() && !out.is_empty() {
                out.push('-');
            }
            out.push(c.to_ascii_lowercase());
        }
        out
    }

    #[test]
    fn content_length_is_digits_only_and_bare_lf_heads_parse() {
        for v in ["+5", "-5", "5, 5", " "] {
            let r = format!("HTTP/1.1 200 OK\r\nContent-Length: {v}\r\n\r\nhello");
            assert_eq!(
                parse(&[r.as_bytes()], None),
                Feed::Error(ErrorKind::Malformed),
                "{v:?}"
            );
        }
        let lf = b"HTTP/1.1 200 OK\nContent-Length: 2\n\nok";
        assert_eq!(parse(&[lf], Some(2)), Feed::Done { keep: true });
        let nul = b"HTTP/1.1 200 OK\r\nX: a\0b\r\nContent-Length: 0\r\n\r\n";
        assert_eq!(parse(&[nul], None), Feed::Error(ErrorKind::Malformed));
    }

    #[test]
    fn requests_render_per_mode() {
        let mut spec = RequestSpec::get("/a/b").expect_len(3);
        spec.headers.push("Cookie: x=1".into());
        let r = render(&spec, "127.0.0.1:80", true);
        assert_eq!(
            &*r.bytes,
            b"GET /a/b HTTP/1.1\r\nHost: 127.0.0.1:80\r\nCookie: x=1\r\n\r\n"
        );
        let r = render(&spec, "h", false);
        assert!(r.bytes.starts_with(b"GET /a/b HTTP/1.0\r\n"));
        let mut post = RequestSpec::get("/p");
        post.method = "POST".into();
        post.body = b"ab".to_vec();
        let r = render(&post, "h", true);
        assert!(r.bytes.ends_with(b"Content-Length: 2\r\n\r\nab"));
    }
}
