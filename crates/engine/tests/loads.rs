//! The engine's loads run in this process against the lab server on
//! loopback, over plain TCP, TLS and mTLS: closed and open HTTP loops and a
//! storm. Each run's books must balance (attempted = ok + Σ errors), with
//! the counts the plan asked for, the requests each connection carried,
//! and every response timed by exactly one clock.

use std::sync::Arc;
use std::time::Duration;

use throng_engine::{Control, Progress, StormPart, run_http, run_storm};
use throng_lab::{LabConfig, LabServer};
use throng_plan::{HttpArgs, HttpPlan, StormArgs, StormPlan, TlsSettings};
use throng_result::RunResult;
use throng_tls::rustls::ClientConfig;
use throng_tls::{CertKind, ClientOptions, Validity};

/// How the client reaches the server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Wire {
    Plain,
    Tls,
    Mtls,
}

const WIRES: [Wire; 3] = [Wire::Plain, Wire::Tls, Wire::Mtls];

/// A lab server speaking `wire`, and the client side to match.
struct Lab {
    server: LabServer,
    wire: Wire,
    client: Option<Arc<ClientConfig>>,
}

impl Lab {
    fn start(wire: Wire) -> Lab {
        let generated = throng_tls::generate(CertKind::Ecdsa, &["127.0.0.1".to_string()], Validity::Current)
            .expect("lab certificates");
        let file = |name: &str| -> (String, Vec<u8>) {
            let (_, pem, _) = generated
                .files
                .iter()
                .find(|(n, _, _)| *n == name)
                .unwrap_or_else(|| panic!("no {name} among the lab certificates"));
            (name.to_string(), pem.clone().into_bytes())
        };
        let (tls, client) = match wire {
            Wire::Plain => (None, None),
            Wire::Tls | Wire::Mtls => {
                let mtls = wire == Wire::Mtls;
                let ca = file("ca.pem");
                let server = throng_tls::server_config(&file("server.pem"), &file("server.key"), mtls.then_some(&ca))
                    .expect("server TLS configuration");
                let client = throng_tls::client_config(&ClientOptions {
                    cacert: Some(ca.clone()),
                    cert: mtls.then(|| file("client.pem")),
                    key: mtls.then(|| file("client.key")),
                    ..ClientOptions::default()
                })
                .expect("client TLS configuration");
                (Some(server), Some(client))
            }
        };
        let server = LabServer::start(&LabConfig {
            listen: "127.0.0.1:0".parse().expect("an address"),
            threads: 1,
            stall: None,
            tls,
        })
        .expect("lab server");
        Lab { server, wire, client }
    }

    fn url(&self, scheme_plain: &str, scheme_tls: &str, path: &str) -> String {
        let scheme = if self.wire == Wire::Plain {
            scheme_plain
        } else {
            scheme_tls
        };
        format!("{scheme}://{}{path}", self.server.addr())
    }

    fn tls_settings(&self) -> TlsSettings {
        TlsSettings {
            cacert: (self.wire != Wire::Plain).then(|| "ca.pem".to_string()),
            cert: (self.wire == Wire::Mtls).then(|| "client.pem".to_string()),
            key: (self.wire == Wire::Mtls).then(|| "client.key".to_string()),
            ..TlsSettings::default()
        }
    }

    fn http(&self, args: HttpArgs) -> RunResult {
        let plan = HttpPlan::from_args(HttpArgs {
            url: self.url("http", "https", "/"),
            tls: self.tls_settings(),
            cores: 2,
            ..args
        })
        .expect("a valid plan");
        run_http(
            &plan,
            self.client.clone(),
            None,
            &Control::new(),
            &mut |_: &Progress| {},
        )
        .expect("the run")
    }

    fn storm(&self, args: StormArgs) -> RunResult {
        let plan = StormPlan::from_args(StormArgs {
            target: self.url("http", "https", "/"),
            tls: self.tls_settings(),
            cores: 2,
            ..args
        })
        .expect("a valid plan");
        let part = StormPart {
            index: 0,
            count: 1,
            start_at_unix_ms: None,
        };
        run_storm(
            &plan,
            part,
            self.client.clone(),
            None,
            &Control::new(),
            &mut |_: &Progress| {},
        )
        .expect("the run")
    }
}

/// The books balance for requests and connections, and every response was
/// timed by exactly one clock (the kernel's stamp for nearly all).
fn check_books(r: &RunResult, wire: Wire) {
    let m = &r.measurements;
    assert!(m.requests.is_balanced(), "{wire:?}: requests {:?}", m.requests);
    assert!(m.connections.is_balanced(), "{wire:?}: connections {:?}", m.connections);
    let t = r.generator.timestamps.as_ref().expect("the clocks are reported");
    // Every response, expected or not (status classes count them all).
    let responses: u64 = m.status.values().sum();
    assert_eq!(
        t.kernel + t.user,
        responses,
        "{wire:?}: every response timed once: {t:?}"
    );
    if t.receive == "kernel" {
        assert!(
            t.kernel * 10 >= responses * 9,
            "{wire:?}: kernel stamps for nearly all: {t:?}"
        );
    }
    match wire {
        Wire::Plain => assert!(m.tls.is_none(), "{wire:?}: {:?}", m.tls),
        Wire::Tls | Wire::Mtls => {
            let tls = m.tls.as_ref().expect("TLS counts");
            assert_eq!(
                tls.handshakes, m.connections.ok,
                "{wire:?}: one handshake per connection"
            );
        }
    }
}

#[test]
fn closed_loop_keeps_connections_alive() {
    for wire in WIRES {
        let lab = Lab::start(wire);
        let r = lab.http(HttpArgs {
            connections: Some(4),
            requests: Some(400),
            threads: Some(2),
            ..HttpArgs::default()
        });
        let m = &r.measurements;
        check_books(&r, wire);
        assert_eq!(
            (m.requests.attempted, m.requests.ok),
            (400, 400),
            "{wire:?}: {:?}",
            m.requests
        );
        assert_eq!(m.status.get(&200), Some(&400), "{wire:?}");
        // Keep-alive: four connections carried the 400 requests, 100 each.
        assert_eq!(
            (m.connections.attempted, m.connections.ok),
            (4, 4),
            "{wire:?}: {:?}",
            m.connections
        );
        assert_eq!(m.phases.get("connect").map(|h| h.count()), Some(4), "{wire:?}");
        assert_eq!(m.phases.get("response").map(|h| h.count()), Some(400), "{wire:?}");
        assert_eq!(m.dropped, 0);
    }
}

#[test]
fn closed_loop_without_keepalive_opens_a_connection_per_request() {
    for wire in WIRES {
        let lab = Lab::start(wire);
        let r = lab.http(HttpArgs {
            connections: Some(2),
            requests: Some(60),
            threads: Some(1),
            no_keepalive: true,
            ..HttpArgs::default()
        });
        let m = &r.measurements;
        check_books(&r, wire);
        assert_eq!(
            (m.requests.attempted, m.requests.ok),
            (60, 60),
            "{wire:?}: {:?}",
            m.requests
        );
        assert_eq!(
            (m.connections.attempted, m.connections.ok),
            (60, 60),
            "{wire:?}: {:?}",
            m.connections
        );
    }
}

#[test]
fn closed_loop_counts_server_faults_in_the_books() {
    // /status/503 answers, but not with an expected status: every request
    // is attempted and ends as check_failed, and the books still balance.
    for wire in WIRES {
        let lab = Lab::start(wire);
        let plan = HttpPlan::from_args(HttpArgs {
            url: lab.url("http", "https", "/status/503"),
            tls: lab.tls_settings(),
            cores: 2,
            connections: Some(2),
            requests: Some(50),
            threads: Some(1),
            ..HttpArgs::default()
        })
        .expect("a valid plan");
        let r = run_http(&plan, lab.client.clone(), None, &Control::new(), &mut |_: &Progress| {}).expect("the run");
        let m = &r.measurements;
        check_books(&r, wire);
        assert_eq!(m.requests.attempted, 50, "{wire:?}");
        assert_eq!(m.requests.error("check_failed"), 50, "{wire:?}: {:?}", m.requests);
        assert_eq!(m.status.get(&503), Some(&50), "{wire:?}");
    }
}

#[test]
fn open_loop_sends_every_arrival_or_counts_it_dropped() {
    for wire in WIRES {
        let lab = Lab::start(wire);
        // 400 arrivals at 400/s over one second.
        let r = lab.http(HttpArgs {
            connections: Some(16),
            rate: Some(400.0),
            duration: Some(Duration::from_secs(1)),
            threads: Some(2),
            ..HttpArgs::default()
        });
        let m = &r.measurements;
        check_books(&r, wire);
        assert!(r.coordinated_omission_free, "{wire:?}");
        assert_eq!(
            m.requests.attempted + m.dropped,
            400,
            "{wire:?}: {:?}, dropped {}",
            m.requests,
            m.dropped
        );
        assert_eq!(m.requests.ok, m.requests.attempted, "{wire:?}: {:?}", m.requests);
        assert!(
            m.requests.ok >= 200,
            "{wire:?}: most arrivals were sent: {:?}",
            m.requests
        );
        // Connections are reused: at most the cap were opened.
        assert!(
            (1..=16).contains(&m.connections.attempted),
            "{wire:?}: {:?}",
            m.connections
        );
        // Every arrival a connection took has its lateness recorded.
        let lags = m.phases.get("schedule_lag").map_or(0, |h| h.count());
        assert!(
            (m.requests.attempted..=m.requests.attempted + m.dropped).contains(&lags),
            "{wire:?}: {lags} schedule_lag samples for {:?}, dropped {}",
            m.requests,
            m.dropped
        );
    }
}

#[test]
fn storm_makes_one_request_per_connection() {
    for wire in WIRES {
        let lab = Lab::start(wire);
        let r = lab.storm(StormArgs {
            connections: Some(120),
            max_concurrent: Some(40),
            workers: Some(2),
            ..StormArgs::default()
        });
        let m = &r.measurements;
        check_books(&r, wire);
        assert_eq!(
            (m.connections.attempted, m.connections.ok),
            (120, 120),
            "{wire:?}: {:?}",
            m.connections
        );
        assert_eq!(
            (m.requests.attempted, m.requests.ok),
            (120, 120),
            "{wire:?}: {:?}",
            m.requests
        );
        assert_eq!(m.status.get(&200), Some(&120), "{wire:?}");
        assert!(
            m.peak_concurrent_connections <= 40,
            "{wire:?}: {}",
            m.peak_concurrent_connections
        );
    }
}

#[test]
fn storm_without_a_request_only_connects() {
    for wire in WIRES {
        let lab = Lab::start(wire);
        let r = lab.storm(StormArgs {
            connections: Some(80),
            workers: Some(2),
            request: Some("none".to_string()),
            ..StormArgs::default()
        });
        let m = &r.measurements;
        assert!(m.connections.is_balanced(), "{wire:?}: {:?}", m.connections);
        assert_eq!(
            (m.connections.attempted, m.connections.ok),
            (80, 80),
            "{wire:?}: {:?}",
            m.connections
        );
        assert!(m.requests.is_empty(), "{wire:?}: {:?}", m.requests);
        if wire != Wire::Plain {
            assert_eq!(m.tls.as_ref().map(|t| t.handshakes), Some(80), "{wire:?}");
        }
    }
}
