//! Live distributed runs: `throng agent` and `throng coordinate`.
//!
//! # Wire protocol
//!
//! One TCP connection per agent, opened by the coordinator; with
//! `--tls-cert` on the agent (and `--cacert` on the coordinator) a TLS one
//! (ALPN `throng-agent/2`; `--client-ca` asks the coordinator for a
//! certificate too). Every message is a frame: a 4-byte big-endian length,
//! then that many bytes of JSON (one [`Msg`]). A frame over [`MAX_FRAME`] (64 MiB) is refused before anything
//! is allocated for it; every read has a timeout. A peer that sends anything
//! else (garbage, a wrong length, an unknown message) is refused with an
//! error naming it, and the connection is closed.
//!
//! ```text
//! coordinator                         agent
//!                             ◀──     Challenge {protocol, nonce}
//!   Hello {protocol, proof}   ──▶     proof = HMAC-SHA256(token, nonce),
//!                                     compared in constant time
//!                             ◀──     Welcome {version, unix_ms, nofile}
//!                                     | Refused {reason}  (then closed)
//!   Alive {seq}  every second ──▶     (while the coordinator greets the
//!                                     others, writes its journal: silent
//!                                     for SILENCE, it is gone; PREPARE
//!                                     at most)
//!   Run {command, segment,    ──▶     the files written to a private
//!        sequence, start_at,          directory, the command pointed at
//!        files}                       them, re-checked and started as a
//!                                     child process (its segment,
//!                                     --start-at), then:
//!                             ◀──     Started | Done {failed}
//!                             ◀──     Live {seq, figures}  every second:
//!                                     everything measured so far (its
//!                                     counters and histograms, whole)
//!                                     | Alive {seq} when nothing is new
//!   (the connection broke: the agent runs on for RECONNECT; the
//!    coordinator connects again and says Hello {.., resume: run_id};
//!    the agent welcomes it and goes on with Live, Done there. With
//!    Run {resumable} (the coordinator keeps a journal) the agent runs
//!    its part to its end and keeps the Done for KEEP_RESULT: a new
//!    coordinator process, `--resume JOURNAL`, says the same Hello)
//!   Stop                      ──▶     (abort, Ctrl-C) the child is
//!                                     interrupted and still writes its result
//!                             ◀──     Done {exit_code, result, error}
//!   Collected                 ──▶     (the merged result is written)
//! ```
//!
//! A live message carries the agent's totals so far, not the change since
//! the last one: the coordinator keeps each agent's latest and adds them up
//! (histograms added, never averaged), so a late or lost message costs
//! nothing and the sum is exact whenever it is taken; the sequence number
//! orders them. The coordinator says Alive every second too.
//!
//! The coordinator validates the command once (the same parser and plan as
//! `throng http`), so an agent only ever gets a command that parses; it
//! parses it again and refuses anything but a load command. The token
//! never crosses the wire (only a proof over a nonce fresh for each
//! connection), and is never logged, never in a result. A coordinator
//! that goes away (the connection ends, or no message for
//! [`SILENCE`]) and does not come back within [`RECONNECT`] stops the
//! agent's run, unless it keeps a journal (then the part runs to its end
//! and its result waits [`KEEP_RESULT`] for `--resume`); an agent that
//! goes away is a missing segment in the merged result.

pub mod agent;
mod command;
pub mod coordinate;
mod files;
mod heartbeat;
mod journal;
mod live;
pub mod resume;
mod secure;

use std::io::{Read, Write};
use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use self::secure::Conn;
use crate::exit::UsageError;

/// The protocol's version; both sides must speak the same.
pub const PROTOCOL: u32 = 2;
/// Largest frame either side accepts.
pub const MAX_FRAME: u32 = 64 << 20;
/// Longest an agent runs on without its coordinator, waiting for it to
/// reconnect; and longest a coordinator tries to.
pub const RECONNECT: Duration = Duration::from_secs(15);
/// Longest a run whose coordinator keeps a journal goes on without it
/// (a run longer than that is stopped, and its result kept).
pub const ORPHANED: Duration = Duration::from_secs(3600);
/// How long an agent keeps the result of a run whose coordinator (with a
/// journal) vanished, for `throng coordinate --resume` to collect.
pub const KEEP_RESULT: Duration = Duration::from_secs(600);
/// Longest a peer may say nothing during a run, and a coordinator before
/// it (it says Alive every second from its welcome on).
pub const SILENCE: Duration = Duration::from_secs(10);
/// Longest an agent waits for its run after its welcome while the
/// coordinator, alive, prepares it (greets the other agents, writes its
/// journal, sends the others their runs).
pub const PREPARE: Duration = Duration::from_secs(600);
/// How an agent's refusal of a resume begins when it does not know the run.
pub const NO_SUCH_RUN: &str = "no such run here";
/// Most agents one coordinator drives.
pub const MAX_AGENTS: usize = 1000;
/// Longest a token file may be.
const MAX_TOKEN_BYTES: u64 = 4096;

/// One message.
#[derive(Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum Msg {
    /// The agent's first message: what the coordinator's proof covers.
    Challenge {
        protocol: u32,
        nonce: String,
    },
    /// The coordinator's answer: HMAC-SHA256 of the nonce keyed by the
    /// token (empty without one); never the token itself.
    Hello {
        protocol: u32,
        proof: String,
        /// The run this connection resumes (its first one broke).
        #[serde(default)]
        resume: Option<String>,
    },
    Welcome {
        version: String,
        unix_ms: u64,
        nofile: u64,
    },
    Refused {
        reason: String,
    },
    Run {
        command: Vec<String>,
        segment: String,
        sequence: String,
        start_at_unix_ms: u64,
        #[serde(default)]
        files: Vec<files::Shipped>,
        /// What the coordinator's run of a scenario's `setup:` captured:
        /// the agent's run reads these and runs neither setup nor teardown.
        #[serde(default)]
        setup: Option<std::collections::HashMap<String, String>>,
        /// The run's name, for a connection that resumes it.
        #[serde(default)]
        run_id: String,
        /// The coordinator keeps a journal (`--resume` can pick the run
        /// up): without it the run goes on to its end, for [`ORPHANED`] at
        /// most, and its result is kept for [`KEEP_RESULT`].
        #[serde(default)]
        resumable: bool,
    },
    Started,
    Alive {
        seq: u64,
    },
    Live {
        seq: u64,
        figures: String,
    },
    Stop,
    /// The coordinator has the part's result (an agent that keeps results
    /// for `--resume` may drop it).
    Collected,
    Done {
        exit_code: i32,
        result: Option<String>,
        error: String,
    },
}

impl Msg {
    /// Its name, for errors (never its contents: a Hello holds the token).
    pub fn name(&self) -> &'static str {
        match self {
            Msg::Challenge { .. } => "challenge",
            Msg::Hello { .. } => "hello",
            Msg::Welcome { .. } => "welcome",
            Msg::Refused { .. } => "refused",
            Msg::Run { .. } => "run",
            Msg::Started => "started",
            Msg::Alive { .. } => "alive",
            Msg::Live { .. } => "live",
            Msg::Stop => "stop",
            Msg::Collected => "collected",
            Msg::Done { .. } => "done",
        }
    }
}

/// What went wrong reading a frame.
#[derive(Debug, thiserror::Error)]
pub enum WireError {
    #[error("no message within {0:?}")]
    Timeout(Duration),
    #[error("the connection closed")]
    Closed,
    #[error("a frame of {0} bytes, over the limit (not a throng peer?)")]
    TooLarge(u32),
    #[error("not a throng message ({0}); is this a throng agent/coordinator of the same version?")]
    Garbage(String),
    #[error("{0}")]
    Io(std::io::Error),
}

/// Writes one message.
pub fn send(stream: &mut Conn, msg: &Msg) -> Result<(), WireError> {
    let body = serde_json::to_vec(msg).map_err(|e| WireError::Garbage(e.to_string()))?;
    let len = u32::try_from(body.len())
        .ok()
        .filter(|&n| n <= MAX_FRAME)
        .ok_or(WireError::TooLarge(u32::MAX))?;
    let mut frame = Vec::with_capacity(4 + body.len());
    frame.extend_from_slice(&len.to_be_bytes());
    frame.extend_from_slice(&body);
    stream.write_all(&frame).map_err(WireError::Io)?;
    stream.flush().map_err(WireError::Io)
}

/// Reads one message: waits at most `timeout` for it to begin, and at most
/// [`BODY_TIME`] more for the rest of it (a peer that drips bytes is cut
/// off, not waited for).
pub fn recv(stream: &mut Conn, timeout: Duration) -> Result<Msg, WireError> {
    read_frame(stream, timeout, MAX_FRAME, BODY_TIME)
}

/// Longest the rest of a message may take once it began.
const BODY_TIME: Duration = Duration::from_secs(60);
/// Largest message either side reads from a peer it does not trust yet (the
/// challenge, the hello, the welcome), and an agent's from its coordinator
/// during a run (alive, stop).
pub const MAX_HELLO: u32 = 64 << 10;

/// A small message (at most `max` bytes), all of it within `timeout`: what
/// a peer says before it is trusted, so a peer that drips bytes holds
/// nothing for longer than that.
pub fn recv_within(stream: &mut Conn, timeout: Duration, max: u32) -> Result<Msg, WireError> {
    read_frame(stream, timeout, max, timeout)
}

/// One frame of at most `max` bytes: its start within `timeout`, the rest
/// within `body_time` after the call.
fn read_frame(stream: &mut Conn, timeout: Duration, max: u32, body_time: Duration) -> Result<Msg, WireError> {
    let deadline = std::time::Instant::now() + body_time.max(timeout);
    stream.set_read_timeout(Some(timeout)).map_err(WireError::Io)?;
    let mut head = [0u8; 4];
    read_exact(stream, &mut head, timeout)?;
    let len = u32::from_be_bytes(head);
    if len > max {
        return Err(WireError::TooLarge(len));
    }
    // Grown as bytes arrive, never allocated up front from the length alone.
    let mut body = Vec::new();
    let mut chunk = [0u8; 64 * 1024];
    while body.len() < len as usize {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return Err(WireError::Timeout(body_time));
        }
        stream.set_read_timeout(Some(left)).map_err(WireError::Io)?;
        let want = (len as usize - body.len()).min(chunk.len());
        match stream.read(&mut chunk[..want]) {
            Ok(0) => return Err(WireError::Closed),
            Ok(n) => body.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(io_error(e, body_time)),
        }
    }
    serde_json::from_slice(&body).map_err(|e| WireError::Garbage(e.to_string()))
}

/// What a peer said (a refusal's reason, an error), as shown here: one line
/// of at most [`SHOWN`] characters, control characters replaced.
pub fn shown(text: &str) -> String {
    let mut out: String = text
        .chars()
        .take(SHOWN)
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if text.chars().nth(SHOWN).is_some() {
        out.push_str("...");
    }
    out
}

/// Longest text of a peer's shown.
const SHOWN: usize = 2000;

fn read_exact(stream: &mut Conn, buf: &mut [u8], timeout: Duration) -> Result<(), WireError> {
    stream.read_exact(buf).map_err(|e| match e.kind() {
        std::io::ErrorKind::UnexpectedEof => WireError::Closed,
        _ => io_error(e, timeout),
    })
}

fn io_error(e: std::io::Error, timeout: Duration) -> WireError {
    match e.kind() {
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => WireError::Timeout(timeout),
        std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::BrokenPipe => WireError::Closed,
        _ => WireError::Io(e),
    }
}

/// Reads `--token-file`: its first line, trimmed; never shown anywhere.
pub fn read_token(path: Option<&Path>) -> Result<String, UsageError> {
    let Some(path) = path else {
        return Ok(String::new());
    };
    let bytes = throng_plan::input::read_limited(path, MAX_TOKEN_BYTES).map_err(|e| {
        UsageError(match e {
            throng_plan::input::ReadError::Io(e) => format!(
                "--token-file {}: cannot read it: {e}; give a readable file",
                path.display()
            ),
            _ => format!(
                "--token-file {}: over {MAX_TOKEN_BYTES} bytes; a token is one short line",
                path.display()
            ),
        })
    })?;
    let text = String::from_utf8(bytes).map_err(|_| {
        UsageError(format!(
            "--token-file {}: not UTF-8 text; put the token on one line",
            path.display()
        ))
    })?;
    let token = text.lines().next().unwrap_or("").trim().to_string();
    if token.is_empty() {
        return Err(UsageError(format!(
            "--token-file {}: the file is empty; put the shared token on its first line",
            path.display()
        )));
    }
    Ok(token)
}

/// True when `a` and `b` are equal, in time that does not depend on where
/// they differ.
pub fn same_token(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let mut diff = u8::from(a.len() != b.len());
    for i in 0..a.len().max(b.len()) {
        diff |= a.get(i).copied().unwrap_or(0) ^ b.get(i).copied().unwrap_or(0xff);
    }
    diff == 0
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_compare() {
        assert!(same_token("abc", "abc"));
        assert!(!same_token("abc", "abd"));
        assert!(!same_token("abc", "ab"));
        assert!(!same_token("", "a"));
        assert!(same_token("", ""));
    }

    #[test]
    fn frames_are_bounded_and_garbage_is_refused() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let mut client = Conn::Tcp(std::net::TcpStream::connect(addr).unwrap());
        let mut server = Conn::Tcp(listener.accept().unwrap().0);
        client.write_all(&(MAX_HELLO + 1).to_be_bytes()).unwrap();
        assert!(matches!(
            recv_within(&mut server, Duration::from_secs(5), MAX_HELLO),
            Err(WireError::TooLarge(_))
        ));
        client.write_all(&u32::MAX.to_be_bytes()).unwrap();
        assert!(matches!(
            recv(&mut server, Duration::from_secs(5)),
            Err(WireError::TooLarge(_))
        ));
        client.write_all(&5u32.to_be_bytes()).unwrap();
        client.write_all(b"hello").unwrap();
        assert!(matches!(
            recv(&mut server, Duration::from_secs(5)),
            Err(WireError::Garbage(_))
        ));
        assert_eq!(shown("a\nb"), "a b");
        assert_eq!(shown(&"x".repeat(10_000)).len(), SHOWN + 3);
        send(&mut client, &Msg::Alive { seq: 7 }).unwrap();
        assert!(matches!(
            recv(&mut server, Duration::from_secs(5)),
            Ok(Msg::Alive { seq: 7 })
        ));
        assert!(matches!(
            recv(&mut server, Duration::from_millis(50)),
            Err(WireError::Timeout(_))
        ));
        drop(client);
        assert!(matches!(
            recv(&mut server, Duration::from_secs(5)),
            Err(WireError::Closed)
        ));
    }
}
