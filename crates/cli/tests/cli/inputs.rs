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

/// Runs `throng ARGS` under GNU time: its output and its peak resident
/// memory in bytes.
fn measured(args: &[&str]) -> (Output, u64) {
    let dir = tempfile::tempdir().unwrap();
    let rss = dir.path().join("rss");
    let out = output(
        std::process::Command::new("/usr/bin/time")
            .args(["-f", "%M", "-o"])
            .arg(&rss)
            .arg(env!("CARGO_BIN_EXE_throng"))
            .args(args),
    );
    let kib: u64 = std::fs::read_to_string(&rss)
        .unwrap()
        .lines()
        .last()
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    (out, kib * 1024)
}

#[test]
fn every_file_flag_reads_an_endless_file_only_to_its_limit() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let o = output(throng().args(["certs", "--out"]).arg(d.join("c")));
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    let pem = d.join("c/client.pem").display().to_string();
    let key = d.join("c/client.key").display().to_string();
    // A serve --tls directory whose certificate is endless.
    std::fs::create_dir_all(d.join("srv")).unwrap();
    std::os::unix::fs::symlink("/dev/zero", d.join("srv/server.pem")).unwrap();
    std::fs::copy(d.join("c/server.key"), d.join("srv/server.key")).unwrap();
    let srv = d.join("srv").display().to_string();
    // A scenario whose tls: block names it.
    let yaml = "target: https://127.0.0.1:1\ntls: { cacert: /dev/zero }\nscenarios:\n  s:\n    executor: \
                shared-iterations\n    vus: 1\n    iterations: 1\n    flow:\n      - request: { path: / }\n";
    let scenario = write(d, "s.yaml", yaml.as_bytes()).display().to_string();
    // A .proto file importing an endless one.
    write(d, "a.proto", b"syntax = \"proto3\";\nimport \"z.proto\";\n");
    std::os::unix::fs::symlink("/dev/zero", d.join("z.proto")).unwrap();
    let a_proto = d.join("a.proto").display().to_string();
    let port = common::free_port().to_string();
    let listen = format!("127.0.0.1:{port}");
    let grpc = ["grpc", "127.0.0.1:1", "--plaintext", "--call", "a.B/C", "-n", "1"];
    let http = ["http", "https://127.0.0.1:1/", "-n", "1", "-q"];
    const MIB: u64 = 1 << 20;
    // (the command, the file named in the error, the limit said, the
    // memory it may take at most)
    let cases: Vec<(Vec<&str>, &str, &str, u64)> = vec![
        (
            [&http[..], &["--cacert", "/dev/zero"]].concat(),
            "--cacert /dev/zero",
            "1 MiB",
            64 * MIB,
        ),
        (
            [&http[..], &["--cert", "/dev/zero", "--key", &key]].concat(),
            "--cert /dev/zero",
            "1 MiB",
            64 * MIB,
        ),
        (
            [&http[..], &["--cert", &pem, "--key", "/dev/zero"]].concat(),
            "--key /dev/zero",
            "1 MiB",
            64 * MIB,
        ),
        (
            vec![
                "storm",
                "nats://127.0.0.1:1",
                "--count",
                "1",
                "--nats-creds",
                "/dev/zero",
            ],
            "--nats-creds /dev/zero",
            "1 MiB",
            64 * MIB,
        ),
        (
            vec!["run", &scenario, "-q"],
            "tls: --cacert /dev/zero",
            "1 MiB",
            64 * MIB,
        ),
        (
            [&grpc[..], &["--proto", &a_proto]].concat(),
            "z.proto",
            "4 MiB",
            64 * MIB,
        ),
        (
            [&grpc[..], &["--proto", "/dev/zero"]].concat(),
            "--proto /dev/zero",
            "4 MiB",
            64 * MIB,
        ),
        (
            vec!["serve", "--listen", &listen, "--tls", &srv],
            "--tls",
            "1 MiB",
            64 * MIB,
        ),
        (
            [&http[..], &["--data", "@/dev/zero"]].concat(),
            "--data /dev/zero",
            "64 MiB",
            256 * MIB,
        ),
        (
            [&http[..], &["-H", "@/dev/zero"]].concat(),
            "-H @FILE /dev/zero",
            "1 MiB",
            64 * MIB,
        ),
        (
            [&http[..], &["--bearer-file", "/dev/zero"]].concat(),
            "--bearer-file /dev/zero",
            "1 MiB",
            64 * MIB,
        ),
        (
            [&http[..], &["--body-lines", "/dev/zero"]].concat(),
            "--body-lines /dev/zero",
            "64 MiB",
            256 * MIB,
        ),
        (
            vec![
                "storm",
                "tcp://127.0.0.1:1",
                "--count",
                "1",
                "--send-binary",
                "@/dev/zero",
            ],
            "--send-binary @/dev/zero",
            "1 MiB",
            64 * MIB,
        ),
    ];
    for (args, named, limit, memory) in cases {
        let (out, peak) = measured(&args);
        let e = err(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {e}");
        assert!(e.contains(named), "{args:?}: '{named}' not in {e}");
        assert!(e.contains(limit), "{args:?}: '{limit}' not in {e}");
        assert_eq!(e.trim().lines().count(), 1, "{args:?}: {e}");
        assert!(peak < memory, "{args:?}: peak memory {peak} bytes");
    }
}

#[test]
fn result_files_past_their_limit_are_refused_unread() {
    let dir = tempfile::tempdir().unwrap();
    // A sparse file of 1 GiB and a byte: refused by its size.
    let big = dir.path().join("big.json");
    std::fs::File::create(&big).unwrap().set_len((1 << 30) + 1).unwrap();
    for cmd in ["report", "compare", "merge"] {
        let mut c = throng();
        c.arg(cmd).arg(&big);
        match cmd {
            "compare" => c.arg(&big),
            "merge" => c.arg(&big).arg("-o").arg(dir.path().join("m.json")),
            _ => &mut c,
        };
        let out = output(&mut c);
        assert_eq!(out.status.code(), Some(2), "{cmd:?}: {}", err(&out));
        assert!(
            err(&out).contains("larger than the limit of 1 GiB"),
            "{cmd:?}: {}",
            err(&out)
        );
    }
}
