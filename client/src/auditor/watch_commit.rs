//! `dpor watch`, commitment part (docs/COMMITMENTS.md §7): for each watched deal whose
//! provider committed the current (or the previous) epoch, fetch the node's committed
//! response over libp2p, check it exactly as `answerChallenge` would on chain
//! ([`dpor_chain::verify_epoch_response`]), and challenge the entry on chain (bond
//! locked) when it is wrong, or when the node did not serve it after `--retries`
//! passes. Then fault this watcher's challenges left unanswered past their deadline.

use super::watch_state::{WatchArgs, WatchLog, WatchState};
use crate::session::Session;
use crate::node_client::NodeClient;
use anyhow::{Context, Result};
use dpor_chain::{ChallengeState, CommittedEpoch, DealInfo, MarketParams};
use serde_json::json;
use std::collections::HashMap;

/// What the watcher keeps between reads: node connections by provider (one dial per
/// provider per pass: [`NodeCache::new_pass`] drops them, as a node may have restarted
/// at another address), and digests by (deal, digest hash), which never change (a
/// digest's hash commits to its every field), so the `DigestPosted` logs are searched
/// once per digest rather than once per check.
/// It also holds the outcomes [`prefetch`] found for this pass, by (deal, epoch).
#[derive(Default)]
pub struct NodeCache {
    nodes: HashMap<alloy_primitives::Address, NodeClient>,
    digests: HashMap<(u64, alloy_primitives::B256), dpor_core::digest::Digest>,
    prefetched: HashMap<(u64, u64), Check>,
}

impl NodeCache {
    /// Starts a pass: the node connections and the checks of the last pass are dropped.
    pub fn new_pass(&mut self) {
        self.nodes.clear();
        self.prefetched.clear();
    }

    async fn get(&mut self, ctx: &Session, deal: &DealInfo) -> Result<&NodeClient> {
        match self.nodes.entry(deal.provider) {
            std::collections::hash_map::Entry::Occupied(e) => Ok(e.into_mut()),
            std::collections::hash_map::Entry::Vacant(v) => Ok(v.insert(ctx.node_for_deal(deal.id).await?)),
        }
    }

    /// The preimage of `hash`, deal `id`'s digest, from the cache or the logs.
    async fn digest(&mut self, ctx: &Session, id: u64, hash: alloy_primitives::B256) -> Result<Option<dpor_core::digest::Digest>> {
        if let Some(d) = self.digests.get(&(id, hash)) {
            return Ok(Some(d.clone()));
        }
        let found = ctx.market.digest_by_hash(id, hash, 0).await?;
        if let Some(d) = &found {
            self.digests.insert((id, hash), d.clone());
        }
        Ok(found)
    }
}

/// Outcome of checking one committed entry.
pub(crate) enum Check {
    /// Not committed (yet), or nothing to check (no digest in force).
    NotYet,
    /// The response verifies.
    Good,
    /// The node did not serve it.
    Missing(String),
    /// The response is wrong.
    Wrong(String),
}

async fn check_entry(ctx: &Session, nodes: &mut NodeCache, deal: &DealInfo, epoch: u64) -> Result<Check> {
    let id = deal.id;
    let g = deal.start_epoch + epoch;
    let Some(root) = ctx.market.get_commitment(deal.provider, g).await? else { return Ok(Check::NotYet) };
    let inforce = ctx.market.digest_in_force(id, epoch).await?;
    if inforce.version == 0 {
        return Ok(Check::NotYet);
    }
    let digest = nodes
        .digest(ctx, id, inforce.hash)
        .await?
        .with_context(|| format!("no DigestPosted log for digest v{}", inforce.version))?;
    let Some(seed) = ctx.market.epoch_seed(id, epoch).await? else { return Ok(Check::NotYet) };
    let node = match nodes.get(ctx, deal).await {
        Ok(n) => n,
        Err(e) => return Ok(Check::Missing(format!("{e:#}"))),
    };
    let r = match node.epoch_response(id, epoch).await {
        Ok(r) => r,
        Err(e) => return Ok(Check::Missing(format!("{e:#}"))),
    };
    let coded = dpor_core::BlockFormat::new(deal.block_size as usize)
        .map_err(|e| anyhow::anyhow!("deal {id}: {e}"))?
        .coded_block_bytes();
    let at = CommittedEpoch {
        deal_id: id,
        epoch,
        digest: &digest,
        digest_hash: inforce.hash,
        sample_seed: seed,
        root,
        samples_per_epoch: deal.samples_per_epoch,
        coded_block_bytes: coded,
    };
    let proofs: Vec<_> =
        r.proofs.iter().map(|p| dpor_chain::block_proof_from(p.run_tag, p.position, &p.block, &p.run_path)).collect();
    Ok(match dpor_chain::verify_epoch_response(&at, r.version, &proofs, r.leaf_index, &r.leaf_path) {
        Ok(()) if r.deal == id && r.epoch == epoch => Check::Good,
        Ok(()) => Check::Wrong(format!("the node answered for deal {} epoch {}", r.deal, r.epoch)),
        Err(e) => Check::Wrong(e.to_string()),
    })
}

/// The deal epochs whose committed entries a pass looks at: the previous epoch and the
/// current one (the last one once the term is over); in a deal's epoch 0, epoch 0 once
/// (a pair would check it twice a pass, counting two misses against `--retries`). Empty
/// before the deal's first epoch.
fn epochs_to_check(params: &MarketParams, deal: &DealInfo, now: u64) -> std::ops::RangeInclusive<u64> {
    match params.deal_epoch_at(deal, now).or_else(|| params.epochs_over(deal, now).checked_sub(1)) {
        Some(cur) => cur.saturating_sub(1)..=cur,
        #[allow(clippy::reversed_empty_ranges)]
        None => 1..=0,
    }
}

/// Deals whose chain state [`prefetch`] reads at once.
const PARALLEL_READS: usize = 16;

/// Providers whose committed entries [`prefetch`] checks at once.
const PARALLEL_PROVIDERS: usize = 8;

/// The epochs of `deal` whose committed entry is due a check at `now`: the previous
/// and the current epoch (epoch 0 once), within the deal's term, not checked yet, and
/// still open to a challenge (before the epoch's deadline + graceSeconds).
fn due_epochs(params: &MarketParams, state: &WatchState, deal: &DealInfo, now: u64) -> Vec<u64> {
    epochs_to_check(params, deal, now)
        .filter(|&e| e < u64::from(deal.num_epochs))
        .filter(|e| !state.deals.get(&deal.id).is_some_and(|p| p.commit_checked.contains(e)))
        .filter(|&e| now < params.window(deal, e).deadline + params.grace_seconds)
        .collect()
}

/// Checks, before a pass acts, every committed entry due among `ids` (read-only: no
/// state change, no transaction), the providers' nodes concurrently (up to
/// [`PARALLEL_PROVIDERS`] at once, each provider's entries one after another over one
/// connection), and keeps the outcomes in `nodes` for [`commitment_step`], which
/// then acts on them in deal order as before. A check that errs is left out (the step
/// checks it again and reports the error). A pass over thousands of deals was one
/// libp2p fetch and ≈ 6 chain reads after another (docs/SIMULATION.md).
pub async fn prefetch(ctx: &Session, params: &MarketParams, state: &WatchState, nodes: &mut NodeCache, ids: &[u64]) {
    use futures::stream::{self, StreamExt};
    let Ok(now) = ctx.market.latest_timestamp().await else { return };
    let deals: Vec<Option<DealInfo>> =
        stream::iter(ids.iter().copied()).map(|id| async move { ctx.market.get_deal(id).await.ok() }).buffered(PARALLEL_READS).collect().await;
    let mut groups: HashMap<alloy_primitives::Address, (NodeCache, Vec<(DealInfo, u64)>)> = HashMap::new();
    let mut provider_of = HashMap::new();
    for deal in deals.into_iter().flatten().filter(|d| d.state == dpor_chain::DealState::Active) {
        for epoch in due_epochs(params, state, &deal, now) {
            provider_of.insert(deal.id, deal.provider);
            groups.entry(deal.provider).or_default().1.push((deal.clone(), epoch));
        }
    }
    // Each group takes its deals' cached digests (a deal has one provider) and its
    // node's connection, and gives them back with what it learnt.
    for (key, digest) in std::mem::take(&mut nodes.digests) {
        match provider_of.get(&key.0).and_then(|p| groups.get_mut(p)) {
            Some(g) => {
                g.0.digests.insert(key, digest);
            }
            None => {
                nodes.digests.insert(key, digest);
            }
        }
    }
    for (provider, g) in groups.iter_mut() {
        if let Some(c) = nodes.nodes.remove(provider) {
            g.0.nodes.insert(*provider, c);
        }
    }
    let done: Vec<NodeCache> = stream::iter(groups.into_values())
        .map(|(mut cache, items)| async move {
            for (deal, epoch) in items {
                if let Ok(checked) = check_entry(ctx, &mut cache, &deal, epoch).await {
                    cache.prefetched.insert((deal.id, epoch), checked);
                }
            }
            cache
        })
        .buffer_unordered(PARALLEL_PROVIDERS)
        .collect()
        .await;
    for cache in done {
        nodes.nodes.extend(cache.nodes);
        nodes.digests.extend(cache.digests);
        nodes.prefetched.extend(cache.prefetched);
    }
}

/// Checks the deal's committed entries of the current and the previous epoch (each
/// once), challenging what fails. Returns the on-chain actions taken.
#[allow(clippy::too_many_arguments)]
pub async fn commitment_step(
    ctx: &Session,
    args: &WatchArgs,
    params: &MarketParams,
    state: &mut WatchState,
    nodes: &mut NodeCache,
    deal: &DealInfo,
    now: u64,
    out: &dyn WatchLog,
) -> Result<u64> {
    let id = deal.id;
    let mut n = 0;
    for epoch in epochs_to_check(params, deal, now) {
        if epoch >= u64::from(deal.num_epochs) || state.deals.get(&id).is_some_and(|p| p.commit_checked.contains(&epoch)) {
            continue;
        }
        // A challenge is possible until the epoch's deadline + graceSeconds.
        let w = params.window(deal, epoch);
        if now >= w.deadline + params.grace_seconds {
            state.deals.entry(id).or_default().commit_checked.insert(epoch);
            continue;
        }
        let outcome = match nodes.prefetched.remove(&(id, epoch)) {
            Some(checked) => checked,
            None => check_entry(ctx, nodes, deal, epoch).await?,
        };
        let why = match outcome {
            Check::NotYet => continue,
            Check::Good => {
                // Saved at the end of the pass (checking it again after a crash is harmless).
                state.deals.entry(id).or_default().commit_checked.insert(epoch);
                out.log("commitment-ok", id, format!("epoch {epoch}: the committed response verifies"), json!({"epoch": epoch}));
                continue;
            }
            Check::Missing(why) => {
                let p = state.deals.entry(id).or_default();
                let t = p.commit_missing.entry(epoch).or_insert(0);
                *t += 1;
                let t = *t;
                if t <= args.retries {
                    out.log("commitment-unanswered", id,
                        format!("epoch {epoch}: the node did not serve its committed response (attempt {t} of {}): {why}", args.retries),
                        json!({"epoch": epoch, "attempt": t, "error": why}));
                    continue;
                }
                format!("not served after {t} attempts: {why}")
            }
            Check::Wrong(why) => why,
        };
        let bond = ctx.market.dispute_bond().await?;
        ctx.market.ensure_allowance(alloy_primitives::U256::from(bond)).await?;
        let q = match ctx.market.challenge_entry(id, epoch).await {
            Ok(q) => q,
            Err(e) => {
                let taken = taken_by_another(ctx, id, epoch).await.map_err(|_| e).with_context(|| format!("challengeEntry epoch {epoch}"))?;
                let p = state.deals.entry(id).or_default();
                p.commit_checked.insert(epoch);
                p.commit_missing.remove(&epoch);
                let (what, q) = match taken {
                    Some(c) => {
                        p.challenges.entry(c.challenge_id).or_insert(false);
                        let by = if c.challenger.is_zero() { "the market's safety draw".to_string() } else { c.challenger.to_string() };
                        (format!("challenged already by {by} (challenge {}), which this watcher faults if unanswered", c.challenge_id), Some(c.challenge_id))
                    }
                    None => ("settled already".to_string(), None),
                };
                state.save(&args.state)?;
                out.log("challenge-exists", id, format!("epoch {epoch}: committed entry FAILED ({why}); {what}"),
                    json!({"epoch": epoch, "challenge_id": q, "reason": why}));
                continue;
            }
        };
        n += 1;
        let p = state.deals.entry(id).or_default();
        p.commit_checked.insert(epoch);
        p.commit_missing.remove(&epoch);
        p.challenges.insert(q, false);
        state.save(&args.state)?;
        out.log("challenge", id, format!("epoch {epoch}: committed entry FAILED ({why}); challenge {q} opened"),
            json!({"epoch": epoch, "challenge_id": q, "reason": why}));
    }
    Ok(n)
}

/// After this watcher's `challengeEntry` of (`id`, `epoch`) reverted: was the epoch
/// settled or challenged first by someone else (the market's safety draw at the
/// provider's commitment, docs/COMMITMENTS.md §5; another auditor; this watcher before
/// a crash)? Returns the epoch's open challenge, if it has one, for this watcher to fault
/// past its deadline (nobody else may: a safety draw has no challenger), or `None` when
/// it is settled otherwise (Proven, Missed). Errors when the epoch is still unsettled
/// (the revert had another cause) or a read fails.
async fn taken_by_another(ctx: &Session, id: u64, epoch: u64) -> Result<Option<dpor_chain::ChallengeOpenedEvent>> {
    if ctx.market.epoch_status(id, epoch).await? == dpor_chain::EpochStatus::None {
        anyhow::bail!("deal {id} epoch {epoch} is unsettled");
    }
    // Rare (a failing entry someone else reached first): one log search per case.
    let opened = ctx.market.challenges_of_deal(id, 0).await?;
    for c in opened.into_iter().rev().filter(|c| c.epoch == epoch) {
        if ctx.market.get_challenge(c.challenge_id).await?.state == ChallengeState::Open {
            return Ok(Some(c));
        }
    }
    Ok(None)
}

/// Faults this watcher's challenges left unanswered past their deadline; logs the
/// answered ones. Returns the on-chain actions taken.
pub async fn fault_step(ctx: &Session, args: &WatchArgs, state: &mut WatchState, id: u64, now: u64, out: &dyn WatchLog) -> Result<u64> {
    let open: Vec<u64> =
        state.deals.get(&id).map(|p| p.challenges.iter().filter(|(_, done)| !**done).map(|(q, _)| *q).collect()).unwrap_or_default();
    let mut n = 0;
    for q in open {
        let c = ctx.market.get_challenge(q).await?;
        match c.state {
            ChallengeState::Open if now > c.deadline => {
                ctx.market.fault_challenge(q).await.with_context(|| format!("faultChallenge {q}"))?;
                n += 1;
                out.log("challenge-faulted", id, format!("challenge {q} unanswered past its deadline: slashed"), json!({"challenge_id": q}));
            }
            ChallengeState::Open => continue,
            ChallengeState::Answered => out.log("challenge-answered", id,
                format!("challenge {q} was answered on chain (bond to the provider)"), json!({"challenge_id": q})),
            _ => {}
        }
        state.deals.entry(id).or_default().challenges.insert(q, true);
        state.save(&args.state)?;
    }
    Ok(n)
}
