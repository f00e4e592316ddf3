//! A hand-written SVG chart of the savings benchmark: CPU per operation and throughput per
//! mode, medians as bars and every measured round as a dot, so that the noise shows.

use std::fmt::Write as _;

/// One bar group of the chart.
pub struct Bar {
    pub mode: String,
    /// Median server CPU per operation, µs.
    pub server_us: f64,
    /// Median CPU per operation of the proxy process, µs (stacked on the server's).
    pub proxy_us: Option<f64>,
    /// Server CPU per operation of every round, µs.
    pub server_rounds: Vec<f64>,
    /// Median operations per second.
    pub ops: f64,
    pub ops_rounds: Vec<f64>,
}

/// A dashed horizontal line on the CPU panel.
pub struct Line {
    pub label: String,
    pub us: f64,
    /// Stroke colour (CSS).
    pub color: String,
}

const W: f64 = 1000.0;
const H: f64 = 490.0;
const TOP: f64 = 100.0;
const BOTTOM: f64 = 390.0;
const COLORS: [&str; 5] = ["#c0504d", "#4f81bd", "#9bbb59", "#8064a2", "#f79646"];
/// Text drawn over lines stays readable: a white halo behind the glyphs.
const HALO: &str = r#"stroke="white" stroke-width="3" paint-order="stroke""#;

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// A "nice" axis: a step of 1, 2, 2.5 or 5 × 10^n giving at most 5 intervals, and the first
/// multiple of it ≥ `v` as the maximum.
fn nice_max(v: f64) -> (f64, f64) {
    let v = v.max(1e-9);
    let raw = v / 5.0;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0]
        .into_iter()
        .map(|m| m * mag)
        .find(|&st| st >= raw * (1.0 - 1e-9))
        .unwrap_or(10.0 * mag);
    ((v / step - 1e-9).ceil() * step, step)
}

/// An axis tick: no decimals unless the step needs them.
fn fmt_tick(v: f64, step: f64) -> String {
    if v >= 10_000.0 {
        format!("{:.0}k", v / 1000.0)
    } else if step >= 1.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

fn fmt_num(v: f64) -> String {
    if v >= 10_000.0 {
        format!("{:.0}k", v / 1000.0)
    } else if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// Draws one panel: `value(bar)` as bars, `rounds(bar)` as dots, optional stacked extra and
/// reference lines.
#[allow(clippy::too_many_arguments)]
fn panel(
    s: &mut String,
    x0: f64,
    width: f64,
    title: &str,
    bars: &[Bar],
    value: impl Fn(&Bar) -> f64,
    extra: impl Fn(&Bar) -> Option<f64>,
    rounds: impl Fn(&Bar) -> &[f64],
    lines: &[Line],
) {
    let top_value = bars
        .iter()
        .map(|b| {
            let r = rounds(b).iter().copied().fold(0.0, f64::max);
            (value(b) + extra(b).unwrap_or(0.0)).max(r)
        })
        .chain(lines.iter().map(|l| l.us))
        .fold(0.0, f64::max)
        * 1.08;
    let (max, step) = nice_max(top_value);
    let y = |v: f64| BOTTOM - (v / max) * (BOTTOM - TOP);
    let left = x0 + 52.0;
    let plot_w = width - 62.0;
    let _ = writeln!(
        s,
        r#"<text x="{:.1}" y="{:.1}" font-size="15" font-weight="bold" text-anchor="middle">{}</text>"#,
        left + plot_w / 2.0,
        TOP - 40.0,
        esc(title)
    );
    // Grid and axis labels.
    let mut t = 0.0;
    while t <= max + step * 0.01 {
        let _ = writeln!(
            s,
            r##"<line x1="{left:.1}" x2="{:.1}" y1="{yy:.1}" y2="{yy:.1}" stroke="#ddd"/><text x="{:.1}" y="{:.1}" font-size="11" text-anchor="end" fill="#555">{}</text>"##,
            left + plot_w,
            left - 6.0,
            y(t) + 4.0,
            fmt_tick(t, step),
            yy = y(t)
        );
        t += step;
    }
    let _ = writeln!(
        s,
        r##"<line x1="{left:.1}" x2="{left:.1}" y1="{TOP:.1}" y2="{BOTTOM:.1}" stroke="#333"/><line x1="{left:.1}" x2="{:.1}" y1="{BOTTOM:.1}" y2="{BOTTOM:.1}" stroke="#333"/>"##,
        left + plot_w
    );
    let slot = plot_w / bars.len().max(1) as f64;
    let bw = slot * 0.56;
    for (i, b) in bars.iter().enumerate() {
        let cx = left + slot * (i as f64 + 0.5);
        let v = value(b);
        // One colour per mode across charts; others by position.
        let color = match b.mode.as_str() {
            "direct-unprepared" => COLORS[0],
            "autoprep" => COLORS[1],
            "direct-prepared" => COLORS[2],
            "proxied-prepared" => COLORS[3],
            "passthrough" => COLORS[4],
            // The second legacy pattern in darker shades of its QUERY counterparts.
            "direct-prepare-each" => "#8c2d2a",
            "autoprep-prepare-each" => "#2c5d8f",
            _ => COLORS[i % COLORS.len()],
        };
        let _ = writeln!(
            s,
            r#"<rect x="{:.1}" y="{:.1}" width="{bw:.1}" height="{:.1}" fill="{color}" opacity="0.85"/>"#,
            cx - bw / 2.0,
            y(v),
            BOTTOM - y(v)
        );
        let mut label_top = y(v);
        let mut label = fmt_num(v);
        if let Some(e) = extra(b).filter(|&e| e > 0.0) {
            let _ = writeln!(
                s,
                r##"<rect x="{:.1}" y="{:.1}" width="{bw:.1}" height="{:.1}" fill="url(#hatch)" stroke="#333" stroke-width="0.8"/>"##,
                cx - bw / 2.0,
                y(v + e),
                y(v) - y(v + e)
            );
            label_top = y(v + e);
            label = format!("{label} + {}", fmt_num(e));
        }
        // Above the bar and above every dot.
        let highest = rounds(b).iter().copied().fold(f64::MIN, f64::max);
        label_top = label_top.min(y(highest) - 3.0);
        let _ = writeln!(
            s,
            r#"<text x="{cx:.1}" y="{:.1}" font-size="12" font-weight="bold" text-anchor="middle" {HALO}>{}</text>"#,
            label_top - 5.0,
            label
        );
        let rs = rounds(b);
        for (k, r) in rs.iter().enumerate() {
            let dx = if rs.len() > 1 {
                (k as f64 / (rs.len() - 1) as f64 - 0.5) * bw * 0.6
            } else {
                0.0
            };
            let _ = writeln!(
                s,
                r##"<circle cx="{:.1}" cy="{:.1}" r="2.6" fill="#111" opacity="0.7"/>"##,
                cx + dx,
                y(*r)
            );
        }
        // Mode names on two lines at the first '-' ("direct-" / "prepared").
        let (l1, l2) = match b.mode.split_once('-') {
            Some((a, z)) => (format!("{a}-"), z.to_owned()),
            None => (b.mode.clone(), String::new()),
        };
        let _ = writeln!(
            s,
            r#"<text x="{cx:.1}" y="{:.1}" font-size="12" text-anchor="middle">{}</text><text x="{cx:.1}" y="{:.1}" font-size="12" text-anchor="middle">{}</text>"#,
            BOTTOM + 16.0,
            esc(&l1),
            BOTTOM + 30.0,
            esc(&l2)
        );
    }
    // Reference lines across the plot, explained in a legend under the panel title.
    for (k, l) in lines.iter().enumerate() {
        let dash = if k % 2 == 0 { "7,4" } else { "2,3" };
        let ly = TOP - 4.0 - 14.0 * (lines.len() - 1 - k) as f64;
        let _ = writeln!(
            s,
            r##"<line x1="{left:.1}" x2="{:.1}" y1="{yy:.1}" y2="{yy:.1}" stroke="{}" stroke-width="1.5" stroke-dasharray="{dash}"/><line x1="{:.1}" x2="{:.1}" y1="{:.1}" y2="{:.1}" stroke="{}" stroke-width="1.5" stroke-dasharray="{dash}"/><text x="{:.1}" y="{:.1}" font-size="10" fill="#222">{} = {}</text>"##,
            left + plot_w,
            l.color,
            left + plot_w - 190.0,
            left + plot_w - 160.0,
            ly - 3.0,
            ly - 3.0,
            l.color,
            left + plot_w - 155.0,
            ly,
            esc(&l.label),
            fmt_num(l.us),
            yy = y(l.us)
        );
    }
}

/// The whole chart as an SVG document.
pub fn render(title: &str, subtitle: &str, bars: &[Bar], lines: &[Line], footer: &str) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" font-family="DejaVu Sans, Helvetica, Arial, sans-serif">
<defs><pattern id="hatch" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="6" height="6" fill="#f3f3f3"/><line x1="0" y1="0" x2="0" y2="6" stroke="#555" stroke-width="2"/></pattern></defs>
<rect width="100%" height="100%" fill="white"/>
<text x="{:.1}" y="24" font-size="18" font-weight="bold" text-anchor="middle">{}</text>
<text x="{:.1}" y="42" font-size="12" text-anchor="middle" fill="#444">{}</text>"##,
        W / 2.0,
        esc(title),
        W / 2.0,
        esc(subtitle)
    );
    let half = W / 2.0;
    panel(
        &mut s,
        10.0,
        half - 20.0,
        "CPU per operation, µs (lower is better)",
        bars,
        |b| b.server_us,
        |b| b.proxy_us,
        |b| &b.server_rounds,
        lines,
    );
    panel(
        &mut s,
        half + 10.0,
        half - 20.0,
        "Throughput, op/s (higher is better)",
        bars,
        |b| b.ops,
        |_| None,
        |b| &b.ops_rounds,
        &[],
    );
    let _ = writeln!(
        s,
        r##"<text x="{:.1}" y="{:.1}" font-size="11" text-anchor="middle" fill="#444">{}</text>
<text x="{:.1}" y="{:.1}" font-size="11" text-anchor="middle" fill="#444">bars: medians over rounds · dots: single rounds · solid: Cassandra's CPU · hatched (+ x): autoprep's own CPU</text>
</svg>"##,
        W / 2.0,
        H - 38.0,
        esc(footer),
        W / 2.0,
        H - 20.0
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nice_axis() {
        assert_eq!(nice_max(42.0), (50.0, 10.0));
        assert_eq!(nice_max(103.5), (125.0, 25.0));
        assert_eq!(nice_max(9_500.0), (10_000.0, 2_000.0));
        assert_eq!(nice_max(2.2), (2.5, 0.5));
    }

    #[test]
    fn renders_well_formed_text() {
        let bars = vec![Bar {
            mode: "a<b".into(),
            server_us: 40.0,
            proxy_us: Some(3.0),
            server_rounds: vec![39.0, 41.0],
            ops: 9000.0,
            ops_rounds: vec![8800.0, 9100.0],
        }];
        let svg = render("t", "s", &bars, &[], "f");
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert!(svg.contains("a&lt;b"));
    }
}
