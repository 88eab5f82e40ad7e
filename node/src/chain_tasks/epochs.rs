//! Agent step: the epoch proof of each Active deal with a digest, once per epoch,
//! inside the epoch's window, verified locally before sending.

use super::agent::ChainAgent;
use super::prove::{coded_block_bytes, prove_epoch, ProveError};
use dpor_chain::auditor_ops::epoch_at;
use dpor_chain::{DealInfo, EpochStatus};

impl ChainAgent {
    /// Proves the epoch whose window holds the next block, if not done yet.
    pub(crate) async fn step_epoch(&mut self, id: u64, deal: &DealInfo, block: u64) {
        if !deal.has_digest() {
            return;
        }
        let Some(eb) = self.epoch_blocks else { return };
        let Some(epoch) = epoch_at(deal.accepted_at, eb, deal.num_epochs, block + 1) else { return };
        if self.deals.get(&id).is_some_and(|t| t.done_epochs.contains(&epoch)) {
            return;
        }
        match self.market.epoch_status(id, epoch).await {
            Ok(EpochStatus::None) => {}
            Ok(status) => {
                tracing::debug!(deal = id, epoch, ?status, "epoch already settled");
                self.mark_epoch_done(id, epoch);
                return;
            }
            Err(e) => {
                tracing::warn!(deal = id, epoch, error = %e, "cannot read the epoch status");
                return;
            }
        }
        let Some(digest) = self.digest_for(id, deal.digest_hash).await else { return };
        let seed = match self.market.epoch_seed(id, epoch).await {
            Ok(Some(s)) => s,
            Ok(None) => return, // seed block not mined yet
            Err(e) => {
                tracing::warn!(deal = id, epoch, error = %e, "cannot read the epoch seed");
                return;
            }
        };
        let cb = match coded_block_bytes(deal.block_size) {
            Ok(cb) => cb,
            Err(e) => {
                tracing::error!(deal = id, error = %e, "cannot prove this deal");
                self.mark_epoch_done(id, epoch);
                return;
            }
        };
        let (runs, dh, k, d) = (self.runs.clone(), deal.digest_hash, deal.samples_per_epoch, digest.clone());
        let built = tokio::task::spawn_blocking(move || prove_epoch(runs.as_ref(), id, &d, dh, seed, cb, k)).await;
        let proofs = match built {
            Ok(Ok(p)) => p,
            Ok(Err(e @ ProveError::Storage { .. })) => {
                tracing::warn!(deal = id, epoch, error = %e, "cannot read a sampled block; retrying next tick");
                return;
            }
            Ok(Err(e)) => {
                tracing::error!(deal = id, epoch, error = %e,
                    "a sampled block does not match the digest (data lost?): not sending a proof that must fail");
                self.mark_epoch_done(id, epoch);
                return;
            }
            Err(e) => {
                tracing::error!(deal = id, epoch, error = %e, "proof task failed");
                return;
            }
        };
        match self.market.submit_epoch_proof(id, epoch, &digest, proofs).await {
            Ok(tx) => {
                tracing::info!(deal = id, epoch, %tx, "epoch proven");
                self.mark_epoch_done(id, epoch);
            }
            Err(e) if e.revert_name() == Some("EpochSettled") => self.mark_epoch_done(id, epoch),
            Err(e) => tracing::warn!(deal = id, epoch, error = %e, "submitEpochProof failed; retrying next tick"),
        }
    }

    fn mark_epoch_done(&mut self, id: u64, epoch: u64) {
        if let Some(t) = self.deals.get_mut(&id) {
            t.done_epochs.insert(epoch);
        }
    }
}
