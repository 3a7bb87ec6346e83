//! Loading a script: its files scanned (imports followed, read through the
//! caller), then its module evaluated once as VU 0 for `options`.

use std::collections::HashMap;
use std::sync::Arc;

use crate::error::ScriptError;
use crate::modules::{self, Sources};
use crate::options::Options;
use crate::scan;
use crate::script::{Intrinsics, Limits, Script};
use crate::typescript;
use crate::vu::{Input, ScriptVu, Yield};

impl Script {
    /// Loads `main` (its text `source`); `read` reads a file the script
    /// imports by its path relative to the script's folder (bounded by
    /// the caller). Refuses what throng does not run, before any VU runs.
    pub fn load(
        main: &str,
        source: &str,
        read: &dyn Fn(&str) -> Result<String, String>,
        env: &HashMap<String, String>,
        limits: Limits,
    ) -> Result<Script, ScriptError> {
        let mut files: HashMap<String, Arc<str>> = HashMap::new();
        let mut opened: HashMap<String, (String, Arc<str>)> = HashMap::new();
        let mut pending = vec![(main.to_string(), source.to_string())];
        let mut full = false;
        let mut crypto = false;
        let mut regex = false;
        let mut env_names: Option<Vec<String>> = Some(Vec::new());
        while let Some((name, text)) = pending.pop() {
            if files.contains_key(&name) {
                continue;
            }
            let text = match typescript::is_typescript(&name) {
                true => typescript::strip(&name, &text)?,
                false => text,
            };
            let found = scan::scan(&name, &text)?;
            full |= found.full_intrinsics;
            crypto |= found.crypto;
            regex |= found.regex;
            match (&mut env_names, found.env_names) {
                (Some(all), Some(mine)) => all.extend(mine),
                _ => env_names = None,
            }
            for (spec, line, column) in found.opened {
                let path = modules::join(&name, &spec);
                match opened.get(&spec) {
                    Some((same, _)) if *same == path => continue,
                    Some((other, _)) => {
                        let message = format!(
                            "open('{spec}') here is '{path}', elsewhere '{other}': give each file a path of its own"
                        );
                        return Err(ScriptError::at(&name, line, column, &message));
                    }
                    None => {}
                }
                if opened.len() >= 256 {
                    return Err(ScriptError::at(&name, line, column, "more than 256 files opened"));
                }
                let text =
                    read(&path).map_err(|e| ScriptError::at(&name, line, column, &format!("open('{spec}'): {e}")))?;
                opened.insert(spec, (path, Arc::from(text)));
            }
            for (spec, line, column) in found.files {
                let path = modules::join(&name, &spec);
                if files.contains_key(&path) || pending.iter().any(|(n, _)| *n == path) {
                    continue;
                }
                if files.len() >= 256 {
                    return Err(ScriptError::at(&name, line, column, "more than 256 files imported"));
                }
                let text = read(&path).map_err(|e| ScriptError::at(&name, line, column, &format!("'{spec}': {e}")))?;
                pending.push((path, text));
            }
            files.insert(name, Arc::from(text));
        }
        let mut script = Script {
            main: main.to_string(),
            sources: Sources {
                files: Arc::new(files),
                bytecode: Arc::default(),
            },
            intrinsics: match (full, regex) {
                (true, _) => Intrinsics::Full,
                (false, true) => Intrinsics::Regex,
                (false, false) => Intrinsics::Small,
            },
            env_names,
            limits,
            options: Options::default(),
            crypto,
            data: Arc::new(crate::data::Shared::new(
                opened.into_iter().map(|(spec, (_, text))| (spec, text)).collect(),
            )),
        };
        let (json, metrics, exports) = probe(&script, env)?;
        script.options = Options::from_json(&json, main, source, metrics)?;
        script.options.setup = exports.iter().any(|f| f == "setup");
        script.options.teardown = exports.iter().any(|f| f == "teardown");
        for s in &script.options.scenarios {
            if let Some(f) = s.exec.as_deref().filter(|f| !exports.iter().any(|e| e == f)) {
                let (line, column) = source.find("exec").map_or((0, 0), |i| crate::scan::line_col(source, i));
                let message = format!(
                    "options.scenarios.{}: exec '{f}' is not a function the script exports (export function {f}() {{ … }})",
                    s.name
                );
                return Err(ScriptError::at(main, line, column, &message));
            }
        }
        script.sources.bytecode = Arc::new(compile(&script)?);
        Ok(script)
    }
}

/// Every module compiled once, in a runtime of its own (the probe has
/// evaluated them, so they parse).
fn compile(script: &Script) -> Result<HashMap<String, Vec<u8>>, ScriptError> {
    let failed = |e: rquickjs::Error| ScriptError::at(&script.main, 0, 0, &format!("cannot compile the script: {e}"));
    let rt = rquickjs::Runtime::new().map_err(failed)?;
    rt.set_loader(script.sources.clone(), script.sources.clone());
    let cx = rquickjs::Context::full(&rt).map_err(failed)?;
    cx.with(|ctx| {
        use rquickjs::CatchResultExt as _;
        script
            .sources
            .compile(&ctx)
            .catch(&ctx)
            .map_err(|e| ScriptError::at(&script.main, 0, 0, &format!("cannot compile the script: {e}")))
    })
}

/// The `k6/metrics` metrics a script declares: name, kind.
pub(crate) type Declared = Vec<(String, &'static str)>;

/// Evaluates the module as VU 0 (no iteration): `options` as JSON, the
/// `k6/metrics` metrics it declared, and the functions it exports.
pub(crate) fn probe(
    script: &Script,
    env: &std::collections::HashMap<String, String>,
) -> Result<(String, Declared, Vec<String>), ScriptError> {
    // The probe needs its own Script value (Arc): a copy of the parts.
    let s = Arc::new(Script {
        main: script.main.clone(),
        sources: script.sources.clone(),
        intrinsics: script.intrinsics,
        env_names: script.env_names.clone(),
        limits: script.limits,
        options: Options::default(),
        crypto: script.crypto,
        data: Arc::clone(&script.data),
    });
    let mut vu = ScriptVu::new(&s, 0, env, crate::vu::Stage::Iterate, None)
        .map_err(|e| ScriptError::at(&script.main, 0, 0, &format!("cannot make a VU's stack: {e}")))?;
    match vu.resume(Input::Start) {
        Yield::Ended => Ok((
            vu.probed().unwrap_or_else(|| "null".to_string()),
            vu.declared(),
            vu.exports(),
        )),
        Yield::Failed { message, .. } => Err(ScriptError::at(&script.main, 0, 0, &message)),
        other => Err(ScriptError::at(
            &script.main,
            0,
            0,
            &format!("the script's init context did something throng cannot run there: {other:?}"),
        )),
    }
}
