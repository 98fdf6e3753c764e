//! The SVG plot of a suite's results: kop/s against threads (log2 axis),
//! one line per lock with error bars over its runs, split into near and far
//! panels when the runs fell into two CPU placements.

use super::report::{axes, io_reason, placement_cut, split_by_distance, ResultFile, ResultRow};
use super::stats::median;
use std::path::Path;

/// Series colours, distinct from each other and readable on white (the
/// ten of matplotlib's `tab10`, then six darker ones): enough for every
/// suite's default locks (at most 15). Past them the colours repeat, on a
/// dashed line and with another marker.
pub const PALETTE: [(u8, u8, u8); 16] = [
    (31, 119, 180),  // blue
    (255, 127, 14),  // orange
    (44, 160, 44),   // green
    (214, 39, 40),   // red
    (148, 103, 189), // purple
    (140, 86, 75),   // brown
    (227, 119, 194), // pink
    (127, 127, 127), // grey
    (188, 189, 34),  // olive
    (23, 190, 207),  // cyan
    (0, 0, 0),       // black
    (0, 0, 128),     // navy
    (128, 0, 64),    // wine
    (0, 100, 80),    // dark teal
    (200, 160, 0),   // dark yellow
    (90, 60, 20),    // dark brown
];

/// Marker shapes, cycled with the series: circle, triangle, square,
/// cross, diamond.
const MARKERS: usize = 5;

/// How series `i` is drawn: colour, marker, dashed.
fn series_style(i: usize) -> (plotters::style::RGBColor, usize, bool) {
    let (r, g, b) = PALETTE[i % PALETTE.len()];
    (
        plotters::style::RGBColor(r, g, b),
        i % MARKERS,
        i >= PALETTE.len(),
    )
}

/// The outline of marker shape `shape` (see [`MARKERS`]), in pixels
/// around its point: circle, triangle, square, plus, diamond.
fn marker_outline(shape: usize) -> Vec<(i32, i32)> {
    match shape % MARKERS {
        0 => (0..12)
            .map(|k| {
                let a = k as f64 * std::f64::consts::TAU / 12.0;
                (
                    (4.5 * a.cos()).round() as i32,
                    (4.5 * a.sin()).round() as i32,
                )
            })
            .collect(),
        1 => vec![(0, -5), (5, 4), (-5, 4)],
        2 => vec![(-4, -4), (4, -4), (4, 4), (-4, 4)],
        3 => vec![
            (-2, -5),
            (2, -5),
            (2, -2),
            (5, -2),
            (5, 2),
            (2, 2),
            (2, 5),
            (-2, 5),
            (-2, 2),
            (-5, 2),
            (-5, -2),
            (-2, -2),
        ],
        _ => vec![(0, -5), (5, 0), (0, 5), (-5, 0)],
    }
}

/// A marker of shape `shape` at `at` (a plotters element).
macro_rules! marker {
    ($at:expr, $shape:expr, $style:expr) => {
        plotters::element::EmptyElement::at($at)
            + plotters::element::Polygon::new(marker_outline($shape), $style)
    };
}

/// One point of a plot: threads, the value drawn, and the error bar.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Point {
    threads: usize,
    value: f64,
    lo: f64,
    hi: f64,
}

/// One panel of a plot: a title and, per lock (index into the lock ids),
/// its points.
struct Panel {
    title: String,
    series: Vec<(usize, Vec<Point>)>,
}

/// What the plot shows: the panels and the words for the y axis.
struct PlotData {
    ids: Vec<String>,
    panels: Vec<Panel>,
    y_desc: String,
    note: String,
}

/// The plot's content. One panel of the mean over all runs with min–max
/// bars, or, when the cache-line round trip split the runs into two
/// placements (as in the text's "Locking rate by CPU distance" table), one
/// panel each for the near and the far runs: medians with min–max bars,
/// never averaged together. `unit` names what the values were taken over
/// ("runs", or "windows" for pi).
fn plot_data(rows: &[ResultRow], unit: &str) -> PlotData {
    let (ids, _) = axes(rows);
    let per_id = |f: &dyn Fn(&ResultRow) -> Option<Point>| -> Vec<(usize, Vec<Point>)> {
        ids.iter()
            .enumerate()
            .map(|(i, id)| {
                let pts = rows.iter().filter(|r| &r.id == id).filter_map(f).collect();
                (i, pts)
            })
            .collect()
    };
    if let Some(cut) = placement_cut(rows) {
        let side = |far: bool| {
            move |r: &ResultRow| {
                let (near, far_runs) = split_by_distance(r, cut);
                let v = if far { far_runs } else { near };
                let value = median(&v)?;
                let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
                let hi = v.iter().copied().fold(0.0, f64::max);
                Some(Point {
                    threads: r.threads,
                    value,
                    lo,
                    hi,
                })
            }
        };
        let mut panels = vec![
            Panel {
                title: format!("CPUs near (round trip < {cut:.0} ns)"),
                series: per_id(&side(false)),
            },
            Panel {
                title: format!("CPUs far (round trip >= {cut:.0} ns)"),
                series: per_id(&side(true)),
            },
        ];
        // A placement that no run stayed in entirely (one probe far off,
        // say) gets no panel.
        panels.retain(|p| p.series.iter().any(|s| !s.1.is_empty()));
        if panels.is_empty() {
            return plot_all(rows, ids, unit);
        }
        return PlotData {
            panels,
            ids,
            y_desc: format!("kop/s: median of the {unit}, bar: min to max"),
            note: format!(
                "The cache-line round trip between two CPUs, measured before and after each run, \
                 fell into two groups: near and far {unit} are shown apart; {unit} that crossed \
                 {cut:.0} ns are left out."
            ),
        };
    }
    plot_all(rows, ids, unit)
}

/// The plot of every run together: means with min–max bars (± 1 stddev
/// where the runs are not recorded).
fn plot_all(rows: &[ResultRow], ids: Vec<String>, unit: &str) -> PlotData {
    let series = ids
        .iter()
        .enumerate()
        .map(|(i, id)| {
            (
                i,
                rows.iter()
                    .filter(|r| &r.id == id)
                    .map(|r| {
                        let (lo, hi) = if r.kops_runs.is_empty() {
                            (
                                (r.kops_mean - r.kops_stddev).max(0.0),
                                r.kops_mean + r.kops_stddev,
                            )
                        } else {
                            (
                                r.kops_runs.iter().copied().fold(f64::INFINITY, f64::min),
                                r.kops_runs.iter().copied().fold(0.0, f64::max),
                            )
                        };
                        Point {
                            threads: r.threads,
                            value: r.kops_mean,
                            lo,
                            hi,
                        }
                    })
                    .collect(),
            )
        })
        .collect();
    let stddev_bars = rows.iter().filter(|r| r.kops_runs.is_empty()).count();
    let bars = match stddev_bars {
        0 => "min to max".to_string(),
        n if n == rows.len() => "mean ± 1 stddev".to_string(),
        _ => format!("min to max (± 1 stddev where the {unit} are not recorded)"),
    };
    PlotData {
        panels: vec![Panel {
            title: String::new(),
            series,
        }],
        ids,
        y_desc: format!("kop/s: mean of the {unit}, bar: {bars}"),
        note: String::new(),
    }
}

/// SVG plot: kop/s against threads (log2 axis), one line per lock with
/// error bars over the runs, split into near and far panels when the runs
/// fell into two CPU placements; the legend to the right of the panels.
/// `unit` is what the error bars span (`runs`; pi: `windows`).
pub fn plot(file: &ResultFile, path: &Path, unit: &str) -> Result<(), String> {
    use plotters::prelude::*;
    let rows = &file.results;
    let (_, threads) = axes(rows);
    if threads.is_empty() {
        return Ok(());
    }
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {}", dir.display(), io_reason(&e)))?;
    }
    let data = plot_data(rows, unit);
    let x = |t: usize| (t as f64).log2();
    let (x0, x1) = (
        x(threads[0]),
        x(*threads.last().unwrap()).max(x(threads[0]) + 1.0),
    );
    let ymax = data
        .panels
        .iter()
        .flat_map(|p| p.series.iter().flat_map(|s| s.1.iter()))
        .map(|p| p.hi.max(p.value))
        .fold(0.0, f64::max)
        * 1.1
        + 1e-9;
    let err = |e: &dyn std::fmt::Display| format!("cannot draw {}: {e}", path.display());

    // Layout: the panels side by side, the legend in a margin of its own
    // to their right, a note under them.
    let longest = data
        .ids
        .iter()
        .map(|s| s.chars().count())
        .max()
        .unwrap_or(0);
    let legend_w = (70 + 9 * longest as u32).clamp(170, 400);
    let panel_w = if data.panels.len() > 1 { 620 } else { 800 };
    let note_h = if data.note.is_empty() { 0 } else { 30 };
    let width = panel_w * data.panels.len() as u32 + legend_w;
    let height = 620 + note_h;
    let root = SVGBackend::new(path, (width, height)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let root = root
        .titled(
            &format!(
                "klock bench {}: {} ({} CPUs)",
                file.suite,
                if file.title.chars().count() > 70 {
                    file.title.chars().take(69).chain(['…']).collect()
                } else {
                    file.title.clone()
                },
                file.machine.cpus
            ),
            ("sans-serif", 22),
        )
        .map_err(|e| err(&e))?;
    let (main, note) = root.split_vertically(root.dim_in_pixel().1 - note_h);
    let (plots, legend) = main.split_horizontally(panel_w * data.panels.len() as u32);
    let areas = plots.split_evenly((1, data.panels.len()));

    for (panel, area) in data.panels.iter().zip(&areas) {
        let mut chart = ChartBuilder::on(area);
        chart.margin(12).x_label_area_size(40).y_label_area_size(80);
        if !panel.title.is_empty() {
            chart.caption(&panel.title, ("sans-serif", 19));
        }
        let mut chart = chart
            .build_cartesian_2d(x0 - 0.1..x1 + 0.1, 0.0..ymax)
            .map_err(|e| err(&e))?;
        chart
            .configure_mesh()
            .x_desc("threads (log scale)")
            .y_desc(&data.y_desc)
            .label_style(("sans-serif", 15))
            .axis_desc_style(("sans-serif", 16))
            .x_labels(threads.len() + 1)
            .x_label_formatter(&|v| format!("{:.0}", 2f64.powf(*v)))
            .y_label_formatter(&|v| format!("{v:.0}"))
            .draw()
            .map_err(|e| err(&e))?;
        let n = data.ids.len() as f64;
        for (i, pts) in &panel.series {
            let (color, shape, dashed) = series_style(*i);
            let line = color.stroke_width(2);
            // Each lock a little to the side, so that error bars at one
            // thread count do not hide each other (at most ±0.06 of a
            // doubling).
            let dodge = if n > 1.0 {
                0.12 * (*i as f64 / (n - 1.0) - 0.5)
            } else {
                0.0
            };
            let x = |t: usize| x(t) + dodge;
            let xy: Vec<(f64, f64)> = pts.iter().map(|p| (x(p.threads), p.value)).collect();
            if dashed {
                chart
                    .draw_series(DashedLineSeries::new(xy.clone(), 8, 5, line))
                    .map_err(|e| err(&e))?;
            } else {
                chart
                    .draw_series(LineSeries::new(xy.clone(), line))
                    .map_err(|e| err(&e))?;
            }
            for p in pts {
                let px = x(p.threads);
                // The error bar, with caps 8 px wide.
                chart
                    .draw_series(std::iter::once(PathElement::new(
                        vec![(px, p.lo), (px, p.hi)],
                        color.stroke_width(1),
                    )))
                    .map_err(|e| err(&e))?;
                for y in [p.lo, p.hi] {
                    chart
                        .draw_series(std::iter::once(
                            EmptyElement::at((px, y))
                                + PathElement::new(vec![(-4, 0), (4, 0)], color.stroke_width(1)),
                        ))
                        .map_err(|e| err(&e))?;
                }
            }
            chart
                .draw_series(xy.iter().map(|&p| marker!(p, shape, color.filled())))
                .map_err(|e| err(&e))?;
        }
    }

    // The legend: one entry per lock, in the margin right of the panels.
    legend
        .draw(&Text::new(
            "lock",
            (12, 40),
            ("sans-serif", 17).into_font().color(&BLACK),
        ))
        .map_err(|e| err(&e))?;
    for (i, id) in data.ids.iter().enumerate() {
        let (color, shape, dashed) = series_style(i);
        let y = 68 + 24 * i as i32;
        let line = color.stroke_width(2);
        if dashed {
            for x in [12, 24] {
                legend
                    .draw(&PathElement::new(vec![(x, y), (x + 8, y)], line))
                    .map_err(|e| err(&e))?;
            }
        } else {
            legend
                .draw(&PathElement::new(vec![(12, y), (40, y)], line))
                .map_err(|e| err(&e))?;
        }
        legend
            .draw(&marker!((26, y), shape, color.filled()))
            .map_err(|e| err(&e))?;
        legend
            .draw(&Text::new(
                id.as_str(),
                (48, y - 8),
                ("sans-serif", 16).into_font().color(&BLACK),
            ))
            .map_err(|e| err(&e))?;
    }
    if !data.note.is_empty() {
        note.draw(&Text::new(
            data.note.as_str(),
            (16, 6),
            ("sans-serif", 15).into_font().color(&BLACK),
        ))
        .map_err(|e| err(&e))?;
    }
    root.present().map_err(|e| err(&e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::report::test_rows::row_at;
    use crate::bench::report::{Machine, Provenance};

    fn machine() -> Machine {
        Machine {
            cpus: 2,
            cpu_model: "test".into(),
            kernel: "test".into(),
        }
    }

    fn file(suite: &str, results: Vec<ResultRow>) -> ResultFile {
        ResultFile {
            suite: suite.into(),
            machine: machine(),
            results,
            title: "test".into(),
            workload: String::new(),
            provenance: Provenance::default(),
            verdict: Default::default(),
        }
    }

    fn tmp(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("klock-plot-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir.join(name)
    }

    /// The x coordinates of the SVG's `<text>` elements whose content is
    /// `label`.
    fn text_x(svg: &str, label: &str) -> Vec<f64> {
        svg.split("<text")
            .skip(1)
            .filter(|t| {
                t.split_once('>')
                    .is_some_and(|(_, rest)| rest.split('<').next().map(str::trim) == Some(label))
            })
            .filter_map(|t| {
                let x = t.split("x=\"").nth(1)?.split('"').next()?;
                x.parse().ok()
            })
            .collect()
    }

    /// The x coordinates of the data lines: the polylines through three
    /// points or more (the legend's samples, error bars and axes have two).
    fn polyline_x(svg: &str) -> Vec<f64> {
        svg.split("<polyline")
            .skip(1)
            .filter_map(|p| p.split("points=\"").nth(1)?.split('"').next())
            .filter(|pts| pts.split_whitespace().count() >= 3)
            .flat_map(|pts| pts.split_whitespace())
            .filter_map(|xy| xy.split(',').next()?.parse().ok())
            .collect()
    }

    #[test]
    fn near_and_far_runs_are_separate_panels_never_averaged() {
        // Lock a: near runs 10 and 12, far 4; lock b: near 8, far 2 and 3.
        let rows = vec![
            row_at("a", 1, &[(10.0, 80.0), (12.0, 90.0), (4.0, 400.0)]),
            row_at("b", 1, &[(8.0, 85.0), (2.0, 380.0), (3.0, 420.0)]),
            row_at("a", 4, &[(9.0, 80.0), (5.0, 390.0)]),
            row_at("b", 4, &[(7.0, 80.0), (1.0, 390.0)]),
        ];
        let d = plot_data(&rows, "runs");
        assert_eq!(d.panels.len(), 2);
        assert!(
            d.panels[0].title.starts_with("CPUs near"),
            "{}",
            d.panels[0].title
        );
        assert!(
            d.panels[1].title.starts_with("CPUs far"),
            "{}",
            d.panels[1].title
        );
        let pt = |panel: usize, id: usize, t: usize| {
            d.panels[panel].series[id]
                .1
                .iter()
                .find(|p| p.threads == t)
                .copied()
                .unwrap()
        };
        let p = pt(0, 0, 1);
        assert_eq!((p.value, p.lo, p.hi), (11.0, 10.0, 12.0));
        let p = pt(1, 0, 1);
        assert_eq!((p.value, p.lo, p.hi), (4.0, 4.0, 4.0));
        let p = pt(1, 1, 1);
        assert_eq!((p.value, p.lo, p.hi), (2.5, 2.0, 3.0));
        assert!(d.y_desc.contains("median") && d.y_desc.contains("min to max"));

        let path = tmp("two-placements.svg");
        plot(&file("mutex", rows), &path, "runs").unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        assert!(svg.contains("CPUs near") && svg.contains("CPUs far"));
        for id in ["a", "b"] {
            assert_eq!(text_x(&svg, id).len(), 1, "one legend entry for {id}");
        }
    }

    #[test]
    fn a_placement_no_run_stayed_in_gets_no_panel() {
        // One probe far off: the run that saw it crossed the cut, so no
        // run was entirely far.
        let mut r = row_at("a", 1, &[(10.0, 80.0), (12.0, 90.0), (11.0, 85.0)]);
        r.xfer_ns_runs[2].1 = Some(300_000.0);
        let d = plot_data(std::slice::from_ref(&r), "runs");
        assert_eq!(d.panels.len(), 1);
        assert!(d.panels[0].title.starts_with("CPUs near"));
        let p = d.panels[0].series[0].1[0];
        assert_eq!((p.value, p.lo, p.hi), (11.0, 10.0, 12.0));
        assert!(d.note.contains("left out"), "{}", d.note);
    }

    #[test]
    fn one_placement_is_one_panel_of_means_with_min_max_bars() {
        let rows = vec![
            row_at("a", 1, &[(10.0, 80.0), (12.0, 90.0), (14.0, 100.0)]),
            row_at("a", 2, &[(6.0, 80.0), (8.0, 90.0)]),
        ];
        let d = plot_data(&rows, "runs");
        assert_eq!(d.panels.len(), 1);
        let p = d.panels[0].series[0].1[0];
        assert_eq!((p.value, p.lo, p.hi), (12.0, 10.0, 14.0));
        assert!(
            d.y_desc.contains("mean of the runs, bar: min to max"),
            "{}",
            d.y_desc
        );
        // Without per-run values: ± 1 stddev, and the axis says so.
        let mut bare = rows.clone();
        for r in &mut bare {
            r.kops_runs.clear();
        }
        let d = plot_data(&bare, "runs");
        let p = d.panels[0].series[0].1[0];
        assert!((p.hi - p.value - bare[0].kops_stddev).abs() < 1e-9);
        assert!(d.y_desc.contains("stddev"), "{}", d.y_desc);
    }

    #[test]
    fn legend_lies_right_of_the_data_and_colours_differ() {
        // More locks than colours: the last ones repeat a colour, dashed.
        let ids: Vec<String> = (0..PALETTE.len() + 2).map(|i| format!("lock{i}")).collect();
        let rows: Vec<ResultRow> = ids
            .iter()
            .enumerate()
            .flat_map(|(i, id)| {
                [1, 2, 4, 8, 16].map(|t| row_at(id, t, &[(100.0 + i as f64, 80.0), (300.0, 90.0)]))
            })
            .collect();
        let path = tmp("legend.svg");
        plot(&file("mutex", rows), &path, "runs").unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        let data_right = polyline_x(&svg).into_iter().fold(0.0, f64::max);
        assert!(data_right > 0.0, "no data lines in the SVG");
        for id in &ids {
            let x = text_x(&svg, id);
            assert_eq!(x.len(), 1, "legend entry of {id}: {x:?}");
            assert!(
                x[0] > data_right + 20.0,
                "{id}'s legend at x {} overlaps data up to {data_right}",
                x[0]
            );
        }
        // Every colour of the palette differs, and no two series share
        // colour, marker and line.
        for (i, a) in PALETTE.iter().enumerate() {
            assert!(!PALETTE[..i].contains(a), "colour {a:?} twice");
        }
        let styles: Vec<_> = (0..60)
            .map(|i| {
                let (c, m, d) = series_style(i);
                ((c.0, c.1, c.2), m, d)
            })
            .collect();
        for (i, s) in styles.iter().enumerate() {
            assert!(
                !styles[..i].contains(s),
                "series {i} looks like an earlier one"
            );
        }
        // The data lines are drawn in series order, each solid one in its
        // own colour: the first 16 differ (the two past the palette are
        // dashed, in the first colours again).
        let mut colours: Vec<&str> = svg
            .split("<polyline")
            .skip(1)
            .filter(|p| {
                p.split("points=\"")
                    .nth(1)
                    .and_then(|p| p.split('"').next())
                    .is_some_and(|pts| pts.split_whitespace().count() >= 3)
            })
            .filter_map(|p| p.split("stroke=\"").nth(1)?.split('"').next())
            .collect();
        assert!(colours.len() > PALETTE.len(), "{colours:?}");
        colours.truncate(PALETTE.len());
        colours.sort_unstable();
        colours.dedup();
        assert_eq!(colours.len(), PALETTE.len(), "{colours:?}");
    }

    /// A committed result file whose runs went to both placements plots as
    /// two panels (`KLOCK_PLOT_OUT=PATH` keeps the SVG to look at).
    #[test]
    fn committed_two_placement_file_plots_near_and_far() {
        let src =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../bench/results/2core-mutex-v3.json");
        let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&src).unwrap()).unwrap();
        let rows: Vec<ResultRow> = serde_json::from_value(v["results"].clone()).unwrap();
        let mut f = file("mutex", rows);
        f.machine = serde_json::from_value(v["machine"].clone()).unwrap();
        f.title = v["title"].as_str().unwrap().into();
        assert!(placement_cut(&f.results).is_some());
        let path = std::env::var_os("KLOCK_PLOT_OUT")
            .map_or_else(|| tmp("committed.svg"), std::path::PathBuf::from);
        plot(&f, &path, "runs").unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        assert!(svg.contains("CPUs near") && svg.contains("CPUs far"));
        let (ids, _) = axes(&f.results);
        for id in &ids {
            assert_eq!(text_x(&svg, id).len(), 1, "legend entry of {id}");
        }
    }
}
