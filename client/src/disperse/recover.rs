//! `dpor recover` (issue 12 #5): the owner's whole state of a dispersed file, rebuilt on
//! a fresh machine from the owner's key, the chain and the providers.
//!
//! What the state holds, and where recovery takes it from:
//!
//! | state | source |
//! |---|---|
//! | k, n, β, L, each shard's deal and provider | `FileManifest.getFile` (the file found from the owner's `FileRecorded` logs) |
//! | N, β, λ, the provider of each deal | `DporMarket.getDeal` |
//! | rootU, t, rebuilds, C's and every level's run root, version | the deal's latest `DigestPosted` event (the whole digest) |
//! | the checksum seed | derived from the owner's key ([`shard_seed`]: `put` and `repair` use it) |
//! | σ of the levels the owner caches | computed from the level's coded blocks (σ is linear: σ(coded) = M·coded), each run fetched whole from the node and checked against its root in the digest the owner signed |
//! | σ̃ of C, of larger levels and of U | stay on the node, as always (sealed with keys from the seed) |
//! | the last nonce | the node's status |
//!
//! The result equals the original state as of the shards' last checkpoints (the
//! e2e test compares them field by field). Writes made after a shard's last checkpoint
//! are not on chain, so a shard whose node is ahead of its digest is refused with a
//! clear error (checkpoint before losing the machine; or repair that shard from the
//! others). The owner's cache of recent blocks (App. A.1) starts empty: the runs it
//! would have covered are spot-checked instead. Files put before key-derived seeds
//! existed cannot be recovered: the derived keys do not open their checksums, which is
//! checked and reported.

use super::{dial, FileDir, ShardFile};
use crate::node_client::NodeClient;
use crate::owner_state::{sigma_to_u64, DealParams, OwnerState, RunEntry, DEFAULT_BLOCK_CACHE_LEVELS, DEFAULT_CACHE_LEVELS};
use crate::session::Session;
use alloy::signers::local::PrivateKeySigner;
use alloy_primitives::{keccak256, Address, B256};
use anyhow::{bail, ensure, Context};
use dpor_core::checksum::Place;
use dpor_core::merkle;
use dpor_core::{RunId, RunTag};
use dpor_disperse::{Geometry, Manifest, ShardEntry};
use dpor_proto::messages::{batch_len, WireRun};
use std::path::Path;
use std::time::Instant;

/// Domain of [`shard_seed`].
const SEED_DOMAIN: &[u8] = b"dpor.shard-seed.v1";

/// The checksum seed of a shard's deal: keccak256(`"dpor.shard-seed.v1"` ‖ the owner's
/// secret key (32 bytes) ‖ chain id (8 bytes, big-endian) ‖ market (20 bytes) ‖ deal id
/// (8 bytes, big-endian)). Secret (it derives the checksum keys), distinct per deal, and
/// computable again from the key alone, so [`recover`] needs no backup of the seeds.
pub fn shard_seed(key: &PrivateKeySigner, chain_id: u64, market: Address, deal: u64) -> B256 {
    let mut pre = Vec::with_capacity(SEED_DOMAIN.len() + 32 + 8 + 20 + 8);
    pre.extend_from_slice(SEED_DOMAIN);
    pre.extend_from_slice(key.to_bytes().as_slice());
    pre.extend_from_slice(&chain_id.to_be_bytes());
    pre.extend_from_slice(market.as_slice());
    pre.extend_from_slice(&deal.to_be_bytes());
    keccak256(&pre)
}

/// Gives the owner state at `path` (a deal just opened, nothing uploaded) its key-derived
/// seed ([`shard_seed`]).
pub fn derive_seed(key: &PrivateKeySigner, path: &Path) -> anyhow::Result<()> {
    let mut state = OwnerState::load(path)?;
    ensure!(!state.uploaded, "{}: the seed of an uploaded deal cannot change", path.display());
    state.seed = shard_seed(key, state.chain_id, state.market, state.deal);
    state.save(path)
}

/// A dispersed file's state recovered ([`recover`]).
#[derive(Debug, Clone)]
pub struct Recovered {
    /// The file's id in the FileManifest.
    pub file_id: u64,
    /// The file's record, as saved in `DIR/file.json`.
    pub record: FileDir,
    /// Coded blocks fetched to compute the cached checksums.
    pub coded_blocks_fetched: u64,
    /// Seconds taken.
    pub seconds: f64,
}

/// `dpor recover --dir DIR [--file-id ID]`: see the module docs. The file is `file_id`
/// in the FileManifest at `registry`, or the key's only file there.
///
/// # Errors
/// `dir` already holds a file, no key, no or several files of the key, a file of another
/// owner, or a shard that cannot be recovered (the chain, its node, its checks).
pub async fn recover(ctx: &Session, dir: &Path, registry: Address, file_id: Option<u64>) -> anyhow::Result<Recovered> {
    let started = Instant::now();
    ensure!(!dir.join("file.json").exists(), "{} already holds a file's state: recover into a new directory", dir.display());
    let key = ctx.key()?;
    let me = key.address();
    let reg = ctx.market.manifest_registry(registry);
    let file_id = match file_id {
        Some(id) => id,
        None => {
            let files = reg.files_of(me, 0).await.context("reading the owner's files from the FileManifest logs")?;
            match files.as_slice() {
                [] => bail!("the FileManifest at {registry} records no file of {me}"),
                [one] => one.file_id,
                many => bail!(
                    "{me} has {} files in the FileManifest ({}): name one with --file-id",
                    many.len(),
                    many.iter().map(|f| f.file_id.to_string()).collect::<Vec<_>>().join(", ")
                ),
            }
        }
    };
    let rec = reg.get_file(file_id).await.with_context(|| format!("reading file {file_id} from the FileManifest"))?;
    ensure!(rec.owner == me, "file {file_id} belongs to {}, not to this key's account {me}", rec.owner);
    let geometry = Geometry::new(rec.k, rec.n, rec.block_bytes)?;
    let shard_bytes = geometry.shard_bytes(rec.file_bytes)?;
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;

    let mut shards = Vec::with_capacity(rec.shards.len());
    let mut entries = Vec::with_capacity(rec.shards.len());
    let mut fetched_blocks = 0u64;
    for (i, s) in rec.shards.iter().enumerate() {
        let (mut state, fetched) = recover_shard(ctx, key, s.deal_id, shard_bytes)
            .await
            .with_context(|| format!("recovering shard {i} (deal {}, provider {})", s.deal_id, s.provider))?;
        fetched_blocks += fetched;
        let name = format!("shard-{i}.json");
        state.save(&dir.join(&name))?;
        entries.push(ShardEntry { deal_id: s.deal_id, digest_version: state.digest_version });
        shards.push(ShardFile { index: i as u16, deal: s.deal_id, provider: state.provider, state: name });
    }
    let record = FileDir {
        k: rec.k,
        n: rec.n,
        block_bytes: rec.block_bytes,
        file_bytes: rec.file_bytes,
        registry,
        file_id: Some(file_id),
        shards,
        dirty: Vec::new(),
    };
    let manifest = Manifest::new(rec.file_bytes, geometry, entries)?;
    std::fs::write(dir.join("manifest.bin"), manifest.to_bytes()).context("writing manifest.bin")?;
    record.save(dir)?;
    Ok(Recovered { file_id, record, coded_blocks_fetched: fetched_blocks, seconds: started.elapsed().as_secs_f64() })
}

/// One shard's owner state from the chain and its node; also the coded blocks fetched.
async fn recover_shard(ctx: &Session, key: &PrivateKeySigner, deal_id: u64, shard_bytes: u64) -> anyhow::Result<(OwnerState, u64)> {
    let deal = ctx.market.get_deal(deal_id).await?;
    ensure!(deal.owner == key.address(), "deal {deal_id} belongs to {}", deal.owner);
    let (digest, _) = ctx.market.latest_digest(deal_id).await?.with_context(|| format!("deal {deal_id} has no digest on chain"))?;
    let params = DealParams {
        deal: deal_id,
        chain_id: ctx.market.chain_id(),
        market: ctx.market.address(),
        provider: deal.provider,
        num_blocks: deal.num_blocks,
        block_bytes: deal.block_size,
        lambda: deal.lambda as u32,
    };
    let seed = shard_seed(key, params.chain_id, params.market, deal_id);
    let mut state = OwnerState::new(params, seed, DEFAULT_CACHE_LEVELS, DEFAULT_BLOCK_CACHE_LEVELS);
    state.uploaded = true;
    state.file_bytes = shard_bytes;
    state.root_u = digest.rootU;
    state.write_count = digest.writeCount;
    state.rebuild_count = digest.rebuildCount;
    state.digest_version = digest.version;

    let node = dial(&ctx.market, deal.provider, ctx.timeout).await?;
    let status = node.status(deal_id).await?;
    ensure!(
        status.root_u == digest.rootU && status.write_count == digest.writeCount && status.rebuild_count == digest.rebuildCount,
        "the node holds a newer state than the last digest on chain (writes after the last checkpoint, which the chain does not record): repair this shard from the others instead"
    );
    state.nonce = status.last_nonce;

    let keys = state.keys()?;
    let format = state.format()?;
    let mut levels: Vec<Option<RunEntry>> = vec![None; state.log_blocks() as usize];
    let mut fetched = 0;
    for (id, size, root) in digest.run_ids() {
        let run = WireRun::from(id);
        match id.tag.as_level() {
            None => {
                // The seed check: the derived keys must open C's σ̃ held by the node.
                let sealed = node.sealed(deal_id, run, 0, 1).await?;
                let s = sealed.first().copied().flatten().context("the node holds no σ̃ of C")?;
                keys.open(Place::Run { tag: RunTag::C, built_at: id.built_at, position: 0 }, &s.0).context(
                    "the checksum keys derived from this key do not open the shard's σ̃: the file was put before seeds were derived from the owner's key, or this is not the owner's key",
                )?;
                state.c = Some(RunEntry { run, root, sigma: None, unchecked: false, sigma_file: None });
            }
            Some(level) => {
                let level = level as usize;
                ensure!(level < levels.len(), "the digest names level {level}, beyond log N");
                let sigma = if (level as u32) < state.cache_levels {
                    fetched += size;
                    Some(sigma_to_u64(&run_sigma(&node, deal_id, &format, &keys, id, size, root).await?))
                } else {
                    None
                };
                levels[level] = Some(RunEntry { run, root, sigma, unchecked: false, sigma_file: None });
            }
        }
    }
    state.levels = levels;
    Ok((state, fetched))
}

/// σ of every coded block of `run` (size × ρ): the run fetched whole, its tree checked
/// against `root` (the digest's), then σ = M·coded block for each.
async fn run_sigma(
    node: &NodeClient,
    deal: u64,
    format: &dpor_core::BlockFormat,
    keys: &dpor_core::checksum::OwnerKeys,
    id: RunId,
    size: u64,
    root: B256,
) -> anyhow::Result<Vec<dpor_core::Fp>> {
    let per = batch_len(format.coded_block_bytes() as u64);
    let mut blocks = Vec::with_capacity(size as usize);
    let mut start = 0;
    while start < size {
        let count = per.min(size - start);
        blocks.extend(node.coded(deal, WireRun::from(id), start, count).await?);
        start += count;
    }
    let got = merkle::run_tree(&blocks).context("run tree")?.root();
    ensure!(got == root, "the node's run {id} does not match its root in the digest ({got} ≠ {root})");
    let mut out = Vec::with_capacity(size as usize * dpor_core::checksum::RHO);
    for b in &blocks {
        out.extend_from_slice(&keys.checksum(&format.coded_from_bytes(b)?)?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn shard_seeds_are_deterministic_per_key_and_distinct_per_deal_chain_market_and_key() {
        let a = PrivateKeySigner::from_bytes(&B256::repeat_byte(1)).unwrap();
        let b = PrivateKeySigner::from_bytes(&B256::repeat_byte(2)).unwrap();
        let m = Address::repeat_byte(9);
        let s = shard_seed(&a, 1, m, 7);
        assert_eq!(s, shard_seed(&a, 1, m, 7), "the same key gives the same seed again");
        for other in [shard_seed(&a, 1, m, 8), shard_seed(&a, 2, m, 7), shard_seed(&a, 1, Address::ZERO, 7), shard_seed(&b, 1, m, 7)] {
            assert_ne!(s, other);
        }
        // The published preimage layout (module docs), computed independently.
        let mut pre = b"dpor.shard-seed.v1".to_vec();
        pre.extend_from_slice(&[1u8; 32]);
        pre.extend_from_slice(&1u64.to_be_bytes());
        pre.extend_from_slice(&[9u8; 20]);
        pre.extend_from_slice(&7u64.to_be_bytes());
        assert_eq!(s, keccak256(&pre));
    }
}
