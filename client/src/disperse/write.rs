//! Writes across shards (issue 12 #2): `dpor file-write --dir DIR --offset BYTES DATA`
//! changes bytes of a dispersed file, and `dpor file-checkpoint` posts the digest of
//! every shard a write touched.
//!
//! A write changes, in every stripe it touches, the data shards' blocks that hold the
//! bytes and every parity shard's block: the stripe's k data blocks are completed with
//! the untouched ones (read from their providers, each verified against its deal's
//! rootU and checksum) and encoded again (`StripeCoder::encode`; parity is linear, so
//! this is the parity delta of the changed blocks without reading the old parity).
//! Each shard's blocks are then written as ordinary batched dpor writes on its deal
//! (`owner::batch`), verified as any write is.
//!
//! **Crash safety.** A stripe whose data and parity disagree decodes to wrong bytes
//! from some sets of k shards, so a write must never stop half-way for good. Before
//! sending anything, the owner saves the whole write as an intent,
//! `DIR/write-intent.json` ([`WriteIntent`]: each shard's new blocks; fsync, rename),
//! then applies it shard by shard, marking each done. Block writes are idempotent (the
//! same bytes at the same index), so the next command (`get`, `repair`, `file-write`,
//! `file-checkpoint` or `fsck`) rolls an interrupted write forward: it writes the
//! shards not marked done, each after its own deal's intent is settled
//! (`owner::recover`), and removes the intent. A crash before the intent is saved
//! changes nothing (the write is rolled back, in effect). If a shard still to write is
//! unreachable, `get` and `repair` leave it out (every other shard holds the new
//! version or was not touched, so they decode the new version), and a repair that
//! rebuilds it marks its part done ([`mark_replaced`]); `file-write` and
//! `file-checkpoint` refuse until the write is complete.
//!
//! The file's length is fixed (recorded in the on-chain manifest, which has no call to
//! change it): a write must end within it.

use super::{dial, FileDir};
use crate::node_client::{NodeClient, OwnerAuth};
use crate::owner::{batch, edit, flows};
use crate::owner_state::OwnerState;
use alloy::signers::local::PrivateKeySigner;
use alloy_primitives::Bytes;
use anyhow::{ensure, Context};
use dpor_disperse::StripeCoder;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The intent file's name in the file's directory.
pub const INTENT_FILE: &str = "write-intent.json";

/// One shard's part of a write: its new blocks (dpor block index = stripe).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShardWrites {
    /// Shard index (0..k data, k..n parity).
    pub shard: u16,
    /// (stripe, new block of β bytes), ascending.
    pub blocks: Vec<(u64, Bytes)>,
    /// Written and the shard's state saved.
    pub done: bool,
}

/// A write across shards, saved before any shard is written (module docs).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WriteIntent {
    /// The byte offset written, for the user.
    pub offset: u64,
    /// Bytes written, for the user.
    pub len: u64,
    /// The shards to write, in shard order.
    pub shards: Vec<ShardWrites>,
}

impl WriteIntent {
    fn path(dir: &Path) -> PathBuf {
        dir.join(INTENT_FILE)
    }

    /// The intent in `dir`, if one is there. Errors: unreadable or corrupt.
    pub fn load(dir: &Path) -> anyhow::Result<Option<Self>> {
        let p = Self::path(dir);
        match std::fs::read_to_string(&p) {
            Ok(text) => Ok(Some(serde_json::from_str(&text).with_context(|| format!("{} is corrupt", p.display()))?)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e).with_context(|| format!("cannot read {}", p.display())),
        }
    }

    /// Saves it durably (temp file, fsync, rename, directory fsync).
    pub fn save(&self, dir: &Path) -> anyhow::Result<()> {
        let p = Self::path(dir);
        let tmp = dir.join(format!("{INTENT_FILE}.tmp"));
        {
            use std::io::Write;
            let mut f = std::fs::File::create(&tmp).with_context(|| format!("cannot write {}", tmp.display()))?;
            f.write_all(serde_json::to_string(self)?.as_bytes())?;
            f.sync_all()?;
        }
        std::fs::rename(&tmp, &p).with_context(|| format!("cannot write {}", p.display()))?;
        sync_dir(dir)
    }

    /// Removes the intent (the write is complete on every shard).
    pub fn remove(dir: &Path) -> anyhow::Result<()> {
        match std::fs::remove_file(Self::path(dir)) {
            Ok(()) => sync_dir(dir),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(e).context("cannot remove the write intent"),
        }
    }
}

fn sync_dir(dir: &Path) -> anyhow::Result<()> {
    std::fs::File::open(dir).and_then(|d| d.sync_all()).with_context(|| format!("cannot sync {}", dir.display()))
}

/// A shard the owner can write: its node and its owner state (loaded from its file in
/// the directory, so that every write saves it there).
pub struct ShardLink {
    /// Shard index.
    pub index: u16,
    /// Its provider's node.
    pub node: NodeClient,
    /// Its deal's owner state.
    pub state: OwnerState,
}

/// Plans a write of `data` at byte `offset` of the dispersed file `record`: reads (and
/// verifies) the data blocks of the touched stripes that the write does not cover
/// entirely, and returns every shard's new blocks. Nothing is written.
///
/// `shards` must hold the k data shards (index order not required; parity shards may
/// be there too and are not read). Errors: empty data, a range past the file's end, a
/// data shard missing or failing its reads.
pub async fn plan(record: &FileDir, shards: &[ShardLink], offset: u64, data: &[u8]) -> anyhow::Result<WriteIntent> {
    ensure!(!data.is_empty(), "nothing to write: the data is empty");
    let g = record.geometry()?;
    let beta = g.beta();
    let end = offset.checked_add(data.len() as u64).context("offset + length overflows")?;
    ensure!(
        end <= record.file_bytes,
        "the write ends at byte {end}, past the file's {} bytes: a dispersed file keeps the length its manifest records (growing it is not built)",
        record.file_bytes
    );
    let (first, last) = edit::touched_blocks(beta as u64, offset, data.len() as u64).context("empty write")?;
    let k = g.data_shards() as u64;
    let stripes: BTreeSet<u64> = (first..=last).map(|b| b / k).collect();
    let link = |i: u16| shards.iter().find(|s| s.index == i).with_context(|| format!("data shard {i} is needed for the write"));

    // The old content of every data block of the touched stripes that the write does not
    // overwrite whole, verified; file blocks wholly inside the write need no read.
    let covers = |b: u64| offset <= b * beta as u64 && (b + 1) * beta as u64 <= end;
    let mut old: BTreeMap<u64, Vec<u8>> = BTreeMap::new();
    for &s in &stripes {
        for j in 0..g.data_shards() {
            let b = s * k + j as u64;
            if !covers(b) {
                let l = link(j)?;
                let block = flows::read(&l.node, &l.state, s).await.with_context(|| format!("reading stripe {s} of data shard {j}"))?;
                old.insert(b, block);
            }
        }
    }
    // The touched file blocks, patched (bytes past the file's end stay zero).
    let edges: BTreeMap<u64, Vec<u8>> = old.iter().filter(|(b, _)| (first..=last).contains(b)).map(|(b, v)| (*b, v.clone())).collect();
    let mut new_blocks: BTreeMap<u64, Vec<u8>> = edit::patch_blocks(beta, record.file_bytes, offset, data, &edges)?.into_iter().collect();

    let mut coder = StripeCoder::new(g)?;
    let mut per_shard: Vec<Vec<(u64, Bytes)>> = vec![Vec::new(); record.n as usize];
    for &s in &stripes {
        let mut stripe_data = Vec::with_capacity(k as usize);
        for j in 0..k {
            let b = s * k + j;
            let block = match new_blocks.remove(&b) {
                Some(nb) => {
                    per_shard[j as usize].push((s, Bytes::from(nb.clone())));
                    nb
                }
                None => old.get(&b).cloned().with_context(|| format!("block {b} was neither read nor written"))?,
            };
            stripe_data.push(block);
        }
        for (i, p) in coder.encode(&stripe_data)?.into_iter().enumerate() {
            per_shard[k as usize + i].push((s, Bytes::from(p)));
        }
    }
    Ok(WriteIntent {
        offset,
        len: data.len() as u64,
        shards: per_shard
            .into_iter()
            .enumerate()
            .filter(|(_, b)| !b.is_empty())
            .map(|(i, blocks)| ShardWrites { shard: i as u16, blocks, done: false })
            .collect(),
    })
}

/// What applying an intent did.
#[derive(Debug, Clone, Serialize)]
pub struct Applied {
    /// Shards written now.
    pub shards_written: Vec<u16>,
    /// Blocks written now (all shards).
    pub blocks_written: u64,
}

/// Applies `intent` (saved in `dir`) to the shards not yet done that are in `shards`,
/// in shard order: each shard's unfinished request is settled first, then its blocks go
/// as batches, then it is marked done in the saved intent. With `stop_after = Some(m)`,
/// stops after m shards (tests: the state a crash between shards leaves). When every
/// shard is done, the intent is removed and the shards are added to the file's shards
/// to checkpoint.
///
/// Errors: a shard failing its writes, or shards of the intent not in `shards` left
/// undone (the intent stays, with what was done marked: the next command continues).
pub async fn apply(
    dir: &Path,
    record: &mut FileDir,
    mut intent: WriteIntent,
    shards: &mut [ShardLink],
    key: &PrivateKeySigner,
    stop_after: Option<usize>,
) -> anyhow::Result<Applied> {
    let mut applied = Applied { shards_written: Vec::new(), blocks_written: 0 };
    let mut failures = Vec::new();
    for w in 0..intent.shards.len() {
        if intent.shards[w].done {
            continue;
        }
        if stop_after.is_some_and(|m| applied.shards_written.len() >= m) {
            return Ok(applied);
        }
        let i = intent.shards[w].shard;
        let Some(link) = shards.iter_mut().find(|s| s.index == i) else {
            continue; // not reachable now: left for a later command (or a repair)
        };
        let auth = OwnerAuth { key, chain_id: link.state.chain_id, market: link.state.market, deal: link.state.deal };
        let writes: Vec<(u64, Vec<u8>)> = intent.shards[w].blocks.iter().map(|(s, b)| (*s, b.to_vec())).collect();
        let result = async {
            crate::owner::recover::recover(&link.node, &auth, &mut link.state)
                .await
                .with_context(|| format!("settling shard {i}'s previous request"))?;
            batch::write_many(&link.node, &auth, &mut link.state, &writes).await.with_context(|| format!("writing shard {i}"))
        }
        .await;
        link.state.persist()?;
        if let Err(e) = result {
            // The other shards still get their part; this one stays in the intent.
            failures.push(format!("{e:#}"));
            continue;
        }
        intent.shards[w].done = true;
        intent.save(dir)?;
        applied.shards_written.push(i);
        applied.blocks_written += writes.len() as u64;
    }
    let left: Vec<u16> = intent.shards.iter().filter(|w| !w.done).map(|w| w.shard).collect();
    if !left.is_empty() {
        anyhow::bail!(
            "the write is done on shards {:?} but not on {left:?} ({}): the next command completes it",
            intent.shards.iter().filter(|w| w.done).map(|w| w.shard).collect::<Vec<_>>(),
            if failures.is_empty() { "not reachable".to_string() } else { failures.join("; ") }
        );
    }
    finish(dir, record, &intent)?;
    Ok(applied)
}

/// A write done on every shard: its shards wait for their checkpoint (`file.json`
/// `dirty`), and the intent goes.
fn finish(dir: &Path, record: &mut FileDir, intent: &WriteIntent) -> anyhow::Result<()> {
    for w in &intent.shards {
        if !record.dirty.contains(&w.shard) {
            record.dirty.push(w.shard);
        }
    }
    record.dirty.sort_unstable();
    record.save(dir)?;
    WriteIntent::remove(dir)
}

/// Shard `shard` was rebuilt from the others and placed anew (`repair`): it holds the
/// new version, so its part of an unfinished write in `dir` is done. When no part is
/// left, the write is complete: its shards wait for their checkpoint and the intent is
/// removed. Returns whether the intent named the shard.
pub fn mark_replaced(dir: &Path, record: &mut FileDir, shard: u16) -> anyhow::Result<bool> {
    let Some(mut intent) = WriteIntent::load(dir)? else {
        return Ok(false);
    };
    let Some(w) = intent.shards.iter_mut().find(|w| w.shard == shard && !w.done) else {
        return Ok(false);
    };
    w.done = true;
    if intent.shards.iter().all(|w| w.done) {
        finish(dir, record, &intent)?;
    } else {
        intent.save(dir)?;
    }
    Ok(true)
}

/// Loads the owner states of `indices` from `dir` and dials their providers.
pub async fn link_shards(
    market: &dpor_chain::Market,
    timeout: std::time::Duration,
    dir: &Path,
    record: &FileDir,
    indices: &[u16],
) -> anyhow::Result<Vec<ShardLink>> {
    let mut out = Vec::with_capacity(indices.len());
    for &i in indices {
        let s = record.shards.iter().find(|s| s.index == i).with_context(|| format!("{} lists no shard {i}", dir.display()))?;
        let path = dir.join(&s.state);
        let state = OwnerState::load(&path)?;
        ensure!(state.deal == s.deal, "{} is the state of deal {}, not {}", path.display(), state.deal, s.deal);
        let node = dial(market, s.provider, timeout)
            .await
            .with_context(|| format!("shard {i} (deal {}): its node must be reachable to write it; repair it first if it is gone", s.deal))?;
        out.push(ShardLink { index: i, node, state });
    }
    Ok(out)
}

/// Rolls an interrupted write in `dir` forward, if there is one (module docs). Returns
/// what it did (`None`: nothing was pending).
pub async fn complete_pending(
    market: &dpor_chain::Market,
    timeout: std::time::Duration,
    key: &PrivateKeySigner,
    dir: &Path,
    record: &mut FileDir,
) -> anyhow::Result<Option<Applied>> {
    let Some(intent) = WriteIntent::load(dir)? else {
        return Ok(None);
    };
    let todo: Vec<u16> = intent.shards.iter().filter(|w| !w.done).map(|w| w.shard).collect();
    // Every shard that answers is written; the others stay in the intent.
    let mut links = Vec::new();
    for i in todo {
        if let Ok(mut l) = link_shards(market, timeout, dir, record, &[i]).await {
            links.append(&mut l);
        }
    }
    Ok(Some(apply(dir, record, intent, &mut links, key, None).await.context("completing an interrupted write across shards")?))
}
