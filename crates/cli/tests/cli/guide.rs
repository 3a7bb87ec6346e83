//! The user guide (`docs/guide`, an mdBook) and the README hold: the book
//! builds, every link between pages and every `#anchor` resolves, the
//! reference pages are what `--help` says today, and every `throng` command
//! shown in a ```sh or ```console block runs against the lab server with the
//! exit code the page gives it.

#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Stdio;

use crate::common::{self, FaultServer, throng};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn guide_src() -> PathBuf {
    repo().join("docs/guide/src")
}

/// Every markdown file under `dir`, sorted.
fn markdown_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                todo.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// The guide's pages, the README and CONTRIBUTING.md: the user docs whose
/// links and examples are held.
fn docs() -> Vec<PathBuf> {
    let mut pages = markdown_under(&guide_src());
    pages.push(repo().join("README.md"));
    pages.push(repo().join("CONTRIBUTING.md"));
    pages
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

/// The lines of `text` outside fenced code blocks, with their numbers (from 1).
fn prose(text: &str) -> Vec<(usize, &str)> {
    let mut fence = false;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fence = !fence;
            continue;
        }
        if !fence {
            out.push((i + 1, line));
        }
    }
    out
}

/// A heading's anchor as mdBook and GitHub make it: lower case, letters,
/// digits, `-` and `_` kept, spaces become `-`, the rest dropped; a link's
/// text stands for the link.
fn slug(heading: &str) -> String {
    let mut text = String::new();
    let mut rest = heading;
    // [text](url) -> text
    while let Some(open) = rest.find('[') {
        text.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        match (after.find("]("), after.find(')')) {
            (Some(close), Some(end)) if close < end => {
                text.push_str(&after[..close]);
                rest = &after[end + 1..];
            }
            _ => {
                text.push('[');
                rest = after;
            }
        }
    }
    text.push_str(rest);
    text.trim()
        .chars()
        .filter_map(|c| {
            if c.is_alphanumeric() || c == '-' || c == '_' {
                Some(c.to_lowercase().next().unwrap_or(c))
            } else if c.is_whitespace() {
                Some('-')
            } else {
                None
            }
        })
        .collect()
}

/// The anchors a page offers: its headings' (a repeated one gets `-1`,
/// `-2`, ...) and any `<a id="...">`/`<a name="...">`.
fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut out = BTreeSet::new();
    for (_, line) in prose(text) {
        let hashes = line.chars().take_while(|c| *c == '#').count();
        if (1..=6).contains(&hashes) && line[hashes..].starts_with(' ') {
            let base = slug(&line[hashes + 1..]);
            let n = seen.entry(base.clone()).or_insert(0);
            out.insert(if *n == 0 { base.clone() } else { format!("{base}-{n}") });
            *n += 1;
        }
        for key in ["<a id=\"", "<a name=\""] {
            for (at, _) in line.match_indices(key) {
                let rest = &line[at + key.len()..];
                if let Some(end) = rest.find('"') {
                    out.insert(rest[..end].to_string());
                }
            }
        }
    }
    out
}

/// `line` without its inline code spans (a link shown as code is not one).
fn without_code(line: &str) -> String {
    let mut out = String::new();
    let mut in_code = false;
    for c in line.chars() {
        if c == '`' {
            in_code = !in_code;
        } else if !in_code {
            out.push(c);
        }
    }
    out
}

/// The targets of the markdown links (`[text](target)`) on a line.
fn link_targets(line: &str) -> Vec<String> {
    let line = without_code(line);
    let mut out = Vec::new();
    for (at, _) in line.match_indices("](") {
        let rest = &line[at + 2..];
        if let Some(end) = rest.find(')') {
            let target = rest[..end].split_whitespace().next().unwrap_or("");
            out.push(target.to_string());
        }
    }
    out
}

/// Every link between the user docs resolves: a file (or folder) that
/// exists, and an `#anchor` that a heading of the page it names makes.
#[test]
fn links_resolve() {
    let mut anchors_of: BTreeMap<PathBuf, BTreeSet<String>> = BTreeMap::new();
    let mut broken = Vec::new();
    let mut checked = 0;
    for page in docs() {
        let text = read(&page);
        for (n, line) in prose(&text) {
            for target in link_targets(line) {
                if target.is_empty() || target.contains("://") || target.starts_with("mailto:") {
                    continue;
                }
                checked += 1;
                let (path, anchor) = match target.split_once('#') {
                    Some((p, a)) => (p, Some(a)),
                    None => (target.as_str(), None),
                };
                let file = if path.is_empty() {
                    page.clone()
                } else {
                    page.parent().unwrap().join(path)
                };
                let Ok(file) = file.canonicalize() else {
                    broken.push(format!("{}:{n}: {target}: no such file", page.display()));
                    continue;
                };
                if let Some(anchor) = anchor
                    && file.extension().is_some_and(|e| e == "md")
                {
                    let known = anchors_of.entry(file.clone()).or_insert_with(|| anchors(&read(&file)));
                    if !known.contains(anchor) {
                        broken.push(format!(
                            "{}:{n}: {target}: no heading makes #{anchor} in {}",
                            page.display(),
                            file.display()
                        ));
                    }
                }
            }
        }
    }
    assert!(
        broken.is_empty(),
        "{} broken links:\n{}",
        broken.len(),
        broken.join("\n")
    );
    assert!(checked > 100, "only {checked} links found: is the link reader broken?");
}

/// The book's table of contents and its pages agree: every entry names a
/// page that exists, and every page is in it (mdBook leaves out a page that
/// is not).
#[test]
fn summary_lists_every_page() {
    let src = guide_src();
    let summary = read(&src.join("SUMMARY.md"));
    let mut listed = BTreeSet::new();
    for (n, line) in prose(&summary) {
        for target in link_targets(line) {
            let file = src.join(&target);
            assert!(file.is_file(), "SUMMARY.md:{n}: {target} does not exist");
            listed.insert(file.canonicalize().unwrap());
        }
    }
    let missing: Vec<String> = markdown_under(&src)
        .into_iter()
        .filter(|p| !p.ends_with("SUMMARY.md") && !listed.contains(&p.canonicalize().unwrap()))
        .map(|p| p.display().to_string())
        .collect();
    assert!(
        missing.is_empty(),
        "pages not in docs/guide/src/SUMMARY.md: {missing:#?}"
    );
}

/// The checked-in reference pages are what `throng help-markdown` renders
/// from today's flag definitions.
#[test]
fn reference_pages_are_current() {
    let dir = tempfile::tempdir().unwrap();
    let out = common::output(throng().arg("help-markdown").arg(dir.path()));
    assert!(
        out.status.success(),
        "help-markdown failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let names = |d: &Path| -> BTreeSet<String> {
        std::fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect()
    };
    let checked_in = guide_src().join("reference");
    let fresh = names(dir.path());
    assert!(fresh.contains("throng-http.md") && fresh.len() > 10, "{fresh:?}");
    let regenerate = "regenerate them with: cargo run -p throng -- help-markdown docs/guide/src/reference \
                      (and remove pages of commands that are gone)";
    assert_eq!(
        names(&checked_in),
        fresh,
        "the reference pages' names differ; {regenerate}"
    );
    for name in &fresh {
        let want = read(&dir.path().join(name));
        let have = read(&checked_in.join(name));
        assert!(
            want == have,
            "docs/guide/src/reference/{name} differs from the --help it documents; {regenerate}"
        );
    }
}

/// `mdbook build docs/guide` succeeds (into a scratch directory).
#[test]
#[ignore = "needs mdbook (scripts/test.sh installs it)"]
fn book_builds() {
    let out_dir = tempfile::tempdir().unwrap();
    let mut cmd = std::process::Command::new("mdbook");
    cmd.arg("build")
        .arg(repo().join("docs/guide"))
        .arg("-d")
        .arg(out_dir.path());
    let out = common::output(&mut cmd);
    assert!(
        out.status.success(),
        "mdbook build docs/guide failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    for page in ["index.html", "first-test.html", "reference/throng-http.html"] {
        assert!(out_dir.path().join(page).is_file(), "the book has no {page}");
    }
}

/// One runnable example: where it stands, its words, and the exit code its
/// page gives it.
struct Example {
    place: String,
    words: Vec<String>,
    code: i32,
}

/// Splits a shell line into words (single and double quotes, backslash
/// escapes) and its trailing `# comment`.
fn shell_words(line: &str) -> (Vec<String>, String) {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut has_word = false;
    let mut chars = line.chars().peekable();
    let mut comment = String::new();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                has_word = true;
                for q in chars.by_ref() {
                    if q == '\'' {
                        break;
                    }
                    word.push(q);
                }
            }
            '"' => {
                has_word = true;
                while let Some(q) = chars.next() {
                    match q {
                        '"' => break,
                        '\\' => word.extend(chars.next()),
                        _ => word.push(q),
                    }
                }
            }
            '\\' => {
                has_word = true;
                word.extend(chars.next());
            }
            '#' if !has_word => {
                comment = chars.collect();
                break;
            }
            c if c.is_whitespace() => {
                if has_word {
                    words.push(std::mem::take(&mut word));
                    has_word = false;
                }
            }
            c => {
                has_word = true;
                word.push(c);
            }
        }
    }
    if has_word {
        words.push(word);
    }
    (words, comment.trim().to_string())
}

/// The `throng` lines of every ```sh and ```console block not marked
/// `norun`, per page, in order.
fn examples() -> Vec<(PathBuf, Vec<Example>)> {
    let mut out = Vec::new();
    for page in docs() {
        let text = read(&page);
        let mut found = Vec::new();
        // Inside a fence: whether its lines run, and whether it is a console
        // transcript (only its `$ ` lines are commands).
        let mut block: Option<(bool, bool)> = None;
        let mut pending = String::new();
        let mut pending_at = 0;
        for (i, line) in text.lines().enumerate() {
            let fence = line.trim_start().strip_prefix("```");
            match (&block, fence) {
                (None, Some(info)) => {
                    let tags: Vec<&str> = info.split(',').map(str::trim).collect();
                    let lang = tags.first().copied().unwrap_or("");
                    let runs = (lang == "sh" || lang == "console") && !tags.contains(&"norun");
                    block = Some((runs, lang == "console"));
                    continue;
                }
                (Some(_), Some(_)) => {
                    block = None;
                    continue;
                }
                _ => {}
            }
            let Some((true, console)) = block else {
                continue;
            };
            let line = line.trim();
            if pending.is_empty() {
                let command = if console { line.strip_prefix("$ ") } else { Some(line) };
                let Some(command) = command.filter(|c| c.starts_with("throng ")) else {
                    continue;
                };
                pending_at = i + 1;
                if let Some(head) = command.strip_suffix('\\') {
                    pending.push_str(head);
                    pending.push(' ');
                    continue;
                }
                pending.push_str(command);
            } else if let Some(head) = line.strip_suffix('\\') {
                pending.push_str(head);
                pending.push(' ');
                continue;
            } else {
                pending.push_str(line);
            }
            let (words, comment) = shell_words(&std::mem::take(&mut pending));
            let code = comment
                .strip_prefix("exit ")
                .map(|c| {
                    c.trim()
                        .parse()
                        .unwrap_or_else(|_| panic!("{}:{pending_at}: '# exit N' needs a number", page.display()))
                })
                .unwrap_or(0);
            found.push(Example {
                place: format!("{}:{pending_at}", page.display()),
                words,
                code,
            });
        }
        if !found.is_empty() {
            out.push((page, found));
        }
    }
    out
}

/// Longest duration an example runs for in the test.
const MAX_SECONDS: f64 = 1.0;

/// Most requests an example's `-n` sends in the test.
const MAX_REQUESTS: u64 = 2000;

/// A duration word (`30s`, `2m`, `500ms`, `10`) in seconds.
fn seconds(word: &str) -> Option<f64> {
    let split = word
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(word.len());
    let value: f64 = word[..split].parse().ok()?;
    let unit = match &word[split..] {
        "" | "s" => 1.0,
        "ms" => 0.001,
        "m" => 60.0,
        "h" => 3600.0,
        _ => return None,
    };
    Some(value * unit)
}

/// The example's arguments with the lab server's address for
/// `127.0.0.1:8080`, durations past [`MAX_SECONDS`] and request counts past
/// [`MAX_REQUESTS`] cut to them.
fn adapted(words: &[String], addr: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for word in &words[1..] {
        let word = word.replace("127.0.0.1:8080", addr).replace("localhost:8080", addr);
        let after = |flags: &[&str]| out.last().is_some_and(|prev| flags.contains(&prev.as_str()));
        if after(&["-d", "--duration"]) && seconds(&word).is_some_and(|s| s > MAX_SECONDS) {
            out.push(format!("{MAX_SECONDS}s"));
        } else if after(&["-n", "--requests"]) && word.parse::<u64>().is_ok_and(|n| n > MAX_REQUESTS) {
            out.push(MAX_REQUESTS.to_string());
        } else {
            out.push(word);
        }
    }
    out
}

/// Every `throng` command a ```sh or ```console block of the guide or the
/// README shows runs against the lab server (`throng serve`) and exits as
/// its page says (0 unless a `# exit N` comment ends the line). Each page's
/// examples run in order in a directory of their own, so a file one writes
/// (`--json before.json`) is there for the next.
#[test]
fn examples_run() {
    let server = FaultServer::serve(&[]);
    let addr = server.addr();
    let all = examples();
    let count: usize = all.iter().map(|(_, e)| e.len()).sum();
    assert!(
        count >= 10,
        "only {count} runnable examples found: is the block reader broken?"
    );
    let mut failed = Vec::new();
    for (_, examples) in &all {
        let dir = tempfile::tempdir().unwrap();
        for ex in examples {
            assert!(
                ex.words.get(1).is_none_or(|w| w != "serve" && w != "demo"),
                "{}: `throng serve` and `throng demo` do not return in a test: mark the block ```sh,norun",
                ex.place
            );
            assert!(
                !ex.words
                    .iter()
                    .any(|w| ["|", ">", "<", "&", "&&", ";"].contains(&w.as_str())),
                "{}: a pipe, redirection or second command cannot run here: mark the block ```sh,norun",
                ex.place
            );
            let args = adapted(&ex.words, &addr);
            let out = common::output(throng().args(&args).current_dir(dir.path()).stdin(Stdio::null()));
            let code = out.status.code().unwrap_or(-1);
            if code != ex.code {
                failed.push(format!(
                    "{}: throng {} exited {code}, the page expects {}:\n{}",
                    ex.place,
                    args.join(" "),
                    ex.code,
                    String::from_utf8_lossy(&out.stderr)
                        .lines()
                        .take(5)
                        .collect::<Vec<_>>()
                        .join("\n")
                ));
            }
        }
    }
    assert!(
        failed.is_empty(),
        "{} of {count} examples failed:\n{}",
        failed.len(),
        failed.join("\n\n")
    );
}

/// The pieces the checks rest on read markdown as mdBook does.
#[test]
fn readers_read_markdown_as_mdbook_does() {
    assert_eq!(slug("`throng grpc`: gRPC calls"), "throng-grpc-grpc-calls");
    assert_eq!(
        slug("Reaching the target: addresses, `--connect-to`, proxies"),
        "reaching-the-target-addresses---connect-to-proxies"
    );
    assert_eq!(slug("A [link](x.md) here"), "a-link-here");
    let a = anchors("# A\n```\n# not a heading\n```\n## A\n### B c\n");
    assert_eq!(a, ["a", "a-1", "b-c"].into_iter().map(String::from).collect());
    assert_eq!(link_targets("see [a](b.md#c) and `[d](e)`"), vec!["b.md#c"]);
    let (words, comment) = shell_words(r#"throng http 'a b' "c\"d" e\ f -x # exit 99"#);
    assert_eq!(words, ["throng", "http", "a b", "c\"d", "e f", "-x"]);
    assert_eq!(comment, "exit 99");
    let w: Vec<String> = ["throng", "http", "http://127.0.0.1:8080/", "-d", "30s", "-n", "5"]
        .map(String::from)
        .into();
    assert_eq!(
        adapted(&w, "127.0.0.1:9"),
        ["http", "http://127.0.0.1:9/", "-d", "1s", "-n", "5"]
    );
    let w: Vec<String> = ["throng", "http", "URL", "-d", "500ms", "-n", "10000"]
        .map(String::from)
        .into();
    assert_eq!(adapted(&w, "127.0.0.1:9"), ["http", "URL", "-d", "500ms", "-n", "2000"]);
}

/// The README stays a front page: at most 300 lines, and the two commands a
/// new machine needs (build and run the demo; install the tests' needs and
/// run every test, as CI does) in its first lines.
#[test]
fn readme_is_a_front_page_with_the_two_commands_first() {
    let readme = read(&repo().join("README.md"));
    let lines = readme.lines().count();
    assert!(
        lines <= 300,
        "README.md has {lines} lines; move the detail into docs/guide"
    );
    let head: String = readme.lines().take(20).collect::<Vec<_>>().join("\n");
    for command in ["cargo run --release -- demo", "./scripts/test.sh"] {
        assert!(
            head.contains(command),
            "README.md's first 20 lines lack `{command}`:\n{head}"
        );
    }
    let ci = read(&repo().join(".ci/run"));
    assert!(
        ci.contains("scripts/test.sh"),
        ".ci/run no longer runs scripts/test.sh, as the README says"
    );
}

/// User docs say what throng does, not how it came to be: no seed or issue
/// numbers of the project's history.
#[test]
fn user_docs_carry_no_internal_history() {
    let mut found = Vec::new();
    for page in docs() {
        let text = read(&page);
        for (i, line) in text.lines().enumerate() {
            let lower = line.to_lowercase();
            let numbered = |word: &str| {
                lower.match_indices(word).any(|(at, _)| {
                    let rest = &lower[at + word.len()..];
                    let rest = rest.strip_prefix(' ').or_else(|| rest.strip_prefix('-')).unwrap_or("");
                    rest.starts_with(|c: char| c.is_ascii_digit()) && (word != "seed " || rest.starts_with('0'))
                })
            };
            if numbered("issue") || numbered("seed ") {
                found.push(format!("{}:{}: {line}", page.display(), i + 1));
            }
        }
    }
    assert!(found.is_empty(), "internal history in user docs:\n{}", found.join("\n"));
}
