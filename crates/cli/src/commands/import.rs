//! `throng import KIND INPUT`: curl commands or a HAR recording as a
//! scenario file. The scenario is checked by the same parser `throng run`
//! uses before it is written, so what is written loads.

use std::io::Read as _;
use std::path::Path;
use std::process::ExitCode;

use throng_import::{Kind, MAX_INPUT, Options};
use throng_scenario::ScenarioPlan;

use crate::args::{ImportCmd, ImportKind};
use crate::exit::UsageError;

pub fn run(c: ImportCmd) -> anyhow::Result<ExitCode> {
    let kind = match c.kind {
        ImportKind::Curl => Kind::Curl,
        ImportKind::Har => Kind::Har,
        ImportKind::Postman => Kind::Postman,
        ImportKind::Openapi => Kind::Openapi,
    };
    let stdin = c.input == Path::new("-");
    let source = if stdin {
        "stdin".to_string()
    } else {
        c.input.display().to_string()
    };
    let text = read_input(&c.input, stdin, &source)?;
    let options = Options {
        origin: c.origin.clone(),
        scenario: c.name.clone(),
        source: source.clone(),
    };
    if let Some(name) = &c.name
        && (name.is_empty() || name.chars().count() > 200 || name.chars().any(char::is_control))
    {
        return Err(UsageError(format!(
            "--name {:?}: give a name of 1 to 200 characters without control characters",
            name.chars().take(40).collect::<String>()
        ))
        .into());
    }
    let imported = throng_import::import(kind, &text, &options)
        .map_err(|e| UsageError(format!("throng import {}: {source}: {e}", kind.name())))?;
    let limit = throng_plan::input::MAX_FILE_BYTES;
    if imported.yaml.len() as u64 > limit {
        return Err(UsageError(format!(
            "throng import: {source}: the scenario would be {} MiB, over the {} MiB a scenario file may hold; \
             import fewer requests (--origin, or a shorter recording)",
            imported.yaml.len() >> 20,
            limit >> 20
        ))
        .into());
    }
    let shown = c
        .out
        .as_ref()
        .map_or_else(|| "stdout".to_string(), |p| p.display().to_string());
    // What throng run will read: a file that does not load is an importer's
    // fault, said here rather than there. Its data and proto files are none.
    let no_files = |name: &str| Err(format!("{name}: an imported scenario names no file"));
    ScenarioPlan::parse(&imported.yaml, &shown, &no_files).map_err(|e| {
        anyhow::anyhow!(
            "throng import made a scenario that does not load ({e}); this is a bug in the importer: \
             please report it with the input's shape (not its secrets)"
        )
    })?;
    match &c.out {
        Some(path) => std::fs::write(path, &imported.yaml)
            .map_err(|e| UsageError(format!("--out {}: cannot write there: {e}", path.display())))?,
        None => print!("{}", imported.yaml),
    }
    say!(
        "throng: imported {} request{} from {source} into {shown}",
        imported.steps,
        if imported.steps == 1 { "" } else { "s" }
    );
    for n in &imported.notes {
        say!("throng: note: {n}");
    }
    if !imported.env.is_empty() {
        say!("throng: the scenario reads these environment variables (credentials are never copied into it):");
        for (name, what) in &imported.env {
            say!("  {name}: {what}");
        }
        let run_line = c
            .out
            .as_ref()
            .map_or_else(|| "FILE".to_string(), |p| p.display().to_string());
        let envs: Vec<String> = imported.env.iter().map(|(n, _)| format!("--env {n}=…")).collect();
        say!(
            "throng: set them in the environment, or: throng run {run_line} {}",
            envs.join(" ")
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// The input as text, at most [`MAX_INPUT`] bytes (a device or an endless
/// stream is refused, not read to its end).
fn read_input(path: &Path, stdin: bool, source: &str) -> Result<String, UsageError> {
    let limit = MAX_INPUT as u64;
    let too_large = || {
        UsageError(format!(
            "throng import: {source} is over the limit of {} MiB; import a shorter recording",
            limit >> 20
        ))
    };
    let bytes = if stdin {
        let mut bytes = Vec::new();
        std::io::stdin()
            .take(limit + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| UsageError(format!("throng import: cannot read stdin: {e}")))?;
        if bytes.len() as u64 > limit {
            return Err(too_large());
        }
        bytes
    } else {
        match throng_plan::input::read_limited(path, limit) {
            Ok(b) => b,
            Err(throng_plan::input::ReadError::Io(e)) => {
                return Err(UsageError(format!(
                    "throng import: cannot read {source}: {e}; give a readable file (or - for stdin)"
                )));
            }
            Err(_) => return Err(too_large()),
        }
    };
    String::from_utf8(bytes).map_err(|e| {
        UsageError(format!(
            "throng import: {source} is not UTF-8 text (byte {}); save it as UTF-8",
            e.utf8_error().valid_up_to()
        ))
    })
}
