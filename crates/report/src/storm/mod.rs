//! The storm report: how many connections were attempted, established and
//! failed (and why), how fast, how long the whole crowd took, and what each
//! connection cost the generator.

pub(crate) mod report;
#[cfg(test)]
mod tests;
