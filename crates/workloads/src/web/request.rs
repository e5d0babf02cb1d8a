//! Requests as the built-in servers read them: strict, bounded, and unable to name
//! anything outside the file set. The syntax is httparse's (the parser under hyper,
//! fuzzed upstream); the meaning of the fields, the path check and the limits are here,
//! and the tests below throw arbitrary bytes at them and replay the seeds of
//! `corpus/http-request/` (`scripts/fuzz.sh` runs them longer).

/// The interim response to `Expect: 100-continue`, sent before the body is read.
pub const CONTINUE: &[u8] = b"HTTP/1.1 100 Continue\r\n\r\n";

/// Longest request head a built-in server reads.
pub const MAX_HEAD: usize = 8 * 1024;
/// Longest request body (POSTs of the dynamic mix).
pub const MAX_BODY: u64 = 64 * 1024;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub method: Method,
    /// Decoded path, checked: `/` followed by components of `[A-Za-z0-9._-]`, none of
    /// them `.` or `..`.
    pub path: String,
    /// Query string, undecoded, without `?`.
    pub query: String,
    pub keep_alive: bool,
    pub content_length: u64,
    /// The client waits for `100 Continue` before it sends the body (HTTP/1.1 only).
    pub expect_continue: bool,
    pub cookie: Option<String>,
    /// Bytes of the head, CRLFCRLF included.
    pub head_len: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Get,
    Head,
    Post,
}

/// A request that gets an error status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reject {
    /// Malformed: 400.
    Bad,
    /// Well formed but names nothing servable: 404.
    NotFound,
    /// A method other than GET, HEAD, POST: 405.
    Method,
    /// Head or body too large: 413 (431 would do too; 413 is what every client knows).
    TooLarge,
    /// An `Expect` other than `100-continue`: 417.
    Expectation,
}

impl Reject {
    pub fn status(self) -> (u16, &'static str) {
        match self {
            Reject::Bad => (400, "Bad Request"),
            Reject::NotFound => (404, "Not Found"),
            Reject::Method => (405, "Method Not Allowed"),
            Reject::TooLarge => (413, "Payload Too Large"),
            Reject::Expectation => (417, "Expectation Failed"),
        }
    }
}

/// Most header fields a request may carry; more is refused as too large.
const MAX_HEADERS: usize = 64;

/// Parses the head at the start of `buf`: `Ok(None)` until it is complete. The syntax
/// (request line, field names as tokens, field values without control bytes, CRLF or
/// bare LF line ends) is httparse's; what the fields mean is decided here, as RFC 9112
/// says: a malformed line, HTTP/0.9 and anything not HTTP is refused as soon as it is
/// seen, without waiting for an end of head that will never come.
pub fn parse(buf: &[u8]) -> Result<Option<Request>, Reject> {
    let mut fields = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut fields);
    let head_len = match req.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) if buf.len() > MAX_HEAD => return Err(Reject::TooLarge),
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(httparse::Error::TooManyHeaders) => return Err(Reject::TooLarge),
        Err(_) => return Err(Reject::Bad),
    };
    if head_len > MAX_HEAD {
        return Err(Reject::TooLarge);
    }
    let (Some(method), Some(target), Some(version)) = (req.method, req.path, req.version) else {
        return Err(Reject::Bad);
    };
    let method = match method {
        "GET" => Method::Get,
        "HEAD" => Method::Head,
        "POST" => Method::Post,
        _ => return Err(Reject::Method),
    };
    let (raw_path, query) = target.split_once('?').unwrap_or((target, ""));
    let path = clean_path(origin_path(raw_path))?;
    let fields = Fields::read(req.headers, version == 1)?;
    Ok(Some(Request {
        method,
        path,
        query: query.to_string(),
        keep_alive: fields.keep_alive,
        content_length: fields.content_length.unwrap_or(0),
        expect_continue: fields.expect_continue,
        cookie: fields.cookie,
        head_len,
    }))
}

/// The path of a request target: the absolute form (`http://host/a`, which a server
/// must accept: RFC 9112 section 3.2.2) as its path (`/a`, `/` where it has none);
/// anything else as it is, for [`clean_path`] to judge.
fn origin_path(target: &str) -> &str {
    let scheme_end = ["http://", "https://"].iter().find_map(|scheme| {
        let head = target.get(..scheme.len())?;
        head.eq_ignore_ascii_case(scheme).then_some(scheme.len())
    });
    let Some(start) = scheme_end else {
        return target;
    };
    let rest = &target[start..];
    match rest.find('/') {
        Some(i) => &rest[i..],
        None => "/",
    }
}

/// What the header fields say.
struct Fields {
    keep_alive: bool,
    content_length: Option<u64>,
    expect_continue: bool,
    cookie: Option<String>,
    /// Host field lines seen.
    hosts: usize,
}

impl Fields {
    fn read(headers: &[httparse::Header<'_>], http11: bool) -> Result<Fields, Reject> {
        let mut f = Fields {
            keep_alive: http11,
            content_length: None,
            expect_continue: false,
            cookie: None,
            hosts: 0,
        };
        for h in headers {
            // httparse has refused control bytes (NUL, CR, LF) in values already.
            let value = std::str::from_utf8(h.value)
                .map_err(|_| Reject::Bad)?
                .trim_matches([' ', '\t']);
            let name = h.name;
            if name.eq_ignore_ascii_case("connection") {
                for option in value.split(',').map(str::trim) {
                    if option.eq_ignore_ascii_case("close") {
                        f.keep_alive = false;
                    } else if option.eq_ignore_ascii_case("keep-alive") {
                        f.keep_alive = true;
                    }
                }
            } else if name.eq_ignore_ascii_case("content-length") {
                let n = content_length(value)?;
                // Two lengths that differ leave the body's end in doubt (request
                // smuggling): refused, as RFC 9112 section 6.3 says.
                if f.content_length.is_some_and(|c| c != n) {
                    return Err(Reject::Bad);
                }
                f.content_length = Some(n);
            } else if name.eq_ignore_ascii_case("transfer-encoding") {
                return Err(Reject::Bad);
            } else if name.eq_ignore_ascii_case("expect") {
                // RFC 9110 section 10.1.1: 100-continue is the one expectation defined.
                if !value.eq_ignore_ascii_case("100-continue") {
                    return Err(Reject::Expectation);
                }
                f.expect_continue = http11;
            } else if name.eq_ignore_ascii_case("cookie") {
                f.cookie = Some(value.to_string());
            } else if name.eq_ignore_ascii_case("host") {
                f.hosts += 1;
            }
        }
        // RFC 9112 section 3.2: an HTTP/1.1 request without Host, and any request with
        // more than one, is answered 400 (HTTP/1.0 clients may leave it out).
        if f.hosts > 1 || (http11 && f.hosts == 0) {
            return Err(Reject::Bad);
        }
        Ok(f)
    }
}

/// A Content-Length value: one or more digits and nothing else (RFC 9110 section 8.6),
/// so `+5`, `-0`, `5, 5` and ` ` are malformed.
fn content_length(value: &str) -> Result<u64, Reject> {
    if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) {
        return Err(Reject::Bad);
    }
    match value.parse::<u64>() {
        Ok(n) if n <= MAX_BODY => Ok(n),
        // Digits beyond u64 are a length too large, as much as one over the cap.
        _ => Err(Reject::TooLarge),
    }
}

/// Decodes `%XX` and checks every component; anything odd is refused rather than
/// normalised, so no spelling of a path can leave the document root.
pub fn clean_path(raw: &str) -> Result<String, Reject> {
    if !raw.starts_with('/') {
        return Err(Reject::Bad);
    }
    let bytes = raw.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes.get(i + 1..i + 3).ok_or(Reject::Bad)?;
            let s = std::str::from_utf8(hex).map_err(|_| Reject::Bad)?;
            let v = u8::from_str_radix(s, 16).map_err(|_| Reject::Bad)?;
            out.push(v);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    if out.contains(&0) {
        return Err(Reject::Bad);
    }
    let path = String::from_utf8(out).map_err(|_| Reject::Bad)?;
    let servable = |comp: &str| {
        (!comp.is_empty() || path == "/")
            && comp != "."
            && comp != ".."
            && comp
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-')
    };
    if !path[1..].split('/').all(servable) {
        return Err(Reject::NotFound);
    }
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Result<Option<Request>, Reject> {
        parse(s.as_bytes())
    }

    #[test]
    fn good_requests() {
        let r = p("GET /dir00001/class1_3 HTTP/1.1\r\nHost: x\r\n\r\n")
            .unwrap()
            .unwrap();
        assert_eq!(r.path, "/dir00001/class1_3");
        assert!(r.keep_alive);
        let r = p("GET /a?x=1 HTTP/1.0\r\n\r\n").unwrap().unwrap();
        assert!(!r.keep_alive);
        assert_eq!(r.query, "x=1");
        let r = p("POST /p HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nCookie: u=3\r\n\r\n")
            .unwrap()
            .unwrap();
        assert_eq!((r.content_length, r.cookie.as_deref()), (5, Some("u=3")));
        assert_eq!(p("GET / HTTP/1.1\r\nHost: x\r\n"), Ok(None));
        assert_eq!(p("GET / HTTP/1.1\r\nHost: x\r\n\r"), Ok(None));
    }

    #[test]
    fn http_0_9_and_garbage_are_refused_without_waiting_for_a_head() {
        // No empty line follows: a parser that waits for one would wait until the
        // connection's deadline.
        assert_eq!(p("GET /\r\n"), Err(Reject::Bad));
        assert_eq!(p("GET /dir00000/class0_1\n"), Err(Reject::Bad));
        assert_eq!(parse(b"\x16\x03\x01\x02\x00\x01"), Err(Reject::Bad));
        assert_eq!(p("hello world\r\n"), Err(Reject::Bad));
        assert_eq!(p("SSH-2.0-OpenSSH_9.6\r\n"), Err(Reject::Bad));
    }

    #[test]
    fn expect_100_continue_is_seen_and_other_expectations_refused() {
        let r =
            p("POST /p HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n")
                .unwrap()
                .unwrap();
        assert!(r.expect_continue);
        // HTTP/1.0 clients do not wait for it (RFC 9110 section 10.1.1).
        let r = p("POST /p HTTP/1.0\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n")
            .unwrap()
            .unwrap();
        assert!(!r.expect_continue);
        assert_eq!(
            p("GET / HTTP/1.1\r\nHost: x\r\nExpect: tea\r\n\r\n"),
            Err(Reject::Expectation)
        );
    }

    #[test]
    fn the_absolute_form_is_served_as_its_path() {
        let p = |t: &str| parse(format!("GET {t} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes());
        for (target, path, query) in [
            ("http://x/dir00001/class1_3", "/dir00001/class1_3", ""),
            ("HTTP://x:8080/a?q=1", "/a", "q=1"),
            ("https://x", "/", ""),
            ("http://x?q=2", "/", "q=2"),
        ] {
            let r = p(target).unwrap().unwrap();
            assert_eq!(
                (r.path.as_str(), r.query.as_str()),
                (path, query),
                "{target}"
            );
        }
        for target in ["ftp://x/a", "http:/a"] {
            assert_eq!(p(target), Err(Reject::Bad), "{target}");
        }
        // The path is judged as any other: no spelling leaves the document root.
        assert_eq!(p("http://x/../etc/passwd"), Err(Reject::NotFound));
    }

    #[test]
    fn http_1_1_needs_exactly_one_host_and_http_1_0_at_most_one() {
        // RFC 9112 section 3.2.
        assert_eq!(p("GET /a HTTP/1.1\r\n\r\n"), Err(Reject::Bad));
        assert_eq!(
            p("GET /a HTTP/1.1\r\nHost: x\r\nhost: y\r\n\r\n"),
            Err(Reject::Bad)
        );
        assert_eq!(
            p("GET /a HTTP/1.1\r\nHost: x\r\nHost: x\r\n\r\n"),
            Err(Reject::Bad)
        );
        assert_eq!(
            p("GET /a HTTP/1.0\r\nHost: x\r\nHost: y\r\n\r\n"),
            Err(Reject::Bad)
        );
        assert!(p("GET /a HTTP/1.0\r\n\r\n").unwrap().is_some());
        // An empty Host is allowed: the target has no authority (RFC 9110 section 7.2).
        assert!(p("GET /a HTTP/1.1\r\nHOST:\r\n\r\n").unwrap().is_some());
    }

    /// The seeds of `corpus/http-request/` (real clients' heads, odd-but-valid ones,
    /// attacks) each get the answer their name says: `ok`, `partial` or the status.
    #[test]
    fn the_corpus_gets_its_answers() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus/http-request");
        smtlab_fixtures::corpus::replay(&dir, |bytes| match parse(bytes) {
            Ok(Some(_)) => "ok".into(),
            Ok(None) => "partial".into(),
            Err(r) => r.status().0.to_string(),
        });
    }

    use proptest::prelude::*;

    fn well_formed() -> impl Strategy<Value = (String, String, Vec<(String, String)>)> {
        let method = prop::sample::select(vec!["GET", "HEAD", "POST"]);
        let path = "(/[A-Za-z0-9_-]{1,8}){1,4}";
        let field = ("X-[A-Za-z]{1,10}", "[ -~]{0,20}");
        (method, path, prop::collection::vec(field, 0..6))
            .prop_map(|(m, p, f)| (m.to_string(), p, f))
    }

    proptest! {
        /// Whatever bytes arrive, the parser answers without panicking, and what it
        /// accepts lies within the buffer and the limits and names a clean path.
        #[test]
        fn any_bytes_get_an_answer_within_the_limits(buf in prop::collection::vec(any::<u8>(), 0..600)) {
            if let Ok(Some(r)) = parse(&buf) {
                prop_assert!(r.head_len <= buf.len() && r.head_len <= MAX_HEAD);
                prop_assert!(r.content_length <= MAX_BODY);
                prop_assert!(r.path.starts_with('/') && !r.path.contains(".."));
                prop_assert!(!r.cookie.unwrap_or_default().contains(['\r', '\n', '\0']));
            }
        }

        /// Anything after a well-formed request line also gets an answer.
        #[test]
        fn a_request_line_then_any_bytes(tail in prop::collection::vec(any::<u8>(), 0..300)) {
            let mut buf = b"GET /a HTTP/1.1\r\nHost: x\r\n".to_vec();
            buf.extend_from_slice(&tail);
            let _ = parse(&buf);
        }

        /// A well-formed request parses to what was sent, and every prefix of it is
        /// "not complete yet", never an error.
        #[test]
        fn well_formed_requests_round_trip((method, path, fields) in well_formed()) {
            let mut text = format!("{method} {path}?q=1 HTTP/1.1\r\nHost: x\r\n");
            for (n, v) in &fields {
                text.push_str(&format!("{n}: {v}\r\n"));
            }
            text.push_str("\r\n");
            let r = p(&text).unwrap().unwrap();
            prop_assert_eq!(&r.path, &path);
            prop_assert_eq!(r.query.as_str(), "q=1");
            prop_assert_eq!(r.head_len, text.len());
            for cut in 0..text.len() {
                prop_assert_eq!(parse(&text.as_bytes()[..cut]), Ok(None), "prefix {}", cut);
            }
        }
    }

    #[test]
    fn bare_lf_line_endings_are_answered() {
        for text in [
            "GET /a HTTP/1.1\nHost: x\n\nrest",
            "GET /a HTTP/1.1\r\nHost: x\n\r\nrest",
            "GET /a HTTP/1.1\nHost: x\r\n\nrest",
        ] {
            let r = p(text).unwrap().unwrap();
            assert_eq!(r.path, "/a", "{text:?}");
            assert_eq!(&text[r.head_len..], "rest", "{text:?}");
        }
        assert_eq!(p("GET /a HTTP/1.1\nHost: x\n"), Ok(None));
    }

    #[test]
    fn traversal_and_tricks_are_refused() {
        for path in [
            "/../etc/passwd",
            "/dir/../../x",
            "/%2e%2e/etc/passwd",
            "/%2E%2E%2Fetc",
            "/a//b",
            "/a/./b",
            "/a\\b",
            "/a%5cb",
        ] {
            let r = p(&format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n"));
            assert!(
                matches!(r, Err(Reject::NotFound | Reject::Bad)),
                "{path}: {r:?}"
            );
        }
        for path in ["etc/passwd", "/a%00b", "/a%zz", "/a%2"] {
            let r = p(&format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n"));
            assert_eq!(r, Err(Reject::Bad), "{path}");
        }
    }

    #[test]
    fn malformed_requests() {
        assert_eq!(p("GET /\r\n\r\n"), Err(Reject::Bad));
        assert_eq!(p("GET / HTTP/2.0\r\n\r\n"), Err(Reject::Bad));
        assert_eq!(p("GET  / HTTP/1.1\r\nHost: x\r\n\r\n"), Err(Reject::Bad));
        assert_eq!(
            p("DELETE / HTTP/1.1\r\nHost: x\r\n\r\n"),
            Err(Reject::Method)
        );
        assert_eq!(
            p("GET / HTTP/1.1\r\nHost: x\r\nBad header\r\n\r\n"),
            Err(Reject::Bad)
        );
        assert_eq!(
            p("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999\r\n\r\n"),
            Err(Reject::TooLarge)
        );
        assert_eq!(
            p("GET / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"),
            Err(Reject::Bad)
        );
        // Two different lengths: which one ends the body?
        assert_eq!(
            p("POST /p HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n"),
            Err(Reject::Bad)
        );
        let same =
            p("POST /p HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n");
        assert_eq!(same.unwrap().unwrap().content_length, 5);
        // A bare CR inside a line.
        assert_eq!(p("GET / HTTP/1.1\r\nHost: a\rb\r\n\r\n"), Err(Reject::Bad));
        // Content-Length is digits only (RFC 9110 section 8.6).
        for v in ["+5", "-5", "5, 5", "0x5", " ", "5 5"] {
            let text = format!("POST /p HTTP/1.1\r\nHost: x\r\nContent-Length: {v}\r\n\r\n");
            assert_eq!(p(&text), Err(Reject::Bad), "{v:?}");
        }
        // Control bytes in a field: NUL, a bare CR, DEL.
        for v in ["a\0b", "a\rb", "a\x7fb"] {
            let text = format!("GET / HTTP/1.1\r\nHost: {v}\r\n\r\n");
            assert_eq!(p(&text), Err(Reject::Bad), "{v:?}");
        }
        assert_eq!(
            p("GET / HTTP/1.1\r\nHost: x\r\nX\0: 1\r\n\r\n"),
            Err(Reject::Bad)
        );
        let long = "x".repeat(MAX_HEAD + 10);
        assert_eq!(p(&long), Err(Reject::TooLarge));
        assert_eq!(
            parse(b"GET /\xff HTTP/1.1\r\nHost: x\r\n\r\n"),
            Err(Reject::Bad)
        );
    }
}
