//! `dpor-sim`: runs one scenario (default: the full-size network of docs/SIMULATION.md)
//! and ends with the line
//! `simulation providers=P files=F years=Y files_lost_per_million_year=X seconds=S`;
//! `--sweep DIR` runs the doc's smaller sweeps instead, printing Markdown tables and
//! writing the SVG plots into DIR.

use clap::Parser;
use dpor_sim::report::Summary;
use dpor_sim::{simulate, Scenario};
use std::path::PathBuf;
use std::time::Instant;

mod sweep;

/// Simulate a dpor network (issue 25): providers, dispersed files, failures, repairs.
#[derive(Debug, Parser)]
struct Args {
    /// Providers at the start.
    #[arg(long)]
    providers: Option<u32>,
    /// Dispersed files.
    #[arg(long)]
    files: Option<u32>,
    /// Simulated years.
    #[arg(long)]
    years: Option<f64>,
    /// k, data shards.
    #[arg(long)]
    k: Option<u16>,
    /// n, shards.
    #[arg(long)]
    n: Option<u16>,
    /// Faults a deal may count before its shard is repaired.
    #[arg(long)]
    max_faults: Option<u16>,
    /// Epochs a node may stay unreachable before its shard is repaired.
    #[arg(long)]
    unreachable_epochs: Option<u64>,
    /// Whole-domain data losses per domain-year.
    #[arg(long)]
    region_loss_rate: Option<f64>,
    /// The run's seed.
    #[arg(long)]
    seed: Option<u64>,
    /// Run the doc's sweeps instead: tables on stdout, SVG plots into this directory.
    #[arg(long)]
    sweep: Option<PathBuf>,
}

fn main() -> anyhow::Result<()> {
    let a = Args::parse();
    if let Some(dir) = a.sweep {
        return sweep::run(&dir);
    }
    let mut sc = Scenario::full();
    sc.providers = a.providers.unwrap_or(sc.providers);
    sc.files = a.files.unwrap_or(sc.files);
    sc.years = a.years.unwrap_or(sc.years);
    sc.k = a.k.unwrap_or(sc.k);
    sc.n = a.n.unwrap_or(sc.n);
    sc.rules.max_faults = a.max_faults.unwrap_or(sc.rules.max_faults);
    sc.rules.unreachable_epochs = a.unreachable_epochs.unwrap_or(sc.rules.unreachable_epochs);
    sc.region_loss_rate = a.region_loss_rate.unwrap_or(sc.region_loss_rate);
    sc.seed = a.seed.unwrap_or(sc.seed);
    anyhow::ensure!(sc.k >= 1 && sc.k <= sc.n && sc.n <= 255, "need 1 <= k <= n <= 255");
    anyhow::ensure!(sc.n as u32 <= sc.providers, "need at least n providers");
    let started = Instant::now();
    let out = simulate(&sc);
    let secs = started.elapsed().as_secs_f64();
    let s = Summary::new(&sc, &out);
    print!("{}", s.render(&sc, &out));
    println!(
        "simulation providers={} files={} years={} files_lost_per_million_year={:.4} seconds={:.1}",
        sc.providers, sc.files, sc.years, s.lost_per_million_year, secs
    );
    Ok(())
}
