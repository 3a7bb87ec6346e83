//! The report layouts and the one function that renders a result in one
//! (the writers are the modules beside this one).

use std::io::{self, Write};

use throng_result::{Plan, RunResult};

use crate::{ab, httperf, text};

/// A report layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum View {
    /// throng's own summary.
    Text,
    /// ApacheBench's report.
    Ab,
    /// httperf's report.
    Httperf,
    /// The result document itself.
    Json,
}

/// Whether `view` can show `result`: the ab and httperf layouts describe
/// HTTP runs.
pub fn supports(view: View, result: &RunResult) -> Result<(), String> {
    match (view, &result.plan) {
        (View::Ab | View::Httperf, Plan::Storm(_) | Plan::Run(_) | Plan::Mqtt(_)) => Err(format!(
            "the {} view shows `throng http` runs and this result is a {}; use --format text or json",
            if view == View::Ab { "ab" } else { "httperf" },
            match result.plan {
                Plan::Storm(_) => "storm",
                Plan::Mqtt(_) => "mqtt run",
                _ => "scenario run",
            }
        )),
        _ => Ok(()),
    }
}

/// Renders `result` in `view` (check [`supports`] first; an unsupported
/// view falls back to text).
pub fn write(view: View, result: &RunResult, w: &mut dyn Write) -> io::Result<()> {
    match (view, &result.plan) {
        (View::Json, _) => result.to_writer(&mut *w).map_err(io::Error::other),
        (View::Text, _) | (_, Plan::Storm(_) | Plan::Run(_) | Plan::Mqtt(_)) => text::write(result, w),
        (View::Ab, Plan::Http(_)) => ab::write(result, w),
        (View::Httperf, Plan::Http(_)) => httperf::write(result, w),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{test_result, test_run_result, test_storm_result};

    /// Each kind's text report through every view that shows it as text: the
    /// same report, written once (the writers used to hand a scenario result
    /// back and forth without end).
    #[test]
    fn every_text_writer_is_total_and_routes_by_kind() {
        let results = [
            (
                "throng http GET http://127.0.0.1:8080/",
                test_result(Default::default()),
            ),
            (
                "throng storm tcp://127.0.0.1:4222",
                test_storm_result(Default::default()),
            ),
            (
                "throng run t.yaml → http://127.0.0.1:8080",
                test_run_result(Default::default()),
            ),
        ];
        for (i, (first_line, r)) in results.iter().enumerate() {
            let mut reports = Vec::new();
            let mut out = Vec::new();
            text::write(r, &mut out).expect("written");
            reports.push(String::from_utf8(out).expect("utf-8"));
            // ab's and httperf's layouts are an HTTP run's: other kinds fall
            // back to the text report.
            let views: &[View] = if i == 0 {
                &[View::Text]
            } else {
                &[View::Text, View::Ab, View::Httperf]
            };
            for v in views {
                let mut out = Vec::new();
                write(*v, r, &mut out).expect("written");
                reports.push(String::from_utf8(out).expect("utf-8"));
            }
            assert!(reports[0].starts_with(first_line), "{}", reports[0]);
            assert_eq!(reports[0].matches(first_line).count(), 1, "{}", reports[0]);
            assert!(reports.iter().all(|x| *x == reports[0]));
        }
    }
}
