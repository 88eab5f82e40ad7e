//! Agent step: disputes on our deals: pin their digest's runs, answer with the named
//! sample against the dispute's stored digest (verified locally first), release when
//! answered or slashed.

use super::agent::ChainAgent;
use super::prove::{coded_block_bytes, prove_sample, ProveError};
use dpor_chain::DisputeState;
use dpor_core::audit::{ChunkSample, RunTag};

impl ChainAgent {
    /// Advances every dispute not closed yet.
    pub(crate) async fn step_disputes(&mut self, now: u64) {
        let ids: Vec<u64> = self.disputes.iter().filter(|(_, q)| !q.closed).map(|(id, _)| *id).collect();
        for id in ids {
            self.step_dispute(id, now).await;
        }
    }

    async fn step_dispute(&mut self, id: u64, now: u64) {
        let Some((deal, hash)) = self.disputes.get(&id).map(|q| (q.deal, q.digest_hash)) else { return };
        let Some(digest) = self.digest_for(deal, hash).await else { return };
        if let Some(q) = self.disputes.get_mut(&id) {
            if !q.pinned {
                match self.runs.dispute_opened(deal, id, &digest) {
                    Ok(()) => q.pinned = true,
                    Err(e) => tracing::error!(deal, dispute = id, error = %e, "the store could not pin the dispute's runs"),
                }
            }
        }
        let state = match self.market.get_dispute(id).await {
            Ok(d) => d.state,
            Err(e) => {
                tracing::warn!(dispute = id, error = %e, "cannot read the dispute");
                return;
            }
        };
        match state {
            DisputeState::Open => self.answer(id, deal, digest, now).await,
            DisputeState::Answered | DisputeState::Slashed => {
                if let Err(e) = self.runs.dispute_closed(deal, id) {
                    tracing::warn!(dispute = id, error = %e, "the store could not release the dispute");
                    return;
                }
                tracing::info!(deal, dispute = id, ?state, "dispute closed");
                if let Some(q) = self.disputes.get_mut(&id) {
                    q.closed = true;
                }
            }
            DisputeState::None => {}
        }
    }

    async fn answer(&mut self, id: u64, deal: u64, digest: dpor_core::digest::Digest, now: u64) {
        let Some(q) = self.disputes.get(&id) else { return };
        if q.gave_up || now > q.deadline {
            return;
        }
        let sample = ChunkSample { tag: RunTag(u32::from(q.run_tag)), position: q.position, chunk: u64::from(q.chunk_index) };
        let block_size = self.deals.get(&deal).and_then(|t| t.info.as_ref()).map(|i| i.block_size);
        let block_size = match block_size {
            Some(b) => b,
            None => match self.market.get_deal(deal).await {
                Ok(i) => i.block_size,
                Err(e) => {
                    tracing::warn!(deal, error = %e, "cannot read the deal");
                    return;
                }
            },
        };
        let cb = match coded_block_bytes(block_size) {
            Ok(cb) => cb,
            Err(e) => {
                tracing::error!(deal, error = %e, "cannot answer");
                return;
            }
        };
        let (runs, d) = (self.runs.clone(), digest.clone());
        let built = tokio::task::spawn_blocking(move || prove_sample(runs.as_ref(), deal, &d, cb, &sample)).await;
        let proof = match built {
            Ok(Ok(p)) => p,
            Ok(Err(e @ ProveError::Storage { .. })) => {
                tracing::warn!(dispute = id, error = %e, "cannot read the disputed block; retrying next tick");
                return;
            }
            Ok(Err(e)) => {
                tracing::error!(deal, dispute = id, error = %e,
                    "the disputed chunk does not match the digest (data lost?): cannot answer, expect a slash");
                if let Some(q) = self.disputes.get_mut(&id) {
                    q.gave_up = true;
                }
                return;
            }
            Err(e) => {
                tracing::error!(dispute = id, error = %e, "proof task failed");
                return;
            }
        };
        match self.market.answer_dispute(id, &digest, proof).await {
            Ok(tx) => tracing::info!(deal, dispute = id, %tx, "dispute answered"),
            Err(e) => tracing::warn!(dispute = id, error = %e, "answerDispute failed; retrying next tick"),
        }
    }
}
