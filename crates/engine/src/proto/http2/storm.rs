//! A storm's HTTP/2 connection: the preface as part of its handshake, at
//! most one request, then held.

use std::pin::Pin;
use std::task::Poll;
use std::time::Instant;

use throng_metrics::ErrorClass;
use tokio::time::Sleep;

use super::Slot;
use super::driver::{H2Conn, close, register, speak};
use super::stream::exchange;
use crate::ctx::Ctx;
use crate::proto::session::Session;
use crate::record::record_exchange;
use crate::rows::Row;

/// A storm's HTTP/2 connection: preface spoken, its request (if any)
/// answered, held until the storm closes it.
pub(crate) struct Held(H2Conn);

/// Storm: opens a connection whose handshake includes the HTTP/2 preface
/// and SETTINGS exchange (a failure there fails the connection, with its
/// `h2.*` class), then makes the plan's request (if any) as one stream.
/// Like storm::establish: Err(Some(class)) when the connection failed,
/// Err(None) when the request ended it (both recorded).
#[allow(clippy::too_many_arguments)]
pub(crate) async fn storm_establish(
    ctx: &Ctx,
    with_request: bool,
    source: Option<std::net::IpAddr>,
    origin: Instant,
    reconnect: bool,
    mut sleep: Pin<&mut Sleep>,
    mut row: Option<&mut Row<'_>>,
) -> Result<(Held, Instant), Option<ErrorClass>> {
    let Some(pool) = ctx.conns.h2.as_ref() else {
        return Err(Some(ErrorClass::Protocol));
    };
    let spec = &pool.spec;
    if with_request {
        ctx.rec.borrow_mut().request_started();
        ctx.in_flight.set(ctx.in_flight.get() + 1);
    }
    let fail_request = |class: ErrorClass| {
        if with_request {
            ctx.rec.borrow_mut().request_failed(Instant::now(), class, 0);
            ctx.in_flight.set(ctx.in_flight.get() - 1);
        }
    };
    let spoken = async {
        let (stream, opening) = crate::conn::open_transport(
            ctx,
            &ctx.spec.route,
            ctx.spec.tls.as_ref(),
            &[],
            source,
            reconnect,
            sleep.as_mut(),
            row.as_deref_mut(),
        )
        .await?;
        match speak(
            ctx,
            spec.streams,
            stream,
            opening.opened,
            opening.id,
            sleep.as_mut(),
            row.as_deref_mut(),
        )
        .await
        {
            Ok(c) => {
                let ready = Instant::now();
                opening.counted(ctx, ready);
                Ok((c, ready))
            }
            Err(class) => {
                opening.failed(ctx, class);
                Err(class)
            }
        }
    };
    let (conn, ready) = match spoken.await {
        Ok(c) => c,
        Err(class) => {
            if let Some(r) = row {
                r.failed(class);
            }
            fail_request(class);
            return Err(Some(class));
        }
    };
    if let Some(r) = row.as_deref_mut() {
        r.ok();
    }
    if with_request {
        conn.in_flight.set(1);
        ctx.rec.borrow_mut().stream_opened(Instant::now(), 1);
        let t_send = Instant::now();
        sleep.as_mut().reset((t_send + ctx.spec.timeout).into());
        let keep_server = ctx.rec.borrow().wants_first_reply();
        let mut slot = Slot::new(ctx.spec.head_request);
        let mut outcome = exchange(spec, &pool.block, &conn, &mut slot, keep_server, sleep).await;
        if let Err(f) = &mut outcome
            && matches!(f.class, ErrorClass::Reset | ErrorClass::Eof)
            && conn.went_away()
        {
            f.class = ErrorClass::H2("goaway");
        }
        ctx.in_flight.set(ctx.in_flight.get() - 1);
        let mut session = Session::Http2(Box::new(slot));
        record_exchange(
            ctx,
            &mut session,
            &outcome,
            spec.head_bytes + spec.body.len(),
            t_send,
            origin,
            &ctx.spec.expect,
            keep_server,
            row,
        );
        conn.in_flight.set(0);
        conn.carried.set(1);
        ctx.rec.borrow_mut().stream_closed();
        if outcome.is_err() {
            // Nothing left to hold on a connection whose request failed.
            close(ctx, &conn);
            return Err(None);
        }
    }
    // Held idle from now on: it keeps no buffers (its driver shrinks it
    // only when it runs, and an idle connection's driver may never run).
    conn.shared.conn.borrow_mut().shrink();
    Ok((Held(conn), ready))
}

impl Held {
    /// Keeps the connection until `until` or a stop (false), or until the
    /// server ends it (GOAWAY, reset, close: true).
    pub(crate) async fn hold(&self, ctx: &Ctx, until: Instant, mut sleep: Pin<&mut Sleep>) -> bool {
        let c = &self.0;
        // A stop before the hold began woke only the waiters there were.
        if ctx.stopping.get() {
            return false;
        }
        sleep.as_mut().reset(until.into());
        tokio::select! {
            () = sleep => false,
            () = ctx.stop_notify.notified() => false,
            () = std::future::poll_fn(|cx| {
                if c.dead() {
                    return Poll::Ready(());
                }
                register(&c.shared.waiter, cx);
                Poll::Pending
            }) => true,
        }
    }

    /// Closes the connection and records its end.
    pub(crate) fn close(self, ctx: &Ctx) {
        close(ctx, &self.0);
    }
}
