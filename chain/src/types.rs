//! Plain Rust views of the contract's records (`IDporMarket.sol` types), with named
//! fields and enums instead of the ABI's tuples and `uint8`s.

use crate::bindings::IDporMarket;
use alloy_primitives::{Address, Bytes, B256, U256};

/// A deal's life-cycle state (docs/CONTRACTS.md §2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DealState {
    /// No such deal.
    None,
    /// Opened and escrowed, waiting for the provider.
    Open,
    /// Accepted: collateral locked, epochs running.
    Active,
    /// Closed after its last epoch.
    Completed,
    /// Ended by `maxFailures` faults.
    Terminated,
    /// Cancelled by the owner before acceptance.
    Cancelled,
}

impl DealState {
    /// From the contract's `uint8`; unknown values map to `None`.
    pub fn from_u8(v: u8) -> Self {
        match v {
            1 => Self::Open,
            2 => Self::Active,
            3 => Self::Completed,
            4 => Self::Terminated,
            5 => Self::Cancelled,
            _ => Self::None,
        }
    }
}

/// The settlement of one epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EpochStatus {
    /// Not settled yet.
    None,
    /// Proven: the provider was paid.
    Proven,
    /// Missed: the owner was refunded (and the provider slashed if a digest existed).
    Missed,
    /// Challenged: a challenge of the provider's commitment entry is open
    /// (docs/COMMITMENTS.md §3); it ends Proven or Missed.
    Challenged,
}

impl EpochStatus {
    /// From the contract's `uint8`; unknown values map to `None`.
    pub fn from_u8(v: u8) -> Self {
        match v {
            1 => Self::Proven,
            2 => Self::Missed,
            3 => Self::Challenged,
            _ => Self::None,
        }
    }
}

/// A dispute's state: Open → Answered (bond to the provider) or Slashed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DisputeState {
    /// No such dispute.
    None,
    /// Waiting for the provider's answer until the deadline.
    Open,
    /// Answered in time: the bond went to the provider.
    Answered,
    /// Not answered in time and slashed.
    Slashed,
}

impl DisputeState {
    /// From the contract's `uint8`; unknown values map to `None`.
    pub fn from_u8(v: u8) -> Self {
        match v {
            1 => Self::Open,
            2 => Self::Answered,
            3 => Self::Slashed,
            _ => Self::None,
        }
    }
}

/// A deal (`getDeal`). Token amounts are in the token's base units (wei, 18 decimals);
/// times are block timestamps (seconds); epochs are on the market's global grid
/// (docs/CONTRACTS.md §2): deal epoch e is global epoch `start_epoch + e`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DealInfo {
    /// The deal id (1-based).
    pub id: u64,
    /// The owner (who opened and pays).
    pub owner: Address,
    /// The provider.
    pub provider: Address,
    /// Life-cycle state.
    pub state: DealState,
    /// Epochs of the term (an exit may have lowered it).
    pub num_epochs: u32,
    /// Epochs of the term at opening (before any exit).
    pub term_epochs: u32,
    /// β, bytes per data block.
    pub block_size: u32,
    /// λ, audit samples per run (off-chain audits).
    pub lambda: u16,
    /// K, whole-block samples per epoch proof.
    pub samples_per_epoch: u8,
    /// N, data blocks (a power of two).
    pub num_blocks: u64,
    /// Timestamp of acceptance (0 while Open).
    pub accepted_at: u64,
    /// Global epoch of deal epoch 0 (0 while Open).
    pub start_epoch: u64,
    /// Faults so far.
    pub failures: u16,
    /// Disputes currently open.
    pub open_disputes: u16,
    /// Version of the latest posted digest (0 = none).
    pub digest_version: u64,
    /// Write count t of the latest digest.
    pub write_count: u64,
    /// EIP-712 hash of the latest digest (zero = none).
    pub digest_hash: B256,
    /// Timestamp of the first digest (0 = none yet): epochs starting after it can be faults.
    pub first_digest_at: u64,
    /// Epochs settled (proven or missed) that had a digest in force.
    pub settled_with_digest: u32,
    /// Payment per proven epoch (price · N), wei.
    pub price_per_epoch: u128,
    /// Escrow left, wei.
    pub escrow: u128,
    /// Collateral (to lock while Open; left while Active), wei.
    pub collateral: u128,
    /// Slash per fault, wei.
    pub slash_per_fault: u128,
}

impl DealInfo {
    /// From the ABI struct.
    pub fn from_abi(id: u64, d: &IDporMarket::Deal) -> Self {
        Self {
            id,
            owner: d.owner,
            provider: d.provider,
            state: DealState::from_u8(d.state),
            num_epochs: d.numEpochs,
            term_epochs: d.termEpochs,
            block_size: d.blockSize,
            lambda: d.lambda,
            samples_per_epoch: d.samplesPerEpoch,
            num_blocks: d.numBlocks,
            accepted_at: d.acceptedAt,
            start_epoch: d.startEpoch,
            failures: d.failures,
            open_disputes: d.openDisputes,
            digest_version: d.digestVersion,
            write_count: d.writeCount,
            digest_hash: d.digestHash,
            first_digest_at: d.firstDigestAt,
            settled_with_digest: d.settledWithDigest,
            price_per_epoch: d.pricePerEpoch,
            escrow: d.escrow,
            collateral: d.collateral,
            slash_per_fault: d.slashPerFault,
        }
    }

    /// Whether a digest has been posted.
    pub fn has_digest(&self) -> bool {
        self.digest_hash != B256::ZERO
    }

    /// Whether the deal was accepted (epochs are running or over).
    pub fn accepted(&self) -> bool {
        self.accepted_at != 0
    }
}

/// The market's time and economic parameters (immutable, read once; docs/CONTRACTS.md §1).
/// Times in seconds, amounts in wei.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MarketParams {
    /// T0, origin of the global epoch grid (a timestamp).
    pub genesis: u64,
    /// P, seconds per epoch (and per proof window).
    pub epoch_seconds: u64,
    /// Seconds a provider has to answer a dispute.
    pub answer_seconds: u64,
    /// Disputes stay possible this long after a deal's last deadline.
    pub grace_seconds: u64,
    /// A deal with no digest this long after acceptance may be exited.
    pub upload_seconds: u64,
    /// Epochs of notice of `requestExit` after the current one.
    pub exit_notice_epochs: u32,
    /// Bond per dispute, wei.
    pub dispute_bond: u128,
    /// Faults that terminate a deal.
    pub max_failures: u16,
    /// The randomness beacon (zero = dev mode: blockhash seeds, local only).
    pub beacon: Address,
}

impl MarketParams {
    /// Start timestamp of global epoch `g`: T0 + g·P.
    pub fn global_start(&self, g: u64) -> u64 {
        self.genesis.saturating_add(g.saturating_mul(self.epoch_seconds))
    }

    /// The global epoch containing timestamp `ts` (`None` before genesis).
    pub fn global_epoch_at(&self, ts: u64) -> Option<u64> {
        if ts < self.genesis || self.epoch_seconds == 0 {
            return None;
        }
        Some((ts - self.genesis) / self.epoch_seconds)
    }

    /// The window `[start, deadline)` of deal epoch `epoch` (no range check).
    pub fn window(&self, deal: &DealInfo, epoch: u64) -> EpochWindow {
        let start = self.global_start(deal.start_epoch.saturating_add(epoch));
        EpochWindow { start, deadline: start.saturating_add(self.epoch_seconds) }
    }

    /// The deal epoch whose window contains timestamp `ts`: `None` before the first
    /// window, after the last, or for a deal not accepted.
    pub fn deal_epoch_at(&self, deal: &DealInfo, ts: u64) -> Option<u64> {
        if !deal.accepted() {
            return None;
        }
        let g = self.global_epoch_at(ts)?;
        let e = g.checked_sub(deal.start_epoch)?;
        (e < u64::from(deal.num_epochs)).then_some(e)
    }

    /// The number of deal epochs whose deadline is ≤ `ts` (epochs 0..n are over).
    pub fn epochs_over(&self, deal: &DealInfo, ts: u64) -> u64 {
        if !deal.accepted() {
            return 0;
        }
        let n = u64::from(deal.num_epochs);
        match self.global_epoch_at(ts) {
            None => 0,
            Some(g) => g.saturating_sub(deal.start_epoch).min(n),
        }
    }

    /// The deadline of the deal's last epoch (start of global epoch start_epoch + num_epochs).
    pub fn last_deadline(&self, deal: &DealInfo) -> u64 {
        self.global_start(deal.start_epoch.saturating_add(u64::from(deal.num_epochs)))
    }

    /// When disputes close and `closeDeal` may settle the deal: last deadline + grace.
    pub fn dispute_period_end(&self, deal: &DealInfo) -> u64 {
        self.last_deadline(deal).saturating_add(self.grace_seconds)
    }

    /// Whether seeds come from blockhash (no beacon; local development only).
    pub fn dev_seeds(&self) -> bool {
        self.beacon == Address::ZERO
    }

    /// The market's excuse for a missed epoch starting at `start` (`markMissed`, beacon
    /// mode only): its beacon round was not recorded before `start + epochSeconds/2`
    /// (`recorded_at`: the round's `recordedAt`, `None` if never recorded). An excused
    /// epoch is settled with no fault and no payment. Always false in dev mode.
    pub fn seed_recorded_late(&self, start: u64, recorded_at: Option<u64>) -> bool {
        if self.dev_seeds() {
            return false;
        }
        recorded_at.is_none_or(|t| t >= start.saturating_add(self.epoch_seconds / 2))
    }
}

/// What the market keeps of each posted digest (`getDigestRecord`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DigestRecord {
    /// EIP-712 digest hash (zero = unknown version).
    pub digest_hash: B256,
    /// Timestamp of the postDigest transaction.
    pub posted_at: u64,
    /// t of the digest.
    pub write_count: u64,
    /// Version of the next digest posted (0 while this is the latest).
    pub next_version: u64,
    /// Version of the digest posted before (0 for the first).
    pub prev_version: u64,
    /// N of the digest, blocks (a resize changes the deal's N; 0 = unknown version).
    pub num_blocks: u64,
}

/// The digest in force for an epoch (`digestInForce`): the last posted strictly before
/// the epoch's start. Version 0 = none (the epoch cannot be a fault).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DigestInForce {
    /// Digest version (0 = none).
    pub version: u64,
    /// Its hash (zero = none).
    pub hash: B256,
    /// Its write count t.
    pub write_count: u64,
}

/// A provider record (`getProvider`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderInfo {
    /// False for an unknown address.
    pub registered: bool,
    /// Blocks it is willing to hold across all deals.
    pub capacity_blocks: u64,
    /// Blocks reserved by accepted deals.
    pub used_blocks: u64,
    /// Deals accepted and not ended.
    pub active_deals: u32,
    /// Asking price per block per epoch, wei.
    pub price_per_block_epoch: u128,
    /// Collateral per block of an accepted deal, wei.
    pub collateral_per_block: u128,
    /// Registration stake, wei.
    pub stake: U256,
    /// libp2p peer id (multihash bytes).
    pub peer_id: Bytes,
    /// libp2p multiaddrs, as text.
    pub multiaddrs: Vec<String>,
}

impl From<IDporMarket::Provider> for ProviderInfo {
    fn from(p: IDporMarket::Provider) -> Self {
        Self {
            registered: p.registered,
            capacity_blocks: p.capacityBlocks,
            used_blocks: p.usedBlocks,
            active_deals: p.activeDeals,
            price_per_block_epoch: p.pricePerBlockEpoch,
            collateral_per_block: p.collateralPerBlock,
            stake: p.stake,
            peer_id: p.peerId,
            multiaddrs: p.multiaddrs,
        }
    }
}

/// A dispute (`getDispute`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DisputeInfo {
    /// The dispute id (1-based).
    pub id: u64,
    /// The deal.
    pub deal_id: u64,
    /// Who opened it (and locked the bond).
    pub challenger: Address,
    /// Answer deadline, a timestamp (inclusive).
    pub deadline: u64,
    /// State.
    pub state: DisputeState,
    /// The run named (0 = C, ℓ + 1 = level ℓ).
    pub run_tag: u8,
    /// Position in the run.
    pub position: u64,
    /// Chunk of the coded block.
    pub chunk_index: u32,
    /// Digest version disputed.
    pub version: u64,
    /// The bond, wei.
    pub bond: u128,
    /// Hash of the digest the answer must be against (the latest at opening).
    pub digest_hash: B256,
}

impl DisputeInfo {
    /// From the ABI struct; errors if the deal id does not fit u64.
    pub fn from_abi(id: u64, d: &IDporMarket::Dispute) -> Result<Self, crate::ChainError> {
        Ok(Self {
            id,
            deal_id: crate::client::to_u64(d.dealId)?,
            challenger: d.challenger,
            deadline: d.deadline,
            state: DisputeState::from_u8(d.state),
            run_tag: d.runTag,
            position: d.position,
            chunk_index: d.chunkIndex,
            version: d.version,
            bond: d.bond,
            digest_hash: d.digestHash,
        })
    }
}

/// An epoch's proof window (docs/CONTRACTS.md §2), block timestamps: proofs are
/// accepted while `start ≤ now < deadline`; markMissed from `deadline` on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EpochWindow {
    /// Start of the epoch (its global epoch's start); its seed is the beacon round at it.
    pub start: u64,
    /// start + epochSeconds.
    pub deadline: u64,
}

impl EpochWindow {
    /// Whether a proof in a block with timestamp `ts` falls in the window.
    pub fn contains(&self, ts: u64) -> bool {
        ts >= self.start && ts < self.deadline
    }
}

/// A `DisputeOpened` event: what a challenger named.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DisputeOpenedEvent {
    /// The dispute id.
    pub dispute_id: u64,
    /// The deal.
    pub deal_id: u64,
    /// The challenger.
    pub challenger: Address,
    /// The digest version disputed.
    pub version: u64,
    /// The digest hash the answer must match.
    pub digest_hash: B256,
    /// Run tag (0 = C, ℓ + 1 = level ℓ).
    pub run_tag: u8,
    /// Position in the run.
    pub position: u64,
    /// Chunk of the coded block.
    pub chunk_index: u32,
    /// Answer deadline (timestamp, inclusive).
    pub deadline: u64,
    /// Block the event was mined in.
    pub block: u64,
}

/// A `DealOpened` event (the fields a provider needs to decide on a deal).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DealOpenedEvent {
    /// The deal id.
    pub deal_id: u64,
    /// The owner.
    pub owner: Address,
    /// The provider addressed.
    pub provider: Address,
    /// N.
    pub num_blocks: u64,
    /// β.
    pub block_size: u32,
    /// Duration in epochs.
    pub num_epochs: u32,
    /// Block the event was mined in.
    pub block: u64,
}

/// A `DigestPosted` event: the whole digest preimage (core type) and its hash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PostedDigest {
    /// The digest.
    pub digest: dpor_core::digest::Digest,
    /// Its EIP-712 hash as stored by the contract.
    pub hash: B256,
    /// Block the event was mined in.
    pub block: u64,
    /// The transaction that posted it (`None` if the RPC did not say).
    pub tx: Option<B256>,
}

/// The signatures a digest was posted with, read back from the posting transaction's
/// calldata ([`crate::Market::posting_signatures`]): `postDigest` (both parties signed
/// the digest's EIP-712 hash) or `resizeDeal` (they signed the resize's hash, with its
/// new price and collateral).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PostingSignatures {
    /// The digest in the calldata.
    pub digest: dpor_core::digest::Digest,
    /// The owner's signature, as sent (65 bytes r ‖ s ‖ v for an EOA).
    pub owner_sig: Vec<u8>,
    /// The provider's signature, as sent.
    pub provider_sig: Vec<u8>,
    /// For a `resizeDeal`: the new price per epoch and collateral (base units) that the
    /// signatures cover too; `None` for a `postDigest`.
    pub resize: Option<(u128, u128)>,
}

/// An `AuditRecorded` event: one audit of a deal's epoch recorded on chain (by an
/// auditor's `recordAudit`, or by a dispute, which records its audit too).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditRecordedEvent {
    /// The audit id (1-based, market-wide).
    pub audit_id: u64,
    /// The deal.
    pub deal_id: u64,
    /// The deal epoch audited.
    pub epoch: u64,
    /// The digest version the audit checked.
    pub version: u64,
    /// Whether every sample verified.
    pub passed: bool,
    /// Hash of the audit's transcript.
    pub transcript_hash: B256,
    /// Who recorded it.
    pub auditor: Address,
    /// Block the event was mined in.
    pub block: u64,
}
