//! Agent steps: registering the provider, discovering and accepting its deals,
//! following their digests.

use super::agent::{ChainAgent, DealTrack, DisputeTrack};
use alloy_primitives::{Address, U256};
use dpor_chain::{ChainError, DealState};

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

    /// One deal: refresh it, accept it if Open; if Active prove the current epoch (which
    /// pins the digest in force first), then follow its digests and disputes, and close
    /// it once finished (last deadline + grace passed, no dispute open).
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
                // Never accept a deal whose epoch proofs no transaction can carry (a
                // market deployed before it bounded β·K would open one): its every
                // epoch would be missed and the collateral lost.
                let data = u64::from(info.block_size) * u64::from(info.samples_per_epoch.max(1));
                if data > dpor_core::block::MAX_EPOCH_PROOF_DATA_BYTES {
                    tracing::warn!(
                        deal = id,
                        block_size = info.block_size,
                        samples = info.samples_per_epoch,
                        "not accepting the deal: β·K = {data} bytes, above the {} an epoch proof may carry",
                        dpor_core::block::MAX_EPOCH_PROOF_DATA_BYTES
                    );
                    return;
                }
                self.accept(id, info.collateral).await
            }
            DealState::Active => {
                // Epoch first: it pins the digest in force before a newer posted digest
                // moves the store's "posted" pin (scan_deal_logs).
                self.step_epoch(id, &info, &params, now).await;
                self.scan_deal_logs(id, block).await;
                self.post_cosigned(id, &info).await;
                if self.config.close_finished && now >= params.dispute_period_end(&info) && info.open_disputes == 0 {
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
