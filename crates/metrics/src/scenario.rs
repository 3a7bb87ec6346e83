//! What a scenario run measures beyond the phases: per-tag request
//! statistics (step, group, scenario, stage), checks, iterations, groups,
//! virtual users — recorded per worker, merged exactly.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::custom::{CustomKind, CustomStats};
use crate::hist::{EncodedHist, Hist, HistError};
use crate::outcome::add;

/// Distinct check, group and custom-metric names a scenario keeps apart: a
/// script makes names as it runs (a check named after each id), and each
/// costs memory. Past it they add up under [`OTHER`], so nothing is lost.
pub const MAX_NAMES: usize = 1000;

/// Where names past [`MAX_NAMES`] add up.
pub const OTHER: &str = "(other)";

/// `second + offset`, or an overflow error.
fn shift(second: u64, offset: u64) -> Result<u64, HistError> {
    second
        .checked_add(offset)
        .ok_or_else(|| HistError::Overflow(format!("second {second} plus an offset of {offset} s")))
}

/// Requests carrying one tag (or all requests, under the empty key).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TagStats {
    /// Requests that ended, except those cut off (see `interrupted`).
    pub requests: u64,
    /// Of those, failed in any way (including an unexpected status).
    pub failed: u64,
    /// Requests cut off before they ended: still in flight when the plan's
    /// graceful period ran out or the run was stopped. Not in `requests`:
    /// they say nothing about the target.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub interrupted: u64,
    /// Of those, answered with a status the step does not expect.
    pub unexpected_status: u64,
    /// Response time of every response, whatever its status (k6's "all requests").
    pub response: Hist,
    /// Response time of responses with an expected status ("successful").
    pub expected: Hist,
    /// Per second.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub series: Vec<TagSecond>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// One second of one tag.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TagSecond {
    /// Seconds since the run's start.
    pub second: u64,
    /// Requests that ended.
    pub requests: u64,
    /// Of those, failed.
    pub failed: u64,
    /// Of those, with an unexpected status.
    pub unexpected_status: u64,
    /// Response times.
    pub response: EncodedHist,
}

/// Passes and failures of one named check.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckCount {
    /// Times it held.
    pub passes: u64,
    /// Times it did not.
    pub fails: u64,
}

/// One second of the run as a whole.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScenarioSecond {
    /// Seconds since the run's start.
    pub second: u64,
    /// Iterations completed.
    pub iterations: u64,
    /// Iterations dropped (no VU free).
    pub dropped_iterations: u64,
    /// Most VUs active during the second.
    pub vus: u64,
    /// Most VUs active during the second, per scenario (in the plan's order).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub vus_by_scenario: Vec<u64>,
}

/// Everything a scenario run adds to [`crate::Measurements`].
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ScenarioStats {
    /// By tag: `""` (all requests), `step:NAME`, `group:NAME`,
    /// `scenario:NAME`, `stage:SCENARIO#N`.
    pub tags: BTreeMap<String, TagStats>,
    /// By check name.
    pub checks: BTreeMap<String, CheckCount>,
    /// Iterations completed.
    pub iterations: u64,
    /// Iteration durations.
    pub iteration: Hist,
    /// Iterations an arrival-rate executor could not start (no VU free).
    pub dropped_iterations: u64,
    /// Group durations, by group name.
    pub groups: BTreeMap<String, Hist>,
    /// Most VUs active at once (summed over workers per second).
    pub vus_max: u64,
    /// Responses whose body was longer than their step's `max_body` while
    /// a check or capture read it: those saw only the first `max_body` bytes.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub truncated_bodies: u64,
    /// `websocket:` steps: messages sent (text and binary).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub ws_sent: u64,
    /// `websocket:` steps: messages received (text and binary, whether an
    /// expect matched them or passed them over).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub ws_received: u64,
    /// k6 scripts: iterations that ended in an exception, by class
    /// (`script.error`, `script.timeout`, `script.memory`, `script.stack`,
    /// `script.init`); not counted in `iterations`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub failed_iterations: BTreeMap<String, u64>,
    /// The first failure's message of each class in `failed_iterations`
    /// (at most 300 characters), what the script threw and where.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub failed_messages: BTreeMap<String, String>,
    /// Per second.
    pub series: Vec<ScenarioSecond>,
    /// The file's custom metrics (`metrics:`), by name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub custom: BTreeMap<String, CustomStats>,
}

impl ScenarioStats {
    /// Adds `o` (a worker's or another process's) into these; `offset`
    /// shifts its seconds.
    pub fn merge(&mut self, o: &ScenarioStats, offset: u64) -> Result<(), HistError> {
        add(&mut self.ws_sent, o.ws_sent, "scenario.ws_sent")?;
        for (k, c) in &o.custom {
            match self.custom.get_mut(k) {
                Some(mine) => mine.merge(c)?,
                None => {
                    self.custom.insert(k.clone(), c.clone());
                }
            }
        }
        add(&mut self.ws_received, o.ws_received, "scenario.ws_received")?;
        for (k, n) in &o.failed_iterations {
            add(
                self.failed_iterations.entry(k.clone()).or_default(),
                *n,
                "scenario.failed_iterations",
            )?;
        }
        for (k, m) in &o.failed_messages {
            self.failed_messages.entry(k.clone()).or_insert_with(|| m.clone());
        }
        for (k, t) in &o.tags {
            let mine = self.tags.entry(k.clone()).or_default();
            add(&mut mine.requests, t.requests, "scenario.tags.requests")?;
            add(&mut mine.failed, t.failed, "scenario.tags.failed")?;
            add(
                &mut mine.unexpected_status,
                t.unexpected_status,
                "scenario.tags.unexpected_status",
            )?;
            add(&mut mine.interrupted, t.interrupted, "scenario.tags.interrupted")?;
            mine.response.add(&t.response)?;
            mine.expected.add(&t.expected)?;
            let mut by: BTreeMap<u64, TagSecond> = std::mem::take(&mut mine.series)
                .into_iter()
                .map(|s| (s.second, s))
                .collect();
            for s in &t.series {
                let second = shift(s.second, offset)?;
                match by.get_mut(&second) {
                    Some(m) => {
                        add(&mut m.requests, s.requests, "scenario.tags.series.requests")?;
                        add(&mut m.failed, s.failed, "scenario.tags.series.failed")?;
                        add(
                            &mut m.unexpected_status,
                            s.unexpected_status,
                            "scenario.tags.series.unexpected_status",
                        )?;
                        let mut h = m.response.decode()?;
                        h.add(&s.response.decode()?)?;
                        m.response = EncodedHist::new(&h);
                    }
                    None => {
                        by.insert(second, TagSecond { second, ..s.clone() });
                    }
                }
            }
            mine.series = by.into_values().collect();
        }
        for (k, c) in &o.checks {
            let mine = self.checks.entry(k.clone()).or_default();
            add(&mut mine.passes, c.passes, "scenario.checks.passes")?;
            add(&mut mine.fails, c.fails, "scenario.checks.fails")?;
        }
        add(&mut self.iterations, o.iterations, "scenario.iterations")?;
        self.iteration.add(&o.iteration)?;
        add(
            &mut self.dropped_iterations,
            o.dropped_iterations,
            "scenario.dropped_iterations",
        )?;
        add(
            &mut self.truncated_bodies,
            o.truncated_bodies,
            "scenario.truncated_bodies",
        )?;
        for (k, h) in &o.groups {
            self.groups.entry(k.clone()).or_default().add(h)?;
        }
        let mut by: BTreeMap<u64, ScenarioSecond> = std::mem::take(&mut self.series)
            .into_iter()
            .map(|s| (s.second, s))
            .collect();
        for s in &o.series {
            let second = shift(s.second, offset)?;
            let m = by.entry(second).or_insert(ScenarioSecond {
                second,
                ..ScenarioSecond::default()
            });
            add(&mut m.iterations, s.iterations, "scenario.series.iterations")?;
            add(
                &mut m.dropped_iterations,
                s.dropped_iterations,
                "scenario.series.dropped_iterations",
            )?;
            add(&mut m.vus, s.vus, "scenario.series.vus")?;
            if m.vus_by_scenario.len() < s.vus_by_scenario.len() {
                m.vus_by_scenario.resize(s.vus_by_scenario.len(), 0);
            }
            for (mine, &theirs) in m.vus_by_scenario.iter_mut().zip(&s.vus_by_scenario) {
                add(mine, theirs, "scenario.series.vus_by_scenario")?;
            }
        }
        self.series = by.into_values().collect();
        self.vus_max = self
            .series
            .iter()
            .map(|s| s.vus)
            .max()
            .unwrap_or(0)
            .max(self.vus_max.max(o.vus_max));
        Ok(())
    }

    /// All requests (the untagged figures).
    pub fn all(&self) -> Option<&TagStats> {
        self.tags.get("")
    }
}

/// One tag's running figures in a recorder.
#[derive(Clone, Debug)]
struct TagSlot {
    key: String,
    stats: TagStats,
    second: TagSecond,
    current: Hist,
}

/// Records a worker's scenario figures (alongside its [`crate::Recorder`]).
#[derive(Clone, Debug)]
pub struct ScenarioRecorder {
    origin: Instant,
    second: u64,
    tags: Vec<TagSlot>,
    checks: Vec<(String, CheckCount)>,
    iterations: u64,
    iteration: Hist,
    dropped: u64,
    truncated_bodies: u64,
    ws_sent: u64,
    ws_received: u64,
    failed_iterations: BTreeMap<String, u64>,
    failed_messages: BTreeMap<String, String>,
    groups: Vec<(String, Hist)>,
    custom: Vec<(String, CustomStats)>,
    /// VUs active now, per scenario.
    vus: Vec<u64>,
    point: ScenarioSecond,
    series: Vec<ScenarioSecond>,
}

impl ScenarioRecorder {
    /// A recorder whose seconds count from `origin`.
    pub fn new(origin: Instant) -> Self {
        ScenarioRecorder {
            origin,
            second: 0,
            tags: Vec::new(),
            checks: Vec::new(),
            iterations: 0,
            iteration: Hist::new(),
            dropped: 0,
            truncated_bodies: 0,
            ws_sent: 0,
            ws_received: 0,
            failed_iterations: BTreeMap::new(),
            failed_messages: BTreeMap::new(),
            groups: Vec::new(),
            custom: Vec::new(),
            vus: Vec::new(),
            point: ScenarioSecond::default(),
            series: Vec::new(),
        }
    }

    /// The index of a tag (registered once, at setup).
    pub fn tag(&mut self, key: &str) -> usize {
        if let Some(i) = self.tags.iter().position(|t| t.key == key) {
            return i;
        }
        self.tags.push(TagSlot {
            key: key.to_string(),
            stats: TagStats::default(),
            second: TagSecond::default(),
            current: Hist::new(),
        });
        self.tags.len() - 1
    }

    /// The index of a check.
    pub fn check_index(&mut self, name: &str) -> usize {
        if let Some(i) = self.checks.iter().position(|(n, _)| n == name) {
            return i;
        }
        let name = if self.checks.len() >= MAX_NAMES { OTHER } else { name };
        if let Some(i) = self.checks.iter().position(|(n, _)| n == name) {
            return i;
        }
        self.checks.push((name.to_string(), CheckCount::default()));
        self.checks.len() - 1
    }

    /// The index of a group (past [`MAX_NAMES`] names, a script's new
    /// group names add up under `(other)`).
    pub fn group_index(&mut self, name: &str) -> usize {
        if let Some(i) = self.groups.iter().position(|(n, _)| n == name) {
            return i;
        }
        let name = if self.groups.len() >= MAX_NAMES { OTHER } else { name };
        if let Some(i) = self.groups.iter().position(|(n, _)| n == name) {
            return i;
        }
        self.groups.push((name.to_string(), Hist::new()));
        self.groups.len() - 1
    }

    /// The index of a custom metric, or of one of its tagged series
    /// (`name{tag:value}`; a script's are registered as they come, so past
    /// [`MAX_NAMES`] they add up under `name{(other)}`).
    pub fn custom_index(&mut self, name: &str, kind: CustomKind) -> usize {
        if let Some(i) = self.custom.iter().position(|(n, _)| n == name) {
            return i;
        }
        let other = format!("{}{{{OTHER}}}", name.split('{').next().unwrap_or(name));
        let name = if self.custom.len() >= MAX_NAMES {
            other.as_str()
        } else {
            name
        };
        if let Some(i) = self.custom.iter().position(|(n, _)| n == name) {
            return i;
        }
        self.custom.push((name.to_string(), CustomStats::new(kind)));
        self.custom.len() - 1
    }

    /// An `add:` step recorded `value` (None: not a number) into custom
    /// metric `index`.
    pub fn custom(&mut self, index: usize, value: Option<f64>) {
        if let Some((_, c)) = self.custom.get_mut(index) {
            c.record(value);
        }
    }

    fn at(&mut self, now: Instant) {
        let s = now.saturating_duration_since(self.origin).as_secs();
        if s > self.second {
            self.roll(s);
        }
    }

    #[cold]
    fn roll(&mut self, to: u64) {
        self.close_second();
        for second in self.second + 1..to {
            self.series.push(self.idle_second(second));
        }
        self.second = to;
        self.point = self.idle_second(to);
    }

    /// A second in which only the VUs active now were seen.
    fn idle_second(&self, second: u64) -> ScenarioSecond {
        ScenarioSecond {
            second,
            vus: self.vus.iter().sum(),
            vus_by_scenario: self.vus.clone(),
            ..ScenarioSecond::default()
        }
    }

    fn close_second(&mut self) {
        let second = self.second;
        for t in &mut self.tags {
            if t.second.requests > 0 {
                let _ = t.stats.response.add(&t.current);
                let mut s = std::mem::take(&mut t.second);
                s.second = second;
                s.response = EncodedHist::new(&t.current);
                t.stats.series.push(s);
                t.current.reset();
            }
        }
        let mut p = self.point.clone();
        p.second = second;
        self.series.push(p);
    }

    /// A request ended: `response` is its response time when a response
    /// came (with whether its status was expected); `failed` when it ended
    /// in any error class. Counted under every tag in `tags`.
    pub fn request(&mut self, now: Instant, tags: &[usize], response: Option<(Duration, bool)>, failed: bool) {
        self.at(now);
        let unexpected = matches!(response, Some((_, false)));
        for &i in tags {
            let Some(t) = self.tags.get_mut(i) else { continue };
            t.second.requests += 1;
            t.second.failed += u64::from(failed);
            t.second.unexpected_status += u64::from(unexpected);
            t.stats.requests += 1;
            t.stats.failed += u64::from(failed);
            t.stats.unexpected_status += u64::from(unexpected);
            if let Some((d, expected)) = response {
                t.current.record(d);
                if expected {
                    t.stats.expected.record(d);
                }
            }
        }
    }

    /// A request was cut off before it ended (counted apart from `request`).
    pub fn interrupted(&mut self, tags: &[usize]) {
        for &i in tags {
            if let Some(t) = self.tags.get_mut(i) {
                t.stats.interrupted += 1;
            }
        }
    }

    /// A named check held or not.
    pub fn check(&mut self, index: usize, passed: bool) {
        if let Some((_, c)) = self.checks.get_mut(index) {
            if passed {
                c.passes += 1;
            } else {
                c.fails += 1;
            }
        }
    }

    /// A response's body was longer than what its checks and captures
    /// could see.
    pub fn body_truncated(&mut self) {
        self.truncated_bodies += 1;
    }

    /// A `websocket:` step sent a message.
    pub fn ws_sent(&mut self) {
        self.ws_sent += 1;
    }

    /// A `websocket:` step received a message.
    pub fn ws_received(&mut self) {
        self.ws_received += 1;
    }

    /// An iteration completed after `d`.
    pub fn iteration(&mut self, now: Instant, d: Duration) {
        self.at(now);
        self.iterations += 1;
        self.point.iterations += 1;
        self.iteration.record(d);
    }

    /// A k6 script's iteration ended in an exception of `class`, saying
    /// `message` (kept for the first of each class).
    pub fn iteration_failed(&mut self, now: Instant, class: &str, message: &str) {
        self.at(now);
        *self.failed_iterations.entry(class.to_string()).or_default() += 1;
        if !self.failed_messages.contains_key(class) {
            let kept: String = message.chars().take(300).collect();
            self.failed_messages.insert(class.to_string(), kept);
        }
    }

    /// An iteration could not start.
    pub fn dropped_iteration(&mut self, now: Instant) {
        self.dropped_iterations(now, 1);
    }

    /// `n` iterations could not start: counted at once, so a schedule far
    /// beyond what the VUs can take costs nothing per iteration.
    pub fn dropped_iterations(&mut self, now: Instant, n: u64) {
        self.at(now);
        self.dropped += n;
        self.point.dropped_iterations += n;
    }

    /// A group took `d`.
    pub fn group(&mut self, index: usize, d: Duration) {
        if let Some((_, h)) = self.groups.get_mut(index) {
            h.record(d);
        }
    }

    /// Scenario `scenario` (its index in the plan) has `active` VUs now.
    pub fn vus(&mut self, now: Instant, scenario: usize, active: u64) {
        self.at(now);
        if self.vus.len() <= scenario {
            self.vus.resize(scenario + 1, 0);
        }
        self.vus[scenario] = active;
        let total = self.vus.iter().sum();
        let p = &mut self.point;
        p.vus = p.vus.max(total);
        if p.vus_by_scenario.len() < self.vus.len() {
            p.vus_by_scenario.resize(self.vus.len(), 0);
        }
        p.vus_by_scenario[scenario] = p.vus_by_scenario[scenario].max(active);
    }

    /// What [`ScenarioRecorder::finish`] would return at `now`, with the
    /// series (the run's and each tag's) cut to their last `keep` seconds;
    /// totals are complete (`vus_max` is the recent seconds' only). The
    /// recorder is left as it was.
    pub fn snapshot_recent(&mut self, now: Instant, keep: usize) -> ScenarioStats {
        let cut = self.series.len().saturating_sub(keep);
        let tail = self.series.split_off(cut);
        let head = std::mem::replace(&mut self.series, tail);
        let heads: Vec<Vec<TagSecond>> = self
            .tags
            .iter_mut()
            .map(|t| {
                let cut = t.stats.series.len().saturating_sub(keep);
                let tail = t.stats.series.split_off(cut);
                std::mem::replace(&mut t.stats.series, tail)
            })
            .collect();
        let stats = self.clone().finish(now);
        let tail = std::mem::replace(&mut self.series, head);
        self.series.extend(tail);
        for (t, head) in self.tags.iter_mut().zip(heads) {
            let tail = std::mem::replace(&mut t.stats.series, head);
            t.stats.series.extend(tail);
        }
        stats
    }

    /// Closes the last second and returns the figures.
    pub fn finish(mut self, end: Instant) -> ScenarioStats {
        self.at(end);
        self.close_second();
        let vus_max = self.series.iter().map(|s| s.vus).max().unwrap_or(0);
        ScenarioStats {
            tags: self.tags.into_iter().map(|t| (t.key, t.stats)).collect(),
            checks: self.checks.into_iter().collect(),
            iterations: self.iterations,
            iteration: self.iteration,
            dropped_iterations: self.dropped,
            groups: self.groups.into_iter().collect(),
            vus_max,
            truncated_bodies: self.truncated_bodies,
            ws_sent: self.ws_sent,
            ws_received: self.ws_received,
            failed_iterations: self.failed_iterations,
            failed_messages: self.failed_messages,
            series: self.series,
            custom: self.custom.into_iter().collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_recent_snapshot_cuts_only_the_series() {
        let t0 = Instant::now();
        let mut r = ScenarioRecorder::new(t0);
        let login = r.tag("step:login");
        for i in 0..40u64 {
            let now = t0 + Duration::from_millis(i * 100);
            r.request(now, &[login], Some((Duration::from_millis(5), true)), false);
            r.iteration(now, Duration::from_millis(5));
        }
        let now = t0 + Duration::from_millis(3950);
        let full = r.clone().finish(now);
        let recent = r.snapshot_recent(now, 1);
        assert_eq!(recent.iterations, 40);
        assert_eq!(recent.tags["step:login"].requests, 40);
        assert_eq!(recent.tags["step:login"].response.count(), 40);
        assert_eq!(recent.series.iter().map(|s| s.second).collect::<Vec<_>>(), [2, 3]);
        assert_eq!(recent.tags["step:login"].series.len(), 2);
        assert_eq!(r.finish(now), full);
    }

    #[test]
    fn tags_checks_and_seconds_add_up() {
        let t0 = Instant::now();
        let mut r = ScenarioRecorder::new(t0);
        let all = r.tag("");
        let login = r.tag("step:login");
        let ok = r.check_index("status is 200");
        for i in 0..10u64 {
            let now = t0 + Duration::from_millis(i * 300);
            let expected = i % 2 == 0;
            r.request(
                now,
                &[all, login],
                Some((Duration::from_millis(10 + i), expected)),
                !expected,
            );
            r.check(ok, expected);
            r.iteration(now, Duration::from_millis(50));
        }
        r.vus(t0, 0, 3);
        r.vus(t0, 1, 2);
        let s = r.finish(t0 + Duration::from_secs(3));
        let tag = &s.tags["step:login"];
        assert_eq!(tag.requests, 10);
        assert_eq!(tag.unexpected_status, 5);
        assert_eq!(tag.failed, 5);
        assert_eq!(tag.response.count(), 10);
        assert_eq!(tag.expected.count(), 5);
        assert_eq!(tag.series.iter().map(|x| x.requests).sum::<u64>(), 10);
        assert_eq!(s.checks["status is 200"], CheckCount { passes: 5, fails: 5 });
        assert_eq!(s.iterations, 10);
        assert_eq!(s.vus_max, 5);
        assert_eq!(s.series[2].vus_by_scenario, [3, 2]);
        let mut merged = s.clone();
        merged.merge(&s, 0).unwrap();
        assert_eq!(merged.tags[""].requests, 20);
        assert_eq!(merged.tags[""].response.count(), 20);
        assert_eq!(merged.checks["status is 200"].passes, 10);
    }

    #[test]
    fn names_past_the_cap_add_up_under_other() {
        let t0 = Instant::now();
        let mut r = ScenarioRecorder::new(t0);
        for i in 0..MAX_NAMES + 5 {
            let c = r.check_index(&format!("check {i}"));
            r.check(c, true);
            let g = r.group_index(&format!("group {i}"));
            r.group(g, Duration::from_millis(1));
            let m = r.custom_index(&format!("orders{{id:{i}}}"), CustomKind::Counter);
            r.custom(m, Some(1.0));
        }
        // Known names still find their own entries past the cap.
        let first = r.check_index("check 0");
        r.check(first, false);
        let s = r.finish(t0);
        assert_eq!(s.checks.len(), MAX_NAMES + 1);
        assert_eq!(s.checks[OTHER], CheckCount { passes: 5, fails: 0 });
        assert_eq!(s.checks["check 0"], CheckCount { passes: 1, fails: 1 });
        assert_eq!(s.groups.len(), MAX_NAMES + 1);
        assert_eq!(s.groups[OTHER].count(), 5);
        assert_eq!(s.custom.len(), MAX_NAMES + 1);
        assert_eq!(s.custom["orders{(other)}"].count, 5);
    }
}
