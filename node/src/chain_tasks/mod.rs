//! The node's chain agent: a tokio task that keeps the provider's side of every deal
//! going on chain (docs/CONTRACTS.md): registers the provider, accepts deals addressed
//! to it, follows posted digests, proves each epoch of the market's global time grid
//! with whole coded blocks against the digest in force at the epoch's start (pinning
//! its runs until the epoch settles), stores the epoch seed (touchSeed; in beacon mode
//! it waits for the beacon round to be recorded; an epoch whose round came too late it
//! marks missed after its deadline, so the market excuses it), answers disputes, closes
//! its finished deals after the grace period (a never-uploaded one with
//! `exitBeforeUpload` at the end of its term, paid for the epochs it held) and withdraws
//! payments. It refuses deals it could not serve or that would lock its capacity unpaid
//! (`deals::refusal`). It never exits or panics on a chain error: it logs and retries next tick.
//!
//! - [`prove`]: the pure part: which samples to prove, building and locally verifying
//!   sample proofs from the node's runs (testable without a chain).
//! - [`agent`]: [`ChainAgent`] and its loop; `deals`, `epochs`, `disputes`: its steps.

pub mod agent;
pub mod commit;
mod deals;
mod disputes;
mod epochs;
pub mod prove;

pub use agent::ChainAgent;

use alloy_primitives::B256;
use dpor_core::digest::Digest;
use std::time::Duration;

/// A digest with the owner's and the provider's 65-byte signatures over its EIP-712
/// hash: what `postDigest` takes.
pub type SignedDigest = (Digest, Vec<u8>, Vec<u8>);

/// What the agent needs from the node's storage (implemented by the node over
/// `store`, and by in-memory fakes in tests).
pub trait NodeRuns: Send + Sync + 'static {
    /// Coded block `position` of run `run` (8·s bytes) and its run path (log2 run
    /// size hashes, leaf to root), from the node's disk.
    fn coded_block(&self, deal: u64, run: dpor_core::RunId, position: u64) -> anyhow::Result<(Vec<u8>, Vec<B256>)>;
    /// A digest for `deal` was posted on chain: its runs must be kept.
    fn digest_posted(&self, deal: u64, digest: &Digest) -> anyhow::Result<()>;
    /// A dispute against `digest` opened: its runs must be kept until it closes.
    fn dispute_opened(&self, deal: u64, dispute: u64, digest: &Digest) -> anyhow::Result<()>;
    /// The dispute closed (answered or slashed): its runs may be released.
    fn dispute_closed(&self, deal: u64, dispute: u64) -> anyhow::Result<()>;
    /// Epoch `epoch` of `deal` started with `digest` in force: its runs must be kept
    /// until the epoch is proven or its window is over, even if newer digests are
    /// posted meanwhile (the proof must use this one). Default: nothing to pin.
    fn epoch_pinned(&self, deal: u64, epoch: u64, digest: &Digest) -> anyhow::Result<()> {
        let _ = (deal, epoch, digest);
        Ok(())
    }
    /// A digest of `deal` the node co-signed and should post itself, with the owner's
    /// and its own signature (issue 22: an older co-signed digest waits beside it, and
    /// posting the newest makes the market refuse every older one). Default: none.
    fn cosigned_to_post(&self, deal: u64) -> anyhow::Result<Option<SignedDigest>> {
        let _ = deal;
        Ok(None)
    }
    /// Epochs of `deal` below `epoch` are settled or over: their pins may go.
    /// Default: nothing pinned.
    fn epochs_released(&self, deal: u64, epoch: u64) -> anyhow::Result<()> {
        let _ = (deal, epoch);
        Ok(())
    }
    /// Keeps the encoded responses `(deal, deal epoch, bytes)` of one commitment
    /// durably (docs/COMMITMENTS.md §6), before the commitment is posted. Default:
    /// unsupported (per-deal proof mode only).
    fn put_epoch_responses(&self, items: &[(u64, u64, Vec<u8>)]) -> anyhow::Result<()> {
        let _ = items;
        anyhow::bail!("this storage keeps no epoch responses")
    }
    /// The kept encoded response of `deal`'s epoch `epoch`, if any. Default: none.
    fn epoch_response(&self, deal: u64, epoch: u64) -> anyhow::Result<Option<Vec<u8>>> {
        let _ = (deal, epoch);
        Ok(None)
    }
    /// Drops `deal`'s kept responses of epochs below `before`. Default: nothing kept.
    fn prune_epoch_responses(&self, deal: u64, before: u64) -> anyhow::Result<()> {
        let _ = (deal, before);
        Ok(())
    }
}

/// How the agent proves its deals' epochs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EpochProofs {
    /// One `submitEpochProof` per deal per epoch (≈ 240k gas each; docs/CONTRACTS.md §5).
    #[default]
    PerDeal,
    /// One `commitEpoch` per global epoch over all deals, responses kept and served,
    /// challenges answered (docs/COMMITMENTS.md).
    Commitment,
}

/// The terms the agent registers the provider with if it is not registered yet.
/// Amounts in token base units (wei).
#[derive(Debug, Clone, Default)]
pub struct Registration {
    /// libp2p peer id (multihash bytes).
    pub peer_id: Vec<u8>,
    /// libp2p multiaddrs owners and auditors dial, as text.
    pub multiaddrs: Vec<String>,
    /// Asking price per block per epoch, wei.
    pub price_per_block_epoch: u128,
    /// Collateral locked per block of an accepted deal, wei.
    pub collateral_per_block: u128,
    /// Data blocks the provider holds at most across all deals.
    pub capacity_blocks: u64,
    /// Stake deposited at registration, wei (≥ the market's `minStake`). The tokens
    /// must be in the provider's account already (minted by whoever runs the node).
    pub stake: u128,
}

/// Agent settings.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    /// Time between ticks (one pass over registration, deals, epochs, disputes,
    /// payments). Should be well below `epochSeconds`.
    pub poll_interval: Duration,
    /// Accept `Open` deals addressed to this provider (locking their collateral).
    pub auto_accept: bool,
    /// Register with these terms if not registered.
    pub register: Option<Registration>,
    /// Withdraw owed payments whenever `owed > 0`.
    pub withdraw: bool,
    /// First block to scan for events (deals, digests, disputes); the market's deploy
    /// block is enough, 0 scans the whole chain.
    pub from_block: u64,
    /// Close finished deals (`closeDeal` once their last deadline + `graceSeconds` has
    /// passed and no dispute is open), freeing the collateral.
    pub close_finished: bool,
    /// Per-deal epoch proofs or one commitment per epoch.
    pub epoch_proofs: EpochProofs,
}

impl Default for AgentConfig {
    /// 1 s ticks, auto-accept, withdraw and close on, no registration, scan from block 0,
    /// per-deal epoch proofs.
    fn default() -> Self {
        Self {
            poll_interval: Duration::from_secs(1),
            auto_accept: true,
            register: None,
            withdraw: true,
            from_block: 0,
            close_finished: true,
            epoch_proofs: EpochProofs::PerDeal,
        }
    }
}
