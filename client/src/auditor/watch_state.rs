//! What `watch` ([`super::watch`]) and its commitment checks ([`super::watch_commit`])
//! share: the settings ([`WatchArgs`]), the progress kept across restarts
//! ([`WatchState`], a JSON file written atomically) and where actions are reported
//! ([`WatchLog`]). Its own module so that the two import it, not each other.

use crate::disperse::repair::{RepairOptions, RepairReport};
use crate::progress::Notes;
use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// What `watch` remembers about one deal.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct DealProgress {
    /// Epochs audited to the end (recorded, or disputed).
    pub audited: BTreeSet<u64>,
    /// Epochs below this were checked for markMissed (settled by someone).
    pub settled_below: u64,
    /// Failed audits of an epoch where the node returned nothing wrong, only missing
    /// samples: epoch → attempts so far.
    pub missing_tries: BTreeMap<u64, u32>,
    /// Disputes this auditor opened: id → done (slashed, answered).
    pub disputes: BTreeMap<u64, bool>,
    /// Epochs whose committed entry was checked (verified, or challenged).
    #[serde(default)]
    pub commit_checked: BTreeSet<u64>,
    /// Committed entries the node did not serve: epoch → attempts so far.
    #[serde(default)]
    pub commit_missing: BTreeMap<u64, u32>,
    /// Challenges of committed entries this watcher opened: id → done.
    #[serde(default)]
    pub challenges: BTreeMap<u64, bool>,
}

/// The state file of `watch`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct WatchState {
    /// The market this state belongs to (a state file is refused for another market).
    pub market: String,
    /// Per deal.
    pub deals: BTreeMap<u64, DealProgress>,
}

impl WatchState {
    /// Loads `path`, or a fresh state if it does not exist. Errors: unreadable or
    /// malformed file, or a file for another market.
    pub fn load(path: &Path, market: &str) -> Result<WatchState> {
        match std::fs::read(path) {
            Ok(b) => {
                let s: WatchState = serde_json::from_slice(&b).with_context(|| format!("{} is not a watch state file", path.display()))?;
                anyhow::ensure!(s.market.eq_ignore_ascii_case(market), "{} belongs to market {}, not {market}", path.display(), s.market);
                Ok(s)
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(WatchState { market: market.to_string(), deals: BTreeMap::new() }),
            Err(e) => Err(e).with_context(|| format!("cannot read {}", path.display())),
        }
    }

    /// Writes the state atomically: a temporary file next to `path`, fsync, rename.
    pub fn save(&self, path: &Path) -> Result<()> {
        use std::io::Write;
        let tmp = path.with_extension("tmp");
        let mut f = std::fs::File::create(&tmp).with_context(|| format!("cannot write {}", tmp.display()))?;
        f.write_all(&serde_json::to_vec_pretty(self)?)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path).with_context(|| format!("cannot replace {}", path.display()))?;
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            if let Ok(d) = std::fs::File::open(dir) {
                let _ = d.sync_all();
            }
        }
        Ok(())
    }
}

/// `watch` settings.
#[derive(Debug, Clone)]
pub struct WatchArgs {
    /// Deals to watch (empty with `all`: every deal).
    pub deals: Vec<u64>,
    /// Every deal on the market.
    pub all: bool,
    /// The state file.
    pub state: PathBuf,
    /// Time between passes.
    pub interval: Duration,
    /// Audits with only missing samples before a dispute is opened anyway.
    pub retries: u32,
    /// One pass, then exit.
    pub once: bool,
    /// Dispersed files (their directories) to repair on each pass (issue 12).
    pub repair: Vec<PathBuf>,
    /// How `repair` judges and replaces shards.
    pub repair_options: RepairOptions,
    /// Check only the providers' epoch commitments (docs/COMMITMENTS.md §7), not a
    /// public audit recorded on chain per deal per epoch: what scales to thousands of
    /// deals (an audit record costs ≈ 130k gas each).
    pub commitments_only: bool,
}

/// Where `watch` reports what it does: one call per action, with a line for people and
/// the same facts as JSON (the CLI prints one or the other and feeds its metrics);
/// notes (a repair's) through [`Notes`].
pub trait WatchLog: Notes {
    /// One action about `deal` (0: about the account, e.g. a withdrawal; the JSON line
    /// then has no `deal` field).
    fn log(&self, action: &str, deal: u64, human: String, extra: serde_json::Value);
    /// A repair pass over the dispersed file in `dir` that repaired shards.
    fn repaired(&self, dir: &Path, report: &RepairReport);
}
