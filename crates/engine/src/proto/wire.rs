//! The plan spec role: which protocol a run's connections speak and what
//! it needs from the validated plan, made once per run and shared by the
//! workers (a worker's spec holds it as `wire`). Every choice between
//! protocols an HTTP run or a storm makes from its plan is made here.

use std::sync::Arc;

use throng_plan::{HttpPlan, StormPlan};
use throng_tls::rustls::ClientConfig;

use super::line::spec::{self as line, ProtocolSpec};
use super::mqtt::spec as mqtt;
use super::ws::spec as ws;
use super::{http2, http3};
use crate::control::Control;
use crate::error::{EngineError, TlsSetup};
use crate::preflight::{self, Asked, Speak};
use crate::reach::Route;
use crate::transport::TlsClient;

/// What a worker's connections speak once open.
#[derive(Clone, Debug)]
pub(crate) enum Wire {
    /// HTTP/1.1, or a storm's bare TCP or TLS connection (with the plan's
    /// rendered request, if it has one).
    Http1,
    /// HTTP/2 (gRPC too: `grpc` set): the request's parts and the
    /// connections' streams (boxed: the largest by far, once per worker).
    Http2(Box<http2::Spec>),
    /// HTTP/3: the QUIC client and the request.
    Http3(Arc<http3::H3Spec>),
    /// A protocol spoken once as the connection opens (NATS, line steps,
    /// WebSocket's upgrade and steps), and the TLS client for its own
    /// upgrade (NATS `tls_required`).
    Line {
        spec: Arc<ProtocolSpec>,
        upgrade_tls: Option<TlsClient>,
    },
}

impl Wire {
    /// An HTTP/3 plan's client (None for any other), before the plan's TLS
    /// client is made: its errors come first. The plan made sure it is
    /// https and a closed loop.
    pub(crate) fn http3_of(
        plan: &HttpPlan,
        tls: Option<&ClientConfig>,
    ) -> Result<Option<Arc<http3::H3Spec>>, EngineError> {
        if plan.http != throng_plan::HttpVersion::Http3 {
            return Ok(None);
        }
        let (Some(settings), Some(tls)) = (plan.tls.as_ref(), tls) else {
            return Err(TlsSetup::NoClientConfig { what: "--http3".into() }.into());
        };
        let name = settings.server_name.clone().unwrap_or_else(|| plan.target.host.clone());
        http3::H3Spec::new(plan, tls, name, plan.streams)
            .map(|s| Some(Arc::new(s)))
            .map_err(|e| EngineError::Plan(Box::new(e)))
    }

    /// An HTTP run's protocol, after its pre-run checks: `h3` from
    /// [`Wire::http3_of`].
    pub(crate) fn for_http(plan: &HttpPlan, h3: Option<Arc<http3::H3Spec>>) -> Result<Wire, EngineError> {
        if let Some(h3) = h3 {
            return Ok(Wire::Http3(h3));
        }
        if plan.http == throng_plan::HttpVersion::Http2 {
            let spec = http2::Spec::from_plan(plan, 1).map_err(|e| EngineError::Plan(Box::new(e)))?;
            return Ok(Wire::Http2(Box::new(spec)));
        }
        Ok(Wire::Http1)
    }

    /// The same for one worker of an HTTP run, which may open `connections`
    /// at once (HTTP/2's pool keeps at most that many).
    pub(crate) fn for_worker(&self, connections: u64) -> Wire {
        match self {
            Wire::Http2(s) => Wire::Http2(Box::new(http2::Spec {
                connections: connections.max(1),
                ..(**s).clone()
            })),
            other => other.clone(),
        }
    }

    /// Request slots per connection the closed and open loops run as tasks
    /// of their own (HTTP/2's streams; 1 else).
    pub(crate) fn task_slots(&self) -> u64 {
        match self {
            Wire::Http2(s) => u64::from(s.streams),
            _ => 1,
        }
    }

    /// True when an open loop may open its connections before the schedule
    /// starts (HTTP/2's open with the first requests).
    pub(crate) fn warms(&self) -> bool {
        !matches!(self, Wire::Http2(_))
    }

    /// Request loops one connection slot of a protocol that drives its own
    /// connections runs (HTTP/3's `--streams`; 1 else): each takes starts.
    pub(crate) fn loops_per_slot(&self) -> u64 {
        match self {
            Wire::Http3(h3) => u64::from(h3.streams),
            _ => 1,
        }
    }

    /// A storm's protocol, with the pre-run check HTTP/2 needs. `tls` is the
    /// TLS spoken from the first byte, `upgrade_tls` a protocol's own
    /// upgrade (nats:// with TLS asked for).
    pub(crate) fn for_storm(
        plan: &StormPlan,
        route: &Route,
        tls: Option<&TlsClient>,
        upgrade_tls: Option<TlsClient>,
        control: &Control,
    ) -> Result<Wire, EngineError> {
        if let Some(p) = plan.protocol.as_ref() {
            let spec = Arc::new(protocol_spec(p, tls.is_some(), plan.client));
            return Ok(Wire::Line { spec, upgrade_tls });
        }
        match plan.http {
            // Each connection speaks the preface; its request (when the
            // storm makes one) is one stream.
            throng_plan::HttpVersion::Http2 => {
                let target = preflight::Dest {
                    route,
                    speak: Speak::Http2 { tls },
                    asked: Asked::StormTarget {
                        url: plan.target.url.to_string(),
                    },
                };
                preflight::check([target], plan.timeout, control)?;
                let spec = http2::Spec::for_storm(plan).map_err(|e| EngineError::Plan(Box::new(e)))?;
                Ok(Wire::Http2(Box::new(spec)))
            }
            throng_plan::HttpVersion::Http3 => match tls {
                Some(tls) => Ok(Wire::Http3(Arc::new(
                    http3::H3Spec::for_storm(plan, &tls.config).map_err(|e| EngineError::Plan(Box::new(e)))?,
                ))),
                None => Err(TlsSetup::NoClientConfig { what: "--http3".into() }.into()),
            },
            throng_plan::HttpVersion::Http1 => Ok(Wire::Http1),
        }
    }

    /// True when each connection needs a descriptor of its own (QUIC's share
    /// their worker's one UDP socket).
    pub(crate) fn socket_per_connection(plan: &StormPlan) -> bool {
        plan.http != throng_plan::HttpVersion::Http3
    }

    /// The client sends first once connected, though the plan has no
    /// request (a line protocol that starts with a send, WebSocket's
    /// upgrade): TLS's Finished waits to go out with it.
    pub(crate) fn client_speaks_first(&self) -> bool {
        match self {
            Wire::Line { spec, .. } => match &**spec {
                ProtocolSpec::Lines { steps, .. } => matches!(steps.first(), Some(line::Step::Send(_))),
                ProtocolSpec::WebSocket(_) | ProtocolSpec::Mqtt(_) => true,
                ProtocolSpec::Nats { .. } => false,
            },
            _ => false,
        }
    }

    /// True when the protocol speaks as the connection opens (a storm's
    /// request then waits for it: nothing goes out with the connect), and
    /// may say goodbye before it closes.
    pub(crate) fn has_opening(&self) -> bool {
        matches!(self, Wire::Line { .. })
    }

    /// True when a held connection must keep answering (NATS PINGs,
    /// WebSocket pings), so its TLS state must stay.
    pub(crate) fn answers_while_holding(&self) -> bool {
        match self {
            Wire::Line { spec, .. } => spec.answers_while_holding(),
            _ => false,
        }
    }
}

/// Compiles a plan's protocol: the NATS CONNECT line, the line steps'
/// regular expressions.
fn protocol_spec(p: &throng_plan::Protocol, tls: bool, client: throng_plan::ClientProfile) -> ProtocolSpec {
    match p {
        throng_plan::Protocol::Nats(auth) => ProtocolSpec::Nats {
            connect: line::nats_connect(auth.user.as_deref(), auth.secret.as_deref(), auth.token, tls),
            strict: client == throng_plan::ClientProfile::NatsGo,
        },
        throng_plan::Protocol::Lines { steps, step_timeout } => ProtocolSpec::Lines {
            steps: steps
                .iter()
                .map(|s| match s {
                    throng_plan::LineStep::Send(t) => line::Step::Send(t.as_bytes().to_vec()),
                    throng_plan::LineStep::SendSecret(t) => line::Step::Send(t.expose().as_bytes().to_vec()),
                    // Compiled when the plan was validated.
                    throng_plan::LineStep::Expect(re) => line::Step::Expect(re.regex().clone()),
                })
                .collect(),
            step_timeout: *step_timeout,
        },
        throng_plan::Protocol::WebSocket(ws) => ProtocolSpec::WebSocket(ws::Spec {
            path: ws.path.clone(),
            host: ws.host.clone(),
            authorization: ws.authorization.clone(),
            steps: ws
                .steps
                .iter()
                .map(|s| match s {
                    throng_plan::WsStep::Text(t) => ws::Step::Send {
                        binary: false,
                        data: t.as_bytes().to_vec(),
                    },
                    throng_plan::WsStep::Binary { bytes, .. } => ws::Step::Send {
                        binary: true,
                        data: bytes.clone(),
                    },
                    // Compiled when the plan was validated.
                    throng_plan::WsStep::Expect(re) => ws::Step::Expect(re.regex().clone()),
                })
                .collect(),
            step_timeout: ws.step_timeout,
            ping_every: ws.ping_every,
        }),
        throng_plan::Protocol::Mqtt(m) => ProtocolSpec::Mqtt(mqtt::Spec::new(m)),
    }
}
