//! The throng binary's integration tests: one test binary, one module per
//! topic, all against real servers on loopback (nginx, nats-server, redis,
//! the lab server). One binary links once instead of once per topic
//! (issue 12); `cargo test -p throng --test cli` runs it, and a filter picks
//! a module or a test: `cargo test -p throng --test cli storm::`.
//!
//! # Adding a test module
//!
//! 1. Put the tests in `crates/cli/tests/cli/NAME.rs` (not in
//!    `crates/cli/tests/`, which would make a binary of its own).
//! 2. Open it with its `//!` summary, then `use crate::common;` where a
//!    separate test file would have had `mod common;` (the rest, e.g.
//!    `use common::{lab, throng};` and `common::output(...)`, reads the same).
//! 3. Add `mod NAME;` to the list below, in alphabetical order.
//!
//! A file written as its own test binary (`tests/NAME.rs` with `mod common;`)
//! becomes a module with `git mv crates/cli/tests/NAME.rs
//! crates/cli/tests/cli/NAME.rs`, step 2 (`mod common;` → `use
//! crate::common;`) and step 3.
//!
//! A new protocol or transport first gets a row in `matrix.rs`, which
//! asserts what every protocol must keep (server-side counts, balanced
//! books, a fault's class, redaction); its own module holds only what is
//! particular to it.
//!
//! # Tests that must run alone
//!
//! Every module's tests now run in one process, two at a time (one per core)
//! whatever module they come from. A test that must not overlap with other
//! throng runs takes [`common::heavy`] first:
//!
//! ```ignore
//! let _alone = common::heavy();
//! ```
//!
//! Take it when a test holds thousands of connections or descriptors
//! (storms past the descriptor limit), makes network namespaces or nftables
//! rules, binds a fixed port, builds a release binary, or asserts figures
//! that need a quiet machine (latency quantiles against a model, kernel
//! timestamps, CPU-bound handshakes). While it is held, no other test runs
//! throng through [`common::output`] (which nearly every test uses), and
//! no other heavy test starts.

mod common;

mod blame;
mod bounds;
mod ci;
mod compare;
mod cookies;
mod coordinate;
mod coordinate_abort;
mod coordinate_hostile;
mod coordinate_prepare;
mod coordinate_push;
mod coordinate_reconnect;
mod coordinate_restart;
mod coordinate_tls;
mod coordinated_omission;
mod data_secret;
mod early_stop;
mod errors;
mod examples;
mod exit_codes;
mod export;
mod faults;
mod gate;
mod grpc;
mod grpc_client_stream;
mod grpc_compress;
mod grpc_faults;
mod grpc_reflect;
mod grpc_stream;
mod guide;
mod h2_check;
mod history;
mod hostile_results;
mod html;
mod http2;
mod http2_scale;
mod http3;
mod http_nginx;
mod image;
mod import;
mod inputs;
mod k6;
mod k8s_run;
mod leaks;
mod matrix;
mod memory;
mod million;
mod mqtt;
mod mqtt_faults;
mod mqtt_interop;
mod mqtt_pubsub;
mod mux_targets;
mod nats;
mod nats_clients;
mod otlp;
mod package;
mod process_hygiene;
mod prometheus;
mod proxy;
mod push_receiver;
mod reach;
mod redirects;
mod remote_write;
mod results;
mod rumqttd;
mod run_target;
mod scenario;
mod scenario_grpc;
mod scenario_js;
mod scenario_logic;
mod scenario_mqtt;
mod scenario_mux;
mod scenario_once;
mod scenario_proto;
mod scenario_redirect_mux;
mod scenario_sse;
mod scenario_sse_h3;
mod scenario_ws;
mod segments;
mod send_secret;
mod shell;
mod sse;
mod sse_h2;
mod sse_h3;
mod stdin_read;
mod storm;
mod storm_held;
mod storm_http2;
mod storm_uring;
mod storm_uring_tls;
mod structure;
mod sweep;
mod targets;
mod timestamps;
mod tls;
mod tls_trust;
mod trace_context;
mod typescript;
mod uring;
mod uring_tls;
mod verdicts;
mod websocket;
mod wire;
