//! A storm's HTTP/3 connection: the QUIC handshake and HTTP/3 session, at
//! most one request, then held.

use std::time::Instant;

use throng_metrics::ErrorClass;

use super::conn::{Driver, open};
use super::state::ConnState;
use super::stream::exchange;
use super::{H3_NO_ERROR, H3Spec, SendRequest};
use crate::ctx::Ctx;

/// A storm's HTTP/3 connection: QUIC handshake and HTTP/3 session done,
/// its request (if any) answered, held until the storm closes it.
pub(crate) struct Held {
    quic: quinn::Connection,
    driver: Driver,
    /// Kept while held: h3 closes the connection once every request
    /// handle is gone.
    _send: SendRequest,
    opened: Instant,
    carried: u64,
}

/// Storm: opens a QUIC connection and its HTTP/3 session (recorded as the
/// `tls` phase, as for `throng http --http3`), then makes the plan's
/// request (if any) as one stream, its latency from `origin`. Like
/// storm::establish: Err(Some(class)) when the connection failed,
/// Err(None) when the request did (both recorded).
pub(crate) async fn storm_establish(
    ctx: &Ctx,
    h3: &H3Spec,
    with_request: bool,
    origin: Instant,
    row: Option<&mut crate::rows::Row<'_>>,
) -> Result<(Held, Instant), Option<ErrorClass>> {
    let opened = Instant::now();
    let (quic, driver, mut send) = match open(ctx, h3).await {
        Ok(c) => c,
        Err(class) => {
            if let Some(r) = row {
                r.failed(class);
            }
            if with_request {
                let mut rec = ctx.rec.borrow_mut();
                rec.request_started();
                rec.request_failed(Instant::now(), class, 0);
            }
            return Err(Some(class));
        }
    };
    let ready = Instant::now();
    if let Some(r) = row {
        r.ok();
    }
    let mut held = Held {
        quic,
        driver,
        _send: send.clone(),
        opened,
        carried: 0,
    };
    if with_request {
        let state = ConnState::default();
        let outcome = {
            let mut request = std::pin::pin!(exchange(ctx, h3, &mut send, &state, Some(origin), None));
            // The h3 driver reads the server's control stream meanwhile.
            let mut driver_done = false;
            loop {
                tokio::select! {
                    r = &mut request => break r,
                    _ = std::future::poll_fn(|cx| held.driver.poll_close(cx)), if !driver_done => driver_done = true,
                }
            }
        };
        held.carried = 1;
        if outcome.is_err() {
            // Nothing left to hold on a connection whose request failed.
            held.close(ctx);
            return Err(None);
        }
    }
    Ok((held, ready))
}

impl Held {
    /// Keeps the connection until `until` or a stop (false), or until the
    /// server or the network ends it (GOAWAY and close, idle timeout: true).
    /// quinn answers the server's PINGs and keeps the connection alive.
    pub(crate) async fn hold(
        &mut self,
        ctx: &Ctx,
        until: Instant,
        mut sleep: std::pin::Pin<&mut tokio::time::Sleep>,
    ) -> bool {
        // A stop before the hold began woke only the waiters there were.
        if ctx.stopping.get() {
            return false;
        }
        sleep.as_mut().reset(until.into());
        let driver = &mut self.driver;
        tokio::select! {
            () = sleep => false,
            () = ctx.stop_notify.notified() => false,
            _ = std::future::poll_fn(|cx| driver.poll_close(cx)) => true,
            _ = self.quic.closed() => true,
        }
    }

    /// Closes the connection (CONNECTION_CLOSE with H3_NO_ERROR) and
    /// records its end.
    pub(crate) fn close(self, ctx: &Ctx) {
        self.quic.close(H3_NO_ERROR.into(), b"");
        let now = Instant::now();
        let mut rec = ctx.rec.borrow_mut();
        rec.connection_closed(now, now - self.opened);
        rec.mux_connection_closed(self.carried);
    }
}
