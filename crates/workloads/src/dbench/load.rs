//! dbench load files: one file-server operation per line, as recorded from a NetBench
//! client talking SMB (dbench 3 and 4 `client.txt`).
//!
//! ```text
//! [TIMESTAMP] OPERATION ARGUMENTS... NT_STATUS_RESULT
//! NTCreateX "\clients\client1\~dmtmp\WORD\CHAP10.DOC" 0x20 0x1 11975 NT_STATUS_OK
//! ReadX 11975 0 65536 65536 NT_STATUS_OK
//! 0.123 WriteX 11975 4096 4096 4096 NT_STATUS_OK
//! ```
//!
//! dbench 4 files may start each line with a timestamp in seconds (the replay pace of
//! `--target-rate`); smtlab accepts and keeps it but replays as fast as it can, as
//! dbench does without a target rate. Paths are quoted and use backslashes; numbers are
//! decimal or `0x` hex. The last word is the NTSTATUS the recorded server returned:
//! `NT_STATUS_OK`, or a failure the replay must also see. Empty lines and lines
//! starting with `#` are skipped. Anything else is an error naming the file and line.

/// One operation of a load file.
#[derive(Debug, Clone, PartialEq)]
pub enum Op {
    /// Open or create a file or directory as handle `handle`.
    NtCreateX {
        path: String,
        options: u32,
        disposition: u32,
        handle: u32,
    },
    Close {
        handle: u32,
    },
    ReadX(Transfer),
    WriteX(Transfer),
    Unlink {
        path: String,
    },
    Rename {
        from: String,
        to: String,
    },
    Mkdir {
        path: String,
    },
    Rmdir {
        path: String,
    },
    Deltree {
        path: String,
    },
    QueryPath {
        path: String,
    },
    QueryFile {
        handle: u32,
    },
    QueryFs,
    SetFileInfo {
        handle: u32,
    },
    FindFirst {
        pattern: String,
        max: u32,
        count: u32,
    },
    Flush {
        handle: u32,
    },
    LockX(Range),
    UnlockX(Range),
}

/// What a `ReadX` or `WriteX` moves: `size` bytes at `offset` of handle `handle`, of
/// which the recorded server returned `ret`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Transfer {
    pub handle: u32,
    pub offset: u64,
    pub size: u32,
    pub ret: u32,
}

/// The byte range a `LockX` or `UnlockX` takes or gives back.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Range {
    pub handle: u32,
    pub offset: u64,
    pub size: u64,
}

/// Operation kinds, for per-operation counts and latencies.
pub const KINDS: [&str; 17] = [
    "NTCreateX",
    "Close",
    "ReadX",
    "WriteX",
    "Unlink",
    "Rename",
    "Mkdir",
    "Rmdir",
    "Deltree",
    "QUERY_PATH_INFORMATION",
    "QUERY_FILE_INFORMATION",
    "QUERY_FS_INFORMATION",
    "SET_FILE_INFORMATION",
    "FIND_FIRST",
    "Flush",
    "LockX",
    "UnlockX",
];

impl Op {
    /// Index into [`KINDS`].
    pub fn kind(&self) -> usize {
        match self {
            Op::NtCreateX { .. } => 0,
            Op::Close { .. } => 1,
            Op::ReadX(_) => 2,
            Op::WriteX(_) => 3,
            Op::Unlink { .. } => 4,
            Op::Rename { .. } => 5,
            Op::Mkdir { .. } => 6,
            Op::Rmdir { .. } => 7,
            Op::Deltree { .. } => 8,
            Op::QueryPath { .. } => 9,
            Op::QueryFile { .. } => 10,
            Op::QueryFs => 11,
            Op::SetFileInfo { .. } => 12,
            Op::FindFirst { .. } => 13,
            Op::Flush { .. } => 14,
            Op::LockX(_) => 15,
            Op::UnlockX(_) => 16,
        }
    }
}

/// One line: the operation and what the recorded server answered.
#[derive(Debug, Clone, PartialEq)]
pub struct Line {
    /// 1-based line number in the file.
    pub number: usize,
    pub timestamp: Option<f64>,
    pub op: Op,
    /// Whether the recording's status was `NT_STATUS_OK`.
    pub expect_ok: bool,
}

/// A parsed load file.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadFile {
    /// Where it came from, for messages.
    pub name: String,
    pub lines: Vec<Line>,
}

/// A line that is not a load-file operation.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}:{line}: {reason}")]
pub struct LoadError {
    pub file: String,
    pub line: usize,
    pub reason: String,
}

/// What is wrong with one line of a load file (the line itself is added by [`parse`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum LineError {
    #[error("unterminated quoted path")]
    Unterminated,
    #[error("timestamp {0:?} is not a number")]
    Timestamp(String),
    #[error("{what} {word:?} is not a number")]
    NotANumber { what: String, word: String },
    #[error("{what} {word} is out of range")]
    OutOfRange { what: String, word: String },
    #[error("empty operation")]
    Empty,
    #[error("{0}: missing arguments and NT_STATUS result")]
    NoStatus(String),
    #[error("{name}: the last word must be an NT_STATUS_ result, found {status:?}")]
    BadStatus { name: String, status: String },
    #[error("{name} takes {n} argument(s) ({form}) before the status, found {found}")]
    Arguments {
        name: String,
        n: usize,
        form: &'static str,
        found: usize,
    },
    #[error("{name}: size {size} is over 16 MiB")]
    TooBig { name: String, size: u32 },
    #[error(
        "Unlink takes a path and an optional attribute before the status, found {0} argument(s)"
    )]
    Unlink(usize),
    #[error(
        "unknown operation {0:?} (expected NTCreateX, Close, ReadX, WriteX, Unlink, Rename, Mkdir, Rmdir, Deltree, QUERY_PATH_INFORMATION, QUERY_FILE_INFORMATION, QUERY_FS_INFORMATION, SET_FILE_INFORMATION, FIND_FIRST, Flush, LockX or UnlockX)"
    )]
    Unknown(String),
}

/// Splits a line into words; a double-quoted word may hold spaces.
fn words(text: &str) -> Result<Vec<String>, LineError> {
    let mut out = Vec::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c.is_whitespace() {
            continue;
        }
        let mut w = String::new();
        if c == '"' {
            loop {
                match chars.next() {
                    Some('"') => break,
                    Some(ch) => w.push(ch),
                    None => return Err(LineError::Unterminated),
                }
            }
        } else {
            w.push(c);
            while let Some(ch) = chars.next_if(|ch| !ch.is_whitespace()) {
                w.push(ch);
            }
        }
        out.push(w);
    }
    Ok(out)
}

fn number(word: &str, what: &str) -> Result<u64, LineError> {
    let parsed = match word.strip_prefix("0x").or_else(|| word.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => word.parse::<u64>(),
    };
    parsed.map_err(|_| LineError::NotANumber {
        what: what.to_string(),
        word: word.to_string(),
    })
}

fn small(word: &str, what: &str) -> Result<u32, LineError> {
    let n = number(word, what)?;
    u32::try_from(n).map_err(|_| LineError::OutOfRange {
        what: what.to_string(),
        word: word.to_string(),
    })
}

/// Parses one line's words (timestamp already removed).
fn parse_op(w: &[String]) -> Result<(Op, bool), LineError> {
    let Some((name, rest)) = w.split_first() else {
        return Err(LineError::Empty);
    };
    let Some((status, args)) = rest.split_last() else {
        return Err(LineError::NoStatus(name.clone()));
    };
    if !status.starts_with("NT_STATUS_") {
        return Err(LineError::BadStatus {
            name: name.clone(),
            status: status.clone(),
        });
    }
    let expect_ok = status == "NT_STATUS_OK";
    let op = Call { name, args }.op()?;
    Ok((op, expect_ok))
}

/// One operation's name and arguments, status removed.
struct Call<'a> {
    name: &'a String,
    args: &'a [String],
}

impl Call<'_> {
    /// Checks that there are `n` arguments, of the form `form`.
    fn want(&self, n: usize, form: &'static str) -> Result<(), LineError> {
        if self.args.len() == n {
            Ok(())
        } else {
            Err(LineError::Arguments {
                name: self.name.clone(),
                n,
                form,
                found: self.args.len(),
            })
        }
    }

    fn op(&self) -> Result<Op, LineError> {
        let (name, args) = (self.name.as_str(), self.args);
        Ok(match name {
            "NTCreateX" => {
                self.want(4, "path options disposition handle")?;
                Op::NtCreateX {
                    path: args[0].clone(),
                    options: small(&args[1], "create options")?,
                    disposition: small(&args[2], "create disposition")?,
                    handle: small(&args[3], "handle")?,
                }
            }
            "Close" | "Flush" => {
                self.want(1, "handle")?;
                let handle = small(&args[0], "handle")?;
                if name == "Close" {
                    Op::Close { handle }
                } else {
                    Op::Flush { handle }
                }
            }
            "ReadX" | "WriteX" => self.read_write()?,
            "LockX" | "UnlockX" => self.lock()?,
            "Unlink" => {
                // dbench 4 adds the attribute mask; older files omit it.
                if args.is_empty() || args.len() > 2 {
                    return Err(LineError::Unlink(args.len()));
                }
                Op::Unlink {
                    path: args[0].clone(),
                }
            }
            "Rename" => {
                self.want(2, "old-path new-path")?;
                Op::Rename {
                    from: args[0].clone(),
                    to: args[1].clone(),
                }
            }
            "Mkdir" | "Rmdir" | "Deltree" => {
                self.want(1, "path")?;
                let path = args[0].clone();
                match name {
                    "Mkdir" => Op::Mkdir { path },
                    "Rmdir" => Op::Rmdir { path },
                    _ => Op::Deltree { path },
                }
            }
            _ => self.query()?,
        })
    }

    /// `ReadX` or `WriteX`.
    fn read_write(&self) -> Result<Op, LineError> {
        let args = self.args;
        self.want(4, "handle offset size returned-size")?;
        let (handle, offset, size, ret) = (
            small(&args[0], "handle")?,
            number(&args[1], "offset")?,
            small(&args[2], "size")?,
            small(&args[3], "returned size")?,
        );
        if size > 16 << 20 {
            return Err(LineError::TooBig {
                name: self.name.clone(),
                size,
            });
        }
        let t = Transfer {
            handle,
            offset,
            size,
            ret,
        };
        Ok(if self.name == "ReadX" {
            Op::ReadX(t)
        } else {
            Op::WriteX(t)
        })
    }

    /// `LockX` or `UnlockX`.
    fn lock(&self) -> Result<Op, LineError> {
        let args = self.args;
        self.want(3, "handle offset size")?;
        let r = Range {
            handle: small(&args[0], "handle")?,
            offset: number(&args[1], "offset")?,
            size: number(&args[2], "size")?,
        };
        Ok(if self.name == "LockX" {
            Op::LockX(r)
        } else {
            Op::UnlockX(r)
        })
    }

    /// The information calls and directory search; any other name is unknown.
    fn query(&self) -> Result<Op, LineError> {
        let (name, args) = (self.name.as_str(), self.args);
        Ok(match name {
            "QUERY_PATH_INFORMATION" => {
                self.want(2, "path level")?;
                small(&args[1], "level")?;
                Op::QueryPath {
                    path: args[0].clone(),
                }
            }
            "QUERY_FILE_INFORMATION" | "SET_FILE_INFORMATION" => {
                self.want(2, "handle level")?;
                let handle = small(&args[0], "handle")?;
                small(&args[1], "level")?;
                if name.starts_with("Q") {
                    Op::QueryFile { handle }
                } else {
                    Op::SetFileInfo { handle }
                }
            }
            "QUERY_FS_INFORMATION" => {
                self.want(1, "level")?;
                small(&args[0], "level")?;
                Op::QueryFs
            }
            "FIND_FIRST" => {
                self.want(4, "pattern level max-count count")?;
                small(&args[1], "level")?;
                Op::FindFirst {
                    pattern: args[0].clone(),
                    max: small(&args[2], "max count")?,
                    count: small(&args[3], "count")?,
                }
            }
            other => return Err(LineError::Unknown(other.to_string())),
        })
    }
}

/// Parses the text of a load file called `name` (used in error messages).
pub fn parse(name: &str, text: &str) -> Result<LoadFile, LoadError> {
    let mut lines = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let number = i + 1;
        let err = |reason: LineError| LoadError {
            file: name.to_string(),
            line: number,
            reason: format!("{reason}: {}", raw.trim()),
        };
        let t = raw.trim();
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        let mut w = words(t).map_err(err)?;
        let timestamp = match w.first() {
            Some(first) if first.starts_with(|c: char| c.is_ascii_digit()) => {
                let ts = first
                    .parse::<f64>()
                    .ok()
                    .filter(|v| v.is_finite() && *v >= 0.0)
                    .ok_or_else(|| err(LineError::Timestamp(first.clone())))?;
                w.remove(0);
                Some(ts)
            }
            _ => None,
        };
        let (op, expect_ok) = parse_op(&w).map_err(err)?;
        lines.push(Line {
            number,
            timestamp,
            op,
            expect_ok,
        });
    }
    if lines.is_empty() {
        return Err(LoadError {
            file: name.to_string(),
            line: 0,
            reason: "no operations in the load file".into(),
        });
    }
    Ok(LoadFile {
        name: name.to_string(),
        lines,
    })
}

/// Reads and parses a load file.
pub fn read(path: &std::path::Path) -> Result<LoadFile, LoadError> {
    let name = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|e| LoadError {
        file: name.clone(),
        line: 0,
        reason: format!("cannot read the load file: {e}"),
    })?;
    let text = String::from_utf8_lossy(&bytes);
    parse(&name, &text)
}

/// Where the dbench package keeps its load file.
pub const PACKAGE_LOADFILES: [&str; 3] = [
    "/usr/share/dbench/client.txt",
    "/usr/share/dbench4/client.txt",
    "/usr/local/share/client.txt",
];

/// smtlab's own load when no dbench load file is installed: `files` documents per
/// client, each created and written in 64 KiB blocks, looked up, read back in 4 KiB and
/// 64 KiB reads, locked, flushed, renamed and deleted, with a directory scan, file-system
/// queries and lookups of missing names that must fail. About 70% of the bytes are
/// reads and 30% writes (the recorded NetBench mix is close to 75/25).
pub fn builtin(files: u32) -> String {
    let mut s = String::new();
    let root = r"\clients\client1";
    let dir = format!(r"{root}\docs");
    let mut push = |line: String| {
        s.push_str(&line);
        s.push('\n');
    };
    push(format!("Deltree \"{root}\" NT_STATUS_OK"));
    push(r#"Mkdir "\clients" NT_STATUS_OK"#.into());
    push(format!("NTCreateX \"{root}\" 0x1 0x2 1 NT_STATUS_OK"));
    push("Close 1 NT_STATUS_OK".into());
    push(format!("NTCreateX \"{dir}\" 0x1 0x2 2 NT_STATUS_OK"));
    push("Close 2 NT_STATUS_OK".into());
    push("QUERY_FS_INFORMATION 1 NT_STATUS_OK".into());
    for f in 0..files {
        let h = 100 + f;
        let name = format!(r"{dir}\doc{f:03}.dat");
        let blocks = 1 + f % 4;
        push(format!(
            "QUERY_PATH_INFORMATION \"{name}\" 1004 NT_STATUS_OBJECT_NAME_NOT_FOUND"
        ));
        push(format!("NTCreateX \"{name}\" 0x40 0x5 {h} NT_STATUS_OK"));
        for b in 0..blocks {
            push(format!(
                "WriteX {h} {} 65536 65536 NT_STATUS_OK",
                b as u64 * 65536
            ));
        }
        push(format!("QUERY_FILE_INFORMATION {h} 1005 NT_STATUS_OK"));
        push(format!("Flush {h} NT_STATUS_OK"));
        push(format!("Close {h} NT_STATUS_OK"));
        push(format!("NTCreateX \"{name}\" 0x40 0x1 {h} NT_STATUS_OK"));
        push(format!("LockX {h} 0 1 NT_STATUS_OK"));
        // Read twice: file servers see documents reopened and reread.
        for _ in 0..2 {
            for b in 0..blocks as u64 {
                push(format!("ReadX {h} {} 65536 65536 NT_STATUS_OK", b * 65536));
            }
        }
        for k in 0..4u64 {
            push(format!("ReadX {h} {} 4096 4096 NT_STATUS_OK", k * 4096));
        }
        push(format!("UnlockX {h} 0 1 NT_STATUS_OK"));
        push(format!("SET_FILE_INFORMATION {h} 1004 NT_STATUS_OK"));
        push(format!("Close {h} NT_STATUS_OK"));
        push(format!(
            "FIND_FIRST \"{dir}\\*\" 260 1366 {} NT_STATUS_OK",
            f + 1
        ));
        if f % 3 == 2 {
            let moved = format!(r"{dir}\old{f:03}.bak");
            push(format!("Rename \"{name}\" \"{moved}\" NT_STATUS_OK"));
            push(format!("Unlink \"{moved}\" 0x6 NT_STATUS_OK"));
            push(format!(
                "NTCreateX \"{moved}\" 0x40 0x1 {h} NT_STATUS_OBJECT_NAME_NOT_FOUND"
            ));
        }
    }
    for f in 0..files {
        if f % 3 != 2 {
            push(format!(r#"Unlink "{dir}\doc{f:03}.dat" 0x6 NT_STATUS_OK"#));
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(text: &str) -> Result<Line, LoadError> {
        parse("t.txt", text).map(|f| f.lines[0].clone())
    }

    #[test]
    fn dbench3_and_dbench4_lines() {
        let l = one(r#"NTCreateX "\clients\client1\~dmtmp\x y.doc" 0x40 0x2 9938 NT_STATUS_OK"#)
            .unwrap();
        assert_eq!(
            l.op,
            Op::NtCreateX {
                path: r"\clients\client1\~dmtmp\x y.doc".into(),
                options: 0x40,
                disposition: 2,
                handle: 9938
            }
        );
        assert!(l.expect_ok);
        assert_eq!(l.timestamp, None);
        let l = one("0.125 ReadX 10003 0 4096 4096 NT_STATUS_OK").unwrap();
        assert_eq!(l.timestamp, Some(0.125));
        assert_eq!(
            l.op,
            Op::ReadX(Transfer {
                handle: 10003,
                offset: 0,
                size: 4096,
                ret: 4096
            })
        );
        let l = one(r#"FIND_FIRST "\c\FILLER.*" 260 1366 0 NT_STATUS_NO_SUCH_FILE"#).unwrap();
        assert!(!l.expect_ok);
        let l = one(r#"Unlink "\a\b" 0x6 NT_STATUS_OK"#).unwrap();
        assert_eq!(
            l.op,
            Op::Unlink {
                path: r"\a\b".into()
            }
        );
        let l = one("LockX 10430 2147483538 1 NT_STATUS_OK").unwrap();
        assert_eq!(
            l.op,
            Op::LockX(Range {
                handle: 10430,
                offset: 2147483538,
                size: 1
            })
        );
        assert_eq!(
            one("SET_FILE_INFORMATION 5 1004 NT_STATUS_OK").unwrap().op,
            Op::SetFileInfo { handle: 5 }
        );
        assert_eq!(
            one("QUERY_FILE_INFORMATION 5 258 NT_STATUS_OK").unwrap().op,
            Op::QueryFile { handle: 5 }
        );
    }

    #[test]
    fn malformed_lines_name_the_file_and_line() {
        let cases = [
            ("Close 5\n", "last word must be an NT_STATUS_"),
            ("ReadX 1 2 NT_STATUS_OK\n", "ReadX takes 4 argument(s)"),
            (
                "Frobnicate 1 NT_STATUS_OK\n",
                "unknown operation \"Frobnicate\"",
            ),
            ("Close x1 NT_STATUS_OK\n", "handle \"x1\" is not a number"),
            (
                "NTCreateX \"\\a 0x1 0x2 1 NT_STATUS_OK\n",
                "unterminated quoted path",
            ),
            ("1.2.3 Close 1 NT_STATUS_OK\n", "timestamp \"1.2.3\""),
            ("WriteX 1 0 99999999999 1 NT_STATUS_OK\n", "out of range"),
        ];
        for (text, want) in cases {
            let good = "Close 1 NT_STATUS_OK\n\n# comment\n";
            let e = parse("load.txt", &format!("{good}{text}")).unwrap_err();
            assert_eq!(e.line, 4, "{text}");
            let msg = e.to_string();
            assert!(msg.starts_with("load.txt:4: "), "{msg}");
            assert!(msg.contains(want), "{msg} lacks {want}");
            assert_eq!(msg.lines().count(), 1);
        }
        assert!(
            parse("e.txt", "\n# nothing\n")
                .unwrap_err()
                .to_string()
                .contains("no operations")
        );
    }

    #[test]
    fn the_builtin_load_parses() {
        let f = parse("builtin", &builtin(12)).unwrap();
        assert!(f.lines.len() > 100);
        assert!(f.lines.iter().any(|l| !l.expect_ok));
    }

    #[test]
    fn the_installed_client_txt_parses() {
        let Some(path) = PACKAGE_LOADFILES
            .iter()
            .find(|p| std::path::Path::new(p).exists())
        else {
            smtlab_fixtures::require::skip("no dbench load file installed (package dbench)");
            return;
        };
        let f = read(std::path::Path::new(path)).unwrap();
        assert!(f.lines.len() > 1000);
    }
}
