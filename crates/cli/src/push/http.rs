//! One HTTP/1.1 POST over a blocking socket, every step under a deadline:
//! what the push thread needs, and no more (a connection per push, closed
//! after the answer).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use throng_tls::rustls::{self, ClientConfig, ClientConnection, pki_types::ServerName};

/// Where pushes go.
#[derive(Clone, Debug)]
pub struct Endpoint {
    /// Resolved once, when the run starts.
    pub addr: SocketAddr,
    /// The Host header.
    pub host: String,
    /// Path and query.
    pub path: String,
    /// For an https:// receiver: the client configuration and the name its
    /// certificate must hold.
    pub tls: Option<(Arc<ClientConfig>, ServerName<'static>)>,
}

/// One push's connection: plain, or TLS over it.
enum Conn {
    Plain(TcpStream),
    Tls(Box<rustls::StreamOwned<ClientConnection, TcpStream>>),
}

impl Conn {
    fn tcp(&self) -> &TcpStream {
        match self {
            Conn::Plain(s) => s,
            Conn::Tls(s) => &s.sock,
        }
    }
}

impl Read for Conn {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Conn::Plain(s) => s.read(buf),
            Conn::Tls(s) => s.read(buf),
        }
    }
}

impl Write for Conn {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Conn::Plain(s) => s.write(buf),
            Conn::Tls(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Conn::Plain(s) => s.flush(),
            Conn::Tls(s) => s.flush(),
        }
    }
}

/// What became of one POST.
#[derive(Debug)]
pub enum Answer {
    /// The receiver answered with this status; the start of its body (for
    /// the error line).
    Status(u16, String),
    /// No answer: what went wrong (connect, write, read, timeout).
    Failed(String),
}

/// Most of an answer read (the status line and a reason are enough).
const MAX_ANSWER: usize = 16 * 1024;

/// POSTs `body` to `to` with the encoder's `fixed` headers and the user's
/// `headers`, all within `timeout`.
pub fn post(
    to: &Endpoint,
    fixed: &[(&str, &str)],
    headers: &[(String, String)],
    body: &[u8],
    timeout: Duration,
) -> Answer {
    match exchange(to, fixed, headers, body, timeout) {
        Ok(answer) => answer,
        Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
            Answer::Failed(format!("no answer within {timeout:?}"))
        }
        Err(e) => Answer::Failed(e.to_string()),
    }
}

fn exchange(
    to: &Endpoint,
    fixed: &[(&str, &str)],
    headers: &[(String, String)],
    body: &[u8],
    timeout: Duration,
) -> std::io::Result<Answer> {
    let deadline = Instant::now() + timeout;
    let left = || {
        deadline
            .checked_duration_since(Instant::now())
            .filter(|d| !d.is_zero())
            .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::TimedOut))
    };
    let tcp = TcpStream::connect_timeout(&to.addr, left()?)?;
    tcp.set_nodelay(true)?;
    let mut s = match &to.tls {
        None => Conn::Plain(tcp),
        Some((config, name)) => {
            let conn = ClientConnection::new(Arc::clone(config), name.clone()).map_err(std::io::Error::other)?;
            Conn::Tls(Box::new(rustls::StreamOwned::new(conn, tcp)))
        }
    };
    let mut head = format!(
        "POST {} HTTP/1.1\r\nHost: {}\r\nUser-Agent: throng/{}\r\nContent-Length: {}\r\nConnection: close\r\n",
        to.path,
        to.host,
        env!("CARGO_PKG_VERSION"),
        body.len()
    );
    for (name, value) in fixed {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    // The TLS handshake happens within the first write, under its timeout.
    s.tcp().set_read_timeout(Some(left()?))?;
    s.tcp().set_write_timeout(Some(left()?))?;
    s.write_all(head.as_bytes())?;
    s.tcp().set_write_timeout(Some(left()?))?;
    s.write_all(body)?;
    s.flush()?;
    let mut answer = Vec::with_capacity(1024);
    let mut buf = [0u8; 4096];
    loop {
        s.tcp().set_read_timeout(Some(left()?))?;
        let n = match s.read(&mut buf) {
            Ok(n) => n,
            // A receiver that closes without TLS's close_notify, after its answer.
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof && !answer.is_empty() => 0,
            Err(e) => return Err(e),
        };
        if n == 0 || answer.len() >= MAX_ANSWER {
            break;
        }
        answer.extend_from_slice(&buf[..n]);
        if complete(&answer) {
            break;
        }
    }
    let text = String::from_utf8_lossy(&answer);
    let status = text
        .strip_prefix("HTTP/1.")
        .and_then(|t| t.get(2..5))
        .and_then(|c| c.parse::<u16>().ok());
    let Some(status) = status else {
        return Ok(Answer::Failed("the receiver's answer is not HTTP".into()));
    };
    let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    let reason: String = body.lines().next().unwrap_or("").chars().take(200).collect();
    Ok(Answer::Status(status, reason))
}

/// True when `answer` holds the whole head and the body its Content-Length
/// announces (with none, the head is enough: only the status counts).
fn complete(answer: &[u8]) -> bool {
    let Some(end) = answer.windows(4).position(|w| w == b"\r\n\r\n") else {
        return false;
    };
    let head = String::from_utf8_lossy(&answer[..end]).to_ascii_lowercase();
    let length = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse::<usize>().ok());
    length.is_none_or(|n| answer.len() >= end + 4 + n)
}
