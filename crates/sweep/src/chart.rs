//! The sweep's chart: the chosen figure against one parameter, one line per
//! value of another (seed 000's table read as a curve). Inline SVG.

use throng_report::chart::{Axis, LineChart, PALETTE, Series, Unit, standalone};

use crate::spec::Sweep;
use crate::table::CellOutcome;

/// The chart as an SVG document, or None when the sweep asks for none or
/// no cell has the figure.
pub fn chart_svg(sweep: &Sweep, outcomes: &[CellOutcome]) -> Option<String> {
    let spec = sweep.chart.as_ref()?;
    let xs: Vec<String> = sweep.params.iter().find(|(n, _)| *n == spec.x)?.1.clone();
    let numeric: Option<Vec<f64>> = xs.iter().map(|x| x.parse::<f64>().ok()).collect();
    let x_of = |v: &str| -> Option<f64> {
        match &numeric {
            Some(_) => v.parse().ok(),
            None => xs.iter().position(|x| x == v).map(|i| i as f64),
        }
    };
    let line_values: Vec<String> = match &spec.lines {
        Some(l) => sweep.params.iter().find(|(n, _)| n == l)?.1.clone(),
        None => vec![String::new()],
    };
    // Other parameters are held at their first value.
    let fixed: Vec<(&String, &String)> = sweep
        .params
        .iter()
        .filter(|(n, _)| *n != spec.x && Some(n) != spec.lines.as_ref())
        .map(|(n, v)| (n, &v[0]))
        .collect();
    let mut series: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
    for lv in &line_values {
        let mut pts: Vec<(f64, f64)> = outcomes
            .iter()
            .filter(|o| spec.lines.as_ref().is_none_or(|l| o.cell.get(l) == Some(lv.as_str())))
            .filter(|o| fixed.iter().all(|(n, v)| o.cell.get(n) == Some(v.as_str())))
            .filter_map(|o| {
                let x = x_of(o.cell.get(&spec.x)?)?;
                let mut ys: Vec<f64> = o.runs.iter().filter_map(|r| spec.figure.value(r)).collect();
                ys.sort_by(f64::total_cmp);
                ys.get(ys.len() / 2).map(|y| (x, *y))
            })
            .collect();
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        let label = match &spec.lines {
            Some(l) => format!("{l}={lv}"),
            None => spec.figure.header(),
        };
        series.push((label, pts));
    }
    if series.iter().all(|(_, p)| p.is_empty()) {
        return None;
    }
    let x_unit = match &numeric {
        Some(_) => Unit::Number,
        None => Unit::Categories(xs.clone()),
    };
    let mut chart = LineChart::new(
        "sweep",
        format!("{} by {}", spec.figure.header(), spec.x),
        Axis::linear(spec.x.clone(), x_unit),
        Axis::linear(spec.figure.header(), Unit::Number),
    );
    for (i, (label, pts)) in series.into_iter().enumerate() {
        chart = chart.with(Series::new(label, PALETTE[i % PALETTE.len()], pts));
    }
    Some(standalone(&chart.svg()))
}
