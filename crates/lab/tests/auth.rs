//! The auth endpoints over real TCP connections to a lab server on loopback.

#![allow(clippy::unwrap_used)]

use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::num::NonZeroUsize;
use std::time::Duration;

use serde_json::{Value, json};
use throng_lab::{AuthConfig, BcryptCost, LabConfig, LabServer};

fn server(threads: usize, cost: u32, hash_threads: usize) -> LabServer {
    let mut auth = AuthConfig::default();
    auth.cost = BcryptCost::new(cost).unwrap();
    auth.reveal_otp = true;
    auth.hash_threads = NonZeroUsize::new(hash_threads).unwrap();
    let config = LabConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        threads,
        stall: None,
        tls: None,
    };
    LabServer::start_with_auth(&config, &auth).unwrap()
}

/// One HTTP/1.1 connection, keep-alive.
struct Conn {
    reader: BufReader<TcpStream>,
}

/// A response: status, headers (names lowercased), body as JSON.
#[derive(Debug)]
struct Response {
    status: u16,
    headers: Vec<(String, String)>,
    body: Value,
}

impl Response {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }

    fn field(&self, name: &str) -> &str {
        self.body[name]
            .as_str()
            .unwrap_or_else(|| panic!("no {name} in {}", self.body))
    }
}

impl Conn {
    fn open(addr: SocketAddr) -> Conn {
        let s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        Conn {
            reader: BufReader::new(s),
        }
    }

    fn send(&mut self, method: &str, path: &str, headers: &str, body: &str) {
        let req = format!(
            "{method} {path} HTTP/1.1\r\nHost: lab\r\n{headers}Content-Length: {}\r\n\r\n{body}",
            body.len()
        );
        self.reader.get_mut().write_all(req.as_bytes()).unwrap();
    }

    fn read(&mut self) -> Response {
        let mut line = String::new();
        self.reader.read_line(&mut line).unwrap();
        let status = line
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("not a status line: {line:?}"));
        let mut headers = Vec::new();
        loop {
            line.clear();
            self.reader.read_line(&mut line).unwrap();
            let l = line.trim_end();
            if l.is_empty() {
                break;
            }
            let (n, v) = l.split_once(':').unwrap();
            headers.push((n.to_ascii_lowercase(), v.trim().to_string()));
        }
        let len: usize = headers
            .iter()
            .find(|(n, _)| n == "content-length")
            .map(|(_, v)| v.parse().unwrap())
            .unwrap();
        let mut body = vec![0; len];
        self.reader.read_exact(&mut body).unwrap();
        let body = serde_json::from_slice(&body).unwrap_or(Value::Null);
        Response { status, headers, body }
    }

    fn post(&mut self, path: &str, body: Value) -> Response {
        self.send("POST", path, "", &body.to_string());
        self.read()
    }

    fn me(&mut self, token: &str) -> Response {
        self.send("GET", "/auth/me", &format!("Authorization: Bearer {token}\r\n"), "");
        self.read()
    }
}

/// Asserts the status and the `error` field of a refusal.
fn refused(r: &Response, status: u16, code: &str) {
    assert_eq!((r.status, r.field("error")), (status, code), "{r:?}");
    assert!(!r.field("detail").is_empty());
}

#[test]
fn sign_up_to_me_on_one_keep_alive_connection() {
    let lab = server(1, 4, 2);
    let mut c = Conn::open(lab.addr());
    let who = json!({ "email": "vu1@test.io", "password": "hunter2" });

    let r = c.post("/auth/register", who.clone());
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.header("content-type"), Some("application/json"));
    assert_eq!(r.header("connection"), None, "keep-alive is kept");
    assert_eq!((r.field("message"), r.field("email")), ("OTP sent", "vu1@test.io"));
    let otp = r.field("otp").to_string();
    assert!(otp.len() == 6 && otp.bytes().all(|b| b.is_ascii_digit()), "{otp}");

    refused(&c.post("/auth/register", who.clone()), 409, "USER_EXISTS");
    refused(&c.post("/auth/login", who.clone()), 401, "VERIFICATION_PENDING");
    refused(
        &c.post("/auth/login", json!({ "email": "vu1@test.io", "password": "wrong" })),
        401,
        "INVALID_CREDENTIALS",
    );
    // A malformed body is answered, and the connection goes on.
    c.send("POST", "/auth/verify-otp", "", "{\"email\":");
    refused(&c.read(), 400, "BAD_REQUEST");

    let wrong = if otp == "000000" { "000001" } else { "000000" };
    refused(
        &c.post("/auth/verify-otp", json!({ "email": "vu1@test.io", "otp": wrong })),
        401,
        "INVALID_OTP",
    );
    let r = c.post("/auth/verify-otp", json!({ "email": "vu1@test.io", "otp": otp }));
    assert_eq!((r.status, r.field("message")), (200, "verified"), "{r:?}");

    let r = c.post("/auth/login", who);
    assert_eq!(r.status, 200, "{r:?}");
    let access = r.field("access_token").to_string();
    let refresh = r.field("refresh_token").to_string();

    let r = c.me(&access);
    assert_eq!((r.status, r.field("email")), (200, "vu1@test.io"), "{r:?}");
    refused(&c.me("0123456789abcdef0123456789abcdef"), 401, "INVALID_TOKEN");
    c.send("GET", "/auth/me", "", "");
    refused(&c.read(), 401, "MISSING_TOKEN");

    refused(
        &c.post("/auth/refresh", json!({ "refresh_token": "not-a-token" })),
        401,
        "INVALID_TOKEN",
    );
    let r = c.post("/auth/refresh", json!({ "refresh_token": refresh }));
    assert_eq!(r.status, 200, "{r:?}");
    let renewed = r.field("access_token").to_string();
    assert_ne!(renewed, access);

    // Pipelined: both answered, in order.
    let req = format!("GET /auth/me HTTP/1.1\r\nAuthorization: Bearer {renewed}\r\n\r\n");
    c.reader
        .get_mut()
        .write_all(format!("{req}GET /auth/me HTTP/1.1\r\n\r\n").as_bytes())
        .unwrap();
    assert_eq!(c.read().field("email"), "vu1@test.io");
    refused(&c.read(), 401, "MISSING_TOKEN");
}

#[test]
fn users_registered_through_one_thread_log_in_through_any() {
    // Two listeners on one port: the kernel spreads new connections over
    // both, so with a store per thread about half of these would fail.
    let lab = server(2, 4, 2);
    let users: Vec<String> = (0..32).map(|i| format!("user{i}@test.io")).collect();
    let mut otps = Vec::new();
    for email in &users {
        let r = Conn::open(lab.addr()).post("/auth/register", json!({ "email": email, "password": "pw" }));
        assert_eq!(r.status, 200, "{r:?}");
        otps.push(r.field("otp").to_string());
    }
    for (email, otp) in users.iter().zip(&otps) {
        let r = Conn::open(lab.addr()).post("/auth/verify-otp", json!({ "email": email, "otp": otp }));
        assert_eq!(r.status, 200, "{email}: {r:?}");
    }
    for email in &users {
        let r = Conn::open(lab.addr()).post("/auth/login", json!({ "email": email, "password": "pw" }));
        assert_eq!(r.status, 200, "{email}: {r:?}");
        let token = r.field("access_token").to_string();
        let r = Conn::open(lab.addr()).me(&token);
        assert_eq!((r.status, r.field("email")), (200, email.as_str()), "{r:?}");
    }
}

#[test]
fn hashing_does_not_hold_up_other_connections() {
    // One serving thread, one hashing thread, a realistic cost: a hash takes
    // a quarter of a second or more. Were it run on the serving thread,
    // `GET /` on another connection would be answered only after it.
    let lab = server(1, 12, 1);
    let mut hashing = Conn::open(lab.addr());
    hashing.send(
        "POST",
        "/auth/register",
        "",
        &json!({ "email": "slow@test.io", "password": "pw" }).to_string(),
    );
    // Let the register reach the server first.
    std::thread::sleep(Duration::from_millis(50));
    let mut other = Conn::open(lab.addr());
    other.send("GET", "/", "", "");
    let mut line = String::new();
    other.reader.read_line(&mut line).unwrap();
    assert!(line.starts_with("HTTP/1.1 200 "), "{line:?}");
    // The register is still hashing: nothing to read on its connection yet.
    hashing.reader.get_ref().set_nonblocking(true).unwrap();
    let mut byte = [0u8; 1];
    let early = hashing.reader.get_ref().peek(&mut byte);
    assert!(
        matches!(&early, Err(e) if e.kind() == ErrorKind::WouldBlock),
        "the register was answered before GET /: {early:?}"
    );
    hashing.reader.get_ref().set_nonblocking(false).unwrap();
    let r = hashing.read();
    assert_eq!(r.status, 200, "{r:?}");
}
