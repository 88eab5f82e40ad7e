//! Batched writes with deferred checks (issue 11 #1–#2; docs/SCHEME.md §10).
//!
//! [`write_batch`] sends many writes in one signed request (`OwnerOp::WriteBatch`):
//! the owner fetches the old U leaves of every index at once (`Request::UPaths`),
//! checks each against its rootU, computes the new rootU itself, predicts the
//! checksums of the runs the batch leaves in the new state (running the same HAdds
//! and C-rebuilds on checksums), saves its intent, sends, and checks the answer: the
//! new rootU and the names of the runs. It does **not** spot-check those runs then:
//! they are marked unchecked, and [`verify_deferred`] checks every unchecked run a
//! digest references before the owner signs it (`dpor checkpoint`) — by recomputing
//! it from the owner's copy of its blocks for the smallest levels (App. A.1,
//! [`OwnerState::block_cache_levels`]), by a λ-sample spot-check against the
//! predicted checksums otherwise. Runs built and consumed between two checkpoints are
//! never checked: no digest references them.

use super::flows::{level_sigma, reject, spot_check_at, spot_positions, store_pending_sealed, u_sigma, Misbehaved};
use super::local_levels::{self, Counters, LocalLevels};
use super::machine::{self, Request};
use crate::node_client::{unexpected, NodeClient, OwnerAuth, WrittenBatch};
use crate::owner_state::{blocks_digest, recent_window_start, sigma_from_u64, sigma_to_u64, OwnerState, Pending, PendingWrite, RunEntry, SIGMA_WIDTH};
use alloy_primitives::B256;
use anyhow::{bail, ensure, Context};
use dpor_core::block::BlockFormat;
use dpor_core::checksum::{OwnerKeys, Place, RHO};
use dpor_core::code::{self, level_start, target_level};
use dpor_core::field::Fp;
use dpor_core::merkle;
use dpor_core::state::{write_step, WriteStep};
use dpor_core::{RunId, RunTag};
use dpor_proto::messages::{batch_len, Response, WireRun};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// What a batch of writes did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct BatchReport {
    /// Writes in the batch.
    pub count: u64,
    /// The runs of the new state the batch built (`tag@built_at`), checked later.
    pub runs: Vec<String>,
    /// The new rootU.
    pub root_u: B256,
    /// σ̃ fetched from the node for consumed levels not in the checksum cache.
    pub sealed_fetched: u64,
}

/// Most writes one `WriteBatch` request carries for blocks of `block_bytes`.
pub fn max_batch(block_bytes: usize) -> usize {
    batch_len(block_bytes as u64 + 48) as usize
}

/// Writes `writes` (index, bytes: at most β, zero-padded) in batches of at most
/// [`max_batch`] writes, each one [`write_batch_deferred`]; the state is saved at the
/// end (also after an error). Returns one report per batch.
pub async fn write_many(
    node: &NodeClient,
    auth: &OwnerAuth<'_>,
    state: &mut OwnerState,
    writes: &[(u64, Vec<u8>)],
) -> anyhow::Result<Vec<BatchReport>> {
    let per = max_batch(state.block_bytes as usize).max(1);
    let mut out = Vec::new();
    let mut result = Ok(());
    for chunk in writes.chunks(per) {
        match write_batch_deferred(node, auth, state, chunk).await {
            Ok(r) => out.push(r),
            Err(e) => {
                result = Err(e);
                break;
            }
        }
    }
    let saved = state.save_deferred();
    result?;
    saved?;
    Ok(out)
}

/// One write of a batch as the owner prepares it: (index, block padded to β, σ, σ̃_U).
type PreparedWrite = (u64, Vec<u8>, [Fp; RHO], [u8; 32]);

/// The writes of a batch as the owner sends them, each block padded to β
/// ([`PreparedWrite`]), and their block roots, on every core (each block's are its
/// own). Errors: a block that does not make a record (a bad format).
fn prepare_writes(keys: &OwnerKeys, format: &BlockFormat, writes: Vec<(u64, Vec<u8>)>) -> anyhow::Result<(Vec<PreparedWrite>, Vec<B256>)> {
    use rayon::prelude::*;
    let beta = format.block_bytes();
    let blocks: Vec<PreparedWrite> = writes
        .into_par_iter()
        .map(|(index, mut block)| -> anyhow::Result<_> {
            block.resize(beta, 0);
            let sigma = keys.checksum(&format.record(index, &block)?)?;
            let sealed = keys.seal_u(index, &block, &sigma);
            Ok((index, block, sigma, sealed))
        })
        .collect::<anyhow::Result<_>>()?;
    let roots = merkle::block_roots(&blocks.iter().map(|(_, block, _, _)| block.as_slice()).collect::<Vec<_>>());
    Ok((blocks, roots))
}

/// One batch of writes, in order (the same index may repeat): see the module docs.
/// At most [`max_batch`] writes.
///
/// Errors: bad input (an index ≥ N, a block over β bytes, an empty or too long batch);
/// a node answer that fails the checks ([`Misbehaved`]; the intent is marked rejected
/// and the owner stays on its previous state); a lost answer (the intent is saved and
/// the next command settles it).
pub async fn write_batch(
    node: &NodeClient,
    auth: &OwnerAuth<'_>,
    state: &mut OwnerState,
    writes: &[(u64, Vec<u8>)],
) -> anyhow::Result<BatchReport> {
    write_batch_with(node, auth, state, writes, None, false).await
}

/// [`write_batch`], with the save of its commit left to the next save
/// ([`OwnerState::defer_save`]): the next batch's intent (or any other save), or the
/// caller's [`OwnerState::save_deferred`] / [`OwnerState::persist`] after its last
/// batch. One `fdatasync` fewer per batch for a run of batches; a crash before the next
/// save loses nothing (the saved intent is settled with the node at the next start). A
/// commit that must store σ̃ with the node saves as before. Errors: as [`write_batch`].
pub async fn write_batch_deferred(
    node: &NodeClient,
    auth: &OwnerAuth<'_>,
    state: &mut OwnerState,
    writes: &[(u64, Vec<u8>)],
) -> anyhow::Result<BatchReport> {
    write_batch_with(node, auth, state, writes, None, true).await
}

/// [`write_batch`], and the file's length becomes `file_bytes` (if given) when, and
/// only when, the batch commits: the length travels in the saved intent, so a crash
/// settles both together (`owner::edit`). Errors: as [`write_batch`].
pub async fn write_batch_resizing(
    node: &NodeClient,
    auth: &OwnerAuth<'_>,
    state: &mut OwnerState,
    writes: &[(u64, Vec<u8>)],
    file_bytes: Option<u64>,
) -> anyhow::Result<BatchReport> {
    write_batch_with(node, auth, state, writes, file_bytes, false).await
}

/// [`write_batch_resizing`], its commit's save deferred when `defer_save`
/// ([`write_batch_deferred`]).
pub(crate) async fn write_batch_with(
    node: &NodeClient,
    auth: &OwnerAuth<'_>,
    state: &mut OwnerState,
    writes: &[(u64, Vec<u8>)],
    file_bytes: Option<u64>,
    defer_save: bool,
) -> anyhow::Result<BatchReport> {
    if let Some(len) = file_bytes {
        ensure!(
            len <= state.num_blocks * state.block_bytes as u64,
            "a file of {len} bytes does not fit the deal's N·β = {} bytes",
            state.num_blocks * state.block_bytes as u64
        );
    }
    machine::ready(node, state).await?;
    ensure!(state.uploaded, "upload the file first");
    ensure!(!writes.is_empty(), "a batch needs at least one write");
    let format = state.format()?;
    let beta = format.block_bytes();
    ensure!(writes.len() <= max_batch(beta), "a batch holds at most {} writes of {beta} bytes", max_batch(beta));
    let keys = state.keys()?;
    let k = state.log_blocks();
    let n = state.num_blocks;

    // The blocks, their checksums and σ̃_U (on every core: each block's are its own).
    for (index, data) in writes {
        ensure!(*index < n, "block index {index} is out of range (N = {n})");
        ensure!(data.len() <= beta, "a block is at most {beta} bytes, got {} (block {index})", data.len());
    }
    // The blocks, their checksums, σ̃_U and block roots (on every core, on a blocking
    // thread) while the node looks up the old leaves: neither needs the other.
    let prepared = {
        let (writes, keys) = (writes.to_vec(), keys.clone());
        tokio::task::spawn_blocking(move || prepare_writes(&keys, &format, writes))
    };

    // (1) The old leaves of every index touched, checked against rootU; the new rootU.
    let distinct: Vec<u64> = writes.iter().map(|(i, _)| *i).collect::<BTreeSet<_>>().into_iter().collect();
    let old = node.u_paths(state.deal, &distinct, k).await;
    let (blocks, roots) = prepared.await.context("the batch's preparation stopped")??;
    let old = old?;
    let mut checked_old = Vec::with_capacity(distinct.len());
    let mut old_sealed: HashMap<u64, [u8; 32]> = HashMap::with_capacity(distinct.len());
    for (&i, (root, sealed, path)) in distinct.iter().zip(old) {
        checked_old.push((i, merkle::u_leaf(i, &root, &sealed.0), path));
        old_sealed.insert(i, sealed.0);
    }
    let new_leaves: Vec<(u64, B256)> =
        blocks.iter().zip(&roots).map(|((index, _, _, sealed), root)| (*index, merkle::u_leaf(*index, root, sealed))).collect();
    let new_root_u = new_root_from_paths(&state.root_u, k, &checked_old, &new_leaves)
        .context("the node's U paths for the old blocks do not match the owner's rootU")?;

    // (2) The checksums of the runs the batch leaves in the new state.
    let (mut t, mut rebuilds) = (state.write_count, state.rebuild_count);
    let mut pre: BTreeSet<u32> = (0..k).filter(|l| (t >> l) & 1 == 1).collect();
    let mut mem: BTreeMap<u32, (WireRun, Vec<Fp>)> = BTreeMap::new();
    let mut new_c: Option<WireRun> = None;
    let mut written_sigma: BTreeMap<u64, [Fp; RHO]> = BTreeMap::new();
    // C's checksums are computed when C is checked (`verify_deferred`), from U's σ
    // then, with the σ as of the C-rebuild of every block written since (from the old
    // leaves, checked against rootU above, or from this batch).
    let mut c_snapshot = state.c_snapshot.clone();
    let mut fetched = 0;
    for (index, _, sigma, _) in &blocks {
        if let Some(snap) = c_snapshot.as_mut() {
            if !snap.contains_key(index) {
                let at = match written_sigma.get(index) {
                    Some(s) => *s,
                    None => {
                        let sealed = old_sealed.get(index).context("no old leaf for a written index")?;
                        super::flows::open_u(&keys, &format, *index, sealed)
                            .with_context(|| format!("the checksum of block {index} does not open"))?
                    }
                };
                snap.insert(*index, sigma_to_u64(&at));
            }
        }
        let built_at = rebuilds * n + t + 1;
        match write_step(t, k) {
            WriteStep::Level(l) => {
                let mut consumed = Vec::with_capacity(l as usize);
                for j in 0..l {
                    if let Some((_, s)) = mem.remove(&j) {
                        consumed.push(s);
                    } else if pre.remove(&j) {
                        let (s, f) = level_sigma(node, state, &keys, j).await?;
                        fetched += f;
                        consumed.push(s);
                    } else {
                        bail!("level {j} should be filled at t = {t}");
                    }
                }
                let refs: Vec<&[Fp]> = consumed.iter().map(|v| v.as_slice()).collect();
                let exp = code::h_add(t, k, sigma, &refs, SIGMA_WIDTH)?;
                mem.insert(l, (WireRun::from(RunId { tag: RunTag::level(l), built_at }), exp));
                t += 1;
            }
            WriteStep::CRebuild => {
                new_c = Some(WireRun::from(RunId { tag: RunTag::C, built_at }));
                c_snapshot = Some(BTreeMap::new());
                mem.clear();
                pre.clear();
                t = 0;
                rebuilds += 1;
            }
        }
        written_sigma.insert(*index, *sigma);
    }
    let expected: Vec<(WireRun, Vec<Fp>)> = mem.into_values().collect();
    let new_runs: Vec<WireRun> = new_c.into_iter().chain(expected.iter().map(|(r, _)| *r)).collect();

    // (3) The intent, durably, then the batch itself. The blocks go where the block
    // cache keeps them anyway (the recent-writes sidecar, under the numbers the batch
    // gives them) rather than into the JSON: one write of them, in binary.
    let nonce = state.next_nonce();
    let count = blocks.len();
    state.stash_sigmas(&expected)?;
    let recent_blocks = (state.block_cache_levels > 0).then(|| blocks_digest(&roots));
    if recent_blocks.is_some() {
        let total = state.total_writes();
        state.record_recent(total, blocks.iter().map(|(index, block, _, _)| (*index, block.clone())))?;
    }
    state.pending = Some(Pending::WriteBatch {
        nonce,
        writes: blocks
            .iter()
            .map(|(index, block, _, sealed)| PendingWrite { index: *index, block: block.clone().into(), sealed_u: B256::from(*sealed) })
            .collect(),
        new_root_u,
        runs: new_runs,
        file_bytes,
        c_snapshot,
        rejected: None,
        recent_blocks,
    });
    state.persist()?;
    // The owner's copy of its smallest levels, advanced by this batch's HAdds on a
    // blocking thread while the node applies the batch (`local_levels`).
    let local_job = (state.block_cache_levels > 0).then(|| {
        let prev = state.take_local_levels();
        let start = Counters { write_count: state.write_count, rebuild_count: state.rebuild_count, num_blocks: n };
        let writes: Vec<(u64, Vec<u8>)> = blocks.iter().map(|(index, block, _, _)| (*index, block.clone())).collect();
        let keep = state.block_cache_levels;
        tokio::task::spawn_blocking(move || local_levels::advance(prev, &format, start, &writes, keep, HASHED_LEVELS))
    });
    // Signed over the block roots, the blocks beside the signature (issue 23 #3).
    let wire: Vec<(u64, Vec<u8>, B256, B256)> =
        blocks.into_iter().zip(roots).map(|((index, block, _, sealed), root)| (index, block, root, B256::from(sealed))).collect();
    let (sent, local) = match local_job {
        Some(job) => {
            let (sent, local) = tokio::join!(node.write_batch_by_roots(auth, nonce, wire), job);
            (sent, Some(local))
        }
        None => (node.write_batch_by_roots(auth, nonce, wire).await, None),
    };
    let mut report = machine::settle(node, auth, state, &BatchRequest { nonce, count, defer_save }, sent).await?;
    // Committed: the copy now belongs to the new state (a failed job leaves none, and
    // the checkpoint replays from the block cache).
    match local {
        Some(Ok(Ok(levels))) => state.local_levels = Some(LocalLevels { at: (state.total_writes(), state.root_u), levels }),
        Some(Ok(Err(e))) => tracing::debug!("the owner's copy of its levels was not advanced: {e:#}"),
        Some(Err(e)) => tracing::debug!("the owner's copy of its levels was not advanced: {e}"),
        None => {}
    }
    report.sealed_fetched = fetched;
    Ok(report)
}

/// Checks the node's answer to a [`Pending::WriteBatch`] (as it arrived, or as the node
/// reported it after a crash): the count, the new rootU and the runs' names. Then
/// commits the new state with those runs marked unchecked (their check is deferred to
/// the next checkpoint, [`verify_deferred`]), remembers the batch's blocks for the
/// owner's block cache, and stores the σ̃ of the runs it does not cache. A failed check
/// marks the intent rejected and errors.
pub(crate) async fn finish_write_batch(
    node: &NodeClient,
    auth: &OwnerAuth<'_>,
    state: &mut OwnerState,
    answer: WrittenBatch,
    defer_save: bool,
) -> anyhow::Result<BatchReport> {
    let Some(Pending::WriteBatch { writes, new_root_u, runs, file_bytes, c_snapshot, recent_blocks, .. }) = state.pending.clone() else {
        bail!("no batch of writes is pending");
    };
    let keys = state.keys()?;
    let got_runs: Vec<WireRun> = answer.runs.iter().map(|(r, _)| *r).collect();
    let verdict = (|| {
        check(answer.count == writes.len() as u64, || format!("the node applied {} writes of a batch of {}", answer.count, writes.len()))?;
        check(answer.root_u == new_root_u, || format!("the node's new rootU {} differs from the owner's {new_root_u}", answer.root_u))?;
        check(got_runs == runs, || format!("the node built runs {got_runs:?}, expected {runs:?}"))?;
        Ok(())
    })();
    if let Err(e) = verdict {
        return Err(reject(state, e));
    }
    // The predicted checksums of the new levels (C's come at its check).
    let mut sigmas: HashMap<WireRun, Vec<Fp>> = HashMap::with_capacity(runs.len());
    for r in runs.iter().filter(|r| r.tag != 0) {
        sigmas.insert(*r, state.stashed_sigma(*r)?);
    }

    // Commit: counters, rootU, the runs (unchecked), the block cache.
    let n = state.num_blocks;
    let k = state.log_blocks();
    let old_total = state.total_writes();
    let new_total = old_total + writes.len() as u64;
    let (new_rebuilds, new_t) = (new_total / n, new_total % n);
    let rebuilt = new_rebuilds != state.rebuild_count;
    let mut store = Vec::new();
    if let Some((run, root)) = answer.runs.iter().find(|(r, _)| r.tag == 0) {
        state.c = Some(RunEntry { run: *run, root: *root, sigma: None, unchecked: true, sigma_file: None });
    }
    let mut levels = vec![None; k as usize];
    for (l, slot) in levels.iter_mut().enumerate() {
        if (new_t >> l) & 1 == 0 {
            continue;
        }
        if let Some((run, root)) = answer.runs.iter().find(|(r, _)| r.tag == l as u32 + 1) {
            let cache = (l as u32) < state.cache_levels;
            let sigma = sigmas.get(run).with_context(|| format!("no predicted checksums for run {}", RunId::from(*run)))?;
            *slot = Some(RunEntry { run: *run, root: *root, sigma: cache.then(|| sigma_to_u64(sigma)), unchecked: true, sigma_file: None });
            if !cache {
                store.push(*run);
            }
        } else if !rebuilt {
            *slot = state.levels.get(l).cloned().flatten();
            ensure!(slot.is_some(), "level {l} should have survived the batch but the owner has no entry for it");
        } else {
            bail!("the batch crossed a C-rebuild but level {l} was not rebuilt after it");
        }
    }
    state.levels = levels;
    state.root_u = new_root_u;
    state.c_snapshot = c_snapshot;
    if let Some(len) = file_bytes {
        state.file_bytes = len;
    }
    state.write_count = new_t;
    state.rebuild_count = new_rebuilds;
    // The block cache: this batch's writes (numbered old_total+1..), in the sidecar
    // since the intent (`record_recent`), or (an intent of an older version) saved now,
    // replacing any entries with those numbers (left by a refused batch), with the old
    // window still in it so that either state finds its blocks after a crash.
    if recent_blocks.is_some() {
        state.trim_recent();
    } else if state.block_cache_levels > 0 {
        if state.recent.iter().any(|(w, _, _)| *w > old_total) {
            // Numbers saved by a refused batch are reused: the sidecar is rewritten.
            state.recent_disk = None;
        }
        state.recent.retain(|(w, _, _)| *w <= old_total);
        for (j, w) in writes.iter().enumerate() {
            state.recent.push((old_total + 1 + j as u64, w.index, w.block.to_vec()));
        }
        let window = recent_window_start(new_total, new_t, state.block_cache_levels);
        let old_window = recent_window_start(old_total, old_total % n, state.block_cache_levels);
        state.recent.retain(|(w, _, _)| *w > window.min(old_window));
        state.save_recent()?;
        state.recent.retain(|(w, _, _)| *w > window);
    }
    let report = BatchReport {
        count: answer.count,
        runs: runs.iter().map(|r| RunId::from(*r).to_string()).collect(),
        root_u: new_root_u,
        sealed_fetched: 0,
    };
    if store.is_empty() {
        // Every new level's σ is cached, and the stash holds exactly those.
        state.adopt_stash(&runs);
        state.pending = None;
        state.drop_sigma();
        if defer_save {
            state.defer_save();
        } else {
            state.persist()?;
        }
    } else {
        let first = store.remove(0);
        state.pending = Some(Pending::StoreSealed { run: first, next: 0, more: store });
        state.persist()?;
        store_pending_sealed(node, auth, state, &keys).await?;
    }
    Ok(report)
}

/// The root of a Merkle tree of depth `depth` (inner nodes [`merkle::node`]) after
/// setting some leaves, from its old root and the old leaves' paths: each `(index, old
/// leaf, path)` of `old` is checked against `old_root` first (an error names the first
/// that fails); then `new` (index, leaf), in order (a later leaf of the same index
/// wins), replaces the leaves, and the nodes above them are recomputed from the paths'
/// siblings. Every index of `new` must be in `old`. Cost: one hash per touched node
/// (≤ |old|·depth), against |old|·depth for verifying the paths.
pub fn new_root_from_paths(old_root: &B256, depth: u32, old: &[(u64, B256, Vec<B256>)], new: &[(u64, B256)]) -> anyhow::Result<B256> {
    let mut nodes: HashMap<(u32, u64), B256> = HashMap::with_capacity(old.len() * (depth as usize + 1));
    // Every path's root at once (lanes); a path of the wrong shape or root gets
    // `verify_path`'s own error.
    let items: Vec<(B256, u64, &[B256])> = old.iter().map(|(i, leaf, path)| (*leaf, *i, path.as_slice())).collect();
    let roots = merkle::roots_from_paths(&items);
    for ((i, leaf, path), root) in old.iter().zip(&roots) {
        if root != old_root || path.len() != depth as usize || depth >= 64 || i >> depth != 0 {
            merkle::verify_path(old_root, depth, *i, *leaf, path).with_context(|| format!("the path of leaf {i}"))?;
        }
    }
    for (i, _, path) in old {
        for (d, sib) in path.iter().enumerate() {
            nodes.entry((d as u32, (i >> d) ^ 1)).or_insert(*sib);
        }
    }
    let known: BTreeSet<u64> = old.iter().map(|(i, _, _)| *i).collect();
    let mut touched: BTreeSet<u64> = BTreeSet::new();
    for (i, leaf) in new {
        ensure!(known.contains(i), "no old path for leaf {i}");
        nodes.insert((0, *i), *leaf);
        touched.insert(*i);
    }
    if touched.is_empty() {
        return Ok(*old_root);
    }
    for d in 0..depth {
        let parents: BTreeSet<u64> = touched.iter().map(|p| p >> 1).collect();
        let mut pairs = Vec::with_capacity(parents.len());
        for &p in &parents {
            let l = nodes.get(&(d, 2 * p)).copied().context("a sibling is missing from the paths")?;
            let r = nodes.get(&(d, 2 * p + 1)).copied().context("a sibling is missing from the paths")?;
            pairs.push((l, r));
        }
        // The layer's nodes in lanes.
        for (&p, hash) in parents.iter().zip(merkle::nodes_of_pairs(&pairs)) {
            nodes.insert((d + 1, p), hash);
        }
        touched = parents;
    }
    nodes.get(&(depth, 0)).copied().context("no new root")
}

/// Fails with [`Misbehaved`] unless `ok`.
fn check(ok: bool, why: impl FnOnce() -> String) -> anyhow::Result<()> {
    if ok {
        Ok(())
    } else {
        Err(Misbehaved(why()).into())
    }
}

/// What [`verify_deferred`] did.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct DeferredReport {
    /// Runs recomputed from the owner's cached blocks (root compared).
    pub recomputed: Vec<String>,
    /// Runs recomputed from the owner's cached blocks and checked by their leaves
    /// (levels ≥ [`HASHED_LEVELS`]: the node's leaves give the root, λ of them equal
    /// the owner's own).
    pub leaf_checked: Vec<String>,
    /// Runs spot-checked (λ samples against the predicted checksums).
    pub spot_checked: Vec<String>,
    /// Samples downloaded.
    pub samples: usize,
}

/// Checks every unchecked run of the owner's current state (those a batch built: the
/// runs the next digest references), before the owner signs that digest: runs of the
/// smallest levels are recomputed from the owner's blocks (App. A.1) when it has all
/// of them and their root compared; the others get a λ-sample spot-check against the
/// checksums the owner predicted (cached, or its own σ̃ opened from the node). A run
/// that passes is marked checked (saved); a run that fails is a [`Misbehaved`] error
/// and the owner must not sign: the failure is saved
/// ([`OwnerState::deferred_failure`]) so that no later, luckier check can pass it.
pub async fn verify_deferred(node: &NodeClient, auth: &OwnerAuth<'_>, state: &mut OwnerState) -> anyhow::Result<DeferredReport> {
    if let Some(why) = &state.deferred_failure {
        bail!("a run of the owner's state failed its deferred check ({why}); do not sign digests with this provider (dispute it with `dpor audit`)");
    }
    let format = state.format()?;
    let keys = state.keys()?;
    let mut report = DeferredReport::default();
    // Runs the node built in the background (deamortized rebuilds) get their roots.
    if super::flows::resolve_roots(node, state).await? {
        state.persist()?;
    }
    // C's checksums, if a batch crossed a C-rebuild since the last check: U's σ now
    // (checked against rootU) with the σ as of the C-rebuild of the blocks written
    // since, then the code.
    let c_expected: Option<(WireRun, Vec<Fp>)> = match (&state.c_snapshot, &state.c) {
        (Some(snap), Some(c)) if c.unchecked => {
            let mut all = u_sigma(node, state, &keys).await?;
            for (i, s) in snap {
                let at = *i as usize * RHO;
                ensure!(s.len() == RHO && at + RHO <= all.len(), "the owner's C snapshot is damaged (block {i})");
                all[at..at + RHO].copy_from_slice(&sigma_from_u64(s)?);
            }
            Some((c.run, code::c_rebuild(&all, state.log_blocks(), SIGMA_WIDTH)?))
        }
        _ => None,
    };
    let todo: Vec<(RunEntry, u64)> = state.runs().into_iter().filter(|(e, _)| e.unchecked).map(|(e, s)| (e.clone(), s)).collect();
    // Runs marked checked since the state was last saved.
    let mut marked = false;
    for (entry, size) in todo {
        let id = RunId::from(entry.run);
        let level = id.tag.as_level();
        // The owner's own version of the run: from its copy of the level (built beside
        // the batches), or replayed from its block cache.
        let mine = match level {
            Some(l) if l < state.block_cache_levels => match state.local_level(l) {
                Some(lv) => Some(match lv.root {
                    Some(root) => Recomputed::Root(root),
                    None => Recomputed::Coded(local_levels::coded_blocks(&format, &lv.elements)?),
                }),
                None => recompute_level(state, l)?
                    .map(|coded| -> anyhow::Result<Recomputed> {
                        Ok(if l < HASHED_LEVELS { Recomputed::Root(merkle::run_tree(&coded)?.root()) } else { Recomputed::Coded(coded) })
                    })
                    .transpose()?,
            },
            _ => None,
        };
        let verdict = match mine {
            Some(Recomputed::Root(root)) => {
                report.recomputed.push(id.to_string());
                check(root == entry.root, || format!("the node's run {id} has root {}, but its blocks give {root}", entry.root))
            }
            Some(Recomputed::Coded(coded)) => {
                report.leaf_checked.push(id.to_string());
                report.samples += (state.lambda as usize).min(coded.len());
                check_leaves(node, state, &entry, &coded).await
            }
            None => {
                let positions = spot_positions(size, state.lambda);
                let expected = match &c_expected {
                    Some((run, sigma)) if *run == entry.run => sigma.clone(),
                    _ => expected_at(node, state, &keys, &entry, size, &positions).await?,
                };
                report.spot_checked.push(id.to_string());
                report.samples += positions.len();
                spot_check_at(node, state.deal, &keys, &format, entry.run, entry.root, size, &expected, &positions).await.map(|_| ())
            }
        };
        if let Err(e) = verdict {
            if e.chain().any(|c| c.downcast_ref::<Misbehaved>().is_some()) {
                state.deferred_failure = Some(format!("{e:#}"));
                state.persist()?;
            } else if marked {
                // The runs checked before this one stay checked (best effort: else
                // they are checked again next time).
                let _ = state.persist();
            }
            return Err(e);
        }
        for slot in state.c.iter_mut().chain(state.levels.iter_mut().flatten()) {
            if slot.run == entry.run {
                slot.unchecked = false;
            }
        }
        match &c_expected {
            Some((run, sigma)) if *run == entry.run => {
                // C passed: its σ̃ go to the node (as an upload's do), then the
                // snapshot is no longer needed.
                state.stash_sigma(*run, sigma)?;
                state.c_snapshot = None;
                state.pending = Some(Pending::StoreSealed { run: *run, next: 0, more: vec![] });
                state.persist()?;
                marked = false;
                store_pending_sealed(node, auth, state, &keys).await?;
            }
            // Saved once after the loop: a mark lost to a crash only costs a check
            // again, and the state file is rewritten whole on every save.
            _ => marked = true,
        }
    }
    if marked {
        state.persist()?;
    }
    Ok(report)
}

/// The expected checksums of `entry` at `positions` (a size × ρ vector, zero
/// elsewhere): from the cache, or the owner's σ̃ fetched from the node and opened
/// (one-time keys: the node cannot substitute another run's or position's).
async fn expected_at(
    node: &NodeClient,
    state: &OwnerState,
    keys: &OwnerKeys,
    entry: &RunEntry,
    size: u64,
    positions: &[u64],
) -> anyhow::Result<Vec<Fp>> {
    if let Some(s) = &entry.sigma {
        return sigma_from_u64(s);
    }
    let id = RunId::from(entry.run);
    let mut out = vec![Fp::from(0u64); size as usize * RHO];
    let wanted: BTreeSet<u64> = positions.iter().copied().collect();
    for p in wanted {
        let got = node.sealed(state.deal, entry.run, p, 1).await?;
        let s = got.into_iter().next().flatten().with_context(|| format!("the node lost the checksum of {id} position {p}"))?;
        let place = Place::Run { tag: id.tag, built_at: id.built_at, position: p };
        let sigma = keys.open(place, &s.0).with_context(|| format!("checksum of {id} position {p}"))?;
        out[p as usize * RHO..(p as usize + 1) * RHO].copy_from_slice(&sigma);
    }
    Ok(out)
}

/// The owner's own version of a run it checks: the root of its run tree (levels
/// below [`HASHED_LEVELS`]), or its coded blocks (checked by the node's leaves).
enum Recomputed {
    Root(B256),
    Coded(Vec<Vec<u8>>),
}

/// Cached levels from this one up are checked at checkpoints by their leaves rather
/// than hashed whole ([`check_leaves`]): hashing a run's 2^(ℓ+1) coded blocks (their
/// chunk trees) is what costs, and from level 8 (512 coded blocks) up the leaves
/// (32 B each) and λ chunk trees cost less than the whole run's hashing.
pub const HASHED_LEVELS: u32 = 8;

/// The check of a run the owner recomputed (`coded`, its coded blocks in position
/// order) without hashing it whole: the node's leaves (`RunLeaves`, 32 B per coded
/// block) must give the run's root, and at λ positions drawn by the owner's RNG
/// (`spot_positions`) they must equal the owner's own leaves (run_leaf(p, blockRoot)).
/// A node whose committed run differs from the true one at a fraction f of positions
/// passes with probability (1 − f)^λ, as with a spot-check (SCHEME §10.3), for 32 B per
/// coded block instead of λ coded blocks with paths.
async fn check_leaves(node: &NodeClient, state: &OwnerState, entry: &RunEntry, coded: &[Vec<u8>]) -> anyhow::Result<()> {
    let id = RunId::from(entry.run);
    let size = coded.len() as u64;
    let per = batch_len(33).max(1);
    let mut leaves = Vec::with_capacity(coded.len());
    let mut start = 0;
    while start < size {
        let count = per.min(size - start);
        leaves.extend(node.run_leaves(state.deal, entry.run, start, count).await?);
        start += count;
    }
    let tree = merkle::MerkleTree::new(leaves)?;
    let root = tree.root();
    check(root == entry.root, || format!("the node's leaves of run {id} give root {root}, but it committed {}", entry.root))?;
    for p in spot_positions(size, state.lambda) {
        let mine = merkle::run_leaf(p, &merkle::block_root(&coded[p as usize]));
        check(tree.leaf(p) == Some(mine), || format!("run {id}: the node's leaf at position {p} is not the owner's recomputed block"))?;
    }
    Ok(())
}

/// The coded blocks of level `level` of the owner's current state recomputed from its
/// cached blocks (App. A.1), or `None` if the cache does not hold all of its writes.
fn recompute_level(state: &OwnerState, level: u32) -> anyhow::Result<Option<Vec<Vec<u8>>>> {
    let format = state.format()?;
    let width = format.width();
    let k = state.log_blocks();
    let start = level_start(state.write_count, level);
    let base = state.rebuild_count * state.num_blocks;
    let by_number: HashMap<u64, (u64, &Vec<u8>)> = state.recent.iter().map(|(w, i, b)| (*w, (*i, b))).collect();
    let mut local: BTreeMap<u32, Vec<Fp>> = BTreeMap::new();
    for j in 0..(1u64 << level) {
        let tt = start + j;
        let Some((index, block)) = by_number.get(&(base + tt + 1)) else {
            return Ok(None);
        };
        let record = format.record(*index, block)?;
        let l = target_level(tt);
        let consumed: Vec<Vec<Fp>> = (0..l).map(|x| local.remove(&x).unwrap_or_default()).collect();
        let refs: Vec<&[Fp]> = consumed.iter().map(|v| v.as_slice()).collect();
        local.insert(l, code::h_add(tt, k, &record, &refs, width)?);
    }
    let run = local.remove(&level).context("the replayed window did not end on its level")?;
    let coded: Vec<Vec<u8>> = run.chunks_exact(width).map(|b| format.coded_to_bytes(b)).collect::<Result<_, _>>()?;
    Ok(Some(coded))
}

/// A batch of writes ([`Pending::WriteBatch`]) as the owner's state machine drives it
/// ([`machine`]): sent again from the saved intent, settled by [`finish_write_batch`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct BatchRequest {
    /// Its nonce.
    pub nonce: u64,
    /// The number of writes.
    pub count: usize,
    /// The commit's save is left to the next save ([`OwnerState::defer_save`]) when
    /// nothing else is pending after it (never for a recovery).
    pub defer_save: bool,
}

impl BatchRequest {
    /// The request a saved intent holds, if it is a batch.
    pub(crate) fn of(p: &Pending) -> Option<Self> {
        match p {
            Pending::WriteBatch { nonce, writes, .. } => Some(Self { nonce: *nonce, count: writes.len(), defer_save: false }),
            _ => None,
        }
    }
}

impl Request for BatchRequest {
    type Answer = WrittenBatch;
    type Report = BatchReport;

    fn what(&self) -> String {
        format!("batch of {} writes", self.count)
    }

    fn nonce(&self) -> u64 {
        self.nonce
    }

    async fn send(&self, node: &NodeClient, auth: &OwnerAuth<'_>, state: &OwnerState) -> anyhow::Result<WrittenBatch> {
        let Some(Pending::WriteBatch { writes, .. }) = &state.pending else { bail!("no batch of writes is pending") };
        let roots = merkle::block_roots(&writes.iter().map(|w| w.block.as_ref()).collect::<Vec<&[u8]>>());
        let wire = writes.iter().zip(roots).map(|(w, root)| (w.index, w.block.to_vec(), root, w.sealed_u)).collect();
        node.write_batch_by_roots(auth, self.nonce, wire).await
    }

    fn applied(&self, answer: Response) -> anyhow::Result<WrittenBatch> {
        match answer {
            Response::WrittenBatch { count, root_u, runs } => Ok(WrittenBatch { count, root_u, runs }),
            other => unexpected(&format!("the batch with nonce {}", self.nonce), &other),
        }
    }

    async fn settle(
        &self,
        node: &NodeClient,
        auth: &OwnerAuth<'_>,
        state: &mut OwnerState,
        answer: WrittenBatch,
    ) -> anyhow::Result<BatchReport> {
        finish_write_batch(node, auth, state, answer, self.defer_save).await
    }

    fn settled_note(&self, r: &BatchReport, resent: bool) -> String {
        format!(
            "the interrupted batch of {} writes (nonce {}) {}, verified: new runs {} (checked at the next checkpoint)",
            self.count,
            self.nonce,
            machine::how(resent),
            r.runs.join(", ")
        )
    }
}

#[cfg(test)]
mod tests {
    use super::new_root_from_paths;
    use alloy_primitives::{B256, U256};
    use dpor_core::merkle::MerkleTree;

    /// The new root from old paths (checked in lanes) against the tree itself, and a
    /// wrong old leaf or a short path named in the error.
    #[test]
    fn new_root_from_paths_matches_the_tree_and_names_a_bad_path() {
        let leaves: Vec<B256> = (0..64u64).map(|i| B256::from(U256::from(i * 5 + 2))).collect();
        let mut tree = MerkleTree::new(leaves.clone()).unwrap();
        let root = tree.root();
        let touched = [3u64, 4, 40, 63, 3];
        let old: Vec<(u64, B256, Vec<B256>)> = touched.iter().map(|&i| (i, leaves[i as usize], tree.path(i).unwrap())).collect();
        let new: Vec<(u64, B256)> = touched.iter().enumerate().map(|(k, &i)| (i, B256::repeat_byte(k as u8 + 1))).collect();
        let got = new_root_from_paths(&root, 6, &old, &new).unwrap();
        tree.set_leaves(&new).unwrap();
        assert_eq!(got, tree.root());
        let mut bad = old.clone();
        bad[2].1 = B256::ZERO;
        let err = new_root_from_paths(&root, 6, &bad, &new).unwrap_err();
        assert!(format!("{err:#}").contains("the path of leaf 40"), "{err:#}");
        let mut short = old.clone();
        short[1].2.pop();
        let err = new_root_from_paths(&root, 6, &short, &new).unwrap_err();
        assert!(format!("{err:#}").contains("the path of leaf 4"), "{err:#}");
    }
}
