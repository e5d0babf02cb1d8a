//! Real servers (nginx, Apache httpd) from a configuration generated into a temporary
//! directory, on a free loopback port, pinned to the placement, and gone with smtlab.
//!
//! * nginx: one worker per placement CPU (`worker_cpu_affinity`), the master pinned to
//!   the placement too, sendfile on, no access log.
//! * Apache httpd (`apache2` or `httpd` run directly with `-f` and `-d`, not apachectl):
//!   the `prefork` MPM (a process per connection, the paper's Apache-MP) or `event`
//!   (threads, the paper's Apache-MT), every process pinned to the placement's CPUs.
//!
//! The programs are found where users keep them ([`find`]): the path given
//! (`--param nginx=PATH`, `--param apache=PATH`), else on `PATH`, else in the usual
//! system directories.
//!
//! Every server runs as a [`ChildGroup`]: its whole tree (workers, CGI children, a
//! daemon a user's command forks off) is killed when the cell ends and by smtlab's
//! guardian if smtlab dies; the configuration directory (`smtlab-httpd-*`) is a
//! [`ScratchDir`], removed at the end of the cell, on a signal, or by the next smtlab.
//!
//! When smtlab runs as root the servers drop to `nobody`/`nogroup`, so the document
//! root and its files are made world-readable. Start-up waits until a GET is answered;
//! a server that does not come up is an error quoting the last line of its error log
//! (kept in the configuration directory, named in the error). Not installed: an error
//! that says how to install it.

use std::io::{self, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use smtlab_bench::process::ChildGroup;
use smtlab_model::CpuSet;
use smtlab_placement::pin::CommandPinExt;

use crate::scratch::ScratchDir;

/// Apache's multi-processing module.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mpm {
    Prefork,
    Event,
}

/// Where nginx is looked for after `PATH`.
pub const NGINX_PLACES: &[&str] = &[
    "/usr/sbin/nginx",
    "/usr/local/sbin/nginx",
    "/usr/local/nginx/sbin/nginx",
];
/// Where Apache httpd is looked for after `PATH` (`apache2` on Debian, `httpd`
/// elsewhere).
pub const APACHE_PLACES: &[&str] = &[
    "/usr/sbin/apache2",
    "/usr/sbin/httpd",
    "/usr/local/apache2/bin/httpd",
];
/// Apache's module directories, relative to the program's directory, then absolute.
const APACHE_MODULE_DIRS: &[&str] = &[
    "../lib/apache2/modules",
    "../modules",
    "../lib64/httpd/modules",
    "../lib/httpd/modules",
    "/usr/lib/apache2/modules",
    "/usr/lib64/httpd/modules",
    "/usr/lib/httpd/modules",
];
/// Prefix of the configuration directories under the temporary directory.
pub const DIR_PREFIX: &str = "smtlab-httpd-";

/// A real server process group and its configuration directory.
#[derive(Debug)]
pub struct RealServer {
    addr: SocketAddr,
    // Field order: the group is stopped before the directory is removed.
    group: Option<ChildGroup>,
    dir: Option<ScratchDir>,
    pub error_log: PathBuf,
    pub name: &'static str,
}

/// Why a real server (nginx, Apache or the user's command) could not be started. The
/// I/O errors are part of the messages, not `source`s, so each is printed once.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("{param}={given:?}: expected the path of a runnable {name} program")]
    BadProgram {
        param: &'static str,
        given: String,
        name: String,
    },
    #[error(
        "{name} is not installed (no {} on PATH nor {}): apt-get install {pkg}, or give --param {param}=PATH",
        .names.join(" or "),
        .places.join(", ")
    )]
    NotInstalled {
        name: String,
        names: &'static [&'static str],
        places: &'static [&'static str],
        pkg: &'static str,
        param: &'static str,
    },
    #[error("no Apache module directory (with mod_mpm_prefork.so) found for {}", smtlab_model::quote::path(.program))]
    NoApacheModules { program: PathBuf },
    #[error(
        "server=cmd needs --param cmd='YOUR SERVER COMMAND' (with {{port}} where it takes its port, or --param port=N)"
    )]
    NoCommand,
    #[error("cmd={cmd:?}: put {{port}} where the command takes its port, or give --param port=N")]
    NoPort { cmd: String },
    /// `what` says what was being done ("cannot write nginx.conf").
    #[error("{what}: {error}")]
    Io { what: String, error: io::Error },
    #[error("{0}")]
    Os(io::Error),
    #[error("{name}: {error}")]
    Pin {
        name: &'static str,
        error: smtlab_placement::pin::PinError,
    },
    #[error(
        "{name} {what}; its log says: {why} (logs kept in {kept} until the next smtlab starts)"
    )]
    DidNotStart {
        name: &'static str,
        what: String,
        why: String,
        kept: String,
    },
}

fn io_error(what: impl Into<String>) -> impl FnOnce(io::Error) -> ServerError {
    let what = what.into();
    move |error| ServerError::Io { what, error }
}

/// The loopback address the real servers listen on unless told otherwise.
const LOOPBACK: IpAddr = IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);

/// A port free on `ip` (every address when unspecified).
fn free_port_on(ip: IpAddr) -> Result<u16, ServerError> {
    TcpListener::bind((ip, 0))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(io_error(format!("cannot find a free port on {ip}")))
}

/// Where a server listening on `ip` is probed: loopback when it listens on every address.
fn probe_addr(ip: IpAddr, port: u16) -> SocketAddr {
    let ip = match ip {
        IpAddr::V4(v) if v.is_unspecified() => LOOPBACK,
        IpAddr::V6(v) if v.is_unspecified() => IpAddr::V6(std::net::Ipv6Addr::LOCALHOST),
        other => other,
    };
    SocketAddr::new(ip, port)
}

/// The program of server `name` (`nginx`, or `apache2` for Apache httpd): `given` when
/// not empty (it must be a runnable file), else the first of its names on `PATH`, else
/// the first of the usual places that exists. The error says where it looked and how
/// to install it.
pub fn find(name: &str, given: &str) -> Result<PathBuf, ServerError> {
    let (names, places, pkg, param): (
        &'static [&'static str],
        &'static [&'static str],
        &'static str,
        &'static str,
    ) = match name {
        "nginx" => (&["nginx"], NGINX_PLACES, "nginx", "nginx"),
        _ => (&["apache2", "httpd"], APACHE_PLACES, "apache2", "apache"),
    };
    if !given.is_empty() {
        return which::which(given).map_err(|_| ServerError::BadProgram {
            param,
            given: given.to_string(),
            name: name.to_string(),
        });
    }
    names
        .iter()
        .find_map(|n| which::which(n).ok())
        .or_else(|| {
            places
                .iter()
                .map(PathBuf::from)
                .find(|p| which::which(p).is_ok())
        })
        .ok_or_else(|| ServerError::NotInstalled {
            name: name.to_string(),
            names,
            places,
            pkg,
            param,
        })
}

/// Why server `name` (`nginx` or `apache2`) cannot be used, if it cannot.
pub fn missing(name: &str) -> Option<String> {
    find(name, "").err().map(|e| e.to_string())
}

/// The directory holding Apache's modules for `program`.
fn apache_modules(program: &Path) -> Result<PathBuf, ServerError> {
    let bindir = program.parent().unwrap_or(Path::new("/"));
    APACHE_MODULE_DIRS
        .iter()
        .map(|d| bindir.join(d))
        .find(|d| d.join("mod_mpm_prefork.so").is_file())
        .ok_or_else(|| ServerError::NoApacheModules {
            program: program.to_path_buf(),
        })
}

/// Makes `root` and everything under it readable by the unprivileged server user.
fn open_up(root: &Path) -> Result<(), ServerError> {
    use std::os::unix::fs::PermissionsExt;
    let set = |p: &Path, mode: u32| {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).map_err(io_error(
            format!("cannot make {} readable", smtlab_model::quote::path(p)),
        ))
    };
    set(root, 0o755)?;
    for entry in std::fs::read_dir(root).map_err(ServerError::Os)? {
        let entry = entry.map_err(ServerError::Os)?;
        let p = entry.path();
        if p.is_dir() {
            open_up(&p)?;
        } else {
            set(&p, 0o644)?;
        }
    }
    Ok(())
}

fn last_line(path: &Path) -> String {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|s| {
            s.lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .map(String::from)
        })
        .unwrap_or_else(|| "(empty)".into())
}

impl RealServer {
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The server's first process (its tree's root), while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.group.as_ref().map(ChildGroup::id)
    }

    /// nginx at `program` serving `root` with one worker per CPU of `cpus` (one unpinned
    /// worker when empty), listening on `ip` (every address when unspecified: where load
    /// clients on other hosts reach it).
    pub fn nginx_on(
        program: &Path,
        root: &Path,
        cpus: &[u32],
        ip: IpAddr,
    ) -> Result<RealServer, ServerError> {
        open_up(root)?;
        let dir = tempdir()?;
        let port = free_port_on(ip)?;
        let listen = SocketAddr::new(ip, port);
        let d = dir.path().display();
        let workers = cpus.len().max(1);
        let affinity = if cpus.is_empty() {
            String::new()
        } else {
            let top = *cpus.iter().max().unwrap_or(&0) as usize;
            let masks: Vec<String> = cpus
                .iter()
                .map(|&c| {
                    (0..=top)
                        .rev()
                        .map(|b| if b == c as usize { '1' } else { '0' })
                        .collect()
                })
                .collect();
            format!("worker_cpu_affinity {};\n", masks.join(" "))
        };
        let user = if crate::is_root() {
            "user nobody nogroup;\n"
        } else {
            ""
        };
        let conf = format!(
            "daemon off;\nmaster_process on;\n{user}worker_processes {workers};\n{affinity}\
             worker_rlimit_nofile 65536;\nerror_log {d}/error.log;\npid {d}/nginx.pid;\n\
             events {{ worker_connections 16384; }}\n\
             http {{\n  access_log off;\n  sendfile on;\n  tcp_nopush on;\n\
               keepalive_requests 1000000;\n  keepalive_timeout 30s;\n\
               client_body_temp_path {d}/body;\n  proxy_temp_path {d}/proxy;\n\
               fastcgi_temp_path {d}/fastcgi;\n  uwsgi_temp_path {d}/uwsgi;\n\
               scgi_temp_path {d}/scgi;\n  types {{ }}\n  default_type application/octet-stream;\n\
               server {{\n    listen {listen} backlog=4096 reuseport;\n\
                 root {};\n  }}\n}}\n",
            root.display()
        );
        let conf_path = dir.path().join("nginx.conf");
        std::fs::write(&conf_path, conf).map_err(io_error("cannot write nginx.conf"))?;
        let mut cmd = Command::new(program);
        cmd.arg("-c").arg(&conf_path).arg("-p").arg(dir.path());
        start(cmd, dir, probe_addr(ip, port), cpus, "nginx", probe)
    }

    /// Apache httpd at `program` with `mpm` serving `root`, every process on `cpus`,
    /// listening on `ip` (every address when unspecified: where load clients on other
    /// hosts reach it); answering the dynamic requests of `web-capacity` too when
    /// `dynamic`: `/dyn/ad`, `/dyn/post` and `/dyn/cgi` are small shell scripts run by
    /// mod_cgi (prefork) or mod_cgid (event), a fork and an exec per request.
    pub fn apache_on(
        program: &Path,
        root: &Path,
        cpus: &[u32],
        mpm: Mpm,
        dynamic: bool,
        ip: IpAddr,
    ) -> Result<RealServer, ServerError> {
        let modules = apache_modules(program)?;
        open_up(root)?;
        let dir = tempdir()?;
        let port = free_port_on(ip)?;
        let listen = SocketAddr::new(ip, port);
        let d = dir.path().display();
        let m = modules.display();
        let cgi = if dynamic {
            write_cgi_scripts(dir.path())?;
            let module = match mpm {
                Mpm::Prefork => format!("LoadModule cgi_module {m}/mod_cgi.so\n"),
                Mpm::Event => {
                    format!("LoadModule cgid_module {m}/mod_cgid.so\nScriptSock {d}/cgid.sock\n")
                }
            };
            format!(
                "{module}LoadModule alias_module {m}/mod_alias.so\nScriptAlias /dyn/ {d}/cgi/\n\
                 <Directory \"{d}/cgi\">\n  Require all granted\n</Directory>\n"
            )
        } else {
            String::new()
        };
        let (module, tuning) = match mpm {
            Mpm::Prefork => (
                format!("LoadModule mpm_prefork_module {m}/mod_mpm_prefork.so"),
                "StartServers 16\nMinSpareServers 8\nMaxSpareServers 64\nServerLimit 512\n\
                 MaxRequestWorkers 512\nMaxConnectionsPerChild 0\n",
            ),
            Mpm::Event => (
                format!("LoadModule mpm_event_module {m}/mod_mpm_event.so"),
                "StartServers 2\nServerLimit 16\nThreadsPerChild 64\nMaxRequestWorkers 1024\n\
                 MinSpareThreads 64\nMaxSpareThreads 1024\nMaxConnectionsPerChild 0\n",
            ),
        };
        let user = if crate::is_root() {
            "User nobody\nGroup nogroup\n"
        } else {
            ""
        };
        let conf = format!(
            "ServerRoot \"{d}\"\nServerName localhost\nListen {listen}\n{module}\n\
             LoadModule authz_core_module {m}/mod_authz_core.so\n\
             PidFile {d}/httpd.pid\nErrorLog {d}/error.log\nLogLevel warn\n\
             DefaultRuntimeDir {d}\nMutex file:{d} default\n{user}\
             DocumentRoot \"{root}\"\n<Directory \"{root}\">\n  Require all granted\n</Directory>\n\
             EnableSendfile On\nEnableMMAP On\nKeepAlive On\nMaxKeepAliveRequests 0\n\
             KeepAliveTimeout 30\nListenBacklog 4096\nHostnameLookups Off\n{tuning}{cgi}",
            root = root.display()
        );
        let conf_path = dir.path().join("httpd.conf");
        std::fs::write(&conf_path, conf).map_err(io_error("cannot write httpd.conf"))?;
        let mut cmd = Command::new(program);
        cmd.arg("-f")
            .arg(&conf_path)
            .arg("-d")
            .arg(dir.path())
            .arg("-DFOREGROUND");
        let name = match mpm {
            Mpm::Prefork => "apache-prefork",
            Mpm::Event => "apache-event",
        };
        start(cmd, dir, probe_addr(ip, port), cpus, name, probe)
    }
}

impl RealServer {
    /// The user's own server: `cmd` run by `/bin/sh -c` pinned to `cpus`, with `{port}`
    /// replaced by a free loopback port (or listening on `port` when given) and `{root}`
    /// by the file set's directory. Its output goes to files in a temporary directory,
    /// quoted when it does not come up.
    pub fn custom(
        cmd: &str,
        port: u16,
        root: &Path,
        cpus: &[u32],
    ) -> Result<RealServer, ServerError> {
        RealServer::custom_in(cmd, port, Some(root), cpus, probe)
    }

    /// The user's own server of any protocol (`smtlab advise --server CMD --client
    /// CMD`: a database and its load tool): `cmd` run by `sh` on `cpus` in a scratch
    /// directory of its own, `{port}` filled in (a free port when `port` is 0), ready
    /// when its port accepts a TCP connection.
    pub fn custom_tcp(cmd: &str, port: u16, cpus: &[u32]) -> Result<RealServer, ServerError> {
        RealServer::custom_in(cmd, port, None, cpus, accepts)
    }

    /// `cmd` run by `sh` on `cpus` in `root` (`None`: its scratch directory), `{port}`
    /// and `{root}` filled in, up when `ready` says so.
    fn custom_in(
        cmd: &str,
        port: u16,
        root: Option<&Path>,
        cpus: &[u32],
        ready: fn(SocketAddr) -> bool,
    ) -> Result<RealServer, ServerError> {
        if cmd.trim().is_empty() {
            return Err(ServerError::NoCommand);
        }
        if port == 0 && !cmd.contains("{port}") {
            return Err(ServerError::NoPort {
                cmd: cmd.to_string(),
            });
        }
        if let Some(root) = root {
            open_up(root)?;
        }
        let scratch = tempdir()?;
        let port = if port == 0 {
            free_port_on(LOOPBACK)?
        } else {
            port
        };
        let mut text = cmd.replace("{port}", &port.to_string());
        if let Some(root) = root {
            text = text.replace("{root}", &root.display().to_string());
        }
        let mut c = Command::new("/bin/sh");
        c.arg("-c")
            .arg(format!("exec {text}"))
            .current_dir(root.unwrap_or(scratch.path()));
        let addr = probe_addr(LOOPBACK, port);
        start(c, scratch, addr, cpus, "your server", ready)
    }
}

/// Whether `addr` accepts a TCP connection (a server of any protocol is listening).
fn accepts(addr: SocketAddr) -> bool {
    TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok()
}

/// The CGI scripts behind Apache's dynamic requests, readable and runnable by the
/// unprivileged server user; posts go to `post.log` beside them.
fn write_cgi_scripts(dir: &Path) -> Result<(), ServerError> {
    use std::os::unix::fs::PermissionsExt;
    let fail = |error: std::io::Error| ServerError::Io {
        what: "cannot write the CGI scripts".into(),
        error,
    };
    let cgi = dir.join("cgi");
    std::fs::create_dir(&cgi).map_err(fail)?;
    let log = dir.join("post.log");
    std::fs::write(&log, b"").map_err(fail)?;
    std::fs::set_permissions(&log, std::fs::Permissions::from_mode(0o666)).map_err(fail)?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).map_err(fail)?;
    // Every script sets `body`; the footer sends it with its length, so kept-alive
    // connections get a Content-Length rather than chunks.
    let header = "#!/bin/sh\n";
    let footer = "printf 'Content-Type: text/html\\r\\nContent-Length: %d\\r\\n\\r\\n%s' \"${#body}\" \"$body\"\n";
    let scripts = [
        (
            "ad",
            // The ad follows from the cookie's user and last ad, as the built-in
            // servers' rotation does (a simpler choice: the next ad of the user's kind).
            "user=$(printf '%s' \"$HTTP_COOKIE\" | sed -n 's/.*user=\\([0-9]*\\).*/\\1/p')\n\
             last=$(printf '%s' \"$HTTP_COOKIE\" | sed -n 's/.*last_ad=\\([0-9]*\\).*/\\1/p')\n\
             ad=$(( (${last:-0} + 1 + ${user:-0} % 7) % 360 ))\n\
             body=\"<html><body><p>user $user</p><p>ad $ad</p></body></html>\"\n",
        ),
        (
            "post",
            &format!(
                "head -c \"${{CONTENT_LENGTH:-0}}\" >> {}\necho >> {}\nbody=posted\n",
                log.display(),
                log.display()
            ),
        ),
        ("cgi", "body=\"smtlab cgi page, pid $$\"\n"),
    ];
    for (name, body) in scripts {
        let p = cgi.join(name);
        std::fs::write(&p, format!("{header}{body}{footer}")).map_err(fail)?;
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).map_err(fail)?;
    }
    std::fs::set_permissions(&cgi, std::fs::Permissions::from_mode(0o755)).map_err(fail)?;
    Ok(())
}

fn tempdir() -> Result<ScratchDir, ServerError> {
    let dir =
        ScratchDir::make(&std::env::temp_dir(), DIR_PREFIX).map_err(|(what, dir, error)| {
            ServerError::Io {
                what: format!("cannot {what} {}", smtlab_model::quote::path(&dir)),
                error,
            }
        })?;
    // The unprivileged workers open nothing here, but the master writes logs as root.
    Ok(dir)
}

fn start(
    mut cmd: Command,
    dir: ScratchDir,
    addr: SocketAddr,
    cpus: &[u32],
    name: &'static str,
    probe: fn(SocketAddr) -> bool,
) -> Result<RealServer, ServerError> {
    let error_log = dir.path().join("error.log");
    let stderr_path = dir.path().join("output.log");
    let out = std::fs::File::create(&stderr_path).map_err(ServerError::Os)?;
    let out2 = out.try_clone().map_err(ServerError::Os)?;
    cmd.stdin(Stdio::null())
        .stdout(Stdio::from(out))
        .stderr(Stdio::from(out2));
    if !cpus.is_empty() {
        let set: CpuSet = cpus.iter().copied().collect();
        cmd.pin_to(&set)
            .map_err(|error| ServerError::Pin { name, error })?;
    }
    let group = ChildGroup::spawn(&mut cmd).map_err(io_error(format!("cannot start {name}")))?;
    let mut server = RealServer {
        addr,
        group: Some(group),
        dir: Some(dir),
        error_log,
        name,
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if probe(addr) {
            return Ok(server);
        }
        let exited = server
            .group
            .as_mut()
            .and_then(|g| g.try_wait().ok().flatten());
        // A command that daemonizes ends at once with success and leaves its server
        // running in the same tree: wait for it to answer as for any other.
        let daemonized = exited.is_some_and(|s| s.success())
            && server
                .group
                .as_ref()
                .is_some_and(|g| g.cgroup().is_some() && !g.members().is_empty());
        if (exited.is_some() && !daemonized) || Instant::now() > deadline {
            let mut why = last_line(&server.error_log);
            if why == "(empty)" {
                why = last_line(&stderr_path);
            }
            let what = match exited {
                Some(s) if !daemonized => format!("exited ({s})"),
                _ => "did not answer within 10 s".into(),
            };
            // Keep the logs for the user: the directory is not removed now.
            let kept = server.dir.take().map(|d| d.keep());
            let kept = kept.map(|p| p.display().to_string()).unwrap_or_default();
            return Err(ServerError::DidNotStart {
                name,
                what,
                why,
                kept,
            });
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Whether a GET of `/` gets any HTTP answer.
fn probe(addr: SocketAddr) -> bool {
    let Ok(mut s) = TcpStream::connect_timeout(&addr, Duration::from_millis(200)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
    if s.write_all(b"GET / HTTP/1.0\r\nHost: localhost\r\n\r\n")
        .is_err()
    {
        return false;
    }
    let mut b = [0u8; 16];
    matches!(s.read(&mut b), Ok(n) if n >= 5 && &b[..5] == b"HTTP/")
}

impl Drop for RealServer {
    fn drop(&mut self) {
        if let Some(g) = self.group.take()
            && let Ok(stopped) = g.stop(Duration::from_secs(2))
            && let Some(line) = smtlab_bench::process::killed_line(&stopped.killed, self.name)
        {
            // A daemon the user's command forked off, named for the user.
            smtlab_bench::process::note(line);
        }
        self.dir.take();
    }
}
