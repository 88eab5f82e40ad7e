//! Epochs (seeds, windows, settlement) and the auditor's calls: audit records,
//! disputes, slashing, missed epochs.

use crate::bindings::DporMarket;
use crate::client::{to_u64, Market};
use crate::error::ChainError;
use crate::types::{DisputeInfo, EpochStatus, EpochWindow, MarketParams};
use alloy_primitives::{B256, U256};

impl Market {
    /// The market's time and economic parameters (several views; immutable, so callers
    /// may cache them).
    pub async fn params(&self) -> Result<MarketParams, ChainError> {
        Ok(MarketParams {
            genesis: self.view("genesis", self.market.genesis()).await?,
            epoch_seconds: self.view("epochSeconds", self.market.epochSeconds()).await?,
            answer_seconds: self.view("answerSeconds", self.market.answerSeconds()).await?,
            grace_seconds: self.view("graceSeconds", self.market.graceSeconds()).await?,
            upload_seconds: self.view("uploadSeconds", self.market.uploadSeconds()).await?,
            exit_notice_epochs: self.view("exitNoticeEpochs", self.market.exitNoticeEpochs()).await?,
            dispute_bond: self.view("disputeBond", self.market.disputeBond()).await?,
            max_failures: self.view("maxFailures", self.market.maxFailures()).await?,
            beacon: self.view("beacon", self.market.beacon()).await?,
        })
    }

    /// Seconds per epoch (`epochSeconds`).
    pub async fn epoch_seconds(&self) -> Result<u64, ChainError> {
        self.view("epochSeconds", self.market.epochSeconds()).await
    }

    /// The bond a challenger locks per dispute (`disputeBond`, wei).
    pub async fn dispute_bond(&self) -> Result<u128, ChainError> {
        self.view("disputeBond", self.market.disputeBond()).await
    }

    /// The stored seed of global epoch `g` (`globalSeeds`), `None` if not stored yet.
    pub async fn global_seed(&self, g: u64) -> Result<Option<B256>, ChainError> {
        let s = self.view("globalSeeds", self.market.globalSeeds(g)).await?;
        Ok((s != B256::ZERO).then_some(s))
    }

    /// Stores the seed of global epoch `g` if not stored yet (`recordSeed`, anyone):
    /// beacon mode needs the beacon round `roundAt(start_g)` recorded first
    /// (`SeedUnavailable(round)` otherwise); dev mode needs start_g to have passed
    /// (`EpochNotStarted`). Returns the transaction hash.
    pub async fn record_seed(&self, g: u64) -> Result<B256, ChainError> {
        Ok(self.send("recordSeed", self.market.recordSeed(g)).await?.transaction_hash)
    }

    /// Stores the global seed of deal epoch `epoch` if needed (`touchSeed`, anyone).
    /// Errors as [`Market::record_seed`], plus `WrongDealState`, `EpochOutOfRange`.
    pub async fn touch_seed(&self, deal_id: u64, epoch: u64) -> Result<B256, ChainError> {
        Ok(self.send("touchSeed", self.market.touchSeed(U256::from(deal_id), epoch)).await?.transaction_hash)
    }

    /// The per-deal sample seed S of epoch `epoch` (`peekSeed`): from the stored global
    /// seed, else what `touchSeed` would store now; `None` while unavailable (the
    /// epoch has not started, the beacon round is not recorded, the deal not accepted).
    /// In dev mode an untouched seed changes with every block until stored: provers
    /// touch it first ([`Market::touch_seed`]).
    pub async fn epoch_seed(&self, deal_id: u64, epoch: u64) -> Result<Option<B256>, ChainError> {
        match self.view("peekSeed", self.market.peekSeed(U256::from(deal_id), epoch)).await {
            Ok(seed) => Ok(Some(seed)),
            Err(e)
                if matches!(e.revert_name(), Some(n) if n == "EpochNotStarted" || n == "WrongDealState" || n.starts_with("SeedUnavailable")) =>
            {
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// The sample seed S of a deal epoch if it can no longer change: the stored global
    /// seed, or in beacon mode the recorded beacon round (what any later touch stores).
    /// `None` in dev mode while the global seed is not stored (a blockhash that moves
    /// with every block until the first `touchSeed`), or while unavailable.
    pub async fn stable_epoch_seed(&self, deal_id: u64, epoch: u64) -> Result<Option<B256>, ChainError> {
        let deal = self.get_deal(deal_id).await?;
        if !deal.accepted() || epoch >= u64::from(deal.num_epochs) {
            return Ok(None);
        }
        if let Some(g) = self.global_seed(deal.start_epoch + epoch).await? {
            return Ok(Some(crate::sampling::sample_seed(g, deal_id, epoch)));
        }
        if self.view("devSeeds", self.market.devSeeds()).await? {
            return Ok(None);
        }
        self.epoch_seed(deal_id, epoch).await
    }

    /// Sample `j` of an epoch (`epochSample`) against the digest in force for it.
    /// Errors: `NoDigest`, `SeedUnavailable`, `EpochNotStarted`, `EpochOutOfRange`.
    pub async fn epoch_sample(&self, deal_id: u64, epoch: u64, j: u64) -> Result<(u8, u64), ChainError> {
        let r = self.view("epochSample", self.market.epochSample(U256::from(deal_id), epoch, U256::from(j))).await?;
        Ok((r.runTag, r.position))
    }

    /// The proof window of an epoch: timestamps `[start, deadline)`. Errors:
    /// `EpochOutOfRange`, `UnknownDeal`.
    pub async fn epoch_window(&self, deal_id: u64, epoch: u64) -> Result<EpochWindow, ChainError> {
        let w = self.view("epochWindow", self.market.epochWindow(U256::from(deal_id), epoch)).await?;
        Ok(EpochWindow { start: to_u64(w.start)?, deadline: to_u64(w.deadline)? })
    }

    /// The settlement of an epoch.
    pub async fn epoch_status(&self, deal_id: u64, epoch: u64) -> Result<EpochStatus, ChainError> {
        let s = self.view("epochStatus", self.market.epochStatus(U256::from(deal_id), epoch)).await?;
        Ok(EpochStatus::from_u8(s))
    }

    /// The deal epoch whose window contains the latest block's timestamp; `None` if the
    /// deal was not accepted, its first epoch has not started, or all are over.
    pub async fn current_epoch(&self, deal_id: u64) -> Result<Option<u64>, ChainError> {
        let deal = self.get_deal(deal_id).await?;
        let params = self.params().await?;
        let now = self.latest_timestamp().await?;
        Ok(params.deal_epoch_at(&deal, now))
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

    /// Opens a dispute on one sample (run tag, position, chunk) of the deal's latest
    /// digest (`version` must be the latest posted), approving the bond first if the
    /// allowance is short; the provider must answer within `answerSeconds`. Returns the
    /// dispute id. Errors: `WrongDealState`, `StaleVersion`, `WrongSample`, `NoDigest`,
    /// `EpochOutOfRange`, `DisputePeriodOver` (after last deadline + grace), ERC-20 errors.
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

    /// Marks an unsettled epoch missed after its deadline (anyone): escrow back to the
    /// owner, and one fault slashed only if a digest was in force at the epoch's start.
    /// Errors: `EpochNotOver`, `EpochSettled`, `WrongDealState`.
    pub async fn mark_missed(&self, deal_id: u64, epoch: u64) -> Result<B256, ChainError> {
        Ok(self.send("markMissed", self.market.markMissed(U256::from(deal_id), epoch)).await?.transaction_hash)
    }
}
