//! The owner's side of each operation (§6, App. A.1), over a [`NodeClient`]: every
//! answer of the node is checked against what the owner computed itself before the
//! owner's state moves on. No chain access here (see `commands.rs`), so benchmarks and
//! tests can drive a node directly.

use crate::node_client::{NodeClient, OwnerAuth};
use crate::owner_state::{sigma_from_u64, sigma_to_u64, OwnerState, RunEntry, SIGMA_WIDTH};
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
use dpor_proto::messages::{batch_len, OwnerOp, WireRun, WireStep};
use indicatif::ProgressBar;
use rand::Rng;
use serde_bytes::ByteBuf;

/// Splits `file` into N blocks of β bytes (the last data block and the padding
/// blocks zero-filled). Errors if the file is empty or needs more than N blocks.
pub fn split_file(file: &[u8], block_bytes: usize, num_blocks: u64) -> anyhow::Result<Vec<Vec<u8>>> {
    ensure!(!file.is_empty(), "the file is empty");
    let need = (file.len() as u64).div_ceil(block_bytes as u64);
    ensure!(
        need <= num_blocks,
        "the file needs {need} blocks of {block_bytes} bytes, but the deal holds {num_blocks}"
    );
    let mut blocks: Vec<Vec<u8>> = file
        .chunks(block_bytes)
        .map(|c| {
            let mut b = c.to_vec();
            b.resize(block_bytes, 0);
            b
        })
        .collect();
    blocks.resize(num_blocks as usize, vec![0u8; block_bytes]);
    Ok(blocks)
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
    let per = batch_len(format.coded_block_bytes() as u64 + 32 * 40);
    let commitment = RunCommitment { tag: RunTag(run.tag), root, size };
    for chunk in positions.chunks(per as usize) {
        let got = node.samples(deal, run, chunk.to_vec()).await?;
        let samples: Vec<SampleResponse> = got
            .into_iter()
            .map(|s| SampleResponse { position: s.position, block: s.block.into_vec(), path: s.path })
            .collect();
        let failures = spot_check(keys, format, &commitment, expected, chunk, &samples);
        if let Some(f) = failures.first() {
            bail!(
                "the node's run {} failed the owner's spot-check at position {}: {} ({} of {} samples bad)",
                RunId::from(run),
                f.position,
                f.fault,
                failures.len(),
                chunk.len()
            );
        }
    }
    Ok(positions.len())
}

/// Stores the owner's σ̃ for every position of `run` on the node, in batches.
pub async fn store_sealed(
    node: &NodeClient,
    auth: &OwnerAuth<'_>,
    state: &mut OwnerState,
    keys: &OwnerKeys,
    run: WireRun,
    sigma: &[Fp],
) -> anyhow::Result<()> {
    let id = RunId::from(run);
    let sealed: Vec<B256> = sigma
        .chunks_exact(RHO)
        .enumerate()
        .map(|(p, s)| {
            let s: [Fp; RHO] = [s[0], s[1]];
            B256::from(keys.seal(Place::Run { tag: id.tag, built_at: id.built_at, position: p as u64 }, &s))
        })
        .collect();
    let per = batch_len(40) as usize;
    for (i, chunk) in sealed.chunks(per).enumerate() {
        let op = OwnerOp::StoreSealed { run, start: (i * per) as u64, sealed: chunk.to_vec() };
        let nonce = state.next_nonce();
        node.owner_accepted(auth, nonce, op).await?;
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
    bar: Option<&ProgressBar>,
) -> anyhow::Result<UploadReport> {
    ensure!(!state.uploaded, "this deal's file is already uploaded (use `write` to change it)");
    let format = state.format()?;
    let keys = state.keys()?;
    let blocks = split_file(file, format.block_bytes(), state.num_blocks)?;
    let mut sigma = Vec::with_capacity(blocks.len() * RHO);
    let mut sealed_u = Vec::with_capacity(blocks.len());
    for (i, b) in blocks.iter().enumerate() {
        let s = keys.checksum(&format.record(i as u64, b)?)?;
        sigma.extend_from_slice(&s);
        sealed_u.push(keys.seal(Place::U { index: i as u64 }, &s));
    }
    let nonce = state.next_nonce();
    node.owner_accepted(
        auth,
        nonce,
        OwnerOp::UploadBegin { num_blocks: state.num_blocks, block_bytes: state.block_bytes },
    )
    .await?;
    let per = batch_len(format.block_bytes() as u64 + 40) as usize;
    if let Some(b) = bar {
        b.set_length(file.len() as u64);
    }
    for (i, chunk) in blocks.chunks(per).enumerate() {
        let start = i * per;
        let op = OwnerOp::UploadBlocks {
            start: start as u64,
            blocks: chunk.iter().map(|b| ByteBuf::from(b.clone())).collect(),
            sealed_u: sealed_u[start..start + chunk.len()].iter().map(|s| B256::from(*s)).collect(),
        };
        let nonce = state.next_nonce();
        node.owner_accepted(auth, nonce, op).await?;
        if let Some(b) = bar {
            b.inc((chunk.len() * format.block_bytes()) as u64);
        }
    }
    let nonce = state.next_nonce();
    let (root_u, c, root_c) = node.upload_finish(auth, nonce).await?;
    let my_root_u = merkle::u_tree(&blocks, &sealed_u).context("U tree")?.root();
    ensure!(root_u == my_root_u, "the node committed rootU {root_u}, but the uploaded blocks give {my_root_u}");
    ensure!(c.tag == 0 && c.built_at == 0, "the node named C {} instead of C@0", RunId::from(c));
    let expected = code::c_rebuild(&sigma, state.log_blocks(), SIGMA_WIDTH)?;
    let size = 2 * state.num_blocks;
    let checked = spot_check_run(node, state.deal, &keys, &format, c, root_c, size, &expected, state.lambda).await?;
    store_sealed(node, auth, state, &keys, c, &expected).await?;
    state.uploaded = true;
    state.file_bytes = file.len() as u64;
    state.root_u = root_u;
    state.c = Some(RunEntry { run: c, root: root_c, sigma: None });
    state.levels = vec![None; state.log_blocks() as usize];
    state.write_count = 0;
    state.rebuild_count = 0;
    Ok(UploadReport { file_bytes: file.len() as u64, num_blocks: state.num_blocks, root_u, root_c, spot_checked: checked })
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
async fn level_sigma(node: &NodeClient, state: &OwnerState, keys: &OwnerKeys, level: u32) -> anyhow::Result<(Vec<Fp>, u64)> {
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

/// The σ of all of U, from σ̃_U the node returns, checked against rootU.
async fn u_sigma(node: &NodeClient, state: &OwnerState, keys: &OwnerKeys) -> anyhow::Result<Vec<Fp>> {
    let n = state.num_blocks;
    let per = batch_len(64);
    let mut leaves = Vec::with_capacity(n as usize);
    let mut sealed = Vec::with_capacity(n as usize);
    let mut start = 0;
    while start < n {
        let count = per.min(n - start);
        for (j, (root, s)) in node.u_leaves(state.deal, start, count).await?.into_iter().enumerate() {
            leaves.push(merkle::u_leaf(start + j as u64, &root, &s.0));
            sealed.push(s);
        }
        start += count;
    }
    let root = MerkleTree::new(leaves).context("U tree")?.root();
    ensure!(root == state.root_u, "the node's U leaves give root {root}, the owner's rootU is {}", state.root_u);
    let mut out = Vec::with_capacity(n as usize * RHO);
    for (i, s) in sealed.iter().enumerate() {
        out.extend_from_slice(&keys.open(Place::U { index: i as u64 }, &s.0).with_context(|| format!("σ̃_U of block {i}"))?);
    }
    Ok(out)
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
    let sealed = keys.seal(Place::U { index }, &sigma);
    let new_root_u = merkle::root_from_path(merkle::u_leaf(index, &merkle::block_root(&block), &sealed), index, &path);

    // (3) the checksums the new run must have.
    let step = write_step(state.write_count, k);
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

    // (2) the write itself.
    let nonce = state.next_nonce();
    let written = node.write(auth, nonce, index, block, B256::from(sealed)).await?;
    ensure!(
        written.root_u == new_root_u,
        "the node's new rootU {} differs from the owner's {new_root_u}",
        written.root_u
    );
    ensure!(
        RunId::from(written.run) == expected_run,
        "the node built run {}, expected {expected_run}",
        RunId::from(written.run)
    );
    let step_ok = matches!((step, written.step), (WriteStep::CRebuild, WireStep::CRebuild))
        || matches!((step, written.step), (WriteStep::Level(a), WireStep::Level(b)) if a == b);
    ensure!(step_ok, "the node reports rebuild {:?}, expected {:?}", written.step, step);

    // (5) spot-check the new run against the predicted checksums.
    let size = (expected.len() / RHO) as u64;
    let checked = spot_check_run(node, state.deal, &keys, &format, written.run, written.run_root, size, &expected, state.lambda).await?;

    // (4) store σ̃ of the new run where the owner will not cache it, and update the state.
    let entry_level = expected_run.tag.as_level();
    let cache = entry_level.is_some_and(|l| l < state.cache_levels);
    if !cache {
        store_sealed(node, auth, state, &keys, written.run, &expected).await?;
    }
    state.root_u = new_root_u;
    match entry_level {
        Some(level) => {
            for l in state.levels.iter_mut().take(level as usize) {
                *l = None;
            }
            let sigma = cache.then(|| sigma_to_u64(&expected));
            if let Some(slot) = state.levels.get_mut(level as usize) {
                *slot = Some(RunEntry { run: written.run, root: written.run_root, sigma });
            }
            state.write_count += 1;
        }
        None => {
            state.levels.iter_mut().for_each(|l| *l = None);
            state.c = Some(RunEntry { run: written.run, root: written.run_root, sigma: None });
            state.write_count = 0;
            state.rebuild_count += 1;
        }
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
        sealed_fetched: fetched,
    })
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
    let want = keys.open(Place::U { index }, &sealed.0).context("the block's checksum does not open")?;
    ensure!(keys.checksum(&format.record(index, &block)?)? == want, "the block does not match its checksum");
    Ok(block)
}

/// Download: all of U, each batch checked against rootU; the file cut to its length.
pub async fn download(node: &NodeClient, state: &OwnerState, bar: Option<&ProgressBar>) -> anyhow::Result<Vec<u8>> {
    ensure!(state.uploaded, "nothing uploaded yet");
    let format = state.format()?;
    let n = state.num_blocks;
    let per = batch_len(format.block_bytes() as u64 + 64);
    let mut leaves = Vec::with_capacity(n as usize);
    let mut out = Vec::with_capacity(state.file_bytes as usize);
    if let Some(b) = bar {
        b.set_length(state.file_bytes);
    }
    let mut start = 0;
    while start < n {
        let count = per.min(n - start);
        let blocks = node.download(state.deal, start, count).await?;
        let parts = node.u_leaves(state.deal, start, count).await?;
        for (j, (block, (root, sealed))) in blocks.iter().zip(&parts).enumerate() {
            let i = start + j as u64;
            ensure!(merkle::block_root(block) == *root, "block {i} does not match its leaf");
            leaves.push(merkle::u_leaf(i, root, &sealed.0));
            if (out.len() as u64) < state.file_bytes {
                out.extend_from_slice(block);
            }
        }
        if let Some(b) = bar {
            b.set_position((out.len() as u64).min(state.file_bytes));
        }
        start += count;
    }
    let root = MerkleTree::new(leaves).context("U tree")?.root();
    ensure!(root == state.root_u, "the downloaded blocks give rootU {root}, the owner's is {}", state.root_u);
    out.truncate(state.file_bytes as usize);
    Ok(out)
}

/// Extract (DESIGN §6): see [`super::extract`], which this re-exports.
pub use super::extract::{extract, RunPresence};

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

    #[test]
    fn spot_positions_cover_small_runs_and_stay_in_range() {
        assert_eq!(spot_positions(4, 128), vec![0, 1, 2, 3]);
        let p = spot_positions(1 << 20, 16);
        assert_eq!(p.len(), 16);
        assert!(p.iter().all(|&x| x < 1 << 20));
    }
}
