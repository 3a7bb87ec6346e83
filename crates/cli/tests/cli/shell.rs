//! Install and shell: completion scripts and man pages generated from the
//! clap definitions, checked by the shells and formatters that read them.

#![allow(clippy::unwrap_used)]

use crate::common;

use std::process::Command;

use common::{assert_books_balance, lab, output, throng};
use throng_result::{Document, RunResult};

/// The subcommands `throng --help` lists (its own words, so a new command
/// is checked without touching this test), without `help`.
fn subcommands() -> Vec<String> {
    let out = output(throng().arg("--help"));
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let section = text.split("Commands:\n").nth(1).unwrap().split("\n\n").next().unwrap();
    let names: Vec<String> = section
        .lines()
        .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
        .map(|l| l.split_whitespace().next().unwrap().to_string())
        .filter(|n| n != "help")
        .collect();
    assert!(names.len() >= 13, "too few subcommands read from --help: {names:?}");
    assert!(names.iter().any(|n| n == "http") && names.iter().any(|n| n == "man"));
    names
}

fn have(program: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn bash_completion_parses_and_names_every_subcommand() {
    let out = output(throng().args(["completions", "bash"]));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let script = String::from_utf8(out.stdout).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("throng.bash");
    std::fs::write(&path, &script).unwrap();
    let check = output(Command::new("bash").arg("-n").arg(&path));
    assert!(
        check.status.success(),
        "bash -n: {}",
        String::from_utf8_lossy(&check.stderr)
    );
    let top = script
        .lines()
        .find(|l| l.contains("opts=\"-h -V"))
        .expect("the top level's word list");
    for sub in subcommands() {
        // Offered as a word at the top level, and completed past it.
        assert!(top.split([' ', '"']).any(|w| w == sub), "{sub} not offered: {top}");
        assert!(
            script.contains(&format!("cmd=\"throng__subcmd__{sub}\"")),
            "no completion for {sub}"
        );
    }
    // A flag of a subcommand is offered too.
    assert!(script.contains("--csv-requests"));
}

#[test]
fn every_shell_gets_a_script_and_an_unknown_one_is_usage() {
    for shell in ["bash", "zsh", "fish", "powershell", "elvish"] {
        let out = output(throng().args(["completions", shell]));
        assert!(
            out.status.success(),
            "{shell}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let script = String::from_utf8(out.stdout).unwrap();
        assert!(
            script.contains("storm") && script.contains("rate"),
            "{shell} script lacks storm/--rate"
        );
    }
    if have("zsh") {
        let out = output(throng().args(["completions", "zsh"]));
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("_throng");
        std::fs::write(&path, out.stdout).unwrap();
        let check = output(Command::new("zsh").arg("-n").arg(&path));
        assert!(
            check.status.success(),
            "zsh -n: {}",
            String::from_utf8_lossy(&check.stderr)
        );
    }
    let out = output(throng().args(["completions", "tcsh"]));
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("tcsh"));
}

#[test]
fn man_writes_one_page_per_subcommand_that_renders() {
    let dir = tempfile::tempdir().unwrap();
    let pages = dir.path().join("man1");
    let out = output(throng().arg("man").arg(&pages));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let mut expected: Vec<String> = subcommands().iter().map(|s| format!("throng-{s}.1")).collect();
    expected.push("throng.1".into());
    expected.push("throng-k8s-job.1".into());
    expected.push("throng-k8s-run.1".into());
    for sub in ["add", "report", "list"] {
        expected.push(format!("throng-history-{sub}.1"));
    }
    let mut written: Vec<String> = std::fs::read_dir(&pages)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    written.sort();
    expected.sort();
    assert_eq!(written, expected);
    for name in &written {
        let roff = std::fs::read_to_string(pages.join(name)).unwrap();
        let title = name.trim_end_matches(".1");
        assert!(roff.starts_with(".ie") || roff.contains(".TH"), "{name} has no .TH");
        assert!(roff.contains(&format!(".TH {title} 1")), "{name} is not titled {title}");
    }
    let top = std::fs::read_to_string(pages.join("throng.1")).unwrap();
    for sub in subcommands() {
        assert!(
            top.contains(&format!("throng\\-{sub}(1)")),
            "throng.1 does not name {sub}"
        );
    }
    // Render with groff (man -l uses it); the text carries a flag's help.
    if have("groff") {
        let text = output(
            Command::new("groff")
                .args(["-man", "-Tutf8"])
                .arg(pages.join("throng-http.1")),
        );
        assert!(text.status.success(), "{}", String::from_utf8_lossy(&text.stderr));
        assert!(
            !String::from_utf8_lossy(&text.stderr).contains("warning"),
            "groff: {}",
            String::from_utf8_lossy(&text.stderr)
        );
        let text = String::from_utf8_lossy(&text.stdout);
        assert!(text.contains("throng-http") && text.contains("connections"), "{text}");
    }
}

#[test]
fn json_dash_puts_the_result_on_stdout_and_the_report_on_stderr() {
    let server = lab(None);
    let url = format!("http://{}/", server.addr());
    let out = output(throng().args(["http", &url, "-n", "40", "-c", "2", "--json", "-", "-q"]));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let r = RunResult::from_reader(out.stdout.as_slice()).expect("stdout is exactly one result document");
    assert_eq!(r.measurements.requests.ok, 40);
    assert_books_balance(&r);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("requests") && err.contains("latency"),
        "the text report is on stderr: {err}"
    );
    // No file named '-' was made.
    assert!(!std::path::Path::new("-").exists());

    // With --repeat, stdout holds the result set.
    let out = output(throng().args([
        "http", &url, "-n", "10", "-c", "1", "--repeat", "2", "--json", "-", "-q",
    ]));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let Document::Set(set) = Document::from_reader(out.stdout.as_slice()).expect("a document") else {
        panic!("stdout is not a result set");
    };
    assert_eq!(set.runs.len(), 2);
    assert!(set.runs.iter().all(|r| r.measurements.requests.ok == 10));
}

#[test]
#[ignore = "a release build for the musl target takes minutes; THRONG_TEST_STATIC=1 scripts/test.sh runs it (needs rustup's musl target and musl-gcc)"]
fn static_binary() {
    // Alone: a release build takes both cores for minutes.
    let _alone = common::heavy();
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    // Not through `output`: the build takes longer than one run's limit; it has its own.
    let built = Command::new("timeout")
        .arg("3600")
        .arg("sh")
        .arg(root.join("scripts/build-static.sh"))
        .current_dir(&root)
        .output()
        .unwrap();
    assert!(built.status.success(), "{}", String::from_utf8_lossy(&built.stderr));
    let bin = root.join("target/x86_64-unknown-linux-musl/release/throng");
    let file = output(Command::new("file").arg("-L").arg(&bin));
    let file = String::from_utf8_lossy(&file.stdout);
    // Rust links musl binaries as static PIEs; `file` says "static-pie linked".
    assert!(
        file.contains("statically linked") || file.contains("static-pie linked"),
        "file: {file}"
    );
    let ldd = output(Command::new("ldd").arg(&bin));
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&ldd.stdout),
        String::from_utf8_lossy(&ldd.stderr)
    );
    assert!(
        said.contains("not a dynamic executable") || said.contains("statically linked"),
        "ldd: {said}"
    );
    assert!(!said.contains("libc.so"), "ldd: {said}");
    // And it runs.
    let v = output(Command::new(&bin).arg("--version"));
    assert!(v.status.success() && String::from_utf8_lossy(&v.stdout).starts_with("throng "));
}

/// What the help offers is what the command takes: every storm scheme is
/// listed, `--http3` does not say it refuses `-r` (it takes it), `run`
/// does not offer `-x` (it refuses a proxy, saying what to use instead),
/// and the commands' one-line summaries name what each speaks.
#[test]
fn help_offers_what_the_commands_take() {
    let help = |args: &[&str]| String::from_utf8(output(throng().args(args)).stdout).unwrap();
    let storm = help(&["storm", "--help"]);
    for scheme in ["tcp://", "tls://", "https://", "nats://", "ws(s)://"] {
        assert!(storm.contains(scheme), "{scheme} in storm --help:\n{storm}");
    }
    let http = help(&["http", "--help"]);
    assert!(http.contains("--http3"), "{http}");
    assert!(!http.contains("no -r"), "{http}");
    let run = help(&["run", "--help"]);
    assert!(!run.contains("--proxy"), "{run}");
    assert!(run.contains("--connect-to"), "{run}");
    let top = help(&["--help"]);
    assert!(top.contains("HTTP/2, HTTP/3"), "{top}");
    assert!(top.contains("bidirectional streaming"), "{top}");
    assert!(top.contains("WebSocket or MQTT"), "{top}");
    assert!(top.contains("k8s run"), "{top}");
    // clap turns "{n}" in a help text into a line break: no help may show
    // a placeholder broken in two (the MQTT topic's {{n}} once was).
    let names: Vec<String> = top
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| !l.starts_with("Options:"))
        .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect();
    assert!(names.len() >= 20 && names.iter().any(|n| n == "mqtt"), "{names:?}");
    for name in names.iter().filter(|n| *n != "help") {
        let long = help(&[name, "--help"]);
        for line in long.lines() {
            let line = line.trim();
            assert!(
                !line.ends_with('{') && !line.starts_with('}'),
                "{name} --help breaks a placeholder: {line}"
            );
        }
    }
    let mqtt = help(&["mqtt", "--help"]);
    for said in ["[default: throng/{{n}}]", "{{n}} stands for", "--topic 'bench/{{n}}'"] {
        assert!(mqtt.contains(said), "{said} in:\n{mqtt}");
    }
    // -h fits a screen with the flags people use; --help is the whole
    // reference, examples first.
    for cmd in ["http", "storm", "run", "grpc"] {
        let short = help(&[cmd, "-h"]);
        assert!(
            short.lines().count() <= 60,
            "{cmd} -h: {} lines\n{short}",
            short.lines().count()
        );
        assert!(short.contains("--json"), "{cmd} -h:\n{short}");
        assert!(!short.contains("--csv-requests"), "{cmd} -h:\n{short}");
        let long = help(&[cmd, "--help"]);
        assert!(long.contains("--csv-requests"), "{cmd} --help");
    }
    let short = help(&["http", "-h"]);
    for flag in [
        "-c, --connections",
        "-n, --requests",
        "-d, --duration",
        "-r, --rate",
        "--data",
        "-k, --insecure",
    ] {
        assert!(short.contains(flag), "{flag} in http -h:\n{short}");
    }
    assert!(help(&["http", "--help"]).starts_with("Examples:"));
}
