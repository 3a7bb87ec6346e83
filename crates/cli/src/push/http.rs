//! One HTTP/1.1 POST over a blocking socket, every step under a deadline:
//! what the push thread needs, and no more (a connection per push, closed
//! after the answer).

use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// Where pushes go.
#[derive(Clone, Debug)]
pub struct Endpoint {
    /// Resolved once, when the run starts.
    pub addr: SocketAddr,
    /// The Host header.
    pub host: String,
    /// Path and query.
    pub path: String,
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
    let mut s = TcpStream::connect_timeout(&to.addr, left()?)?;
    s.set_nodelay(true)?;
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
    s.set_write_timeout(Some(left()?))?;
    s.write_all(head.as_bytes())?;
    s.set_write_timeout(Some(left()?))?;
    s.write_all(body)?;
    let mut answer = Vec::with_capacity(1024);
    let mut buf = [0u8; 4096];
    loop {
        s.set_read_timeout(Some(left()?))?;
        let n = s.read(&mut buf)?;
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
