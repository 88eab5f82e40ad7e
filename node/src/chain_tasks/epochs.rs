//! Agent step: the epoch proof of each Active deal, once per epoch of the market's
//! global time grid, inside the epoch's window `[start, start + epochSeconds)`
//! (block timestamps): it pins the digest in force at the epoch's start
//! (`digestInForce`; version 0 = none, nothing to prove and no fault), stores the
//! epoch seed (`touchSeed`: in dev mode the seed is a blockhash until stored; in beacon
//! mode it needs the beacon round recorded, `SeedUnavailable` until then), builds the K
//! whole-block proofs (ENCODING §8 v2), verifies them locally and sends them.

use super::agent::ChainAgent;
use super::prove::{coded_block_bytes, prove_epoch, ProveError};
use dpor_chain::{sample_seed, DealInfo, EpochStatus, MarketParams};

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
