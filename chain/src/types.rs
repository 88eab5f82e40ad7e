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
}

impl EpochStatus {
    /// From the contract's `uint8`; unknown values map to `None`.
    pub fn from_u8(v: u8) -> Self {
        match v {
            1 => Self::Proven,
            2 => Self::Missed,
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

/// A deal (`getDeal`). Token amounts are in the token's base units (wei, 18 decimals).
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
    /// Duration in epochs.
    pub num_epochs: u32,
    /// β, bytes per data block.
    pub block_size: u32,
    /// λ, audit samples per run (off-chain audits).
    pub lambda: u16,
    /// K, samples per epoch proof.
    pub samples_per_epoch: u8,
    /// N, data blocks (a power of two).
    pub num_blocks: u64,
    /// Block number of acceptance (0 while Open); epoch e's seed block is
    /// `accepted_at + e·epochBlocks`.
    pub accepted_at: u64,
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
            block_size: d.blockSize,
            lambda: d.lambda,
            samples_per_epoch: d.samplesPerEpoch,
            num_blocks: d.numBlocks,
            accepted_at: d.acceptedAt,
            failures: d.failures,
            open_disputes: d.openDisputes,
            digest_version: d.digestVersion,
            write_count: d.writeCount,
            digest_hash: d.digestHash,
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
    /// Last block in which the provider may answer.
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

/// An epoch's proof window (docs/CONTRACTS.md §2): proofs are accepted in blocks
/// `(seed_block, deadline]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EpochWindow {
    /// s_e = acceptedAt + e·epochBlocks: the block whose hash seeds the epoch.
    pub seed_block: u64,
    /// s_e + epochBlocks: the last block a proof is accepted in.
    pub deadline: u64,
}

impl EpochWindow {
    /// Whether a proof sent in block `block` falls in the window.
    pub fn contains(&self, block: u64) -> bool {
        block > self.seed_block && block <= self.deadline
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
    /// Last block to answer in.
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
}
