//! The protocol test matrix: the assertions every protocol must keep,
//! written once and run per protocol and transport, one `#[test]` per row
//! and assertion (`matrix::h2_tls::served`), as oha runs one test body per
//! HTTP version.
//!
//! Rows: HTTP/1.1, HTTP/2 (`h2_plain` is h2c with prior knowledge, `h2_tls`
//! ALPN h2) against nginx, plain, TLS and mTLS; HTTP/3 against aioquic;
//! gRPC against grpcio, plain and TLS; WebSocket storms against the
//! `websockets` server (wss through nginx); NATS storms against
//! nats-server, plain and TLS; MQTT storms against mosquitto, plain, TLS
//! and mTLS.
//!
//! Assertions:
//! - `served`: the server counted exactly what throng counted ok (nginx's
//!   access log, aioquic's and grpcio's counts, the WebSocket server's
//!   closes, nats-server's `/varz`, the client ids in mosquitto's log);
//! - `books`: every unit is accounted for, read from the result JSON
//!   (attempted = ok + Σ errors, for requests and for connections);
//! - `fault`: one fault per row ends every unit in that row's error class,
//!   with the books still balanced;
//! - `redaction`: a secret sent
//!   (a header, metadata, a password, URL credentials) reaches the server
//!   and never the result, the report, stdout or stderr.

#![allow(clippy::unwrap_used)]

use crate::common;
use crate::grpc::{GrpcServer, here};
use crate::mqtt::Mosquitto;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::time::Duration;

use common::{Aioquic, FaultServer, NatsServer, Nginx, Run, WsServer, assert_books_balance, p};

/// What the `redaction` rows send, and look for everywhere afterwards.
const SECRET: &str = "m4trix-s3cret-7f2c";

#[derive(Clone, Copy, Debug, PartialEq)]
enum Proto {
    Http1,
    H2,
    H3,
    Grpc,
    Ws,
    Nats,
    Mqtt,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Transport {
    Plain,
    Tls,
    Mtls,
}

/// One row of the matrix.
#[derive(Clone, Copy, Debug)]
struct Case {
    proto: Proto,
    transport: Transport,
}

impl Case {
    /// How many units (requests; connections for a storm) a run makes.
    fn n(self) -> u64 {
        match self.proto {
            Proto::Http1 | Proto::H2 | Proto::Grpc => 40,
            Proto::H3 | Proto::Ws => 20,
            Proto::Nats | Proto::Mqtt => 10,
        }
    }

    /// Storms count connections; the others, requests.
    fn counts_connections(self) -> bool {
        matches!(self.proto, Proto::Ws | Proto::Nats | Proto::Mqtt)
    }
}

/// What the server is set up for.
#[derive(Clone, Copy, PartialEq)]
enum Setup {
    /// Answer every unit.
    Good,
    /// Answer only what carries [`SECRET`] (where the server can check it).
    Secret,
    /// This row's fault.
    Fault,
}

/// The server of one test, and how to ask it what it served.
enum Server {
    Nginx {
        nginx: Nginx,
        log: PathBuf,
    },
    Aioquic(Aioquic),
    H3Lab {
        _lab: throng_lab::H3Server,
    },
    Grpc(GrpcServer),
    Ws {
        ws: WsServer,
        _front: Option<Nginx>,
    },
    /// `before`: the connections it counted before the run (the test's
    /// own wait for its port).
    Nats {
        _nats: NatsServer,
        monitor: u16,
        before: u64,
    },
    Mqtt(Mosquitto),
    Fault(FaultServer),
    /// Nothing listens on the port.
    Closed,
}

impl Server {
    /// The units the server counted (requests, or connections for a storm).
    fn served(self, expected: u64) -> u64 {
        match self {
            Server::Nginx { log, .. } => common::access_log(&log).len() as u64,
            Server::Aioquic(a) => a.stop()["requests"].as_u64().unwrap(),
            Server::Grpc(g) => g.calls(),
            Server::Ws { ws, .. } => ws.closes(expected as usize).len() as u64,
            Server::Nats { monitor, before, .. } => total_connections(monitor) - before,
            // Every connection its own client id: the ones the broker accepted.
            Server::Mqtt(mut broker) => crate::mqtt::client_ids(&broker.stop()).len() as u64,
            Server::H3Lab { .. } | Server::Fault(_) | Server::Closed => panic!("this server counts nothing"),
        }
    }
}

/// The connections nats-server accepted so far (its monitoring `/varz`).
fn total_connections(port: u16) -> u64 {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(b"GET /varz HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    let varz: serde_json::Value = serde_json::from_str(body).unwrap_or_else(|e| panic!("/varz: {e}: {text}"));
    varz["total_connections"].as_u64().unwrap()
}

/// The Basic credentials of user `matrix` with the password [`SECRET`].
fn basic() -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(format!("matrix:{SECRET}"))
}

/// A started server and the throng command line aimed at it.
struct Target {
    server: Server,
    command: &'static str,
    args: Vec<String>,
    /// Under [`Setup::Fault`]: the class every unit ends in, and how many
    /// (the rest end ok).
    fault: Option<(&'static str, u64)>,
    /// Under [`Setup::Fault`], where the row says what the fault leaves of
    /// the connections: a JSON pointer into the result's
    /// `measurements.connections` (`/ok`, `/errors/CLASS`) and its value.
    fault_connections: Option<(&'static str, u64)>,
    /// The certificates and the access log, removed when the test ends.
    _dirs: Vec<tempfile::TempDir>,
}

impl Target {
    fn run(&self) -> Run {
        let args: Vec<&str> = self.args.iter().map(String::as_str).collect();
        let run = common::command(self.command, &args);
        assert!(!run.stderr().contains("panicked"), "{}", run.stderr());
        run
    }
}

/// nginx's locations: `/` answers; `/secret` answers only a request with
/// the secret bearer token.
fn locations() -> String {
    format!(
        "location = / {{ return 200 \"matrix\"; }}\n\
         location = /secret {{ if ($http_authorization != \"Bearer {SECRET}\") {{ return 401; }} return 200; }}"
    )
}

/// Starts the server of `case` set up for `setup`, and the command line.
fn target(case: Case, setup: Setup) -> Target {
    let n = case.n().to_string();
    let needs_certs = case.transport != Transport::Plain || case.proto == Proto::H3;
    let certs = needs_certs.then(common::certs);
    let c = certs.as_ref().map(|(_, c)| c.clone()).unwrap_or_default();
    let mut tls_args = Vec::new();
    if case.transport != Transport::Plain {
        tls_args.extend(["--cacert".to_string(), p(&c, "ca.pem")]);
    }
    if case.transport == Transport::Mtls {
        tls_args.extend(["--cert", &p(&c, "client.pem"), "--key", &p(&c, "client.key")].map(String::from));
    }
    let mut fault = None;
    let mut fault_connections = None;
    let mut logs_dir = None;
    let (server, command, mut args) = match case.proto {
        Proto::Http1 | Proto::H2 => {
            let logs = tempfile::tempdir().unwrap();
            let log = logs.path().join("access.log");
            let access = format!("access_log {};", log.display());
            let h2 = case.proto == Proto::H2;
            let server = match (case.transport, setup) {
                (Transport::Plain, Setup::Fault) if h2 => Server::Fault(FaultServer::start("h2-rst-stream")),
                (Transport::Plain, Setup::Fault) => Server::Closed,
                (Transport::Plain, _) => {
                    let listen = if h2 { "http2" } else { "" };
                    Server::Nginx {
                        nginx: Nginx::start_listen(listen, &access, &locations()),
                        log,
                    }
                }
                (_, _) => {
                    let listen = if h2 { "ssl http2" } else { "ssl" };
                    let mtls = case.transport == Transport::Mtls;
                    Server::Nginx {
                        nginx: common::nginx_tls(&c, listen, mtls, &access, &locations()),
                        log,
                    }
                }
            };
            logs_dir = Some(logs);
            let path = if setup == Setup::Secret { "/secret" } else { "/" };
            let url = match &server {
                Server::Nginx { nginx, .. } if case.transport == Transport::Plain => nginx.url(path),
                Server::Nginx { nginx, .. } => nginx.https("localhost", path),
                Server::Fault(f) => f.url("http"),
                _ => format!("http://127.0.0.1:{}/", common::free_port()),
            };
            let mut args = vec![url];
            if h2 {
                args.push("--http2".into());
            }
            // The lab resets every second stream of its one connection.
            let lab = matches!(server, Server::Fault(_));
            let c = if lab { "1" } else { "2" };
            args.extend(["-n", &n, "-c", c, "-t", "1", "--timeout", "10s"].map(String::from));
            if setup == Setup::Fault {
                fault = Some(match (case.proto, case.transport) {
                    (Proto::H2, Transport::Plain) => {
                        args.extend(["--streams", "1"].map(String::from));
                        fault_connections = Some(("/ok", 1));
                        ("h2.rst_stream.internal_error", case.n() / 2)
                    }
                    (_, Transport::Plain) => {
                        fault_connections = Some(("/errors/refused", case.n()));
                        ("refused", case.n())
                    }
                    // No --cacert: the lab CA is not among the system's.
                    (_, Transport::Tls) => {
                        tls_args.clear();
                        fault_connections = Some(("/errors/tls.unknown_ca", case.n()));
                        ("tls.unknown_ca", case.n())
                    }
                    // No client certificate: nginx completes the handshake
                    // and answers 400, a status the plan does not expect.
                    (_, Transport::Mtls) => {
                        tls_args.truncate(2);
                        ("check_failed", case.n())
                    }
                });
            }
            if setup == Setup::Secret {
                args.extend(["-H".to_string(), format!("Authorization: Bearer {SECRET}")]);
            }
            (server, "http", args)
        }
        Proto::H3 => {
            let (d, _) = certs.as_ref().unwrap();
            tls_args = vec!["--cacert".to_string(), p(&c, "ca.pem")];
            let (server, url) = if setup == Setup::Fault {
                let lab = common::h3_lab(&c, Some(throng_lab::H3Fault::ResetStream));
                let url = format!("https://localhost:{}/", lab.addr().port());
                // A reset stream leaves its connection up.
                fault = Some(("h3.stream_reset.H3_REQUEST_REJECTED", case.n()));
                fault_connections = Some(("/attempted", 1));
                (Server::H3Lab { _lab: lab }, url)
            } else {
                let a = Aioquic::start(&c, d.path(), 0);
                let url = a.url("/");
                (Server::Aioquic(a), url)
            };
            let mut args = vec![url, "--http3".into()];
            let (c, streams) = if setup == Setup::Fault { ("1", "2") } else { ("2", "1") };
            args.extend(["-n", &n, "-c", c, "--streams", streams, "--timeout", "10s"].map(String::from));
            if setup == Setup::Secret {
                args.extend(["-H".to_string(), format!("Authorization: Bearer {SECRET}")]);
            }
            (server, "http", args)
        }
        Proto::Grpc => {
            let tls = case.transport != Transport::Plain;
            let server = GrpcServer::counting(tls.then_some(c.as_path()));
            let mut args = vec![
                server.addr.clone(),
                "--proto".into(),
                here("tester.proto").display().to_string(),
                "--call".into(),
                "throngtest.Tester/Call".into(),
            ];
            if !tls {
                args.push("--plaintext".into());
            }
            args.extend(["-n", &n, "--streams", "4", "-t", "1"].map(String::from));
            let data = match setup {
                Setup::Good => r#"{"name": "matrix"}"#,
                // The server answers FAILED_PRECONDITION without it.
                Setup::Secret => {
                    args.extend(["--metadata".to_string(), format!("authorization: Bearer {SECRET}")]);
                    r#"{"need_metadata": "authorization"}"#
                }
                Setup::Fault if tls => {
                    tls_args.clear();
                    fault = Some(("tls.unknown_ca", case.n()));
                    fault_connections = Some(("/ok", 0));
                    r#"{"name": "matrix"}"#
                }
                // UNAVAILABLE, which the plan does not expect.
                Setup::Fault => {
                    fault = Some(("check_failed", case.n()));
                    r#"{"code": 14}"#
                }
            };
            args.extend(["--data".to_string(), data.to_string()]);
            (Server::Grpc(server), "grpc", args)
        }
        Proto::Ws => {
            let mode = if setup == Setup::Fault && case.transport == Transport::Plain {
                fault = Some(("ws.upgrade_refused.403", case.n()));
                "refuse"
            } else {
                "echo"
            };
            // A password in the URL: the upgrade carries it as Basic
            // credentials (the server refuses any other upgrade with 401;
            // nginx passes the header on for wss), and shows it nowhere.
            let (ws, creds) = if setup == Setup::Secret {
                (
                    WsServer::requiring(mode, &format!("Basic {}", basic())),
                    format!("matrix:{SECRET}@"),
                )
            } else {
                (WsServer::start(mode), String::new())
            };
            let (front, url) = if case.transport == Transport::Plain {
                (None, format!("ws://{creds}127.0.0.1:{}/", ws.port))
            } else {
                // wss:// through nginx proxying WebSocket to the server;
                // any other path is nginx's own 404.
                let nginx = common::nginx_wss(&c, ws.port);
                let path = if setup == Setup::Fault {
                    fault = Some(("ws.upgrade_refused.404", case.n()));
                    "/other"
                } else {
                    "/ws"
                };
                let url = format!("wss://{creds}localhost:{}{path}", nginx.port);
                (Some(nginx), url)
            };
            let mut args = vec![url];
            args.extend(["-n", &n, "-c", "10", "--timeout", "10s"].map(String::from));
            args.extend(["--send", "hello", "--expect", "^hello$"].map(String::from));
            (Server::Ws { ws, _front: front }, "storm", args)
        }
        Proto::Nats => {
            let monitor = common::free_port();
            let mut conf = format!("http: 127.0.0.1:{monitor}\n");
            if case.transport == Transport::Tls {
                conf += &format!(
                    "tls {{ cert_file: \"{}\", key_file: \"{}\" }}\n",
                    p(&c, "server.pem"),
                    p(&c, "server.key")
                );
            }
            let password = match setup {
                Setup::Good => None,
                Setup::Secret => Some(SECRET),
                // The server knows another password.
                Setup::Fault if case.transport == Transport::Plain => {
                    fault = Some(("auth_failed", case.n()));
                    Some("another-one")
                }
                Setup::Fault => {
                    tls_args.clear();
                    fault = Some(("tls.unknown_ca", case.n()));
                    None
                }
            };
            if let Some(pw) = password {
                let hash = bcrypt::hash(pw, 4).unwrap();
                conf +=
                    &format!("authorization {{ timeout: 30, users = [ {{ user: throng, password: \"{hash}\" }} ] }}\n");
            }
            let nats = NatsServer::start(&conf);
            common::wait_listening(([127, 0, 0, 1], monitor).into());
            // NatsServer::start's one connection to see it listen shows in
            // /varz a moment after: wait for it (at most 10 s).
            let deadline = std::time::Instant::now() + Duration::from_secs(10);
            let mut before = total_connections(monitor);
            while before == 0 && std::time::Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
                before = total_connections(monitor);
            }
            assert_eq!(before, 1, "nats-server counted the test's wait for its port");
            let creds = if password.is_some() {
                format!("throng:{SECRET}@")
            } else {
                String::new()
            };
            let mut args = vec![format!("nats://{creds}localhost:{}", nats.port)];
            args.extend(["-n", &n, "-c", "5", "--timeout", "30s"].map(String::from));
            (
                Server::Nats {
                    _nats: nats,
                    monitor,
                    before,
                },
                "storm",
                args,
            )
        }
        Proto::Mqtt => {
            let dir = tempfile::tempdir().unwrap();
            let mut conf = String::new();
            if case.transport != Transport::Plain {
                conf += &format!(
                    "cafile {}\ncertfile {}\nkeyfile {}\n",
                    p(&c, "ca.pem"),
                    p(&c, "server.pem"),
                    p(&c, "server.key")
                );
            }
            if case.transport == Transport::Mtls {
                conf += "require_certificate true\n";
            }
            let password = match setup {
                Setup::Good => None,
                Setup::Secret => Some(SECRET),
                // The broker knows another password: mosquitto says "not authorized".
                Setup::Fault if case.transport == Transport::Plain => {
                    fault = Some(("mqtt.connack.not_authorized", case.n()));
                    Some("another-one")
                }
                // No --cacert: the lab CA is not among the system's.
                Setup::Fault if case.transport == Transport::Tls => {
                    tls_args.clear();
                    fault = Some(("tls.unknown_ca", case.n()));
                    None
                }
                // No client certificate: mosquitto refuses the handshake.
                Setup::Fault => {
                    tls_args.truncate(2);
                    fault = Some(("tls.certificate_required", case.n()));
                    None
                }
            };
            if let Some(pw) = password {
                let file = Mosquitto::password_file(dir.path(), "throng", pw);
                conf += &format!("allow_anonymous false\npassword_file {}\n", file.display());
            }
            let broker = Mosquitto::start(&conf);
            let creds = if password.is_some() {
                format!("throng:{SECRET}@")
            } else {
                String::new()
            };
            let scheme = if case.transport == Transport::Plain {
                "mqtt"
            } else {
                "mqtts"
            };
            let mut args = vec![format!("{scheme}://{creds}localhost:{}", broker.port)];
            args.extend(["-n", &n, "-c", "5", "--timeout", "30s", "--hold", "200ms"].map(String::from));
            logs_dir = Some(dir);
            (Server::Mqtt(broker), "storm", args)
        }
    };
    args.extend(tls_args);
    Target {
        server,
        command,
        args,
        fault,
        fault_connections,
        _dirs: [certs.map(|(d, _)| d), logs_dir].into_iter().flatten().collect(),
    }
}

/// The outcomes of the unit `case` counts, from the result JSON.
fn outcomes(case: Case, json: &serde_json::Value) -> &serde_json::Value {
    let unit = if case.counts_connections() {
        "connections"
    } else {
        "requests"
    };
    &json["measurements"][unit]
}

/// ok, attempted and the sum of the error counts of one `outcomes` object.
fn tally(o: &serde_json::Value) -> (u64, u64, u64) {
    let errors = o["errors"]
        .as_object()
        .map_or(0, |e| e.values().map(|v| v.as_u64().unwrap()).sum());
    (o["ok"].as_u64().unwrap(), o["attempted"].as_u64().unwrap(), errors)
}

fn json(run: &Run) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(&run.json).unwrap()).unwrap()
}

/// The server counted exactly what throng counted ok, and that is every unit.
fn served(case: Case) {
    let t = target(case, Setup::Good);
    let run = t.run();
    assert_eq!(run.code(), 0, "{case:?}: {}", run.stderr());
    let (ok, attempted, _) = tally(outcomes(case, &json(&run)));
    assert_eq!((ok, attempted), (case.n(), case.n()), "{case:?}");
    assert_eq!(t.server.served(case.n()), ok, "{case:?}: the server's count");
}

/// attempted = ok + Σ errors for requests and connections, read from the
/// result JSON, and every unit of the plan attempted.
fn books(case: Case) {
    let t = target(case, Setup::Good);
    let run = t.run();
    assert_eq!(run.code(), 0, "{case:?}: {}", run.stderr());
    let doc = json(&run);
    for unit in ["requests", "connections"] {
        let (ok, attempted, errors) = tally(&doc["measurements"][unit]);
        assert_eq!(attempted, ok + errors, "{case:?} {unit}: {}", doc["measurements"][unit]);
    }
    let (_, attempted, _) = tally(outcomes(case, &doc));
    assert_eq!(attempted, case.n(), "{case:?}");
    assert_books_balance(run.result());
}

/// The row's fault ends its units in the row's class, the rest ok, and the
/// books balance.
fn fault(case: Case) {
    let t = target(case, Setup::Fault);
    let (class, failed) = t.fault.unwrap();
    let run = t.run();
    let doc = json(&run);
    let o = outcomes(case, &doc);
    let (ok, attempted, errors) = tally(o);
    assert_eq!(o["errors"][class].as_u64(), Some(failed), "{case:?}: {o}");
    assert_eq!((errors, ok), (failed, case.n() - failed), "{case:?}: only {class}: {o}");
    assert_eq!(attempted, ok + errors, "{case:?}: {o}");
    assert_books_balance(run.result());
    if let Some((pointer, want)) = t.fault_connections {
        let connections = &doc["measurements"]["connections"];
        assert_eq!(
            connections.pointer(pointer).and_then(|v| v.as_u64()),
            Some(want),
            "{case:?}: connections{pointer}: {connections}"
        );
    }
    let code = if ok == 0 { 1 } else { 0 };
    assert_eq!(run.code(), code, "{case:?}: {}", run.stderr());
}

/// The secret reaches the server (which answers nothing without it, where
/// it can tell) and no output.
fn redaction(case: Case) {
    let t = target(case, Setup::Secret);
    let run = t.run();
    assert_eq!(run.code(), 0, "{case:?}: {}", run.stderr());
    let (ok, _, _) = tally(outcomes(case, &json(&run)));
    assert_eq!(ok, case.n(), "{case:?}: every unit carried the secret");
    let report = common::output(common::throng().arg("report").arg(&run.json));
    assert_eq!(report.status.code(), Some(0), "{case:?}");
    // Nor in the form it went out in (Basic credentials).
    for (what, text) in [
        ("the result", std::fs::read_to_string(&run.json).unwrap()),
        ("stdout", run.stdout()),
        ("stderr", run.stderr()),
        ("the report", String::from_utf8_lossy(&report.stdout).into_owned()),
    ] {
        assert!(
            !text.contains(SECRET) && !text.contains(&basic()),
            "{case:?}: {what} holds the secret: {text}"
        );
    }
}

/// One module per row, one test per assertion: `matrix::ROW::ASSERTION`.
macro_rules! rows {
    ($($row:ident: $proto:ident $transport:ident;)*) => {$(
        mod $row {
            use super::{Case, Proto, Transport};
            const CASE: Case = Case { proto: Proto::$proto, transport: Transport::$transport };
            #[test]
            fn served() {
                super::served(CASE);
            }
            #[test]
            fn books() {
                super::books(CASE);
            }
            #[test]
            fn fault() {
                super::fault(CASE);
            }
            #[test]
            fn redaction() {
                super::redaction(CASE);
            }
        }
    )*};
}

rows! {
    http1_plain: Http1 Plain;
    http1_tls: Http1 Tls;
    http1_mtls: Http1 Mtls;
    h2_plain: H2 Plain;
    h2_tls: H2 Tls;
    h2_mtls: H2 Mtls;
    h3_tls: H3 Tls;
    grpc_plain: Grpc Plain;
    grpc_tls: Grpc Tls;
    ws_plain: Ws Plain;
    ws_tls: Ws Tls;
    nats_plain: Nats Plain;
    nats_tls: Nats Tls;
    mqtt_plain: Mqtt Plain;
    mqtt_tls: Mqtt Tls;
    mqtt_mtls: Mqtt Mtls;
}
