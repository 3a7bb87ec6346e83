//! `throng grpc` against a real gRPC server (grpcio, `grpc/grpc_server.py`,
//! service `grpc/tester.proto`): counts, gRPC statuses by name, deadlines,
//! metadata, TLS, imports, and the config errors (exit 2).

#![allow(clippy::unwrap_used)]

use crate::common;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use common::{Run, assert_books_balance, free_port, schema_violations, throng, wait_listening};
use throng_result::RunResult;

pub(crate) fn here(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cli/grpc").join(name)
}

/// The grpcio test server on a free loopback port; killed on drop.
pub(crate) struct GrpcServer {
    child: Child,
    pub(crate) addr: String,
    /// Where it logs each Call it handles (see [`GrpcServer::counting`]).
    calls: Option<(tempfile::TempDir, PathBuf)>,
}

impl GrpcServer {
    pub(crate) fn start(tls: Option<&Path>) -> GrpcServer {
        GrpcServer::spawn(tls, false, false)
    }

    /// One that also serves server reflection (grpc.reflection.v1alpha).
    pub(crate) fn reflecting(tls: Option<&Path>) -> GrpcServer {
        GrpcServer::spawn(tls, true, false)
    }

    /// One that counts the Calls it handles ([`GrpcServer::calls`]).
    pub(crate) fn counting(tls: Option<&Path>) -> GrpcServer {
        GrpcServer::spawn(tls, false, true)
    }

    /// One that compresses its replies with gzip (to clients that accept it).
    pub(crate) fn compressing() -> GrpcServer {
        GrpcServer::spawn_with(None, false, false, &[("GRPC_COMPRESSION", "gzip")])
    }

    /// One that compresses its replies with gzip and logs what it handled.
    pub(crate) fn compressing_counting() -> GrpcServer {
        GrpcServer::spawn_with(None, false, true, &[("GRPC_COMPRESSION", "gzip")])
    }

    /// One with gzip disabled (identity only) that logs what it handled: a
    /// call whose messages come compressed with gzip is UNIMPLEMENTED.
    pub(crate) fn without_gzip() -> GrpcServer {
        GrpcServer::spawn_with(None, false, true, &[("GRPC_COMPRESSION", "identity")])
    }

    /// The Calls that reached the server's handler so far.
    pub(crate) fn calls(&self) -> u64 {
        let (_, log) = self.calls.as_ref().expect("a GrpcServer::counting server");
        std::fs::read_to_string(log).unwrap_or_default().lines().count() as u64
    }

    /// What the server logged (a counting server): one line a Call,
    /// `upload N` / `chat N` for each client stream with the messages it read.
    pub(crate) fn log(&self) -> String {
        let (_, log) = self.calls.as_ref().expect("a GrpcServer::counting server");
        std::fs::read_to_string(log).unwrap_or_default()
    }

    fn spawn(tls: Option<&Path>, reflection: bool, counting: bool) -> GrpcServer {
        GrpcServer::spawn_with(tls, reflection, counting, &[])
    }

    fn spawn_with(tls: Option<&Path>, reflection: bool, counting: bool, env: &[(&str, &str)]) -> GrpcServer {
        let port = free_port();
        let mut cmd = Command::new("python3");
        cmd.envs(env.iter().copied());
        cmd.arg(here("grpc_server.py"));
        if reflection {
            cmd.arg("--reflection");
        }
        cmd.arg(port.to_string());
        if let Some(dir) = tls {
            cmd.arg(dir.join("server.pem")).arg(dir.join("server.key"));
        }
        let calls = counting.then(|| {
            let dir = tempfile::tempdir().unwrap();
            let log = dir.path().join("calls");
            cmd.env("GRPC_CALL_LOG", &log);
            (dir, log)
        });
        let child = cmd
            .env("GRPC_VERBOSITY", "NONE")
            .stdout(Stdio::null())
            .spawn()
            .expect("python3 runs (scripts/test.sh installs grpcio)");
        let server = GrpcServer {
            child,
            addr: format!("127.0.0.1:{port}"),
            calls,
        };
        wait_listening(server.addr.parse::<SocketAddr>().unwrap());
        server
    }
}

impl Drop for GrpcServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs `throng grpc ADDR --proto tester.proto --call Tester/Call ARGS
/// --json FILE` and reads the result.
fn grpc(addr: &str, args: &[&str]) -> Run {
    common::with_json(
        throng()
            .args(["grpc", addr, "--proto"])
            .arg(here("tester.proto"))
            .args(["--call", "throngtest.Tester/Call"])
            .args(args),
    )
}

/// A config error: exit 2, nothing run, stderr returned.
fn refused(args: &[&str]) -> String {
    let o = common::output(throng().args(args));
    let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(2), "stderr: {stderr}");
    stderr
}

#[test]
fn unary_calls_are_counted_ok_with_their_replies() {
    let server = GrpcServer::start(None);
    let run = grpc(
        &server.addr,
        &[
            "--plaintext",
            "--data",
            r#"{"name": "throng", "tag": {"key": "k", "values": ["a", "b"]}}"#,
            "-n",
            "300",
            "-c",
            "2",
            "--streams",
            "8",
            "-t",
            "1",
        ],
    );
    assert_eq!(run.code(), 0, "stderr: {}", run.stderr());
    let r = run.result();
    let m = &r.measurements;
    assert_books_balance(r);
    assert_eq!(m.requests.attempted, 300);
    assert_eq!(m.requests.ok, 300);
    assert_eq!(m.status.get(&0), Some(&300));
    // Each reply is one framed CallReply{message: "hello throng"}: 5 bytes
    // of prefix, 2 of field header, 12 of text. The server saw the name.
    assert_eq!(m.bytes.received_body, 19 * 300);
    assert_eq!(m.connections.ok, 2);
    assert_eq!(m.phases["response"].count(), 300);
    assert!(run.stdout().contains("grpc-status   OK=300"), "{}", run.stdout());
    assert!(run.stdout().starts_with("throng grpc 127.0.0.1:"), "{}", run.stdout());
    let violations = schema_violations(&run.json);
    assert!(violations.is_empty(), "{violations:?}");
    let plan = serde_json::from_slice::<serde_json::Value>(&std::fs::read(&run.json).unwrap()).unwrap();
    assert_eq!(plan["plan"]["grpc"]["call"], "throngtest.Tester/Call");
    assert_eq!(plan["plan"]["grpc"]["expect"], serde_json::json!([0]));
}

#[test]
fn other_statuses_are_check_failed_by_name_unless_expected() {
    let server = GrpcServer::start(None);
    let run = grpc(
        &server.addr,
        &[
            "--plaintext",
            "--data",
            r#"{"code": 14}"#,
            "-n",
            "120",
            "--streams",
            "4",
            "-t",
            "1",
        ],
    );
    assert_eq!(run.code(), 1, "stderr: {}", run.stderr());
    let m = &run.result().measurements;
    assert_books_balance(run.result());
    assert_eq!(m.requests.attempted, 120);
    assert_eq!(m.requests.ok, 0);
    assert_eq!(m.requests.errors.get("check_failed"), Some(&120));
    assert_eq!(m.status.get(&14), Some(&120));
    assert!(
        run.stdout().contains("grpc-status   UNAVAILABLE=120"),
        "{}",
        run.stdout()
    );
    assert!(run.stderr().contains("--expect-code"), "{}", run.stderr());

    let run = grpc(
        &server.addr,
        &[
            "--plaintext",
            "--data",
            r#"{"code": 5}"#,
            "--expect-code",
            "OK,NOT_FOUND",
            "-n",
            "50",
            "-t",
            "1",
        ],
    );
    assert_eq!(run.code(), 0, "stderr: {}", run.stderr());
    let m = &run.result().measurements;
    assert_eq!(m.requests.ok, 50);
    assert_eq!(m.status.get(&5), Some(&50));
}

#[test]
fn an_expired_deadline_is_grpc_deadline_exceeded_and_keeps_the_connection() {
    let server = GrpcServer::start(None);
    let run = grpc(
        &server.addr,
        &[
            "--plaintext",
            "--data",
            r#"{"sleep_ms": 600}"#,
            "--deadline",
            "100ms",
            "-n",
            "8",
            "--streams",
            "4",
            "-t",
            "1",
        ],
    );
    assert_eq!(run.code(), 1, "stderr: {}", run.stderr());
    let r = run.result();
    let m = &r.measurements;
    assert_books_balance(r);
    assert_eq!(m.requests.attempted, 8);
    assert_eq!(m.requests.errors.get("grpc.deadline_exceeded"), Some(&8));
    // A deadline ends one stream, not its connection.
    assert_eq!(m.connections.ok, 1);
    let violations = schema_violations(&run.json);
    assert!(violations.is_empty(), "{violations:?}");
}

#[test]
fn metadata_reaches_the_server() {
    let server = GrpcServer::start(None);
    let data = r#"{"need_metadata": "x-user"}"#;
    let run = grpc(
        &server.addr,
        &[
            "--plaintext",
            "--data",
            data,
            "--metadata",
            "X-User: 7",
            "--metadata",
            "authorization: Bearer s3cret-token",
            "-n",
            "40",
            "-t",
            "1",
        ],
    );
    assert_eq!(run.code(), 0, "stderr: {}", run.stderr());
    assert_eq!(run.result().measurements.requests.ok, 40);
    // The secret metadata never reaches the result file.
    let text = std::fs::read_to_string(&run.json).unwrap();
    assert!(!text.contains("s3cret-token"), "the token leaked into the result");
    assert!(text.contains("<redacted>"));
    let run = grpc(&server.addr, &["--plaintext", "--data", data, "-n", "40", "-t", "1"]);
    let m = &run.result().measurements;
    assert_eq!(m.requests.errors.get("check_failed"), Some(&40));
    assert_eq!(m.status.get(&9), Some(&40), "FAILED_PRECONDITION");
}

#[test]
fn tls_by_default_with_the_tls_flags() {
    let (_d, certs) = common::certs();
    let server = GrpcServer::start(Some(&certs));
    let ca = certs.join("ca.pem");
    let run = grpc(
        &server.addr,
        &[
            "--cacert",
            ca.to_str().unwrap(),
            "-n",
            "60",
            "--streams",
            "4",
            "-t",
            "1",
        ],
    );
    assert_eq!(run.code(), 0, "stderr: {}", run.stderr());
    let m = &run.result().measurements;
    assert_books_balance(run.result());
    assert_eq!(m.requests.ok, 60);
    assert_eq!(m.status.get(&0), Some(&60));
    assert_eq!(m.phases["tls"].count(), 1);
    // Without the CA the handshake fails: matrix::grpc_tls::fault.
}

#[test]
fn imports_are_found_by_import_path() {
    let server = GrpcServer::start(None);
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("a")).unwrap();
    std::fs::create_dir_all(dir.path().join("b")).unwrap();
    let proto = dir.path().join("a/tester.proto");
    std::fs::copy(here("tester.proto"), &proto).unwrap();
    std::fs::copy(here("common.proto"), dir.path().join("b/common.proto")).unwrap();
    let base = [
        "grpc",
        &server.addr,
        "--plaintext",
        "--call",
        "throngtest.Tester/Call",
        "-n",
        "5",
    ];
    let stderr = refused(&[&base[..], &["--proto", proto.to_str().unwrap()]].concat());
    assert!(stderr.contains("common.proto") && stderr.contains("-I"), "{stderr}");
    let o = common::output(
        throng()
            .args(base)
            .args(["--proto", proto.to_str().unwrap(), "-I"])
            .arg(dir.path().join("b"))
            .args(["--format", "json"]),
    );
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let r: RunResult = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(r.measurements.requests.ok, 5);
}

#[test]
fn config_errors_say_what_and_where_and_exit_2() {
    let proto = here("tester.proto");
    let proto = proto.to_str().unwrap();
    let base = ["grpc", "127.0.0.1:9", "--plaintext", "--proto", proto, "-n", "1"];
    let cases: [(&[&str], &str); 6] = [
        (&["--call", "throngtest.Tester"], "package.Service/Method"),
        (&["--call", "throngtest.Nope/Call"], "no service throngtest.Nope"),
        (&["--call", "throngtest.Tester/Nope"], "has no method Nope"),
        (
            &[
                "--call",
                "throngtest.Tester/Call",
                "--data",
                "{\"code\": 1,\n \"nope\": 2}",
            ],
            "--data (line 2, column 7)",
        ),
        (
            &["--call", "throngtest.Tester/Call", "--expect-code", "OK,SOMETIMES"],
            "SOMETIMES",
        ),
        (
            &["--call", "throngtest.Tester/Call", "--metadata", "grpc-timeout: 1S"],
            "grpc-timeout",
        ),
    ];
    for (extra, want) in cases {
        let stderr = refused(&[&base[..], extra].concat());
        assert!(stderr.contains(want), "{extra:?}: {stderr}");
    }
    let stderr = refused(&[
        "grpc",
        "127.0.0.1:9",
        "--proto",
        "/nonexistent/x.proto",
        "--call",
        "a.B/C",
    ]);
    assert!(stderr.contains("no such file"), "{stderr}");
    // A bad .proto file: where it is wrong.
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.proto");
    std::fs::write(&bad, "syntax = \"proto3\";\nmessage M {\n  strin x = 1;\n}\n").unwrap();
    let stderr = refused(&[
        "grpc",
        "127.0.0.1:9",
        "--proto",
        bad.to_str().unwrap(),
        "--call",
        "a.B/C",
    ]);
    assert!(stderr.contains("bad.proto:3:"), "{stderr}");
}

#[test]
fn a_proto_of_too_many_definitions_is_refused_before_it_is_compiled() {
    // 200,000 empty messages: 3.4 MB of text, gigabytes compiled.
    let dir = tempfile::tempdir().unwrap();
    let proto = dir.path().join("big.proto");
    let mut text = String::from("syntax = \"proto3\";\npackage big;\n");
    for i in 0..200_000 {
        text.push_str(&format!("message M{i}{{}}\n"));
    }
    std::fs::write(&proto, text).unwrap();
    let port = free_port().to_string();
    let ran = crate::hostile_results::run(&[
        "grpc",
        &format!("127.0.0.1:{port}"),
        "--plaintext",
        "--proto",
        proto.to_str().unwrap(),
        "--call",
        "big.S/M",
        "-n",
        "1",
    ]);
    assert_eq!(ran.code, 2, "{}{}", ran.stdout, ran.stderr);
    assert!(ran.stderr.contains("big.proto"), "{}", ran.stderr);
    assert!(ran.stderr.contains("more than 50000 definitions"), "{}", ran.stderr);
    assert!(ran.max_rss_kb < 100 * 1024, "peak {} kB", ran.max_rss_kb);
    // The same file in a scenario's proto: files.
    let yaml = dir.path().join("s.yaml");
    std::fs::write(
        &yaml,
        format!(
            "target: {{ url: 'http://127.0.0.1:{port}', http: 2 }}\nproto: {{ files: [big.proto] }}\nscenarios:\n  s:\n    \
             executor: per-vu-iterations\n    vus: 1\n    iterations: 1\n    flow:\n      - grpc: {{ call: big.S/M, \
             message: {{}} }}\n"
        ),
    )
    .unwrap();
    let ran = crate::hostile_results::run(&["run", yaml.to_str().unwrap()]);
    assert_eq!(ran.code, 2, "{}{}", ran.stdout, ran.stderr);
    assert!(ran.stderr.contains("more than 50000 definitions"), "{}", ran.stderr);
    assert!(ran.max_rss_kb < 100 * 1024, "peak {} kB", ran.max_rss_kb);
}
