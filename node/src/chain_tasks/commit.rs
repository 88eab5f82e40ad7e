//! Agent step in commitment mode (docs/COMMITMENTS.md §6): once per global epoch g,
//! when the seed is available, the response of every deal with an epoch at g and a
//! digest in force (the K whole coded blocks of today's epoch proof, checked locally),
//! one commitment over them (sorted by deal id), the responses kept durably first, then
//! `commitEpoch`. Then: challenges of our entries (and our safety draws) answered
//! with the kept responses, and kept responses dropped once their windows are over.

use super::agent::ChainAgent;
use super::prove::{coded_block_bytes, prove_epoch};
use super::NodeRuns;
use alloy_primitives::{Address, B256};
use dpor_chain::{sample_seed, BlockProof, ChallengeState, DealInfo, DealState, MarketParams};
use dpor_core::commitment::{response_hash, Commitment, Entry};
use dpor_core::digest::Digest;
use dpor_proto::messages::{WireBlockProof, WireEpochResponse};
use serde_bytes::ByteBuf;
use std::sync::Arc;

/// What the agent remembers of its commitments.
#[derive(Debug, Default)]
pub(crate) struct CommitTrack {
    /// Global epochs committed (or found committed on chain).
    pub(crate) committed: std::collections::BTreeSet<u64>,
    /// Next block to scan `ChallengeOpened` logs from.
    pub(crate) challenge_cursor: u64,
    /// Challenges answered, faulted or given up: not looked at again.
    pub(crate) challenges_done: std::collections::BTreeSet<u64>,
    /// Challenges seen and still to answer: (id, deal, epoch).
    pub(crate) challenges_open: Vec<(u64, u64, u64)>,
}

/// One deal's part of a commitment being built.
struct Planned {
    deal: u64,
    epoch: u64,
    digest: Digest,
    digest_hash: B256,
    seed: B256,
    block_bytes: usize,
    k: u8,
}

/// The response of one deal epoch as the node keeps and serves it.
pub(crate) fn wire_response(
    deal: u64,
    epoch: u64,
    global_epoch: u64,
    version: u64,
    proofs: &[BlockProof],
) -> WireEpochResponse {
    WireEpochResponse {
        deal,
        epoch,
        global_epoch,
        version,
        root: B256::ZERO,
        leaf_count: 0,
        leaf_index: 0,
        leaf_path: Vec::new(),
        proofs: proofs
            .iter()
            .map(|p| WireBlockProof {
                run_tag: p.runTag,
                position: p.position,
                block: ByteBuf::from(p.codedBlock.to_vec()),
                run_path: p.runPath.clone(),
            })
            .collect(),
    }
}

/// The on-chain proofs of a kept response.
pub fn chain_proofs(r: &WireEpochResponse) -> Vec<BlockProof> {
    r.proofs.iter().map(|p| dpor_chain::block_proof_from(p.run_tag, p.position, &p.block, &p.run_path)).collect()
}

/// Builds every planned response (blocking: reads the store), returns the entries
/// (sorted by deal id) with their wire responses; a deal whose blocks do not prove is
/// left out and logged (a challenge of it will fault it: the data is lost).
fn build_responses(runs: &dyn NodeRuns, global_epoch: u64, plan: Vec<Planned>) -> Vec<(Entry, WireEpochResponse)> {
    let mut out = Vec::with_capacity(plan.len());
    for p in plan {
        match prove_epoch(runs, p.deal, &p.digest, p.digest_hash, p.seed, p.block_bytes, p.k) {
            Ok(proofs) => {
                let blocks: Vec<&[u8]> = proofs.iter().map(|b| b.codedBlock.as_ref()).collect();
                let entry =
                    Entry { deal_id: p.deal, epoch: p.epoch, version: p.digest.version, response_hash: response_hash(p.seed, &blocks) };
                out.push((entry, wire_response(p.deal, p.epoch, global_epoch, p.digest.version, &proofs)));
            }
            Err(e) => tracing::error!(deal = p.deal, epoch = p.epoch, error = %e,
                "cannot build this deal's epoch response (data lost?): left out of the commitment"),
        }
    }
    out.sort_by_key(|(e, _)| e.deal_id);
    out
}

/// Encoded responses to keep: (deal, deal epoch, CBOR of a [`WireEpochResponse`]).
pub(crate) type KeptResponses = Vec<(u64, u64, Vec<u8>)>;

/// Fills in the commitment's root and each entry's index and path; returns the
/// commitment and the encoded responses to keep.
pub(crate) fn seal_responses(built: Vec<(Entry, WireEpochResponse)>) -> anyhow::Result<(Commitment, KeptResponses)> {
    let entries: Vec<Entry> = built.iter().map(|(e, _)| *e).collect();
    let c = Commitment::new(&entries)?;
    let mut kept = Vec::with_capacity(built.len());
    for (e, mut r) in built {
        let (index, path) = c.path_of(e.deal_id)?;
        r.root = c.root();
        r.leaf_count = c.leaf_count();
        r.leaf_index = index;
        r.leaf_path = path;
        kept.push((e.deal_id, e.epoch, dpor_proto::codec::encode_body(&r)?));
    }
    Ok((c, kept))
}

impl ChainAgent {
    /// Commitment mode, once per tick after the deals were refreshed: commits the
    /// current global epoch if not done, answers open challenges, drops old responses.
    pub(crate) async fn step_commitments(&mut self, me: Address, now: u64) {
        let Some(params) = self.params else { return };
        if let Some(g) = params.global_epoch_at(now) {
            if !self.commits.committed.contains(&g) {
                self.commit_global_epoch(me, &params, g).await;
            }
        }
        self.step_challenges(now).await;
    }

    async fn commit_global_epoch(&mut self, me: Address, params: &MarketParams, g: u64) {
        match self.market.get_commitment(me, g).await {
            Ok(Some(_)) => {
                self.commits.committed.insert(g);
                return;
            }
            Ok(None) => {}
            Err(e) => {
                tracing::warn!(global_epoch = g, error = %e, "cannot read our commitment");
                return;
            }
        }
        let global = match self.market.global_seed(g).await {
            Ok(Some(s)) => s,
            Ok(None) => {
                match self.market.record_seed(g).await {
                    Ok(_) => tracing::info!(global_epoch = g, "stored the epoch seed"),
                    Err(e) => tracing::info!(global_epoch = g, error = %e, "epoch seed not available yet"),
                }
                return;
            }
            Err(e) => {
                tracing::warn!(global_epoch = g, error = %e, "cannot read the global seed");
                return;
            }
        };
        let deals: Vec<(u64, DealInfo)> = self
            .deals
            .iter()
            .filter_map(|(id, t)| t.info.clone().map(|i| (*id, i)))
            .filter(|(_, i)| i.provider == me && i.state == DealState::Active)
            .filter(|(_, i)| g >= i.start_epoch && g < i.start_epoch + u64::from(i.num_epochs))
            .collect();
        let mut plan = Vec::with_capacity(deals.len());
        for (id, info) in deals {
            let epoch = g - info.start_epoch;
            let inforce = match self.market.digest_in_force(id, epoch).await {
                Ok(f) => f,
                Err(e) => {
                    tracing::warn!(deal = id, epoch, error = %e, "cannot read the digest in force; retrying next tick");
                    return;
                }
            };
            if inforce.version == 0 {
                continue; // no digest in force: nothing to commit, not a fault
            }
            let Some(digest) = self.digest_for(id, inforce.hash).await else { return };
            if let Err(e) = self.runs.epoch_pinned(id, epoch, &digest) {
                tracing::warn!(deal = id, epoch, error = %e, "cannot pin the digest in force; retrying next tick");
                return;
            }
            let block_bytes = match coded_block_bytes(info.block_size) {
                Ok(b) => b,
                Err(e) => {
                    tracing::error!(deal = id, error = %e, "cannot prove this deal: left out of the commitment");
                    continue;
                }
            };
            plan.push(Planned {
                deal: id,
                epoch,
                digest,
                digest_hash: inforce.hash,
                seed: sample_seed(global, id, epoch),
                block_bytes,
                k: info.samples_per_epoch,
            });
        }
        if plan.is_empty() {
            // No deal has an epoch with a digest in force at g: nothing can be faulted,
            // nothing to commit (and no gas to spend).
            tracing::debug!(global_epoch = g, "no deal to commit this epoch");
            self.commits.committed.insert(g);
            return;
        }
        let started = std::time::Instant::now();
        let runs: Arc<dyn NodeRuns> = self.runs.clone();
        let built = tokio::task::spawn_blocking(move || {
            let built = build_responses(runs.as_ref(), g, plan);
            let sealed = seal_responses(built)?;
            runs.put_epoch_responses(&sealed.1)?;
            Ok::<_, anyhow::Error>(sealed)
        })
        .await;
        let (commitment, kept) = match built {
            Ok(Ok(x)) => x,
            Ok(Err(e)) => {
                tracing::error!(global_epoch = g, error = %e, "cannot build or keep the epoch's responses; retrying next tick");
                return;
            }
            Err(e) => {
                tracing::error!(global_epoch = g, error = %e, "commitment task failed");
                return;
            }
        };
        let build_seconds = started.elapsed().as_secs_f64();
        match self.market.commit_epoch(g, commitment.root(), commitment.leaf_count()).await {
            Ok((tx, gas, safety)) => {
                tracing::info!(global_epoch = g, deals = commitment.leaf_count(), root = %commitment.root(), gas,
                    build_seconds, safety_challenge = safety, %tx, "epoch committed");
                self.commits.committed.insert(g);
                self.last_commit = Some((g, commitment.leaf_count(), gas, build_seconds));
                // The responses hold the blocks now: the epochs' pins may go.
                for (deal, epoch, _) in &kept {
                    if let Err(e) = self.runs.epochs_released(*deal, epoch + 1) {
                        tracing::warn!(deal, epoch, error = %e, "cannot release the epoch's pin");
                    }
                }
                self.prune_responses(params, g);
            }
            Err(e) if e.revert_name() == Some("CommitmentExists") => {
                self.commits.committed.insert(g);
            }
            Err(e) => tracing::warn!(global_epoch = g, error = %e, "commitEpoch failed; retrying next tick"),
        }
    }

    /// Drops kept responses of deal epochs whose challenge and answer windows are over
    /// (the deal epoch of global epoch g' is challengeable until start(g'+1) + grace,
    /// and answerable answerSeconds later).
    fn prune_responses(&self, params: &MarketParams, g: u64) {
        let keep_epochs = (params.grace_seconds + params.answer_seconds).div_ceil(params.epoch_seconds.max(1)) + 2;
        let Some(oldest_kept) = g.checked_sub(keep_epochs) else { return };
        for (id, t) in &self.deals {
            let Some(info) = &t.info else { continue };
            let before = oldest_kept.saturating_sub(info.start_epoch);
            if before == 0 {
                continue;
            }
            if let Err(e) = self.runs.prune_epoch_responses(*id, before) {
                tracing::warn!(deal = id, error = %e, "cannot drop old epoch responses");
            }
        }
    }

    /// Answers every open challenge of our entries with the kept response.
    async fn step_challenges(&mut self, now: u64) {
        match self.market.block_number().await {
            Ok(block) if block >= self.commits.challenge_cursor => {
                match self.market.challenges_opened(self.commits.challenge_cursor).await {
                    Ok(evs) => {
                        for ev in evs {
                            let ours = self.deals.contains_key(&ev.deal_id);
                            let known = self.commits.challenges_open.iter().any(|(id, _, _)| *id == ev.challenge_id)
                                || self.commits.challenges_done.contains(&ev.challenge_id);
                            if ours && !known {
                                tracing::info!(challenge = ev.challenge_id, deal = ev.deal_id, epoch = ev.epoch,
                                    challenger = %ev.challenger, deadline = ev.deadline, "our commitment entry is challenged");
                                self.commits.challenges_open.push((ev.challenge_id, ev.deal_id, ev.epoch));
                            }
                        }
                        self.commits.challenge_cursor = block + 1;
                    }
                    Err(e) => tracing::warn!(error = %e, "cannot read ChallengeOpened logs"),
                }
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "cannot read the block number"),
        }
        let open = std::mem::take(&mut self.commits.challenges_open);
        for (id, deal, epoch) in open {
            if self.answer_challenge(id, deal, epoch, now).await {
                self.commits.challenges_done.insert(id);
            } else {
                self.commits.challenges_open.push((id, deal, epoch));
            }
        }
    }

    /// One challenge; true when nothing is left to do for it.
    async fn answer_challenge(&mut self, id: u64, deal: u64, epoch: u64, now: u64) -> bool {
        match self.market.get_challenge(id).await {
            Ok(c) if c.state != ChallengeState::Open => return true,
            Ok(c) if now > c.deadline => return true,
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(challenge = id, error = %e, "cannot read the challenge");
                return false;
            }
        }
        let runs = self.runs.clone();
        let kept = match tokio::task::spawn_blocking(move || runs.epoch_response(deal, epoch)).await {
            Ok(Ok(Some(bytes))) => bytes,
            Ok(Ok(None)) => {
                tracing::error!(challenge = id, deal, epoch, "no kept response for a challenged entry: it will be faulted");
                return true;
            }
            Ok(Err(e)) => {
                tracing::warn!(challenge = id, error = %e, "cannot read the kept response");
                return false;
            }
            Err(e) => {
                tracing::warn!(challenge = id, error = %e, "response task failed");
                return false;
            }
        };
        let r: WireEpochResponse = match dpor_proto::codec::decode_body(&kept) {
            Ok(r) => r,
            Err(e) => {
                tracing::error!(challenge = id, deal, epoch, error = %e, "the kept response does not decode");
                return true;
            }
        };
        let digest = match self.market.digests(deal, self.config.from_block).await {
            Ok(ds) => match ds.into_iter().find(|p| p.digest.version == r.version) {
                Some(p) => p.digest,
                None => {
                    tracing::error!(challenge = id, deal, version = r.version, "no DigestPosted log for the response's version");
                    return false;
                }
            },
            Err(e) => {
                tracing::warn!(challenge = id, error = %e, "cannot read DigestPosted logs");
                return false;
            }
        };
        match self.market.answer_challenge(id, &digest, chain_proofs(&r), r.leaf_index, r.leaf_path.clone()).await {
            Ok((tx, gas)) => {
                tracing::info!(challenge = id, deal, epoch, gas, %tx, "challenge answered");
                true
            }
            Err(e) if matches!(e.revert_name(), Some("ChallengeNotOpen") | Some("DeadlinePassed")) => true,
            Err(e) => {
                tracing::warn!(challenge = id, deal, epoch, error = %e, "answerChallenge failed; retrying next tick");
                false
            }
        }
    }
}
