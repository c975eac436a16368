//! The benchmark report: the papers' tables as markdown, SVG plots, and the raw JSON.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use super::{Sample, Stat};

/// The machine and tools a report was measured with.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Header {
    /// The command that made the report.
    pub command: String,
    /// When (UTC, as `date -u` prints it).
    pub date: String,
    /// CPU model.
    pub cpu: String,
    /// Online CPUs.
    pub cores: usize,
    /// Kernel release.
    pub kernel: String,
    /// The capture interface.
    pub nic: String,
    /// Tool name and version line.
    pub versions: Vec<(String, String)>,
    /// Peers not installed, skipped.
    pub skipped: Vec<String>,
    /// Packets per cell and repetitions.
    pub packets: u64,
    /// Repetitions per cell.
    pub reps: usize,
}

/// Generator rate per frame size, measured with nothing capturing.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GenMax {
    /// Frame size.
    pub size: u16,
    /// Packets per second.
    pub pps: f64,
}

/// One loss-free search result (paper 000 Figure 3, paper 002 Figure 2).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LossFreeRow {
    /// Balance mode.
    pub balance: String,
    /// Workers.
    pub workers: usize,
    /// Frame size.
    pub size: u16,
    /// Highest rate without loss (packets/s).
    pub rate: f64,
    /// CPU seconds per million packets at that rate.
    pub cpu_per_mpkt: Option<f64>,
    /// Probes spent.
    pub probes: usize,
}

/// One placement experiment (paper 000 Table 3; paper 001 tests 3 and 4).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PlacementRow {
    /// What was placed where.
    pub setup: String,
    /// Its samples.
    pub samples: Vec<Sample>,
}

/// Everything a benchmark run measured.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// Machine and tools.
    pub header: Header,
    /// Generator maximum per size.
    pub gen_max: Vec<GenMax>,
    /// Captured % cells (paper 001 Table 1), every repetition.
    pub table1: Vec<Sample>,
    /// Loss-free rates.
    pub loss_free: Vec<LossFreeRow>,
    /// Placement experiments.
    pub placement: Vec<PlacementRow>,
}

fn fmt_stat(s: &Stat, digits: usize) -> String {
    if s.n > 1 && (s.max - s.min) > 0.0 {
        format!(
            "{:.*} ({:.*}–{:.*})",
            digits, s.mean, digits, s.min, digits, s.max
        )
    } else {
        format!("{:.*}", digits, s.mean)
    }
}

fn key(f: f64) -> u64 {
    (f * 1000.0).round() as u64
}

/// Tools in first-seen order.
fn tools(samples: &[Sample]) -> Vec<String> {
    let mut v: Vec<String> = Vec::new();
    for s in samples {
        if !v.contains(&s.tool) {
            v.push(s.tool.clone());
        }
    }
    v
}

/// Captured % table of one tool: rows are frame sizes, columns offered fractions.
pub fn captured_table(samples: &[Sample], tool: &str) -> String {
    let mine: Vec<&Sample> = samples.iter().filter(|s| s.tool == tool).collect();
    let sizes: BTreeSet<u16> = mine.iter().map(|s| s.size).collect();
    let fracs: BTreeSet<u64> = mine.iter().map(|s| key(s.fraction)).collect();
    let mut out = String::from("| frame size |");
    for f in &fracs {
        let _ = write!(out, " {}% |", f / 10);
    }
    out.push_str("\n|---|");
    for _ in &fracs {
        out.push_str("---|");
    }
    out.push('\n');
    for size in &sizes {
        let _ = write!(out, "| {size} |");
        for f in &fracs {
            let v: Vec<f64> = mine
                .iter()
                .filter(|s| s.size == *size && key(s.fraction) == *f)
                .map(|s| s.captured_pct())
                .collect();
            match Stat::of(&v) {
                Some(st) => {
                    let _ = write!(out, " {} |", fmt_stat(&st, 2));
                }
                None => out.push_str(" - |"),
            }
        }
        out.push('\n');
    }
    out
}

/// Asked vs achieved generator rate for every cell.
pub fn accuracy_table(samples: &[Sample]) -> String {
    let mut out = String::from("| tool | size | fraction | asked pps | achieved pps (mean) | achieved / asked |\n|---|---|---|---|---|---|\n");
    let mut seen: Vec<(String, u16, u64)> = Vec::new();
    for s in samples {
        let k = (s.tool.clone(), s.size, key(s.fraction));
        if seen.contains(&k) {
            continue;
        }
        seen.push(k.clone());
        let v: Vec<f64> = samples
            .iter()
            .filter(|t| (t.tool.clone(), t.size, key(t.fraction)) == k)
            .map(|t| t.achieved_pps)
            .collect();
        let st = Stat::of(&v).unwrap_or(Stat {
            mean: 0.0,
            min: 0.0,
            max: 0.0,
            n: 0,
        });
        let ratio = if s.asked_pps > 0.0 {
            st.mean / s.asked_pps
        } else {
            0.0
        };
        let _ = writeln!(
            out,
            "| {} | {} | {}% | {:.0} | {:.0} | {:.3} |",
            s.tool,
            s.size,
            k.2 / 10,
            s.asked_pps,
            st.mean,
            ratio
        );
    }
    out
}

/// The whole report as markdown.
pub fn markdown(r: &Report) -> String {
    let h = &r.header;
    let mut out = String::from("# corecap capture benchmark\n\n");
    let _ = writeln!(out, "Command: `{}`\n", h.command);
    let _ = writeln!(
        out,
        "Date: {}. Machine: {} × {}, Linux {}. Capture interface: {}.\n",
        h.date, h.cores, h.cpu, h.kernel, h.nic
    );
    let _ = writeln!(out, "{} packets per cell, {} repetition(s); cells show the mean and, in parentheses, the range.\n", h.packets, h.reps);
    out.push_str("| tool | version |\n|---|---|\n");
    for (t, v) in &h.versions {
        let _ = writeln!(out, "| {t} | {v} |");
    }
    if !h.skipped.is_empty() {
        let _ = writeln!(
            out,
            "\nSkipped (not installed; `--install-peers` installs them): {}",
            h.skipped.join(", ")
        );
    }
    out.push_str("\n## Generator maximum (nothing capturing)\n\n| frame size | pps |\n|---|---|\n");
    for g in &r.gen_max {
        let _ = writeln!(out, "| {} | {:.0} |", g.size, g.pps);
    }
    out.push_str("\n## Captured % by frame size and offered rate (paper 001, Table 1)\n\nColumns are fractions of the generator maximum for the frame size.\n");
    for t in tools(&r.table1) {
        let _ = write!(out, "\n### {t}\n\n{}", captured_table(&r.table1, &t));
    }
    if !r.loss_free.is_empty() {
        out.push_str("\n## Loss-free rate by number of workers (paper 000 Fig. 3, paper 002 Fig. 2)\n\n| balance | workers | size | loss-free pps | CPU s / Mpkt | probes |\n|---|---|---|---|---|---|\n");
        for l in &r.loss_free {
            let cpu = l.cpu_per_mpkt.map_or("-".into(), |c| format!("{c:.3}"));
            let _ = writeln!(
                out,
                "| {} | {} | {} | {:.0} | {} | {} |",
                l.balance, l.workers, l.size, l.rate, cpu, l.probes
            );
        }
    }
    if !r.placement.is_empty() {
        out.push_str("\n## Placement (paper 000 Table 3; paper 001 tests 3 and 4)\n\n| setup | captured % | CPU s / Mpkt |\n|---|---|---|\n");
        for p in &r.placement {
            let pct: Vec<f64> = p.samples.iter().map(|s| s.captured_pct()).collect();
            let cpu: Vec<f64> = p.samples.iter().filter_map(|s| s.cpu_per_mpkt()).collect();
            let pct = Stat::of(&pct).map_or("-".into(), |s| fmt_stat(&s, 2));
            let cpu = Stat::of(&cpu).map_or("-".into(), |s| fmt_stat(&s, 3));
            let _ = writeln!(out, "| {} | {pct} | {cpu} |", p.setup);
        }
    }
    let _ = write!(
        out,
        "\n## Generator accuracy\n\n{}",
        accuracy_table(&r.table1)
    );
    out
}

/// An SVG plot of captured % against offered fraction, one line per frame size.
pub fn svg_captured(samples: &[Sample], tool: &str) -> String {
    let (w, h, m) = (480.0, 300.0, 40.0);
    let mine: Vec<&Sample> = samples.iter().filter(|s| s.tool == tool).collect();
    let sizes: BTreeSet<u16> = mine.iter().map(|s| s.size).collect();
    let colors = [
        "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
    ];
    let mut out = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" font-family=\"sans-serif\" font-size=\"11\">\n\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n<text x=\"{m}\" y=\"16\">{tool}: captured % by offered rate</text>\n\
         <line x1=\"{m}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"black\"/>\n<line x1=\"{m}\" y1=\"{m}\" x2=\"{m}\" y2=\"{}\" stroke=\"black\"/>\n",
        h - m,
        w - m,
        h - m,
        h - m
    );
    let x = |f: f64| m + f * (w - 2.0 * m);
    let y = |p: f64| (h - m) - p / 100.0 * (h - 2.0 * m);
    for (i, size) in sizes.iter().enumerate() {
        let fracs: BTreeSet<u64> = mine
            .iter()
            .filter(|s| s.size == *size)
            .map(|s| key(s.fraction))
            .collect();
        let pts: Vec<String> = fracs
            .iter()
            .filter_map(|f| {
                let v: Vec<f64> = mine
                    .iter()
                    .filter(|s| s.size == *size && key(s.fraction) == *f)
                    .map(|s| s.captured_pct())
                    .collect();
                Stat::of(&v).map(|st| format!("{:.1},{:.1}", x(*f as f64 / 1000.0), y(st.mean)))
            })
            .collect();
        let c = colors[i % colors.len()];
        let _ = writeln!(
            out,
            "<polyline fill=\"none\" stroke=\"{c}\" stroke-width=\"2\" points=\"{}\"/>",
            pts.join(" ")
        );
        let _ = writeln!(
            out,
            "<text x=\"{}\" y=\"{}\" fill=\"{c}\">{size} B</text>",
            w - m + 2.0,
            m + 12.0 * i as f64
        );
    }
    for p in [0.0, 50.0, 100.0] {
        let _ = writeln!(out, "<text x=\"4\" y=\"{:.1}\">{p:.0}%</text>", y(p) + 4.0);
    }
    out.push_str("</svg>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(tool: &str, size: u16, fraction: f64, offered: u64, captured: u64) -> Sample {
        Sample {
            tool: tool.into(),
            size,
            fraction,
            asked_pps: 1000.0 * fraction,
            achieved_pps: 990.0 * fraction,
            offered,
            captured,
            drops: offered - captured,
            cpu_s: 0.5,
        }
    }

    #[test]
    fn test_captured_table_on_fixed_inputs() {
        let v = vec![
            s("tcpdump", 64, 0.5, 1000, 1000),
            s("tcpdump", 64, 0.5, 1000, 900),
            s("tcpdump", 64, 1.0, 1000, 500),
            s("tcpdump", 1518, 0.5, 1000, 1000),
            s("corecap", 64, 0.5, 1000, 1000),
        ];
        let t = captured_table(&v, "tcpdump");
        let expected = "| frame size | 50% | 100% |\n|---|---|---|\n| 64 | 95.00 (90.00–100.00) | 50.00 |\n| 1518 | 100.00 | - |\n";
        assert_eq!(t, expected);
        let md = markdown(&Report {
            table1: v.clone(),
            ..Default::default()
        });
        assert!(md.contains("### tcpdump") && md.contains("### corecap"));
        assert!(
            md.contains("| tcpdump | 64 | 50% | 500 | 495 | 0.990 |"),
            "{md}"
        );
        let svg = svg_captured(&v, "tcpdump");
        assert!(
            svg.starts_with("<svg") && svg.contains("1518 B") && svg.trim_end().ends_with("</svg>")
        );
    }

    #[test]
    fn test_report_round_trips_through_json() {
        let r = Report {
            header: Header {
                command: "corecap bench --quick".into(),
                reps: 1,
                ..Default::default()
            },
            gen_max: vec![GenMax { size: 64, pps: 1e6 }],
            table1: vec![s("corecap", 64, 1.0, 10, 10)],
            loss_free: vec![LossFreeRow {
                balance: "flow".into(),
                workers: 2,
                size: 64,
                rate: 5e5,
                cpu_per_mpkt: Some(0.1),
                probes: 7,
            }],
            placement: vec![PlacementRow {
                setup: "same core".into(),
                samples: vec![s("corecap", 64, 1.0, 10, 9)],
            }],
        };
        let j = serde_json::to_string(&r).expect("json");
        let back: Report = serde_json::from_str(&j).expect("parse");
        assert_eq!(back, r);
        let md = markdown(&r);
        assert!(
            md.contains("| flow | 2 | 64 | 500000 | 0.100 | 7 |"),
            "{md}"
        );
        assert!(md.contains("| same core | 90.00 | 55555.556 |"), "{md}");
    }
}
