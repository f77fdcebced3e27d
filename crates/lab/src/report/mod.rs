//! What every bench's report shares: medians over repeated runs, ratios, runs and rows of one
//! switch in one case grouped and summed up ([`Runs`], [`grid`]: `cases.rs`), a column table for the
//! terminal ([`Table`]: `table.rs`) and SVG charts ([`bars`] grouped by case, [`lines`] over an
//! x axis: `plot.rs`). `bench compare`, `bench vhost` and `bench churn-compare` build theirs
//! from these.

mod cases;
mod plot;
mod table;

pub use cases::{find, firsts, grid, groups, Entry, Runs};
pub use plot::{bars, lines, Bars, Lines};
pub use table::{Align, Table};

/// The median of `v` (the mean of the two middle values for an even count); `None` when empty.
pub fn median(mut v: Vec<f64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let m = v.len() / 2;
    Some(if v.len() % 2 == 1 {
        v[m]
    } else {
        (v[m - 1] + v[m]) / 2.0
    })
}

/// `a / b` when both are there and `b > 0`.
pub fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b),
        _ => None,
    }
}

/// `v` with `digits` decimals and `suffix`, or `-` when there is none.
pub fn opt(v: Option<f64>, digits: usize, suffix: &str) -> String {
    v.map(|x| format!("{x:.digits$}{suffix}"))
        .unwrap_or_else(|| "-".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_ratios_and_missing_figures() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(vec![4.0, 1.0]), Some(2.5));
        assert_eq!(median(vec![]), None);
        assert_eq!(ratio(Some(3.0), Some(2.0)), Some(1.5));
        assert_eq!(ratio(Some(1.0), Some(0.0)), None);
        assert_eq!(ratio(None, Some(1.0)), None);
        assert_eq!(opt(Some(1.234), 2, "x"), "1.23x");
        assert_eq!(opt(None, 2, "x"), "-");
    }
}
