//! The owner's side of each operation (§6, App. A.1), over a [`NodeClient`]: every
//! answer of the node is checked against what the owner computed itself before the
//! owner's state moves on. No chain access here (see `commands.rs`), so benchmarks and
//! tests can drive a node directly.

use super::machine::{self, Request};
use crate::node_client::{unexpected, NodeClient, OwnerAuth, Written};
use crate::owner_state::{sigma_from_u64, sigma_to_u64, OwnerState, Pending, RunEntry, SIGMA_WIDTH};
use crate::progress::Progress;
use alloy_primitives::{B256, U256};
use anyhow::{bail, ensure, Context};
use dpor_core::audit::{spot_check, RunCommitment, SampleResponse};
use dpor_core::checksum::{OwnerKeys, Place, RHO};
use dpor_core::code;
use dpor_core::digest::Digest;
use dpor_core::field::Fp;
use dpor_core::merkle::{self, MerkleTree};
use dpor_core::state::{write_step, WriteStep};
use dpor_core::{BlockFormat, RunId, RunTag};
use dpor_proto::messages::{batch_len, OwnerOp, Response, WireRun, WireStep};
use rand::Rng;
use serde_bytes::ByteBuf;
use futures::StreamExt;
use rayon::prelude::*;
use std::sync::Arc;

/// Splits `file` into N blocks of β bytes (the last data block and the padding
/// blocks zero-filled). Errors if the file is empty or needs more than N blocks.
pub fn split_file(file: &[u8], block_bytes: usize, num_blocks: u64) -> anyhow::Result<Vec<Vec<u8>>> {
    check_fits(file, block_bytes, num_blocks)?;
    Ok(file_blocks(file, block_bytes, 0, num_blocks as usize))
}

/// Errors unless `file` is non-empty and fits `num_blocks` blocks of `block_bytes`.
fn check_fits(file: &[u8], block_bytes: usize, num_blocks: u64) -> anyhow::Result<()> {
    ensure!(!file.is_empty(), "the file is empty");
    ensure!(block_bytes > 0, "blocks of 0 bytes");
    let need = (file.len() as u64).div_ceil(block_bytes as u64);
    ensure!(need <= num_blocks, "the file needs {need} blocks of {block_bytes} bytes, but the deal holds {num_blocks}");
    Ok(())
}

/// Blocks `start..end` of `file` cut into blocks of `block_bytes`, each zero-padded to
/// `block_bytes` (blocks past the file's end are all zeros): what [`split_file`] gives
/// for those indices, without copying the rest of the file. `block_bytes` > 0.
fn file_blocks(file: &[u8], block_bytes: usize, start: usize, end: usize) -> Vec<Vec<u8>> {
    (start..end)
        .map(|i| {
            let from = (i * block_bytes).min(file.len());
            let to = (from + block_bytes).min(file.len());
            let mut b = Vec::with_capacity(block_bytes);
            b.extend_from_slice(&file[from..to]);
            b.resize(block_bytes, 0);
            b
        })
        .collect()
}

/// Spot-check positions of a run of `size` coded blocks: all of them if `size ≤ λ`,
/// else λ drawn by the owner (unpredictable to the node).
pub fn spot_positions(size: u64, lambda: u32) -> Vec<u64> {
    if size <= lambda as u64 {
        return (0..size).collect();
    }
    let mut rng = rand::thread_rng();
    (0..lambda).map(|_| rng.gen_range(0..size)).collect()
}

/// An answer of the node that fails the owner's checks: the node misbehaved (as
/// opposed to a request that failed, which may be tried again).
#[derive(Debug)]
pub struct Misbehaved(pub String);

impl std::fmt::Display for Misbehaved {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Misbehaved {}

/// Fails with [`Misbehaved`] unless `ok`.
fn check(ok: bool, why: impl FnOnce() -> String) -> anyhow::Result<()> {
    if ok {
        Ok(())
    } else {
        Err(Misbehaved(why()).into())
    }
}

/// Spot-checks a run the node built against the checksums the owner expects
/// (`expected`: size × ρ), asking for λ samples in batches.
#[allow(clippy::too_many_arguments)]
pub async fn spot_check_run(
    node: &NodeClient,
    deal: u64,
    keys: &OwnerKeys,
    format: &BlockFormat,
    run: WireRun,
    root: B256,
    size: u64,
    expected: &[Fp],
    lambda: u32,
) -> anyhow::Result<usize> {
    let positions = spot_positions(size, lambda);
    spot_check_at(node, deal, keys, format, run, root, size, expected, &positions).await
}

/// [`spot_check_run`] at given `positions` (`expected` is size × ρ; only the entries
/// of `positions` are read).
#[allow(clippy::too_many_arguments)]
pub async fn spot_check_at(
    node: &NodeClient,
    deal: u64,
    keys: &OwnerKeys,
    format: &BlockFormat,
    run: WireRun,
    root: B256,
    size: u64,
    expected: &[Fp],
    positions: &[u64],
) -> anyhow::Result<usize> {
    let per = batch_len(format.coded_block_bytes() as u64 + 32 * 40);
    let commitment = RunCommitment { tag: RunTag(run.tag), root, size };
    for chunk in positions.chunks(per as usize) {
        let got = node.samples(deal, run, chunk.to_vec()).await?;
        let samples: Vec<SampleResponse> =
            got.into_iter().map(|s| SampleResponse { position: s.position, block: s.block.into_vec(), path: s.path }).collect();
        let failures = spot_check(keys, format, &commitment, expected, chunk, &samples);
        if let Some(f) = failures.first() {
            return Err(Misbehaved(format!(
                "the node's run {} failed the owner's spot-check at position {}: {} ({} of {} samples bad)",
                RunId::from(run),
                f.position,
                f.fault,
                failures.len(),
                chunk.len()
            ))
            .into());
        }
    }
    Ok(positions.len())
}

/// Finishes a [`Pending::StoreSealed`] step: stores the owner's σ̃ of the run's
/// positions from `next` on, in batches, saving progress after each acknowledged
/// batch; then clears the step and the stashed checksums. Storing a σ̃ twice is
/// harmless, so after a crash the step simply continues from the saved position.
pub async fn store_pending_sealed(node: &NodeClient, auth: &OwnerAuth<'_>, state: &mut OwnerState, keys: &OwnerKeys) -> anyhow::Result<()> {
    let Some(Pending::StoreSealed { mut run, mut next, mut more }) = state.pending.clone() else {
        return Ok(());
    };
    loop {
        store_sealed_run(node, auth, state, keys, run, next, &more).await?;
        if more.is_empty() {
            break;
        }
        run = more.remove(0);
        next = 0;
        state.pending = Some(Pending::StoreSealed { run, next, more: more.clone() });
        state.persist()?;
    }
    state.pending = None;
    state.drop_sigma();
    state.persist()
}

/// Stores the σ̃ of `run` from position `next` on (one step of
/// [`store_pending_sealed`]), saving progress after each acknowledged batch but the
/// last (whose save is the caller's next step).
async fn store_sealed_run(
    node: &NodeClient,
    auth: &OwnerAuth<'_>,
    state: &mut OwnerState,
    keys: &OwnerKeys,
    run: WireRun,
    next: u64,
    more: &[WireRun],
) -> anyhow::Result<()> {
    let sigma = state.stashed_sigma(run)?;
    let id = RunId::from(run);
    let size = (sigma.len() / RHO) as u64;
    let per = batch_len(40);
    let mut start = next;
    while start < size {
        let count = per.min(size - start);
        // Each position's σ̃ under its own key (κ derived per place): on every core.
        let sealed: Vec<B256> = (start..start + count)
            .into_par_iter()
            .map(|p| {
                let i = p as usize * RHO;
                let s: [Fp; RHO] = [sigma[i], sigma[i + 1]];
                B256::from(keys.seal(Place::Run { tag: id.tag, built_at: id.built_at, position: p }, &s))
            })
            .collect();
        let nonce = state.next_nonce();
        node.owner_accepted(auth, nonce, OwnerOp::StoreSealed { run, start, sealed }).await?;
        start += count;
        state.pending = Some(Pending::StoreSealed { run, next: start, more: more.to_vec() });
        // The run's last batch needs no save of its own: the caller saves the next step
        // (the next run, or nothing pending) at once, and a crash in between stores
        // that batch again (harmless).
        if start < size {
            state.persist()?;
        }
    }
    Ok(())
}

/// What an upload did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct UploadReport {
    /// File bytes.
    pub file_bytes: u64,
    /// N.
    pub num_blocks: u64,
    /// rootU (owner-computed, equal to the node's).
    pub root_u: B256,
    /// rootC as committed by the node.
    pub root_c: B256,
    /// C positions spot-checked.
    pub spot_checked: usize,
}

/// Init (§6): uploads the file's blocks with σ̃_U, checks the node's rootU against
/// the owner's, predicts C's checksums by running the C-rebuild on checksums,
/// spot-checks C, then stores σ̃_C.
pub async fn upload(
    node: &NodeClient,
    auth: &OwnerAuth<'_>,
    state: &mut OwnerState,
    file: &[u8],
    bar: Option<&dyn Progress>,
) -> anyhow::Result<UploadReport> {
    machine::ready(node, state).await?;
    ensure!(!state.uploaded, "this deal's file is already uploaded (use `write` to change it)");
    let format = state.format()?;
    let keys = Arc::new(state.keys()?);
    let block_bytes = format.block_bytes();
    check_fits(file, block_bytes, state.num_blocks)?;
    // Each request's blocks, σ, σ̃_U and block roots (the chunk trees: the heavy part of
    // the owner's rootU, and what the request is signed over) on every core, the next
    // request's while this one travels (issue 23: the upload was strictly sequential).
    // Each request's blocks are cut from the file when its sums start and then moved
    // into the request: one copy of the file, not a whole split file up front (a
    // serial 0.2 s of copies and page faults for 256 MiB) plus a copy per request.
    type Sums = (Vec<([Fp; RHO], [u8; 32])>, Vec<B256>, Vec<Vec<u8>>);
    let sums_of = |start: usize, end: usize| {
        let blocks = file_blocks(file, block_bytes, start, end);
        let keys = Arc::clone(&keys);
        tokio::task::spawn_blocking(move || -> anyhow::Result<Sums> {
            use rayon::prelude::*;
            let sums = blocks
                .par_iter()
                .enumerate()
                .map(|(k, b)| {
                    let i = (start + k) as u64;
                    let s = keys.checksum(&format.record(i, b)?)?;
                    Ok((s, keys.seal_u(i, b, &s)))
                })
                .collect::<anyhow::Result<Vec<_>>>()?;
            let roots = merkle::block_roots(&blocks);
            Ok((sums, roots, blocks))
        })
    };
    let num_blocks = state.num_blocks as usize;
    let per = batch_len(block_bytes as u64 + 40) as usize;
    let ranges: Vec<(usize, usize)> = (0..num_blocks).step_by(per.max(1)).map(|s| (s, (s + per).min(num_blocks))).collect();
    let mut next = ranges.first().map(|&(s, e)| sums_of(s, e));
    let nonce = state.next_nonce();
    node.owner_accepted(auth, nonce, OwnerOp::UploadBegin { num_blocks: state.num_blocks, block_bytes: state.block_bytes }).await?;
    if let Some(b) = bar {
        b.set_length(file.len() as u64);
    }
    let mut sigma = Vec::with_capacity(num_blocks * RHO);
    let mut sealed_u: Vec<[u8; 32]> = Vec::with_capacity(num_blocks);
    let mut roots: Vec<B256> = Vec::with_capacity(num_blocks);
    // Two requests in flight (issue 23 #2): the node checks and hashes the next while
    // it stores this one (it takes them in order of `start`, `Store::upload_blocks`).
    let mut in_flight = futures::stream::FuturesOrdered::new();
    for (k, &(start, end)) in ranges.iter().enumerate() {
        let (sums, these_roots, these_blocks) = match next.take() {
            Some(task) => task.await.context("computing checksums")??,
            None => bail!("the checksums of blocks {start}..{end} were not started"),
        };
        next = ranges.get(k + 1).map(|&(s, e)| sums_of(s, e));
        let first_sealed = sealed_u.len();
        for (s, sealed) in sums {
            sigma.extend_from_slice(&s);
            sealed_u.push(sealed);
        }
        roots.extend_from_slice(&these_roots);
        // Signed over the block roots, the blocks beside the signature (issue 23 #3).
        let these_blocks: Vec<ByteBuf> = these_blocks.into_iter().map(ByteBuf::from).collect();
        let these_sealed: Vec<B256> = sealed_u[first_sealed..].iter().map(|s| B256::from(*s)).collect();
        let nonce = state.next_nonce();
        let bytes = ((end - start) * format.block_bytes()) as u64;
        in_flight.push_back(async move {
            node.upload_by_roots(auth, nonce, start as u64, these_blocks, these_roots, these_sealed).await.map(|()| bytes)
        });
        if in_flight.len() >= UPLOAD_IN_FLIGHT {
            if let Some(done) = in_flight.next().await {
                let bytes = done?;
                bar.inspect(|b| b.inc(bytes));
            }
        }
    }
    while let Some(done) = in_flight.next().await {
        let bytes = done?;
        bar.inspect(|b| b.inc(bytes));
    }
    let my_root_u = merkle::u_tree_of_roots(&roots, &sealed_u).context("U tree")?.root();
    let expected = code::c_rebuild(&sigma, state.log_blocks(), SIGMA_WIDTH)?;
    // The intent first (durably), then the request.
    let nonce = state.next_nonce();
    state.stash_sigma(C0, &expected)?;
    machine::intend(state, Pending::UploadFinish { nonce, root_u: my_root_u, file_bytes: file.len() as u64, rejected: None })?;
    let (checked, (root_u, _, root_c)) = machine::run(node, auth, state, &UploadFinishRequest { nonce }).await?;
    Ok(UploadReport { file_bytes: file.len() as u64, num_blocks: state.num_blocks, root_u, root_c, spot_checked: checked })
}

/// Upload requests an owner keeps in flight at once ([`upload`]).
const UPLOAD_IN_FLIGHT: usize = 2;

/// C@0, the run an upload builds.
const C0: WireRun = WireRun { tag: 0, built_at: 0 };

pub use super::machine::LOST_ANSWER;

/// Checks the node's answer to a [`Pending::UploadFinish`] (as it arrived, or as the
/// node reported it after a crash), spot-checks C, commits the state, and stores σ̃_C.
/// A failed check marks the intent rejected (the node misbehaved) and errors.
pub(crate) async fn finish_upload(
    node: &NodeClient,
    auth: &OwnerAuth<'_>,
    state: &mut OwnerState,
    root_u: B256,
    c: WireRun,
    root_c: B256,
) -> anyhow::Result<usize> {
    let Some(Pending::UploadFinish { root_u: my_root_u, file_bytes, .. }) = state.pending.clone() else {
        bail!("no upload finish is pending");
    };
    let format = state.format()?;
    let keys = state.keys()?;
    let expected = state.stashed_sigma(C0)?;
    let size = 2 * state.num_blocks;
    let verdict = async {
        check(root_u == my_root_u, || format!("the node committed rootU {root_u}, but the uploaded blocks give {my_root_u}"))?;
        check(c == C0, || format!("the node named C {} instead of C@0", RunId::from(c)))?;
        spot_check_run(node, state.deal, &keys, &format, c, root_c, size, &expected, state.lambda).await
    }
    .await;
    let checked = match verdict {
        Ok(n) => n,
        Err(e) => return Err(reject(state, e)),
    };
    state.uploaded = true;
    state.file_bytes = file_bytes;
    state.root_u = root_u;
    state.c = Some(RunEntry { run: c, root: root_c, sigma: None, unchecked: false, sigma_file: None });
    state.levels = vec![None; state.log_blocks() as usize];
    state.write_count = 0;
    state.rebuild_count = 0;
    state.pending = Some(Pending::StoreSealed { run: c, next: 0, more: vec![] });
    state.persist()?;
    store_pending_sealed(node, auth, state, &keys).await?;
    Ok(checked)
}

/// Marks the pending request rejected (its answer failed the owner's checks: the
/// node misbehaved) and returns the error. A transport failure while checking (the
/// node went away) leaves the intent as it is, to be checked again.
pub(crate) fn reject(state: &mut OwnerState, e: anyhow::Error) -> anyhow::Error {
    if !e.chain().any(|c| c.downcast_ref::<Misbehaved>().is_some()) {
        return e;
    }
    let why = format!("{e:#}");
    match &mut state.pending {
        Some(Pending::Write { rejected, .. })
        | Some(Pending::UploadFinish { rejected, .. })
        | Some(Pending::WriteBatch { rejected, .. })
        | Some(Pending::Resize { rejected, .. }) => *rejected = Some(why),
        _ => {}
    }
    if let Err(save) = state.persist() {
        return e.context(format!("(and the owner state could not be saved: {save:#})"));
    }
    e
}

/// What a write did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct WriteReport {
    /// Block index.
    pub index: u64,
    /// `"H<ℓ>"` or `"C-rebuild"`.
    pub rebuilt: String,
    /// The new run.
    pub run: String,
    /// Its root.
    pub run_root: B256,
    /// The new rootU.
    pub root_u: B256,
    /// Positions spot-checked.
    pub spot_checked: usize,
    /// σ̃ fetched from the node for consumed levels not in the cache.
    pub sealed_fetched: u64,
}

/// The checksums of level `level` (from the cache, or fetched as σ̃ and opened).
pub(crate) async fn level_sigma(node: &NodeClient, state: &OwnerState, keys: &OwnerKeys, level: u32) -> anyhow::Result<(Vec<Fp>, u64)> {
    let entry = state
        .levels
        .get(level as usize)
        .and_then(|e| e.as_ref())
        .with_context(|| format!("level {level} should be filled but the owner state has no entry for it"))?;
    if let Some(s) = &entry.sigma {
        return Ok((sigma_from_u64(s)?, 0));
    }
    let size = 2u64 << level;
    let id = RunId::from(entry.run);
    let mut out = Vec::with_capacity(size as usize * RHO);
    let per = batch_len(40);
    let mut start = 0;
    while start < size {
        let count = per.min(size - start);
        let got = node.sealed(state.deal, entry.run, start, count).await?;
        for (j, s) in got.into_iter().enumerate() {
            let p = start + j as u64;
            let place = Place::Run { tag: id.tag, built_at: id.built_at, position: p };
            let s = s.with_context(|| format!("the node lost the checksum of {id} position {p}"))?;
            out.extend_from_slice(&keys.open(place, &s.0).with_context(|| format!("checksum of {id} position {p}"))?);
        }
        start += count;
    }
    Ok((out, size))
}

/// Fills in the roots of the owner's runs that the node is still building (a batch's
/// answer names a run it builds in the background, deamortized rebuilds, with a zero
/// root): asks the node for its state once every run is built (`Request::Built`) and
/// takes each such run's root from it, by name. The roots are the node's claims,
/// checked like every batch's run before the owner signs a digest
/// ([`crate::owner::batch::verify_deferred`]). Returns whether any root changed (the
/// caller saves the state).
///
/// Errors: the node unreachable or refusing; a run the node does not hold or still
/// reports unbuilt.
pub async fn resolve_roots(node: &NodeClient, state: &mut OwnerState) -> anyhow::Result<bool> {
    let unresolved = state.c.iter().chain(state.levels.iter().flatten()).any(|e| e.root == B256::ZERO);
    if !unresolved {
        return Ok(false);
    }
    let status = node.built(state.deal).await?;
    let (changed, missing) = fill_built_roots(state, &status);
    if let Some(run) = missing {
        bail!("the node does not report a built run {} (it acknowledged it as being built)", RunId::from(run));
    }
    Ok(changed)
}

/// Whether the node still builds a run of the owner's state in the background: asks
/// for the deal's status without waiting (`Request::Status`) and takes the roots of
/// the runs it has finished since ([`resolve_roots`] without its wait). An owner that
/// checkpoints every so many writes can postpone a checkpoint while this holds and
/// write on, instead of waiting for a C-rebuild's build (seconds) with a core idle.
/// The postponement must be bounded by the caller (so many writes, then a checkpoint
/// that waits, [`crate::owner::batch::verify_deferred`]): a provider that reported a
/// build pending forever would otherwise keep the digest on chain, and with it what
/// audits hold the provider to, at an old state.
/// Returns (any root changed (the caller saves the state), a build still pending).
///
/// Errors: the node unreachable or refusing.
pub async fn builds_pending(node: &NodeClient, state: &mut OwnerState) -> anyhow::Result<(bool, bool)> {
    let unresolved = state.c.iter().chain(state.levels.iter().flatten()).any(|e| e.root == B256::ZERO);
    if !unresolved {
        return Ok((false, false));
    }
    let status = node.status(state.deal).await?;
    let (changed, missing) = fill_built_roots(state, &status);
    Ok((changed, missing.is_some()))
}

/// Sets each zero root of the owner's runs from `status` (by name). Returns whether
/// any root changed and a run `status` does not give a root for (still being built,
/// or not held).
fn fill_built_roots(state: &mut OwnerState, status: &dpor_proto::messages::DealStatus) -> (bool, Option<WireRun>) {
    let held: Vec<(WireRun, B256)> = std::iter::once(status.c).chain(status.levels.iter().map(|(_, r, root)| (*r, *root))).collect();
    let (mut changed, mut missing) = (false, None);
    for entry in state.c.iter_mut().chain(state.levels.iter_mut().flatten()) {
        if entry.root != B256::ZERO {
            continue;
        }
        match held.iter().find(|(r, _)| *r == entry.run).map(|(_, root)| *root) {
            Some(root) if root != B256::ZERO => {
                entry.root = root;
                changed = true;
            }
            _ => missing = missing.or(Some(entry.run)),
        }
    }
    (changed, missing)
}

/// U's leaves as the node holds them, (block root, σ̃_U) for all N blocks, checked
/// against the owner's rootU (`ULeaves`, 64 bytes per block on the wire).
///
/// Errors: the node unreachable or refusing; leaves that do not give rootU.
pub async fn verified_u_leaves(node: &NodeClient, state: &OwnerState) -> anyhow::Result<Vec<(B256, B256)>> {
    let n = state.num_blocks;
    let per = batch_len(64);
    let mut parts = Vec::with_capacity(n as usize);
    let mut leaves = Vec::with_capacity(n as usize);
    let mut start = 0;
    while start < n {
        let count = per.min(n - start);
        for (j, (root, s)) in node.u_leaves(state.deal, start, count).await?.into_iter().enumerate() {
            leaves.push(merkle::u_leaf(start + j as u64, &root, &s.0));
            parts.push((root, s));
        }
        start += count;
    }
    let root = MerkleTree::new(leaves).context("U tree")?.root();
    ensure!(root == state.root_u, "the node's U leaves give root {root}, the owner's rootU is {}", state.root_u);
    Ok(parts)
}

/// The σ of all of U, from σ̃_U the node returns, checked against rootU.
pub(crate) async fn u_sigma(node: &NodeClient, state: &OwnerState, keys: &OwnerKeys) -> anyhow::Result<Vec<Fp>> {
    let parts = verified_u_leaves(node, state).await?;
    let format = state.format()?;
    let mut out = Vec::with_capacity(parts.len() * RHO);
    for (i, (_, s)) in parts.iter().enumerate() {
        out.extend_from_slice(&open_u(keys, &format, i as u64, &s.0)?);
    }
    Ok(out)
}

/// σ_U(i) from σ̃_U(i) of a U leaf already checked against rootU: the all-zero σ̃ of a
/// block a resize added ([`dpor_core::checksum::ZERO_BLOCK_U`]) stands for the zero
/// block's checksum (docs/SCHEME.md §10.5).
pub(crate) fn open_u(keys: &OwnerKeys, format: &BlockFormat, index: u64, sealed: &[u8; 32]) -> anyhow::Result<[Fp; RHO]> {
    let zero = || format.record(index, &vec![0u8; format.block_bytes()]).unwrap_or_default();
    keys.open_u(index, sealed, zero).with_context(|| format!("σ̃_U of block {index} does not open"))
}

/// Write(i, B) (§5.4, App. A.1): checks U's old path, computes the new rootU itself,
/// predicts the new run's checksums (HAdd or the C-rebuild on checksums), sends the
/// block, checks the node's roots, spot-checks the new run and stores its σ̃.
pub async fn write(
    node: &NodeClient,
    auth: &OwnerAuth<'_>,
    state: &mut OwnerState,
    index: u64,
    data: &[u8],
) -> anyhow::Result<WriteReport> {
    machine::ready(node, state).await?;
    ensure!(state.uploaded, "upload the file first");
    let format = state.format()?;
    let keys = state.keys()?;
    let k = state.log_blocks();
    ensure!(index < state.num_blocks, "block index {index} is out of range (N = {})", state.num_blocks);
    ensure!(data.len() <= format.block_bytes(), "a block is at most {} bytes, got {}", format.block_bytes(), data.len());
    let mut block = data.to_vec();
    block.resize(format.block_bytes(), 0);

    // (1) U's old path, verified against the owner's rootU.
    let (old_root, old_sealed, path) = node.u_path(state.deal, index).await?;
    merkle::verify_path(&state.root_u, k, index, merkle::u_leaf(index, &old_root, &old_sealed.0), &path)
        .context("the node's U path for the old block does not match the owner's rootU")?;
    let record = format.record(index, &block)?;
    let sigma = keys.checksum(&record)?;
    let sealed = keys.seal_u(index, &block, &sigma);
    let new_root_u = merkle::root_from_path(merkle::u_leaf(index, &merkle::block_root(&block), &sealed), index, &path);

    // (3) the checksums the new run must have.
    let step = write_step(state.write_count, k);
    // While C is unchecked (a batch crossed a C-rebuild), its checksums are computed
    // at its deferred check from U's σ then: keep σ_U(index) as of that C-rebuild (the
    // old leaf, checked against rootU above), unless this block is already in the
    // snapshot or this write rebuilds C itself (the new C is checked now, from U's σ).
    let c_snapshot = match (&state.c_snapshot, step) {
        (Some(snap), WriteStep::Level(_)) => {
            let mut snap = snap.clone();
            if let std::collections::btree_map::Entry::Vacant(e) = snap.entry(index) {
                e.insert(sigma_to_u64(&open_u(&keys, &format, index, &old_sealed.0)?));
            }
            Some(snap)
        }
        _ => None,
    };
    let built_at = state.total_writes() + 1;
    let mut fetched = 0;
    let (expected_run, expected) = match step {
        WriteStep::Level(level) => {
            let mut consumed = Vec::with_capacity(level as usize);
            for j in 0..level {
                let (s, f) = level_sigma(node, state, &keys, j).await?;
                fetched += f;
                consumed.push(s);
            }
            let refs: Vec<&[Fp]> = consumed.iter().map(|v| v.as_slice()).collect();
            let exp = code::h_add(state.write_count, k, &sigma, &refs, SIGMA_WIDTH)?;
            (RunId { tag: RunTag::level(level), built_at }, exp)
        }
        WriteStep::CRebuild => {
            let mut all = u_sigma(node, state, &keys).await?;
            fetched += state.num_blocks;
            let i = index as usize * RHO;
            all[i..i + RHO].copy_from_slice(&sigma);
            (RunId { tag: RunTag::C, built_at }, code::c_rebuild(&all, k, SIGMA_WIDTH)?)
        }
    };

    // (2) the intent, durably, then the write itself.
    let nonce = state.next_nonce();
    let run = WireRun::from(expected_run);
    state.stash_sigma(run, &expected)?;
    // The block cache records every write before its intent, under the number it takes
    // (a batch's as a single write's): the last record of each committed number is then
    // always its block, whatever a refused request left under that number.
    if state.block_cache_levels > 0 {
        let total = state.total_writes();
        state.record_recent(total, [(index, block.clone())])?;
    }
    machine::intend(
        state,
        Pending::Write { nonce, index, block: block.into(), sealed_u: B256::from(sealed), new_root_u, run, c_snapshot, rejected: None },
    )?;
    let mut report = machine::run(node, auth, state, &WriteRequest { nonce, index }).await?;
    report.sealed_fetched = fetched;
    Ok(report)
}

/// Checks the node's answer to a [`Pending::Write`] (as it arrived, or as the node
/// reported it after a crash) exactly as the write flow does: the new rootU, the run's
/// name and step, a spot-check of the new run against the stashed checksums; then
/// commits the new state, and stores the new run's σ̃ if the owner does not cache it.
/// A failed check marks the intent rejected and errors.
pub(crate) async fn finish_write(
    node: &NodeClient,
    auth: &OwnerAuth<'_>,
    state: &mut OwnerState,
    written: Written,
) -> anyhow::Result<WriteReport> {
    let Some(Pending::Write { index, new_root_u, run, c_snapshot, .. }) = state.pending.clone() else {
        bail!("no write is pending");
    };
    let format = state.format()?;
    let keys = state.keys()?;
    let expected_run = RunId::from(run);
    let expected = state.stashed_sigma(run)?;
    let size = (expected.len() / RHO) as u64;
    let verdict = async {
        check(written.root_u == new_root_u, || format!("the node's new rootU {} differs from the owner's {new_root_u}", written.root_u))?;
        check(RunId::from(written.run) == expected_run, || {
            format!("the node built run {}, expected {expected_run}", RunId::from(written.run))
        })?;
        let step_ok = match (expected_run.tag.as_level(), written.step) {
            (None, WireStep::CRebuild) => true,
            (Some(a), WireStep::Level(b)) => a == b,
            _ => false,
        };
        check(step_ok, || format!("the node reports rebuild {:?} for run {expected_run}", written.step))?;
        // (5) spot-check the new run against the predicted checksums.
        spot_check_run(node, state.deal, &keys, &format, written.run, written.run_root, size, &expected, state.lambda).await
    }
    .await;
    let checked = match verdict {
        Ok(n) => n,
        Err(e) => return Err(reject(state, e)),
    };

    // (4) commit the new state; the new run's σ̃ go to the node unless cached.
    let entry_level = expected_run.tag.as_level();
    let cache = entry_level.is_some_and(|l| l < state.cache_levels);
    state.root_u = new_root_u;
    match entry_level {
        Some(level) => {
            for l in state.levels.iter_mut().take(level as usize) {
                *l = None;
            }
            let sigma = cache.then(|| sigma_to_u64(&expected));
            if let Some(slot) = state.levels.get_mut(level as usize) {
                *slot = Some(RunEntry { run: written.run, root: written.run_root, sigma, unchecked: false, sigma_file: None });
            }
            state.write_count += 1;
            if c_snapshot.is_some() {
                state.c_snapshot = c_snapshot;
            }
        }
        None => {
            // The new C was spot-checked above against U's σ now: an older C that a
            // batch left unchecked is gone from the state (no digest ever named it),
            // and its snapshot with it.
            state.levels.iter_mut().for_each(|l| *l = None);
            state.c_snapshot = None;
            state.c = Some(RunEntry { run: written.run, root: written.run_root, sigma: None, unchecked: false, sigma_file: None });
            state.write_count = 0;
            state.rebuild_count += 1;
        }
    }
    state.trim_recent();
    if cache {
        state.adopt_stash(&[written.run]);
        state.pending = None;
        state.drop_sigma();
        state.persist()?;
    } else {
        state.pending = Some(Pending::StoreSealed { run: written.run, next: 0, more: vec![] });
        state.persist()?;
        store_pending_sealed(node, auth, state, &keys).await?;
    }
    Ok(WriteReport {
        index,
        rebuilt: match entry_level {
            Some(l) => format!("H{l}"),
            None => "C-rebuild".into(),
        },
        run: expected_run.to_string(),
        run_root: written.run_root,
        root_u: new_root_u,
        spot_checked: checked,
        sealed_fetched: 0,
    })
}

/// A single write ([`Pending::Write`]) as the owner's state machine drives it
/// ([`machine`]): sent from the saved intent, settled by [`finish_write`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct WriteRequest {
    /// Its nonce.
    pub nonce: u64,
    /// Block index.
    pub index: u64,
}

impl WriteRequest {
    /// The request a saved intent holds, if it is a write.
    pub(crate) fn of(p: &Pending) -> Option<Self> {
        match p {
            Pending::Write { nonce, index, .. } => Some(Self { nonce: *nonce, index: *index }),
            _ => None,
        }
    }
}

impl Request for WriteRequest {
    type Answer = Written;
    type Report = WriteReport;

    fn what(&self) -> String {
        format!("write of block {}", self.index)
    }

    fn nonce(&self) -> u64 {
        self.nonce
    }

    async fn send(&self, node: &NodeClient, auth: &OwnerAuth<'_>, state: &OwnerState) -> anyhow::Result<Written> {
        let Some(Pending::Write { index, block, sealed_u, .. }) = &state.pending else { bail!("no write is pending") };
        node.write(auth, self.nonce, *index, block.to_vec(), *sealed_u).await
    }

    fn applied(&self, answer: Response) -> anyhow::Result<Written> {
        Written::from_response(&format!("the write with nonce {}", self.nonce), answer)
    }

    async fn settle(
        &self,
        node: &NodeClient,
        auth: &OwnerAuth<'_>,
        state: &mut OwnerState,
        answer: Written,
    ) -> anyhow::Result<WriteReport> {
        finish_write(node, auth, state, answer).await
    }

    fn settled_note(&self, r: &WriteReport, resent: bool) -> String {
        format!(
            "the interrupted write of block {} (nonce {}) {}, verified: rebuilt {} ({}), spot-checked {} positions",
            self.index,
            self.nonce,
            machine::how(resent),
            r.rebuilt,
            r.run,
            r.spot_checked
        )
    }
}

/// The upload's finish ([`Pending::UploadFinish`]) as the owner's state machine drives
/// it ([`machine`]): settled by [`finish_upload`]; reports the positions spot-checked
/// and the node's answer (rootU, C, rootC).
#[derive(Debug, Clone, Copy)]
pub(crate) struct UploadFinishRequest {
    /// Its nonce.
    pub nonce: u64,
}

impl UploadFinishRequest {
    /// The request a saved intent holds, if it is an upload's finish.
    pub(crate) fn of(p: &Pending) -> Option<Self> {
        match p {
            Pending::UploadFinish { nonce, .. } => Some(Self { nonce: *nonce }),
            _ => None,
        }
    }
}

impl Request for UploadFinishRequest {
    type Answer = (B256, WireRun, B256);
    type Report = (usize, (B256, WireRun, B256));

    fn what(&self) -> String {
        "upload".into()
    }

    fn nonce(&self) -> u64 {
        self.nonce
    }

    async fn send(&self, node: &NodeClient, auth: &OwnerAuth<'_>, _state: &OwnerState) -> anyhow::Result<Self::Answer> {
        node.upload_finish(auth, self.nonce).await
    }

    fn applied(&self, answer: Response) -> anyhow::Result<Self::Answer> {
        match answer {
            Response::Committed { root_u, c, root_c } => Ok((root_u, c, root_c)),
            other => unexpected(&format!("the upload finish with nonce {}", self.nonce), &other),
        }
    }

    async fn settle(
        &self,
        node: &NodeClient,
        auth: &OwnerAuth<'_>,
        state: &mut OwnerState,
        answer: Self::Answer,
    ) -> anyhow::Result<Self::Report> {
        let (root_u, c, root_c) = answer;
        let checked = finish_upload(node, auth, state, root_u, c, root_c).await?;
        Ok((checked, answer))
    }

    fn settled_note(&self, (checked, (root_u, _, _)): &Self::Report, resent: bool) -> String {
        format!(
            "the interrupted upload (nonce {}) {}, verified: rootU {root_u}, C spot-checked at {checked} positions",
            self.nonce,
            if resent { "was finished again" } else { "had been finished by the node" }
        )
    }

    fn refused_note(&self, e: &anyhow::Error) -> String {
        format!("the interrupted upload was not finished: the node refuses it ({e:#}); run `upload` again")
    }
}

/// Read(i): the block, verified against rootU and against the owner's checksum.
pub async fn read(node: &NodeClient, state: &OwnerState, index: u64) -> anyhow::Result<Vec<u8>> {
    ensure!(index < state.num_blocks, "block index {index} is out of range (N = {})", state.num_blocks);
    let format = state.format()?;
    let keys = state.keys()?;
    let (block, sealed, path) = node.read(state.deal, index).await?;
    ensure!(block.len() == format.block_bytes(), "the node returned {} bytes for a {}-byte block", block.len(), format.block_bytes());
    let leaf = merkle::u_leaf(index, &merkle::block_root(&block), &sealed.0);
    merkle::verify_path(&state.root_u, state.log_blocks(), index, leaf, &path)
        .context("the block the node returned does not match the owner's rootU")?;
    let want = open_u(&keys, &format, index, &sealed.0).context("the block's checksum does not open")?;
    ensure!(keys.checksum(&format.record(index, &block)?)? == want, "the block does not match its checksum");
    Ok(block)
}

/// Batches a download keeps on the wire beyond the one being checked.
const DOWNLOAD_AHEAD: usize = 2;

/// A task aborted when its handle is dropped (an early error stops the fetches ahead).
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Download: all of U, the file cut to its length. Each batch's U leaves (block root,
/// σ̃_U) go into the U tree, whose root must be the owner's rootU (so every σ̃ is the
/// current one), and each block must match its checksum σ opened from that σ̃ (§5.2:
/// a wrong block passes with probability ≤ 2^-127): the owner's secret MAC checks the
/// content, at a fraction of the cost of rehashing every block's chunk tree.
pub async fn download(node: &NodeClient, state: &OwnerState, bar: Option<&dyn Progress>) -> anyhow::Result<Vec<u8>> {
    ensure!(state.uploaded, "nothing uploaded yet");
    let format = state.format()?;
    let keys = state.keys()?;
    let n = state.num_blocks;
    let per = batch_len(format.block_bytes() as u64 + 64);
    let mut leaves = Vec::with_capacity(n as usize);
    let mut out = Vec::with_capacity(state.file_bytes as usize);
    if let Some(b) = bar {
        b.set_length(state.file_bytes);
    }
    // Pipelined: the next batches are on the wire while this one is checked.
    let fetch = |start: u64, count: u64| {
        let node = node.clone();
        let deal = state.deal;
        AbortOnDrop(tokio::spawn(async move { tokio::try_join!(node.download(deal, start, count), node.u_leaves(deal, start, count)) }))
    };
    let mut queue = std::collections::VecDeque::new();
    let mut next = 0;
    loop {
        while next < n && queue.len() <= DOWNLOAD_AHEAD {
            let count = per.min(n - next);
            queue.push_back((next, fetch(next, count)));
            next += count;
        }
        let Some((start, mut handle)) = queue.pop_front() else {
            break;
        };
        let (blocks, parts) = (&mut handle.0).await.context("a download task failed")??;
        ensure!(blocks.len() == parts.len(), "the node sent {} blocks and {} leaves", blocks.len(), parts.len());
        // Every block against its checksum, on every core (rayon, in dpor-core).
        let sealed: Vec<[u8; 32]> = parts.iter().map(|(_, s)| s.0).collect();
        if let Some(i) = keys.first_bad_u_block(&format, start, &blocks, &sealed) {
            bail!("block {i} from the node does not match its checksum");
        }
        for (j, (block, (root, sealed))) in blocks.iter().zip(&parts).enumerate() {
            let i = start + j as u64;
            leaves.push(merkle::u_leaf(i, root, &sealed.0));
            if (out.len() as u64) < state.file_bytes {
                out.extend_from_slice(block);
            }
        }
        if let Some(b) = bar {
            b.set_position((out.len() as u64).min(state.file_bytes));
        }
    }
    let root = MerkleTree::new(leaves).context("U tree")?.root();
    ensure!(root == state.root_u, "the downloaded blocks give rootU {root}, the owner's is {}", state.root_u);
    out.truncate(state.file_bytes as usize);
    Ok(out)
}

// Extract (DESIGN §6): see `super::extract` (the flows do not import it: it uses them).

/// The digest of the owner's verified state, with the next version.
pub fn next_digest(state: &OwnerState, version: u64) -> Digest {
    Digest {
        dealId: U256::from(state.deal),
        version,
        numBlocks: state.num_blocks,
        writeCount: state.write_count,
        rebuildCount: state.rebuild_count,
        rootU: state.root_u,
        rootC: state.c.as_ref().map(|c| c.root).unwrap_or_default(),
        levelRoots: state.level_roots(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_pads_and_refuses_oversized_files() {
        let b = split_file(&[1, 2, 3, 4, 5], 2, 4).unwrap();
        assert_eq!(b, vec![vec![1, 2], vec![3, 4], vec![5, 0], vec![0, 0]]);
        assert!(split_file(&[1; 9], 2, 4).is_err());
        assert!(split_file(&[], 2, 4).is_err());
    }

    /// The upload cuts each request's blocks from the file on its own (`file_blocks`):
    /// every range must give exactly the whole split's blocks at those indices.
    #[test]
    fn a_range_of_blocks_is_the_whole_splits_blocks_at_those_indices() {
        for len in [1usize, 5, 6, 7, 11, 12] {
            let file: Vec<u8> = (1..=len as u8).collect();
            let whole = split_file(&file, 3, 5).unwrap();
            for start in 0..=5 {
                for end in start..=5 {
                    assert_eq!(file_blocks(&file, 3, start, end), whole[start..end].to_vec(), "len {len}, {start}..{end}");
                }
            }
        }
    }

    #[test]
    fn spot_positions_cover_small_runs_and_stay_in_range() {
        assert_eq!(spot_positions(4, 128), vec![0, 1, 2, 3]);
        let p = spot_positions(1 << 20, 16);
        assert_eq!(p.len(), 16);
        assert!(p.iter().all(|&x| x < 1 << 20));
    }
}
