//! Figures derived from a run: durability, repair bandwidth, gas per day against a
//! chain's capacity, cheater delays, and the closed-form estimate for the scenario.

use crate::closed_form;
use crate::costs::MAINNET_GAS_PER_DAY;
use crate::engine::Outcome;
use crate::scenario::{Scenario, YEAR};

/// What docs/SIMULATION.md tabulates for one run.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    /// Files lost per million files per year (simulated).
    pub lost_per_million_year: f64,
    /// The closed-form estimate of the same (independent failures + whole domains).
    pub estimate_per_million_year: f64,
    /// Shards repaired per file-year.
    pub repairs_per_file_year: f64,
    /// Repair traffic per TB of file data stored, TB per year.
    pub repair_tb_per_tb_year: f64,
    /// Chain gas per day: per-deal epoch proofs (today's path).
    pub proof_gas_per_day: f64,
    /// Chain gas per day: one epoch commitment per provider (docs/COMMITMENTS.md).
    pub commitment_gas_per_day: f64,
    /// Chain gas per day of repairs, faults, slashes, renewals and claims.
    pub event_gas_per_day: f64,
    /// Cheaters' shards: median and 90th percentile hours from the data drop to the
    /// slashing, and to the repaired shard (0 when none).
    pub cheat_hours: [f64; 4],
    /// Shards of cheaters found and repaired.
    pub cheat_shards: usize,
    /// Bytes stored on disks per file byte.
    pub storage_overhead: f64,
}

fn quantile(v: &mut [f32], q: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f32::total_cmp);
    let i = ((v.len() - 1) as f64 * q).round() as usize;
    f64::from(v[i])
}

/// The closed-form loss rate per file-year of a scenario: shards fail permanently at
/// the disk, exit and cheating rates, each repaired after its mean delay (decision and
/// repair time), independently; plus whole domains losing their data.
pub fn estimate_per_file_year(sc: &Scenario) -> f64 {
    let ep = sc.epoch_seconds as f64 / YEAR;
    let watch = sc.watch_interval as f64 / YEAR;
    let repair = sc.costs.repair_seconds(sc.file_bytes) / YEAR;
    let disk = -(1.0 - sc.disk_afr.min(0.999_999)).ln();
    let cheat = sc.cheater_fraction / sc.cheat_after_years.max(1e-9);
    let d_disk = ep / 2.0 + f64::from(sc.rules.max_faults) * ep + watch / 2.0 + repair;
    let d_exit = watch / 2.0 + repair;
    let d_cheat = ep / sc.detection_per_epoch().max(1e-12) - ep / 2.0 + watch / 2.0 + repair;
    let rate = disk + sc.exit_rate + cheat;
    let delay = (disk * d_disk + sc.exit_rate * d_exit + cheat * d_cheat) / rate.max(1e-300);
    closed_form::independent_loss_rate(sc.k, sc.n, rate, delay)
        + closed_form::domain_loss_rate(sc.k, sc.n, &closed_form::domain_shares(sc.regions), sc.region_loss_rate)
}

impl Summary {
    /// The figures of `out`, a run of `sc`.
    pub fn new(sc: &Scenario, out: &Outcome) -> Self {
        let days = sc.years * 365.25;
        let per_day = 86_400.0 / sc.epoch_seconds.max(1) as f64;
        let data_tb = f64::from(sc.files) * sc.file_bytes as f64 / 1e12;
        let mut slash: Vec<f32> = out.cheat_delays_hours.iter().map(|x| x.0).collect();
        let mut done: Vec<f32> = out.cheat_delays_hours.iter().map(|x| x.1).collect();
        Summary {
            lost_per_million_year: out.files_lost as f64 / out.file_years.max(1e-300) * 1e6,
            estimate_per_million_year: estimate_per_file_year(sc) * 1e6,
            repairs_per_file_year: out.repairs.iter().sum::<u64>() as f64 / out.file_years.max(1e-300),
            repair_tb_per_tb_year: out.repair_bytes / 1e12 / data_tb.max(1e-300) / sc.years.max(1e-300),
            proof_gas_per_day: out.mean_deals * sc.costs.epoch_proof_gas as f64 * per_day,
            commitment_gas_per_day: out.mean_providers * sc.costs.epoch_commitment_gas as f64 * per_day,
            event_gas_per_day: out.event_gas / days.max(1e-300),
            cheat_hours: [quantile(&mut slash, 0.5), quantile(&mut slash, 0.9), quantile(&mut done, 0.5), quantile(&mut done, 0.9)],
            cheat_shards: out.cheat_delays_hours.len(),
            storage_overhead: sc.costs.storage_overhead(sc.k, sc.n),
        }
    }

    /// A human-readable block (one figure a line).
    pub fn render(&self, sc: &Scenario, out: &Outcome) -> String {
        let cap = MAINNET_GAS_PER_DAY;
        let mut s = String::new();
        let mut line = |t: String| {
            s.push_str(&t);
            s.push('\n');
        };
        line(format!(
            "scenario: {}-of-{} files of {} MiB, repair rules max_faults={} unreachable_epochs={}, epoch {} s, watch every {} s, seed {}",
            sc.k,
            sc.n,
            sc.file_bytes >> 20,
            sc.rules.max_faults,
            sc.rules.unreachable_epochs,
            sc.epoch_seconds,
            sc.watch_interval,
            sc.seed
        ));
        line(format!(
            "files lost: {} in {:.0} file-years ({:.4} per million per year; closed-form estimate {:.3e})",
            out.files_lost, out.file_years, self.lost_per_million_year, self.estimate_per_million_year
        ));
        line(format!(
            "repairs: {} (deal ended {}, faulted {}, unreachable {}; {} of lost data), {:.3} per file-year; placement retries {}; files not placed {}",
            out.repairs.iter().sum::<u64>(),
            out.repairs[0],
            out.repairs[1],
            out.repairs[2],
            out.repairs_of_lost_data,
            self.repairs_per_file_year,
            out.placement_retries,
            out.unplaced_files
        ));
        line(format!("repair traffic: {:.3} TB per TB of file data per year", self.repair_tb_per_tb_year));
        line(format!("providers: mean {:.0} live, {} joined; mean live deals {:.0}", out.mean_providers, out.joins, out.mean_deals));
        line(format!(
            "gas per day: per-deal epoch proofs {:.3e} ({:.1}x mainnet's {:.2e}); epoch commitments {:.3e} ({:.4}x); repairs, faults, renewals {:.3e} ({:.4}x)",
            self.proof_gas_per_day,
            self.proof_gas_per_day / cap,
            cap,
            self.commitment_gas_per_day,
            self.commitment_gas_per_day / cap,
            self.event_gas_per_day,
            self.event_gas_per_day / cap
        ));
        line(format!(
            "cheaters: {} shards found; hours from data drop to slashing median {:.1} p90 {:.1}, to repaired shard median {:.1} p90 {:.1}",
            self.cheat_shards, self.cheat_hours[0], self.cheat_hours[1], self.cheat_hours[2], self.cheat_hours[3]
        ));
        line(format!(
            "storage overhead: {:.2} disk bytes per file byte ({}/{} x {:.2})",
            self.storage_overhead, sc.n, sc.k, sc.costs.disk_bytes_per_deal_byte
        ));
        s
    }
}
