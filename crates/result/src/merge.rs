//! Adding results: exactly (histograms add), side by side (segments of
//! one plan) or one after another (`--repeat`).

use throng_metrics::{HistError, Measurements};

use crate::error::ResultError;
use crate::limits;
use crate::parts::{Generator, Io, KernelSockets, Timestamps};
use crate::run::RunResult;
use crate::schema::SCHEMA;

impl RunResult {
    /// Adds several results into one: counters and histograms add exactly;
    /// series line up by wall-clock second; the duration spans the earliest
    /// start to the latest end. The plan and environment are the first's.
    pub fn merge(results: &[RunResult]) -> Result<RunResult, ResultError> {
        let (first, rest) = results
            .split_first()
            .ok_or_else(|| ResultError::Incompatible("no results to merge".to_string()))?;
        for r in rest {
            if std::mem::discriminant(&r.plan) != std::mem::discriminant(&first.plan) {
                return Err(ResultError::Incompatible(
                    "results come from different commands".to_string(),
                ));
            }
        }
        let start = results.iter().map(|r| r.started_at_unix_ms).min().unwrap_or(0);
        let end_ms = results
            .iter()
            .map(|r| r.started_at_unix_ms as f64 + r.duration_s * 1000.0)
            .fold(0f64, f64::max);
        let span_s = (end_ms - start as f64).max(0.0) / 1000.0;
        if span_s > limits::MAX_DURATION_S {
            return Err(ResultError::Incompatible(format!(
                "the results span {:.0} days from the first start to the last end, more than the longest \
                 run a result may cover (366 days); merge parts that ran at the same time",
                span_s / 86_400.0
            )));
        }
        let mut merged = Measurements::default();
        let mut generator = Generator::default();
        let mut parts = Vec::new();
        let mut notes = Vec::new();
        let overflow = |what: &str| ResultError::Hist(HistError::Overflow(format!("the generator's {what}")));
        for r in results {
            let offset = std::time::Duration::from_millis(r.started_at_unix_ms - start);
            merged.merge(&r.measurements, offset)?;
            generator.cpu_user_s += r.generator.cpu_user_s;
            generator.cpu_system_s += r.generator.cpu_system_s;
            generator.peak_rss_bytes = generator
                .peak_rss_bytes
                .checked_add(r.generator.peak_rss_bytes)
                .ok_or_else(|| overflow("peak_rss_bytes"))?;
            generator.threads = generator
                .threads
                .checked_add(r.generator.threads)
                .ok_or_else(|| overflow("threads"))?;
            generator.timestamps = Timestamps::merged(generator.timestamps.as_ref(), r.generator.timestamps.as_ref());
            generator.kernel = KernelSockets::merged(generator.kernel.as_ref(), r.generator.kernel.as_ref());
            generator.io = Io::merged(generator.io, r.generator.io);
            if generator.io_fallback.is_none() {
                generator.io_fallback.clone_from(&r.generator.io_fallback);
            }
            if generator.io_not_carried.is_none() {
                generator.io_not_carried.clone_from(&r.generator.io_not_carried);
            }
            parts.extend(r.parts.iter().cloned());
            notes.extend(r.notes.iter().cloned());
        }
        // Known for the whole only when known for every part.
        if let Some(all) = results
            .iter()
            .map(|r| r.generator.peak_pss_bytes)
            .collect::<Option<Vec<u64>>>()
        {
            let sum = all.iter().try_fold(0u64, |a, &b| a.checked_add(b));
            generator.peak_pss_bytes = Some(sum.ok_or_else(|| overflow("peak_pss_bytes"))?);
        }
        notes.push(format!(
            "merged from {} results ({} runs); generator figures are sums over them",
            results.len(),
            parts.len()
        ));
        let earliest = results.iter().min_by_key(|r| r.started_at_unix_ms).unwrap_or(first);
        let merged = RunResult {
            schema: SCHEMA.to_string(),
            throng_version: first.throng_version.clone(),
            plan: first.plan.clone(),
            started_at: earliest.started_at.clone(),
            started_at_unix_ms: start,
            duration_s: span_s,
            coordinated_omission_free: results.iter().all(|r| r.coordinated_omission_free),
            interrupted: results.iter().any(|r| r.interrupted),
            environment: first.environment.clone(),
            generator,
            measurements: merged,
            parts,
            notes,
            trigger: results.iter().find_map(|r| r.trigger.clone()),
            thresholds: Vec::new(),
            segment: None,
            remote_write: added(results.iter().map(|r| &r.remote_write)),
            otlp: added(results.iter().map(|r| &r.otlp)),
        }
        .with_segment_notes(&segment_problems(results))
        .judged();
        // What a merge writes must read back.
        limits::check_run(&merged, "")?;
        Ok(merged)
    }

    fn with_segment_notes(mut self, problems: &[String]) -> RunResult {
        self.notes.extend(problems.iter().map(|p| format!("{SEGMENT_NOTE}{p}")));
        self
    }

    /// Marks a merge of processes that ran one segment together as that
    /// segment (their shares are not duplicates of each other).
    pub fn as_segment(mut self, segment: Option<throng_plan::Segment>) -> RunResult {
        self.notes.retain(|n| !n.starts_with(SEGMENT_NOTE));
        self.segment = segment;
        self
    }

    /// The problems [`segment_problems`] found when this result was merged.
    pub fn segment_notes(&self) -> impl Iterator<Item = &str> {
        self.notes.iter().filter_map(|n| n.strip_prefix(SEGMENT_NOTE))
    }

    /// Adds runs of one plan made one after another (`--repeat`): counters
    /// and histograms add as in [`RunResult::merge`], but the duration is the
    /// sum of the runs' durations (the pauses between them are not run time),
    /// and peak memory and threads are the largest run's, not their sum.
    pub fn merge_sequential(runs: &[RunResult]) -> Result<RunResult, ResultError> {
        if let [only] = runs {
            return Ok(only.clone());
        }
        let mut merged = RunResult::merge(runs)?;
        merged.duration_s = runs.iter().map(|r| r.duration_s).sum();
        merged.generator.peak_rss_bytes = runs.iter().map(|r| r.generator.peak_rss_bytes).max().unwrap_or(0);
        merged.generator.peak_pss_bytes = runs.iter().map(|r| r.generator.peak_pss_bytes).max().flatten();
        merged.generator.threads = runs.iter().map(|r| r.generator.threads).max().unwrap_or(0);
        merged
            .notes
            .retain(|n| !n.starts_with("merged from ") && !n.starts_with(SEGMENT_NOTE));
        // Repeats of one segment are that segment, not duplicates.
        merged.segment = runs.first().and_then(|r| r.segment.clone());
        merged.notes.push(format!(
            "{} runs in sequence, added up: counts and histograms add; the duration is the sum of the runs' \
             (pauses between runs excluded); CPU time is their sum, peak memory the largest run's",
            runs.len()
        ));
        limits::check_run(&merged, "")?;
        Ok(merged)
    }
}

/// How notes about a merge's segments begin.
const SEGMENT_NOTE: &str = "INCOMPLETE: ";

/// What is wrong with how `results` cover their execution-segment sequence:
/// missing segments, segments given twice, different sequences, or results
/// with and without segments mixed. Empty when none has a segment, or when
/// they cover their sequence exactly once.
pub fn segment_problems(results: &[RunResult]) -> Vec<String> {
    let with: Vec<&throng_plan::Segment> = results.iter().filter_map(|r| r.segment.as_ref()).collect();
    let Some(first) = with.first() else {
        return Vec::new();
    };
    let mut problems = Vec::new();
    let without = results.len() - with.len();
    if without > 0 {
        problems.push(format!(
            "{without} of {} results ran the whole plan while the others ran segments of it; \
             the total counts the whole plan more than once",
            results.len()
        ));
    }
    if let Some(other) = with.iter().find(|s| s.sequence() != first.sequence()) {
        problems.push(format!(
            "segments come from different sequences ({} and {}); merge the results of one sequence",
            sequence_text(first),
            sequence_text(other)
        ));
        return problems;
    }
    let mut seen = vec![0usize; first.count()];
    for s in &with {
        seen[s.index()] += 1;
    }
    let all = first.siblings();
    let missing: Vec<String> = all.iter().filter(|s| seen[s.index()] == 0).map(|s| s.range()).collect();
    if !missing.is_empty() {
        problems.push(format!(
            "missing segment{} {} of {}: the total is partial ({} of {} segments)",
            if missing.len() == 1 { "" } else { "s" },
            missing.join(", "),
            sequence_text(first),
            first.count() - missing.len(),
            first.count()
        ));
    }
    for s in all.iter().filter(|s| seen[s.index()] > 1) {
        problems.push(format!(
            "segment {} given {} times: its share is counted more than once",
            s.range(),
            seen[s.index()]
        ));
    }
    problems
}

fn sequence_text(s: &throng_plan::Segment) -> String {
    s.sequence()
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// The push records of the parts that have one, added up (None when none has).
fn added<'a>(records: impl Iterator<Item = &'a Option<crate::PushRecord>>) -> Option<crate::PushRecord> {
    records.flatten().cloned().reduce(|mut a, b| {
        a.add(&b);
        a
    })
}
