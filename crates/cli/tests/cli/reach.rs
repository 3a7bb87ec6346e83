//! Network reach and credentials against real servers on loopback: every
//! address of a name is tried in order, -4/-6, --connect-to and --resolve
//! keep Host and the TLS server name, and -a, user:pass@, --bearer-file and
//! -H @FILE reach nginx's auth_basic while no secret reaches a result.

#![allow(clippy::unwrap_used)]

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{Nginx, assert_books_balance, http, throng};

/// The lab server on `listen` (an IPv6 or IPv4 loopback address, port 0).
fn lab_on(listen: &str) -> throng_lab::LabServer {
    throng_lab::LabServer::start(&throng_lab::LabConfig {
        listen: listen.parse().unwrap(),
        threads: 1,
        stall: None,
        tls: None,
    })
    .unwrap()
}

/// This machine's /etc/hosts maps `localhost` to 127.0.0.1 only, so the
/// name that resolves to both families is made with --resolve: the same
/// route (every address, in order) serves a name DNS answers with both.
#[test]
fn a_name_with_both_families_reaches_a_server_on_either_one() {
    for (listen, list, used) in [
        ("[::1]:0", "127.0.0.1,::1", "[::1]"),
        ("127.0.0.1:0", "[::1],127.0.0.1", "127.0.0.1"),
    ] {
        let lab = lab_on(listen);
        let port = lab.addr().port();
        let run = http(&[
            &format!("http://localhost:{port}/"),
            "-n",
            "40",
            "-c",
            "2",
            "-t",
            "1",
            "--resolve",
            &format!("localhost:{port}:{list}"),
        ]);
        assert_eq!(run.code(), 0, "{listen}: {}", run.stderr());
        let r = run.result();
        assert_books_balance(r);
        assert_eq!(r.measurements.requests.ok, 40, "{listen}");
        // Both connections reached the one address that listens; the
        // refused first tries were not counted as failures.
        let want = format!("{used}:{port}");
        assert_eq!(r.measurements.addresses.len(), 1, "{:?}", r.measurements.addresses);
        assert_eq!(r.measurements.addresses[&want], 2, "{:?}", r.measurements.addresses);
        assert_eq!(r.measurements.connections.failed(), 0);
        assert!(
            run.stdout().contains(&format!("addresses     {want} (2 connections)")),
            "{}",
            run.stdout()
        );
    }
}

#[test]
fn a_family_flag_keeps_only_its_addresses() {
    let lab = lab_on("127.0.0.1:0");
    let port = lab.addr().port();
    let resolve = format!("localhost:{port}:127.0.0.1,::1");
    let url = format!("http://localhost:{port}/");
    // -6: only ::1, where nothing listens: every request refused.
    let run = http(&[&url, "-n", "5", "-c", "1", "-6", "--resolve", &resolve]);
    assert_eq!(run.code(), 1, "{}", run.stderr());
    let r = run.result();
    assert_books_balance(r);
    // (A run whose first connections all fail may stop early.)
    assert!(r.measurements.requests.attempted >= 1);
    assert_eq!(
        r.measurements.requests.error("refused"),
        r.measurements.requests.attempted
    );
    assert!(run.stdout().contains("IPv6 only"), "{}", run.stdout());
    // -4: the server.
    let run = http(&[&url, "-n", "5", "-c", "1", "-4", "--resolve", &resolve]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(run.result().measurements.addresses[&format!("127.0.0.1:{port}")], 1);
    // A family the name does not have is said before the run.
    let o = common::output(
        throng()
            .args(["http", &url, "-n", "1", "-q", "-6", "--resolve"])
            .arg(format!("localhost:{port}:127.0.0.1")),
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("no IPv6 address, and -6 asks for one"), "{err}");
}

#[test]
fn a_storm_tries_every_address_too() {
    let lab = lab_on("[::1]:0");
    let port = lab.addr().port();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let o = common::output(
        throng()
            .args([
                "storm",
                &format!("tcp://localhost:{port}"),
                "-n",
                "30",
                "--quiet",
                "--resolve",
            ])
            .arg(format!("localhost:{port}:127.0.0.1,::1"))
            .arg("--json")
            .arg(&json),
    );
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let r = throng_result::RunResult::from_reader(std::fs::File::open(&json).unwrap()).unwrap();
    assert_books_balance(&r);
    assert_eq!(r.measurements.connections.ok, 30);
    assert_eq!(r.measurements.addresses[&format!("[::1]:{port}")], 30);
}

/// nginx answering 200 only when the Host header is `example.test`.
fn nginx_wanting_host() -> Nginx {
    Nginx::start("location / { if ($host != \"example.test\") { return 421; } return 200 \"ok\"; }")
}

#[test]
fn connect_to_and_resolve_send_elsewhere_but_keep_the_host() {
    let nginx = nginx_wanting_host();
    let url = "http://example.test/";
    for flags in [
        vec![
            "--connect-to".to_string(),
            format!("example.test:80:127.0.0.1:{}", nginx.port),
        ],
        vec!["--connect-to".to_string(), format!("::127.0.0.1:{}", nginx.port)],
    ] {
        let mut args = vec![url, "-n", "20", "-c", "2"];
        args.extend(flags.iter().map(String::as_str));
        let run = http(&args);
        assert_eq!(run.code(), 0, "{flags:?}: {}", run.stderr());
        let r = run.result();
        assert_books_balance(r);
        assert_eq!(r.measurements.status.get(&200), Some(&20), "{flags:?}");
        assert_eq!(r.measurements.addresses[&format!("127.0.0.1:{}", nginx.port)], 2);
    }
    // --resolve keeps the URL's port.
    let url = format!("http://example.test:{}/", nginx.port);
    let run = http(&[
        &url,
        "-n",
        "10",
        "--resolve",
        &format!("example.test:{}:127.0.0.1", nginx.port),
    ]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(run.result().measurements.status.get(&200), Some(&10));
    // A rule for another port does not apply: example.test is then looked up.
    let run = http(&[&url, "-n", "1", "--resolve", "example.test:1:127.0.0.1"]);
    assert_eq!(run.code(), 1, "{}", run.stderr());
    assert!(
        run.stderr().contains("cannot resolve host 'example.test'"),
        "{}",
        run.stderr()
    );
}

fn certs(dir: &Path) -> PathBuf {
    let out = dir.join("certs");
    let o = common::output(
        throng()
            .args([
                "certs",
                "--out",
                out.to_str().unwrap(),
                "--hosts",
                "localhost,example.test",
            ])
            .arg("--ecdsa"),
    );
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    out
}

#[test]
fn connect_to_keeps_the_tls_server_name() {
    let dir = tempfile::tempdir().unwrap();
    let c = certs(dir.path());
    let nginx = common::nginx_tls(
        &c,
        "ssl",
        false,
        "",
        "location / { if ($ssl_server_name != \"example.test\") { return 421; } \
         if ($host != \"example.test\") { return 400; } return 200 \"ok\"; }",
    );
    let run = http(&[
        "https://example.test/",
        "--cacert",
        c.join("ca.pem").to_str().unwrap(),
        "-n",
        "12",
        "-c",
        "3",
        "--connect-to",
        &format!("example.test:443:127.0.0.1:{}", nginx.port),
    ]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let r = run.result();
    assert_books_balance(r);
    assert_eq!(r.measurements.status.get(&200), Some(&12));
    assert_eq!(r.measurements.tls.as_ref().unwrap().handshakes, 3);
}

#[test]
fn bad_reach_flags_exit_2_and_say_the_fix() {
    for (args, needle) in [
        (vec!["--connect-to", "example.test:80"], "write HOST:PORT:ADDR:PORT"),
        (vec!["--connect-to", "h:x:a:1"], "'x' is not a port"),
        (vec!["--resolve", "example.test:80:nothere"], "HOST:PORT:ADDR"),
        (vec!["-4", "-6"], "cannot be used with"),
        (vec!["-x", "socks5://127.0.0.1:1"], "-x/--proxy"),
        (vec!["-a", "nopassword"], "-a/--basic-auth: expected USER:PASSWORD"),
    ] {
        let o = common::output(throng().args(["http", "http://127.0.0.1:1/", "-n", "1"]).args(&args));
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?} should say {needle}: {err}");
    }
}

/// nginx with auth_basic over an htpasswd file holding alice:s3cret (and a
/// location that wants a bearer token).
fn nginx_auth() -> (Nginx, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let pw = dir.path().join("htpasswd");
    let st = Command::new("htpasswd")
        .args(["-b", "-c", "-B", pw.to_str().unwrap(), "alice", "s3cret"])
        .output()
        .expect("htpasswd is not installed: run ./scripts/test.sh (Debian package apache2-utils)");
    assert!(st.status.success(), "{}", String::from_utf8_lossy(&st.stderr));
    // `return` would answer before auth_basic is asked (rewrite phase): a file.
    let page = dir.path().join("page");
    std::fs::write(&page, "in").unwrap();
    // nginx's workers (nobody, when the tests run as root) read both.
    for f in [dir.path(), &pw, &page] {
        let mode = if f.is_dir() { 0o755 } else { 0o644 };
        std::fs::set_permissions(f, std::os::unix::fs::PermissionsExt::from_mode(mode)).unwrap();
    }
    let nginx = Nginx::start(&format!(
        "location = /basic {{ auth_basic \"x\"; auth_basic_user_file {}; alias {}; }}\n\
         location /bearer {{ if ($http_authorization != \"Bearer t0ken-from-file\") {{ return 401; }} return 200; }}\n\
         location /hdr {{ if ($http_x_api_key != \"k3y\") {{ return 401; }} return 200; }}",
        pw.display(),
        page.display()
    ));
    (nginx, dir)
}

/// No secret in the result file or the report.
fn assert_secret_free(run: &common::Run, secrets: &[&str]) {
    let json = std::fs::read_to_string(&run.json).unwrap();
    for s in secrets {
        assert!(!json.contains(s), "{s} in the result: {json}");
        assert!(!run.stdout().contains(s), "{s} in the report: {}", run.stdout());
        assert!(!run.stderr().contains(s), "{s} on stderr: {}", run.stderr());
    }
}

#[test]
fn basic_auth_from_the_flag_or_the_url_passes_nginx_and_is_redacted() {
    let (nginx, _files) = nginx_auth();
    // Without credentials nginx says 401.
    let run = http(&[&nginx.url("/basic"), "-n", "3", "-c", "1"]);
    assert_eq!(run.result().measurements.status.get(&401), Some(&3), "{}", run.stdout());
    let run = http(&[&nginx.url("/basic"), "-n", "10", "-c", "2", "-a", "alice:s3cret"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(run.result().measurements.status.get(&200), Some(&10));
    // base64("alice:s3cret")
    assert_secret_free(&run, &["s3cret", "YWxpY2U6czNjcmV0"]);
    assert_eq!(
        run.result().measurements.requests.ok,
        10,
        "the plan's Authorization reads <redacted>"
    );
    let url = format!("http://alice:s3cret@127.0.0.1:{}/basic", nginx.port);
    let run = http(&[&url, "-n", "10", "-c", "2"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(run.result().measurements.status.get(&200), Some(&10));
    assert_secret_free(&run, &["s3cret", "YWxpY2U6czNjcmV0"]);
    assert!(run.stdout().contains(&format!("http://127.0.0.1:{}/basic", nginx.port)));
    // A wrong password is nginx's 401, counted as a failed check.
    let run = http(&[&nginx.url("/basic"), "-n", "4", "-c", "1", "-a", "alice:wrong"]);
    assert_eq!(run.result().measurements.status.get(&401), Some(&4));
    // Two sources of Authorization at once are refused.
    let o = common::output(throng().args(["http", &url, "-a", "bob:x", "-n", "1"]));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("both -a/--basic-auth and the URL's user:password@"),
        "{err}"
    );
    assert!(!err.contains("s3cret"), "{err}");
}

#[test]
fn bearer_file_and_header_file_keep_secrets_out_of_the_command_line() {
    let (nginx, _files) = nginx_auth();
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("token");
    std::fs::write(&token, "t0ken-from-file\n").unwrap();
    let run = http(&[
        &nginx.url("/bearer"),
        "-n",
        "8",
        "-c",
        "2",
        "--bearer-file",
        token.to_str().unwrap(),
    ]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(run.result().measurements.status.get(&200), Some(&8));
    assert_secret_free(&run, &["t0ken-from-file"]);

    let headers = dir.path().join("headers");
    std::fs::write(&headers, "# the key\nX-Api-Key: k3y\n\nAccept: */*\n").unwrap();
    let at = format!("@{}", headers.display());
    let run = http(&[&nginx.url("/hdr"), "-n", "8", "-c", "2", "-H", &at]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(run.result().measurements.status.get(&200), Some(&8));
    assert_secret_free(&run, &["k3y"]);
    let json = std::fs::read_to_string(&run.json).unwrap();
    assert!(json.contains("x-api-key"), "named among the secret headers: {json}");

    // A bad line says where it is.
    std::fs::write(&headers, "X-Ok: 1\nno colon here\n").unwrap();
    let o = common::output(throng().args(["http", &nginx.url("/"), "-n", "1", "-H", &at]));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains(&format!("{}:2", headers.display())), "{err}");
    let o = common::output(throng().args(["http", &nginx.url("/"), "-n", "1", "-H", "@/nonexistent/h"]));
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("-H @FILE /nonexistent/h: cannot read it"));
}

#[test]
fn a_scenario_reaches_every_address_and_refuses_a_proxy() {
    let lab = lab_on("[::1]:0");
    let port = lab.addr().port();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("s.yaml");
    std::fs::write(
        &file,
        format!(
            "target: http://localhost:{port}\nscenarios:\n  one:\n    executor: per-vu-iterations\n    vus: 2\n    \
             iterations: 3\n    flow:\n      - request: {{ name: r, path: / }}\n"
        ),
    )
    .unwrap();
    let json = dir.path().join("r.json");
    let o = common::output(
        throng()
            .arg("run")
            .arg(&file)
            .args(["-q", "--resolve"])
            .arg(format!("localhost:{port}:127.0.0.1,::1"))
            .arg("--json")
            .arg(&json),
    );
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let r = throng_result::RunResult::from_reader(std::fs::File::open(&json).unwrap()).unwrap();
    assert_books_balance(&r);
    assert_eq!(r.measurements.requests.ok, 6);
    let used: u64 = r.measurements.addresses.values().sum();
    assert_eq!(r.measurements.addresses[&format!("[::1]:{port}")], used);
    let o = common::output(throng().arg("run").arg(&file).args(["-x", "http://127.0.0.1:3128"]));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("throng run does not go through proxies yet"), "{err}");
}
