//! Parameter sweeps: one YAML file names a matrix of parameters, a run to do
//! per cell (a throng command with `{{name}}` substitutions), optional setup
//! and teardown commands, and the figures to tabulate and chart.
//!
//! ```text
//!  SWEEP.yaml ─parse─► Sweep ─cells()─► Cell × repeat ─(cli runs them)─► CellOutcome
//!                                                                          │
//!              table (text | markdown | csv) ◄─ figures ◄────────────────┘─► chart (SVG)
//! ```
//!
//! Running commands is the caller's business (the cli); this crate parses,
//! expands, extracts figures and renders.

mod chart;
mod figure;
mod spec;
mod table;

pub use chart::chart_svg;
pub use figure::Figure;
pub use spec::{Cell, ChartSpec, Sweep, SweepError};
pub use table::{CellOutcome, Format, table};
