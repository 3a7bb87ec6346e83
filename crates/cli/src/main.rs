//! `throng`: parse the command line, run one command, map the outcome to an
//! exit code with the one table in [`exit::Outcome::code`] (0 ok, 1 run
//! failed, 2 bad usage or config, 99 thresholds failed, 130 interrupted).

// Every line the binary writes on stderr goes through these: `eprintln!`
// panics (exit 101) when stderr is a closed pipe (`throng … 2>&1 | head`),
// and a closed pipe is not an error; the outcome's exit code stands.
#![deny(clippy::print_stderr)]

/// `eprintln!` that never panics: a line on stderr, lost if it is closed.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

/// `eprint!` that never panics.
macro_rules! say_part {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = write!(std::io::stderr(), $($arg)*);
    }};
}

mod args;
mod commands;
mod custom_series;
mod exit;
mod figures;
mod line;
mod live;
mod progress;
mod prometheus;
mod push;
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
            say!("throng: error: {}", line::bounded(&commands::one_line(&e)));
            exit::Outcome::of_error(&e).into()
        }
    }
}
