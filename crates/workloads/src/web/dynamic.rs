//! The dynamic third of the SPECweb99-like mix, as the built-in servers answer it, and
//! the requests that ask for it.
//!
//! * `GET /dyn/ad` with `Cookie: user=U; last_ad=A`: ad rotation. Each user has a
//!   demographic bit mask, each of 360 ads a mask of its own; the answer is the next ad
//!   after `A` sharing the most bits with the user (a scan of the ad table and a small
//!   page naming it, as SPECweb99's rotation does work per request).
//! * `POST /dyn/post`: the body is appended to a log file (one write, under a lock).
//! * `GET /dyn/cgi`: CGI style, a new process per request (`/bin/sh -c` printing the
//!   page), so the server pays a fork and an exec. [`Dynamic::cgi_command`] is the one
//!   command both ways of running it use: [`Dynamic::answer`] waits for it (a thread or
//!   process per connection blocks, as Apache's do), the event server reads its output
//!   from its epoll loop without waiting (as Flash's helpers and nginx's FastCGI do).
//!
//! The load sends 70% static requests (the SPECweb96 mix), 16% ad rotations, 12%
//! posts and 2% CGI requests.

use std::fs::File;
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Mutex;

use smtlab_loadgen::RequestSpec;

use super::request::{Method, Reject, Request};

const ADS: u32 = 360;

/// The CGI program: a small page and the pid of the process that made it.
const CGI_SCRIPT: &str = "echo 'smtlab cgi page'; echo \"pid $$\"";

/// Shares of the whole mix.
pub const STATIC_SHARE: f64 = 0.70;
pub const AD_SHARE: f64 = 0.16;
pub const POST_SHARE: f64 = 0.12;
pub const CGI_SHARE: f64 = 0.02;

fn mix32(x: u32) -> u32 {
    let mut x = x.wrapping_mul(0x9E37_79B9) ^ 0x5bd1_e995;
    x ^= x >> 15;
    x = x.wrapping_mul(0x2c1b_3c6d);
    x ^= x >> 12;
    x
}

/// The server side of the dynamic requests.
#[derive(Debug)]
pub struct Dynamic {
    log: Mutex<File>,
    cgi_script: String,
}

impl Dynamic {
    /// Posts go to `log` (created or appended).
    pub fn new(log: &Path) -> std::io::Result<Dynamic> {
        let f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)?;
        Ok(Dynamic {
            log: Mutex::new(f),
            cgi_script: CGI_SCRIPT.into(),
        })
    }

    /// Runs `script` for `/dyn/cgi` instead of the page (tests: slow or observable CGI).
    #[cfg(test)]
    pub(crate) fn with_cgi_script(mut self, script: &str) -> Dynamic {
        self.cgi_script = script.into();
        self
    }

    /// Whether `req` is answered by the CGI program.
    pub fn is_cgi(req: &Request) -> bool {
        matches!(req.method, Method::Get | Method::Head) && req.path == "/dyn/cgi"
    }

    /// The CGI program for one request; its stdout is the page. It leads a process group
    /// of its own, so whatever it starts can be killed with it. Standard output is left
    /// to the caller (`output()` captures it, a spawn for the event loop pipes it).
    pub fn cgi_command(&self) -> Command {
        let mut cmd = Command::new("/bin/sh");
        cmd.arg("-c")
            .arg(&self.cgi_script)
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0);
        cmd
    }

    pub fn answer(&self, req: &Request, body: &[u8]) -> Result<Vec<u8>, Reject> {
        match (req.method, req.path.as_str()) {
            (Method::Get | Method::Head, "/dyn/ad") => Ok(ad_page(req.cookie.as_deref())),
            (Method::Post, "/dyn/post") => {
                let mut log = self.log.lock().map_err(|_| Reject::Bad)?;
                let mut line = body.to_vec();
                line.push(b'\n');
                log.write_all(&line).map_err(|_| Reject::Bad)?;
                Ok(format!("posted {} bytes\n", body.len()).into_bytes())
            }
            _ if Self::is_cgi(req) => {
                let out = self.cgi_command().output().map_err(|_| Reject::NotFound)?;
                Ok(out.stdout)
            }
            (Method::Post, _) | (_, "/dyn/post") => Err(Reject::Method),
            _ => Err(Reject::NotFound),
        }
    }
}

fn cookie_value(cookie: &str, key: &str) -> Option<u32> {
    cookie.split(';').find_map(|kv| {
        let (k, v) = kv.trim().split_once('=')?;
        (k == key).then(|| v.parse().ok()).flatten()
    })
}

/// The ad page for a cookie: the next ad after `last_ad` that best matches `user`.
pub fn ad_page(cookie: Option<&str>) -> Vec<u8> {
    let cookie = cookie.unwrap_or("");
    let user = cookie_value(cookie, "user").unwrap_or(0);
    let last = cookie_value(cookie, "last_ad").unwrap_or(0) % ADS;
    let demo = mix32(user);
    let mut best = (0u32, last);
    for step in 1..=ADS {
        let ad = (last + step) % ADS;
        let score = (mix32(ad + 1_000_003) & demo).count_ones();
        if score > best.0 {
            best = (score, ad);
        }
    }
    let mut page = format!(
        "<html><body><p>user {user}</p><p>ad {} (match {} bits)</p>",
        best.1, best.0
    );
    while page.len() < 1000 {
        page.push_str("<p>smtlab dynamic content</p>");
    }
    page.push_str("</body></html>\n");
    page.into_bytes()
}

/// The dynamic requests of the load, with their weights in the whole mix.
pub fn requests() -> (Vec<RequestSpec>, Vec<f64>) {
    let mut specs = Vec::new();
    let mut weights = Vec::new();
    let users = 32;
    for u in 0..users {
        let mut r = RequestSpec::get("/dyn/ad");
        r.headers
            .push(format!("Cookie: user={u}; last_ad={}", mix32(u) % ADS));
        specs.push(r);
        weights.push(AD_SHARE / users as f64);
    }
    let mut post = RequestSpec::get("/dyn/post");
    post.method = "POST".into();
    post.body = b"name=smtlab&comment=a+short+post+of+the+dynamic+mix".to_vec();
    specs.push(post);
    weights.push(POST_SHARE);
    specs.push(RequestSpec::get("/dyn/cgi"));
    weights.push(CGI_SHARE);
    (specs, weights)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(method: Method, path: &str, cookie: Option<&str>) -> Request {
        Request {
            method,
            path: path.into(),
            query: String::new(),
            keep_alive: true,
            content_length: 0,
            expect_continue: false,
            cookie: cookie.map(Into::into),
            head_len: 0,
        }
    }

    #[test]
    fn dynamic_answers() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("post.log");
        let d = Dynamic::new(&log).unwrap();
        let a = d
            .answer(&req(Method::Get, "/dyn/ad", Some("user=3; last_ad=7")), b"")
            .unwrap();
        let b = d
            .answer(&req(Method::Get, "/dyn/ad", Some("user=3; last_ad=7")), b"")
            .unwrap();
        assert_eq!(a, b);
        assert!(a.len() >= 1000);
        d.answer(&req(Method::Post, "/dyn/post", None), b"hello")
            .unwrap();
        d.answer(&req(Method::Post, "/dyn/post", None), b"world")
            .unwrap();
        assert_eq!(std::fs::read_to_string(&log).unwrap(), "hello\nworld\n");
        let cgi = d.answer(&req(Method::Get, "/dyn/cgi", None), b"").unwrap();
        assert!(String::from_utf8_lossy(&cgi).contains("smtlab cgi page"));
        assert_eq!(
            d.answer(&req(Method::Get, "/dyn/nothing", None), b""),
            Err(Reject::NotFound)
        );
        let (specs, weights) = requests();
        assert_eq!(specs.len(), weights.len());
        let total: f64 = weights.iter().sum();
        assert!((total - (1.0 - STATIC_SHARE)).abs() < 1e-9);
    }
}
