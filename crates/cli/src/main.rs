//! `throng`: parse the command line, run one command, map the outcome to an
//! exit code with the one table in [`exit::Outcome::code`] (0 ok, 1 run
//! failed, 2 bad usage or config, 99 thresholds failed, 130 interrupted).

mod args;
mod commands;
mod exit;
mod live;
mod progress;
mod prometheus;
mod signals;

use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = match args::parse() {
        Ok(cli) => cli,
        Err(code) => return code,
    };
    match commands::run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("throng: error: {}", commands::one_line(&e));
            exit::Outcome::of_error(&e).into()
        }
    }
}
