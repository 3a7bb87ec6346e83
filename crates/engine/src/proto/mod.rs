//! The protocols the engine speaks, one module or folder each: `http1`,
//! `http2`, `http3`, `grpc` (over HTTP/2), `ws` (WebSocket) and `line`
//! (NATS and the line protocols: Redis, SMTP, memcached, custom steps).
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
//! Which module provides which today (the loops, `crate::exchange`,
//! `crate::storm` and `crate::scenario`, still name the protocols where
//! they call these; bringing those calls here is the next step):
//!
//! | role | `http1` | `http2` | `http3` | `grpc` | `ws` | `line` |
//! |---|---|---|---|---|---|---|
//! | plan spec | none: the plan's rendered request (`crate::load::WorkerSpec`) | `http2::Spec` (`from_plan`, `for_storm`; `mod.rs`) | `http3::H3Spec` (`new`, `for_storm`; `mod.rs`) | `http2::Spec` with `grpc` set (from `plan.grpc`) | `ws::Spec`, inside `line::ProtocolSpec::WebSocket` | `line::ProtocolSpec` (`Nats`, `Lines`); both built by `protocol_spec` in `lib.rs` |
//! | request driver | `http1::exchange` (`io.rs`), through `crate::exchange::Session::Http1` | `http2::one_request` on the worker's `http2::Pool` (`pool.rs`), through `Session::Http2` | `http3::connection_slot` (`slot.rs`), fed by `http3::Starts` (the closed loop's budget, the open loop's schedule) | `http2`'s, with `http2/grpc.rs` (status, deadline, messages) and `grpc::frame` (the reply judged) | none | none |
//! | storm connection | `crate::storm`: `conn` and one `Session` exchange | `http2::storm_establish`, `http2::Held` (`storm.rs`) | `http3::storm_establish`, `http3::Held` (`storm.rs`) | none | `ws::handshake` (through `line::handshake` while the connection opens), `ws::hold`, `ws::close` | `line::handshake` (while the connection opens), `line::answer_pings` (held) |
//! | scenario VU connection | `crate::scenario` (`request.rs`): a keep-alive `crate::conn::Conn` and a `Session` | `http2::Own` (`scenario.rs`), through `vu::Conns` | `http3::Own` (`scenario.rs`), through `vu::Conns` | `http2::Own::call` through `vu::Conns::call`, from `crate::scenario::grpc`'s step | `crate::scenario::ws`'s step, on `ws`'s `Socket` and `ws::frame` | none |
//! | pre-run check | none | `http2::preflight` (`check.rs`) | `http3::preflight` (`check.rs`) | `http2`'s; `grpc::call` asks server reflection before `throng grpc` | none | none |
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

pub mod grpc;
pub mod http1;
pub(crate) mod http2;
pub(crate) mod http3;
pub(crate) mod line;
pub(crate) mod vu;
pub(crate) mod ws;
