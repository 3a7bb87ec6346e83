//! Helpers for the integration tests: the throng binary, real nginx on
//! loopback, the lab server, and result files.
#![allow(dead_code, clippy::unwrap_used)]

use std::cell::Cell;
use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, Instant};

use throng_result::RunResult;

/// The throng binary under test.
pub fn throng() -> Command {
    Command::new(env!("CARGO_BIN_EXE_throng"))
}

/// Longest any single throng invocation may take in a test: a hang fails the
/// test instead of hanging the suite.
pub const RUN_LIMIT: Duration = Duration::from_secs(120);

/// Held for writing by a test that must run alone ([`heavy`]), for
/// reading by every other throng run through [`output`].
static ALONE: RwLock<()> = RwLock::new(());

thread_local! {
    /// Whether this test's thread holds [`ALONE`] for writing (its own
    /// [`output`] calls must not wait for a read lock they would never get).
    static HOLDS_ALONE: Cell<bool> = const { Cell::new(false) };
}

/// While alive, this test runs alone: no other heavy test runs, and no
/// other test runs throng through [`output`] (one already running finishes
/// first). See "Tests that must run alone" in `main.rs`.
pub struct Heavy {
    _alone: RwLockWriteGuard<'static, ()>,
}

/// Waits until this test may run alone, and holds that until the returned
/// guard drops. A test that panicked while holding it does not stop the
/// others (the lock's poison is ignored: it guards no data).
pub fn heavy() -> Heavy {
    assert!(!HOLDS_ALONE.get(), "common::heavy() taken twice by one test");
    let alone = ALONE.write().unwrap_or_else(PoisonError::into_inner);
    HOLDS_ALONE.set(true);
    Heavy { _alone: alone }
}

impl Drop for Heavy {
    fn drop(&mut self) {
        HOLDS_ALONE.set(false);
    }
}

/// A share of [`ALONE`] for one throng run, unless this thread's test is the
/// heavy one.
fn shared() -> Option<RwLockReadGuard<'static, ()>> {
    (!HOLDS_ALONE.get()).then(|| ALONE.read().unwrap_or_else(PoisonError::into_inner))
}

/// Runs `cmd` to completion, killing it (and failing) after [`RUN_LIMIT`];
/// waits first while a [`heavy`] test runs.
pub fn output(cmd: &mut Command) -> Output {
    let _shared = shared();
    let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    // Drain the pipes on threads so a chatty child never blocks.
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let out_t = std::thread::spawn(move || {
        let mut v = Vec::new();
        std::io::Read::read_to_end(&mut out, &mut v).ok();
        v
    });
    let err_t = std::thread::spawn(move || {
        let mut v = Vec::new();
        std::io::Read::read_to_end(&mut err, &mut v).ok();
        v
    });
    let deadline = Instant::now() + RUN_LIMIT;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{cmd:?} did not finish within {} s", RUN_LIMIT.as_secs());
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Output {
        status,
        stdout: out_t.join().unwrap(),
        stderr: err_t.join().unwrap(),
    }
}

/// A free loopback port (bound, then released).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Waits until something accepts on `addr` (at most 10 s).
pub fn wait_listening(addr: SocketAddr) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("nothing is listening on {addr} after 10 s");
}

/// An nginx master process on a loopback port, stopped on drop.
pub struct Nginx {
    child: Child,
    pub port: u16,
    pub dir: tempfile::TempDir,
}

impl Nginx {
    /// Starts nginx with `locations` inside its one `server` block.
    pub fn start(locations: &str) -> Nginx {
        Self::start_with(false, "", locations)
    }

    /// Starts nginx listening with TLS (`ssl` on the listen line) and
    /// `directives` (certificates, client verification) in the server block.
    pub fn start_tls(directives: &str, locations: &str) -> Nginx {
        Self::start_with(true, directives, locations)
    }

    /// Starts nginx whose listen line ends with `listen_options` (e.g.
    /// `ssl http2`, or `http2` for h2c with prior knowledge).
    pub fn start_listen(listen_options: &str, directives: &str, locations: &str) -> Nginx {
        Self::start_options(listen_options, directives, locations)
    }

    /// Starts nginx (plain) with `http_directives` in its `http` block
    /// (a `log_format`), and `locations` in its one `server` block.
    pub fn start_http(http_directives: &str, locations: &str) -> Nginx {
        Self::start_full(http_directives, "", "", locations)
    }

    /// [`Nginx::start_listen`] with `http_directives` in its `http` block
    /// (a `log_format`).
    pub fn start_listen_http(http_directives: &str, listen_options: &str, directives: &str, locations: &str) -> Nginx {
        Self::start_full(http_directives, listen_options, directives, locations)
    }

    fn start_with(tls: bool, directives: &str, locations: &str) -> Nginx {
        Self::start_options(if tls { "ssl" } else { "" }, directives, locations)
    }

    fn start_options(listen_options: &str, directives: &str, locations: &str) -> Nginx {
        Self::start_full("", listen_options, directives, locations)
    }

    fn start_full(http_directives: &str, listen_options: &str, directives: &str, locations: &str) -> Nginx {
        let nginx = ["/usr/sbin/nginx", "/usr/bin/nginx"]
            .into_iter()
            .find(|p| Path::new(p).exists())
            .expect("nginx is not installed: run ./scripts/test.sh, which installs it (Debian package nginx-light)");
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        let d = dir.path().display();
        let conf = format!(
            "worker_processes 1;\nerror_log {d}/error.log warn;\npid {d}/nginx.pid;\ndaemon off;\n\
             worker_rlimit_nofile 4096;\n\
             events {{ worker_connections 4000; }}\n\
             http {{\n  access_log off;\n  keepalive_requests 1000000;\n\
               client_body_temp_path {d}/body; proxy_temp_path {d}/proxy; fastcgi_temp_path {d}/fcgi;\n\
               uwsgi_temp_path {d}/uwsgi; scgi_temp_path {d}/scgi;\n{http_directives}\n\
               server {{\n    listen 127.0.0.1:{port}{ssl};\n{directives}\n{locations}\n  }}\n}}\n",
            ssl = if listen_options.is_empty() {
                String::new()
            } else {
                format!(" {listen_options}")
            },
        );
        std::fs::write(dir.path().join("nginx.conf"), conf).unwrap();
        let child = Command::new(nginx)
            .arg("-p")
            .arg(dir.path())
            .arg("-c")
            .arg(dir.path().join("nginx.conf"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("cannot start nginx");
        // The guard first: a failure below stops this nginx instead of
        // leaving it running after the test.
        let mut n = Nginx { child, port, dir };
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
                return n;
            }
            if let Ok(Some(status)) = n.child.try_wait() {
                let log = std::fs::read_to_string(n.dir.path().join("error.log")).unwrap_or_default();
                panic!("nginx exited ({status}) before listening on {addr}: {log}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("nginx is not listening on {addr} after 30 s");
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    pub fn https(&self, host: &str, path: &str) -> String {
        format!("https://{host}:{}{path}", self.port)
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        // SIGTERM: the master stops its workers, then itself. SIGKILL would
        // leave the workers running, orphaned, after the test.
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while std::time::Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The lab server, in this process.
pub fn lab(stall: Option<throng_lab::Stall>) -> throng_lab::LabServer {
    throng_lab::LabServer::start(&throng_lab::LabConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        threads: 1,
        stall,
        tls: None,
    })
    .unwrap()
}

/// A lab server with the auth service at a low bcrypt cost (4), one-time
/// codes revealed in the register response, two threads.
pub fn auth_lab() -> throng_lab::LabServer {
    throng_lab::LabServer::start_with_auth(
        &throng_lab::LabConfig {
            listen: "127.0.0.1:0".parse().unwrap(),
            threads: 2,
            stall: None,
            tls: None,
        },
        &{
            let mut auth = throng_lab::AuthConfig::default();
            auth.cost = throng_lab::BcryptCost::new(4).unwrap();
            auth.reveal_otp = true;
            auth
        },
    )
    .unwrap()
}

/// What a throng run left behind.
pub struct Run {
    pub output: Output,
    pub result: Option<RunResult>,
    pub json: PathBuf,
    _dir: tempfile::TempDir,
}

impl Run {
    pub fn new(output: Output, result: Option<RunResult>, json: PathBuf, dir: tempfile::TempDir) -> Run {
        Run {
            output,
            result,
            json,
            _dir: dir,
        }
    }

    pub fn code(&self) -> i32 {
        self.output.status.code().unwrap_or(-1)
    }
    pub fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.output.stdout).into_owned()
    }
    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.output.stderr).into_owned()
    }
    /// The result document (the run must have written one).
    pub fn result(&self) -> &RunResult {
        self.result
            .as_ref()
            .unwrap_or_else(|| panic!("no result written; exit {} stderr: {}", self.code(), self.stderr()))
    }
}

/// Runs `throng http ARGS --json FILE --quiet` and reads the result.
pub fn http(args: &[&str]) -> Run {
    command("http", args)
}

/// `throng certs` into a fresh directory: (the directory, its certs/ with
/// ca.pem, server.pem/.key for localhost, client.pem/.key).
pub fn certs() -> (tempfile::TempDir, PathBuf) {
    certs_with(&[])
}

/// [`certs`] with `extra` flags (`--rsa`, `--expired`).
pub fn certs_with(extra: &[&str]) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("certs");
    let o = output(throng().args(["certs", "--out", out.to_str().unwrap()]).args(extra));
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    (dir, out)
}

/// Runs `yaml` as `scenario.yaml` in a fresh directory: `throng run FILE
/// --threads 1 --json FILE`, and reads the result.
pub fn scenario(yaml: &str) -> Run {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("scenario.yaml");
    std::fs::write(&file, yaml).unwrap();
    with_json(throng().arg("run").arg(&file).args(["--threads", "1"]))
}

/// Runs `throng storm ARGS --json FILE --quiet` and reads the result.
pub fn storm(args: &[&str]) -> Run {
    command("storm", args)
}

/// Runs `throng COMMAND ARGS --quiet --json FILE` and reads the result
/// (None when the run wrote none).
pub fn command(name: &str, args: &[&str]) -> Run {
    with_json(throng().arg(name).args(args).arg("--quiet"))
}

/// Runs `cmd --json FILE` (through [`output`]), FILE in a fresh directory,
/// and reads the result (None when the run wrote none).
pub fn with_json(cmd: &mut Command) -> Run {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("result.json");
    let output = output(cmd.arg("--json").arg(&json));
    let result = read_result(&json);
    Run::new(output, result, json, dir)
}

/// The result document at `path`, if a run wrote one.
pub fn read_result(path: &Path) -> Option<RunResult> {
    std::fs::File::open(path)
        .ok()
        .map(|f| RunResult::from_reader(f).unwrap())
}

/// Checks the accounting invariants every result must keep.
pub fn assert_books_balance(r: &RunResult) {
    let m = &r.measurements;
    assert!(
        m.requests.is_balanced(),
        "requests: attempted != ok + errors: {:?}",
        m.requests
    );
    assert!(
        m.connections.is_balanced(),
        "connections: attempted != ok + errors: {:?}",
        m.connections
    );
    let series_ended: u64 = m.series.iter().map(|p| p.requests).sum();
    assert_eq!(
        series_ended,
        m.requests.ended(),
        "per-second series must add up to the totals"
    );
    let series_ok: u64 = m.series.iter().map(|p| p.ok).sum();
    assert_eq!(series_ok, m.requests.ok);
    let series_dropped: u64 = m.series.iter().map(|p| p.dropped).sum();
    assert_eq!(series_dropped, m.dropped);
    let series_bytes: u64 = m.series.iter().map(|p| p.bytes_received).sum();
    assert_eq!(series_bytes, m.bytes.received);
    let replies: u64 = m.status.values().sum();
    let series_replies: u64 = m.series.iter().map(|p| p.replies).sum();
    assert_eq!(series_replies, replies);
    for (name, h) in &m.phases {
        let per_second: u64 = m.series.iter().map(|p| p.phase(name).unwrap().count()).sum();
        assert_eq!(per_second, h.count(), "phase {name}: per-second samples must add up");
    }
    // Each second's failures by class add up to its failures, and over the
    // run to the totals by class.
    let mut by_class: std::collections::BTreeMap<String, u64> = std::collections::BTreeMap::new();
    for p in &m.series {
        assert_eq!(p.error_classes.values().sum::<u64>(), p.errors, "second {}", p.second);
        for (class, n) in &p.error_classes {
            *by_class.entry(class.clone()).or_default() += n;
        }
    }
    let totals: std::collections::BTreeMap<String, u64> = m
        .requests
        .errors
        .iter()
        .filter(|(_, n)| **n > 0)
        .map(|(c, n)| (c.clone(), *n))
        .collect();
    assert_eq!(by_class, totals, "per-second error classes must add up to the totals");
}

/// Validates a result file against the checked-in JSON Schema; returns the
/// violations.
pub fn schema_violations(path: &Path) -> Vec<String> {
    let schema_text =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../schema/result.schema.json")).unwrap();
    let schema: serde_json::Value = serde_json::from_str(&schema_text).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    validator
        .iter_errors(&doc)
        .map(|e| format!("{} at {}", e, e.instance_path))
        .collect()
}

/// A nats-server on a loopback port, with its pid file (so a restart by a
/// storm's --trigger is still stopped on drop).
pub struct NatsServer {
    child: Child,
    pub port: u16,
    pub conf: PathBuf,
    pub pid_file: PathBuf,
    pub dir: tempfile::TempDir,
}

impl NatsServer {
    /// Starts nats-server with `extra` config lines (authorization, …).
    pub fn start(extra: &str) -> NatsServer {
        let bin = ["/usr/sbin/nats-server", "/usr/bin/nats-server"]
            .into_iter()
            .find(|p| Path::new(p).exists())
            .expect(
                "nats-server is not installed: run ./scripts/test.sh, which installs it (Debian package nats-server)",
            );
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        let pid_file = dir.path().join("nats.pid");
        let conf = dir.path().join("nats.conf");
        std::fs::write(
            &conf,
            format!(
                "listen: 127.0.0.1:{port}\npid_file: \"{}\"\n{extra}\n",
                pid_file.display()
            ),
        )
        .unwrap();
        let child = Command::new(bin)
            .arg("-c")
            .arg(&conf)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("cannot start nats-server");
        // The guard first: a failure to come up stops this server.
        let server = NatsServer {
            child,
            port,
            conf,
            pid_file,
            dir,
        };
        wait_listening(SocketAddr::from(([127, 0, 0, 1], port)));
        server
    }

    /// A shell command that stops this server and starts it again after
    /// `gap_s` seconds (for --trigger).
    pub fn restart_command(&self, gap_s: f64) -> String {
        format!(
            "kill $(cat {pid}); sleep {gap_s}; nats-server -c {conf} >/dev/null 2>&1 &",
            pid = self.pid_file.display(),
            conf = self.conf.display()
        )
    }
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        if let Ok(pid) = std::fs::read_to_string(&self.pid_file) {
            let _ = Command::new("kill").arg(pid.trim()).status();
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Waits until at least `n` TCP connections to the local `port` are
/// established (counted on the server's side in /proc/net/tcp and tcp6, so
/// also those still in its accept queue; at most 60 s). For a test that acts
/// once connections are up, rather than after a sleep a busy machine outlasts.
pub fn wait_established(port: u16, n: usize) {
    let established = || -> usize {
        ["/proc/net/tcp", "/proc/net/tcp6"]
            .iter()
            .filter_map(|f| std::fs::read_to_string(f).ok())
            .map(|table| {
                table
                    .lines()
                    .skip(1)
                    .filter(|l| {
                        let f: Vec<&str> = l.split_whitespace().collect();
                        f.len() > 3
                            && f[3] == "01"
                            && f[1].rsplit(':').next().and_then(|p| u16::from_str_radix(p, 16).ok()) == Some(port)
                    })
                    .count()
            })
            .sum()
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut seen = established();
    while seen < n {
        assert!(
            Instant::now() < deadline,
            "{seen} of {n} connections to port {port} after 60 s"
        );
        std::thread::sleep(Duration::from_millis(20));
        seen = established();
    }
}

/// scripts/h3_server.py on a free UDP port; stopped (SIGTERM) on drop,
/// which writes its counts.
pub struct Aioquic {
    pub child: Child,
    pub port: u16,
    stats: PathBuf,
}

/// Fails (rather than passing unrun) where aioquic is missing.
fn need_aioquic() {
    let ok = Command::new("python3")
        .args(["-c", "import aioquic"])
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        ok,
        "these tests need aioquic: python3 -m pip install aioquic (scripts/test.sh does)"
    );
}

impl Aioquic {
    /// Starts it with the `throng certs` files in `certs`; each answer waits
    /// `delay_ms`. Fails (rather than passing unrun) where aioquic is missing.
    pub fn start(certs: &Path, stats_dir: &Path, delay_ms: u32) -> Aioquic {
        need_aioquic();
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/h3_server.py");
        let stats = stats_dir.join("h3_stats.json");
        let mut child = Command::new("python3")
            .arg(script)
            .args([
                "--cert",
                &certs.join("server.pem").display().to_string(),
                "--key",
                &certs.join("server.key").display().to_string(),
            ])
            .args(["--delay-ms", &delay_ms.to_string(), "--max-seconds", "120"])
            .arg("--stats")
            .arg(&stats)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = line
            .trim()
            .strip_prefix("listening on ")
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("h3_server.py said {line:?}"));
        Aioquic { child, port, stats }
    }

    pub fn url(&self, path: &str) -> String {
        format!("https://localhost:{}{path}", self.port)
    }

    /// Stops the server and reads what it counted.
    pub fn stop(mut self) -> serde_json::Value {
        // SAFETY: kill takes no pointers.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.child.try_wait().unwrap().is_none() {
            assert!(Instant::now() < deadline, "h3_server.py did not stop");
            std::thread::sleep(Duration::from_millis(20));
        }
        serde_json::from_slice(&std::fs::read(&self.stats).unwrap()).unwrap()
    }
}

impl Drop for Aioquic {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The `websockets` (PyPI) test server, tests/servers/ws_server.py in
/// MODE (echo, push, ...), on a loopback port; stopped on drop.
pub struct WsServer {
    pub child: Child,
    pub port: u16,
    pub dir: tempfile::TempDir,
}

impl WsServer {
    pub fn start(mode: &str) -> WsServer {
        WsServer::spawn(mode, None)
    }

    /// A server that refuses (401) every upgrade whose `Authorization` is
    /// not exactly `authorization`.
    pub fn requiring(mode: &str, authorization: &str) -> WsServer {
        WsServer::spawn(mode, Some(authorization))
    }

    fn spawn(mode: &str, authorization: Option<&str>) -> WsServer {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/servers/ws_server.py");
        let dir = tempfile::tempdir().unwrap();
        let port_file = dir.path().join("port");
        let child = Command::new("python3")
            .arg(&script)
            .arg(&port_file)
            .arg(mode)
            .args(authorization)
            .stdout(Stdio::null())
            .stderr(Stdio::from(std::fs::File::create(dir.path().join("log")).unwrap()))
            .spawn()
            .expect("cannot start python3");
        let mut server = WsServer { child, port: 0, dir };
        let deadline = Instant::now() + Duration::from_secs(15);
        while Instant::now() < deadline {
            if let Ok(text) = std::fs::read_to_string(&port_file) {
                server.port = text.trim().parse().unwrap();
                return server;
            }
            if let Ok(Some(status)) = server.child.try_wait() {
                let log = std::fs::read_to_string(server.dir.path().join("log")).unwrap_or_default();
                panic!(
                    "ws_server.py exited ({status}); is the PyPI package websockets installed? \
                     run ./scripts/test.sh, which installs it\n{log}"
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("ws_server.py did not listen within 15 s");
    }

    pub fn url(&self, path: &str) -> String {
        format!("ws://127.0.0.1:{}{path}", self.port)
    }

    /// Close codes of the sockets that ended so far, waiting (at most 5 s)
    /// until there are `n`.
    pub fn closes(&self, n: usize) -> Vec<String> {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let text = std::fs::read_to_string(self.dir.path().join("port.closes")).unwrap_or_default();
            let codes: Vec<String> = text.lines().map(str::to_string).collect();
            if codes.len() >= n || Instant::now() > deadline {
                return codes;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for WsServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The rows of a `--csv-requests` file: (outcome, bytes_sent, bytes_received).
pub fn request_rows(path: &Path) -> Vec<(String, u64, u64)> {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let at = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let (outcome, sent, received) = (at("outcome"), at("bytes_sent"), at("bytes_received"));
    lines
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            (
                f[outcome].to_string(),
                f[sent].parse().unwrap(),
                f[received].parse().unwrap(),
            )
        })
        .collect()
}

/// A file's path as a string argument: `p(certs, "ca.pem")`.
pub fn p(dir: &Path, name: &str) -> String {
    dir.join(name).display().to_string()
}

/// nginx over TLS with the `throng certs` files in `certs`: `listen` is
/// `ssl` or `ssl http2`; with `mtls` it asks for a client certificate of
/// the same CA (`ssl_verify_client on`). `directives` go in the server block
/// too (an access log, stream caps).
pub fn nginx_tls(certs: &Path, listen: &str, mtls: bool, directives: &str, locations: &str) -> Nginx {
    let client = if mtls {
        format!("ssl_client_certificate {}; ssl_verify_client on;", p(certs, "ca.pem"))
    } else {
        String::new()
    };
    Nginx::start_listen(
        listen,
        &format!(
            "ssl_certificate {}; ssl_certificate_key {}; {client}\n{directives}",
            p(certs, "server.pem"),
            p(certs, "server.key")
        ),
        locations,
    )
}

/// nginx over TLS proxying WebSocket on `/ws` to the server on `ws_port`
/// (wss:// to ws://), with its own 404 for every other path.
pub fn nginx_wss(certs: &Path, ws_port: u16) -> Nginx {
    nginx_tls(
        certs,
        "ssl",
        false,
        "",
        &format!(
            "location /ws {{ proxy_pass http://127.0.0.1:{ws_port}; proxy_http_version 1.1;\n\
             proxy_set_header Upgrade $http_upgrade; proxy_set_header Connection \"upgrade\"; }}\n\
             location / {{ return 404; }}"
        ),
    )
}

/// The lines of an nginx access log (`access_log FILE;`). nginx writes a
/// request's line when the request ends: they are all there once the run
/// has its answers.
pub fn access_log(log: &Path) -> Vec<String> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

/// `throng serve --fault NAME` on a free loopback port, stopped on drop.
pub struct FaultServer {
    child: Child,
    pub port: u16,
}

impl FaultServer {
    pub fn start(fault: &str) -> FaultServer {
        FaultServer::start_with(fault, &[])
    }

    /// With `extra` flags for `throng serve` (e.g. `--tls DIR`).
    pub fn start_with(fault: &str, extra: &[&str]) -> FaultServer {
        FaultServer::serve(&[&["--fault", fault][..], extra].concat())
    }

    /// `throng serve --threads 1 --listen ADDR EXTRA`: the lab server
    /// with no fault unless `extra` names one.
    pub fn serve(extra: &[&str]) -> FaultServer {
        let port = free_port();
        let child = throng()
            .args(["serve", "--threads", "1", "--listen"])
            .arg(format!("127.0.0.1:{port}"))
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // The guard first: a server that never listens is still stopped.
        let server = FaultServer { child, port };
        wait_listening(SocketAddr::from(([127, 0, 0, 1], port)));
        server
    }

    /// `127.0.0.1:PORT`.
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// `SCHEME://127.0.0.1:PORT/`.
    pub fn url(&self, scheme: &str) -> String {
        format!("{scheme}://127.0.0.1:{}/", self.port)
    }
}

impl Drop for FaultServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The lab's HTTP/3 server (quinn) with the `throng certs` files in
/// `certs`, answering every request, or failing each as `fault` says.
pub fn h3_lab(certs: &Path, fault: Option<throng_lab::H3Fault>) -> throng_lab::H3Server {
    let cert = (p(certs, "server.pem"), std::fs::read(certs.join("server.pem")).unwrap());
    let key = (p(certs, "server.key"), std::fs::read(certs.join("server.key")).unwrap());
    let tls = throng_tls::server_config(&cert, &key, None).unwrap();
    throng_lab::H3Server::start("127.0.0.1:0".parse().unwrap(), &tls, fault).unwrap()
}

/// `throng k8s job`'s manifests (`stdout`) are a ConfigMap, a Secret and a
/// Job, and `secret` is in the Secret's args only: not in the ConfigMap,
/// the Job or on `stderr`.
pub fn assert_secret_only_in_the_k8s_secret(stdout: &str, stderr: &str, secret: &str) {
    let docs: Vec<serde_yaml_ng::Value> = serde_yaml_ng::Deserializer::from_str(stdout)
        .map(|d| serde::Deserialize::deserialize(d).unwrap())
        .collect();
    let kinds: Vec<&str> = docs.iter().map(|x| x["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["ConfigMap", "Secret", "Job"], "{stdout}");
    for x in [&docs[0], &docs[2]] {
        assert!(!serde_yaml_ng::to_string(x).unwrap().contains(secret), "{x:?}");
    }
    assert!(docs[1]["stringData"]["args"].as_str().unwrap().contains(secret));
    assert!(!stderr.contains(secret), "{stderr}");
}
