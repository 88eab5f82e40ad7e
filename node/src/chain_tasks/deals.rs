//! Agent steps: registering the provider, discovering and accepting its deals,
//! following their digests.

use super::agent::{ChainAgent, DealTrack, DisputeTrack};
use alloy_primitives::{Address, U256};
use dpor_chain::{ChainError, DealInfo, DealState, MarketParams};

/// The node's acceptance policy: why it refuses the Open deal `deal` on a market with
/// `params`, `None` if it may accept it (funds permitting).
/// - β·K above [`dpor_core::block::MAX_EPOCH_PROOF_DATA_BYTES`]: no transaction can
///   carry its epoch proofs (a market deployed before it bounded β·K would open one), so
///   every epoch would be missed and the collateral lost.
/// - A term numEpochs·epochSeconds shorter than `uploadSeconds`: an owner that never
///   uploads holds the capacity and the collateral until `exitBeforeUpload`, which pays
///   the provider the epochs held but at most the escrow; with a term this short the
///   escrow would not cover the lock (second review, capacity lock).
pub(crate) fn refusal(deal: &DealInfo, params: &MarketParams) -> Option<String> {
    let data = u64::from(deal.block_size) * u64::from(deal.samples_per_epoch.max(1));
    if data > dpor_core::block::MAX_EPOCH_PROOF_DATA_BYTES {
        return Some(format!(
            "β·K = {data} bytes (block size {}, {} samples), above the {} an epoch proof may carry",
            deal.block_size,
            deal.samples_per_epoch,
            dpor_core::block::MAX_EPOCH_PROOF_DATA_BYTES
        ));
    }
    let term = u64::from(deal.num_epochs).saturating_mul(params.epoch_seconds);
    if term < params.upload_seconds {
        return Some(format!(
            "its term of {} epochs × {} s = {term} s is shorter than the market's uploadSeconds ({} s): if the \
             owner never uploaded, the escrow would not pay for the time the deal holds our capacity and collateral",
            deal.num_epochs, params.epoch_seconds, params.upload_seconds
        ));
    }
    None
}

impl ChainAgent {
    /// Registers with `config.register` if the account is not a provider yet
    /// (approving the stake first). Without terms, only checks (and logs) once.
    pub(crate) async fn ensure_registered(&mut self, me: Address) -> Result<(), ChainError> {
        if self.registered {
            return Ok(());
        }
        if self.market.get_provider(me).await?.registered {
            self.registered = true;
            return Ok(());
        }
        let Some(r) = self.config.register.clone() else {
            tracing::warn!(%me, "not registered as a provider and no registration terms given");
            self.registered = true; // nothing to do; deals can still be followed
            return Ok(());
        };
        let stake = U256::from(r.stake);
        let balance = self.market.balance_of(me).await?;
        if balance < stake {
            tracing::warn!(
                %me, %balance, %stake, token = %self.market.token_address(),
                "cannot register: the provider account holds fewer tokens than the stake. Send it at least `stake` \
                 tokens of this token (plus collateral_per_block × N for each deal it accepts); on the local chain \
                 mint them (docs/OPERATIONS.md, \"Funding the accounts\"). Retrying every poll."
            );
            return Ok(());
        }
        self.market.ensure_allowance(stake).await?;
        self.market
            .register(r.peer_id, r.multiaddrs, r.price_per_block_epoch, r.collateral_per_block, r.capacity_blocks, stake)
            .await?;
        tracing::info!(%me, stake = r.stake, "registered as a provider");
        self.registered = true;
        Ok(())
    }

    /// New `DealOpened` logs addressed to us become tracked deals.
    pub(crate) async fn scan_deals(&mut self, me: Address, block: u64) {
        if block < self.deal_cursor {
            return;
        }
        match self.market.deals_for_provider(me, self.deal_cursor).await {
            Ok(evs) => {
                for ev in evs {
                    self.deals.entry(ev.deal_id).or_insert_with(|| {
                        tracing::info!(deal = ev.deal_id, owner = %ev.owner, blocks = ev.num_blocks, "deal opened with us");
                        DealTrack { cursor: self.config.from_block, ..DealTrack::default() }
                    });
                }
                self.deal_cursor = block + 1;
            }
            Err(e) => tracing::warn!(error = %e, "cannot read DealOpened logs"),
        }
    }

    /// One deal: refresh it, accept it if Open and the policy allows ([`refusal`]); if
    /// Active prove the current epoch (which pins the digest in force first), mark the
    /// past epochs the beacon outage excuses, follow its digests and disputes, and close
    /// it once finished (last deadline + grace passed, no dispute open), or, never
    /// uploaded, leave it with `exitBeforeUpload` once its term is over.
    pub(crate) async fn step_deal(&mut self, me: Address, id: u64, block: u64, now: u64) {
        let info = match self.market.get_deal(id).await {
            Ok(i) => i,
            Err(e) => {
                tracing::warn!(deal = id, error = %e, "cannot read the deal");
                return;
            }
        };
        if info.provider != me {
            return;
        }
        let state = info.state;
        if let Some(t) = self.deals.get_mut(&id) {
            t.info = Some(info.clone());
        }
        let Some(params) = self.params else { return };
        match state {
            DealState::Open if self.config.auto_accept => {
                if let Some(why) = refusal(&info, &params) {
                    if let Some(t) = self.deals.get_mut(&id).filter(|t| !t.refused) {
                        t.refused = true;
                        tracing::warn!(deal = id, owner = %info.owner, "not accepting the deal: {why}");
                    }
                    return;
                }
                self.accept(id, info.collateral).await
            }
            DealState::Active => {
                // Epoch first: it pins the digest in force before a newer posted digest
                // moves the store's "posted" pin (scan_deal_logs).
                if self.config.epoch_proofs == super::EpochProofs::PerDeal {
                    self.step_epoch(id, &info, &params, now).await;
                }
                self.step_excused(id, &info, &params, now).await;
                self.scan_deal_logs(id, block).await;
                self.post_cosigned(id, &info).await;
                let upload_over = now >= info.accepted_at.saturating_add(params.upload_seconds);
                if self.config.close_finished
                    && info.digest_version == 0
                    && upload_over
                    && now >= params.last_deadline(&info)
                {
                    // Never uploaded: exitBeforeUpload pays us the epochs the deal held
                    // our capacity (closeDeal, possible only after the grace period,
                    // would refund the whole escrow to the owner).
                    self.exit_unused(id).await;
                } else if self.config.close_finished
                    && now >= params.dispute_period_end(&info)
                    && info.open_disputes == 0
                {
                    self.close(id).await;
                }
            }
            DealState::Completed | DealState::Terminated => {
                // late disputes can still be open on a terminated deal's logs; keep scanning
                self.scan_deal_logs(id, block).await;
            }
            _ => {}
        }
    }

    async fn close(&mut self, id: u64) {
        if self.deals.get(&id).is_some_and(|t| t.closed) {
            return;
        }
        match self.market.close_deal(id).await {
            Ok(tx) => {
                tracing::info!(deal = id, %tx, "closed the finished deal");
                if let Some(t) = self.deals.get_mut(&id) {
                    t.closed = true;
                }
            }
            Err(e) => tracing::warn!(deal = id, error = %e, "closeDeal failed; retrying next tick"),
        }
    }

    /// `exitBeforeUpload` on a deal whose owner never posted a digest, once its term and
    /// its upload period are over (the node accepts no term shorter than the upload
    /// period, but `requestExit` may shorten one).
    async fn exit_unused(&mut self, id: u64) {
        if self.deals.get(&id).is_some_and(|t| t.closed) {
            return;
        }
        match self.market.exit_before_upload(id).await {
            Ok(tx) => {
                tracing::info!(deal = id, %tx, "the owner never uploaded: left the deal (exitBeforeUpload), paid for the epochs it held");
                if let Some(t) = self.deals.get_mut(&id) {
                    t.closed = true;
                }
            }
            Err(e) => tracing::warn!(deal = id, error = %e, "exitBeforeUpload failed; retrying next tick"),
        }
    }

    async fn accept(&mut self, id: u64, collateral: u128) {
        if let Some(me) = self.market.account() {
            if let Ok(balance) = self.market.balance_of(me).await {
                if balance < U256::from(collateral) {
                    tracing::warn!(
                        deal = id, %me, %balance, collateral, token = %self.market.token_address(),
                        "cannot accept the deal: the provider account holds fewer tokens than its collateral \
                         (collateral_per_block × N). Send the account tokens (docs/OPERATIONS.md, \"Funding the \
                         accounts\"); retrying every poll."
                    );
                    return;
                }
            }
        }
        if let Err(e) = self.market.ensure_allowance(U256::from(collateral)).await {
            tracing::warn!(deal = id, error = %e, "cannot approve the collateral");
            return;
        }
        match self.market.accept_deal(id).await {
            Ok((at, start_epoch)) => {
                tracing::info!(deal = id, accepted_at = at, start_epoch, collateral, "accepted the deal")
            }
            Err(e) => tracing::warn!(deal = id, error = %e, "acceptDeal failed"),
        }
    }

    /// Posts the digest the store says to post ([`super::NodeRuns::cosigned_to_post`],
    /// issue 22): the newest co-signed digest, with the owner's signature that came
    /// with its `Cosign`, while an older co-signed digest is not on chain either. Once
    /// it is on chain the market refuses every lower version (`StaleVersion`), so the
    /// owner can no longer post an older state whose runs the node is about to drop;
    /// the store releases them when the `DigestPosted` log is seen. A digest of
    /// another N (a resize not on chain yet) waits; `StaleVersion` (someone posted
    /// first) is fine.
    pub(crate) async fn post_cosigned(&mut self, id: u64, info: &dpor_chain::DealInfo) {
        let (digest, owner_sig, provider_sig) = match self.runs.cosigned_to_post(id) {
            Ok(Some(x)) => x,
            Ok(None) => return,
            Err(e) => {
                tracing::warn!(deal = id, error = %e, "cannot read the co-signed digests");
                return;
            }
        };
        if digest.version <= info.digest_version || digest.numBlocks != info.num_blocks {
            return;
        }
        let version = digest.version;
        match self.market.post_digest(&digest, owner_sig.into(), provider_sig.into()).await {
            Ok(hash) => tracing::info!(deal = id, version, %hash, "posted the latest co-signed digest (older co-signed ones retire)"),
            Err(e) if e.revert_name() == Some("StaleVersion") => {
                tracing::debug!(deal = id, version, "a digest of this version or above is already posted")
            }
            Err(e) => tracing::warn!(deal = id, version, error = %e, "postDigest of the latest co-signed digest failed; retrying next tick"),
        }
    }

    /// New `DigestPosted` (→ `NodeRuns::digest_posted`) and `DisputeOpened` logs of `id`.
    async fn scan_deal_logs(&mut self, id: u64, block: u64) {
        let Some(from) = self.deals.get(&id).map(|t| t.cursor) else { return };
        if block < from {
            return;
        }
        let digests = match self.market.digests(id, from).await {
            Ok(d) => d,
            Err(e) => {
                tracing::warn!(deal = id, error = %e, "cannot read DigestPosted logs");
                return;
            }
        };
        let disputes = match self.market.disputes_for_deal(id, from).await {
            Ok(d) => d,
            Err(e) => {
                tracing::warn!(deal = id, error = %e, "cannot read DisputeOpened logs");
                return;
            }
        };
        // Disputes first: a dispute on a digest that a later digest of this scan
        // replaces (the latest posted pin moves, or the co-signed digests it retires
        // are released) must pin its runs before that release can delete them. (The
        // dispute logs were read after the digest logs, so they cover every dispute
        // opened before the newest digest of this scan.)
        let known: std::collections::HashMap<_, _> = digests.iter().map(|p| (p.hash, p.digest.clone())).collect();
        for q in disputes {
            let track = self.disputes.entry(q.dispute_id).or_insert_with(|| {
                tracing::warn!(deal = id, dispute = q.dispute_id, tag = q.run_tag, position = q.position,
                    chunk = q.chunk_index, deadline = q.deadline, "dispute opened against us");
                DisputeTrack {
                    deal: id,
                    digest_hash: q.digest_hash,
                    run_tag: q.run_tag,
                    position: q.position,
                    chunk_index: q.chunk_index,
                    deadline: q.deadline,
                    pinned: false,
                    gave_up: false,
                    closed: false,
                }
            });
            if !track.pinned {
                let digest = known.get(&q.digest_hash).or_else(|| self.digests.get(&q.digest_hash));
                if let Some(d) = digest {
                    match self.runs.dispute_opened(id, q.dispute_id, d) {
                        Ok(()) => track.pinned = true,
                        Err(e) => tracing::error!(deal = id, dispute = q.dispute_id, error = %e, "the store could not pin the dispute's runs"),
                    }
                }
            }
        }
        for p in digests {
            if self.digests.contains_key(&p.hash) {
                continue;
            }
            if let Err(e) = self.runs.digest_posted(id, &p.digest) {
                tracing::error!(deal = id, version = p.digest.version, error = %e, "the store refused a posted digest");
                return; // retried next tick: the cursor does not move
            }
            tracing::info!(deal = id, version = p.digest.version, hash = %p.hash, "digest posted");
            self.digests.insert(p.hash, p.digest);
        }
        if let Some(t) = self.deals.get_mut(&id) {
            t.cursor = block + 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::refusal;
    use alloy_primitives::{Address, B256};
    use dpor_chain::{DealInfo, DealState, MarketParams};

    fn params(epoch_seconds: u64, upload_seconds: u64) -> MarketParams {
        MarketParams {
            genesis: 1_700_000_000,
            epoch_seconds,
            answer_seconds: 86_400,
            grace_seconds: 172_800,
            upload_seconds,
            exit_notice_epochs: 7,
            dispute_bond: 100,
            max_failures: 3,
            beacon: Address::ZERO,
        }
    }

    fn deal(num_epochs: u32, block_size: u32, samples_per_epoch: u8) -> DealInfo {
        DealInfo {
            id: 1,
            owner: Address::ZERO,
            provider: Address::ZERO,
            state: DealState::Open,
            num_epochs,
            term_epochs: num_epochs,
            block_size,
            lambda: 16,
            samples_per_epoch,
            num_blocks: 1 << 20,
            accepted_at: 0,
            start_epoch: 0,
            failures: 0,
            open_disputes: 0,
            digest_version: 0,
            write_count: 0,
            digest_hash: B256::ZERO,
            first_digest_at: 0,
            settled_with_digest: 0,
            price_per_epoch: 1,
            escrow: u128::from(num_epochs),
            collateral: 6,
            slash_per_fault: 2,
        }
    }

    /// Second review, capacity lock: a term shorter than uploadSeconds is refused, one
    /// exactly as long (or longer) is accepted.
    #[test]
    fn refuses_terms_shorter_than_the_upload_period() {
        let day = 86_400;
        let why = refusal(&deal(1, 4096, 1), &params(day, 2 * day)).expect("1 epoch of 1 day < 2 days: refused");
        assert!(why.contains("shorter than the market's uploadSeconds"), "{why}");
        assert_eq!(refusal(&deal(2, 4096, 1), &params(day, 2 * day)), None);
        assert_eq!(refusal(&deal(1, 4096, 1), &params(day, day)), None);
        // 6-hour epochs, a 1-day upload period: 4 epochs are needed
        assert!(refusal(&deal(3, 4096, 1), &params(6 * 3600, day)).is_some());
        assert_eq!(refusal(&deal(4, 4096, 1), &params(6 * 3600, day)), None);
        // no overflow on huge terms
        assert_eq!(refusal(&deal(u32::MAX, 4096, 1), &params(u64::MAX, day)), None);
    }

    /// The older rule stays: β·K above the proof bound is refused whatever the term.
    #[test]
    fn refuses_unprovable_block_sizes() {
        let why = refusal(&deal(100, 1 << 20, 1), &params(86_400, 86_400)).expect("refused");
        assert!(why.contains("an epoch proof may carry"), "{why}");
    }
}
