//! The benchmarks' plots, as SVG (`plotters`): each suite that compares
//! draws its own next to its JSON when it ends, and `cargo xtask bench
//! plots [--out DIR]` draws every plot again from the JSON in
//! `target/bench` (into `DIR`, `target/bench` by default; the docs' copies
//! live in `docs/benchmarks/`).
//!
//! - `kubelet-go-latency.svg`: bind → Running latency of 10,000 (or
//!   `--pods`) pods bound at once, as a distribution (CDF), Stratus against
//!   Go tuned and Go as shipped;
//! - `kubelet-go-paced.svg`: the same at 500 binds a second;
//! - `kubelet-go-running.svg`: pods Running over time after the burst;
//! - `kubelet-go-memory.svg`: resident memory per pod, each side;
//! - `ccm-phases.svg`: the cloud controller manager's phases against their
//!   floors (`bench ccm`);
//! - `<suite>-ratios.svg`, for every suite: each of its ratios (to its
//!   floor, to a Go peer) as a bar, parity marked (every suite draws its
//!   own when it writes its JSON).
//!
//! A distribution is kept as its quantiles (a thousandth apart, see
//! [`quantiles`]) in `target/bench/<suite>.series.json`, beside the
//! suite's figures.

use std::collections::BTreeMap;
use std::path::Path;

use plotters::coord::Shift;
use plotters::prelude::*;

use stratus_cluster::BoxError;

/// A suite's distributions: series name (e.g. `bind_to_running_ms`) →
/// side (e.g. `stratus`) → quantiles.
pub(crate) type Series = BTreeMap<String, BTreeMap<String, Vec<f64>>>;

/// How many quantiles a distribution keeps: the 0th to the 1,000th
/// thousandth.
const QUANTILES: usize = 1001;

/// The width and height of every plot, in pixels.
const SIZE: (u32, u32) = (760, 420);

/// The colors of the sides (and of the bars of a group), in order: blue,
/// orange, grey.
const COLORS: [RGBColor; 3] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(127, 127, 127),
];

/// The color of the `i`th side or bar.
fn color(i: usize) -> RGBAColor {
    COLORS[i % COLORS.len()].to_rgba()
}

/// The sides of a comparison in the order their lines are drawn and
/// named: the key in the JSON and the name in the legend.
const SIDES: [(&str, &str); 3] = [
    ("stratus", "Stratus"),
    ("go_tuned", "Go, tuned"),
    ("go", "Go, as shipped"),
];

/// The quantiles of `sorted` (ascending), a thousandth apart: the
/// distribution in 1,001 numbers whatever the sample count. Empty when
/// `sorted` is.
pub(crate) fn quantiles(sorted: &[f64]) -> Vec<f64> {
    if sorted.is_empty() {
        return Vec::new();
    }
    let last = sorted.len() - 1;
    (0..QUANTILES)
        .map(|q| sorted[(q * last + (QUANTILES - 1) / 2) / (QUANTILES - 1)])
        .collect()
}

/// Write `series` to `target/bench/<suite>.series.json`.
pub(crate) fn write_series(suite: &str, series: &Series) -> Result<(), BoxError> {
    std::fs::create_dir_all("target/bench")?;
    let path = format!("target/bench/{suite}.series.json");
    std::fs::write(&path, serde_json::to_vec(series)?)?;
    println!("wrote {path}");
    Ok(())
}

/// `cargo xtask bench plots [--out DIR]`: every plot whose JSON is in
/// `target/bench`, drawn into `DIR`.
pub(crate) fn run(args: &[String]) -> Result<(), BoxError> {
    let out = match args {
        [] => "target/bench".to_owned(),
        [flag, dir] if flag == "--out" => dir.clone(),
        _ => return Err("usage: cargo xtask bench plots [--out DIR]".into()),
    };
    let drawn = draw_all(Path::new("target/bench"), Path::new(&out))?;
    if drawn.is_empty() {
        return Err("no benchmark results in target/bench: run `cargo xtask bench kubelet-go` or `cargo xtask bench ccm` first".into());
    }
    for path in drawn {
        println!("wrote {path}");
    }
    Ok(())
}

/// Draw every plot whose JSON is in `results` into `out`: the paths
/// written.
pub(crate) fn draw_all(results: &Path, out: &Path) -> Result<Vec<String>, BoxError> {
    std::fs::create_dir_all(out)?;
    let mut written = Vec::new();
    let figures = |suite: &str| -> Result<Option<BTreeMap<String, f64>>, BoxError> {
        if results.join(format!("{suite}.json")).exists() {
            figures(results, suite).map(Some)
        } else {
            Ok(None)
        }
    };
    let mut write = |name: &str, svg: String| -> Result<(), BoxError> {
        let path = out.join(name);
        std::fs::write(&path, svg)?;
        written.push(path.display().to_string());
        Ok(())
    };
    if let Some(f) = figures("kubelet-go")? {
        let series: Series = match std::fs::read(results.join("kubelet-go.series.json")) {
            Ok(bytes) => serde_json::from_slice(&bytes)?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Series::new(),
            Err(e) => return Err(e.into()),
        };
        for (name, svg) in kubelet_go(&f, &series)? {
            write(name, svg)?;
        }
    }
    if let Some(f) = figures("ccm")? {
        write("ccm-phases.svg", ccm(&f)?)?;
    }
    let mut suites: Vec<String> = std::fs::read_dir(results)?
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name().to_string_lossy().into_owned();
            let suite = name.strip_suffix(".json")?;
            (!suite.ends_with(".series")).then(|| suite.to_owned())
        })
        .collect();
    suites.sort();
    for suite in suites {
        if let Some(svg) = ratios(&suite, &self::figures(results, &suite)?)? {
            write(&format!("{suite}-ratios.svg"), svg)?;
        }
    }
    Ok(written)
}

/// Every ratio of a suite's figures (`<what>_ratio_measured_over_floor`,
/// `<what>_ratio_stratus_over_<peer>`), as horizontal bars on a log scale
/// with parity (1) marked: one row a figure, one bar a comparison. `None`
/// when the suite has no ratio.
pub(crate) fn ratios(
    suite: &str,
    figures: &BTreeMap<String, f64>,
) -> Result<Option<String>, BoxError> {
    let mut rows: BTreeMap<&str, Vec<(&str, f64)>> = BTreeMap::new();
    for (key, value) in figures {
        let Some((what, against)) = key.split_once("_ratio_") else {
            continue;
        };
        if value.is_finite() && *value > 0.0 {
            rows.entry(what).or_default().push((against, *value));
        }
    }
    if rows.is_empty() {
        return Ok(None);
    }
    let comparisons: Vec<&str> = {
        let mut all: Vec<&str> = rows.values().flatten().map(|(c, _)| *c).collect();
        all.sort_unstable();
        all.dedup();
        all
    };
    let rows: Vec<(&str, Vec<(&str, f64)>)> = rows.into_iter().collect();
    let values: Vec<f64> = rows
        .iter()
        .flat_map(|(_, r)| r.iter().map(|(_, v)| *v))
        .chain([1.0])
        .collect();
    // A decade of room on the right, for the legend.
    let range = decades(&[("all", &values)]);
    let range = range.start..range.end * 10.0;
    let per_row = comparisons.len();
    let slots = (rows.len() * (per_row + 1)).saturating_sub(1).max(1);
    let height = u32::try_from(80 + 18 * slots)
        .unwrap_or(u32::MAX)
        .max(SIZE.1);
    svg((SIZE.0, height), |root| {
        let title = format!("{suite}: ratios (1 = parity, below 1 = Stratus better or faster)");
        let mut chart = framed(root, &title, 260)
            .build_cartesian_2d(range.clone().log_scale(), (0..slots).into_segmented())
            .map_err(failed)?;
        let names: Vec<&str> = rows.iter().map(|(name, _)| *name).collect();
        let label = |slot: &SegmentValue<usize>| group_label(slot, per_row, &names);
        chart
            .configure_mesh()
            .disable_y_mesh()
            .y_labels(slots)
            .y_label_formatter(&label)
            .x_label_formatter(&axis_number)
            .x_desc("ratio (log scale)")
            .draw()
            .map_err(failed)?;
        for (j, comparison) in comparisons.iter().enumerate() {
            let color = color(j);
            let bars = rows.iter().enumerate().filter_map(|(r, (_, row))| {
                let value = row.iter().find(|(c, _)| c == comparison)?.1;
                let slot = r * (per_row + 1) + j;
                Some(Rectangle::new(
                    [
                        (range.start, SegmentValue::Exact(slot)),
                        (value, SegmentValue::Exact(slot + 1)),
                    ],
                    color.filled(),
                ))
            });
            chart
                .draw_series(bars)
                .map_err(failed)?
                .label(*comparison)
                .legend(move |(x, y)| {
                    Rectangle::new([(x, y - 5), (x + 12, y + 5)], color.filled())
                });
        }
        chart
            .draw_series(std::iter::once(PathElement::new(
                vec![
                    (1.0, SegmentValue::Exact(0)),
                    (1.0, SegmentValue::Exact(slots)),
                ],
                BLACK.stroke_width(1),
            )))
            .map_err(failed)?;
        legend(&mut chart, SeriesLabelPosition::UpperRight)
    })
    .map(Some)
}

/// A suite's figures, from `<results>/<suite>.json`.
pub(crate) fn figures(results: &Path, suite: &str) -> Result<BTreeMap<String, f64>, BoxError> {
    let path = results.join(format!("{suite}.json"));
    let bytes = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    serde_json::from_slice(&bytes).map_err(|e| format!("{}: {e}", path.display()).into())
}

/// The `kubelet-go` suite's plots from its figures and series.
pub(crate) fn kubelet_go(
    figures: &BTreeMap<String, f64>,
    series: &Series,
) -> Result<Vec<(&'static str, String)>, BoxError> {
    let pods = figures.get("pods").copied().unwrap_or_default();
    let sides = |name: &str| -> Vec<(&'static str, &[f64])> {
        SIDES
            .iter()
            .filter_map(|(key, legend)| {
                series
                    .get(name)
                    .and_then(|s| s.get(*key))
                    .filter(|q| !q.is_empty())
                    .map(|q| (*legend, q.as_slice()))
            })
            .collect()
    };
    let count = axis_number(&pods);
    let milliseconds = "milliseconds (log scale)";
    let curves = [
        (
            "bind_to_running_ms",
            "kubelet-go-latency.svg",
            format!("bind → Running, {count} pods bound at once"),
            milliseconds,
            "fraction of pods",
            1.0,
        ),
        (
            "paced_bind_to_running_ms",
            "kubelet-go-paced.svg",
            format!("bind → Running, {count} pods at 500 binds a second"),
            milliseconds,
            "fraction of pods",
            1.0,
        ),
        (
            "running_s",
            "kubelet-go-running.svg",
            format!("pods Running after {count} are bound at once"),
            "seconds since the first bind (log scale)",
            "pods Running",
            pods.max(1.0),
        ),
    ];
    let mut plots = Vec::new();
    for (series, file, title, x, y, top) in curves {
        let drawn = sides(series);
        if !drawn.is_empty() {
            plots.push((file, cumulative(&title, x, y, top, &drawn)?));
        }
    }
    let memory: Vec<(&str, f64)> = SIDES
        .iter()
        .filter_map(|(key, legend)| {
            figures
                .get(&format!("rss_bytes_per_pod_{key}"))
                .map(|b| (*legend, b / 1024.0))
        })
        .collect();
    if !memory.is_empty() {
        plots.push((
            "kubelet-go-memory.svg",
            bars(
                "resident memory per Running pod",
                "KiB per pod",
                &[("virtual kubelet process", memory)],
            )?,
        ));
    }
    Ok(plots)
}

/// The `ccm` suite's phases, measured against their floors, in seconds.
pub(crate) fn ccm(figures: &BTreeMap<String, f64>) -> Result<String, BoxError> {
    let phases = [
        ("node_init", "initialize 5,000 nodes"),
        ("lb_ensure", "ensure 1,000 load balancers"),
        ("lb_node_added", "add a node to 1,000"),
    ];
    let groups: Vec<(&str, Vec<(&str, f64)>)> = phases
        .iter()
        .filter_map(|(key, label)| {
            let measured = figures.get(&format!("{key}_seconds"))?;
            let floor = figures.get(&format!("{key}_floor_seconds"))?;
            Some((*label, vec![("Stratus", *measured), ("floor", *floor)]))
        })
        .collect();
    if groups.is_empty() {
        return Err("ccm.json has none of the phases' figures".into());
    }
    bars(
        "cloud controller manager phases against their floors",
        "seconds",
        &groups,
    )
}

/// A plotters error as the benchmarks' error.
fn failed<E: std::fmt::Debug>(e: E) -> BoxError {
    format!("drawing a plot: {e:?}").into()
}

/// An SVG of `draw` on a white area of `size` pixels.
fn svg(
    size: (u32, u32),
    draw: impl FnOnce(&DrawingArea<SVGBackend<'_>, Shift>) -> Result<(), BoxError>,
) -> Result<String, BoxError> {
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, size).into_drawing_area();
        root.fill(&WHITE).map_err(failed)?;
        draw(&root)?;
        root.present().map_err(failed)?;
    }
    Ok(out)
}

/// The label under (or beside) a slot of a grouped bar chart, whose
/// groups of `per_group` bars are separated by an empty slot: the group's
/// name at its middle bar, nothing elsewhere.
fn group_label(slot: &SegmentValue<usize>, per_group: usize, names: &[&str]) -> String {
    match slot {
        SegmentValue::CenterOf(s) if s % (per_group + 1) == per_group.saturating_sub(1) / 2 => {
            names
                .get(s / (per_group + 1))
                .map(|name| (*name).to_owned())
                .unwrap_or_default()
        }
        _ => String::new(),
    }
}

/// The range of every series' values, widened to decades (for a log
/// axis; values at or below 0 are left out).
fn decades(sides: &[(&str, &[f64])]) -> std::ops::Range<f64> {
    let positive = sides
        .iter()
        .flat_map(|(_, q)| q.iter().copied())
        .filter(|v| *v > 0.0);
    let (low, high) = positive.fold((f64::MAX, f64::MIN), |(lo, hi), v| (lo.min(v), hi.max(v)));
    if low > high {
        return 0.1..10.0;
    }
    10f64.powf(low.log10().floor())..10f64.powf(high.log10().ceil().max(low.log10().floor() + 1.0))
}

/// A value on a log axis as people write it: `0.1`, `10`, `1,000`.
fn axis_number(v: &f64) -> String {
    if *v < 1.0 {
        return format!("{v}");
    }
    let digits = format!("{v:.0}");
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Each side's quantiles as a cumulative curve: the `k`th of `n` at x =
/// its value (log scale), y = `top` × k / n (with `top` 1, a
/// distribution: the fraction of samples at or below each value; with
/// `top` the pod count and times as values, pods Running over time).
fn cumulative(
    title: &str,
    x: &str,
    y: &str,
    top: f64,
    sides: &[(&str, &[f64])],
) -> Result<String, BoxError> {
    svg(SIZE, |root| {
        let mut chart = framed(root, title, 64)
            .build_cartesian_2d(decades(sides).log_scale(), 0f64..top)
            .map_err(failed)?;
        let whole = top >= 10.0;
        chart
            .configure_mesh()
            .x_desc(x)
            .x_label_formatter(&axis_number)
            .y_desc(y)
            .y_label_formatter(&|v| match whole {
                true => format!("{v:.0}"),
                false => format!("{v:.1}"),
            })
            .draw()
            .map_err(failed)?;
        for (i, (legend, q)) in sides.iter().enumerate() {
            let color = color(i);
            let last = (q.len().max(2) - 1) as f64;
            let points = q
                .iter()
                .enumerate()
                .filter(|(_, v)| **v > 0.0)
                .map(|(k, v)| (*v, top * k as f64 / last));
            chart
                .draw_series(LineSeries::new(points, color.stroke_width(2)))
                .map_err(failed)?
                .label(*legend)
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
                });
        }
        legend(&mut chart, SeriesLabelPosition::LowerRight)
    })
}

/// Every plot's frame: `title` above, the margins, room for the x axis's
/// labels and `y_labels` pixels for the y axis's.
fn framed<'a, 'b>(
    root: &'a DrawingArea<SVGBackend<'b>, Shift>,
    title: &str,
    y_labels: u32,
) -> ChartBuilder<'a, 'b, SVGBackend<'b>> {
    let mut builder = ChartBuilder::on(root);
    builder
        .caption(title, ("sans-serif", 18))
        .margin(12)
        .margin_right(40)
        .x_label_area_size(40)
        .y_label_area_size(y_labels);
    builder
}

/// Draw the chart's legend (its series' labels) at `position`.
fn legend<'a, DB: DrawingBackend + 'a, CT: CoordTranslate>(
    chart: &mut ChartContext<'a, DB, CT>,
    position: SeriesLabelPosition,
) -> Result<(), BoxError> {
    chart
        .configure_series_labels()
        .position(position)
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .draw()
        .map_err(failed)
}

/// Grouped bars: for each group (named under the axis), one bar a series,
/// the series named in the legend and in the order of the first group.
fn bars(title: &str, y: &str, groups: &[(&str, Vec<(&str, f64)>)]) -> Result<String, BoxError> {
    let per_group = groups.iter().map(|(_, s)| s.len()).max().unwrap_or(1);
    // One slot a bar and one empty slot between groups.
    let slots = (groups.len() * (per_group + 1)).saturating_sub(1).max(1);
    let top = groups
        .iter()
        .flat_map(|(_, s)| s.iter().map(|(_, v)| *v))
        .fold(0f64, f64::max)
        * 1.15;
    let names: Vec<&str> = groups
        .first()
        .map(|(_, s)| s.iter().map(|(n, _)| *n).collect())
        .unwrap_or_default();
    svg(SIZE, |root| {
        let mut chart = framed(root, title, 64)
            .build_cartesian_2d((0..slots).into_segmented(), 0f64..top.max(1e-9))
            .map_err(failed)?;
        let group_names: Vec<&str> = groups.iter().map(|(name, _)| *name).collect();
        let label = |slot: &SegmentValue<usize>| group_label(slot, per_group, &group_names);
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(slots)
            .x_label_formatter(&label)
            .y_desc(y)
            .draw()
            .map_err(failed)?;
        for (j, name) in names.iter().enumerate() {
            let color = color(j);
            let rects = groups.iter().enumerate().filter_map(|(g, (_, s))| {
                let value = s.get(j)?.1;
                let slot = g * (per_group + 1) + j;
                Some(Rectangle::new(
                    [
                        (SegmentValue::Exact(slot), 0.0),
                        (SegmentValue::Exact(slot + 1), value),
                    ],
                    color.filled(),
                ))
            });
            chart
                .draw_series(rects)
                .map_err(failed)?
                .label(*name)
                .legend(move |(x, y)| {
                    Rectangle::new([(x, y - 5), (x + 12, y + 5)], color.filled())
                });
        }
        legend(&mut chart, SeriesLabelPosition::UpperRight)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_keep_the_ends_and_the_median() {
        let sorted: Vec<f64> = (1..=10_001).map(f64::from).collect();
        let q = quantiles(&sorted);
        assert_eq!(q.len(), QUANTILES);
        assert_eq!(q[0], 1.0);
        assert_eq!(q[500], 5_001.0);
        assert_eq!(q[990], 9_901.0);
        assert_eq!(q[1000], 10_001.0);
        assert!(quantiles(&[]).is_empty());
        // Fewer samples than quantiles: each sample repeats, in order.
        let q = quantiles(&[1.0, 2.0, 3.0]);
        assert_eq!((q[0], q[200], q[300], q[1000]), (1.0, 1.0, 2.0, 3.0));
        assert!(q.windows(2).all(|w| w[0] <= w[1]));
    }

    #[test]
    fn axis_numbers_read_as_written() {
        assert_eq!(axis_number(&0.01), "0.01");
        assert_eq!(axis_number(&1.0), "1");
        assert_eq!(axis_number(&100.0), "100");
        assert_eq!(axis_number(&1000.0), "1,000");
        assert_eq!(axis_number(&1_000_000.0), "1,000,000");
    }

    #[test]
    fn a_group_is_named_once_at_its_middle_bar() {
        let names = ["a", "b"];
        let at = |s| group_label(&SegmentValue::CenterOf(s), 3, &names);
        // Slots: a a a _ b b b.
        let labels: Vec<String> = (0..7).map(at).collect();
        assert_eq!(labels, ["", "a", "", "", "", "b", ""]);
        assert_eq!(group_label(&SegmentValue::Exact(1), 3, &names), "");
        // Two bars a group: the first of them.
        assert_eq!(group_label(&SegmentValue::CenterOf(3), 2, &names), "b");
    }

    #[test]
    fn decades_cover_every_positive_value() {
        let a = [0.0, 3.0, 250.0];
        let b = [12.0, 9_000.0];
        let r = decades(&[("a", &a), ("b", &b)]);
        assert_eq!((r.start, r.end), (1.0, 10_000.0));
        let one = [5.0];
        let r = decades(&[("a", &one)]);
        assert_eq!((r.start, r.end), (1.0, 10.0));
    }

    /// The figures and series a `kubelet-go` run writes, made up.
    fn kubelet_go_run() -> (BTreeMap<String, f64>, Series) {
        let figures: BTreeMap<String, f64> = [
            ("pods", 1000.0),
            ("rss_bytes_per_pod_stratus", 26_316.8),
            ("rss_bytes_per_pod_go_tuned", 41_500.7),
            ("rss_bytes_per_pod_go", 39_759.9),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
        let mut series = Series::new();
        for (name, scale) in [
            ("bind_to_running_ms", 1.0),
            ("paced_bind_to_running_ms", 0.2),
            ("running_s", 0.001),
        ] {
            let sides = series.entry(name.to_owned()).or_default();
            for (side, factor) in [("stratus", 1.0), ("go_tuned", 4.0), ("go", 3_000.0)] {
                let sorted: Vec<f64> = (1..=1000).map(|i| f64::from(i) * scale * factor).collect();
                sides.insert(side.to_owned(), quantiles(&sorted));
            }
        }
        (figures, series)
    }

    #[test]
    fn kubelet_go_draws_four_plots_naming_every_side() {
        let (figures, series) = kubelet_go_run();
        let plots = kubelet_go(&figures, &series).unwrap();
        let names: Vec<&str> = plots.iter().map(|(n, _)| *n).collect();
        assert_eq!(
            names,
            [
                "kubelet-go-latency.svg",
                "kubelet-go-paced.svg",
                "kubelet-go-running.svg",
                "kubelet-go-memory.svg"
            ]
        );
        for (name, svg) in &plots {
            assert!(svg.starts_with("<svg"), "{name}");
            for legend in ["Stratus", "Go, tuned", "Go, as shipped"] {
                assert!(svg.contains(legend), "{name} does not name {legend}");
            }
        }
        // A line a side on the distributions, a bar a side on memory.
        // The mesh's lines are 1 px wide, the sides' 2 px.
        assert_eq!(
            plots[0].1.matches(r#"stroke-width="2""#).count(),
            3 + 3,
            "three lines and three legend marks"
        );
        assert!(plots[3].1.matches("<rect").count() >= 3);
    }

    #[test]
    fn a_side_without_a_series_is_left_out() {
        let (figures, mut series) = kubelet_go_run();
        for sides in series.values_mut() {
            sides.remove("go");
        }
        let plots = kubelet_go(&figures, &series).unwrap();
        assert!(!plots[0].1.contains("Go, as shipped"));
        assert!(plots[0].1.contains("Go, tuned"));
        // No series at all: only the memory bars, from the figures.
        let plots = kubelet_go(&figures, &Series::new()).unwrap();
        assert_eq!(plots.len(), 1);
    }

    #[test]
    fn ccm_phases_need_their_figures() {
        let figures: BTreeMap<String, f64> = [
            ("node_init_seconds", 2.0),
            ("node_init_floor_seconds", 1.5),
            ("lb_ensure_seconds", 9.3),
            ("lb_ensure_floor_seconds", 10.0),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
        let svg = ccm(&figures).unwrap();
        assert!(svg.contains("initialize 5,000 nodes"));
        assert!(svg.contains("ensure 1,000 load balancers"));
        assert!(!svg.contains("add a node to 1,000"));
        assert!(ccm(&BTreeMap::new()).is_err());
    }

    #[test]
    fn every_ratio_is_a_bar_and_a_suite_without_one_has_no_plot() {
        let figures: BTreeMap<String, f64> = [
            ("admit_seconds", 3.7),
            ("admit_ratio_measured_over_floor", 1.18),
            ("p99_ms_ratio_stratus_over_go", 0.2),
            ("p99_ms_ratio_stratus_over_go_tuned", 0.35),
            ("broken_ratio_measured_over_floor", f64::NAN),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
        let svg = ratios("suite", &figures).unwrap().unwrap();
        for label in [
            "admit",
            "p99_ms",
            "measured_over_floor",
            "stratus_over_go_tuned",
        ] {
            assert!(svg.contains(label), "{label}");
        }
        assert!(
            !svg.contains("broken"),
            "a ratio that is not a number is left out"
        );
        let only = [("admit_seconds".to_owned(), 3.7)].into_iter().collect();
        assert!(ratios("suite", &only).unwrap().is_none());
    }

    #[test]
    fn draw_all_reads_the_results_it_finds() {
        let dir = std::env::temp_dir().join(format!("stratus-bench-plots-{}", std::process::id()));
        let out = dir.join("out");
        std::fs::create_dir_all(&dir).unwrap();
        assert!(draw_all(&dir, &out).unwrap().is_empty());
        let (figures, series) = kubelet_go_run();
        std::fs::write(
            dir.join("kubelet-go.json"),
            serde_json::to_vec(&figures).unwrap(),
        )
        .unwrap();
        std::fs::write(
            dir.join("kubelet-go.series.json"),
            serde_json::to_vec(&series).unwrap(),
        )
        .unwrap();
        let written = draw_all(&dir, &out).unwrap();
        // Four kubelet-go plots (its made-up figures have no ratio).
        assert_eq!(written.len(), 4);
        assert!(out.join("kubelet-go-running.svg").is_file());
        std::fs::write(dir.join("ccm.json"), b"not json").unwrap();
        assert!(
            draw_all(&dir, &out).is_err(),
            "a broken results file is an error"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
