//! The lab server behind `throng serve` and `throng demo`.
//!
//! ```text
//!  LabServer::start ─► N threads, each: current-thread runtime + its own
//!                      SO_REUSEPORT listener on the same address
//!                        └─ one task per connection: parse (httparse) ─► route ─► respond
//! ```
//!
//! Endpoints: `GET /` (200, empty), `/bytes/N`, `/delay/MS`, `/status/CODE`,
//! `POST /echo`, and faults: `/reset` (TCP RST), `/close` (close without a
//! response), `/garbage` (a reply that is not HTTP). With a stall
//! configured, the server answers nothing during the last `stall_for` of
//! every `stall_every` period: every request that arrives then waits until
//! the window ends (the model behind the coordinated-omission demo).

mod http;
mod server;

pub use server::{LabConfig, LabServer, Stall};
