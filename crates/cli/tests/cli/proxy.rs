//! -x/--proxy and the proxy environment through a real proxy (tinyproxy,
//! started by each test on its own loopback port with its own config and
//! log): absolute-form requests for http, CONNECT tunnels for https and TLS
//! storms, 407/403/unreachable counted as proxy.* classes, credentials sent
//! as Proxy-Authorization and never written anywhere. The proxy's own log
//! shows what went through it.

#![allow(clippy::unwrap_used)]

use crate::common;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use common::{Nginx, assert_books_balance, free_port, throng, wait_listening};
use throng_result::RunResult;

/// A tinyproxy in the foreground on a loopback port, killed on drop.
struct Tinyproxy {
    child: Child,
    port: u16,
    dir: tempfile::TempDir,
}

impl Tinyproxy {
    /// `extra`: more config lines (BasicAuth, ConnectPort).
    fn start(extra: &str) -> Tinyproxy {
        let bin = ["/usr/bin/tinyproxy", "/usr/sbin/tinyproxy"]
            .into_iter()
            .find(|p| Path::new(p).exists())
            .expect("tinyproxy is not installed: run ./scripts/test.sh, which installs it (Debian package tinyproxy)");
        let dir = tempfile::tempdir().unwrap();
        // tinyproxy drops to nobody when started as root: it must write its log.
        std::fs::set_permissions(dir.path(), std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
        let port = free_port();
        let d = dir.path().display();
        let conf = format!(
            "Port {port}\nListen 127.0.0.1\nTimeout 20\nLogFile \"{d}/tinyproxy.log\"\nLogLevel Info\n\
             PidFile \"{d}/tinyproxy.pid\"\nMaxClients 200\nAllow 127.0.0.1\n{extra}\n"
        );
        std::fs::write(dir.path().join("tinyproxy.conf"), conf).unwrap();
        let child = Command::new(bin)
            .arg("-d")
            .arg("-c")
            .arg(dir.path().join("tinyproxy.conf"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("cannot start tinyproxy");
        wait_listening(SocketAddr::from(([127, 0, 0, 1], port)));
        Tinyproxy { child, port, dir }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The requests tinyproxy logged (its `Request (file descriptor N): …`
    /// lines), as `METHOD TARGET`.
    fn requests(&self) -> Vec<String> {
        let log = std::fs::read_to_string(self.dir.path().join("tinyproxy.log")).unwrap_or_default();
        log.lines()
            .filter_map(|l| l.split_once("): ").filter(|_| l.contains("Request (file descriptor")))
            .map(|(_, r)| r.trim_end_matches(" HTTP/1.1").to_string())
            .collect()
    }
}

impl Drop for Tinyproxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs throng with `args` (and `env`), writing and reading a result.
fn run(args: &[&str], env: &[(&str, &str)]) -> common::Run {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("result.json");
    let mut cmd = throng();
    for v in [
        "HTTPS_PROXY",
        "https_proxy",
        "HTTP_PROXY",
        "http_proxy",
        "NO_PROXY",
        "no_proxy",
    ] {
        cmd.env_remove(v);
    }
    cmd.envs(env.iter().copied())
        .args(args)
        .arg("--json")
        .arg(&json)
        .arg("--quiet");
    let output = common::output(&mut cmd);
    let result = common::read_result(&json);
    common::Run::new(output, result, json, dir)
}

/// Every request that was attempted ended in `class` (a run whose first
/// connections all fail stops early, so not every planned one is attempted).
fn assert_all_failed_as(r: &RunResult, class: &str) {
    let q = &r.measurements.requests;
    assert!(q.attempted >= 1, "{q:?}");
    assert_eq!(q.error(class), q.attempted, "{q:?}");
}

fn certs(dir: &Path) -> PathBuf {
    let out = dir.join("certs");
    let o = common::output(throng().args(["certs", "--out", out.to_str().unwrap()]));
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    out
}

fn nginx_tls(c: &Path) -> Nginx {
    common::nginx_tls(c, "ssl", false, "", "location / { return 200 \"tls\"; }")
}

#[test]
fn plain_http_goes_to_the_proxy_in_absolute_form() {
    let nginx = Nginx::start("location / { return 200 \"ok\"; }");
    let proxy = Tinyproxy::start("");
    let url = nginx.url("/p");
    // tinyproxy closes the client's connection after each response: one
    // connection per request keeps the count exact.
    let r = run(
        &[
            "http",
            &url,
            "-n",
            "10",
            "-c",
            "2",
            "--no-keepalive",
            "-x",
            &proxy.url(),
        ],
        &[],
    );
    assert_eq!(r.code(), 0, "{}", r.stderr());
    let res = r.result();
    assert_books_balance(res);
    assert_eq!(res.measurements.status.get(&200), Some(&10));
    assert_eq!(res.measurements.addresses[&format!("127.0.0.1:{}", proxy.port)], 10);
    let seen = proxy.requests();
    assert_eq!(
        seen.iter().filter(|s| **s == format!("GET {url}")).count(),
        10,
        "{seen:?}"
    );
    assert!(
        r.stdout().contains(&format!("via proxy {} (--proxy)", proxy.url())),
        "{}",
        r.stdout()
    );
    // The environment's HTTP_PROXY does the same; NO_PROXY excludes the host.
    let r = run(
        &["http", &url, "-n", "4", "-c", "1", "--no-keepalive"],
        &[("http_proxy", &proxy.url())],
    );
    assert_eq!(r.result().measurements.status.get(&200), Some(&4));
    assert_eq!(proxy.requests().len(), 14);
    let r = run(
        &["http", &url, "-n", "4", "-c", "1"],
        &[("HTTP_PROXY", &proxy.url()), ("NO_PROXY", "example.test,127.0.0.1")],
    );
    assert_eq!(r.result().measurements.status.get(&200), Some(&4));
    assert_eq!(proxy.requests().len(), 14, "NO_PROXY: nothing more through the proxy");
    assert_eq!(
        r.result().measurements.addresses[&format!("127.0.0.1:{}", nginx.port)],
        1
    );
    // --proxy '' turns the environment's off.
    let r = run(
        &["http", &url, "-n", "2", "-x", ""],
        &[("HTTP_PROXY", "http://127.0.0.1:1")],
    );
    assert_eq!(r.result().measurements.status.get(&200), Some(&2), "{}", r.stderr());
}

#[test]
fn https_and_tls_storms_go_through_connect_tunnels() {
    let dir = tempfile::tempdir().unwrap();
    let c = certs(dir.path());
    let nginx = nginx_tls(&c);
    let proxy = Tinyproxy::start("");
    let ca = c.join("ca.pem");
    let url = nginx.https("localhost", "/");
    let r = run(
        &["http", &url, "--cacert", ca.to_str().unwrap(), "-n", "12", "-c", "3"],
        &[("HTTPS_PROXY", &proxy.url())],
    );
    assert_eq!(r.code(), 0, "{}", r.stderr());
    let res = r.result();
    assert_books_balance(res);
    assert_eq!(res.measurements.status.get(&200), Some(&12));
    assert_eq!(res.measurements.tls.as_ref().unwrap().handshakes, 3);
    let tunnel = format!("CONNECT localhost:{}", nginx.port);
    assert_eq!(
        proxy.requests().iter().filter(|s| **s == tunnel).count(),
        3,
        "{:?}",
        proxy.requests()
    );

    let r = run(
        &[
            "storm",
            &format!("tls://localhost:{}", nginx.port),
            "-n",
            "10",
            "--cacert",
            ca.to_str().unwrap(),
            "-x",
            &proxy.url(),
        ],
        &[],
    );
    assert_eq!(r.code(), 0, "{}", r.stderr());
    let res = r.result();
    assert_books_balance(res);
    assert_eq!(res.measurements.connections.ok, 10);
    assert_eq!(res.measurements.tls.as_ref().unwrap().handshakes, 10);
    assert_eq!(proxy.requests().iter().filter(|s| **s == tunnel).count(), 13);
    // A TLS storm takes HTTPS_PROXY from the environment too.
    let r = run(
        &[
            "storm",
            &format!("tls://localhost:{}", nginx.port),
            "-n",
            "5",
            "--cacert",
            ca.to_str().unwrap(),
        ],
        &[("HTTPS_PROXY", &proxy.url())],
    );
    assert_eq!(r.code(), 0, "{}", r.stderr());
    assert_eq!(r.result().measurements.connections.ok, 5);
    assert_eq!(proxy.requests().iter().filter(|s| **s == tunnel).count(), 18);
}

#[test]
fn proxy_credentials_are_sent_and_never_written() {
    let dir = tempfile::tempdir().unwrap();
    let c = certs(dir.path());
    let nginx = nginx_tls(&c);
    let proxy = Tinyproxy::start("BasicAuth alice pr0xy-pw");
    let ca = c.join("ca.pem");
    let url = nginx.https("localhost", "/");
    let base = ["http", &url, "--cacert", ca.to_str().unwrap(), "-n", "6", "-c", "2"];
    // Without credentials: 407 to every CONNECT, counted, with the fix said.
    let r = run(&[&base[..], &["-x", &proxy.url()]].concat(), &[]);
    assert_eq!(r.code(), 1, "{}", r.stderr());
    let res = r.result();
    assert_books_balance(res);
    assert_all_failed_as(res, "proxy.auth_required");
    assert!(r.stdout().contains("http://USER:PASSWORD@HOST:PORT"), "{}", r.stdout());
    // With them, in the URL (percent-encoded characters decoded).
    let with = format!("http://alice:pr0xy%2Dpw@127.0.0.1:{}", proxy.port);
    let r = run(&[&base[..], &["-x", &with]].concat(), &[]);
    assert_eq!(r.code(), 0, "{}", r.stderr());
    assert_eq!(r.result().measurements.status.get(&200), Some(&6));
    let json = std::fs::read_to_string(&r.json).unwrap();
    // base64("alice:pr0xy-pw") = YWxpY2U6cHIweHktcHc=
    for secret in ["pr0xy", "YWxpY2U6cHIweHktcHc"] {
        assert!(!json.contains(secret), "{json}");
        assert!(!r.stdout().contains(secret), "{}", r.stdout());
    }
    assert!(json.contains("alice:***@127.0.0.1"), "{json}");
    // A storm's worker processes get the credentials too (not through the
    // plan's JSON, which never holds them).
    let r = run(
        &[
            "storm",
            &format!("tls://localhost:{}", nginx.port),
            "-n",
            "8",
            "--procs",
            "2",
            "--cacert",
            ca.to_str().unwrap(),
            "-x",
            &with,
        ],
        &[],
    );
    assert_eq!(r.code(), 0, "{}", r.stderr());
    assert!(r.result().parts.len() >= 2, "{:?}", r.result().parts);
    assert_eq!(
        r.result().measurements.connections.ok,
        8,
        "{:?}",
        r.result().measurements.connections
    );
    assert!(!std::fs::read_to_string(&r.json).unwrap().contains("pr0xy"));
    // Plain http: Proxy-Authorization rides on each request, redacted.
    let r = run(
        &[
            "http",
            &format!("http://127.0.0.1:{}/", nginx.port),
            "-n",
            "2",
            "-c",
            "1",
            "--no-keepalive",
            "-x",
            &with,
        ],
        &[],
    );
    let json = std::fs::read_to_string(&r.json).unwrap();
    assert!(
        json.contains("Proxy-Authorization") && !json.contains("YWxpY2U6cHIweHktcHc"),
        "{json}"
    );
}

#[test]
fn a_forbidden_or_missing_proxy_is_a_counted_class() {
    let dir = tempfile::tempdir().unwrap();
    let c = certs(dir.path());
    let nginx = nginx_tls(&c);
    // Tunnels only to port 1: nginx's is forbidden (403).
    let proxy = Tinyproxy::start("ConnectPort 1");
    let ca = c.join("ca.pem");
    let url = nginx.https("localhost", "/");
    let r = run(
        &[
            "http",
            &url,
            "--cacert",
            ca.to_str().unwrap(),
            "-n",
            "4",
            "-c",
            "1",
            "-x",
            &proxy.url(),
        ],
        &[],
    );
    assert_eq!(r.code(), 1, "{}", r.stderr());
    assert_books_balance(r.result());
    assert_all_failed_as(r.result(), "proxy.forbidden");
    // Nothing listens where the proxy should be.
    let gone = format!("http://127.0.0.1:{}", free_port());
    let r = run(
        &[
            "http",
            &url,
            "--cacert",
            ca.to_str().unwrap(),
            "-n",
            "3",
            "-c",
            "1",
            "-x",
            &gone,
        ],
        &[],
    );
    assert_eq!(r.code(), 1, "{}", r.stderr());
    assert_books_balance(r.result());
    assert_all_failed_as(r.result(), "proxy.unreachable");
    assert!(r.stdout().contains("check -x/--proxy"), "{}", r.stdout());
    assert!(
        r.stderr().contains(&format!(
            "the proxy {gone} (--proxy) did not open the way to localhost:"
        )),
        "{}",
        r.stderr()
    );
    // A proxy URL that is not one: exit 2 before anything starts.
    for (proxy, needle) in [
        ("https://127.0.0.1:3128", "the scheme 'https' is not supported"),
        ("http://u:hidden@127.0.0.1:3128/x", "a proxy URL has no path"),
    ] {
        let r = run(&["http", &url, "-n", "1", "-x", proxy], &[]);
        assert_eq!(r.code(), 2, "{}", r.stderr());
        assert!(
            r.stderr().contains(needle) && !r.stderr().contains("hidden"),
            "{}",
            r.stderr()
        );
    }
    let r = run(&["http", &url, "-n", "1"], &[("HTTPS_PROXY", "ftp://127.0.0.1:1")]);
    assert_eq!(r.code(), 2, "{}", r.stderr());
    assert!(r.stderr().contains("HTTPS_PROXY"), "{}", r.stderr());
}
