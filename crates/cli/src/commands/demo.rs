//! `throng demo`: the one-command tour. Starts the lab server in-process,
//! silent for the last 100 ms of every second, and runs the same target
//! closed-loop and open-loop, so that the difference coordinated omission
//! makes is on screen.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use throng_engine::Control;
use throng_lab::{LabConfig, LabServer, Stall};
use throng_plan::{HttpArgs, HttpPlan, format_duration};
use throng_report::View;
use throng_result::RunResult;

use super::shared::{print_bytes, print_report};
use crate::args::DemoCmd;
use crate::progress::Display;
use crate::signals;

const STALL: Stall = Stall {
    every: Duration::from_secs(1),
    duration: Duration::from_millis(100),
};
const OPEN_RATE: f64 = 1000.0;

pub fn run(c: DemoCmd) -> anyhow::Result<ExitCode> {
    throng_engine::sys::raise_fd_limit();
    let server = LabServer::start(&LabConfig {
        listen: "127.0.0.1:0".parse().context("loopback address")?,
        threads: 1,
        stall: Some(STALL),
        tls: None,
    })
    .context("cannot start the lab server on loopback")?;
    let url = format!("http://{}/", server.addr());
    print_bytes(
        format!(
            "throng demo: lab server at {url}\n\
             It answers at once, except that it is silent for the last {} of every {}.\n\
             Both runs below hit it for {}: first closed-loop (10 connections, each waiting for its\n\
             response), then open-loop ({OPEN_RATE} requests/s on a fixed schedule).\n\n",
            format_duration(STALL.duration),
            format_duration(STALL.every),
            format_duration(c.duration),
        )
        .as_bytes(),
    )?;

    let control = Control::new();
    signals::forward_to(&control);
    let base = HttpArgs {
        url,
        duration: Some(c.duration),
        threads: Some(1),
        cores: throng_engine::sys::cores(),
        ..HttpArgs::default()
    };
    let closed = HttpPlan::from_args(HttpArgs {
        connections: Some(10),
        ..base.clone()
    })?;
    let open = HttpPlan::from_args(HttpArgs {
        rate: Some(OPEN_RATE),
        connections: Some(300),
        ..base
    })?;

    let mut results: Vec<RunResult> = Vec::new();
    for (title, plan) in [("1. closed loop", &closed), ("2. open loop", &open)] {
        print_bytes(format!("── {title} ──────────────────────────────────────────\n").as_bytes())?;
        let display = Display::new(false);
        let r = throng_engine::run_http(plan, None, None, &control, &mut |p| display.tick(p));
        display.finish();
        let r = r.context("the demo run could not start")?;
        print_report(View::Text, &r)?;
        print_bytes(b"\n")?;
        let stop = r.interrupted;
        results.push(r);
        if stop {
            return Ok(crate::exit::Outcome::Interrupted.into());
        }
    }
    server.stop();

    let p99 = |r: &RunResult| r.measurements.phase("latency").map_or(0, |h| h.quantile(0.99));
    let f = |us: u64| throng_report::format::us(us as f64);
    let (c99, o99) = (p99(&results[0]), p99(&results[1]));
    let silent = STALL.duration.as_secs_f64() / STALL.every.as_secs_f64();
    let model = STALL.duration.as_secs_f64() * (1.0 - 0.01 / silent) * 1e6;
    print_bytes(
        format!(
            "── what this shows ─────────────────────────────────────\n\
             p99 latency, closed loop: {}   open loop: {}   (stall model: about {})\n\
             The server is silent {:.0}% of the time, so {:.0}% of requests arriving at an even rate\n\
             wait up to {}: the true p99 is near {}. The closed loop under-reports it, because\n\
             its 10 connections simply stop sending while the server is silent and never record\n\
             the requests a real crowd would have sent. The open loop keeps the schedule and\n\
             measures each request from when it should have started.\n\
             Next: throng http --help, throng serve --help, and the README.\n",
            f(c99),
            f(o99),
            f(model as u64),
            silent * 100.0,
            silent * 100.0,
            format_duration(STALL.duration),
            f(model as u64),
        )
        .as_bytes(),
    )?;
    Ok(ExitCode::SUCCESS)
}
