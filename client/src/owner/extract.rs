//! Extract (DESIGN §6; issue 10, findings 1–2): the file from C and the filled levels
//! only, using every coded block the node can still serve, whatever else is damaged.
//!
//! For each run, all positions are asked for with `Samples` (block and run path); a
//! damaged node answers what it has (an empty block where it has none, a path cut
//! short where its tree is damaged). Then, per run:
//!
//! 1. every block served is proven one by one against the run root the owner
//!    verified ([`dpor_core::salvage`]): sibling hashes come from the node's paths or
//!    are recomputed from the blocks, so a truncated or missing run file, or a
//!    damaged or missing `.tree`, costs only the blocks that are really gone; no block
//!    is accepted without a hash chain to the root;
//! 2. with the owner's checksums ([`ExtractOptions::checksums`]: σ from the owner's
//!    cache, or σ̃ from the node opened with the owner's key), a proven block whose
//!    checksum does not match was committed wrong: it is dropped (an erasure);
//! 3. the runs are decoded with error-and-erasure decoding
//!    ([`dpor_core::extract::extract_report`]): any wrong block left is corrected
//!    while erasures + 2·errors ≤ m for a run of 2m;
//! 4. with the owner's key, the file recovered is checked against the owner's rootU
//!    (σ̃_U recomputed for every block): the result is the file, or an error.

use crate::node_client::NodeClient;
use crate::owner_state::{sigma_from_u64, OwnerState, RunEntry};
use crate::progress::Progress;
use anyhow::{ensure, Context};
use dpor_core::checksum::{OwnerKeys, Place, RHO};
use dpor_core::extract::{self, Present};
use dpor_core::field::Fp;
use dpor_core::merkle;
use dpor_core::salvage::{self, Served};
use dpor_core::{BlockFormat, RunId};
use dpor_proto::messages::batch_len;

/// Proven coded blocks of one run: (position, elements).
type Blocks = Vec<(u64, Vec<Fp>)>;

/// How to extract.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExtractOptions {
    /// Use the owner's secret: drop blocks whose checksum does not match, and check
    /// the file recovered against rootU. Without it, extraction is what anyone holding
    /// the runs' roots can do (error correction only).
    pub checksums: bool,
}

impl Default for ExtractOptions {
    fn default() -> Self {
        Self { checksums: true }
    }
}

/// Per-run figures of an extraction.
#[derive(Debug, Clone, serde::Serialize)]
pub struct RunPresence {
    /// The run.
    pub run: String,
    /// Coded blocks in it.
    pub size: u64,
    /// Blocks used for decoding: served, proven against the run's root, and (with
    /// checksums) matching the owner's checksum.
    pub intact: u64,
    /// Blocks the node served at all (non-empty).
    pub served: u64,
    /// Proven blocks dropped because their checksum did not match (committed wrong).
    pub bad_checksum: u64,
    /// Wrong blocks the decoder located and corrected.
    pub corrected: u64,
}

/// [`extract_with`] with the owner's checksums ([`ExtractOptions::default`]).
///
/// Errors: as [`extract_with`].
pub async fn extract(
    node: &NodeClient,
    state: &OwnerState,
    bar: Option<&dyn Progress>,
) -> anyhow::Result<(Vec<u8>, Vec<RunPresence>)> {
    extract_with(node, state, ExtractOptions::default(), bar).await
}

/// Extract (module docs): the file (cut to its length) and per-run figures.
///
/// Errors: nothing uploaded; a run that cannot be decoded from what is left ("the file
/// cannot be recovered …", naming the run and the bound); with checksums, a result
/// that does not match rootU.
pub async fn extract_with(
    node: &NodeClient,
    state: &OwnerState,
    opts: ExtractOptions,
    bar: Option<&dyn Progress>,
) -> anyhow::Result<(Vec<u8>, Vec<RunPresence>)> {
    ensure!(state.uploaded, "nothing uploaded yet");
    // Runs the node is still building (deamortized rebuilds) are named by root.
    let resolved;
    let state = if state.c.iter().chain(state.levels.iter().flatten()).any(|e| e.root == alloy_primitives::B256::ZERO) {
        let mut s = state.clone();
        super::flows::resolve_roots(node, &mut s).await?;
        resolved = s;
        &resolved
    } else {
        state
    };
    let format = state.format()?;
    let keys = if opts.checksums { Some(state.keys()?) } else { None };
    let coded_bytes = format.coded_block_bytes() as u64;
    let runs = state.runs();
    if let Some(b) = bar {
        b.set_length(runs.iter().map(|(_, s)| s * coded_bytes).sum());
    }
    let mut fetched: Vec<(RunId, Blocks)> = Vec::new();
    let mut report = Vec::new();
    for (entry, size) in &runs {
        let id = RunId::from(entry.run);
        let (present, mut figures) = fetch_run(node, state, &format, entry, *size, bar).await?;
        let present = match &keys {
            Some(keys) => {
                let sigma = run_checksums(node, state, keys, entry, *size).await;
                let before = present.len();
                let kept: Blocks = present
                    .into_iter()
                    .filter(|(p, block)| match (sigma.get(*p as usize).copied().flatten(), keys.checksum(block)) {
                        (Some(want), Ok(got)) => want == got,
                        _ => true, // no checksum to compare: the decoder still corrects it
                    })
                    .collect();
                figures.bad_checksum = (before - kept.len()) as u64;
                if figures.bad_checksum > 0 {
                    tracing::warn!("run {id}: {} proven blocks fail the owner's checksum (committed wrong): dropped", figures.bad_checksum);
                }
                kept
            }
            None => present,
        };
        figures.intact = present.len() as u64;
        report.push(figures);
        fetched.push((id, present));
    }
    let mut c_present: Present<'_> = Vec::new();
    let mut levels: Vec<(u32, Present<'_>)> = Vec::new();
    for (id, present) in &fetched {
        let p: Present<'_> = present.iter().map(|(pos, e)| (*pos, e.as_slice())).collect();
        match id.tag.as_level() {
            None => c_present = p,
            Some(l) => levels.push((l, p)),
        }
    }
    let got = extract::extract_report(&format, state.log_blocks(), state.write_count, &c_present, &levels)
        .context("the file cannot be recovered from the coded blocks")?;
    for (tag, positions) in &got.corrected {
        if let Some(r) = fetched.iter().position(|(id, _)| id.tag == *tag) {
            report[r].corrected = positions.len() as u64;
            if !positions.is_empty() {
                tracing::warn!("run {}: {} wrong blocks corrected by decoding", fetched[r].0, positions.len());
            }
        }
    }
    if let Some(keys) = &keys {
        check_root_u(keys, &format, state, &got.blocks)?;
    }
    let mut out = Vec::with_capacity(state.file_bytes as usize);
    for b in &got.blocks {
        if out.len() as u64 >= state.file_bytes {
            break;
        }
        out.extend_from_slice(b);
    }
    out.truncate(state.file_bytes as usize);
    Ok((out, report))
}

/// All positions of one run as `Samples`, each served block proven against the run's
/// root: the proven blocks as elements, and the run's figures so far.
async fn fetch_run(
    node: &NodeClient,
    state: &OwnerState,
    format: &BlockFormat,
    entry: &RunEntry,
    size: u64,
    bar: Option<&dyn Progress>,
) -> anyhow::Result<(Blocks, RunPresence)> {
    let id = RunId::from(entry.run);
    let coded_bytes = format.coded_block_bytes() as u64;
    let depth = size.trailing_zeros() as usize;
    let mut served = vec![Served::default(); size as usize];
    let mut blocks: Vec<Option<Vec<u8>>> = vec![None; size as usize];
    let per = batch_len(coded_bytes + 32 * 40).max(1);
    let mut start = 0;
    while start < size {
        let count = per.min(size - start);
        let positions: Vec<u64> = (start..start + count).collect();
        match node.samples(state.deal, entry.run, positions.clone()).await {
            Ok(samples) => {
                for (want, s) in positions.iter().zip(samples) {
                    if s.position != *want {
                        continue; // not what was asked: ignored (an erasure)
                    }
                    let p = *want as usize;
                    if !s.block.is_empty() {
                        served[p].leaf = Some(merkle::run_leaf(*want, &merkle::block_root(&s.block)));
                        blocks[p] = Some(s.block.into_vec());
                    }
                    served[p].path = s.path.into_iter().take(depth).collect();
                }
            }
            Err(e) => tracing::warn!("run {id} blocks {start}..{}: {e:#} (counted as absent)", start + count),
        }
        if let Some(b) = bar {
            b.inc(count * coded_bytes);
        }
        start += count;
    }
    let proven = salvage::prove_served(&entry.root, &served).context("run tree")?;
    let served_count = blocks.iter().filter(|b| b.is_some()).count() as u64;
    let mut present = Vec::new();
    for (p, (block, ok)) in blocks.into_iter().zip(proven).enumerate() {
        if let (Some(block), true) = (block, ok) {
            if let Ok(e) = format.coded_from_bytes(&block) {
                present.push((p as u64, e));
            }
        }
    }
    if (present.len() as u64) < served_count {
        tracing::warn!(
            "run {id}: {} of {served_count} blocks served do not match the run's root (damaged): erasures",
            served_count - present.len() as u64
        );
    }
    let figures = RunPresence { run: id.to_string(), size, intact: 0, served: served_count, bad_checksum: 0, corrected: 0 };
    Ok((present, figures))
}

/// σ of every position of a run: from the owner's cache, or σ̃ from the node opened
/// with the owner's key (`None` where there is none or it does not open: such a block
/// is kept and left to error correction).
async fn run_checksums(
    node: &NodeClient,
    state: &OwnerState,
    keys: &OwnerKeys,
    entry: &RunEntry,
    size: u64,
) -> Vec<Option<[Fp; RHO]>> {
    let id = RunId::from(entry.run);
    if let Some(cached) = &entry.sigma {
        if let Ok(s) = sigma_from_u64(cached) {
            if s.len() == size as usize * RHO {
                return s.chunks_exact(RHO).map(|c| Some([c[0], c[1]])).collect();
            }
        }
    }
    let mut out = vec![None; size as usize];
    let per = batch_len(33).max(1);
    let mut start = 0;
    while start < size {
        let count = per.min(size - start);
        match node.sealed(state.deal, entry.run, start, count).await {
            Ok(sealed) => {
                for (j, s) in sealed.into_iter().enumerate() {
                    let position = start + j as u64;
                    let place = Place::Run { tag: id.tag, built_at: id.built_at, position };
                    out[position as usize] = s.and_then(|s| keys.open(place, &s.0).ok());
                }
            }
            Err(e) => tracing::warn!("run {id}: checksums {start}..{}: {e:#} (not used)", start + count),
        }
        start += count;
    }
    out
}

/// Checks the recovered blocks against the owner's rootU (σ̃_U recomputed with the
/// owner's key for every block): any difference is an error, never a wrong file.
fn check_root_u(keys: &OwnerKeys, format: &BlockFormat, state: &OwnerState, blocks: &[Vec<u8>]) -> anyhow::Result<()> {
    let mut sealed = Vec::with_capacity(blocks.len());
    for (i, b) in blocks.iter().enumerate() {
        let sigma = keys.checksum(&format.record(i as u64, b)?)?;
        sealed.push(keys.seal_u(i as u64, b, &sigma));
    }
    let root = merkle::u_tree(blocks, &sealed).context("U tree")?.root();
    ensure!(
        root == state.root_u,
        "the decoded file gives rootU {root}, the owner's is {}: more wrong coded blocks than decoding can correct",
        state.root_u
    );
    Ok(())
}
