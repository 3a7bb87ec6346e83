//! The release's packages, built by the script the release workflow runs
//! (scripts/package.sh) from the debug binary the tests already built: the
//! tarball holds what `cargo binstall` and the Homebrew formula look for,
//! the formula renders with the tarballs' sha256 and is valid Ruby, and the
//! .deb installs with dpkg, runs, has its man pages found by `man`, and
//! removes cleanly. The names of the assets agree between the workflow, the
//! binstall metadata, the formula and the script.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use crate::common::output;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

fn text(o: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// `scripts/package.sh ARGS`, which must succeed; its stdout.
fn package_sh(args: &[&str]) -> String {
    let out = output(Command::new("sh").arg(repo().join("scripts/package.sh")).args(args));
    assert!(
        out.status.success(),
        "scripts/package.sh {args:?} failed:\n{}",
        text(&out)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The assets' names scripts/package.sh gives a target: tarball, dir, deb.
fn names(target: &str) -> BTreeMap<String, String> {
    package_sh(&["names", target, env!("CARGO_PKG_VERSION")])
        .lines()
        .filter_map(|l| l.split_once(' '))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// The `key = "value"` pairs of one `[section]` of a TOML file: the subset
/// of TOML the binstall metadata is written in (strings, one a line).
fn toml_section(toml: &str, section: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut inside = false;
    for line in toml.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            inside = line == format!("[{section}]");
            continue;
        }
        if !inside {
            continue;
        }
        if let Some((key, value)) = line.split_once('=')
            && let Some(value) = value.trim().strip_prefix('"').and_then(|v| v.strip_suffix('"'))
        {
            out.insert(key.trim().to_string(), value.to_string());
        }
    }
    out
}

/// A binstall template (`{ name }-{ version }`) with its variables filled;
/// a variable it does not know fails the test.
fn render(template: &str, vars: &BTreeMap<&str, &str>) -> String {
    let mut out = String::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let close = rest[open..]
            .find('}')
            .unwrap_or_else(|| panic!("unclosed {{ in {template}"))
            + open;
        let name = rest[open + 1..close].trim();
        let value = vars
            .get(name)
            .unwrap_or_else(|| panic!("binstall variable {{ {name} }} in {template} is not one this test knows"));
        out.push_str(value);
        rest = &rest[close + 1..];
    }
    out.push_str(rest);
    out
}

/// The targets the release workflow builds (its matrix).
fn workflow_targets() -> Vec<String> {
    let yaml: serde_yaml_ng::Value =
        serde_yaml_ng::from_str(&read(&repo().join(".github/workflows/release.yml"))).unwrap();
    let include = &yaml["jobs"]["build"]["strategy"]["matrix"]["include"];
    let targets: Vec<String> = include
        .as_sequence()
        .expect("release.yml: jobs.build.strategy.matrix.include is a list")
        .iter()
        .map(|row| {
            row["target"]
                .as_str()
                .expect("each matrix row has a target")
                .to_string()
        })
        .collect();
    assert!(!targets.is_empty(), "release.yml builds no target");
    targets
}

/// What a release publishes and what installs it agree: for every target
/// the workflow builds, the binstall pkg-url is the release URL of the
/// tarball scripts/package.sh makes, and bin-dir the binary in it; the
/// glibc targets' overrides fetch a built musl tarball; the Homebrew
/// formula's URLs are those tarballs'; and the workflow packages with the
/// script and uploads what it makes.
#[test]
fn binstall_names_the_release_assets() {
    let cargo = read(&repo().join("crates/cli/Cargo.toml"));
    let version = env!("CARGO_PKG_VERSION");
    let repository = env!("CARGO_PKG_REPOSITORY");
    assert_eq!(repository, "https://github.com/throng-rs/throng");
    let base = toml_section(&cargo, "package.metadata.binstall");
    assert_eq!(base.get("pkg-fmt").map(String::as_str), Some("tgz"), "{base:?}");
    let targets = workflow_targets();
    let release = format!("{repository}/releases/download/v{version}");
    let check = |host: &str, meta: &BTreeMap<String, String>, built: &str| {
        let vars: BTreeMap<&str, &str> = [
            ("name", "throng"),
            ("version", version),
            ("repo", repository),
            ("target", host),
            ("bin", "throng"),
            ("binary-ext", ""),
        ]
        .into();
        let n = names(built);
        let url = render(&meta["pkg-url"], &vars);
        assert_eq!(
            url,
            format!("{release}/{}", n["tarball"]),
            "binstall pkg-url for {host}"
        );
        let bin = render(&meta["bin-dir"], &vars);
        assert_eq!(bin, format!("{}/throng", n["dir"]), "binstall bin-dir for {host}");
    };
    for target in &targets {
        assert!(
            target.ends_with("-unknown-linux-musl"),
            "{target}: the release builds static musl binaries"
        );
        check(target, &base, target);
        // A glibc host fetches the static musl tarball of its architecture.
        let arch = target.split('-').next().unwrap();
        let gnu = format!("{arch}-unknown-linux-gnu");
        let mut over = base.clone();
        over.extend(toml_section(
            &cargo,
            &format!("package.metadata.binstall.overrides.{gnu}"),
        ));
        assert_ne!(over["pkg-url"], base["pkg-url"], "no binstall override for {gnu}");
        check(&gnu, &over, target);
    }

    let formula = read(&repo().join("packaging/homebrew/throng.rb.in")).replace("@VERSION@", version);
    let urls: Vec<&str> = formula
        .lines()
        .filter_map(|l| l.trim().strip_prefix("url \""))
        .map(|u| u.trim_end_matches('"'))
        .collect();
    let mut want: Vec<String> = targets
        .iter()
        .map(|t| format!("{release}/{}", names(t)["tarball"]))
        .collect();
    let mut have: Vec<String> = urls.iter().map(|u| u.to_string()).collect();
    want.sort();
    have.sort();
    assert_eq!(have, want, "the Homebrew formula's urls");

    let workflow = read(&repo().join(".github/workflows/release.yml"));
    for step in [
        "scripts/package.sh dist --target \"${{ matrix.target }}\" --out dist",
        "scripts/package.sh checksums dist",
        "scripts/package.sh homebrew dist",
        "dist/*.tar.gz dist/*.deb dist/SHA256SUMS dist/throng.rb",
    ] {
        assert!(workflow.contains(step), "release.yml no longer runs or uploads: {step}");
    }
}

/// The template reader and filler the check above rests on.
#[test]
fn binstall_templates_read_and_fill() {
    let toml = "[a]\nk = \"v\"\n[a.b]\nk = \"w\"\nn = 1\n";
    assert_eq!(toml_section(toml, "a")["k"], "v");
    assert_eq!(toml_section(toml, "a.b")["k"], "w");
    assert!(!toml_section(toml, "a.b").contains_key("n"));
    let vars: BTreeMap<&str, &str> = [("name", "t"), ("version", "1")].into();
    assert_eq!(render("{ name }-{version}.tgz", &vars), "t-1.tgz");
    let unknown = std::panic::catch_unwind(|| render("{ nope }", &vars));
    assert!(unknown.is_err(), "an unknown variable must fail");
    let n = names("aarch64-unknown-linux-musl");
    assert_eq!(n["deb"], format!("throng_{}-1_arm64.deb", env!("CARGO_PKG_VERSION")));
}

/// The packages of the debug binary, built once per test process into a
/// scratch directory: (directory, tarball, .deb).
fn dist() -> &'static (tempfile::TempDir, PathBuf, PathBuf) {
    static DIST: OnceLock<(tempfile::TempDir, PathBuf, PathBuf)> = OnceLock::new();
    DIST.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let out = package_sh(&[
            "dist",
            "--profile",
            "dev",
            "--fast",
            "--out",
            dir.path().to_str().unwrap(),
        ]);
        let made: Vec<PathBuf> = out.lines().map(PathBuf::from).collect();
        let tarball = made
            .iter()
            .find(|p| p.to_string_lossy().ends_with(".tar.gz"))
            .unwrap()
            .clone();
        let deb = made
            .iter()
            .find(|p| p.to_string_lossy().ends_with(".deb"))
            .unwrap()
            .clone();
        (dir, tarball, deb)
    })
}

/// The tarball holds, in one directory named as binstall expects, the
/// binary, the licences, the README, every man page and the completions;
/// the checksums file verifies; the Homebrew formula rendered from it
/// carries its sha256 and is valid Ruby.
#[test]
#[ignore = "needs cargo-deb and ruby (scripts/test.sh installs both)"]
fn tarball_checksums_and_homebrew_formula() {
    let (_dir, tarball, _) = dist();
    let host_target = tarball
        .file_name()
        .unwrap()
        .to_string_lossy()
        .trim_start_matches(&format!("throng-{}-", env!("CARGO_PKG_VERSION")))
        .trim_end_matches(".tar.gz")
        .to_string();
    let n = names(&host_target);
    let list = output(Command::new("tar").arg("tzf").arg(tarball));
    assert!(list.status.success(), "{}", text(&list));
    let list = String::from_utf8_lossy(&list.stdout);
    for file in [
        "throng",
        "README.md",
        "LICENSE-MIT",
        "LICENSE-APACHE",
        "man/throng.1",
        "man/throng-http.1",
        "man/throng-k8s-job.1",
        "completions/throng.bash",
        "completions/_throng",
        "completions/throng.fish",
    ] {
        let path = format!("{}/{file}", n["dir"]);
        assert!(list.lines().any(|l| l == path), "the tarball lacks {path}:\n{list}");
    }
    assert!(!list.contains("storm-part"), "a hidden command got a man page:\n{list}");

    // The release's two tarballs, here both the locally built one.
    let rel = tempfile::tempdir().unwrap();
    let bytes = std::fs::read(tarball).unwrap();
    for target in workflow_targets() {
        std::fs::write(rel.path().join(&names(&target)["tarball"]), &bytes).unwrap();
    }
    let sums = rel.path().to_str().unwrap();
    package_sh(&["checksums", sums]);
    let verify = output(
        Command::new("sha256sum")
            .arg("-c")
            .arg("SHA256SUMS")
            .current_dir(rel.path()),
    );
    assert!(verify.status.success(), "sha256sum -c: {}", text(&verify));
    let sum = output(Command::new("sha256sum").arg(tarball));
    let sum = String::from_utf8_lossy(&sum.stdout)
        .split_whitespace()
        .next()
        .unwrap()
        .to_string();
    assert_eq!(sum.len(), 64);

    package_sh(&["homebrew", sums]);
    let formula = read(&rel.path().join("throng.rb"));
    assert_eq!(formula.matches(&format!("sha256 \"{sum}\"")).count(), 2, "{formula}");
    assert!(formula.contains(&format!("version \"{}\"", env!("CARGO_PKG_VERSION"))));
    assert!(!formula.contains('@'), "a placeholder is left:\n{formula}");
    let ruby = output(Command::new("ruby").arg("-c").arg(rel.path().join("throng.rb")));
    assert!(
        ruby.status.success() && text(&ruby).contains("Syntax OK"),
        "ruby -c throng.rb: {}",
        text(&ruby)
    );

    // Without the checksums file the formula is not rendered: it says why.
    std::fs::remove_file(rel.path().join("SHA256SUMS")).unwrap();
    let out = output(
        Command::new("sh")
            .arg(repo().join("scripts/package.sh"))
            .args(["homebrew", sums]),
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("no ") && text(&out).contains("SHA256SUMS"),
        "{}",
        text(&out)
    );
}

/// Removes the package when a test that installed it ends, passed or not.
struct Installed;

impl Drop for Installed {
    fn drop(&mut self) {
        let _ = Command::new("dpkg").args(["-r", "throng"]).output();
    }
}

/// Whether dpkg knows the package `throng` as installed.
fn installed() -> bool {
    Command::new("dpkg-query")
        .args(["-W", "-f", "${Status}", "throng"])
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("install ok installed"))
}

/// The .deb installs with `dpkg -i` (its dependencies computed from the
/// binary), puts the binary, every man page (gzipped), the completions and
/// the docs where Debian keeps them, `/usr/bin/throng demo` runs, `man`
/// finds and renders the pages, and `dpkg -r` takes it all away again.
#[test]
#[ignore = "installs a .deb with dpkg -i: needs root, dpkg, man and cargo-deb (scripts/test.sh runs it as root)"]
fn deb_installs_runs_and_removes() {
    let uid = output(Command::new("id").arg("-u"));
    assert!(
        String::from_utf8_lossy(&uid.stdout).trim() == "0",
        "deb_installs_runs_and_removes installs a package system-wide: run it as root (CI does), \
         or skip it (scripts/test.sh skips it when not root)"
    );
    assert!(
        !installed(),
        "a throng package is installed already: this test would replace and remove it (dpkg -r throng first)"
    );
    let (_dir, _, deb) = dist();

    let info = output(Command::new("dpkg-deb").arg("-f").arg(deb));
    let info = text(&info);
    for field in [
        "Package: throng",
        "Section: net",
        "Priority: optional",
        "Depends: libc6",
    ] {
        assert!(info.contains(field), "the .deb's control lacks {field}:\n{info}");
    }

    let _installed = Installed;
    let out = output(Command::new("dpkg").arg("-i").arg(deb));
    assert!(out.status.success(), "dpkg -i: {}", text(&out));
    assert!(installed());
    let files = text(&output(Command::new("dpkg").args(["-L", "throng"])));
    for file in [
        "/usr/bin/throng",
        "/usr/share/man/man1/throng.1.gz",
        "/usr/share/man/man1/throng-http.1.gz",
        "/usr/share/bash-completion/completions/throng",
        "/usr/share/zsh/vendor-completions/_throng",
        "/usr/share/fish/vendor_completions.d/throng.fish",
        "/usr/share/doc/throng/README.md",
        "/usr/share/doc/throng/copyright",
        "/usr/share/doc/throng/LICENSE-APACHE",
    ] {
        assert!(files.lines().any(|l| l == file), "the package lacks {file}:\n{files}");
    }

    let version = output(Command::new("/usr/bin/throng").arg("--version"));
    assert_eq!(
        String::from_utf8_lossy(&version.stdout).trim(),
        format!("throng {}", env!("CARGO_PKG_VERSION"))
    );
    let demo = output(Command::new("/usr/bin/throng").args(["demo", "--duration", "1s"]));
    assert!(demo.status.success(), "/usr/bin/throng demo: {}", text(&demo));
    assert!(
        text(&demo).contains("closed loop") && text(&demo).contains("open loop"),
        "{}",
        text(&demo)
    );

    let at = output(Command::new("man").args(["-w", "throng"]));
    assert_eq!(
        String::from_utf8_lossy(&at.stdout).trim(),
        "/usr/share/man/man1/throng.1.gz",
        "man -w throng: {}",
        text(&at)
    );
    let page = output(
        Command::new("man")
            .args(["-P", "cat", "throng-http"])
            .env("MANWIDTH", "100")
            .env("MAN_DISABLE_SECCOMP", "1"),
    );
    let page = text(&page);
    assert!(
        page.contains("throng-http") && page.contains("--connections"),
        "man throng-http:\n{page}"
    );

    let out = output(Command::new("dpkg").args(["-r", "throng"]));
    assert!(out.status.success(), "dpkg -r: {}", text(&out));
    assert!(!installed(), "dpkg -r left throng installed");
    assert!(!Path::new("/usr/bin/throng").exists());
    assert!(!Path::new("/usr/share/man/man1/throng.1.gz").exists());
}
