//! A TCP proxy in front of PostgreSQL that injects connection failures at exact protocol points.
//!
//! It understands just enough of the frontend protocol (startup packet, then tagged messages) to
//! recognise an `Execute` or a simple `Query`, so a test can cut the connection right after a
//! statement reached the server and before its answer reaches the client.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// When to cut a connection.
#[derive(Debug, Clone)]
pub enum Trigger {
    /// After forwarding the next extended-protocol `Execute` message.
    Execute,
    /// After forwarding the next simple `Query` whose text contains this string.
    QueryContaining(String),
}

#[derive(Debug)]
struct State {
    upstream: SocketAddr,
    refuse: AtomicUsize,
    trigger: Mutex<Option<Trigger>>,
    accepted: AtomicUsize,
    executes: AtomicUsize,
    cuts: AtomicUsize,
}

/// The proxy; stops when dropped.
pub struct FaultProxy {
    /// Where clients connect.
    pub addr: SocketAddr,
    state: Arc<State>,
    task: JoinHandle<()>,
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FaultProxy {
    /// Starts a proxy on 127.0.0.1 in front of `upstream`.
    pub async fn start(upstream: SocketAddr) -> FaultProxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind proxy");
        let addr = listener.local_addr().expect("proxy addr");
        let state = Arc::new(State {
            upstream,
            refuse: AtomicUsize::new(0),
            trigger: Mutex::new(None),
            accepted: AtomicUsize::new(0),
            executes: AtomicUsize::new(0),
            cuts: AtomicUsize::new(0),
        });
        let st = state.clone();
        let task = tokio::spawn(async move {
            while let Ok((sock, _)) = listener.accept().await {
                let st = st.clone();
                tokio::spawn(async move {
                    let _ = handle(sock, st).await;
                });
            }
        });
        FaultProxy { addr, state, task }
    }

    /// Closes the next `n` accepted connections immediately.
    pub fn refuse_next(&self, n: usize) {
        self.state.refuse.store(n, Ordering::SeqCst);
    }

    /// Arms a one-shot cut.
    pub fn arm(&self, trigger: Trigger) {
        *self.state.trigger.lock().expect("lock") = Some(trigger);
    }

    /// Connections accepted so far (including refused ones).
    pub fn accepted(&self) -> usize {
        self.state.accepted.load(Ordering::SeqCst)
    }

    /// `Execute` messages forwarded to the server so far.
    pub fn executes(&self) -> usize {
        self.state.executes.load(Ordering::SeqCst)
    }

    /// Connections cut by a trigger so far.
    pub fn cuts(&self) -> usize {
        self.state.cuts.load(Ordering::SeqCst)
    }

    /// Rewrites a PostgreSQL URL's host and port to point at this proxy.
    pub fn url_for(&self, url: &str) -> String {
        let (scheme, rest) = url.split_once("://").expect("url scheme");
        let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
        let authority = &rest[..authority_end];
        let userinfo = authority
            .rfind('@')
            .map(|at| &authority[..=at])
            .unwrap_or("");
        format!(
            "{scheme}://{userinfo}{}{}",
            self.addr,
            &rest[authority_end..]
        )
    }
}

/// The upstream address of a PostgreSQL URL (host must be an IP or `localhost`).
pub fn upstream_of(url: &str) -> SocketAddr {
    let rest = url.split_once("://").expect("url scheme").1;
    let authority = &rest[..rest.find(['/', '?']).unwrap_or(rest.len())];
    let hostport = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let hostport = if hostport.contains(':') {
        hostport.to_owned()
    } else {
        format!("{hostport}:5432")
    };
    let hostport = hostport.replace("localhost", "127.0.0.1");
    hostport.parse().expect("upstream must be ip:port")
}

async fn handle(client: TcpStream, state: Arc<State>) -> std::io::Result<()> {
    state.accepted.fetch_add(1, Ordering::SeqCst);
    if state
        .refuse
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
        .is_ok()
    {
        drop(client);
        return Ok(());
    }
    let mut client = client;
    // Answer an SSLRequest ourselves with "no": the client then speaks plain text (sslmode=prefer),
    // which this proxy can read.
    let mut head = [0u8; 8];
    client.read_exact(&mut head).await?;
    let mut first = head.to_vec();
    if u32::from_be_bytes([head[0], head[1], head[2], head[3]]) == 8
        && u32::from_be_bytes([head[4], head[5], head[6], head[7]]) == 80877103
    {
        client.write_all(b"N").await?;
        first.clear();
    }
    let upstream = TcpStream::connect(state.upstream).await?;
    let (mut cr, mut cw) = client.into_split();
    let (mut ur, mut uw) = upstream.into_split();
    let blackhole = Arc::new(AtomicBool::new(false));
    let bh = blackhole.clone();
    let server_to_client = tokio::spawn(async move {
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            let n = match ur.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            if bh.load(Ordering::SeqCst) {
                continue;
            }
            if cw.write_all(&buf[..n]).await.is_err() {
                break;
            }
        }
    });
    let mut pending: Vec<u8> = first;
    let mut started = false;
    let mut buf = vec![0u8; 16 * 1024];
    let mut primed = !pending.is_empty();
    loop {
        if !primed {
            let n = cr.read(&mut buf).await?;
            if n == 0 {
                break;
            }
            pending.extend_from_slice(&buf[..n]);
        }
        primed = false;
        // Find the complete messages at the front of `pending`.
        let mut offset = 0;
        let mut fire = false;
        loop {
            if !started {
                if pending.len() < offset + 8 {
                    break;
                }
                let len =
                    u32::from_be_bytes(pending[offset..offset + 4].try_into().unwrap()) as usize;
                if pending.len() < offset + len {
                    break;
                }
                let code = u32::from_be_bytes(pending[offset + 4..offset + 8].try_into().unwrap());
                // SSLRequest / GSSENCRequest are followed by another startup packet.
                started = code != 80877103 && code != 80877104;
                offset += len;
                continue;
            }
            if pending.len() < offset + 5 {
                break;
            }
            let tag = pending[offset];
            let len =
                u32::from_be_bytes(pending[offset + 1..offset + 5].try_into().unwrap()) as usize;
            if pending.len() < offset + 1 + len {
                break;
            }
            let body = &pending[offset + 5..offset + 1 + len];
            if tag == b'E' {
                state.executes.fetch_add(1, Ordering::SeqCst);
            }
            let mut trigger = state.trigger.lock().expect("lock");
            let matched = match trigger.as_ref() {
                Some(Trigger::Execute) => tag == b'E',
                Some(Trigger::QueryContaining(text)) => {
                    tag == b'Q' && String::from_utf8_lossy(body).contains(text.as_str())
                }
                None => false,
            };
            if matched {
                *trigger = None;
                fire = true;
            }
            drop(trigger);
            offset += 1 + len;
        }
        if fire {
            // Swallow every answer from now on, deliver the request, let the server act on it,
            // then cut both sides.
            blackhole.store(true, Ordering::SeqCst);
        }
        uw.write_all(&pending[..offset]).await?;
        pending.drain(..offset);
        if fire {
            state.cuts.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(300)).await;
            server_to_client.abort();
            let _ = uw.shutdown().await;
            return Ok(());
        }
    }
    server_to_client.abort();
    Ok(())
}
