//! Event streams: `GET /sse` (Server-Sent Events, with faults on demand)
//! and an OpenAI-compatible streaming `POST /v1/chat/completions`.
//!
//! ```text
//!  route ─► Stream::sse(query) | Stream::chat(query, body)   (pure: parse, bound)
//!              └─ serve: head ─► wait `first` ─► event, wait `interval`, event, ...
//!                          └─ end: last chunk | hold (stall) | FIN mid-body (abrupt)
//!                                  | an endless line
//! ```
//!
//! Bodies are chunked, one chunk per event, so that a stream that ends
//! without its last chunk is an early end a client can tell apart. The
//! event text is built by pure functions ([`Stream::event`]), tested here;
//! `serve` only waits and writes.

use std::io;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::stream::{LabStream, write_filler};

/// The longest a stalled or endless stream holds its connection (as the
/// faults' `HOLD_LIMIT`).
const HOLD_LIMIT: Duration = Duration::from_secs(60);
/// Most events (or tokens) one stream sends.
const MAX_EVENTS: u64 = 1_000_000;
/// Longest `first` and `interval`.
const MAX_MS: u64 = 600_000;
/// Largest `size` of an ordinary event's data.
const MAX_SIZE: u64 = 1 << 20;
/// Largest `big` event.
const MAX_BIG: u64 = 1 << 30;
/// Most bytes of an endless line.
pub(crate) const ENDLESS_CAP: u64 = 1 << 30;

/// What `GET /sse` takes.
pub(crate) const SSE_USAGE: &str = "/sse takes events=N (up to 1000000, default 10), first=MS and interval=MS \
     (up to 600000, default 0 and 100), size=BYTES (each event's data, up to 1048576), and faults: \
     stall=K (hold the connection open after K events), end=abrupt (close mid-body), big=BYTES (the first \
     event's data, up to 1073741824), endless=1 (a line that never ends)";
/// What `POST /v1/chat/completions` takes.
pub(crate) const CHAT_USAGE: &str = "/v1/chat/completions takes a JSON body with \"messages\" (and \"stream\": true \
     to stream), and in the query tokens=N (up to 1000000, default 16), first=MS (first-token delay) and \
     interval=MS (between tokens; up to 600000, default 0 and 20), usage=1 (a usage chunk before [DONE]; \
     also \"stream_options\": {\"include_usage\": true}), and the faults stall=K and end=abrupt";

/// How a stream ends after its events.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum End {
    /// The last chunk: the response is complete.
    Complete,
    /// Half an event, then a FIN without the last chunk.
    Abrupt,
    /// Nothing more: the connection is held until the client closes (or
    /// [`HOLD_LIMIT`]).
    Stall,
    /// A `data:` line that never ends (up to 1 GiB), then held.
    Endless,
}

/// What the events are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// `GET /sse`: `id: I` and `data:` of `size` bytes (the first of `big`
    /// bytes when set).
    Sse { size: u64, big: Option<u64> },
    /// Chat completion chunks, one token each; with `usage`, a usage
    /// chunk before `[DONE]`.
    Chat { usage: bool, prompt_tokens: u64 },
}

/// One stream to serve, parsed and bounded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Stream {
    pub kind: Kind,
    /// Events (tokens) sent before the end.
    pub events: u64,
    /// Before the first event.
    pub first: Duration,
    /// Between two events.
    pub interval: Duration,
    pub end: End,
}

/// The `key=value` pairs of a query.
fn params(query: &str) -> impl Iterator<Item = (&str, &str)> {
    query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| p.split_once('=').unwrap_or((p, "")))
}

fn number(key: &str, value: &str, max: u64) -> Result<u64, String> {
    match value.parse::<u64>() {
        Ok(n) if n <= max => Ok(n),
        _ => Err(format!("{key}={value}: expected a whole number up to {max}")),
    }
}

impl Stream {
    /// `GET /sse?...`.
    pub(crate) fn sse(query: &str) -> Result<Stream, String> {
        let mut s = Stream {
            kind: Kind::Sse { size: 0, big: None },
            events: 10,
            first: Duration::ZERO,
            interval: Duration::from_millis(100),
            end: End::Complete,
        };
        let (mut size, mut big, mut stall) = (0, None, None);
        for (key, value) in params(query) {
            match key {
                "size" => size = number(key, value, MAX_SIZE)?,
                "big" => big = Some(number(key, value, MAX_BIG)?),
                "endless" if value != "0" => s.end = End::Endless,
                "endless" => {}
                _ => s.common(key, value, &mut stall)?,
            }
        }
        s.kind = Kind::Sse { size, big };
        s.stall(stall);
        Ok(s)
    }

    /// `POST /v1/chat/completions?...` with `body`, and whether the body
    /// asks to stream.
    pub(crate) fn chat(query: &str, body: &[u8]) -> Result<(Stream, bool), String> {
        let json: serde_json::Value =
            serde_json::from_slice(body).map_err(|e| format!("the body is not JSON ({e})"))?;
        let Some(messages) = json.get("messages").and_then(|m| m.as_array()) else {
            return Err("the body must be a JSON object with \"messages\": [...]".into());
        };
        let prompt_tokens = messages
            .iter()
            .filter_map(|m| m.get("content").and_then(|c| c.as_str()))
            .map(|c| c.split_whitespace().count() as u64)
            .sum();
        let mut usage = json
            .pointer("/stream_options/include_usage")
            .and_then(|u| u.as_bool())
            .unwrap_or(false);
        let mut s = Stream {
            kind: Kind::Chat { usage, prompt_tokens },
            events: 16,
            first: Duration::ZERO,
            interval: Duration::from_millis(20),
            end: End::Complete,
        };
        let mut stall = None;
        for (key, value) in params(query) {
            match key {
                "tokens" => s.events = number(key, value, MAX_EVENTS)?,
                "usage" => usage = value != "0",
                _ => s.common(key, value, &mut stall)?,
            }
        }
        s.kind = Kind::Chat { usage, prompt_tokens };
        s.stall(stall);
        let streaming = json.get("stream").and_then(|v| v.as_bool()).unwrap_or(false);
        Ok((s, streaming))
    }

    fn common(&mut self, key: &str, value: &str, stall: &mut Option<u64>) -> Result<(), String> {
        match key {
            "events" => self.events = number(key, value, MAX_EVENTS)?,
            "first" => self.first = Duration::from_millis(number(key, value, MAX_MS)?),
            "interval" => self.interval = Duration::from_millis(number(key, value, MAX_MS)?),
            "stall" => *stall = Some(number(key, value, MAX_EVENTS)?),
            "end" if value == "abrupt" => self.end = End::Abrupt,
            "end" if value == "complete" => self.end = End::Complete,
            "end" => return Err(format!("end={value}: expected end=abrupt or end=complete")),
            _ => return Err(format!("{key} is not a parameter here")),
        }
        Ok(())
    }

    fn stall(&mut self, stall: Option<u64>) {
        if let Some(k) = stall {
            self.events = self.events.min(k);
            self.end = End::Stall;
        }
    }

    /// The text of event `i` (from 0), without chunk framing; a `big`
    /// event's data is not included (see [`Stream::big`]).
    pub(crate) fn event(&self, i: u64, out: &mut Vec<u8>) {
        match self.kind {
            Kind::Sse { size, .. } => {
                let start = out.len();
                out.extend_from_slice(format!("id: {i}\ndata: {i}").as_bytes());
                let data = out.len() - start - format!("id: {i}\ndata: ").len();
                let pad = usize::try_from(size).unwrap_or(usize::MAX).saturating_sub(data);
                out.resize(out.len() + pad, b'.');
                out.extend_from_slice(b"\n\n");
            }
            Kind::Chat { .. } => {
                if i == 0 {
                    out.extend_from_slice(&chunk(r#"{"role":"assistant","content":""}"#, "null"));
                }
                out.extend_from_slice(&chunk(&format!(r#"{{"content":"tok{i} "}}"#), "null"));
            }
        }
    }

    /// The big first event's data size, when this stream has one.
    pub(crate) fn big(&self) -> Option<u64> {
        match self.kind {
            Kind::Sse { big, .. } if self.events > 0 => big,
            _ => None,
        }
    }

    /// What comes after the last event of a complete stream.
    pub(crate) fn tail(&self, out: &mut Vec<u8>) {
        if let Kind::Chat { usage, prompt_tokens } = self.kind {
            out.extend_from_slice(&chunk("{}", r#""stop""#));
            if usage {
                let n = self.events;
                out.extend_from_slice(
                    format!(
                        "data: {{\"id\":\"chatcmpl-lab\",\"object\":\"chat.completion.chunk\",\"model\":\"lab\",\"choices\":[],\
                         \"usage\":{{\"prompt_tokens\":{prompt_tokens},\"completion_tokens\":{n},\"total_tokens\":{}}}}}\n\n",
                        prompt_tokens + n
                    )
                    .as_bytes(),
                );
            }
            out.extend_from_slice(b"data: [DONE]\n\n");
        }
    }
}

fn chunk(delta: &str, finish: &str) -> Vec<u8> {
    format!(
        "data: {{\"id\":\"chatcmpl-lab\",\"object\":\"chat.completion.chunk\",\"model\":\"lab\",\
         \"choices\":[{{\"index\":0,\"delta\":{delta},\"finish_reason\":{finish}}}]}}\n\n"
    )
    .into_bytes()
}

/// The JSON body of a chat completion that was not asked to stream.
pub(crate) fn completion(tokens: u64) -> String {
    let n = tokens.min(4096);
    let content: String = (0..n).map(|i| format!("tok{i} ")).collect();
    format!(
        "{{\"id\":\"chatcmpl-lab\",\"object\":\"chat.completion\",\"model\":\"lab\",\"choices\":[{{\"index\":0,\
         \"message\":{{\"role\":\"assistant\",\"content\":\"{content}\"}},\"finish_reason\":\"stop\"}}],\
         \"usage\":{{\"completion_tokens\":{n}}}}}"
    )
}

/// The response head of a stream.
pub(crate) fn head(out: &mut Vec<u8>, keep_alive: bool) {
    out.extend_from_slice(
        b"HTTP/1.1 200 OK\r\nServer: throng-lab\r\nContent-Type: text/event-stream\r\n\
          Cache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n",
    );
    if !keep_alive {
        out.extend_from_slice(b"Connection: close\r\n");
    }
    out.extend_from_slice(b"\r\n");
}

/// Frames `text` as one chunk.
fn framed(text: &[u8], out: &mut Vec<u8>) {
    out.extend_from_slice(format!("{:x}\r\n", text.len()).as_bytes());
    out.extend_from_slice(text);
    out.extend_from_slice(b"\r\n");
}

/// Serves `stream` after its head (already written). True when the
/// response ended complete and the connection may carry another request.
pub(crate) async fn serve<S: LabStream>(s: &mut S, stream: &Stream) -> io::Result<bool> {
    let start = tokio::time::Instant::now();
    let mut text = Vec::new();
    let mut out = Vec::new();
    for i in 0..stream.events {
        let at = stream.first + stream.interval.saturating_mul(u32::try_from(i).unwrap_or(u32::MAX));
        tokio::time::sleep_until(start + at).await;
        text.clear();
        out.clear();
        match stream.big() {
            Some(big) if i == 0 => {
                let lead = "id: 0\ndata: ";
                let len = lead.len() as u64 + big + 2;
                s.write_all(format!("{len:x}\r\n{lead}").as_bytes()).await?;
                write_filler(s, big).await?;
                s.write_all(b"\n\n\r\n").await?;
            }
            _ => {
                stream.event(i, &mut text);
                framed(&text, &mut out);
                s.write_all(&out).await?;
            }
        }
        s.flush().await?;
    }
    match stream.end {
        End::Complete => {
            text.clear();
            out.clear();
            stream.tail(&mut text);
            if !text.is_empty() {
                framed(&text, &mut out);
            }
            out.extend_from_slice(b"0\r\n\r\n");
            s.write_all(&out).await?;
            s.flush().await?;
            Ok(true)
        }
        End::Abrupt => {
            out.clear();
            framed(b"data: half an event", &mut out);
            s.write_all(&out).await?;
            s.flush().await?;
            socket2::SockRef::from(s.tcp()).shutdown(std::net::Shutdown::Write)?;
            Ok(false)
        }
        End::Stall => {
            hold(s).await;
            Ok(false)
        }
        End::Endless => {
            let endless = async {
                s.write_all(b"4000\r\ndata: ").await?;
                write_filler(s, 0x4000 - 6).await?;
                s.write_all(b"\r\n").await?;
                let mut sent = 0x4000;
                while sent < ENDLESS_CAP {
                    s.write_all(b"4000\r\n").await?;
                    write_filler(s, 0x4000).await?;
                    s.write_all(b"\r\n").await?;
                    s.flush().await?;
                    sent += 0x4000;
                }
                io::Result::Ok(())
            };
            if tokio::time::timeout(HOLD_LIMIT, endless).await.is_ok() {
                hold(s).await;
            }
            Ok(false)
        }
    }
}

/// Reads and discards until the client closes, at most [`HOLD_LIMIT`].
async fn hold<S: LabStream>(s: &mut S) {
    let drain = async {
        let mut sink = [0u8; 1024];
        while matches!(s.read(&mut sink).await, Ok(n) if n > 0) {}
    };
    let _ = tokio::time::timeout(HOLD_LIMIT, drain).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events(s: &Stream) -> String {
        let mut out = Vec::new();
        for i in 0..s.events {
            s.event(i, &mut out);
        }
        s.tail(&mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn sse_parameters_parse_and_bound() {
        let s = Stream::sse("events=3&first=50&interval=10&size=8").unwrap();
        assert_eq!(s.events, 3);
        assert_eq!(s.first, Duration::from_millis(50));
        assert_eq!(s.interval, Duration::from_millis(10));
        assert_eq!(s.end, End::Complete);
        assert_eq!(
            events(&s),
            "id: 0\ndata: 0.......\n\nid: 1\ndata: 1.......\n\nid: 2\ndata: 2.......\n\n"
        );
        let s = Stream::sse("events=9&stall=2").unwrap();
        assert_eq!((s.events, s.end), (2, End::Stall));
        assert_eq!(Stream::sse("end=abrupt").unwrap().end, End::Abrupt);
        assert_eq!(Stream::sse("endless=1").unwrap().end, End::Endless);
        assert_eq!(Stream::sse("big=5000000").unwrap().big(), Some(5_000_000));
        assert_eq!(Stream::sse("big=5&events=0").unwrap().big(), None);
        for bad in [
            "events=x",
            "events=1000001",
            "size=2000000",
            "big=99999999999",
            "end=never",
            "nope=1",
        ] {
            let why = Stream::sse(bad).unwrap_err();
            assert!(why.contains(bad.split('=').next().unwrap()), "{bad}: {why}");
        }
    }

    #[test]
    fn chat_streams_tokens_then_usage_and_done() {
        let body = br#"{"model":"x","stream":true,"messages":[{"role":"user","content":"say three words"}]}"#;
        let s = Stream::chat("tokens=3&usage=1&first=5", body).unwrap().0;
        assert_eq!((s.events, s.first), (3, Duration::from_millis(5)));
        let text = events(&s);
        let datas: Vec<&str> = text
            .split("\n\n")
            .filter(|e| !e.is_empty())
            .map(|e| e.strip_prefix("data: ").unwrap())
            .collect();
        assert_eq!(datas.len(), 1 + 3 + 1 + 1 + 1, "{text}");
        let mut tokens = Vec::new();
        for d in &datas[..datas.len() - 1] {
            let v: serde_json::Value = serde_json::from_str(d).unwrap();
            if let Some(c) = v.pointer("/choices/0/delta/content").and_then(|c| c.as_str()) {
                tokens.push(c.to_string());
            }
        }
        assert_eq!(tokens, ["", "tok0 ", "tok1 ", "tok2 "]);
        let usage: serde_json::Value = serde_json::from_str(datas[5]).unwrap();
        assert_eq!(usage["usage"]["completion_tokens"], 3);
        assert_eq!(usage["usage"]["prompt_tokens"], 3);
        assert_eq!(datas[6], "[DONE]");

        let no_usage = events(&Stream::chat("tokens=1", body).unwrap().0);
        assert!(!no_usage.contains("usage") && no_usage.ends_with("data: [DONE]\n\n"));
        let asked = br#"{"stream":true,"stream_options":{"include_usage":true},"messages":[]}"#;
        assert!(events(&Stream::chat("tokens=1", asked).unwrap().0).contains("\"completion_tokens\":1"));
        assert!(!Stream::chat("", br#"{"messages":[]}"#).unwrap().1);
        assert!(Stream::chat("", b"{").unwrap_err().contains("not JSON"));
        assert!(Stream::chat("", b"[]").unwrap_err().contains("messages"));
        assert!(Stream::chat("size=3", asked).unwrap_err().contains("size"));
        let v: serde_json::Value = serde_json::from_str(&completion(2)).unwrap();
        assert_eq!(v["choices"][0]["message"]["content"], "tok0 tok1 ");
    }

    #[test]
    fn chunks_frame_exactly() {
        let mut out = Vec::new();
        framed(b"data: x\n\n", &mut out);
        assert_eq!(out, b"9\r\ndata: x\n\n\r\n");
        let mut h = Vec::new();
        head(&mut h, false);
        let h = String::from_utf8(h).unwrap();
        assert!(h.contains("text/event-stream") && h.contains("chunked") && h.ends_with("close\r\n\r\n"));
    }

    #[test]
    fn served_streams_end_as_asked() {
        use std::io::{Read, Write};
        let server = crate::LabServer::start(&crate::LabConfig {
            listen: "127.0.0.1:0".parse().unwrap(),
            threads: 1,
            stall: None,
            tls: None,
        })
        .unwrap();
        let read = |path: &str, wait: u64| {
            let mut s = std::net::TcpStream::connect(server.addr()).unwrap();
            s.set_read_timeout(Some(Duration::from_millis(wait))).unwrap();
            write!(s, "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").unwrap();
            let mut out = Vec::new();
            let ended = s.read_to_end(&mut out).is_ok();
            (String::from_utf8_lossy(&out).into_owned(), ended)
        };
        let (done, ended) = read("/sse?events=3&interval=0", 5000);
        assert!(ended && done.ends_with("\r\n0\r\n\r\n"), "{done}");
        assert_eq!(done.matches("data: ").count(), 3, "{done}");
        let (abrupt, ended) = read("/sse?events=2&end=abrupt&interval=0", 5000);
        assert!(ended && !abrupt.ends_with("0\r\n\r\n"), "{abrupt}");
        assert_eq!(
            abrupt.matches("data: ").count(),
            3,
            "two events and half of one: {abrupt}"
        );
        let (stalled, ended) = read("/sse?events=5&stall=2&interval=0", 300);
        assert!(!ended, "a stall holds the connection open: {stalled}");
        assert_eq!(stalled.matches("data: ").count(), 2, "{stalled}");
    }
}
