//! The capture benchmark of papers 000, 001 and 002, as data and logic: samples and their
//! statistics, the loss-free rate search, peer tools and their output, and the report
//! (markdown tables, SVG plots, raw JSON). The runner that drives the lab, the generator
//! and the tools lives in the CLI (`corecap bench`).

pub mod bisect;
pub mod disk;
pub mod peer;
pub mod report;

use serde::{Deserialize, Serialize};

/// One measured cell: a tool capturing `offered` packets sent at a rate.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// Tool name (`corecap`, `corecap-write`, `tcpdump`, ...).
    pub tool: String,
    /// Frame size, FCS included.
    pub size: u16,
    /// Offered rate as a fraction of the generator's maximum.
    pub fraction: f64,
    /// Rate the generator was asked for (packets/s).
    pub asked_pps: f64,
    /// Rate the generator achieved.
    pub achieved_pps: f64,
    /// Packets the capture interface received.
    pub offered: u64,
    /// Packets the tool captured.
    pub captured: u64,
    /// Drops the tool reported.
    pub drops: u64,
    /// CPU seconds of the capturing process.
    pub cpu_s: f64,
}

impl Sample {
    /// Captured share of the offered packets, in percent.
    pub fn captured_pct(&self) -> f64 {
        if self.offered == 0 {
            return 100.0;
        }
        100.0 * self.captured.min(self.offered) as f64 / self.offered as f64
    }

    /// CPU seconds per million captured packets.
    pub fn cpu_per_mpkt(&self) -> Option<f64> {
        (self.captured > 0).then(|| self.cpu_s / (self.captured as f64 / 1e6))
    }
}

/// Mean and spread of repeated measurements.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Stat {
    /// Arithmetic mean.
    pub mean: f64,
    /// Smallest value.
    pub min: f64,
    /// Largest value.
    pub max: f64,
    /// Number of values.
    pub n: usize,
}

impl Stat {
    /// Statistics of `v`; None when empty.
    pub fn of(v: &[f64]) -> Option<Stat> {
        if v.is_empty() {
            return None;
        }
        let mean = v.iter().sum::<f64>() / v.len() as f64;
        let min = v.iter().copied().fold(f64::INFINITY, f64::min);
        let max = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        Some(Stat {
            mean,
            min,
            max,
            n: v.len(),
        })
    }
}
