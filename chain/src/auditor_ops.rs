//! Epochs (seeds, windows, settlement) and the auditor's calls: audit records,
//! disputes, slashing, missed epochs.

use crate::bindings::DporMarket;
use crate::client::{to_u64, Market};
use crate::error::ChainError;
use crate::types::{DisputeInfo, EpochStatus, EpochWindow};
use alloy_primitives::{B256, U256};

impl Market {
    /// Blocks per epoch (`epochBlocks`, 1..256).
    pub async fn epoch_blocks(&self) -> Result<u64, ChainError> {
        self.view("epochBlocks", self.market.epochBlocks()).await
    }

    /// Blocks a provider has to answer a dispute (`disputeWindow`).
    pub async fn dispute_window(&self) -> Result<u64, ChainError> {
        self.view("disputeWindow", self.market.disputeWindow()).await
    }

    /// The bond a challenger locks per dispute (`disputeBond`, wei).
    pub async fn dispute_bond(&self) -> Result<u128, ChainError> {
        self.view("disputeBond", self.market.disputeBond()).await
    }

    /// The seed of epoch `epoch` of deal `deal_id`: the stored one (`epochSeeds`) if the
    /// epoch was touched, else what the contract would store now (`peekSeed`), or `None`
    /// if the epoch has not started (its seed block is not mined yet) or the deal was
    /// never accepted. Inside the epoch's proof window the peeked seed is exactly the one
    /// a proof will be checked against (docs/CONTRACTS.md §5); peeked more than 256
    /// blocks after the seed block of an untouched epoch, it is the "late" seed.
    /// Errors: `EpochOutOfRange`, `UnknownDeal`.
    pub async fn epoch_seed(&self, deal_id: u64, epoch: u64) -> Result<Option<B256>, ChainError> {
        let stored = self.view("epochSeeds", self.market.epochSeeds(U256::from(deal_id), U256::from(epoch))).await?;
        if stored != B256::ZERO {
            return Ok(Some(stored));
        }
        match self.view("peekSeed", self.market.peekSeed(U256::from(deal_id), epoch)).await {
            Ok(seed) => Ok(Some(seed)),
            Err(e) if matches!(e.revert_name(), Some("EpochNotStarted") | Some("WrongDealState")) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The proof window of an epoch: blocks `(seed_block, deadline]`. Errors:
    /// `EpochOutOfRange`, `UnknownDeal`.
    pub async fn epoch_window(&self, deal_id: u64, epoch: u64) -> Result<EpochWindow, ChainError> {
        let w = self.view("epochWindow", self.market.epochWindow(U256::from(deal_id), epoch)).await?;
        Ok(EpochWindow { seed_block: to_u64(w.seedBlock)?, deadline: to_u64(w.deadline)? })
    }

    /// The settlement of an epoch.
    pub async fn epoch_status(&self, deal_id: u64, epoch: u64) -> Result<EpochStatus, ChainError> {
        let s = self.view("epochStatus", self.market.epochStatus(U256::from(deal_id), epoch)).await?;
        Ok(EpochStatus::from_u8(s))
    }

    /// The epoch whose proof window contains the next block (where a transaction sent
    /// now lands at the earliest): `(block + 1 − acceptedAt − 1) / epochBlocks`. `None`
    /// if the deal was not accepted or all its epochs are over.
    pub async fn current_epoch(&self, deal_id: u64) -> Result<Option<u64>, ChainError> {
        let deal = self.get_deal(deal_id).await?;
        let eb = self.epoch_blocks().await?;
        let block = self.block_number().await?;
        Ok(epoch_at(deal.accepted_at, eb, deal.num_epochs, block + 1))
    }

    /// Records an off-chain audit's outcome (no economic effect); returns the audit id.
    /// `version` is the digest version audited (1..=posted). Errors: `WrongDealState`,
    /// `StaleVersion`, `EpochOutOfRange`.
    pub async fn record_audit(
        &self,
        deal_id: u64,
        epoch: u64,
        version: u64,
        passed: bool,
        transcript_hash: B256,
    ) -> Result<u64, ChainError> {
        let call = self.market.recordAudit(U256::from(deal_id), epoch, version, passed, transcript_hash);
        let r = self.send("recordAudit", call).await?;
        let ev = r
            .decoded_log::<DporMarket::AuditRecorded>()
            .ok_or(ChainError::MissingEvent { method: "recordAudit", event: "AuditRecorded" })?;
        to_u64(ev.data.auditId)
    }

    /// Opens a dispute on one sample (run tag, position, chunk) of the deal's current
    /// digest (`version` must be the posted one), approving the bond first if the
    /// allowance is short. Returns the dispute id. Errors: `WrongDealState`,
    /// `StaleVersion`, `WrongSample`, `NoDigest`, ERC-20 errors.
    #[allow(clippy::too_many_arguments)]
    pub async fn open_dispute(
        &self,
        deal_id: u64,
        epoch: u64,
        version: u64,
        transcript_hash: B256,
        run_tag: u8,
        position: u64,
        chunk_index: u32,
    ) -> Result<u64, ChainError> {
        let bond = self.dispute_bond().await?;
        if bond > 0 {
            self.ensure_allowance(U256::from(bond)).await?;
        }
        let call = self.market.openDispute(
            U256::from(deal_id),
            epoch,
            version,
            transcript_hash,
            run_tag,
            position,
            chunk_index,
        );
        let r = self.send("openDispute", call).await?;
        let ev = r
            .decoded_log::<DporMarket::DisputeOpened>()
            .ok_or(ChainError::MissingEvent { method: "openDispute", event: "DisputeOpened" })?;
        to_u64(ev.data.disputeId)
    }

    /// Dispute `dispute_id` (state [`crate::DisputeState::None`] if unknown).
    pub async fn get_dispute(&self, dispute_id: u64) -> Result<DisputeInfo, ChainError> {
        let d = self.view("getDispute", self.market.getDispute(U256::from(dispute_id))).await?;
        DisputeInfo::from_abi(dispute_id, &d)
    }

    /// Slashes an unanswered dispute after its deadline (anyone). Errors:
    /// `DisputeNotOpen`, `DeadlineNotPassed`.
    pub async fn slash(&self, dispute_id: u64) -> Result<B256, ChainError> {
        Ok(self.send("slash", self.market.slash(U256::from(dispute_id))).await?.transaction_hash)
    }

    /// Marks an unsettled epoch missed after its deadline (anyone). Errors:
    /// `EpochNotOver`, `EpochSettled`, `WrongDealState`.
    pub async fn mark_missed(&self, deal_id: u64, epoch: u64) -> Result<B256, ChainError> {
        Ok(self.send("markMissed", self.market.markMissed(U256::from(deal_id), epoch)).await?.transaction_hash)
    }
}

/// The epoch whose window `(s_e, s_e + epoch_blocks]` contains `block`, for a deal
/// accepted at `accepted_at` with `num_epochs` epochs; `None` before the first window,
/// after the last, or for an unaccepted deal (`accepted_at == 0`).
pub fn epoch_at(accepted_at: u64, epoch_blocks: u64, num_epochs: u32, block: u64) -> Option<u64> {
    if accepted_at == 0 || epoch_blocks == 0 || block <= accepted_at {
        return None;
    }
    let e = (block - accepted_at - 1) / epoch_blocks;
    (e < u64::from(num_epochs)).then_some(e)
}

#[cfg(test)]
mod tests {
    use super::epoch_at;

    #[test]
    fn epochs_count_from_acceptance() {
        // accepted at 100, 10 blocks per epoch: epoch 0 is blocks 101..=110.
        assert_eq!(epoch_at(100, 10, 3, 100), None);
        assert_eq!(epoch_at(100, 10, 3, 101), Some(0));
        assert_eq!(epoch_at(100, 10, 3, 110), Some(0));
        assert_eq!(epoch_at(100, 10, 3, 111), Some(1));
        assert_eq!(epoch_at(100, 10, 3, 130), Some(2));
        assert_eq!(epoch_at(100, 10, 3, 131), None);
        assert_eq!(epoch_at(0, 10, 3, 5), None);
    }
}
