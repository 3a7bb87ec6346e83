//! Files a user hands throng are bounded before they are parsed: size and
//! nesting of scenario and sweep files; a byte order mark is skipped; type
//! errors read as words.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Output;

use common::{lab, output, throng};

fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

fn err(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// `throng CMD FILE -q` (sweep takes no `-q`).
fn throng_on(cmd: &str, file: &Path) -> Output {
    let mut c = throng();
    c.arg(cmd).arg(file);
    if cmd == "run" {
        c.arg("-q");
    }
    output(&mut c)
}

#[test]
fn deep_files_are_refused_before_parsing_with_the_place() {
    let dir = tempfile::tempdir().unwrap();
    // 200 KB of '[': the YAML parser alone would spend tens of seconds.
    let flow = format!("target: {}\n", "[".repeat(200_000));
    let mut block = String::from("target: http://127.0.0.1:1\nscenarios:\n");
    for i in 0..100 {
        block.push_str(&format!("{}k{i}:\n", "  ".repeat(i + 1)));
    }
    for cmd in ["run", "sweep"] {
        let f = write(dir.path(), "deep.yaml", flow.as_bytes());
        let out = throng_on(cmd, &f);
        let e = err(&out);
        assert_eq!(out.status.code(), Some(2), "{cmd}: {e}");
        assert!(e.contains("deep.yaml:2:") || e.contains("deep.yaml:1:"), "{cmd}: {e}");
        assert!(e.contains("nested more than 64 levels deep"), "{cmd}: {e}");
        assert_eq!(e.trim().lines().count(), 1, "{e}");
        let f = write(dir.path(), "deep.yaml", block.as_bytes());
        let out = throng_on(cmd, &f);
        let e = err(&out);
        assert_eq!(out.status.code(), Some(2), "{cmd}: {e}");
        assert!(e.contains("deep.yaml:66:"), "{cmd}: the 64th level below the top: {e}");
    }
}

#[test]
fn large_files_are_refused_without_reading_them_whole() {
    let dir = tempfile::tempdir().unwrap();
    // A valid start, then comments past 4 MiB.
    let mut text = b"target: http://127.0.0.1:1\n".to_vec();
    while text.len() <= 4 << 20 {
        text.extend_from_slice(b"# padding padding padding padding padding padding padding padding\n");
    }
    let f = write(dir.path(), "big.yaml", &text);
    for cmd in ["run", "sweep"] {
        let out = throng_on(cmd, &f);
        let e = err(&out);
        assert_eq!(out.status.code(), Some(2), "{cmd}: {e}");
        assert!(e.contains("big.yaml' is larger than the limit of 4 MiB"), "{cmd}: {e}");
    }
    // An endless stream is read only to the limit (a hang would fail the
    // test at the common time limit).
    for cmd in ["run", "sweep"] {
        let out = throng_on(cmd, Path::new("/dev/zero"));
        assert_eq!(out.status.code(), Some(2), "{cmd}: {}", err(&out));
        assert!(err(&out).contains("larger than the limit"), "{cmd}: {}", err(&out));
    }
}

#[test]
fn endless_files_a_scenario_names_are_refused_at_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    // Its data file and its .proto file, each an endless stream: read up
    // to the limit, then refused with exit 2 (neither fills the memory).
    let data = "target: http://127.0.0.1:1\ndata: /dev/zero\nscenarios:\n  s:\n    executor: shared-iterations\n    \
                vus: 1\n    iterations: 1\n    flow:\n      - request: { path: / }\n";
    let proto = "target: { url: http://127.0.0.1:1, http: 2 }\nproto: { files: [/dev/zero] }\nscenarios:\n  s:\n    \
                 executor: shared-iterations\n    vus: 1\n    iterations: 1\n    flow:\n      - grpc: { call: a.B/C }\n";
    for (name, yaml) in [("data.yaml", data), ("proto.yaml", proto)] {
        let f = write(dir.path(), name, yaml.as_bytes());
        let runs = [
            output(throng().arg("run").arg(&f).arg("-q")),
            output(throng().args(["k8s", "job"]).arg(&f).args(["--parallelism", "2"])),
        ];
        for out in runs {
            assert_eq!(out.status.code(), Some(2), "{name}: {}", err(&out));
            assert!(
                err(&out).contains("/dev/zero") && err(&out).contains("larger than the limit of 256 MiB"),
                "{name}: {}",
                err(&out)
            );
        }
    }
}

#[test]
fn a_byte_order_mark_is_skipped() {
    let lab = lab(None);
    let dir = tempfile::tempdir().unwrap();
    let yaml = format!(
        "\u{feff}target: http://{}\nscenarios:\n  s:\n    executor: shared-iterations\n    vus: 1\n    \
         iterations: 3\n    flow:\n      - request: {{ name: r, path: / }}\n",
        lab.addr()
    );
    let f = write(dir.path(), "bom.yaml", yaml.as_bytes());
    let json = dir.path().join("r.json");
    let out = output(throng().arg("run").arg(&f).arg("-q").arg("--json").arg(&json));
    assert_eq!(out.status.code(), Some(0), "{}", err(&out));
    let r = throng_result::RunResult::from_reader(std::fs::File::open(&json).unwrap()).unwrap();
    assert_eq!(r.measurements.requests.ok, 3);
    common::assert_books_balance(&r);

    let sweep = format!(
        "\u{feff}parameters:\n  n: [1]\nrun: storm tcp://{} -n {{{{n}}}}\n",
        lab.addr()
    );
    let f = write(dir.path(), "bom-sweep.yaml", sweep.as_bytes());
    let out = throng_on("sweep", &f);
    assert_eq!(out.status.code(), Some(0), "{}", err(&out));
}

#[test]
fn type_errors_name_the_kind_of_value_in_words() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = |field: &str| {
        format!(
            "target: http://127.0.0.1:1\nscenarios:\n  s:\n    executor: constant-arrival-rate\n    {field}\n    \
             duration: 1s\n    pre_allocated_vus: 1\n    flow:\n      - request: {{ name: r, path: / }}\n"
        )
    };
    let cases = [
        (
            scenario("rate: fast"),
            "s.yaml:5:11: scenarios.s.rate: invalid type: string \"fast\", expected a number",
        ),
        (
            scenario("rate: 10\n    max_vus: -1"),
            "expected a whole number (0 or more)",
        ),
        (
            format!("{}tls:\n  insecure: maybe\n", scenario("rate: 1")),
            "expected true or false",
        ),
    ];
    for (text, needle) in cases {
        let f = write(dir.path(), "s.yaml", text.as_bytes());
        let out = throng_on("run", &f);
        let e = err(&out);
        assert_eq!(out.status.code(), Some(2), "{e}");
        assert!(e.contains(needle), "'{needle}' not in {e}");
        assert!(
            !e.contains("f64") && !e.contains("u64") && !e.contains("a boolean"),
            "{e}"
        );
    }
    let sweep = write(
        dir.path(),
        "w.yaml",
        b"parameters: {n: [1]}\nrun: storm tcp://x:1\nrepeat: often\n",
    );
    let out = throng_on("sweep", &sweep);
    assert_eq!(out.status.code(), Some(2), "{}", err(&out));
    assert!(
        err(&out).contains("expected a whole number (0 or more)"),
        "{}",
        err(&out)
    );
}
