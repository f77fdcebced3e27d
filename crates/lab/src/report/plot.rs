//! SVG charts: bars grouped by case (one color per series, the value over each bar) and lines
//! over an x axis (one per series, points marked). Both share the canvas, the caption and the
//! legend.

use std::path::Path;

use anyhow::{anyhow, Result};
use plotters::coord::Shift;
use plotters::prelude::*;

/// A bar chart: for each series (a switch), one value per group (a case); `None`: no bar.
#[derive(Debug, Clone)]
pub struct Bars {
    /// The caption.
    pub caption: String,
    /// The y axis's name.
    pub y_desc: String,
    /// The groups along the x axis, in order.
    pub groups: Vec<String>,
    /// Each series' name and its value in each group.
    pub series: Vec<(String, Vec<Option<f64>>)>,
    /// Decimals of the value written over each bar.
    pub digits: usize,
}

/// A line chart: each series' points `(x, y)`.
#[derive(Debug, Clone)]
pub struct Lines {
    /// The caption.
    pub caption: String,
    /// The x axis's name.
    pub x_desc: String,
    /// The y axis's name.
    pub y_desc: String,
    /// Each series' name and points.
    pub series: Vec<(String, Vec<(f64, f64)>)>,
}

fn err(path: &Path) -> impl Fn(&dyn std::fmt::Display) -> anyhow::Error + '_ {
    move |e| anyhow!("plotting {}: {e}", path.display())
}

/// The white canvas of a chart.
fn canvas(path: &Path, size: (u32, u32)) -> Result<DrawingArea<SVGBackend<'_>, Shift>> {
    let root = SVGBackend::new(path, size).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(path)(&e))?;
    Ok(root)
}

/// Writes `b` as an SVG bar chart to `path`.
pub fn bars(path: &Path, b: &Bars) -> Result<()> {
    let e = err(path);
    let max_y = b
        .series
        .iter()
        .flat_map(|(_, v)| v.iter().flatten())
        .fold(1.0f64, |m, &y| m.max(y))
        * 1.2;
    let root = canvas(path, (800, 480))?;
    let n = b.groups.len().max(1) as f64;
    let names = b.groups.clone();
    let label = move |x: &f64| {
        let i = x.floor() as usize;
        if (x - x.floor() - 0.5).abs() < 1e-9 {
            names.get(i).cloned().unwrap_or_default()
        } else {
            String::new()
        }
    };
    let mut chart = ChartBuilder::on(&root)
        .caption(&b.caption, ("sans-serif", 20))
        .margin(15)
        .x_label_area_size(35)
        .y_label_area_size(55)
        .build_cartesian_2d(0f64..n, 0f64..max_y)
        .map_err(|x| e(&x))?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(b.groups.len() * 2 + 1)
        .x_label_formatter(&label)
        .y_desc(&b.y_desc)
        .draw()
        .map_err(|x| e(&x))?;
    let width = 0.8 / b.series.len().max(1) as f64;
    for (si, (name, values)) in b.series.iter().enumerate() {
        let color = Palette99::pick(si).to_rgba();
        let at: Vec<(f64, f64)> = values
            .iter()
            .enumerate()
            .filter_map(|(gi, v)| Some((gi as f64 + 0.1 + si as f64 * width, (*v)?)))
            .collect();
        chart
            .draw_series(
                at.iter().map(|&(x, y)| {
                    Rectangle::new([(x, 0.0), (x + width * 0.9, y)], color.filled())
                }),
            )
            .map_err(|x| e(&x))?
            .label(name.as_str())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], color.filled()));
        let digits = b.digits;
        chart
            .draw_series(at.iter().map(|&(x, y)| {
                Text::new(
                    format!("{y:.digits$}"),
                    (x + width * 0.1, y + max_y * 0.03),
                    ("sans-serif", 13),
                )
            }))
            .map_err(|x| e(&x))?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(|x| e(&x))?;
    root.present().map_err(|x| e(&x))
}

/// Writes `l` as an SVG line chart to `path`.
pub fn lines(path: &Path, l: &Lines) -> Result<()> {
    let e = err(path);
    let all = || l.series.iter().flat_map(|(_, v)| v.iter());
    let max_y = all().map(|p| p.1).fold(0.1f64, f64::max) * 1.15;
    let max_x = all().map(|p| p.0).fold(128.0f64, f64::max);
    let root = canvas(path, (800, 500))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(&l.caption, ("sans-serif", 20))
        .margin(15)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0f64..max_x * 1.05, 0f64..max_y)
        .map_err(|x| e(&x))?;
    chart
        .configure_mesh()
        .x_desc(&l.x_desc)
        .y_desc(&l.y_desc)
        .draw()
        .map_err(|x| e(&x))?;
    for (i, (name, points)) in l.series.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        chart
            .draw_series(LineSeries::new(
                points.iter().copied(),
                color.stroke_width(2),
            ))
            .map_err(|x| e(&x))?
            .label(name.as_str())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
        chart
            .draw_series(points.iter().map(|p| Circle::new(*p, 3, color.filled())))
            .map_err(|x| e(&x))?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(|x| e(&x))?;
    root.present().map_err(|x| e(&x))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fill_count(svg: &str, i: usize) -> usize {
        let c = Palette99::pick(i).to_rgba();
        svg.matches(&format!("fill=\"#{:02X}{:02X}{:02X}\"", c.0, c.1, c.2))
            .count()
    }

    #[test]
    fn bars_are_drawn_per_value_in_their_series_color() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("b.svg");
        let b = Bars {
            caption: "cap".into(),
            y_desc: "Mpps".into(),
            groups: vec!["g1".into(), "g2".into()],
            series: vec![
                ("s0".into(), vec![Some(1.0), Some(2.5)]),
                ("s1".into(), vec![None, Some(3.0)]),
            ],
            digits: 2,
        };
        bars(&p, &b).unwrap();
        let svg = std::fs::read_to_string(&p).unwrap();
        for s in ["cap", "Mpps", "g1", "g2", "s0", "s1", "2.50", "3.00"] {
            assert!(svg.contains(s), "{s} missing");
        }
        assert_eq!(fill_count(&svg, 0), 3, "s0: 2 bars + legend");
        assert_eq!(fill_count(&svg, 1), 2, "s1: 1 bar + legend");
    }

    #[test]
    fn lines_name_every_series() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("l.svg");
        let l = Lines {
            caption: "cap".into(),
            x_desc: "bytes".into(),
            y_desc: "Mpps".into(),
            series: vec![("hayate-x".into(), vec![(64.0, 1.0), (1518.0, 0.5)])],
        };
        lines(&p, &l).unwrap();
        let svg = std::fs::read_to_string(&p).unwrap();
        assert!(svg.starts_with("<svg"));
        assert!(svg.contains("bytes") && svg.contains("hayate-x"));
    }
}
