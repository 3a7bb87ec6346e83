//! gRPC replies that a gRPC client rejects, from `throng serve --fault
//! grpc-*` (h2c): each is its `grpc.*` class for `throng grpc` and for a
//! scenario's `grpc:` step, never `OK`, with balanced books; a 4 GiB
//! length prefix allocates nothing of the sort.

#![allow(clippy::unwrap_used)]

use crate::common;
use crate::grpc::here;

use common::{FaultServer, Run, assert_books_balance, throng};
use throng_result::RunResult;

/// Each fault and the class its calls must end in.
const FAULTS: [(&str, &str); 8] = [
    ("grpc-not-protobuf", "grpc.decode"),
    ("grpc-html", "grpc.content_type"),
    ("grpc-huge-prefix", "grpc.too_large"),
    ("grpc-half-message", "grpc.framing"),
    ("grpc-compressed", "grpc.compressed"),
    ("grpc-reserved-flags", "grpc.framing"),
    ("grpc-two-messages", "grpc.cardinality"),
    ("grpc-no-message", "grpc.cardinality"),
];

fn call(addr: &str, n: &str) -> Run {
    common::with_json(
        throng()
            .args(["grpc", addr, "--plaintext", "--proto"])
            .arg(here("tester.proto"))
            .args(["--call", "throngtest.Tester/Call", "--data", r#"{"name": "x"}"#])
            .args(["-n", n, "--streams", "2", "-t", "2"]),
    )
}

#[test]
fn each_reply_a_grpc_client_rejects_is_its_class() {
    for (fault, class) in FAULTS {
        let lab = FaultServer::start(fault);
        let run = call(&lab.addr(), "12");
        assert_eq!(run.code(), 1, "{fault}: stderr: {}", run.stderr());
        let r = run.result();
        assert_books_balance(r);
        let m = &r.measurements;
        assert_eq!(m.requests.attempted, 12, "{fault}");
        assert_eq!(m.requests.ok, 0, "{fault}: {:?}", m.requests);
        assert_eq!(
            m.requests.errors.get(class),
            Some(&12),
            "{fault}: {:?}",
            m.requests.errors
        );
        assert!(run.stdout().contains(class), "{fault}: {}", run.stdout());
        assert!(
            run.stderr().contains("replies a gRPC client rejects"),
            "{fault}: {}",
            run.stderr()
        );
    }
}

#[test]
fn a_four_gib_prefix_allocates_nothing_like_it() {
    let lab = FaultServer::start("grpc-huge-prefix");
    let proto = here("tester.proto");
    let ran = crate::hostile_results::run(&[
        "grpc",
        &lab.addr(),
        "--plaintext",
        "--proto",
        proto.to_str().unwrap(),
        "--call",
        "throngtest.Tester/Call",
        "-n",
        "50",
        "--streams",
        "10",
        "--quiet",
    ]);
    assert_eq!(ran.code, 1, "{}{}", ran.stdout, ran.stderr);
    assert!(ran.max_rss_kb < 64 * 1024, "peak {} kB", ran.max_rss_kb);
}

#[test]
fn a_scenario_grpc_step_counts_the_same_classes() {
    for (fault, class) in [FAULTS[0], FAULTS[2], FAULTS[6], FAULTS[7]] {
        let lab = FaultServer::start(fault);
        let dir = tempfile::tempdir().unwrap();
        std::fs::copy(here("tester.proto"), dir.path().join("tester.proto")).unwrap();
        std::fs::copy(here("common.proto"), dir.path().join("common.proto")).unwrap();
        let file = dir.path().join("scenario.yaml");
        std::fs::write(
            &file,
            format!(
                "target: {{ url: 'http://{}', http: 2 }}\nproto: {{ files: [tester.proto] }}\n\
                 scenarios:\n  calls:\n    executor: per-vu-iterations\n    vus: 2\n    iterations: 5\n    \
                 max_duration: 30s\n    flow:\n      - grpc:\n          name: hello\n          \
                 call: throngtest.Tester/Call\n          message: {{ name: x }}\n          \
                 check:\n            greets: {{ json: /message, exists: true }}\n",
                lab.addr()
            ),
        )
        .unwrap();
        let json = dir.path().join("result.json");
        let out = common::output(
            throng()
                .arg("run")
                .arg(&file)
                .arg("--json")
                .arg(&json)
                .args(["--threads", "1"]),
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{fault}: {stderr}");
        let r = RunResult::from_reader(std::fs::File::open(&json).unwrap()).unwrap();
        assert_books_balance(&r);
        let m = &r.measurements;
        assert_eq!(
            (m.requests.attempted, m.requests.ok),
            (10, 0),
            "{fault}: {:?}",
            m.requests
        );
        assert_eq!(
            m.requests.errors.get(class),
            Some(&10),
            "{fault}: {:?}",
            m.requests.errors
        );
    }
}
