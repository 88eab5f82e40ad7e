//! Agent step: the epoch proof of each Active deal, once per epoch of the market's
//! global time grid, inside the epoch's window `[start, start + epochSeconds)`
//! (block timestamps): it pins the digest in force at the epoch's start
//! (`digestInForce`; version 0 = none, nothing to prove and no fault), stores the
//! epoch seed (`touchSeed`: in dev mode the seed is a blockhash until stored; in beacon
//! mode it needs the beacon round recorded, `SeedUnavailable` until then), builds the K
//! whole-block proofs (ENCODING §8 v2), verifies them locally and sends them.
//!
//! Beacon outages: an epoch whose round nobody relays cannot be proven (`touchSeed`
//! keeps failing with `SeedUnavailable` until its window closes). The market excuses it
//! (no fault, no payment) when it is marked missed and its round was not recorded before
//! the middle of its window; left unmarked, `closeDeal` would count it as a fault. So
//! [`ChainAgent::step_excused`] marks every such epoch of ours once its deadline passed.

use super::agent::ChainAgent;
use super::prove::{coded_block_bytes, prove_epoch, ProveError};
use dpor_chain::{sample_seed, DealInfo, EpochStatus, MarketParams};

/// At most this many past epochs of one deal are checked for an excuse per tick.
const EXCUSE_CHECKS_PER_TICK: u64 = 8;

impl ChainAgent {
    /// Proves the epoch whose window holds `now` (the latest block's timestamp), if not
    /// done yet; releases the pins of the epochs before it.
    pub(crate) async fn step_epoch(&mut self, id: u64, deal: &DealInfo, params: &MarketParams, now: u64) {
        let Some(epoch) = params.deal_epoch_at(deal, now) else { return };
        if self.deals.get(&id).is_some_and(|t| t.released_before < epoch) {
            match self.runs.epochs_released(id, epoch) {
                Ok(()) => {
                    if let Some(t) = self.deals.get_mut(&id) {
                        t.released_before = epoch;
                    }
                }
                Err(e) => tracing::warn!(deal = id, epoch, error = %e, "cannot release the pins of past epochs"),
            }
        }
        if self.deals.get(&id).is_some_and(|t| t.done_epochs.contains(&epoch)) {
            return;
        }
        match self.market.epoch_status(id, epoch).await {
            Ok(EpochStatus::None) => {}
            Ok(status) => {
                tracing::debug!(deal = id, epoch, ?status, "epoch already settled");
                self.epoch_done(id, epoch);
                return;
            }
            Err(e) => {
                tracing::warn!(deal = id, epoch, error = %e, "cannot read the epoch status");
                return;
            }
        }
        let inforce = match self.market.digest_in_force(id, epoch).await {
            Ok(f) => f,
            Err(e) => {
                tracing::warn!(deal = id, epoch, error = %e, "cannot read the digest in force");
                return;
            }
        };
        if inforce.version == 0 {
            tracing::info!(deal = id, epoch, "no digest in force at the epoch's start: nothing to prove (not a fault)");
            self.epoch_done(id, epoch);
            return;
        }
        let Some(digest) = self.digest_for(id, inforce.hash).await else { return };
        if self.deals.get(&id).is_some_and(|t| t.pinned_epoch != Some(epoch)) {
            if let Err(e) = self.runs.epoch_pinned(id, epoch, &digest) {
                tracing::warn!(deal = id, epoch, error = %e, "cannot pin the digest in force; retrying next tick");
                return;
            }
            if let Some(t) = self.deals.get_mut(&id) {
                t.pinned_epoch = Some(epoch);
            }
        }
        let g = deal.start_epoch + epoch;
        let global = match self.market.global_seed(g).await {
            Ok(Some(s)) => s,
            Ok(None) => {
                match self.market.touch_seed(id, epoch).await {
                    Ok(tx) => tracing::info!(deal = id, epoch, global_epoch = g, %tx, "stored the epoch seed"),
                    Err(e) => {
                        // Beacon mode: SeedUnavailable(round) until the relay records the round.
                        tracing::info!(deal = id, epoch, global_epoch = g, error = %e, "epoch seed not available yet");
                    }
                }
                return; // read the stored seed next tick
            }
            Err(e) => {
                tracing::warn!(deal = id, epoch, error = %e, "cannot read the global seed");
                return;
            }
        };
        let seed = sample_seed(global, id, epoch);
        let cb = match coded_block_bytes(deal.block_size) {
            Ok(cb) => cb,
            Err(e) => {
                tracing::error!(deal = id, error = %e, "cannot prove this deal");
                self.epoch_done(id, epoch);
                return;
            }
        };
        let (runs, dh, k, d) = (self.runs.clone(), inforce.hash, deal.samples_per_epoch, digest.clone());
        let built = tokio::task::spawn_blocking(move || prove_epoch(runs.as_ref(), id, &d, dh, seed, cb, k)).await;
        let proofs = match built {
            Ok(Ok(p)) => p,
            Ok(Err(e @ ProveError::Storage { .. })) => {
                tracing::warn!(deal = id, epoch, error = %e, "cannot read a sampled block; retrying next tick");
                return;
            }
            Ok(Err(e)) => {
                tracing::error!(deal = id, epoch, error = %e,
                    "a sampled block does not match the digest in force (data lost?): not sending a proof that must fail");
                self.epoch_done(id, epoch);
                return;
            }
            Err(e) => {
                tracing::error!(deal = id, epoch, error = %e, "proof task failed");
                return;
            }
        };
        match self.market.submit_epoch_proof(id, epoch, &digest, proofs).await {
            Ok(tx) => {
                tracing::info!(deal = id, epoch, version = digest.version, %tx, "epoch proven");
                self.epoch_done(id, epoch);
            }
            Err(e) if e.revert_name() == Some("EpochSettled") => self.epoch_done(id, epoch),
            Err(e) => tracing::warn!(deal = id, epoch, error = %e, "submitEpochProof failed; retrying next tick"),
        }
    }

    /// Beacon mode: `markMissed` on each epoch of `id` that is over, unsettled, had a
    /// digest in force and whose beacon round was not recorded before the middle of its
    /// window, so the market excuses it (`EpochExcused`: no fault, no payment) instead of
    /// `closeDeal` faulting it later. An unproven epoch whose round came in time is left
    /// alone (marking it would fault us now rather than at close). Checks each past epoch
    /// once (a cursor), at most [`EXCUSE_CHECKS_PER_TICK`] per tick; a chain error stops
    /// the pass and the epoch is retried next tick. Nothing in dev mode.
    pub(crate) async fn step_excused(&mut self, id: u64, deal: &DealInfo, params: &MarketParams, now: u64) {
        if params.dev_seeds() {
            return;
        }
        let Some(from) = self.deals.get(&id).map(|t| t.excuse_checked_below) else { return };
        let over = params.epochs_over(deal, now);
        for epoch in from..over.min(from.saturating_add(EXCUSE_CHECKS_PER_TICK)) {
            if !self.excuse_epoch(id, deal, params, epoch).await {
                return;
            }
            if let Some(t) = self.deals.get_mut(&id) {
                t.excuse_checked_below = epoch + 1;
            }
        }
    }

    /// One epoch of [`ChainAgent::step_excused`]; false on a chain error (retry).
    async fn excuse_epoch(&mut self, id: u64, deal: &DealInfo, params: &MarketParams, epoch: u64) -> bool {
        let start = params.window(deal, epoch).start;
        // A fault only with a digest in force: the first digest posted strictly before start.
        if deal.first_digest_at == 0 || deal.first_digest_at >= start {
            return true;
        }
        match self.market.epoch_status(id, epoch).await {
            Ok(EpochStatus::None) => {}
            Ok(_) => return true,
            Err(e) => {
                tracing::warn!(deal = id, epoch, error = %e, "cannot read the epoch status");
                return false;
            }
        }
        let round = match self.market.beacon_round_at(params.beacon, start).await {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(deal = id, epoch, error = %e, "cannot read the epoch's beacon round");
                return false;
            }
        };
        let recorded = match self.market.beacon_recorded_at(params.beacon, round).await {
            Ok(t) => t,
            Err(e) => {
                tracing::warn!(deal = id, epoch, round, error = %e, "cannot read when the beacon round was recorded");
                return false;
            }
        };
        if !params.seed_recorded_late(start, recorded) {
            tracing::warn!(deal = id, epoch, round, recorded_at = ?recorded,
                "epoch not proven although its beacon round was recorded in time: a fault (closeDeal counts it)");
            return true;
        }
        match self.market.mark_missed(id, epoch).await {
            Ok(tx) => {
                tracing::info!(deal = id, epoch, round, recorded_at = ?recorded, %tx,
                    "beacon outage: the epoch's round was not recorded before mid-window; marked it missed, excused (no fault, no payment)");
                true
            }
            Err(e) if e.revert_name() == Some("EpochSettled") => true,
            Err(e) => {
                tracing::warn!(deal = id, epoch, error = %e, "markMissed of an excused epoch failed; retrying next tick");
                false
            }
        }
    }

    /// The epoch is settled or given up: never tried again; its pin may go.
    fn epoch_done(&mut self, id: u64, epoch: u64) {
        if let Some(t) = self.deals.get_mut(&id) {
            t.done_epochs.insert(epoch);
        }
        // Its window may still be open; the pin goes with the next epoch's release, or
        // now if it was ours alone (releasing below epoch + 1 keeps later pins).
        if let Err(e) = self.runs.epochs_released(id, epoch + 1) {
            tracing::warn!(deal = id, epoch, error = %e, "cannot release the epoch's pin");
        } else if let Some(t) = self.deals.get_mut(&id) {
            t.released_before = t.released_before.max(epoch + 1);
        }
    }
}
