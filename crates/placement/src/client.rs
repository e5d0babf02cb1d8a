//! The CPUs a workload's client side (load generator, pgbench, chat clients) runs on.
//!
//! A server workload measures the server on the placement; the client that drives it
//! must not take CPU time or pipeline slots from it, or the measurement mixes the two.
//! So by default the client gets every usable CPU that is neither in the placement nor an
//! SMT sibling of a placement CPU (paper 000 drove its servers from separate machines).
//! The user may allow siblings ([`ClientRule::AllowSiblings`]) or name the CPUs
//! ([`ClientRule::Cpus`]); a named set may overlap the placement only when asked for
//! with `Cpus { shared: true }`, so an overlap is always deliberate. Or the client runs
//! on other hosts ([`ClientRule::Remote`]: smtlab agents there, reached over TCP with a
//! shared token), and this host keeps every CPU for the server.

use smtlab_model::{CpuSet, ResolvedPlacement, Topology};

use crate::resolve::usable_cpus;

/// How the client side's CPUs are chosen.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum ClientRule {
    /// Usable CPUs outside the placement and outside its cores (no shared pipeline).
    #[default]
    Apart,
    /// Usable CPUs outside the placement; SMT siblings of placement CPUs allowed.
    AllowSiblings,
    /// Exactly these CPUs. Unless `shared`, they must be disjoint from the placement.
    Cpus { cpus: CpuSet, shared: bool },
    /// On other hosts, by the smtlab agents listening there: no CPU of this host.
    Remote(RemoteClients),
}

/// The agents a remote client side runs on and the token they expect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteClients {
    /// `host:port` of each agent, in the order given.
    pub hosts: Vec<String>,
    pub token: Token,
    /// Connect to them over TLS (`--client-tls`; agents started with `--tls`).
    pub tls: bool,
}

/// A shared secret between agents and their coordinator; never shown.
#[derive(Clone, PartialEq, Eq)]
pub struct Token(String);

/// The shortest token accepted: a guessable one would let anyone on the network point
/// an agent's load at the hosts it may load.
pub const TOKEN_MIN_CHARS: usize = 16;

/// Why a token was refused; one line each.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    #[error(
        "expected one line of at least {TOKEN_MIN_CHARS} characters \
         (e.g. from: head -c 24 /dev/urandom | base64)"
    )]
    Malformed,
    // The cause is part of the message, not a `source`: printed once.
    #[error("token file {}: {error}", .path.display())]
    Unreadable {
        path: std::path::PathBuf,
        error: std::io::Error,
    },
    #[error("token file {}: {}", .path.display(), TokenError::Malformed)]
    MalformedFile { path: std::path::PathBuf },
}

impl Token {
    /// The token in `text`, surrounding white space removed.
    pub fn new(text: &str) -> Result<Token, TokenError> {
        let t = text.trim();
        if t.chars().count() < TOKEN_MIN_CHARS || t.contains(['\n', '\r']) {
            return Err(TokenError::Malformed);
        }
        Ok(Token(t.to_string()))
    }

    /// The token in file `path` (one line).
    pub fn from_file(path: &std::path::Path) -> Result<Token, TokenError> {
        let path_buf = || path.to_path_buf();
        let text = std::fs::read_to_string(path).map_err(|error| TokenError::Unreadable {
            path: path_buf(),
            error,
        })?;
        Token::new(&text).map_err(|_| TokenError::MalformedFile { path: path_buf() })
    }

    /// The secret itself, for the wire and for comparing.
    pub fn secret(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(..)")
    }
}

/// Why no client CPUs could be chosen; each message is one line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClientError {
    #[error(
        "placement {placement} does not pin the server, so no CPUs can be kept apart for the client"
    )]
    Unpinned { placement: String },
    #[error("client CPUs {} are not usable here (usable: {})", .outside.to_list_string(), .usable.to_list_string())]
    NotUsable { outside: CpuSet, usable: CpuSet },
    #[error("the client CPU list is empty")]
    Empty,
    #[error(
        "client CPUs {} overlap placement {placement} (CPUs {}); choose other CPUs or allow sharing",
        .overlap.to_list_string(),
        .server.to_list_string()
    )]
    Overlap {
        overlap: CpuSet,
        placement: String,
        server: CpuSet,
    },
    #[error(
        "no CPU left for the client side: placement {placement} uses CPUs {} and this machine has no usable CPU {what} (usable: {}); name client CPUs to share",
        .server.to_list_string(),
        .usable.to_list_string()
    )]
    NoneLeft {
        placement: String,
        server: CpuSet,
        what: &'static str,
        usable: CpuSet,
    },
}

/// The client CPUs for a server on `server`, or a one-line reason why there are none.
pub fn client_cpus(
    topo: &Topology,
    server: &ResolvedPlacement,
    rule: &ClientRule,
) -> Result<CpuSet, ClientError> {
    let usable = usable_cpus(topo);
    if !server.pinned()
        && !matches!(
            rule,
            ClientRule::Cpus { shared: true, .. } | ClientRule::Remote(_)
        )
    {
        return Err(ClientError::Unpinned {
            placement: server.name.clone(),
        });
    }
    let server_cpus: CpuSet = server.cpus.iter().copied().collect();
    match rule {
        // The load runs elsewhere: nothing of this host is taken.
        ClientRule::Remote(_) => Ok(CpuSet::new()),
        ClientRule::Cpus { cpus, shared } => {
            let outside = cpus.difference(&usable);
            if !outside.is_empty() {
                return Err(ClientError::NotUsable { outside, usable });
            }
            if cpus.is_empty() {
                return Err(ClientError::Empty);
            }
            let overlap = cpus.intersection(&server_cpus);
            if !shared && !overlap.is_empty() {
                return Err(ClientError::Overlap {
                    overlap,
                    placement: server.name.clone(),
                    server: server_cpus,
                });
            }
            Ok(cpus.clone())
        }
        ClientRule::Apart | ClientRule::AllowSiblings => {
            let mut taken = server_cpus.clone();
            if *rule == ClientRule::Apart {
                for cpu in server_cpus.iter() {
                    if let Some(core) = topo.core_of(cpu) {
                        taken = taken.union(&core.cpus);
                    }
                }
            }
            let free = usable.difference(&taken);
            if free.is_empty() {
                let what = if *rule == ClientRule::Apart {
                    "outside its cores"
                } else {
                    "outside it"
                };
                return Err(ClientError::NoneLeft {
                    placement: server.name.clone(),
                    server: server_cpus,
                    what,
                    usable,
                });
            }
            Ok(free)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{parse, resolve};
    use smtlab_fixtures::build::topo;

    fn placed(t: &Topology, spec: &str) -> ResolvedPlacement {
        resolve(&parse(spec).unwrap(), t).unwrap()
    }

    fn set(list: &str) -> CpuSet {
        CpuSet::parse_list(list).unwrap()
    }

    #[test]
    fn apart_leaves_out_the_siblings_of_the_server() {
        // Two cores with two threads each: 0,2 and 1,3.
        let t = topo(&[&[&[0, 2], &[1, 3]]]);
        let p = placed(&t, "1c1t");
        assert_eq!(client_cpus(&t, &p, &ClientRule::Apart).unwrap(), set("1,3"));
        assert_eq!(
            client_cpus(&t, &p, &ClientRule::AllowSiblings).unwrap(),
            set("1-3")
        );
    }

    #[test]
    fn a_placement_that_fills_the_machine_leaves_no_client() {
        let t = topo(&[&[&[0], &[1]]]);
        let p = placed(&t, "2c1t");
        let e = client_cpus(&t, &p, &ClientRule::Apart)
            .unwrap_err()
            .to_string();
        assert!(e.contains("no CPU left for the client"), "{e}");
        assert_eq!(
            client_cpus(
                &t,
                &p,
                &ClientRule::Cpus {
                    cpus: set("1"),
                    shared: true
                }
            )
            .unwrap(),
            set("1")
        );
    }

    #[test]
    fn named_cpus_must_not_overlap_unless_shared() {
        let t = topo(&[&[&[0], &[1], &[2]]]);
        let p = placed(&t, "1c1t");
        let e = client_cpus(
            &t,
            &p,
            &ClientRule::Cpus {
                cpus: set("0,1"),
                shared: false,
            },
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("overlap"), "{e}");
        let e = client_cpus(
            &t,
            &p,
            &ClientRule::Cpus {
                cpus: set("7"),
                shared: false,
            },
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("not usable"), "{e}");
    }

    #[test]
    fn half_cores_leave_the_other_half_to_the_clients() {
        // 16 cores, 2 threads each: CPU n's sibling is n + 16.
        let t = smtlab_fixtures::build::intel(1, 16, 2);
        let one = placed(&t, "half-cores-1t");
        assert_eq!(one.name, "half-cores-1t");
        assert_eq!((one.cores, one.threads_per_core), (8, 1));
        assert_eq!(one.cpu_set(), set("0-7"));
        let two = placed(&t, "half-cores-2t");
        assert_eq!((two.cores, two.threads_per_core), (8, 2));
        // The same cores with both their threads.
        assert_eq!(two.cpu_set(), set("0-7,16-23"));
        // The clients: the other eight cores, with all their threads, in both cases.
        for p in [&one, &two] {
            let client = client_cpus(&t, p, &ClientRule::Apart).unwrap();
            assert_eq!(client, set("8-15,24-31"), "{}", p.name);
            assert!(client.intersection(&two.cpu_set()).is_empty());
        }
        // Adjacent numbering: the first eight cores are CPUs 0-15.
        let t = smtlab_fixtures::build::adjacent(1, 16, 2);
        assert_eq!(placed(&t, "half-cores-2t").cpu_set(), set("0-15"));
        assert_eq!(
            client_cpus(&t, &placed(&t, "half-cores-1t"), &ClientRule::Apart).unwrap(),
            set("16-31")
        );
    }

    #[test]
    fn half_cores_need_two_cores_and_the_threads_asked_for() {
        let t = topo(&[&[&[0, 1]]]);
        let e = resolve(&parse("half-cores-1t").unwrap(), &t)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("at least 2 cores") && e.contains("1 core"),
            "{e}"
        );
        // No SMT: half-cores-2t is refused with what the machine has.
        let t = smtlab_fixtures::build::one_cpu_per_core(&[0, 1, 2, 3]);
        assert_eq!(placed(&t, "half-cores-1t").cpu_set(), set("0-1"));
        let e = resolve(&parse("half-cores-2t").unwrap(), &t)
            .unwrap_err()
            .to_string();
        assert!(e.contains("2 threads"), "{e}");
        // Odd core counts round down: 5 cores give the workload 2, the clients 3.
        let t = smtlab_fixtures::build::one_cpu_per_core(&[0, 1, 2, 3, 4]);
        let p = placed(&t, "half-cores-1t");
        assert_eq!(p.cpu_set(), set("0-1"));
        assert_eq!(client_cpus(&t, &p, &ClientRule::Apart).unwrap(), set("2-4"));
    }

    #[test]
    fn remote_clients_take_no_cpu_here_and_hide_their_token() {
        let t = topo(&[&[&[0], &[1]]]);
        let rule = ClientRule::Remote(RemoteClients {
            hosts: vec!["10.0.0.2:7400".into()],
            token: Token::new("0123456789abcdefXYZ").unwrap(),
            tls: false,
        });
        assert!(
            client_cpus(&t, &placed(&t, "2c1t"), &rule)
                .unwrap()
                .is_empty()
        );
        assert!(!format!("{rule:?}").contains("0123456789"));
        let short = Token::new("short").unwrap_err().to_string();
        assert!(short.contains("at least 16"), "{short}");
    }

    #[test]
    fn unpinned_server_has_no_apart() {
        let t = topo(&[&[&[0], &[1]]]);
        let p = placed(&t, "os");
        assert!(client_cpus(&t, &p, &ClientRule::Apart).is_err());
    }
}
