//! The files a command reads, shipped with it: the coordinator reads them,
//! each agent writes them into its run's private directory and points the
//! command there. An agent never runs a command that reads a file of its
//! own machine.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::command::Coordinated;
use crate::args::RunCmd;
use crate::exit::UsageError;

/// Flags whose value is a file.
const FILE_FLAGS: [&str; 7] = [
    "--body",
    "--body-lines",
    "--bearer-file",
    "--cacert",
    "--cert",
    "--key",
    "--nats-creds",
];
/// Flags whose value is `@FILE`.
const AT_FILE_FLAGS: [&str; 2] = ["--data", "--send-binary"];
/// Most bytes of files one run ships (hex makes twice that, within a frame).
const MAX_SHIPPED: u64 = 24 << 20;

/// One file: the argument it replaces (none for a file a scenario names),
/// what comes before the path in that argument (`--body=`, `@`), its bytes
/// in hex, and for a scenario and its files, the name it has beside the
/// scenario (a clean relative path).
#[derive(Clone, Serialize, Deserialize)]
pub struct Shipped {
    pub arg: Option<usize>,
    pub prefix: String,
    pub hex: String,
    pub name: Option<String>,
}

/// Where the command names files: (argument index, prefix, path).
fn file_args(command: &[String]) -> Vec<(usize, String, String)> {
    let mut out = Vec::new();
    let next = |i: usize| command.get(i + 1).cloned();
    for (i, a) in command.iter().enumerate() {
        for flag in FILE_FLAGS {
            if a == flag
                && let Some(v) = next(i)
            {
                out.push((i + 1, String::new(), v));
            } else if let Some(v) = a.strip_prefix(flag).and_then(|r| r.strip_prefix('=')) {
                out.push((i, format!("{flag}="), v.to_string()));
            }
        }
        for flag in AT_FILE_FLAGS {
            if a == flag
                && let Some(v) = next(i)
                && let Some(path) = v.strip_prefix('@')
                && path != "-"
            {
                out.push((i + 1, "@".to_string(), path.to_string()));
            } else if let Some(path) = a.strip_prefix(flag).and_then(|r| r.strip_prefix("=@"))
                && path != "-"
            {
                out.push((i, format!("{flag}=@"), path.to_string()));
            }
        }
    }
    out
}

/// Reads every file the command names (they were just checked by the
/// command's own preparation).
pub fn ship(command: &[String]) -> Result<Vec<Shipped>, UsageError> {
    let mut total = 0u64;
    let mut shipped = Vec::new();
    for (arg, prefix, path) in file_args(command) {
        let bytes = throng_plan::input::read_limited(Path::new(&path), MAX_SHIPPED).map_err(|e| {
            UsageError(match e {
                throng_plan::input::ReadError::Io(e) => format!("'{path}': cannot read it: {e}"),
                _ => format!(
                    "'{path}': over {} MiB, more than a coordinated run ships",
                    MAX_SHIPPED >> 20
                ),
            })
        })?;
        total += bytes.len() as u64;
        if total > MAX_SHIPPED {
            return Err(UsageError(format!(
                "the command's files come to more than {} MiB, more than a coordinated run ships; use smaller files",
                MAX_SHIPPED >> 20
            )));
        }
        shipped.push(Shipped {
            arg: Some(arg),
            prefix,
            hex: hex(&bytes),
            name: None,
        });
    }
    Ok(shipped)
}

/// A scenario (or k6 script) and every file it names, to add to the
/// command's files: the scenario is argument `arg`, its files
/// ([`crate::commands::run::plan_files`]) are written beside it.
pub fn ship_plan(command: &[String], run: &RunCmd, mut shipped: Vec<Shipped>) -> anyhow::Result<Vec<Shipped>> {
    let file = run.file.to_string_lossy();
    let arg = command
        .iter()
        .position(|a| *a == file)
        .ok_or_else(|| UsageError(format!("the command after --: cannot tell which argument is '{file}'")))?;
    let main = run
        .file
        .file_name()
        .map_or_else(|| "scenario.yaml".into(), |n| n.to_string_lossy().into_owned());
    let text = crate::commands::shared::read_plan_file(&run.file, "scenario file")?;
    let files = crate::commands::run::plan_files(run).map_err(|e| e.context("the command after --"))?;
    let mut total: u64 = shipped.iter().map(|f| f.hex.len() as u64 / 2).sum();
    for (at, name, text) in std::iter::once((Some(arg), main, text)).chain(files.into_iter().map(|(n, t)| (None, n, t)))
    {
        total += text.len() as u64;
        if total > MAX_SHIPPED {
            return Err(UsageError(format!(
                "the command's files come to more than {} MiB, more than a coordinated run ships; use smaller files",
                MAX_SHIPPED >> 20
            ))
            .into());
        }
        shipped.push(Shipped {
            arg: at,
            prefix: String::new(),
            hex: hex(text.as_bytes()),
            name: Some(name),
        });
    }
    Ok(shipped)
}

/// Where a shipped file goes, and its bytes.
pub type Unpacked = (PathBuf, Vec<u8>);

/// The command with each shipped file's argument pointing at
/// `dir/file-K` (a scenario's files: `dir/plan/NAME`), and where to write
/// which bytes.
pub fn rewrite(command: &[String], files: &[Shipped], dir: &Path) -> Result<(Vec<String>, Vec<Unpacked>), String> {
    let mut command = command.to_vec();
    let mut contents = Vec::new();
    for (k, f) in files.iter().enumerate() {
        let path = match &f.name {
            None => dir.join(format!("file-{k}")),
            Some(name) => {
                let clean = !name.is_empty()
                    && Path::new(name)
                        .components()
                        .all(|p| matches!(p, std::path::Component::Normal(_) | std::path::Component::CurDir));
                if !clean {
                    return Err(format!("a shipped file is named '{name}', outside the run's directory"));
                }
                dir.join("plan").join(name)
            }
        };
        if let Some(arg) = f.arg {
            let slot = command
                .get_mut(arg)
                .ok_or_else(|| format!("a shipped file names argument {arg}, past the command's end"))?;
            *slot = format!("{}{}", f.prefix, path.display());
        }
        contents.push((path, unhex(&f.hex).ok_or("a shipped file is not hex")?));
    }
    Ok((command, contents))
}

/// Every file the parsed command reads is under `dir`; `--targets` (whose
/// lines name more files) is never shipped.
pub fn only_in(c: &Coordinated, dir: &Path) -> Result<(), String> {
    let at = |d: &str| d.strip_prefix('@').map(PathBuf::from);
    let files: Vec<PathBuf> = match c {
        Coordinated::Http(c) => {
            if c.targets.is_some() {
                return Err("--targets".to_string());
            }
            [
                &c.body,
                &c.body_lines,
                &c.bearer_file,
                &c.tls.cacert,
                &c.tls.cert,
                &c.tls.key,
            ]
            .into_iter()
            .flatten()
            .cloned()
            .chain(c.data.as_deref().and_then(at))
            .collect()
        }
        // Its files are checked by `plan_files` (each a clean name beside it).
        Coordinated::Run(c) => vec![c.file.clone()],
        Coordinated::Storm(c) => [&c.nats_creds, &c.tls.cacert, &c.tls.cert, &c.tls.key]
            .into_iter()
            .flatten()
            .cloned()
            .chain(c.send_binary.iter().filter_map(|b| at(b)))
            .collect(),
    };
    match files.into_iter().find(|p| !p.starts_with(dir)) {
        Some(p) => Err(p.display().to_string()),
        None => Ok(()),
    }
}

fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(DIGITS[usize::from(b >> 4)] as char);
        s.push(DIGITS[usize::from(b & 15)] as char);
    }
    s
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    let digit = |c: u8| (c as char).to_digit(16).and_then(|d| u8::try_from(d).ok());
    s.as_bytes()
        .chunks(2)
        .map(|p| match p {
            [a, b] => Some(digit(*a)? << 4 | digit(*b)?),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scenario_file_named_outside_the_run_directory_is_refused() {
        let dir = Path::new("/run-dir");
        let file = |name: &str| Shipped {
            arg: None,
            prefix: String::new(),
            hex: hex(b"x"),
            name: Some(name.to_string()),
        };
        for bad in ["../escape.csv", "/etc/passwd", "data/../../x", ""] {
            let err = rewrite(&[], &[file(bad)], dir).err().unwrap();
            assert!(err.contains("outside the run's directory"), "{bad}: {err}");
        }
        let (_, written) = rewrite(&[], &[file("data/users.csv")], dir).unwrap();
        assert_eq!(written[0].0, Path::new("/run-dir/plan/data/users.csv"));
    }

    #[test]
    fn hex_round_trips_and_refuses_garbage() {
        let bytes: Vec<u8> = (0..=255).collect();
        assert_eq!(unhex(&hex(&bytes)).unwrap(), bytes);
        assert!(unhex("abc").is_none());
        assert!(unhex("zz").is_none());
    }

    #[test]
    fn file_arguments_are_found_in_both_forms() {
        let cmd: Vec<String> = [
            "http",
            "u",
            "--body",
            "b",
            "--cacert=c",
            "--data",
            "@d",
            "--data=@-",
            "-d",
            "5s",
        ]
        .iter()
        .map(ToString::to_string)
        .collect();
        let found: Vec<(usize, String, String)> = file_args(&cmd);
        assert_eq!(
            found,
            vec![
                (3, String::new(), "b".to_string()),
                (4, "--cacert=".to_string(), "c".to_string()),
                (6, "@".to_string(), "d".to_string()),
            ]
        );
    }
}
