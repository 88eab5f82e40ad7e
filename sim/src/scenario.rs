//! A simulated network's parameters: its size, the dispersal and repair settings the
//! owners choose, and the failure model with its public sources.

use crate::costs::Costs;
use dpor_disperse::policy::RepairRules;

/// Seconds in a (365.25-day) year.
pub const YEAR: f64 = 365.25 * 86_400.0;

/// Everything a run depends on (with the seed, a run is reproducible).
#[derive(Debug, Clone, PartialEq)]
pub struct Scenario {
    /// The ChaCha8 seed of the run.
    pub seed: u64,
    /// Providers at the start (joins replace exits, so it stays about this).
    pub providers: u32,
    /// Dispersed files, all placed at the start.
    pub files: u32,
    /// Simulated years.
    pub years: f64,
    /// k, data shards (any k give the file back).
    pub k: u16,
    /// n, shards (one provider each).
    pub n: u16,
    /// L, bytes of every file.
    pub file_bytes: u64,
    /// β, bytes per block (the deploy default 4 KiB).
    pub block_bytes: u64,
    /// The owners' repair thresholds (`dpor watch --repair --max-faults
    /// --unreachable-epochs`).
    pub rules: RepairRules,
    /// Seconds between an owner's `dpor watch` passes (the CLI's `--interval`, default 30).
    pub watch_interval: u64,
    /// Epoch length, seconds (the deployment default 86 400: docs/OPERATIONS.md).
    pub epoch_seconds: u64,
    /// A deal's term in epochs (`--epochs`, default 100): the owner renews it then.
    pub deal_epochs: u64,
    /// Providers the owner's registry view offers `pick_providers` per placement, as
    /// a multiple of the shards needed plus a constant: `view_factor·needed + 8`.
    pub view_factor: usize,
    /// Annualized disk failure rate: a provider loses all its data (Backblaze's drive
    /// stats put the annualized failure rate at ≈ 1.4 % over 2013–2024).
    pub disk_afr: f64,
    /// Provider exits per provider-year: it leaves the market, its deals end (an
    /// assumption: storage networks report churn of the order of 10 % a year).
    pub exit_rate: f64,
    /// Transient outages per provider-year (reboots, network loss; an assumption).
    pub outage_rate: f64,
    /// Mean length of a provider's outage, hours (exponential; an assumption).
    pub outage_mean_hours: f64,
    /// Failure domains (hosting providers, data centres, regions); a provider's domain
    /// is drawn with weight ∝ 1/√rank (a few large hosts, a long tail).
    pub regions: u16,
    /// Whole-domain outages per domain-year (all its providers down at once).
    pub region_outage_rate: f64,
    /// Mean length of a domain outage, hours (exponential).
    pub region_outage_mean_hours: f64,
    /// Whole-domain data losses per domain-year (a data-centre fire: every provider in
    /// it loses its disks at once; an assumption, varied in docs/SIMULATION.md).
    pub region_loss_rate: f64,
    /// Fraction of providers (initial and joining) that cheat.
    pub cheater_fraction: f64,
    /// Mean years before a cheater drops data (exponential from its start).
    pub cheat_after_years: f64,
    /// Fraction of each shard a cheater drops (and of each shard it takes later).
    pub cheat_drop: f64,
    /// K, coded blocks sampled per deal per epoch proof: a deal missing a fraction f
    /// fails an epoch's proof with probability 1 − (1 − f)^K (docs/SCHEME.md).
    pub proof_samples: u32,
    /// Provider capacity as a multiple of its even share of the shards.
    pub capacity_factor: f64,
    /// The measured costs.
    pub costs: Costs,
}

impl Scenario {
    /// The full-size default: 10 000 providers, 1 000 000 files of 1 GiB for 10 years,
    /// 12-of-24 (the doc's recommendation), repair after one missed epoch or three
    /// epochs unreachable.
    pub fn full() -> Self {
        Scenario {
            seed: 1,
            providers: 10_000,
            files: 1_000_000,
            years: 10.0,
            k: 12,
            n: 24,
            file_bytes: 1 << 30,
            block_bytes: 4096,
            rules: RepairRules { max_faults: 0, unreachable_epochs: 3 },
            watch_interval: 30,
            epoch_seconds: 86_400,
            deal_epochs: 100,
            view_factor: 2,
            disk_afr: 0.014,
            exit_rate: 0.10,
            outage_rate: 2.0,
            outage_mean_hours: 6.0,
            regions: 100,
            region_outage_rate: 1.0,
            region_outage_mean_hours: 4.0,
            region_loss_rate: 0.002,
            cheater_fraction: 0.01,
            cheat_after_years: 1.0,
            cheat_drop: 0.5,
            proof_samples: 1,
            capacity_factor: 2.0,
            costs: Costs::MEASURED,
        }
    }

    /// A shard's size in blocks: ⌈⌈L/β⌉/k⌉ (docs/PERFORMANCE.md, dispersal).
    pub fn shard_blocks(&self) -> u64 {
        self.file_bytes.div_ceil(self.block_bytes).div_ceil(u64::from(self.k))
    }

    /// Probability that one epoch's proof of a cheater's deal fails: 1 − (1 − f)^K.
    pub fn detection_per_epoch(&self) -> f64 {
        1.0 - (1.0 - self.cheat_drop).powi(self.proof_samples as i32)
    }
}
