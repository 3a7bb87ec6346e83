//! The report of `throng run`: what ran, iterations and VUs, how requests
//! ended, latency of all requests beside those with an expected status,
//! per-step, group and scenario tables, the load-level (per-stage) table,
//! checks, and threshold verdicts.

pub(crate) mod report;
#[cfg(test)]
mod tests;

pub use self::report::describe;
