//! Calls a storage provider's node makes: registration, accepting deals, epoch
//! proofs, dispute answers, withdrawing payments.

use crate::client::Market;
use crate::convert::{to_chain_digest, BlockProof, SampleProof};
use crate::error::ChainError;
use crate::types::ProviderInfo;
use alloy_primitives::{Address, Bytes, B256, U256};
use dpor_core::digest::Digest;

impl Market {
    /// Registers the signer as a provider (`register`), depositing `stake` wei (≥ the
    /// market's `minStake`; approve the market first, see [`Market::ensure_allowance`]).
    /// `price_per_block_epoch` and `collateral_per_block` are in wei; `capacity_blocks`
    /// counts data blocks across all deals. Errors: `AlreadyRegistered`, `StakeTooLow`,
    /// `InvalidParameter` (empty peer id), ERC-20 allowance / balance errors.
    pub async fn register(
        &self,
        peer_id: Vec<u8>,
        multiaddrs: Vec<String>,
        price_per_block_epoch: u128,
        collateral_per_block: u128,
        capacity_blocks: u64,
        stake: U256,
    ) -> Result<B256, ChainError> {
        let call =
            self.market.register(Bytes::from(peer_id), multiaddrs, price_per_block_epoch, collateral_per_block, capacity_blocks, stake);
        Ok(self.send("register", call).await?.transaction_hash)
    }

    /// Replaces the signer's provider record (`updateProvider`): its libp2p peer id,
    /// multiaddrs, price per block per epoch and collateral per block (wei), and
    /// capacity in data blocks (it may drop below the blocks in use: no new deal can
    /// then be accepted). Deals already opened keep their terms. Errors:
    /// `NotRegistered`.
    pub async fn update_provider(
        &self,
        peer_id: Vec<u8>,
        multiaddrs: Vec<String>,
        price_per_block_epoch: u128,
        collateral_per_block: u128,
        capacity_blocks: u64,
    ) -> Result<B256, ChainError> {
        let call =
            self.market.updateProvider(Bytes::from(peer_id), multiaddrs, price_per_block_epoch, collateral_per_block, capacity_blocks);
        Ok(self.send("updateProvider", call).await?.transaction_hash)
    }

    /// The provider record of `provider` (`registered == false` if unknown).
    pub async fn get_provider(&self, provider: Address) -> Result<ProviderInfo, ChainError> {
        Ok(self.view("getProvider", self.market.getProvider(provider)).await?.into())
    }

    /// The market's `minStake` (wei).
    pub async fn min_stake(&self) -> Result<U256, ChainError> {
        self.view("minStake", self.market.minStake()).await
    }

    /// Accepts open deal `deal_id` as its provider, locking its collateral (approve
    /// first). Returns the acceptance timestamp and the global epoch of deal epoch 0
    /// (the first global epoch starting after acceptance). Errors:
    /// `NotDealProvider`, `WrongDealState`, `StakeTooLow`, `CapacityExceeded`.
    pub async fn accept_deal(&self, deal_id: u64) -> Result<(u64, u64), ChainError> {
        let r = self.send("acceptDeal", self.market.acceptDeal(U256::from(deal_id))).await?;
        let ev = r
            .decoded_log::<crate::bindings::DporMarket::DealAccepted>()
            .ok_or(ChainError::MissingEvent { method: "acceptDeal", event: "DealAccepted" })?;
        Ok((ev.data.acceptedAt, ev.data.startEpoch))
    }

    /// Submits the K whole-block proofs of epoch `epoch` (ENCODING §8 v2) against
    /// `digest`, the preimage of the digest IN FORCE at the epoch's start
    /// ([`Market::digest_in_force`]), whatever was posted since. Must land while
    /// `start ≤ block.timestamp < deadline` ([`Market::epoch_window`]). Errors:
    /// `EpochNotStarted`, `EpochClosed`, `EpochSettled`, `DigestNotInForce`,
    /// `DigestMismatch`, `SeedUnavailable`, `WrongSampleCount`, `WrongSample`,
    /// `WrongBlockLength`, `InvalidProof`.
    pub async fn submit_epoch_proof(&self, deal_id: u64, epoch: u64, digest: &Digest, proofs: Vec<BlockProof>) -> Result<B256, ChainError> {
        let call = self.market.submitEpochProof(U256::from(deal_id), epoch, to_chain_digest(digest), proofs);
        Ok(self.send("submitEpochProof", call).await?.transaction_hash)
    }

    /// Answers dispute `dispute_id` with the named sample proven against `digest`, the
    /// preimage of the digest hash stored in the dispute (see
    /// [`Market::digest_by_hash`]). Errors: `DisputeNotOpen`, `DeadlinePassed`,
    /// `DigestMismatch`, `WrongSample`, `InvalidProof`.
    pub async fn answer_dispute(&self, dispute_id: u64, digest: &Digest, proof: SampleProof) -> Result<B256, ChainError> {
        let call = self.market.answerDispute(U256::from(dispute_id), to_chain_digest(digest), proof);
        Ok(self.send("answerDispute", call).await?.transaction_hash)
    }

    /// Withdraws everything the signer is owed; returns the amount (wei). Errors:
    /// `NothingOwed`.
    pub async fn withdraw(&self) -> Result<U256, ChainError> {
        let r = self.send("withdraw", self.market.withdraw()).await?;
        let ev = r
            .decoded_log::<crate::bindings::DporMarket::Withdrawn>()
            .ok_or(ChainError::MissingEvent { method: "withdraw", event: "Withdrawn" })?;
        Ok(ev.data.amount)
    }

    /// What `account` may withdraw (wei).
    pub async fn owed(&self, account: Address) -> Result<U256, ChainError> {
        self.view("owed", self.market.owed(account)).await
    }
}
