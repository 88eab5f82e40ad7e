//! Epoch commitments on chain (docs/COMMITMENTS.md): the provider's one commitment per
//! global epoch, challenges of one deal's entry and their answers, claims of committed
//! epochs, and the logs watchers and nodes follow.

use crate::bindings::DporMarket;
use crate::client::{to_u64, Market};
use crate::convert::{to_chain_digest, BlockProof};
use crate::error::ChainError;
use alloy::rpc::types::Filter;
use alloy_primitives::{Address, B256, U256};
use dpor_core::digest::Digest;

/// A challenge's state (`ChallengeState`): Open → Answered (bond to the provider, epoch
/// paid) or Faulted (one fault slashed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ChallengeState {
    /// No such challenge.
    None,
    /// Waiting for the provider's answer until `deadline`.
    Open,
    /// Answered with the entry's whole-block proof.
    Answered,
    /// Not answered in time: the deal epoch was faulted.
    Faulted,
}

impl ChallengeState {
    /// From the contract's `uint8`; unknown values map to `None`.
    pub fn from_u8(v: u8) -> Self {
        match v {
            1 => Self::Open,
            2 => Self::Answered,
            3 => Self::Faulted,
            _ => Self::None,
        }
    }
}

/// A challenge as `getChallenge` returns it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChallengeInfo {
    /// The deal.
    pub deal_id: u64,
    /// The deal epoch (0-based).
    pub epoch: u64,
    /// Who challenged (`Address::ZERO` for the market's own safety draw).
    pub challenger: Address,
    /// The bond locked (wei; 0 for a safety draw).
    pub bond: U256,
    /// Last block timestamp at which an answer is accepted.
    pub deadline: u64,
    /// Its state.
    pub state: ChallengeState,
}

/// A `ChallengeOpened` log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChallengeOpenedEvent {
    /// The challenge.
    pub challenge_id: u64,
    /// The deal.
    pub deal_id: u64,
    /// The deal epoch.
    pub epoch: u64,
    /// Who challenged (`Address::ZERO`: a safety draw).
    pub challenger: Address,
    /// Answer deadline (block timestamp).
    pub deadline: u64,
    /// Block of the log.
    pub block: u64,
}

/// An `EpochCommitted` log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EpochCommittedEvent {
    /// The provider.
    pub provider: Address,
    /// The global epoch.
    pub global_epoch: u64,
    /// The committed root.
    pub root: B256,
    /// Entries committed.
    pub leaf_count: u32,
    /// The safety draw's challenge (0 = none this epoch).
    pub safety_challenge_id: u64,
    /// Block of the log.
    pub block: u64,
}

impl Market {
    /// Posts the signer's commitment for global epoch `g` (`commitEpoch`): the root of
    /// its entries (docs/COMMITMENTS.md §2) and their count. Returns the transaction
    /// hash, the gas it used and the safety draw's challenge id (0 = none). Errors:
    /// `NotRegistered`, `CommitmentExists`, `EpochNotStarted`, `EpochClosed`,
    /// `SeedUnavailable`.
    pub async fn commit_epoch(&self, g: u64, root: B256, leaf_count: u32) -> Result<(B256, u64, u64), ChainError> {
        let r = self.send("commitEpoch", self.market.commitEpoch(g, root, leaf_count)).await?;
        let safety = match r.decoded_log::<DporMarket::EpochCommitted>() {
            Some(ev) => to_u64(ev.data.safetyChallengeId)?,
            None => return Err(ChainError::MissingEvent { method: "commitEpoch", event: "EpochCommitted" }),
        };
        Ok((r.transaction_hash, r.gas_used, safety))
    }

    /// The commitment of `provider` for global epoch `g`: its root, or `None` if it
    /// posted none.
    pub async fn get_commitment(&self, provider: Address, g: u64) -> Result<Option<B256>, ChainError> {
        let r = self.view("getCommitment", self.market.getCommitment(provider, g)).await?;
        Ok(r.committed.then_some(r.root))
    }

    /// Challenges deal `deal_id`'s entry for deal epoch `epoch` (`challengeEntry`),
    /// locking the market's `disputeBond` (approve first). Returns the challenge id.
    /// Errors: `NotCommitted`, `NoDigest`, `EpochSettled`, `ChallengePeriodOver`,
    /// `WrongDealState`, ERC-20 errors.
    pub async fn challenge_entry(&self, deal_id: u64, epoch: u64) -> Result<u64, ChainError> {
        let r = self.send("challengeEntry", self.market.challengeEntry(U256::from(deal_id), epoch)).await?;
        let ev = r
            .decoded_log::<DporMarket::ChallengeOpened>()
            .ok_or(ChainError::MissingEvent { method: "challengeEntry", event: "ChallengeOpened" })?;
        to_u64(ev.data.challengeId)
    }

    /// Answers challenge `challenge_id` with the entry's response: `digest` the digest
    /// in force at the epoch's start, the K whole-block proofs, and the leaf's index and
    /// path in the commitment. Returns the transaction hash and gas used. Errors:
    /// `ChallengeNotOpen`, `DeadlinePassed`, `DigestNotInForce`, `DigestMismatch`,
    /// `WrongSample`, `InvalidProof`, `NotInCommitment`.
    pub async fn answer_challenge(
        &self,
        challenge_id: u64,
        digest: &Digest,
        proofs: Vec<BlockProof>,
        leaf_index: u64,
        leaf_path: Vec<B256>,
    ) -> Result<(B256, u64), ChainError> {
        let call = self.market.answerChallenge(
            U256::from(challenge_id),
            to_chain_digest(digest),
            proofs,
            U256::from(leaf_index),
            leaf_path,
        );
        let r = self.send("answerChallenge", call).await?;
        Ok((r.transaction_hash, r.gas_used))
    }

    /// Faults an unanswered challenge after its deadline (`faultChallenge`). Anyone.
    pub async fn fault_challenge(&self, challenge_id: u64) -> Result<B256, ChainError> {
        Ok(self.send("faultChallenge", self.market.faultChallenge(U256::from(challenge_id))).await?.transaction_hash)
    }

    /// Challenge `challenge_id` (state `None` if unknown).
    pub async fn get_challenge(&self, challenge_id: u64) -> Result<ChallengeInfo, ChainError> {
        let c = self.view("getChallenge", self.market.getChallenge(U256::from(challenge_id))).await?;
        Ok(ChallengeInfo {
            deal_id: to_u64(c.dealId)?,
            epoch: c.epoch,
            challenger: c.challenger,
            bond: U256::from(c.bond),
            deadline: c.deadline,
            state: ChallengeState::from_u8(c.state),
        })
    }

    /// Pays the committed epochs of `deal_id` below `up_to` whose challenge windows are
    /// over (`claimEpochs`). Anyone.
    pub async fn claim_epochs(&self, deal_id: u64, up_to: u64) -> Result<B256, ChainError> {
        Ok(self.send("claimEpochs", self.market.claimEpochs(U256::from(deal_id), up_to)).await?.transaction_hash)
    }

    /// Every challenge opened from block `from_block` on (all deals), oldest first.
    pub async fn challenges_opened(&self, from_block: u64) -> Result<Vec<ChallengeOpenedEvent>, ChainError> {
        self.challenges_in(Filter::new().from_block(from_block)).await
    }

    async fn challenges_in(&self, f: Filter) -> Result<Vec<ChallengeOpenedEvent>, ChainError> {
        self.logs::<DporMarket::ChallengeOpened>("ChallengeOpened logs", f)
            .await?
            .into_iter()
            .map(|(e, block)| {
                Ok(ChallengeOpenedEvent {
                    challenge_id: to_u64(e.challengeId)?,
                    deal_id: to_u64(e.dealId)?,
                    epoch: e.epoch,
                    challenger: e.challenger,
                    deadline: e.deadline,
                    block,
                })
            })
            .collect()
    }

    /// The challenges opened on deal `deal_id` from block `from_block` on, oldest first
    /// (`ChallengeOpened` logs; the deal id is topic 2).
    pub async fn challenges_of_deal(&self, deal_id: u64, from_block: u64) -> Result<Vec<ChallengeOpenedEvent>, ChainError> {
        let f = Filter::new().topic2(B256::from(U256::from(deal_id))).from_block(from_block);
        self.challenges_in(f).await
    }

    /// Every commitment `provider` posted from block `from_block` on, oldest first.
    pub async fn commitments_of(&self, provider: Address, from_block: u64) -> Result<Vec<EpochCommittedEvent>, ChainError> {
        // EpochCommitted(provider indexed, g indexed, …): the provider is topic 1.
        let f = Filter::new().topic1(provider.into_word()).from_block(from_block);
        self.logs::<DporMarket::EpochCommitted>("EpochCommitted logs", f)
            .await?
            .into_iter()
            .map(|(e, block)| {
                Ok(EpochCommittedEvent {
                    provider: e.provider,
                    global_epoch: e.g,
                    root: e.root,
                    leaf_count: e.leafCount,
                    safety_challenge_id: to_u64(e.safetyChallengeId)?,
                    block,
                })
            })
            .collect()
    }
}
