//! `throng mqtt`: publishers and subscribers on an MQTT broker.
//!
//! ```text
//!  flags ──► PubSubArgs ── MqttPlan::from_args ──► MqttPlan
//!        ──► throng_engine::run_mqtt (one thread) ──► RunResult
//!            (measurements.pubsub: the books; phases delivery, puback, …)
//!        ──► report on stdout, --json, --html
//! ```

use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use throng_plan::{MAX_PAYLOAD, MqttPlan, PAYLOAD_HEADER, PubSubArgs};

use super::shared::{finish_runs, repeated};
use crate::args::{Format, MqttCmd, RepeatArgs};
use crate::exit::UsageError;
use crate::progress::Display;

pub fn run(c: MqttCmd) -> anyhow::Result<ExitCode> {
    if matches!(c.output.format, Format::Httperf | Format::Ab) {
        return Err(UsageError(
            "--format: ab's and httperf's views count HTTP requests; an MQTT run is shown as text or json".into(),
        )
        .into());
    }
    if c.output.export.csv_requests.is_some() {
        return Err(UsageError(
            "--csv-requests: throng mqtt does not log its messages one by one; leave it out (--csv writes the \
             per-second figures, --hdr-log the per-second histograms)"
                .into(),
        )
        .into());
    }
    let data = c.data.as_deref().map(read_data).transpose()?;
    let plan = MqttPlan::from_args(PubSubArgs {
        target: c.target.clone(),
        publishers: c.publishers,
        subscribers: c.subscribers,
        topic: c.topic.clone(),
        rate: c.rate,
        qos: c.qos,
        payload: c.payload,
        data,
        retain: c.retain,
        duration: c.duration,
        messages: c.messages,
        fan: c.fan.clone(),
        version: c.mqtt_version.clone(),
        window: c.window,
        drain: c.drain,
        timeout: c.timeout,
        thresholds: c.thresholds.clone(),
    })?;
    // A threshold that could only judge nothing here (dropped in a closed
    // loop) is refused before the run, as for throng http.
    for t in &plan.thresholds {
        let said = |e: &dyn std::fmt::Display| UsageError(format!("--threshold: {e}"));
        throng_scenario::Threshold::read_line(t)
            .map_err(|e| said(&e))?
            .check_http(&[], plan.rate.is_some())
            .map_err(|e| said(&e))?;
    }
    super::export::check_outputs(&[
        ("--json", c.output.json.as_deref()),
        ("--html", c.output.html.as_deref()),
    ])?;
    let (exports, _rows) = super::export::open_run(&c.output.export)?;
    let repeat = RepeatArgs {
        count: 1,
        settle: Duration::ZERO,
    };
    let runs = repeated(repeat, c.output.quiet, |control| {
        let display = Display::new(c.output.quiet);
        let result = throng_engine::run_mqtt(&plan, control, &mut |p| display.tick(p));
        display.finish();
        result.context("the run could not start")
    })?;
    let (code, merged) = finish_runs(repeat, &runs, c.output.json.as_deref(), c.output.format)?;
    exports.write(&merged)?;
    if let Some(path) = &c.output.html {
        super::shared::write_html(path, &merged)?;
    }
    Ok(code.into())
}

/// `--data`: the text, or `@FILE`'s bytes (read no further than a payload
/// holds: /dev/zero is refused, not read forever).
fn read_data(data: &str) -> Result<(String, Vec<u8>), UsageError> {
    let limit = MAX_PAYLOAD - PAYLOAD_HEADER;
    let Some(path) = data.strip_prefix('@') else {
        return Ok(("--data".to_string(), data.as_bytes().to_vec()));
    };
    if path == "-" {
        return Err(UsageError(
            "--data @-: throng mqtt does not read stdin; give the text, or @FILE".into(),
        ));
    }
    let path = Path::new(path);
    match throng_plan::input::read_limited(path, limit) {
        Ok(bytes) => Ok((format!("@{}", path.display()), bytes)),
        Err(throng_plan::input::ReadError::Io(e)) => Err(UsageError(format!(
            "--data @{}: cannot read it: {e}; give a readable file",
            path.display()
        ))),
        Err(_) => Err(UsageError(format!(
            "--data @{}: holds more than {limit} bytes, more than a message's payload after its header; \
             use a smaller file",
            path.display()
        ))),
    }
}
