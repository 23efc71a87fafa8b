//! The bench's picture: one hand-written SVG file (no plotting crate) with two panels —
//! rows/s over time for S next to U and L, and the distribution of the network-metrics
//! latency during the burst.

use std::fmt::Write as _;

/// One series of (seconds since its start, rows/s) points.
#[derive(Debug, Clone)]
pub struct Series {
    /// The legend.
    pub label: String,
    /// CSS colour.
    pub colour: &'static str,
    /// The points, in time order.
    pub points: Vec<(f64, f64)>,
}

/// Rows/s in windows of `window_s` from cumulative (seconds, rows done) samples.
pub fn rate_series(samples: &[(f64, u64)], window_s: f64) -> Vec<(f64, f64)> {
    let mut out = Vec::new();
    let Some(&(end, _)) = samples.last() else {
        return out;
    };
    let done_at = |t: f64| {
        // Rows done by time t (the last sample at or before t).
        samples
            .iter()
            .take_while(|(at, _)| *at <= t)
            .last()
            .map_or(0, |(_, n)| *n)
    };
    let mut t = 0.0;
    while t < end {
        let next = (t + window_s).min(end);
        let rows = done_at(next).saturating_sub(done_at(t));
        if next > t {
            out.push(((t + next) / 2.0, rows as f64 / (next - t)));
        }
        t = next;
    }
    out
}

const WIDTH: f64 = 960.0;
const HEIGHT: f64 = 390.0;
const PANEL: f64 = 400.0;
const TOP: f64 = 70.0;
const PLOT_H: f64 = 260.0;

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// A "nice" axis maximum at or above `v`.
fn nice_max(v: f64) -> f64 {
    if v <= 0.0 {
        return 1.0;
    }
    let magnitude = 10f64.powf(v.log10().floor());
    for step in [1.0, 2.0, 2.5, 5.0, 10.0] {
        if step * magnitude >= v {
            return step * magnitude;
        }
    }
    10.0 * magnitude
}

fn axes(svg: &mut String, x0: f64, x_max: f64, y_max: f64, x_label: &str, y_label: &str) {
    let _ = write!(
        svg,
        r##"<line x1="{x0}" y1="{b}" x2="{r}" y2="{b}" stroke="#333"/><line x1="{x0}" y1="{TOP}" x2="{x0}" y2="{b}" stroke="#333"/>"##,
        b = TOP + PLOT_H,
        r = x0 + PANEL
    );
    for i in 0..=4 {
        let f = f64::from(i) / 4.0;
        let y = TOP + PLOT_H - f * PLOT_H;
        let x = x0 + f * PANEL;
        let _ = write!(
            svg,
            r##"<line x1="{x0}" y1="{y:.1}" x2="{r}" y2="{y:.1}" stroke="#ddd"/><text x="{tx:.1}" y="{ty:.1}" text-anchor="end" font-size="11">{v}</text><text x="{x:.1}" y="{bx:.1}" text-anchor="middle" font-size="11">{h}</text>"##,
            r = x0 + PANEL,
            tx = x0 - 4.0,
            ty = y + 4.0,
            v = short(f * y_max),
            bx = TOP + PLOT_H + 15.0,
            h = short(f * x_max),
        );
    }
    let _ = write!(
        svg,
        r##"<text x="{cx:.1}" y="{by:.1}" text-anchor="middle" font-size="12">{x}</text><text x="{lx:.1}" y="{ly:.1}" font-size="12">{y}</text>"##,
        cx = x0 + PANEL / 2.0,
        by = TOP + PLOT_H + 32.0,
        x = escape(x_label),
        lx = x0,
        ly = TOP - 8.0,
        y = escape(y_label),
    );
}

fn short(v: f64) -> String {
    if v >= 1000.0 {
        format!("{:.0}k", v / 1000.0)
    } else if v >= 10.0 || v == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

/// The whole picture: `series` on the left, the latency samples (ms) on the right as a
/// cumulative distribution with p50/p99 marked, `title` and `subtitle` on top.
pub fn render(title: &str, subtitle: &str, series: &[Series], latency_ms: &[f64]) -> String {
    let mut svg = String::new();
    let _ = write!(
        svg,
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif"><rect width="100%" height="100%" fill="white"/><text x="20" y="20" font-size="15" font-weight="bold">{t}</text><text x="20" y="36" font-size="11" fill="#555">{s}</text>"##,
        t = escape(title),
        s = escape(subtitle)
    );
    rates_panel(&mut svg, series);
    latency_panel(&mut svg, latency_ms);
    svg
}

/// The left panel: rows/s over time, one line per series, with its legend.
fn rates_panel(svg: &mut String, series: &[Series]) {
    let x0 = 60.0;
    let x_max = nice_max(
        series
            .iter()
            .flat_map(|s| s.points.iter().map(|p| p.0))
            .fold(0.0, f64::max),
    );
    let y_max = nice_max(
        series
            .iter()
            .flat_map(|s| s.points.iter().map(|p| p.1))
            .fold(0.0, f64::max),
    );
    axes(
        svg,
        x0,
        x_max,
        y_max,
        "seconds since the first row",
        "rows/s",
    );
    for s in series {
        let path: Vec<String> = s
            .points
            .iter()
            .map(|(x, y)| {
                format!(
                    "{:.1},{:.1}",
                    x0 + x / x_max * PANEL,
                    TOP + PLOT_H - y / y_max * PLOT_H
                )
            })
            .collect();
        let _ = write!(
            svg,
            r##"<polyline fill="none" stroke="{c}" stroke-width="2" points="{p}"/>"##,
            c = s.colour,
            p = path.join(" "),
        );
    }
    legend(svg, x0, series);
}

/// The right panel: the latency samples' cumulative distribution, p50 and p99 marked, and
/// the closing `</svg>`.
fn latency_panel(svg: &mut String, latency_ms: &[f64]) {
    let x1 = 60.0 + PANEL + 80.0;
    let mut sorted = latency_ms.to_vec();
    sorted.sort_by(f64::total_cmp);
    let lat_max = nice_max(sorted.last().copied().unwrap_or(1.0));
    axes(
        svg,
        x1,
        lat_max,
        100.0,
        "network-metrics produce → row visible, ms",
        "% of messages at or below",
    );
    let n = sorted.len().max(1) as f64;
    let points: Vec<String> = sorted
        .iter()
        .enumerate()
        .map(|(i, v)| {
            format!(
                "{:.1},{:.1}",
                x1 + v / lat_max * PANEL,
                TOP + PLOT_H - (i + 1) as f64 / n * PLOT_H
            )
        })
        .collect();
    let _ = write!(
        svg,
        r##"<polyline fill="none" stroke="#6a3d9a" stroke-width="2" points="{}"/>"##,
        points.join(" ")
    );
    for (q, name) in [(0.5, "p50"), (0.99, "p99")] {
        if let Some(v) = sorted.get(((sorted.len() as f64 - 1.0) * q).round() as usize) {
            let x = x1 + v / lat_max * PANEL;
            let _ = write!(
                svg,
                r##"<line x1="{x:.1}" y1="{TOP}" x2="{x:.1}" y2="{b}" stroke="#999" stroke-dasharray="4 3"/><text x="{tx:.1}" y="{ty}" font-size="11">{name} {v:.1} ms</text>"##,
                b = TOP + PLOT_H,
                tx = x + 3.0,
                ty = TOP + 12.0 + if name == "p99" { 14.0 } else { 0.0 },
            );
        }
    }
    let _ = write!(
        svg,
        r##"<text x="{x:.1}" y="{y:.1}" font-size="11">{n} messages during the drain</text></svg>"##,
        x = x1 + 10.0,
        y = TOP + PLOT_H + 50.0,
        n = sorted.len()
    );
}

fn legend(svg: &mut String, x0: f64, series: &[Series]) {
    // Stacked in the plot's top-left corner, on a white ground.
    let (x, y) = (x0 + 8.0, TOP + 6.0);
    let width = series
        .iter()
        .map(|s| 14.0 + 6.2 * s.label.chars().count() as f64)
        .fold(0.0, f64::max);
    let _ = write!(
        svg,
        r##"<rect x="{x:.1}" y="{y:.1}" width="{w:.1}" height="{h:.1}" fill="white" fill-opacity="0.85" stroke="#ccc"/>"##,
        w = width + 8.0,
        h = 14.0 * series.len() as f64 + 6.0,
    );
    for (i, s) in series.iter().enumerate() {
        let row = y + 5.0 + 14.0 * i as f64;
        let _ = write!(
            svg,
            r##"<rect x="{bx:.1}" y="{row:.1}" width="10" height="10" fill="{c}"/><text x="{tx:.1}" y="{ty:.1}" font-size="11">{l}</text>"##,
            bx = x + 4.0,
            c = s.colour,
            tx = x + 18.0,
            ty = row + 9.0,
            l = escape(&s.label),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_come_from_cumulative_counts_per_window() {
        let samples = [(0.5, 100), (1.0, 200), (1.5, 300), (2.0, 400)];
        let rates = rate_series(&samples, 1.0);
        assert_eq!(rates, vec![(0.5, 200.0), (1.5, 200.0)]);
        assert!(rate_series(&[], 1.0).is_empty());
    }

    #[test]
    fn the_picture_is_one_svg_element() {
        let svg = render(
            "t <1>",
            "s",
            &[Series {
                label: "S".into(),
                colour: "#000",
                points: vec![(0.5, 10.0), (1.5, 20.0)],
            }],
            &[1.0, 2.0, 3.0],
        );
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>"));
        assert!(svg.contains("t &lt;1&gt;"));
        assert!(svg.contains("p99 3.0 ms"));
    }

    #[test]
    fn axis_maxima_are_round() {
        assert_eq!(nice_max(73_000.0), 100_000.0);
        assert_eq!(nice_max(180.0), 200.0);
        assert_eq!(nice_max(0.0), 1.0);
    }
}
