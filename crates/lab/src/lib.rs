//! The lab server behind `throng serve` and `throng demo`.
//!
//! ```text
//!  LabServer::start ─► N threads, each: current-thread runtime + its own
//!                      SO_REUSEPORT listener on the same address
//!                        └─ one task per connection: parse (httparse) ─► route ─► respond
//!                                                                   │
//!                      /auth/*: auth::Service (one store for all threads) ◄─┘
//!                               └─ bcrypt on a pool of hashing threads
//! ```
//!
//! Endpoints: `GET /` (200, empty), `/bytes/N`, `/delay/MS`, `/status/CODE`,
//! `POST /echo`, `GET /ws` (a WebSocket echo: text and binary frames back
//! as they came, pings answered, closes returned), `GET /sse` (an event
//! stream: `events`, `first`, `interval`, `size`, and the faults `stall`,
//! `end=abrupt`, `big`, `endless`), `POST /v1/chat/completions` (an
//! OpenAI-compatible chat completion, streamed as `data:` chunks and
//! `[DONE]` when the body says `"stream": true`; `tokens`, `first`,
//! `interval`, `usage` in the query), and faults: `/reset`
//! (TCP RST), `/close` (close without a response), `/garbage` (a reply that
//! is not HTTP). With a stall
//! configured, the server answers nothing during the last `stall_for` of
//! every `stall_every` period: every request that arrives then waits until
//! the window ends (the model behind the coordinated-omission demo).
//!
//! [`LabServer::start_fault`] makes a hostile server instead: every
//! connection gets one [`Fault`] (stalls, trickles, endless heads and bodies,
//! garbage, RST and FIN at each point, TLS alerts, broken NATS greetings,
//! MQTT brokers that misbehave), or `mqtt-broker`, a minimal MQTT broker.
//!
//! [`H3Server`] serves HTTP/3 over QUIC (quinn + h3) on one thread: `GET /`,
//! `/bytes/N`, `GET /sse` and `POST /v1/chat/completions` (the same event
//! streams as over HTTP/1.1), or one [`H3Fault`] per connection (stream reset,
//! connection close with a code, silence, no handshake, one stream).
//!
//! Auth, in memory, JSON in and out (see [`AuthConfig`]):
//! `POST /auth/register` `{"email","password"}` (bcrypt at the configured
//! cost; a random 6-digit code, returned as `"otp"` only with
//! [`AuthConfig::reveal_otp`]), `POST /auth/verify-otp` `{"email","otp"}`,
//! `POST /auth/login` `{"email","password"}` (tokens once verified),
//! `POST /auth/refresh` `{"refresh_token"}`, and `GET /auth/me` with
//! `Authorization: Bearer ACCESS`. Errors are `{"error":"CODE","detail":"..."}`
//! with codes `BAD_REQUEST` (400), `INVALID_CREDENTIALS`,
//! `VERIFICATION_PENDING`, `INVALID_OTP`, `INVALID_TOKEN`, `MISSING_TOKEN`
//! (401), `NOT_FOUND` (404), `METHOD_NOT_ALLOWED` (405), `USER_EXISTS` (409),
//! `INTERNAL` (500), `STORE_FULL` and `BUSY` (503).

mod auth;
mod fault;
mod h2fault;
mod h2sse;
mod h3sse;
mod http;
mod http3;
mod server;
mod sse;
mod stream;
mod ws;

pub use auth::{AuthConfig, AuthConfigError, BcryptCost};
pub use fault::{Fault, FaultKind, HOLD_LIMIT, SESSION_LIMIT, UnknownFault};
pub use h2fault::{GOAWAY_AFTER, HUGE_HEADERS, LONG_BODY, SHORT_BODY, TINY_WINDOW_BODY};
pub use http3::{H3Fault, H3Server, UnknownH3Fault};
pub use server::{LabConfig, LabServer, Stall};
