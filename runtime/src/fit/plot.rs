//! The training curve as an SVG picture: loss and each metric per epoch, training and
//! validation, one panel each.

use super::history::History;
use std::fmt::Write as _;
use std::string::String;
use std::vec::Vec;

const PANEL_W: f64 = 420.0;
const PANEL_H: f64 = 300.0;
const MARGIN_L: f64 = 62.0;
const MARGIN_R: f64 = 16.0;
const MARGIN_T: f64 = 52.0;
const MARGIN_B: f64 = 48.0;
const TRAIN_COLOR: &str = "#1f77b4";
const VAL_COLOR: &str = "#ff7f0e";

/// Tick values covering `[lo, hi]`: multiples of 1, 2 or 5 times a power of ten, about `n`.
fn ticks(lo: f64, hi: f64, n: usize) -> Vec<f64> {
    let span = (hi - lo).max(f64::EPSILON);
    let raw = span / n.max(1) as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    let (first, last) = ((lo / step).ceil(), (hi / step).floor());
    if !(first.is_finite() && last.is_finite()) || last - first > 4.0 * n.max(1) as f64 {
        return Vec::new();
    }
    // Ticks this far from zero may differ from their neighbours by less than an ulp.
    let ticks: Vec<f64> = (first as i64..=last as i64)
        .map(|i| i as f64 * step)
        .collect();
    if ticks.windows(2).any(|w| w[0] == w[1]) {
        return Vec::new();
    }
    ticks
}

/// The padded range of the y axis for finite values in `[lo, hi]`: never empty, even for a
/// constant value so large that adding 0.5 changes nothing, and never overflowing.
fn y_range(lo: f64, hi: f64) -> (f64, f64) {
    let (lo, hi) = (lo.clamp(-1e300, 1e300), hi.clamp(-1e300, 1e300));
    let scale = lo.abs().max(hi.abs());
    if hi - lo <= 1e-9 * scale.max(1e-3) {
        let half = (0.05 * scale).max(0.5);
        return (lo - half, hi + half);
    }
    let pad = 0.05 * (hi - lo);
    (lo - pad, hi + pad)
}

/// A tick label without noise digits; in scientific notation when very small or very large,
/// so that ticks 1e-5 apart do not all read `0`.
fn label(v: f64) -> String {
    if v == 0.0 {
        return String::from("0");
    }
    if !(1e-3..1e6).contains(&v.abs()) {
        let s = std::format!("{v:.3e}");
        let (m, e) = s.split_once('e').unwrap_or((&s, "0"));
        let m = if m.contains('.') {
            m.trim_end_matches('0').trim_end_matches('.')
        } else {
            m
        };
        return std::format!("{m}e{e}");
    }
    let s = std::format!("{v:.4}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" {
        String::from("0")
    } else {
        String::from(s)
    }
}

/// One panel: `series` of (name, color, dashed, values per epoch) over the epochs `xs`.
fn panel(
    out: &mut String,
    x0: f64,
    title: &str,
    xs: &[f64],
    series: &[(&str, &str, bool, Vec<Option<f64>>)],
) {
    let values: Vec<f64> = series
        .iter()
        .flat_map(|s| s.3.iter().flatten().copied())
        .filter(|v| v.is_finite())
        .collect();
    let (mut lo, mut hi) = values
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &v| {
            (a.min(v), b.max(v))
        });
    if !lo.is_finite() {
        (lo, hi) = (0.0, 1.0);
    }
    let (lo, hi) = y_range(lo, hi);
    let (x_first, x_last) = (
        xs.first().copied().unwrap_or(1.0),
        xs.last().copied().unwrap_or(1.0),
    );
    let x_span = (x_last - x_first).max(1.0);
    let (left, top) = (x0 + MARGIN_L, MARGIN_T);
    let (w, h) = (PANEL_W - MARGIN_L - MARGIN_R, PANEL_H - MARGIN_T - MARGIN_B);
    let px = |x: f64| left + (x - x_first) / x_span * w;
    let py = |y: f64| top + (hi - y) / (hi - lo) * h;

    let _ = write!(
        out,
        r#"<text x="{:.1}" y="{:.1}" font-size="15" text-anchor="middle" font-weight="bold">{title}</text>"#,
        left + w / 2.0,
        top - 30.0
    );
    let _ = write!(
        out,
        r##"<rect x="{left:.1}" y="{top:.1}" width="{w:.1}" height="{h:.1}" fill="none" stroke="#888"/>"##
    );
    for t in ticks(lo, hi, 5) {
        let y = py(t);
        let _ = write!(
            out,
            r##"<line x1="{left:.1}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#e4e4e4"/><text x="{:.1}" y="{:.1}" font-size="11" text-anchor="end">{}</text>"##,
            left + w,
            left - 6.0,
            y + 4.0,
            label(t)
        );
    }
    for t in ticks(x_first, x_last, 6)
        .into_iter()
        .filter(|t| t.fract() == 0.0)
    {
        let x = px(t);
        let _ = write!(
            out,
            r##"<line x1="{x:.1}" y1="{:.1}" x2="{x:.1}" y2="{:.1}" stroke="#888"/><text x="{x:.1}" y="{:.1}" font-size="11" text-anchor="middle">{}</text>"##,
            top + h,
            top + h + 4.0,
            top + h + 17.0,
            label(t)
        );
    }
    let _ = write!(
        out,
        r#"<text x="{:.1}" y="{:.1}" font-size="12" text-anchor="middle">epoch</text>"#,
        left + w / 2.0,
        top + h + 36.0
    );
    for (i, (name, color, dashed, ys)) in series.iter().enumerate() {
        let dash = if *dashed {
            r#" stroke-dasharray="6 4""#
        } else {
            ""
        };
        let mut points = String::new();
        for (x, y) in xs.iter().zip(ys) {
            if let Some(y) = y.filter(|y| y.is_finite()) {
                let _ = write!(points, "{:.1},{:.1} ", px(*x), py(y));
                let _ = write!(
                    out,
                    r#"<circle cx="{:.1}" cy="{:.1}" r="2.5" fill="{color}"/>"#,
                    px(*x),
                    py(y)
                );
            }
        }
        let _ = write!(
            out,
            r#"<polyline points="{}" fill="none" stroke="{color}" stroke-width="2"{dash}/>"#,
            points.trim_end()
        );
        let ly = top - 14.0;
        let lx = left + i as f64 * 110.0;
        let _ = write!(
            out,
            r#"<line x1="{lx:.1}" y1="{ly:.1}" x2="{:.1}" y2="{ly:.1}" stroke="{color}" stroke-width="2"{dash}/><text x="{:.1}" y="{:.1}" font-size="12">{name}</text>"#,
            lx + 24.0,
            lx + 30.0,
            ly + 4.0
        );
    }
}

impl History {
    /// The training curve as an SVG document: a panel for the loss and one for each metric,
    /// with the training values as solid lines and the validation values dashed.
    ///
    /// ```
    /// # use fusegraph_runtime::fit::History;
    /// let svg = History::default().to_svg("empty run");
    /// assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
    /// ```
    pub fn to_svg(&self, title: &str) -> String {
        let xs: Vec<f64> = self.epochs.iter().map(|e| e.epoch as f64).collect();
        let mut names = std::vec![String::from("loss")];
        names.extend(self.metrics().iter().map(|m| String::from(m.name())));
        let has_val = self.epochs.iter().any(|e| e.val.is_some());
        let width = PANEL_W * names.len() as f64;
        let mut out = std::format!(
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{}" viewBox="0 0 {width} {}" font-family="sans-serif">"#,
            PANEL_H + 20.0,
            PANEL_H + 20.0
        );
        out.push_str(r#"<rect width="100%" height="100%" fill="white"/>"#);
        let _ = write!(
            out,
            r##"<text x="{:.1}" y="16" font-size="13" text-anchor="middle" fill="#444">{}</text>"##,
            width / 2.0,
            escape(title)
        );
        for (i, name) in names.iter().enumerate() {
            let mut series = std::vec![("train", TRAIN_COLOR, false, self.column(name))];
            if has_val {
                series.push((
                    "validation",
                    VAL_COLOR,
                    true,
                    self.column(&std::format!("val_{name}")),
                ));
            }
            let mut g = String::new();
            panel(&mut g, i as f64 * PANEL_W, name, &xs, &series);
            let _ = write!(out, r#"<g transform="translate(0,20)">{g}</g>"#);
        }
        out.push_str("</svg>\n");
        out
    }
}

/// `title` with XML's special characters escaped.
fn escape(title: &str) -> String {
    title
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round_and_inside() {
        assert_eq!(
            ticks(0.0, 1.0, 5),
            [0.0, 0.2, 0.4, 0.6000000000000001, 0.8, 1.0]
        );
        assert_eq!(ticks(1.0, 30.0, 6), [5.0, 10.0, 15.0, 20.0, 25.0, 30.0]);
        assert_eq!(label(0.6000000000000001), "0.6");
        assert_eq!(label(-0.0), "0");
        assert_eq!(escape("a<b & \"c\""), "a&lt;b &amp; &quot;c&quot;");
        assert_eq!(label(2e-5), "2e-5");
        assert_eq!(label(-1.5e7), "-1.5e7");
        assert_eq!(label(0.002), "0.002");
        assert!(ticks(0.0, f64::INFINITY, 5).is_empty());
    }

    fn history(losses: &[f32]) -> History {
        let mut h = History::new(&[crate::fit::Metric::Accuracy], losses.len());
        for (i, &loss) in losses.iter().enumerate() {
            h.epochs.push(crate::fit::EpochLog {
                epoch: i + 1,
                train: crate::fit::Metrics {
                    loss,
                    accuracy: Some(0.5),
                    ..Default::default()
                },
                val: (i % 2 == 0).then(|| crate::fit::Metrics {
                    loss: loss * 2.0,
                    accuracy: Some(f32::NAN),
                    ..Default::default()
                }),
                lr: None,
                steps: 0,
                seconds: 0.0,
                samples_per_second: 0.0,
                skipped: 0,
            });
        }
        h
    }

    /// Every number in the SVG's attributes is finite, and tags balance.
    fn assert_valid(svg: &str) {
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        for attr in svg.split('"').skip(1).step_by(2) {
            for word in attr.split([' ', ',']) {
                if let Ok(v) = word.parse::<f64>() {
                    assert!(v.is_finite(), "{word} in {svg}");
                }
            }
        }
        assert!(!svg.contains("NaN") && !svg.contains("inf"), "{svg}");
        let opened = svg.matches("<g ").count() + svg.matches("<text").count();
        let closed = svg.matches("</g>").count() + svg.matches("</text>").count();
        assert_eq!(opened, closed);
    }

    #[test]
    fn svg_has_finite_coordinates_for_odd_histories() {
        for losses in [
            &[0.5][..],
            &[1e20, 1e20, 1e20],
            &[f32::NAN, 1.0, f32::INFINITY, 2.0],
            &[f32::NAN],
            &[3e38, -3e38, 1.0],
            &[1e-6, 2e-6, 3e-6],
            &[1e30, 1e30 + 1e24],
        ] {
            let svg = history(losses).to_svg("a <run> & \"more\"");
            assert_valid(&svg);
        }
        let svg = history(&[1e-6, 2e-6, 3e-6]).to_svg("small");
        assert!(svg.contains(">2e-6<"), "{svg}");
    }
}
