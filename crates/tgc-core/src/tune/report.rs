//! `tgc tune --report`: the `000` §9 measurement log as CSV, and a picture
//! of it as SVG (every candidate's measured time relative to its unit's
//! fastest, labelled, the chosen one marked, with a roofline estimate);
//! for `--target sm80|sm90` ([`gpu_csv`], [`gpu_svg`]) every plan's
//! measured time against the analytic model's estimate.

use std::fmt::Write as _;

use super::search::{PointResult, Tuned};
use crate::cpu::packed::Blocks;
use crate::plan::target::CpuTarget;

/// The roofline of `000` §6 for this CPU — an estimate, not a measurement:
/// `time = max(FLOPs / peak, bytes / bandwidth)`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Roofline {
    /// FLOP/s.
    pub peak_flops: f64,
    /// Bytes/s.
    pub bandwidth: f64,
}

impl Roofline {
    /// The roofline of `threads` cores of CPU `t`
    /// ([`CpuTarget::peak_flops`], [`CpuTarget::bandwidth`]).
    pub fn of(t: &CpuTarget, threads: usize) -> Roofline {
        Roofline { peak_flops: t.peak_flops(threads), bandwidth: t.bandwidth(threads) }
    }

    /// The assumed roofline of this machine with `threads` kernel threads:
    /// [`Roofline::of`] [`CpuTarget::host`] (this machine's clock and
    /// instruction set, the caches, pipes and bandwidths of
    /// `plan::target::ZEN3`).
    pub fn this_machine(threads: usize) -> Roofline {
        Roofline::of(&CpuTarget::host(), threads)
    }

    /// The estimated time of `flops` and `bytes`, in nanoseconds.
    pub fn estimate_ns(&self, flops: f64, bytes: f64) -> f64 {
        (flops / self.peak_flops).max(bytes / self.bandwidth) * 1e9
    }
}

/// One tuned point: its label (`B=8, S=128`), the graph's name and result.
pub struct PointReport<'a> {
    pub graph: &'a str,
    pub point: &'a str,
    pub result: &'a PointResult,
    /// The threads of the runtime's pool it ran with (`TGC_NUM_THREADS`).
    pub threads: usize,
}

/// The CSV header of [`csv`].
pub const CSV_HEADER: &str =
    "graph,point,key,kernels,flops,bytes,estimate_ns,candidate,mc,nc,kc,threads,measured_ns,analytic,chosen";

/// One CSV line per candidate of every unit of every point (`000` §9:
/// FLOPs, bytes, estimate, measured, plan); `threads` is the threads the
/// candidate ran on (its cap, or the pool's size for an uncapped plan),
/// `measured_ns` round 1's median ([`Tuned::round1_ns`] gives the
/// console's two), empty for a candidate whose results differed from the
/// interpreter.
pub fn csv(points: &[PointReport], roof: &Roofline) -> String {
    let mut s = format!("{CSV_HEADER}\n");
    for pr in points {
        for u in &pr.result.units {
            let est = roof.estimate_ns(u.flops, u.bytes);
            for (i, c) in u.candidates.iter().enumerate() {
                let _ = writeln!(
                    s,
                    "{},\"{}\",{},{},{:.0},{:.0},{est:.0},{i},{},{},{},{},{},{},{}",
                    pr.graph,
                    pr.point,
                    &u.key[..16],
                    u.kernels.join(" "),
                    u.flops,
                    u.bytes,
                    c.blocks.mc,
                    c.blocks.nc,
                    c.blocks.kc,
                    if c.blocks.threads == 0 { pr.threads } else { c.blocks.threads.min(pr.threads) },
                    c.median_ns.map_or(String::new(), |n| n.to_string()),
                    c.blocks == u.analytic,
                    c.blocks == u.best,
                );
            }
        }
    }
    s
}

/// The widest span of [`svg`]'s axis, in percent over a unit's fastest
/// candidate: a bar further out is cut at the edge (`»`), its label giving
/// the whole number, so that the 1–3% differences that decide between
/// candidates stay tens of pixels apart.
pub const SVG_SPAN_MAX_PERCENT: f64 = 20.0;

/// The spans [`svg`]'s axis may take, in percent, with their tick steps:
/// the first that holds every candidate, else the last
/// ([`SVG_SPAN_MAX_PERCENT`]).
const SPANS: [(f64, f64); 5] = [(1.0, 0.25), (2.0, 0.5), (5.0, 1.0), (10.0, 2.0), (SVG_SPAN_MAX_PERCENT, 5.0)];

/// `ns` as the console prints it: microseconds with one decimal.
fn micros(ns: u64) -> String {
    format!("{:.1} µs", ns as f64 / 1e3)
}

/// An SVG picture of the points: per unit a heading (its kernels, the
/// chosen plan's speed-up over the analytic one and its time, the roofline
/// estimate), then one bar per candidate, labelled as text with its block
/// sizes and round 1's median ([`Tuned::round1_ns`]'s numbers, the CSV's
/// `measured_ns`). The axis is relative: a bar's length is how much slower
/// the candidate ran than its unit's fastest, in percent, from 0 (the
/// fastest) to the smallest of `SPANS` holding them all, at most
/// [`SVG_SPAN_MAX_PERCENT`]. Grey: analytic, green: chosen, blue: other,
/// red cross: results differed from the interpreter.
pub fn svg(points: &[PointReport], roof: &Roofline) -> String {
    /// One candidate's line, a unit's heading, the gap between units.
    const LINE: f64 = 15.0;
    const HEAD: f64 = 20.0;
    const GAP: f64 = 10.0;
    const TOP: f64 = 78.0;
    const LEFT: f64 = 410.0;
    const WIDTH: f64 = 440.0;
    let rows: Vec<(&PointReport, &Tuned)> =
        points.iter().flat_map(|p| p.result.units.iter().map(move |u| (p, u))).collect();
    let heights: Vec<f64> = rows.iter().map(|(_, u)| HEAD + LINE * u.candidates.len() as f64 + GAP).collect();
    let tops: Vec<f64> = heights.iter().scan(TOP, |y, h| Some(std::mem::replace(y, *y + h))).collect();
    let bottom = TOP + heights.iter().sum::<f64>();
    let height = bottom + 40.0;
    // A unit's fastest candidate, and how much slower `ns` is, in percent.
    let fastest = |u: &Tuned| u.candidates.iter().filter_map(|c| c.median_ns).min();
    let slower = |u: &Tuned, ns: u64| fastest(u).map_or(0.0, |f| 100.0 * (ns as f64 / f.max(1) as f64 - 1.0));
    let worst = rows
        .iter()
        .flat_map(|(_, u)| u.candidates.iter().filter_map(|c| c.median_ns.map(|ns| slower(u, ns))))
        .fold(0.0f64, f64::max);
    let (span, step) = SPANS.into_iter().find(|&(span, _)| worst <= span).unwrap_or(SPANS[SPANS.len() - 1]);
    let x = |percent: f64| LEFT + WIDTH * (percent / span).min(1.0);

    let mut s = String::new();
    let _ = writeln!(
        s,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{height}\" font-family=\"sans-serif\" font-size=\"11\">",
        w = LEFT + WIDTH + 110.0
    );
    let _ = writeln!(s, "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>");
    let _ = writeln!(
        s,
        "<text x=\"10\" y=\"20\" font-size=\"14\">tgc tune: how much slower each candidate ran than its unit's fastest (round 1's medians)</text>"
    );
    let _ = writeln!(
        s,
        "<text x=\"10\" y=\"38\">grey: analytic · green: chosen · blue: other candidate · ✗: results differed · roofline: assumed peaks, not measured</text>"
    );
    // The axis and its grid, under the bars: ticks above and below.
    let ay = bottom + 2.0;
    for (y1, y2) in [(TOP - 12.0, TOP - 12.0), (ay, ay)] {
        let _ = writeln!(
            s,
            "<line x1=\"{LEFT}\" x2=\"{:.1}\" y1=\"{y1:.1}\" y2=\"{y2:.1}\" stroke=\"black\"/>",
            LEFT + WIDTH
        );
    }
    let ticks = (span / step).round() as usize;
    for t in 0..=ticks {
        let p = step * t as f64;
        let xp = x(p);
        let _ = writeln!(
            s,
            "<line x1=\"{xp:.1}\" x2=\"{xp:.1}\" y1=\"{:.1}\" y2=\"{ay:.1}\" stroke=\"#ddd\"/>",
            TOP - 12.0
        );
        for ty in [TOP - 16.0, ay + 14.0] {
            let _ = writeln!(s, "<text x=\"{xp:.1}\" y=\"{ty:.1}\" text-anchor=\"middle\">+{p}%</text>");
        }
    }
    let _ = writeln!(
        s,
        "<text x=\"{LEFT}\" y=\"{:.1}\">slower than the unit's fastest, % (0 at the fastest; past +{span}% cut at the edge: »)</text>",
        ay + 30.0
    );
    for (i, (p, u)) in rows.iter().enumerate() {
        let y = tops[i];
        let mut head = format!("{} {} · {} ({})", p.graph, p.point, u.kernels.join(" "), &u.key[..8]);
        let (base, best) = u.round1_ns();
        if let (Some(base), Some(best)) = (base, best) {
            let _ = write!(head, " — chosen: {:.2}× the analytic · {}", base as f64 / best.max(1) as f64, micros(best));
        }
        let est = roof.estimate_ns(u.flops, u.bytes);
        let _ = write!(head, " · roofline {}", micros(est.round() as u64));
        let _ = writeln!(s, "<text x=\"10\" y=\"{:.1}\" font-weight=\"bold\">{}</text>", y + 14.0, xml(&head));
        for (j, c) in u.candidates.iter().enumerate() {
            let by = y + HEAD + LINE * j as f64;
            let text_y = by + LINE - 4.0;
            let role = match (c.blocks == u.analytic, c.blocks == u.best) {
                (true, true) => " (analytic, chosen)",
                (true, false) => " (analytic)",
                (false, true) => " (chosen)",
                (false, false) => "",
            };
            let _ = writeln!(s, "<text x=\"20\" y=\"{text_y:.1}\">{}{role}</text>", c.blocks);
            match c.median_ns {
                Some(ns) => {
                    let percent = slower(u, ns);
                    let width = (x(percent) - LEFT).max(2.0);
                    let _ = writeln!(
                        s,
                        "<text x=\"{:.1}\" y=\"{text_y:.1}\" text-anchor=\"end\">{}</text>",
                        LEFT - 8.0,
                        micros(ns)
                    );
                    let _ = writeln!(
                        s,
                        "<rect x=\"{LEFT}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"{}\"><title>{}: {ns} ns</title></rect>",
                        by + 2.0,
                        width,
                        LINE - 4.0,
                        color(c.blocks, u),
                        c.blocks
                    );
                    let cut = if percent > span { "» " } else { "" };
                    let label =
                        if ns == fastest(u).unwrap_or(ns) { "fastest".to_string() } else { format!("+{percent:.1}%") };
                    let _ = writeln!(s, "<text x=\"{:.1}\" y=\"{text_y:.1}\">{cut}{label}</text>", LEFT + width + 4.0);
                }
                None => {
                    let _ = writeln!(
                        s,
                        "<text x=\"{LEFT}\" y=\"{text_y:.1}\" fill=\"#c00\">✗ results differed from the interpreter</text>"
                    );
                }
            }
        }
    }
    s.push_str("</svg>\n");
    s
}

fn color(b: Blocks, u: &Tuned) -> &'static str {
    if b == u.best {
        "#2a2"
    } else if b == u.analytic {
        "#999"
    } else {
        "#48c"
    }
}

/// `text` with XML's special characters escaped.
fn xml(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// One GPU tuning unit's results for the report: the graph, its point and
/// unit label (`B=8, S=128 (k5)`), and its decisions.
pub struct GpuUnitReport<'a> {
    pub graph: &'a str,
    pub point: &'a str,
    pub tuned: &'a [super::gpu::TunedDecision],
}

/// The CSV header of [`gpu_csv`].
pub const GPU_CSV_HEADER: &str =
    "graph,point,key,decision,flops,bytes,candidate,plan,estimate_ns,limit,measured_ns,failed,analytic,chosen";

/// The analytic model's estimate of candidate `plan` of `d`, in
/// nanoseconds, and its limiting term; `None` when it cannot cost it.
fn gpu_estimate(d: &super::gpu::Decision, plan: &crate::plan::Plan) -> Option<(f64, &'static str)> {
    use crate::plan::cost::Estimator as _;
    let target = crate::plan::Target::by_name(&d.inputs.target).ok()?;
    let e = crate::plan::cost::Analytic.estimate(plan, &d.problem, target).ok()?;
    Some((e.time_s * 1e9, e.limit.as_str()))
}

/// One CSV line per candidate of every decision (`000` §9: FLOPs, bytes,
/// estimate, measured, plan): `plan` is its shape (tile, warp tile,
/// stages, vector width, form), `estimate_ns` the analytic model's for
/// the decision's problem (empty where it cannot cost it), `measured_ns`
/// the unit's median (empty with `failed` saying why).
pub fn gpu_csv(units: &[GpuUnitReport]) -> String {
    let mut s = format!("{GPU_CSV_HEADER}\n");
    for u in units {
        for t in u.tuned {
            let d = &t.decision;
            for (i, (plan, outcome)) in t.outcomes.iter().enumerate() {
                let est = gpu_estimate(d, plan);
                let _ = writeln!(
                    s,
                    "{},\"{}\",{},\"{}\",{},{},{i},\"{}\",{},{},{},\"{}\",{},{}",
                    u.graph,
                    u.point,
                    &d.key()[..16],
                    d.inputs.decision,
                    2 * d.macs(),
                    d.bytes(),
                    crate::plan::plan_shape(plan).join(" "),
                    est.map_or(String::new(), |(ns, _)| format!("{ns:.0}")),
                    est.map_or("", |(_, l)| l),
                    outcome.as_ref().map_or(String::new(), |ns| ns.to_string()),
                    outcome.as_ref().err().map_or(String::new(), |w| w.replace('"', "'")),
                    d.analytic.as_ref() == Some(plan),
                    t.best == Some(i),
                );
            }
        }
    }
    s
}

/// An SVG picture of the GPU report: per decision one panel, every
/// measured candidate a dot at (the analytic estimate, the measured time)
/// on log scales — the dashed diagonal is estimate = measured, so a dot
/// below it ran faster than the model said — the chosen plan green, the
/// analytic one grey, the others blue; how many candidates failed or were
/// not taken is written under the panel.
pub fn gpu_svg(units: &[GpuUnitReport]) -> String {
    const PANEL: f64 = 220.0;
    const PAD: f64 = 48.0;
    const COLS: usize = 3;
    let panels: Vec<(&GpuUnitReport, &super::gpu::TunedDecision)> =
        units.iter().flat_map(|u| u.tuned.iter().map(move |t| (u, t))).collect();
    let rows = panels.len().div_ceil(COLS).max(1);
    let (w, h) = (COLS as f64 * (PANEL + PAD) + PAD, rows as f64 * (PANEL + 2.0 * PAD) + 60.0);
    let mut s = String::new();
    let _ = writeln!(
        s,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w:.0}\" height=\"{h:.0}\" font-family=\"sans-serif\" font-size=\"11\">"
    );
    let _ = writeln!(s, "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>");
    let _ = writeln!(
        s,
        "<text x=\"10\" y=\"20\" font-size=\"14\">tgc tune --target: measured time (up) against the analytic estimate (right), log scales</text>"
    );
    let _ = writeln!(
        s,
        "<text x=\"10\" y=\"38\">green: chosen · grey: the analytic model's choice · blue: other plan · dashed: estimate = measured</text>"
    );
    for (k, (u, t)) in panels.iter().enumerate() {
        let (x0, y0) = (PAD + (k % COLS) as f64 * (PANEL + PAD), 60.0 + (k / COLS) as f64 * (PANEL + 2.0 * PAD));
        let d = &t.decision;
        let dots: Vec<(f64, f64, usize)> = t
            .outcomes
            .iter()
            .enumerate()
            .filter_map(|(i, (plan, o))| Some((gpu_estimate(d, plan)?.0, *o.as_ref().ok()? as f64, i)))
            .filter(|&(e, m, _)| e > 0.0 && m > 0.0)
            .collect();
        let label = format!("{} {} · {}", u.graph, u.point, d.inputs.decision);
        let _ = writeln!(s, "<text x=\"{x0:.1}\" y=\"{:.1}\">{}</text>", y0 - 6.0, xml(&clip(&label, 44)));
        let _ = writeln!(
            s,
            "<rect x=\"{x0:.1}\" y=\"{y0:.1}\" width=\"{PANEL}\" height=\"{PANEL}\" fill=\"none\" stroke=\"#888\"/>"
        );
        let failed = t.outcomes.len() - dots.len();
        let _ = writeln!(
            s,
            "<text x=\"{x0:.1}\" y=\"{:.1}\">{} plotted, {failed} failed, not taken or not costed</text>",
            y0 + PANEL + 14.0,
            dots.len()
        );
        if dots.is_empty() {
            continue;
        }
        // One log range for both axes, so the diagonal is estimate = measured.
        let lo = dots.iter().flat_map(|&(e, m, _)| [e, m]).fold(f64::INFINITY, f64::min).log10().floor();
        let hi = dots.iter().flat_map(|&(e, m, _)| [e, m]).fold(0.0f64, f64::max).log10().ceil().max(lo + 1.0);
        let at = |v: f64| (v.log10() - lo) / (hi - lo) * PANEL;
        let _ = writeln!(
            s,
            "<line x1=\"{x0:.1}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{y0:.1}\" stroke=\"#aaa\" stroke-dasharray=\"4,3\"/>",
            y0 + PANEL,
            x0 + PANEL
        );
        let _ = writeln!(
            s,
            "<text x=\"{x0:.1}\" y=\"{:.1}\">{} ns</text><text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{} ns</text>",
            y0 + PANEL + 28.0,
            si(10f64.powf(lo)),
            x0 + PANEL,
            y0 + PANEL + 28.0,
            si(10f64.powf(hi))
        );
        for &(e, m, i) in &dots {
            let colour = if t.best == Some(i) {
                "#2a2"
            } else if d.analytic.as_ref() == Some(&t.outcomes[i].0) {
                "#999"
            } else {
                "#48c"
            };
            let tip = crate::plan::plan_shape(&t.outcomes[i].0).join(" ");
            let _ = writeln!(
                s,
                "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"3.5\" fill=\"{colour}\"><title>{tip}: estimate {e:.0} ns, measured {m:.0} ns</title></circle>",
                x0 + at(e),
                y0 + PANEL - at(m)
            );
        }
    }
    s.push_str("</svg>\n");
    s
}

/// `text` cut to `n` characters with an ellipsis.
fn clip(text: &str, n: usize) -> String {
    if text.chars().count() <= n {
        return text.to_string();
    }
    let mut t: String = text.chars().take(n - 1).collect();
    t.push('…');
    t
}

/// A power of ten of nanoseconds with a k/M suffix: `10k`, `1M`.
fn si(ns: f64) -> String {
    if ns >= 1e6 {
        format!("{:.0}M", ns / 1e6)
    } else if ns >= 1e3 {
        format!("{:.0}k", ns / 1e3)
    } else {
        format!("{ns:.0}")
    }
}
