//! ONC RPC over UDP for the SFS clients (`transport=udp`: SFS97's own transport).
//!
//! The `nfs3_client` crate speaks RPC over a byte stream with TCP's record marking: each
//! call is written as a 4-byte fragment header and the message, and each reply read the
//! same way. Over UDP a message is one datagram with no header (RFC 5531 s11), so
//! [`UdpRpc`] sends a written record's message as one datagram and hands a received
//! datagram back behind a header of its own making. The crate's calls and checks stay as
//! they are.
//!
//! UDP loses nothing on loopback unless a socket buffer overflows, but a server may be
//! slow: a call not answered within [`Retransmit::first`] is sent again, the wait
//! doubling each time, at most [`Retransmit::tries`] sends (as the kernel's own UDP
//! client does with `timeo` and `retrans`; the server's duplicate request cache answers a
//! repeated call from its first execution). A reply whose transaction id is not the
//! outstanding call's (a late answer to an earlier send) is dropped. Retransmissions
//! are counted in a counter the load reports.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use nfs3_client::io::{AsyncRead, AsyncWrite};
use nfs3_client::net::Connector;
use nfs3_client::tokio::{TokioConnector, TokioIo};
use tokio::net::{TcpStream, UdpSocket};

/// The last-fragment bit of a record-marking header.
const LAST_FRAGMENT: u32 = 0x8000_0000;
/// The largest datagram: an NFSv3 reply with an 8 KiB READ fits many times over.
const MAX_DATAGRAM: usize = 65_536;

/// When an unanswered call is sent again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retransmit {
    /// The wait for the first reply; each later wait is twice the one before.
    pub first: Duration,
    /// Sends of one call, the first included.
    pub tries: u32,
}

impl Default for Retransmit {
    /// 1 s, doubling, 4 sends: about 15 s before a call gives up, far above any
    /// response-time limit, so a give-up means a server that stopped answering.
    fn default() -> Self {
        Retransmit {
            first: Duration::from_secs(1),
            tries: 4,
        }
    }
}

/// One client's RPC endpoint over a connected UDP socket.
pub struct UdpRpc {
    sock: UdpSocket,
    retransmit: Retransmit,
    retransmits: Arc<AtomicU64>,
    /// Written bytes not yet a whole record.
    pending: Vec<u8>,
    /// The outstanding call's datagram, for sending again.
    call: Vec<u8>,
    /// The reply being read: a made-up header, then the datagram.
    reply: Vec<u8>,
    read_at: usize,
}

impl UdpRpc {
    fn new(sock: UdpSocket, retransmit: Retransmit, retransmits: Arc<AtomicU64>) -> UdpRpc {
        UdpRpc {
            sock,
            retransmit,
            retransmits,
            pending: Vec::new(),
            call: Vec::new(),
            reply: Vec::new(),
            read_at: 0,
        }
    }

    /// Waits for the outstanding call's reply, sending the call again as
    /// [`Retransmit`] says.
    async fn receive(&mut self) -> std::io::Result<()> {
        if self.call.len() < 4 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "RPC over UDP: a read with no call outstanding",
            ));
        }
        let xid: [u8; 4] = self.call[..4].try_into().unwrap_or_default();
        let mut datagram = vec![0u8; MAX_DATAGRAM];
        let mut wait = self.retransmit.first;
        let mut sends = 1;
        let mut deadline = Instant::now() + wait;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match tokio::time::timeout(left, self.sock.recv(&mut datagram)).await {
                Ok(Ok(n)) if n >= 4 && datagram[..4] == xid => {
                    let header = LAST_FRAGMENT | n as u32;
                    self.reply.clear();
                    self.reply.extend_from_slice(&header.to_be_bytes());
                    self.reply.extend_from_slice(&datagram[..n]);
                    self.read_at = 0;
                    return Ok(());
                }
                // A late reply to an earlier call or send: not this call's.
                Ok(Ok(_)) => {}
                Ok(Err(e)) => return Err(e),
                Err(_) if sends >= self.retransmit.tries => {
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        format!(
                            "RPC over UDP: no reply after {sends} sends ({} ms first wait, doubling)",
                            self.retransmit.first.as_millis()
                        ),
                    ));
                }
                Err(_) => {
                    self.sock.send(&self.call).await?;
                    self.retransmits.fetch_add(1, Ordering::Relaxed);
                    sends += 1;
                    wait *= 2;
                    deadline = Instant::now() + wait;
                }
            }
        }
    }
}

impl AsyncWrite for UdpRpc {
    async fn async_write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.pending.extend_from_slice(buf);
        while self.pending.len() >= 4 {
            let header = u32::from_be_bytes(self.pending[..4].try_into().unwrap_or_default());
            let len = (header & !LAST_FRAGMENT) as usize;
            if self.pending.len() < 4 + len {
                break;
            }
            if header & LAST_FRAGMENT == 0 {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    "RPC over UDP: a call in several fragments",
                ));
            }
            self.call = self.pending[4..4 + len].to_vec();
            self.pending.drain(..4 + len);
            self.reply.clear();
            self.read_at = 0;
            self.sock.send(&self.call).await?;
        }
        Ok(buf.len())
    }
}

impl AsyncRead for UdpRpc {
    async fn async_read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.read_at >= self.reply.len() {
            self.receive().await?;
        }
        let n = buf.len().min(self.reply.len() - self.read_at);
        buf[..n].copy_from_slice(&self.reply[self.read_at..self.read_at + n]);
        self.read_at += n;
        Ok(n)
    }
}

/// A connection of either transport.
pub enum Conn {
    Tcp(TokioIo<TcpStream>),
    Udp(UdpRpc),
}

impl AsyncRead for Conn {
    async fn async_read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Conn::Tcp(c) => c.async_read(buf).await,
            Conn::Udp(c) => c.async_read(buf).await,
        }
    }
}

impl AsyncWrite for Conn {
    async fn async_write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Conn::Tcp(c) => c.async_write(buf).await,
            Conn::Udp(c) => c.async_write(buf).await,
        }
    }
}

/// Connects over TCP or UDP; UDP endpoints count their retransmissions in `retransmits`.
#[derive(Debug, Clone)]
pub enum Transport {
    Tcp,
    Udp {
        retransmit: Retransmit,
        retransmits: Arc<AtomicU64>,
    },
}

impl Transport {
    /// Calls sent again so far (UDP), `None` over TCP.
    pub fn retransmits(&self) -> Option<u64> {
        match self {
            Transport::Tcp => None,
            Transport::Udp { retransmits, .. } => Some(retransmits.load(Ordering::Relaxed)),
        }
    }

    async fn udp_socket(&self, addr: SocketAddr, local_port: u16) -> std::io::Result<Conn> {
        let Transport::Udp {
            retransmit,
            retransmits,
        } = self
        else {
            unreachable!("udp_socket is called for Transport::Udp only")
        };
        let sock = UdpSocket::bind(SocketAddr::new(
            IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            local_port,
        ))
        .await?;
        sock.connect(addr).await?;
        Ok(Conn::Udp(UdpRpc::new(
            sock,
            *retransmit,
            Arc::clone(retransmits),
        )))
    }
}

impl Connector for Transport {
    type Connection = Conn;

    async fn connect(&self, addr: SocketAddr) -> std::io::Result<Conn> {
        match self {
            Transport::Tcp => Ok(Conn::Tcp(TokioConnector.connect(addr).await?)),
            Transport::Udp { .. } => self.udp_socket(addr, 0).await,
        }
    }

    async fn connect_with_port(&self, addr: SocketAddr, local_port: u16) -> std::io::Result<Conn> {
        match self {
            Transport::Tcp => Ok(Conn::Tcp(
                TokioConnector.connect_with_port(addr, local_port).await?,
            )),
            Transport::Udp { .. } => self.udp_socket(addr, local_port).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rt() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    /// A record as the crate writes it: header, then the message.
    fn record(msg: &[u8]) -> Vec<u8> {
        let mut r = (LAST_FRAGMENT | msg.len() as u32).to_be_bytes().to_vec();
        r.extend_from_slice(msg);
        r
    }

    fn udp(first_ms: u64, tries: u32) -> (Transport, Arc<AtomicU64>) {
        let n = Arc::new(AtomicU64::new(0));
        (
            Transport::Udp {
                retransmit: Retransmit {
                    first: Duration::from_millis(first_ms),
                    tries,
                },
                retransmits: Arc::clone(&n),
            },
            n,
        )
    }

    /// A call goes out as one datagram without the header; the reply comes back behind
    /// one, read in pieces; a stale reply (another xid) and a lost first reply are
    /// handled: the stale one dropped, the call sent again and counted.
    #[test]
    fn records_become_datagrams_and_unanswered_calls_are_sent_again() {
        rt().block_on(async {
            let server = UdpSocket::bind("127.0.0.1:0").await.unwrap();
            let addr = server.local_addr().unwrap();
            let (t, retransmits) = udp(50, 4);
            let mut c = t.connect(addr).await.unwrap();
            let call = [0, 0, 0, 7, 1, 2, 3, 4];
            c.async_write_all(&record(&call)).await.unwrap();
            let serve = async {
                let mut b = [0u8; 64];
                let (n, from) = server.recv_from(&mut b).await.unwrap();
                assert_eq!(&b[..n], &call, "the datagram is the message alone");
                // The first send is "lost": no answer; the second gets a stale reply,
                // then the right one.
                let (n2, _) = server.recv_from(&mut b).await.unwrap();
                assert_eq!(&b[..n2], &call);
                server
                    .send_to(&[0, 0, 0, 6, 9, 9, 9, 9], from)
                    .await
                    .unwrap();
                server
                    .send_to(&[0, 0, 0, 7, 5, 6, 7, 8], from)
                    .await
                    .unwrap();
            };
            let read = async {
                let mut h = [0u8; 4];
                c.async_read_exact(&mut h).await.unwrap();
                assert_eq!(u32::from_be_bytes(h), LAST_FRAGMENT | 8);
                let mut body = [0u8; 8];
                c.async_read_exact(&mut body).await.unwrap();
                body
            };
            let ((), body) = tokio::join!(serve, read);
            assert_eq!(body, [0, 0, 0, 7, 5, 6, 7, 8]);
            assert_eq!(retransmits.load(Ordering::Relaxed), 1);
        });
    }

    #[test]
    fn a_server_that_never_answers_gives_a_timeout_after_the_tries() {
        rt().block_on(async {
            let server = UdpSocket::bind("127.0.0.1:0").await.unwrap();
            let (t, retransmits) = udp(10, 3);
            let mut c = t.connect(server.local_addr().unwrap()).await.unwrap();
            c.async_write_all(&record(&[0, 0, 0, 1])).await.unwrap();
            let started = Instant::now();
            let mut b = [0u8; 4];
            let e = c.async_read_exact(&mut b).await.unwrap_err();
            assert_eq!(e.kind(), std::io::ErrorKind::TimedOut, "{e}");
            assert!(e.to_string().contains("after 3 sends"), "{e}");
            // 10 + 20 + 40 ms of waiting.
            assert!(started.elapsed() >= Duration::from_millis(70));
            assert_eq!(retransmits.load(Ordering::Relaxed), 2);
        });
    }

    #[test]
    fn a_call_in_several_fragments_is_refused() {
        rt().block_on(async {
            let server = UdpSocket::bind("127.0.0.1:0").await.unwrap();
            let (t, _) = udp(10, 1);
            let mut c = t.connect(server.local_addr().unwrap()).await.unwrap();
            let mut r = record(&[0, 0, 0, 1]);
            r[0] &= 0x7f;
            let e = c.async_write_all(&r).await.unwrap_err();
            assert!(e.to_string().contains("several fragments"), "{e}");
        });
    }
}
