//! The addresses an agent may send load to.

use std::net::{IpAddr, SocketAddr};

use ipnet::IpNet;

/// Networks and addresses (`10.0.0.0/24,192.168.1.5`); empty: this host's own
/// addresses only ([`crate::check_local`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AllowList(Vec<IpNet>);

impl AllowList {
    /// A comma-separated list of networks (`10.0.0.0/24`, `fd00::/64`) and addresses.
    pub fn parse(text: &str) -> Result<AllowList, AllowError> {
        let mut nets = Vec::new();
        for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let net = item
                .parse::<IpNet>()
                .or_else(|_| item.parse::<IpAddr>().map(IpNet::from))
                .map_err(|_| AllowError::NotAddress(item.to_string()))?;
            if net.prefix_len() == 0 {
                return Err(AllowError::Everything(item.to_string()));
            }
            nets.push(net);
        }
        Ok(AllowList(nets))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether load may go to `addr`, or the one-line reason it may not.
    pub fn check(&self, addr: &SocketAddr) -> Result<(), AllowError> {
        if self.0.is_empty() {
            return crate::check_local(addr).map_err(AllowError::NotLocal);
        }
        // An IPv4-mapped IPv6 address is matched as the IPv4 address it is.
        let ip = addr.ip().to_canonical();
        if self.0.iter().any(|n| n.contains(&ip)) {
            Ok(())
        } else {
            Err(AllowError::NotAllowed {
                addr: *addr,
                list: self.to_string(),
            })
        }
    }
}

/// A list that is not one, or a target it does not allow; one line each.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AllowError {
    #[error("{0:?}: expected an address (10.0.0.1) or a network (10.0.0.0/24)")]
    NotAddress(String),
    #[error("{0:?}: a network of every address is not an allow-list; name the servers' network")]
    Everything(String),
    #[error("{0}; start the agent with --allow naming the servers' addresses")]
    NotLocal(crate::NotLocal),
    #[error("{addr} is not in this agent's allow-list ({list})")]
    NotAllowed { addr: SocketAddr, list: String },
}

impl std::fmt::Display for AllowList {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.0.is_empty() {
            return f.write_str("this host's own addresses");
        }
        let items: Vec<String> = self.0.iter().map(ToString::to_string).collect();
        f.write_str(&items.join(","))
    }
}
