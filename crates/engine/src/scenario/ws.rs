//! A scenario's `websocket:` step: the upgrade on a connection of its own
//! (or the VU's socket kept from an earlier step to the same URL), then its
//! messages in order, each expect one request of the step.
//!
//! ```text
//!  render path + headers ─► kept socket for that URL? ─┬─ yes ─────────────┐
//!                                                      └─ connect, upgrade ─┤ (handshake)
//!  messages: send ─► frame out          expect ─► events until one matches  │
//!            (templates rendered now)     (pings answered, others passed    │
//!                                          over, timeout.response)          │
//!  each expect: a request (ok, round trip = last send → match) ◄────────────┘
//!  end: keep ─► Vu::ws; else close handshake (1000)
//! ```
//!
//! Units of work: every expect is one request (`requests{step:NAME}`, its
//! round trip the step's `response`); a step without an expect is one
//! request (the upgrade and its sends). A failure ends the step and its
//! socket: the request under way takes its class, the messages after it
//! are not sent, so `attempted = ok + Σ errors` holds.
//! Framing is [`crate::proto::ws::frame`]'s; the socket, [`crate::proto::ws`]'s.

use std::time::{Duration, Instant};

use throng_metrics::{ErrorClass, Phase};
use throng_scenario::{WebSocket, WsMessage};
use tokio::io::AsyncWriteExt;

use super::flight::{Unit, fail_unit, message_answered};
use super::held::Held;
use super::ops::{Kept, Scen, Vu, WsOp, with_scen};
use super::render::{Unsent, context, encode_target};
use crate::conn::{Conn, close, open_connection_to};
use crate::ctx::Ctx;
use crate::proto::ws::frame::{self as frame, Event, Reader};
use crate::proto::ws::{Socket, io_fail, random, read_upgrade};

/// The upgrade's headers throng writes itself: a file's own would
/// contradict them.
const OWN: [&str; 5] = [
    "upgrade",
    "connection",
    "sec-websocket-key",
    "sec-websocket-version",
    "content-length",
];

/// The upgrade request for `target`, with the step's rendered headers (a
/// `Host` or `User-Agent` given replaces throng's).
fn upgrade_request(target: &str, authority: &str, key: &str, headers: &[(String, String)]) -> Vec<u8> {
    let given = |n: &str| headers.iter().any(|(k, _)| k.eq_ignore_ascii_case(n));
    let mut out = format!("GET {target} HTTP/1.1\r\n");
    if !given("host") {
        out.push_str(&format!("Host: {authority}\r\n"));
    }
    out.push_str(&format!(
        "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
    ));
    if !given("user-agent") {
        out.push_str("User-Agent: throng\r\n");
    }
    for (k, v) in headers {
        if !OWN.iter().any(|o| k.eq_ignore_ascii_case(o)) {
            out.push_str(&format!("{k}: {v}\r\n"));
        }
    }
    out.push_str("\r\n");
    out.into_bytes()
}

/// Renders the step's target and headers.
fn render_head(sc: &Scen, vu: &mut Vu, ws: &WebSocket) -> Result<(String, Vec<(String, String)>), Unsent> {
    let mut cx = context(sc, vu);
    let mut path = String::new();
    if ws.url.starts_with('/') {
        path.push_str(&sc.base.base_path);
    }
    ws.path.render_into(&mut cx, &mut path);
    let mut target = String::with_capacity(path.len());
    encode_target(&path, &mut target);
    let own = |name: &str| ws.headers.iter().any(|(k, _)| k.eq_ignore_ascii_case(name));
    let defaults = sc.plan.defaults.headers.iter().filter(|(k, _)| !own(k));
    let mut headers = Vec::new();
    for (k, v) in defaults.chain(&ws.headers) {
        let value = v.render(&mut cx);
        if value.chars().any(throng_plan::is_forbidden_in_value) {
            return Err(Unsent::Smuggled);
        }
        headers.push((k.clone(), value));
    }
    match cx.failed {
        Some(e) => Err(Unsent::Expression(e)),
        None => Ok((target, headers)),
    }
}

/// Connects and upgrades within `timeout`; the upgrade's time is the
/// `handshake` phase.
async fn open<'a>(
    ctx: &'a Ctx,
    sc: &Scen,
    target: &str,
    headers: &[(String, String)],
    timeout: Duration,
    mut row: Option<&mut crate::rows::Row<'_>>,
) -> Result<(Held<'a, Conn>, Reader), ErrorClass> {
    let dest = &sc.dest.conn;
    let mut sleep = std::pin::pin!(tokio::time::sleep(timeout));
    let opening = open_connection_to(
        ctx,
        &dest.route,
        dest.tls.as_ref(),
        &[],
        None,
        false,
        sleep.as_mut(),
        row.as_deref_mut(),
    );
    let mut held = Held::new(ctx, Box::pin(opening).await?.conn);
    let conn = held.get();
    let key = frame::key(random());
    let request = upgrade_request(target, &sc.authority.to_string(), &key, headers);
    let t0 = Instant::now();
    sleep.as_mut().reset((t0 + timeout).into());
    let upgrade = async {
        conn.stream.write_all(&request).await.map_err(io_fail)?;
        conn.stream.flush().await.map_err(io_fail)?;
        ctx.rec.borrow_mut().sent(Instant::now(), request.len() as u64);
        read_upgrade(&mut conn.stream, &ctx.scratch, &key, None).await
    };
    let answer = tokio::select! {
        biased;
        r = upgrade => r,
        () = sleep.as_mut() => Err(ErrorClass::TimeoutHandshake),
    };
    match answer {
        Ok(rest) => {
            let now = Instant::now();
            ctx.rec.borrow_mut().phase(now, Phase::Handshake, now - t0);
            if let Some(r) = row {
                r.conn(held.get().id);
                r.phase(Phase::Handshake, now - t0);
            }
            let mut reader = Reader::default();
            reader.push(&rest);
            Ok((held, reader))
        }
        Err(class) => Err(class),
    }
}

/// Closes a kept socket: the close handshake (bounded), then the
/// connection's end recorded.
pub(super) async fn close_kept(ctx: &Ctx, kept: Option<Kept>) {
    if let Some(mut k) = kept {
        close_handshake(ctx, &mut k.conn).await;
        close(ctx, Some(k.conn));
    }
}

/// Longest a frame may take to write (the close frame's answer has
/// [`crate::proto::ws::close`]'s own limit).
const CLOSE_LIMIT: Duration = Duration::from_secs(1);

/// The close handshake (1000), its write bounded too: a server that reads
/// nothing cannot hold the step.
async fn close_handshake(ctx: &Ctx, conn: &mut Conn) {
    let _ = tokio::time::timeout(CLOSE_LIMIT * 2, crate::proto::ws::close(&mut conn.stream, &ctx.scratch)).await;
}

/// Writes one frame within `limit`: a server that stops reading is
/// `timeout.response`, as one that stops answering.
async fn send(sock: &mut Socket<'_>, opcode: u8, payload: &[u8], limit: Duration) -> Result<(), ErrorClass> {
    match tokio::time::timeout(limit, sock.send(opcode, payload)).await {
        Ok(r) => r.map_err(io_fail),
        Err(_) => Err(ErrorClass::TimeoutResponse),
    }
}

/// Drops a kept socket without a handshake (the VU was cut off).
pub(super) fn drop_kept(ctx: &Ctx, kept: Option<Kept>) {
    if let Some(k) = kept {
        close(ctx, Some(k.conn));
    }
}

/// Runs one `websocket:` step.
pub(super) async fn step(ctx: &Ctx, sc: &Scen, vu: &mut Vu, op: &WsOp, origin: Option<Instant>) {
    let ws = &op.ws;
    let begin = |vu: &Vu| Unit::begin(ctx, sc, vu, &op.tags, &op.ws.name);
    // Sends after the last expect belong to no request (unless they fail).
    let last_expect = ws.messages.iter().rposition(|m| matches!(m, WsMessage::Expect { .. }));
    let head = render_head(sc, vu, ws);
    if let Err(Unsent::Expression(message)) = head {
        // Never begun: the iteration ends failed with the message.
        vu.fault = Some(message);
        return;
    }
    let mut unit = Some(begin(vu));
    if let (Some(due), Some(u)) = (origin, unit.as_mut())
        && let Some(r) = u.row.row()
    {
        r.phase(Phase::ScheduleLag, Instant::now().saturating_duration_since(due));
    }
    let Ok((target, headers)) = head else {
        // Never sent: a rendered header throng cannot frame.
        fail(ctx, unit, ErrorClass::Protocol);
        return;
    };
    // The kept socket, if it serves this URL; another one is closed.
    let kept = match vu.ws.take() {
        Some(k) if k.target == target => Some(k),
        other => {
            close_kept(ctx, other).await;
            None
        }
    };
    let (mut held, reader) = match kept {
        Some(k) => (Held::new(ctx, k.conn), k.reader),
        None => {
            let row = unit.as_mut().and_then(|u| u.row.row());
            match open(ctx, sc, &target, &headers, ws.timeout, row).await {
                Ok(c) => c,
                Err(class) => return fail(ctx, unit, class),
            }
        }
    };
    let mut sock = Socket::new(&mut held.get().stream);
    sock.reader = reader;
    let mut last_send = Instant::now();
    let mut received_bytes: u64 = 0;
    let mut failed: Option<ErrorClass> = None;
    let mut socket_lost = false;
    for (i, m) in ws.messages.iter().enumerate() {
        if unit.is_none() && last_expect.is_some_and(|l| i <= l) {
            unit = Some(begin(vu));
        }
        match m {
            WsMessage::Send(_) | WsMessage::SendBinary(_) => {
                let text;
                let (op, data): (u8, &[u8]) = match m {
                    WsMessage::Send(t) => {
                        let mut cx = context(sc, vu);
                        text = t.render(&mut cx);
                        if let Some(message) = cx.failed {
                            // Not sent: the unit under way fails as a
                            // message throng could not make, and the
                            // iteration with the expression's message.
                            vu.fault = Some(message);
                            failed = Some(ErrorClass::Protocol);
                            unit = unit.or_else(|| Some(begin(vu)));
                            break;
                        }
                        (frame::TEXT, text.as_bytes())
                    }
                    WsMessage::SendBinary(b) => (frame::BINARY, b),
                    WsMessage::Expect { .. } => continue,
                };
                last_send = Instant::now();
                if let Err(class) = send(&mut sock, op, data, ws.timeout).await {
                    failed = Some(class);
                    socket_lost = true;
                    unit = unit.or_else(|| Some(begin(vu)));
                    break;
                }
                let now = Instant::now();
                ctx.rec.borrow_mut().sent(now, sock.out.len() as u64);
                with_scen(ctx, |r| r.ws_sent());
            }
            WsMessage::Expect { regex, captures } => {
                let matched = expect(ctx, &mut sock, regex, ws.timeout, &mut received_bytes).await;
                match matched {
                    Ok(data) => message_answered(
                        ctx,
                        vu,
                        captures,
                        (101, &data),
                        last_send,
                        &mut received_bytes,
                        &mut unit,
                    ),
                    Err((class, lost)) => {
                        socket_lost |= lost;
                        failed = Some(class);
                        break;
                    }
                }
            }
        }
    }
    let reader = std::mem::take(&mut sock.reader);
    drop(sock);
    if let Some(class) = failed {
        if !socket_lost {
            // An expect that timed out: the socket is sound, end it properly.
            close_handshake(ctx, held.get()).await;
        }
        drop(held);
        fail_unit(ctx, unit, class, received_bytes);
        return;
    }
    // A step without an expect: its one request, ok once its sends went.
    if let Some(u) = unit.take() {
        u.ok(ctx, received_bytes, None);
    }
    if ws.keep {
        vu.ws = held.take().map(|conn| Kept { conn, reader, target });
    } else {
        close_handshake(ctx, held.get()).await;
    }
}

/// Reads events until a message `regex` matches (pings answered, others
/// passed over), within `limit`; the bytes of every message are added to
/// `received_bytes`. Err: the class, and whether the socket is lost.
async fn expect(
    ctx: &Ctx,
    sock: &mut Socket<'_>,
    regex: &regex::Regex,
    limit: Duration,
    received_bytes: &mut u64,
) -> Result<Vec<u8>, (ErrorClass, bool)> {
    let deadline = tokio::time::sleep(limit);
    let mut deadline = std::pin::pin!(deadline);
    loop {
        let event = tokio::select! {
            biased;
            e = sock.event(&ctx.scratch) => e,
            () = deadline.as_mut() => break Err((ErrorClass::TimeoutResponse, false)),
        };
        match event {
            Ok(Event::Message { data, .. }) => {
                *received_bytes += data.len() as u64;
                with_scen(ctx, |r| r.ws_received());
                let text = String::from_utf8_lossy(&data);
                if regex.is_match(&text) {
                    break Ok(data);
                }
            }
            Ok(Event::Ping(p)) => {
                // Within what is left of the expect's deadline:
                // pings flooding in must not stretch it.
                let left = deadline
                    .deadline()
                    .saturating_duration_since(tokio::time::Instant::now());
                if let Err(class) = send(sock, frame::PONG, &p, left).await {
                    break Err((class, true));
                }
            }
            Ok(Event::Pong(_)) => {}
            Ok(Event::Close(code)) => {
                // Answer it, as the close handshake asks.
                let _ = send(sock, frame::CLOSE, &frame::close_payload(code), CLOSE_LIMIT).await;
                break Err((ErrorClass::WsClosed(code), true));
            }
            Err(class) => {
                break Err((class, true));
            }
        }
    }
}

fn fail(ctx: &Ctx, unit: Option<Unit<'_>>, class: ErrorClass) {
    fail_unit(ctx, unit, class, 0);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_upgrade_carries_the_steps_headers_but_not_over_its_own() {
        let h = |n: &str, v: &str| (n.to_string(), v.to_string());
        let req = upgrade_request(
            "/chat?room=1",
            "127.0.0.1:8080",
            "a2V5",
            &[h("X-Token", "t-1"), h("Connection", "close"), h("User-Agent", "me")],
        );
        let text = String::from_utf8(req).unwrap();
        assert!(text.starts_with("GET /chat?room=1 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n"));
        assert!(text.contains("Sec-WebSocket-Key: a2V5\r\n"));
        assert!(text.contains("X-Token: t-1\r\n"));
        assert!(text.contains("User-Agent: me\r\n"));
        assert!(!text.contains("User-Agent: throng"));
        assert_eq!(text.matches("Connection:").count(), 1);
        assert!(text.ends_with("\r\n\r\n"));
    }
}
