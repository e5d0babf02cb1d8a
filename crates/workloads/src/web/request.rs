//! Requests as the built-in servers read them: strict, bounded, and unable to name
//! anything outside the file set.

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
}

impl Reject {
    pub fn status(self) -> (u16, &'static str) {
        match self {
            Reject::Bad => (400, "Bad Request"),
            Reject::NotFound => (404, "Not Found"),
            Reject::Method => (405, "Method Not Allowed"),
            Reject::TooLarge => (413, "Payload Too Large"),
        }
    }
}

/// Where the head ends: the index of its last line's terminator and the head's length
/// with the empty line. Lines end with CRLF or, as many servers accept (RFC 9112
/// section 2.2), a bare LF.
fn head_end(buf: &[u8]) -> Option<(usize, usize)> {
    let mut from = 0;
    while let Some(p) = buf[from..].iter().position(|&b| b == b'\n') {
        let nl = from + p;
        let line_end = if nl > 0 && buf[nl - 1] == b'\r' {
            nl - 1
        } else {
            nl
        };
        match buf.get(nl + 1) {
            Some(b'\n') => return Some((line_end, nl + 2)),
            Some(b'\r') if buf.get(nl + 2) == Some(&b'\n') => return Some((line_end, nl + 3)),
            Some(b'\r') if nl + 2 == buf.len() => return None,
            _ => {}
        }
        from = nl + 1;
    }
    None
}

/// Parses the head at the start of `buf`: `Ok(None)` until it is complete.
pub fn parse(buf: &[u8]) -> Result<Option<Request>, Reject> {
    let Some((end, head_len)) = head_end(buf) else {
        return if buf.len() > MAX_HEAD {
            Err(Reject::TooLarge)
        } else {
            Ok(None)
        };
    };
    if head_len > MAX_HEAD {
        return Err(Reject::TooLarge);
    }
    let head = std::str::from_utf8(&buf[..end]).map_err(|_| Reject::Bad)?;
    // A CR anywhere but before an LF is malformed.
    let mut lines = head.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l));
    if lines.clone().any(|l| l.contains('\r')) {
        return Err(Reject::Bad);
    }
    let line = lines.next().ok_or(Reject::Bad)?;
    let mut parts = line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(Reject::Bad);
    };
    let http11 = match version {
        "HTTP/1.1" => true,
        "HTTP/1.0" => false,
        _ => return Err(Reject::Bad),
    };
    let method = match method {
        "GET" => Method::Get,
        "HEAD" => Method::Head,
        "POST" => Method::Post,
        m if !m.is_empty() && m.bytes().all(|b| b.is_ascii_uppercase()) => {
            return Err(Reject::Method);
        }
        _ => return Err(Reject::Bad),
    };
    let (raw_path, query) = target.split_once('?').unwrap_or((target, ""));
    let path = clean_path(raw_path)?;
    let mut keep_alive = http11;
    let mut content_length = None;
    let mut cookie = None;
    for l in lines {
        let (name, value) = l.split_once(':').ok_or(Reject::Bad)?;
        if name.is_empty() || name.bytes().any(|b| b.is_ascii_whitespace()) {
            return Err(Reject::Bad);
        }
        let value = value.trim();
        if name.eq_ignore_ascii_case("connection") {
            if value.eq_ignore_ascii_case("close") {
                keep_alive = false;
            } else if value.eq_ignore_ascii_case("keep-alive") {
                keep_alive = true;
            }
        } else if name.eq_ignore_ascii_case("content-length") {
            let n: u64 = value.parse().map_err(|_| Reject::Bad)?;
            // Two lengths that differ leave the body's end in doubt (request
            // smuggling): refused, as RFC 9112 section 6.3 says.
            if content_length.is_some_and(|c| c != n) {
                return Err(Reject::Bad);
            }
            if n > MAX_BODY {
                return Err(Reject::TooLarge);
            }
            content_length = Some(n);
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            return Err(Reject::Bad);
        } else if name.eq_ignore_ascii_case("cookie") {
            cookie = Some(value.to_string());
        }
    }
    Ok(Some(Request {
        method,
        path,
        query: query.to_string(),
        keep_alive,
        content_length: content_length.unwrap_or(0),
        cookie,
        head_len,
    }))
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
    for comp in path[1..].split('/') {
        if comp.is_empty() && path != "/" {
            return Err(Reject::NotFound);
        }
        if comp == "." || comp == ".." {
            return Err(Reject::NotFound);
        }
        if !comp
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-')
        {
            return Err(Reject::NotFound);
        }
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
        let r = p("POST /p HTTP/1.1\r\nContent-Length: 5\r\nCookie: u=3\r\n\r\n")
            .unwrap()
            .unwrap();
        assert_eq!((r.content_length, r.cookie.as_deref()), (5, Some("u=3")));
        assert_eq!(p("GET / HTTP/1.1\r\nHost: x\r\n"), Ok(None));
        assert_eq!(p("GET / HTTP/1.1\r\nHost: x\r\n\r"), Ok(None));
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
            let r = p(&format!("GET {path} HTTP/1.1\r\n\r\n"));
            assert!(
                matches!(r, Err(Reject::NotFound | Reject::Bad)),
                "{path}: {r:?}"
            );
        }
        for path in ["etc/passwd", "/a%00b", "/a%zz", "/a%2"] {
            let r = p(&format!("GET {path} HTTP/1.1\r\n\r\n"));
            assert_eq!(r, Err(Reject::Bad), "{path}");
        }
    }

    #[test]
    fn malformed_requests() {
        assert_eq!(p("GET /\r\n\r\n"), Err(Reject::Bad));
        assert_eq!(p("GET / HTTP/2.0\r\n\r\n"), Err(Reject::Bad));
        assert_eq!(p("GET  / HTTP/1.1\r\n\r\n"), Err(Reject::Bad));
        assert_eq!(p("DELETE / HTTP/1.1\r\n\r\n"), Err(Reject::Method));
        assert_eq!(p("GET / HTTP/1.1\r\nBad header\r\n\r\n"), Err(Reject::Bad));
        assert_eq!(
            p("POST / HTTP/1.1\r\nContent-Length: 99999999\r\n\r\n"),
            Err(Reject::TooLarge)
        );
        assert_eq!(
            p("GET / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"),
            Err(Reject::Bad)
        );
        // Two different lengths: which one ends the body?
        assert_eq!(
            p("POST /p HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n"),
            Err(Reject::Bad)
        );
        let same = p("POST /p HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n");
        assert_eq!(same.unwrap().unwrap().content_length, 5);
        // A bare CR inside a line.
        assert_eq!(p("GET / HTTP/1.1\r\nHost: a\rb\r\n\r\n"), Err(Reject::Bad));
        let long = "x".repeat(MAX_HEAD + 10);
        assert_eq!(p(&long), Err(Reject::TooLarge));
        assert_eq!(parse(b"GET /\xff HTTP/1.1\r\n\r\n"), Err(Reject::Bad));
    }
}
