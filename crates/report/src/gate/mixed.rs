//! Whether the two sides ran plans whose figures compare.

use crate::compare::model::Side;
use crate::format::clip;

/// How the sides' plans differ in what makes their figures comparable: the
/// command, target, method, open or closed loop ([`throng_result::Plan::differences`]),
/// and the rate, concurrency, streams, HTTP version, keep-alive, the
/// storm's shape and protocol, a scenario's file and executors. Counts and
/// durations may differ. Each side's runs are checked against A's first.
pub fn mixed_plans(a: &Side, b: &Side) -> Vec<String> {
    let Some(first) = a.runs.first() else {
        return Vec::new();
    };
    let mut out: Vec<String> = Vec::new();
    for (label, side) in [(&a.label, a), (&b.label, b)] {
        for r in &side.runs {
            for d in plan_differences(&first.plan, &r.plan) {
                let text = format!("{d} ({} vs {})", clip(&a.label, 40), clip(label, 40));
                if !out.contains(&text) {
                    out.push(text);
                }
            }
        }
    }
    out
}

fn plan_differences(a: &throng_result::Plan, b: &throng_result::Plan) -> Vec<String> {
    use throng_result::Plan;
    let mut out = a.differences(b);
    if a.command() != b.command() {
        return out;
    }
    let mut differ = |what: &str, x: String, y: String| {
        if x != y {
            out.push(format!("{what} {x} vs {y}"));
        }
    };
    match (a, b) {
        (Plan::Http(x), Plan::Http(y)) => {
            let rate = |p: &throng_plan::HttpPlan| match p.load {
                throng_plan::Load::Open { rate } => format!("{rate}/s"),
                throng_plan::Load::Closed => "none (closed loop)".to_string(),
            };
            if x.is_open_loop() && y.is_open_loop() {
                differ("rate", rate(x), rate(y));
            }
            differ("connections", x.connections.to_string(), y.connections.to_string());
            differ("HTTP version", x.http.label().to_string(), y.http.label().to_string());
            if !x.http.is_http1() || !y.http.is_http1() {
                differ("streams", x.streams.to_string(), y.streams.to_string());
            }
            differ(
                "keep-alive",
                if x.keepalive { "on" } else { "off" }.to_string(),
                if y.keepalive { "on" } else { "off" }.to_string(),
            );
            differ(
                "targets",
                x.targets.len().max(1).to_string(),
                y.targets.len().max(1).to_string(),
            );
            differ(
                "gRPC call",
                x.grpc.as_ref().map_or("none".to_string(), |g| g.call.clone()),
                y.grpc.as_ref().map_or("none".to_string(), |g| g.call.clone()),
            );
        }
        (Plan::Storm(x), Plan::Storm(y)) => {
            differ("connections", x.connections.to_string(), y.connections.to_string());
            let rate = |r: Option<f64>| r.map_or("unlimited".to_string(), |r| format!("{r}/s"));
            differ("connection rate", rate(x.rate), rate(y.rate));
            let most = |m: Option<u64>| m.map_or("unlimited".to_string(), |m| m.to_string());
            differ("at most at once", most(x.max_concurrent), most(y.max_concurrent));
            differ("hold", format!("{:?}", x.hold), format!("{:?}", y.hold));
            differ("HTTP version", x.http.label().to_string(), y.http.label().to_string());
            // The protocol's steps may hold credentials: say only that they differ.
            if x.protocol != y.protocol || x.request.is_some() != y.request.is_some() {
                out.push("the protocol spoken after connecting".to_string());
            }
        }
        (Plan::Run(x), Plan::Run(y)) => {
            differ("scenario file", x.file.clone(), y.file.clone());
            let names = |p: &throng_scenario::ScenarioPlan| {
                p.scenarios
                    .iter()
                    .map(|s| s.name.clone())
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            differ("scenarios", names(x), names(y));
            differ(
                "HTTP version",
                x.target.http.label().to_string(),
                y.target.http.label().to_string(),
            );
            for (s, t) in x.scenarios.iter().zip(&y.scenarios) {
                if s.name == t.name && s.executor != t.executor {
                    out.push(format!("scenario {}'s executor (VUs, rate or stages)", s.name));
                }
            }
        }
        _ => {}
    }
    out
}
