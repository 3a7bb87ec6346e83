//! The protocols the engine speaks, one module or folder each: `http1`,
//! `http2`, `http3`, `grpc` (over HTTP/2), `ws` (WebSocket), `mqtt` and
//! `line` (NATS and the line protocols: Redis, SMTP, memcached, custom
//! steps).
//!
//! A protocol provides up to five roles:
//!
//! 1. a **plan spec**: what it needs from the validated plan, made once
//!    per run and shared by the workers;
//! 2. a **request driver** for the closed and open loops (`throng http`,
//!    `throng grpc`);
//! 3. a **storm connection**: opened, at most one request, held;
//! 4. a **scenario VU connection**: a VU's own, its steps one at a time;
//! 5. a **pre-run check**: does the server speak it at all.
//!
//! Each role is one type or function here, an enum with one arm per
//! protocol (static dispatch: the loops stay monomorphic), and every
//! `match` on the protocol is in this folder. The worker context
//! (`crate::ctx`), its spec (`crate::load`), the closed, open and storm
//! loops, `crate::conn` and `crate::exchange` call these and name no
//! protocol:
//!
//! | role | here | what the loops call |
//! |---|---|---|
//! | plan spec | `wire.rs`: [`Wire`] (`Http1`, `Http2`, `Http3`, `Line`), made by `Wire::for_http` / `Wire::for_storm` from the plan | `WorkerSpec::wire`; `client_speaks_first`, `loops_per_slot`, `has_opening`, `answers_while_holding` |
//! | a worker's shared connections | `conns.rs`: [`Conns`] (HTTP/2's pool, the QUIC endpoint), made from the `Wire` | `Ctx::conns`; `close_all` when the loops end |
//! | request driver | `session.rs`: [`Session`] (a task's protocol state); `driver.rs`: [`one_request`], [`spawn_driver`] (a protocol driving its own connections, fed by [`Starts`], `starts.rs`) | the closed and open loops |
//! | storm connection | `link.rs`: `Link` (a byte stream, `http2::Held`, `http3::Held`) with `establish_own`, `hold_own`, `close`; `answer_while_holding`, `goodbye`; `opening.rs`: `opening` (a line protocol's, WebSocket's or MQTT's handshake as a connection opens) | `crate::storm`, `crate::conn` |
//! | scenario VU connection | `vu/`: `vu::Conns` (a VU's `http2::Own` and `http3::Own`, keyed by protocol: open, exchange, call, close), `vu::dest::Dest`, stream requests and hops; `ws`'s `Socket` for a `websocket:` step | `crate::scenario` |
//! | pre-run check | `http2::preflight`, `http3::preflight` (their `check.rs`) | `crate::preflight` |
//!
//! Which protocol module provides each arm:
//!
//! | role | `http1` | `http2` | `http3` | `grpc` | `ws` | `line` | `mqtt` |
//! |---|---|---|---|---|---|---|---|
//! | plan spec | `Wire::Http1`: the plan's rendered request (`crate::load::WorkerSpec`) | `http2::Spec` (`from_plan`, `for_storm`; `mod.rs`) | `http3::H3Spec` (`new`, `for_storm`; `mod.rs`) | `http2::Spec` with `grpc` set (from `plan.grpc`) | `ws::Spec`, inside `line::ProtocolSpec::WebSocket` | `line::ProtocolSpec` (`Nats`, `Lines`), compiled by `wire.rs` | `mqtt::Spec`, inside `line::ProtocolSpec::Mqtt` |
//! | request driver | `http1::exchange` (`io.rs`), through `Session::Http1` and `crate::exchange::one_request` | `http2::stream_slot` (`slot.rs`): a task per stream slot making `http2::one_request` on the worker's `http2::Pool` (`pool.rs`), through `spawn_driver` | `http3::connection_slot` (`slot.rs`), through `spawn_driver` | `http2`'s, with `http2/grpc.rs` (status, deadline, messages) and `grpc::frame` (the reply judged) | none | none | none |
//! | storm connection | `Link::Bytes`: `crate::conn` and one `Session` exchange | `http2::storm_establish`, `http2::Held` (`storm.rs`) | `http3::storm_establish`, `http3::Held` (`storm.rs`) | none | `ws::handshake` (through `line::handshake` in `opening`), `ws::hold`, `ws::close` | `line::handshake` (`opening`), `line::answer_pings` (held) | `mqtt::handshake` (through `line::handshake` in `opening`), `mqtt::hold`, `mqtt::disconnect` |
//! | scenario VU connection | `crate::scenario` (`request.rs`): a keep-alive `crate::conn::Conn` and a `Session` | `http2::Own` (`scenario.rs`), through `vu::Conns` | `http3::Own` (`scenario.rs`), through `vu::Conns` | `http2::Own::call` through `vu::Conns::call`, from `crate::scenario::grpc`'s step | `crate::scenario::ws`'s step, on `ws`'s `Socket` and `ws::frame` | none | none |
//! | pre-run check | none | `http2::preflight` (`check.rs`) | `http3::preflight` (`check.rs`) | `http2`'s; `grpc::call` asks server reflection before `throng grpc` | none | none | none |
//!
//! The scenario VU connection role has a folder of its own, `vu/`: where
//! a scenario's VUs connect (`Dest`), a VU's multiplexed connections keyed
//! by protocol (`Conns`: `http2::Own` or `http3::Own`, opened, checked,
//! closed, a request or a gRPC call as a stream), a request's stream parts
//! and a redirect hop to another origin; the scenario runner calls it and
//! matches on no protocol.
//!
//! Shared by `http2` and `http3` and outside this folder: `crate::mux`
//! (several targets and redirects over a multiplexed connection).

pub(crate) mod conns;
pub(crate) mod driver;
pub(crate) mod events;
pub mod grpc;
pub mod http1;
pub(crate) mod http2;
pub(crate) mod http3;
pub(crate) mod line;
pub(crate) mod link;
pub(crate) mod mqtt;
pub(crate) mod opening;
pub(crate) mod session;
pub mod sse;
pub(crate) mod starts;
pub(crate) mod vu;
pub(crate) mod wire;
pub(crate) mod ws;

pub(crate) use conns::Conns;
pub(crate) use driver::{close_all, one_request, spawn_driver};
pub(crate) use session::Session;
pub(crate) use starts::Starts;
pub(crate) use wire::Wire;
