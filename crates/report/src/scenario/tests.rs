use std::time::Duration;

use throng_metrics::{ScenarioSecond, ScenarioStats};

#[test]
fn a_stage_s_vus_never_come_from_its_neighbours() {
    let mut s = ScenarioStats::default();
    for (second, vus) in [(0, 10), (1, 50), (2, 5), (3, 7)] {
        s.series.push(ScenarioSecond {
            second,
            vus,
            vus_by_scenario: vec![vus],
            ..ScenarioSecond::default()
        });
    }
    let ms = Duration::from_millis;
    let vus = |a, b| super::report::stage_vus(&s, 0, ms(a), ms(b));
    // Whole seconds inside: only theirs.
    assert_eq!(vus(1000, 2500).to_string(), "50");
    assert_eq!(vus(500, 3000).to_string(), "50");
    assert_eq!(vus(2000, 4000).to_string(), "7");
    // Inside no whole second: the seconds it touches, marked as a bound.
    assert_eq!(vus(2500, 3000).to_string(), "≤5");
    assert_eq!(vus(1500, 2200).to_string(), "≤50");
    assert_eq!(vus(0, 500).to_string(), "≤10");
    // Padding works on the marked figure as on a number.
    assert_eq!(format!("{:>5}", vus(0, 500)), "  ≤10");
}
