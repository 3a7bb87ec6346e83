//! `throng run SCENARIO.yaml`: load and validate the file, run it, report,
//! judge the thresholds (exit 99 when one failed, see `finish_runs`), write
//! JUnit if asked.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::Context as _;
use throng_engine::ScenarioOptions;
use throng_scenario::{ScenarioPlan, TargetInputs};

use super::shared::{finish_runs, repeated};
use crate::args::RunCmd;
use crate::exit::UsageError;
use crate::live::Watch;
use crate::progress::{Display, StageClock};

/// What `throng run` checks and loads before it runs: the segment, the
/// environment, the plan (its files read), its TLS settings.
pub struct Prepared {
    seg: super::segment::Segmenting,
    env: std::collections::HashMap<String, String>,
    plan: ScenarioPlan,
    tls: Option<std::sync::Arc<throng_tls::rustls::ClientConfig>>,
    script: Option<std::sync::Arc<throng_script::Script>>,
}

impl Prepared {
    /// The plan's thresholds (a coordinator judges them on the agents'
    /// merged figures).
    pub fn thresholds(&self) -> &[throng_scenario::Threshold] {
        &self.plan.thresholds
    }
}

/// The whole check `throng run` makes before it runs, with what it
/// loaded: `throng coordinate` makes it once too.
pub fn prepare(c: &RunCmd) -> anyhow::Result<Prepared> {
    let seg = super::segment::parse(&c.segments)?;
    super::segment::refuse_start_at_with_repeat(&seg, c.repeat.count)?;
    let given = parse_env(&c.env)?;
    let env = throng_scenario::environment(&given);
    let target = TargetInputs {
        url: c.target.as_deref(),
        env: Some(&env),
    };
    let trace = throng_plan::trace_context_of(c.trace_context.map(super::http::sampling), c.slowest)
        .map_err(|e| UsageError(e.to_string()))?;
    let dir = c.file.parent().unwrap_or(Path::new("."));
    let read = |name: &str| super::shared::read_side_file(&dir.join(name)).map_err(|e| e.to_string());
    let script = load_script(&c.file, &env, c.target.as_deref(), &read)?;
    let mut plan = match &script {
        Some((_, yaml)) => parse(&c.file, yaml, true, c.scale, &target, &read)?,
        None => load(&c.file, c.scale, &target, &read)?,
    }
    .with_secret_headers(&c.secret_headers)
    .and_then(|p| p.with_trace_context(trace))
    .map_err(|e| UsageError(e.to_string()))?;
    if let Some(s) = &seg.segment {
        plan = plan.segmented(s);
    }
    if let Some(warning) = unread_env(&c.file, &given, &plan.env_names()) {
        say!("{warning}");
    }
    let unset: Vec<String> = plan.env_names().into_iter().filter(|n| !env.contains_key(n)).collect();
    if !unset.is_empty() {
        let list = unset
            .iter()
            .map(|n| format!("{{{{env.{n}}}}}"))
            .collect::<Vec<_>>()
            .join(", ");
        return Err(UsageError(format!(
            "{}: {list} used but not set; export {} or pass --env {}=VALUE",
            c.file.display(),
            unset.join(", "),
            unset[0]
        ))
        .into());
    }
    let tls = match &plan.tls {
        // The scenario's files are named relative to it.
        Some(settings) => Some(
            super::tls::client_config(settings, c.file.parent().unwrap_or(Path::new(".")), &[])
                .map_err(|e| UsageError(format!("{}: tls: {e}", c.file.display())))?,
        ),
        None => None,
    };
    Ok(Prepared {
        seg,
        env,
        plan,
        tls,
        script: script.map(|(s, _)| s),
    })
}

pub fn run(c: RunCmd) -> anyhow::Result<ExitCode> {
    let Prepared {
        seg,
        env,
        plan,
        tls,
        script,
    } = prepare(&c)?;
    super::export::check_outputs(&[
        ("--json", c.output.json.as_deref()),
        ("--html", c.output.html.as_deref()),
        ("--junit", c.junit.as_deref()),
    ])?;
    let (exports, requests_csv) = super::export::open_run(&c.output.export)?;
    let options = ScenarioOptions {
        requests_csv,
        threads: c.threads.unwrap_or(0),
        env,
        seed: c.seed.unwrap_or_else(|| {
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64)
        }),
        start_at_unix_ms: seg.start_at_unix_ms,
        reach: super::reach::scenario(&c.reach, &plan.target.host)?,
        script,
        setup_given: c.setup_captures.as_deref().map(read_captures).transpose()?,
    };
    super::export::refuse_rows_with_repeat(&c.output.export, c.repeat.count)?;
    let watch = Watch::start(
        &c.live,
        step_scenarios(&plan),
        seg.segment.as_ref().map(throng_plan::Segment::range),
        seg.start_at_unix_ms,
    )?;
    let runs = repeated(c.repeat, c.output.quiet, |control| {
        super::segment::wait_for_start(options.start_at_unix_ms, control, c.output.quiet)?;
        let display = Display::new(c.output.quiet).with_stages(stage_clocks(&plan));
        watch.prepare(control, display.is_shown());
        let result = throng_engine::run_scenario(&plan, tls.clone(), &options, control, &mut |p| {
            display.tick(p);
            watch.tick(p);
        });
        display.finish();
        let mut result = result.with_context(|| format!("{}: the run could not start", c.file.display()))?;
        watch.finished(&mut result);
        Ok(result)
    })?;
    // With --repeat, thresholds and JUnit judge the runs added up.
    let (code, result) = finish_runs(c.repeat, &runs, c.output.json.as_deref(), c.output.format.into())?;
    exports.write(&result)?;
    if let Some(path) = &c.output.html {
        super::shared::write_html(path, &result)?;
    }
    if let Some(path) = &c.junit {
        let mut out = Vec::new();
        throng_report::junit::write(&result, &mut out).context("rendering JUnit XML")?;
        std::fs::write(path, out).with_context(|| {
            format!(
                "cannot write JUnit XML to '{}' (check the directory exists and is writable)",
                path.display()
            )
        })?;
    }
    watch.linger();
    Ok(code.into())
}

/// The coordinator's setup captures, as `throng agent` wrote them.
fn read_captures(path: &Path) -> Result<std::sync::Arc<std::collections::HashMap<String, String>>, UsageError> {
    let text = super::shared::read_side_file(path)
        .map_err(|e| UsageError(format!("--setup-captures {}: {e}", path.display())))?;
    serde_json::from_str(&text).map(std::sync::Arc::new).map_err(|e| {
        UsageError(format!(
            "--setup-captures {}: not a JSON object of strings: {e}",
            path.display()
        ))
    })
}

/// A scenario's `setup:` or `teardown:` flow run once by `throng coordinate`
/// for every agent (`captures`: the setup's, for the teardown).
pub fn run_once_flow(
    c: &RunCmd,
    control: &throng_engine::Control,
    captures: Option<std::sync::Arc<std::collections::HashMap<String, String>>>,
) -> anyhow::Result<Option<throng_engine::OnceRun>> {
    let p = prepare(c)?;
    let options = ScenarioOptions {
        threads: 1,
        env: p.env,
        seed: c.seed.unwrap_or(0),
        reach: super::reach::scenario(&c.reach, &p.plan.target.host)?,
        script: p.script,
        ..ScenarioOptions::default()
    };
    Ok(match captures {
        None => throng_engine::run_setup_flow(&p.plan, p.tls, &options, control)
            .with_context(|| format!("{}: setup:", c.file.display()))?,
        Some(vars) => throng_engine::run_teardown_flow(&p.plan, p.tls, &options, control, vars)
            .map_err(|e| anyhow::anyhow!("{}: {e}", c.file.display()))?,
    })
}

/// The scenario of each step name, for the `scenario` label of step
/// metrics; a step name used in several scenarios lists them all.
fn step_scenarios(plan: &ScenarioPlan) -> BTreeMap<String, String> {
    fn walk(flow: &[throng_scenario::Step], scenario: &str, out: &mut BTreeMap<String, Vec<String>>) {
        for step in flow {
            match step {
                throng_scenario::Step::Request(r) => add(&r.name, scenario, out),
                throng_scenario::Step::Grpc(g) => add(&g.request.name, scenario, out),
                throng_scenario::Step::WebSocket(w) => add(&w.name, scenario, out),
                throng_scenario::Step::Mqtt(m) => add(&m.name, scenario, out),
                throng_scenario::Step::Think(_) | throng_scenario::Step::Add(_) | throng_scenario::Step::Js(_) => {}
                nested => nested.nested().into_iter().for_each(|f| walk(f, scenario, out)),
            }
        }
    }
    fn add(step: &str, scenario: &str, out: &mut BTreeMap<String, Vec<String>>) {
        let names = out.entry(step.to_string()).or_default();
        if !names.iter().any(|n| n == scenario) {
            names.push(scenario.to_string());
        }
    }
    let mut out = BTreeMap::new();
    for s in &plan.scenarios {
        walk(&s.flow, &s.name, &mut out);
    }
    out.into_iter().map(|(k, v)| (k, v.join(","))).collect()
}

/// Each scenario with stages, on the run's clock, for the live view.
fn stage_clocks(plan: &ScenarioPlan) -> Vec<StageClock> {
    plan.scenarios
        .iter()
        .filter(|s| !s.executor.stages().is_empty())
        .map(|s| StageClock {
            scenario: s.name.clone(),
            start: s.start_time,
            stages: s.executor.stages().iter().map(|st| st.duration).collect(),
        })
        .collect()
}

/// One line warning of `--env` values nothing in the file reads (a
/// misspelt name, or a target `--target` replaced), or None.
fn unread_env(file: &Path, given: &[(String, String)], read: &[String]) -> Option<String> {
    let unread: std::collections::BTreeSet<&str> = given
        .iter()
        .map(|(name, _)| name.as_str())
        .filter(|name| !read.iter().any(|r| r == name))
        .collect();
    (!unread.is_empty()).then(|| {
        let reads = if read.is_empty() {
            "no {{env.NAME}}".to_string()
        } else {
            read.join(", ")
        };
        format!(
            "throng: warning: --env {}: nothing in {} reads {} (it reads {reads}); check the name",
            unread.iter().copied().collect::<Vec<_>>().join(", "),
            file.display(),
            if unread.len() == 1 { "it" } else { "them" }
        )
    })
}

/// Reads and validates a scenario file; its data file is read relative to
/// it, its target may come from `--target` or the environment.
fn load(file: &Path, scale: Option<f64>, target: &TargetInputs, read: &Read) -> anyhow::Result<ScenarioPlan> {
    let text = super::shared::read_plan_file(file, "scenario file")?;
    parse(file, &text, false, scale, target, read)
}

/// Reads a file the scenario names (relative to the scenario's directory).
type Read<'a> = dyn Fn(&str) -> Result<String, String> + 'a;

/// Every file a scenario or script reads beside it (data, bodies, imports,
/// .proto files, its TLS files), by the name it gives, with its contents:
/// what a coordinator ships with it. A name that leaves the scenario's
/// directory (absolute, or with `..`) cannot be shipped: refused.
pub fn plan_files(c: &RunCmd) -> anyhow::Result<Vec<(String, String)>> {
    let given = parse_env(&c.env)?;
    let env = throng_scenario::environment(&given);
    let target = TargetInputs {
        url: c.target.as_deref(),
        env: Some(&env),
    };
    let dir = c.file.parent().unwrap_or(Path::new("."));
    let files = std::cell::RefCell::new(Vec::<(String, String)>::new());
    let ship = |name: &str, limit: u64| -> Result<String, String> {
        let clean = Path::new(name)
            .components()
            .all(|p| matches!(p, std::path::Component::Normal(_) | std::path::Component::CurDir));
        if !clean {
            return Err(format!(
                "'{name}' is outside the scenario's directory, and a coordinated run ships only the files in it \
                 (or below it): move the file there and name it relative to the scenario"
            ));
        }
        let text = super::shared::read_side_file_within(&dir.join(name), limit).map_err(|e| e.to_string())?;
        if !files.borrow().iter().any(|(n, _)| n == name) {
            files.borrow_mut().push((name.to_string(), text.clone()));
        }
        Ok(text)
    };
    let read = |name: &str| ship(name, super::shared::MAX_SIDE_FILE_BYTES);
    let script = load_script(&c.file, &env, c.target.as_deref(), &read)?;
    let plan = match &script {
        Some((_, yaml)) => parse(&c.file, yaml, true, c.scale, &target, &read)?,
        None => load(&c.file, c.scale, &target, &read)?,
    };
    if let Some(tls) = &plan.tls {
        for name in [&tls.cacert, &tls.cert, &tls.key].into_iter().flatten() {
            ship(name, throng_plan::input::MAX_PEM_BYTES)
                .map_err(|e| UsageError(format!("{}: tls: {e}", c.file.display())))?;
        }
    }
    Ok(files.into_inner())
}

/// A k6 script (`.js`, `.mjs`; `.ts`, `.mts` with its types erased): loaded (its imports read beside it,
/// bounded), refused before the run where throng does not run what it
/// uses; with the scenario file's text its options make. None for a
/// scenario file.
fn load_script(
    file: &Path,
    env: &std::collections::HashMap<String, String>,
    target: Option<&str>,
    read: &Read,
) -> anyhow::Result<Option<(std::sync::Arc<throng_script::Script>, String)>> {
    let lower = file.to_string_lossy().to_ascii_lowercase();
    if ![".js", ".mjs", ".ts", ".mts"].iter().any(|e| lower.ends_with(e)) {
        return Ok(None);
    }
    let text = super::shared::read_plan_file(file, "script")?;
    let main = file
        .file_name()
        .map_or_else(|| "script.js".to_string(), |n| n.to_string_lossy().into_owned());
    let script =
        throng_script::Script::load(&main, &text, read, env, throng_script::Limits::default()).map_err(|mut e| {
            // Name the file as the user gave it.
            if e.file == main {
                e.file = file.display().to_string();
            }
            UsageError(e.to_string())
        })?;
    let origin = match target {
        Some(t) => t.to_string(),
        None => first_origin(&text).ok_or_else(|| {
            UsageError(format!(
                "{}: no http:// or https:// URL written in the script to take the target from; give --target \
                 http://host:port (throng runs a script's requests against one origin)",
                file.display()
            ))
        })?,
    };
    let yaml = script.options.scenario_yaml(&origin);
    Ok(Some((std::sync::Arc::new(script), yaml)))
}

/// The origin of the first absolute URL the script writes.
fn first_origin(text: &str) -> Option<String> {
    let at = text.find("http://").or_else(|| text.find("https://"))?;
    let rest = &text[at..];
    let scheme_end = rest.find("://")? + 3;
    let end = rest[scheme_end..]
        .find(|c: char| c == '/' || c == '\'' || c == '"' || c == '`' || c == '$' || c.is_whitespace())
        .map_or(rest.len(), |i| scheme_end + i);
    Some(rest[..end].to_string())
}

/// A scenario file's text (`script`: made from a k6 script's options,
/// whose errors name the script, not a line of the text).
fn parse(
    file: &Path,
    text: &str,
    script: bool,
    scale: Option<f64>,
    target: &TargetInputs,
    read: &Read,
) -> anyhow::Result<ScenarioPlan> {
    let text = text.to_string();
    let dir: PathBuf = file.parent().map_or_else(|| PathBuf::from("."), Path::to_path_buf);
    let reflect = |t: &throng_scenario::BaseUrl, tls: Option<&throng_plan::TlsSettings>, service: &str| {
        super::grpc_reflect::for_scenario(t, tls, &dir, service)
    };
    let plan = ScenarioPlan::parse_reflecting(&text, &file.display().to_string(), read, target, Some(&reflect))
        .map_err(|e| {
            UsageError(if script {
                format!("{}: options: {}", file.display(), e.message)
            } else {
                e.to_string()
            })
        })?;
    super::shared::check_js_steps(&plan)?;
    Ok(match scale {
        None => plan,
        Some(f) if f.is_finite() && f > 0.0 => plan.scaled(f),
        Some(f) => return Err(UsageError(format!("--scale {f}: give a factor above 0, e.g. 0.1")).into()),
    })
}

/// `NAME=VALUE` pairs from `--env`.
pub(super) fn parse_env(pairs: &[String]) -> Result<Vec<(String, String)>, UsageError> {
    pairs
        .iter()
        .map(|p| match p.split_once('=') {
            Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
            _ => Err(UsageError(format!("--env '{p}': expected NAME=VALUE"))),
        })
        .collect()
}
