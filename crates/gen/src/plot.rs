//! Plots as SVG files (the SVG backend needs no font files: text is left to the viewer).
//!
//! - [`throughput`]: throughput by frame size, Mpps and Gbit/s beside the line rate;
//! - [`latency_histogram`]: latency distribution (log-spaced buckets);
//! - [`rate_over_time`]: sent and received packets per second over a run.

use std::path::Path;

use plotters::prelude::*;

use crate::report::Sample;
use crate::rfc2544::SizeResult;

fn err(path: &Path, e: impl std::fmt::Display) -> String {
    format!(
        "cannot draw {}: {e} (is the directory writable?)",
        path.display()
    )
}

/// Throughput (Mpps, bars) and Gbit/s (line) by frame size, with the line rate.
pub fn throughput(path: &Path, results: &[SizeResult], line_bps: f64) -> Result<(), String> {
    let root = SVGBackend::new(path, (900, 560)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(path, e))?;
    let (top, bottom) = root.split_vertically(280);
    let n = results.len().max(1);
    let label = |v: &SegmentValue<usize>| match v {
        SegmentValue::CenterOf(i) | SegmentValue::Exact(i) => results
            .get(*i)
            .map(|r| format!("{} B", r.frame_size))
            .unwrap_or_default(),
        SegmentValue::Last => String::new(),
    };
    let max_mpps = results
        .iter()
        .map(|r| r.line_pps.max(r.throughput_pps) / 1e6)
        .fold(0.1, f64::max)
        * 1.15;
    let mut c = ChartBuilder::on(&top)
        .caption("Throughput (Mpps) by frame size", ("sans-serif", 18))
        .margin(10)
        .x_label_area_size(30)
        .y_label_area_size(50)
        .build_cartesian_2d((0..n).into_segmented(), 0f64..max_mpps)
        .map_err(|e| err(path, e))?;
    c.configure_mesh()
        .disable_x_mesh()
        .x_labels(n + 1)
        .x_label_formatter(&label)
        .y_desc("Mpps")
        .draw()
        .map_err(|e| err(path, e))?;
    c.draw_series(results.iter().enumerate().map(|(i, r)| {
        let mut bar = Rectangle::new(
            [
                (SegmentValue::Exact(i), 0.0),
                (SegmentValue::Exact(i + 1), r.throughput_mpps),
            ],
            BLUE.filled(),
        );
        bar.set_margin(0, 0, 12, 12);
        bar
    }))
    .map_err(|e| err(path, e))?
    .label("measured")
    .legend(|(x, y)| Rectangle::new([(x, y - 5), (x + 10, y + 5)], BLUE.filled()));
    c.draw_series(results.iter().enumerate().map(|(i, r)| {
        PathElement::new(
            vec![
                (SegmentValue::Exact(i), r.line_pps / 1e6),
                (SegmentValue::Exact(i + 1), r.line_pps / 1e6),
            ],
            RED.stroke_width(2),
        )
    }))
    .map_err(|e| err(path, e))?
    .label("line rate")
    .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 10, y)], RED));
    c.configure_series_labels()
        .border_style(BLACK)
        .background_style(WHITE)
        .draw()
        .map_err(|e| err(path, e))?;

    let max_g = results
        .iter()
        .map(|r| r.throughput_gbps)
        .fold(line_bps / 1e9, f64::max)
        * 1.15;
    let mut g = ChartBuilder::on(&bottom)
        .caption(
            "Throughput (Gbit/s on the wire) by frame size",
            ("sans-serif", 18),
        )
        .margin(10)
        .x_label_area_size(30)
        .y_label_area_size(50)
        .build_cartesian_2d((0..n).into_segmented(), 0f64..max_g)
        .map_err(|e| err(path, e))?;
    g.configure_mesh()
        .disable_x_mesh()
        .x_labels(n + 1)
        .x_label_formatter(&label)
        .y_desc("Gbit/s")
        .draw()
        .map_err(|e| err(path, e))?;
    g.draw_series(LineSeries::new(
        [
            (SegmentValue::Exact(0), line_bps / 1e9),
            (SegmentValue::Last, line_bps / 1e9),
        ],
        RED.stroke_width(2),
    ))
    .map_err(|e| err(path, e))?
    .label("line rate")
    .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 10, y)], RED));
    g.draw_series(
        LineSeries::new(
            results
                .iter()
                .enumerate()
                .map(|(i, r)| (SegmentValue::CenterOf(i), r.throughput_gbps)),
            BLUE.stroke_width(2),
        )
        .point_size(4),
    )
    .map_err(|e| err(path, e))?
    .label("measured")
    .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 10, y)], BLUE));
    g.configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .border_style(BLACK)
        .background_style(WHITE)
        .draw()
        .map_err(|e| err(path, e))?;
    root.present().map_err(|e| err(path, e))
}

/// Latency histogram: count by latency bucket (log-spaced upper bounds in ns).
pub fn latency_histogram(path: &Path, buckets: &[(u64, u64)], title: &str) -> Result<(), String> {
    let root = SVGBackend::new(path, (900, 400)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(path, e))?;
    let lo = buckets.first().map_or(1, |b| b.0).max(1) as f64;
    let hi = buckets.last().map_or(10, |b| b.0).max(2) as f64 * 1.3;
    let top = buckets.iter().map(|b| b.1).max().unwrap_or(1).max(1) as f64 * 1.1;
    let mut c = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 18))
        .margin(10)
        .x_label_area_size(35)
        .y_label_area_size(60)
        .build_cartesian_2d((lo / 1.3..hi).log_scale(), 0f64..top)
        .map_err(|e| err(path, e))?;
    c.configure_mesh()
        .x_desc("latency (ns, log scale)")
        .y_desc("probes")
        .x_label_formatter(&|v| format!("{v:.0}"))
        .y_label_formatter(&|v| format!("{v:.0}"))
        .draw()
        .map_err(|e| err(path, e))?;
    let mut prev = lo / 1.25;
    c.draw_series(buckets.iter().map(|&(ub, n)| {
        let r = Rectangle::new([(prev, 0.0), (ub as f64, n as f64)], BLUE.filled());
        prev = ub as f64;
        r
    }))
    .map_err(|e| err(path, e))?;
    root.present().map_err(|e| err(path, e))
}

/// Sent and received Mpps over time.
pub fn rate_over_time(path: &Path, samples: &[Sample]) -> Result<(), String> {
    let root = SVGBackend::new(path, (900, 400)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(path, e))?;
    let t_max = samples.last().map_or(1.0, |s| s.t).max(1e-3);
    let y_max = samples
        .iter()
        .map(|s| s.tx_pps.max(s.rx_pps) / 1e6)
        .fold(0.001, f64::max)
        * 1.1;
    let mut c = ChartBuilder::on(&root)
        .caption("Rate over time", ("sans-serif", 18))
        .margin(10)
        .x_label_area_size(35)
        .y_label_area_size(60)
        .build_cartesian_2d(0f64..t_max, 0f64..y_max)
        .map_err(|e| err(path, e))?;
    c.configure_mesh()
        .x_desc("seconds")
        .y_desc("Mpps")
        .draw()
        .map_err(|e| err(path, e))?;
    c.draw_series(LineSeries::new(
        samples.iter().map(|s| (s.t, s.tx_pps / 1e6)),
        BLUE.stroke_width(2),
    ))
    .map_err(|e| err(path, e))?
    .label("sent")
    .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 10, y)], BLUE));
    c.draw_series(LineSeries::new(
        samples.iter().map(|s| (s.t, s.rx_pps / 1e6)),
        GREEN.stroke_width(2),
    ))
    .map_err(|e| err(path, e))?
    .label("received")
    .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 10, y)], GREEN));
    c.configure_series_labels()
        .border_style(BLACK)
        .draw()
        .map_err(|e| err(path, e))?;
    root.present().map_err(|e| err(path, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_three_svgs() {
        let dir = std::env::temp_dir().join(format!("hayate-gen-plot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let results: Vec<SizeResult> = [64usize, 1518]
            .iter()
            .map(|&s| SizeResult {
                frame_size: s,
                line_pps: crate::rfc2544::line_pps(10e9, s),
                throughput_mpps: 1.0,
                throughput_gbps: 2.0,
                ..SizeResult::default()
            })
            .collect();
        throughput(&dir.join("t.svg"), &results, 10e9).unwrap();
        latency_histogram(
            &dir.join("l.svg"),
            &[(100, 5), (125, 9), (160, 2)],
            "latency",
        )
        .unwrap();
        let samples: Vec<Sample> = (1..10)
            .map(|i| Sample {
                t: i as f64 * 0.1,
                tx_pps: 1e6,
                rx_pps: 0.9e6,
                tx_gbps: 0.0,
                rx_gbps: 0.0,
            })
            .collect();
        rate_over_time(&dir.join("r.svg"), &samples).unwrap();
        for f in ["t.svg", "l.svg", "r.svg"] {
            let s = std::fs::read_to_string(dir.join(f)).unwrap();
            assert!(s.starts_with("<svg") && s.len() > 500, "{f}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
