//! A coordinator whose connection to an agent breaks mid-run connects again
//! and the run goes on: exact counts, nothing lost or counted twice.

#![allow(clippy::unwrap_used)]

use crate::common;
use crate::coordinate::Agent;

use std::net::{TcpListener, TcpStream};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{assert_books_balance, throng};
use throng_result::RunResult;

/// A TCP proxy to `to` whose connections [`Proxy::cut`] breaks (new ones
/// are still made).
struct Proxy {
    addr: String,
    open: Arc<Mutex<Vec<TcpStream>>>,
}

impl Proxy {
    fn start(to: String) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let open: Arc<Mutex<Vec<TcpStream>>> = Arc::default();
        let kept = Arc::clone(&open);
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { return };
                let Ok(server) = TcpStream::connect(&to) else { continue };
                kept.lock()
                    .unwrap()
                    .extend([client.try_clone().unwrap(), server.try_clone().unwrap()]);
                for (mut from, mut into) in [
                    (client.try_clone().unwrap(), server.try_clone().unwrap()),
                    (server, client),
                ] {
                    std::thread::spawn(move || {
                        let _ = std::io::copy(&mut from, &mut into);
                        let _ = into.shutdown(std::net::Shutdown::Both);
                    });
                }
            }
        });
        Proxy { addr, open }
    }

    fn cut(&self) {
        for s in self.open.lock().unwrap().drain(..) {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
    }
}

#[test]
fn a_broken_agent_connection_is_made_again_and_every_request_counted_once() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("access.log");
    let server = common::Nginx::start(&format!(
        "location / {{ access_log {}; return 200 \"ok\\n\"; }}",
        log.display()
    ));
    let (a, b) = (Agent::start_with(&[]), Agent::start_with(&[]));
    let proxy = Proxy::start(b.addr.clone());
    let json = dir.path().join("all.json");
    let mut run = throng()
        .args([
            "coordinate",
            "--agents",
            &format!("{},{}", a.addr, proxy.addr),
            "--json",
        ])
        .arg(&json)
        .args(["--", "http", &server.url("/"), "-r", "100", "-d", "10s", "-c", "2"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + common::RUN_LIMIT;
    while common::access_log(&log).len() < 150 {
        assert!(Instant::now() < deadline, "no requests arrived");
        std::thread::sleep(Duration::from_millis(50));
    }
    proxy.cut();
    let mut stderr = String::new();
    std::io::Read::read_to_string(run.stderr.as_mut().unwrap(), &mut stderr).unwrap();
    let code = run.wait().unwrap().code();
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stderr.contains(&format!("agent {}: reconnected; its run goes on", proxy.addr)),
        "{stderr}"
    );
    let r = RunResult::from_reader(std::fs::File::open(&json).unwrap()).unwrap();
    assert_books_balance(&r);
    // Every request nginx answered is in the result once: none lost with
    // the connection, none counted twice after it was made again.
    let ok = r.measurements.requests.ok;
    assert_eq!(r.measurements.requests.attempted, ok, "{:?}", r.notes);
    assert_eq!(common::access_log(&log).len() as u64, ok, "nginx's count");
    assert!(ok > 150, "{ok}: the run went on after the cut");
    assert_eq!(r.parts.len(), 2);
    let again = format!("agent {}: clock offset", proxy.addr);
    assert!(
        r.notes
            .iter()
            .any(|n| n.starts_with(&again) && n.ends_with("was made again 1 time(s)")),
        "{:?}",
        r.notes
    );
}
