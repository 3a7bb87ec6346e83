use super::write::rel_text;
use super::*;

#[test]
fn differences_carry_their_sign_unless_they_round_to_zero() {
    assert_eq!(signed(Unit::Micros, 20_500.0), "+20.50ms");
    assert_eq!(signed(Unit::Micros, -0.4), "0µs");
    assert_eq!(signed(Unit::PerSecond, -2.35), "-2.4/s");
    assert_eq!(signed(Unit::Count, 0.0), "0");
    assert_eq!(rel_text(Some(0.123)), "+12.3%");
    assert_eq!(rel_text(None), "-");
}

#[test]
fn relative_difference_needs_a_base() {
    let f = Figure {
        section: "summary".into(),
        name: "errors".into(),
        unit: Unit::Count,
        a: 0.0,
        b: 3.0,
    };
    assert_eq!((f.diff(), f.relative()), (3.0, None));
}
