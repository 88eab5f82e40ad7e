//! What the dashboard's JSON API answers: the node's view of its deals, money, disputes
//! and space, as the [`super::collect::Collector`] last read it from the chain and the
//! store. Every type serializes to the JSON documented in docs/OPERATIONS.md
//! ("Web dashboard"). Token amounts are decimal strings of base units (wei of the
//! ERC-20; a u128 does not fit a JSON number); times are Unix seconds.

use serde::Serialize;
use std::collections::BTreeMap;

/// How one epoch of a deal stands, as the market says (`epochStatus`) and the clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum EpochState {
    /// Proven: the provider was paid.
    Proven,
    /// Missed: the owner was refunded (and the provider slashed if a digest existed).
    Missed,
    /// A challenge of the provider's commitment entry is open.
    Challenged,
    /// Its window has started and it is not settled yet.
    Pending,
    /// Its window has not started.
    Future,
}

/// One digest the deal's owner and provider co-signed and posted (`DigestPosted`).
#[derive(Debug, Clone, Serialize)]
pub struct DigestRow {
    /// Digest version (1, 2, …).
    pub version: u64,
    /// Write count t at that version.
    pub write_count: u64,
    /// C-rebuilds at that version.
    pub rebuild_count: u64,
    /// N at that version (a resize changes it).
    pub num_blocks: u64,
    /// Its EIP-712 hash as the contract stored it (`DigestPosted`), 0x-hex.
    pub hash: String,
    /// Block it was posted in.
    pub block: u64,
    /// Root of U, 0x-hex (with the fields above and `level_roots`: the whole digest,
    /// which the page hashes again with `@dpor/client`'s `digestHash`).
    pub root_u: String,
    /// Root of C, 0x-hex.
    pub root_c: String,
    /// Roots of the filled levels of H, ascending, 0x-hex.
    pub level_roots: Vec<String>,
    /// The owner's signature it was posted with, 0x-hex (from the posting transaction's
    /// calldata); `None` if it could not be read there (a call through another contract).
    pub owner_sig: Option<String>,
    /// For a digest posted by `resizeDeal`: the new price per epoch and collateral (base
    /// units, decimal strings) that the owner's signature covers too (it signed the
    /// resize's EIP-712 hash, not the digest's).
    pub resize: Option<ResizeTerms>,
}

/// The terms of a resize, besides its digest (Solidity `struct Resize`).
#[derive(Debug, Clone, Serialize)]
pub struct ResizeTerms {
    /// New price per epoch, base units.
    pub price_per_epoch: String,
    /// New collateral, base units.
    pub collateral: String,
}

/// One audit recorded on chain for the deal (`AuditRecorded`).
#[derive(Debug, Clone, Serialize)]
pub struct AuditRow {
    /// Audit id.
    pub id: u64,
    /// Deal epoch audited.
    pub epoch: u64,
    /// Digest version checked.
    pub version: u64,
    /// Every sample verified.
    pub passed: bool,
    /// Who recorded it, 0x-hex.
    pub auditor: String,
    /// Block it was recorded in.
    pub block: u64,
}

/// One dispute opened on the deal and its state now.
#[derive(Debug, Clone, Serialize)]
pub struct DisputeRow {
    /// Dispute id.
    pub id: u64,
    /// Who opened it, 0x-hex.
    pub challenger: String,
    /// Digest version disputed.
    pub version: u64,
    /// `open`, `answered` or `slashed` (`unknown` before its state was read).
    pub state: String,
    /// Answer deadline, a chain timestamp.
    pub deadline: u64,
    /// Block it was opened in.
    pub block: u64,
}

/// Counts of a deal's epochs by state.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct EpochCounts {
    /// Proven.
    pub proven: u64,
    /// Missed.
    pub missed: u64,
    /// Challenged (commitment mode).
    pub challenged: u64,
    /// Started, not settled.
    pub pending: u64,
    /// Not started.
    pub future: u64,
}

impl EpochCounts {
    /// Counts `cells`.
    pub fn of(cells: &[EpochState]) -> EpochCounts {
        let mut c = EpochCounts::default();
        for s in cells {
            match s {
                EpochState::Proven => c.proven += 1,
                EpochState::Missed => c.missed += 1,
                EpochState::Challenged => c.challenged += 1,
                EpochState::Pending => c.pending += 1,
                EpochState::Future => c.future += 1,
            }
        }
        c
    }

    /// Adds `o` to these counts.
    pub fn add(&mut self, o: &EpochCounts) {
        self.proven += o.proven;
        self.missed += o.missed;
        self.challenged += o.challenged;
        self.pending += o.pending;
        self.future += o.future;
    }
}

/// One deal of this provider: its terms, state and epochs (the list view), and its
/// history (the detail view; empty in the list).
#[derive(Debug, Clone, Serialize)]
pub struct DealRow {
    /// Deal id.
    pub id: u64,
    /// The owner, 0x-hex.
    pub owner: String,
    /// `open`, `active`, `completed`, `terminated`, `cancelled` (or `none`).
    pub state: String,
    /// N, data blocks.
    pub num_blocks: u64,
    /// β, bytes per block.
    pub block_size: u32,
    /// Epochs of the term.
    pub num_epochs: u32,
    /// Payment per proven epoch, base units.
    pub price_per_epoch: String,
    /// Latest posted digest version (0 = none).
    pub digest_version: u64,
    /// Write count t of the latest digest.
    pub write_count: u64,
    /// Faults so far.
    pub failures: u16,
    /// Disputes open now.
    pub open_disputes: u16,
    /// Paid to the provider for this deal (epochs, claims, bonds), base units.
    pub earned: String,
    /// Taken from the provider on this deal, base units.
    pub slashed: String,
    /// Start timestamp of epoch 0 (0 while not accepted).
    pub epoch0_start: u64,
    /// Seconds per epoch.
    pub epoch_seconds: u64,
    /// Every epoch of the term, in order.
    pub epochs: Vec<EpochState>,
    /// `epochs` counted.
    pub epoch_counts: EpochCounts,
    /// Digests posted, oldest first (detail view only).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub digests: Vec<DigestRow>,
    /// Audits recorded, oldest first (detail view only).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub audits: Vec<AuditRow>,
    /// Disputes opened, oldest first (detail view only).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub disputes: Vec<DisputeRow>,
}

impl DealRow {
    /// The row without its history (for the deal list).
    pub fn brief(&self) -> DealRow {
        DealRow { digests: Vec::new(), audits: Vec::new(), disputes: Vec::new(), ..self.clone() }
    }
}

/// The space the node's store takes and has left.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Space {
    /// Data blocks held, all deals.
    pub stored_blocks: u64,
    /// Data bytes held (N·β summed).
    pub stored_bytes: u64,
    /// Bytes of the store's files on disk (coded runs, metadata).
    pub disk_used_bytes: u64,
    /// Bytes still available to the store (quota or file system).
    pub free_bytes: u64,
}

/// The provider's money, base units, as decimal strings.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Tokens {
    /// Paid to it by the market for its deals (epochs, claims, upload locks, bonds).
    pub earned: String,
    /// Taken from it (missed epochs, lost disputes and challenges, faults at close).
    pub slashed: String,
    /// Owed now (not withdrawn yet).
    pub owed: String,
}

/// Disputes on the provider's deals by state.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct DisputeCounts {
    /// Waiting for an answer.
    pub open: u64,
    /// Answered in time.
    pub answered: u64,
    /// Lost.
    pub slashed: u64,
}

/// The overview (`GET /api/summary`).
#[derive(Debug, Clone, Default, Serialize)]
pub struct Summary {
    /// The provider account, 0x-hex.
    pub provider: String,
    /// The market contract, 0x-hex.
    pub market: String,
    /// Chain id.
    pub chain_id: u64,
    /// The block the last refresh read.
    pub block: u64,
    /// That block's timestamp.
    pub chain_time: u64,
    /// Wall-clock time of the last successful refresh (0 before the first).
    pub updated_at: u64,
    /// The last refresh's error, if it failed (the data is then the previous one's).
    pub error: Option<String>,
    /// Deals by state (`active`, `completed`, …).
    pub deals: BTreeMap<String, u64>,
    /// Epochs of all deals by state.
    pub epochs: EpochCounts,
    /// Money.
    pub tokens: Tokens,
    /// Disputes.
    pub disputes: DisputeCounts,
    /// Space.
    pub space: Space,
}

/// One point of the time series (`GET /api/series`), taken at each refresh.
/// Amounts are base units as floats (exact to 2^53, for plotting).
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Sample {
    /// Wall-clock time, Unix seconds (millisecond precision).
    pub t: f64,
    /// Data bytes held.
    pub stored_bytes: u64,
    /// Bytes on disk.
    pub disk_used_bytes: u64,
    /// Earned so far.
    pub earned: f64,
    /// Owed now.
    pub owed: f64,
    /// Slashed so far.
    pub slashed: f64,
}

/// Everything the API serves, replaced whole by each refresh.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    /// The overview.
    pub summary: Summary,
    /// Deals by id, with their history.
    pub deals: BTreeMap<u64, DealRow>,
    /// The time series, oldest first, at most [`MAX_SAMPLES`].
    pub series: std::collections::VecDeque<Sample>,
}

/// Samples kept in memory (at one per refresh: about a day at a 30 s interval).
pub const MAX_SAMPLES: usize = 2880;
