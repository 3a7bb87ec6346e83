//! The sweep's chart: the chosen figure against one parameter, one line per
//! value of another (seed 000's table read as a curve). Inline SVG.

use plotters::prelude::*;

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
    let all: Vec<(f64, f64)> = series.iter().flat_map(|(_, p)| p.iter().copied()).collect();
    if all.is_empty() {
        return None;
    }
    let (x0, x1) = all
        .iter()
        .fold((f64::MAX, f64::MIN), |(a, b), p| (a.min(p.0), b.max(p.0)));
    let y1 = all.iter().fold(0f64, |a, p| a.max(p.1)) * 1.1 + f64::EPSILON;
    let pad = ((x1 - x0) * 0.05).max(0.5);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (800, 480)).into_drawing_area();
        root.fill(&WHITE).ok()?;
        let title = format!("{} by {}", spec.figure.header(), spec.x);
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 22))
            .margin(16)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d((x0 - pad)..(x1 + pad), 0f64..y1)
            .ok()?;
        let names = xs.clone();
        let categorical = numeric.is_none();
        chart
            .configure_mesh()
            .x_desc(spec.x.clone())
            .y_desc(spec.figure.header())
            .x_labels(if categorical { xs.len() } else { 12 })
            .x_label_formatter(&move |v| {
                if categorical {
                    names.get(v.round().max(0.0) as usize).cloned().unwrap_or_default()
                } else if v.fract().abs() < 1e-9 {
                    format!("{v:.0}")
                } else {
                    String::new()
                }
            })
            .draw()
            .ok()?;
        for (i, (label, pts)) in series.iter().enumerate() {
            let color = Palette99::pick(i).to_rgba();
            chart
                .draw_series(LineSeries::new(pts.iter().copied(), color.stroke_width(2)))
                .ok()?
                .label(label.clone())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2)));
            chart
                .draw_series(pts.iter().map(|p| Circle::new(*p, 4, color.filled())))
                .ok()?;
        }
        chart
            .configure_series_labels()
            .border_style(BLACK)
            .background_style(WHITE.mix(0.8))
            .draw()
            .ok()?;
        root.present().ok()?;
    }
    Some(svg)
}
