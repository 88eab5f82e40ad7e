//! Dispersal over many providers (issue 12), built *above* the single-deal flows:
//! `dpor put FILE --providers n --data k` stripes the file into k data and n − k parity
//! shards (`dpor_disperse`), picks n distinct registered providers, opens one ordinary
//! deal per shard with the single-deal `owner::deal::open`, uploads each shard with the
//! single-deal upload flow, checkpoints each (`owner::checkpoint`, digest v1), and
//! records the file in the on-chain `FileManifest`. `dpor get OUT` downloads from all shards in parallel,
//! verifies every block of each against its deal's rootU (the single-deal download),
//! stops as soon as k shards are complete and decodes.
//!
//! **The file's directory** (`--dir`, default `dpor-file/`): `file.json` ([`FileDir`]:
//! geometry, length, the registry and file id, each shard's deal and provider),
//! `manifest.bin` (the canonical `dpor.manifest.v1` bytes) and one owner state file per
//! shard, `shard-<i>.json` (each a normal single-deal state: `dpor --state
//! dir/shard-3.json status` works on it).
//!
//! Writes across shards: [`write`] (`file-write`, `file-checkpoint`, `fsck`); repair:
//! [`repair`]; the owner's state from the key, the chain and the providers: [`recover`]
//! (see docs/ARCHITECTURE.md, "Dispersal").
//!
//! Each command is one function here returning what it did; the CLI (`dpor-cli`'s
//! `disperse`) parses the arguments and prints. Notes for the user while a command
//! runs go to a [`Notes`] sink.

use crate::node_client::{NodeClient, OwnerAuth};
use crate::owner::checkpoint::{self, Checkpointed};
use crate::owner::deal::{self, OpenDeal};
use crate::owner::flows;
use crate::owner_state::{OwnerState, DEFAULT_BLOCK_CACHE_LEVELS, DEFAULT_CACHE_LEVELS};
use crate::progress::Notes;
use crate::session::Session;
use alloy_primitives::Address;
use anyhow::{bail, ensure, Context};
use dpor_chain::Market;
use dpor_disperse::{Geometry, Manifest, ShardEntry, ShardIndex, StripeCoder};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

pub mod recover;
pub mod repair;
pub mod write;

pub use crate::session::LOCAL_MANIFEST;

/// The terms of the deals `put` and `repair` open, one per shard.
#[derive(Debug, Clone)]
pub struct DealTerms {
    /// Only providers asking at most this price per block per epoch (token base units).
    pub max_price: Option<u128>,
    /// Only providers locking at least this collateral per block (token base units).
    pub min_collateral: Option<u128>,
    /// λ, audit samples per run, for every shard's deal.
    pub lambda: u16,
    /// K, whole coded blocks per epoch proof (1..8).
    pub samples: u8,
    /// Term in epochs of every deal.
    pub epochs: u32,
    /// Local chain only: mint each deal's escrow with the test token first.
    pub mint: bool,
}

/// One shard in `file.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShardFile {
    /// Shard index (0..k data, k..n parity).
    pub index: u16,
    /// Its deal.
    pub deal: u64,
    /// Its provider.
    pub provider: Address,
    /// Its owner state file, relative to the directory.
    pub state: String,
}

/// `file.json`: a dispersed file as the owner keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileDir {
    /// k.
    pub k: u16,
    /// n.
    pub n: u16,
    /// β.
    pub block_bytes: u32,
    /// L, the file's length.
    pub file_bytes: u64,
    /// The FileManifest registry.
    pub registry: Address,
    /// The file's id there (None until recorded).
    pub file_id: Option<u64>,
    /// The shards placed so far, in shard order.
    pub shards: Vec<ShardFile>,
    /// Shards written since their last checkpoint (`file-write`), whose digests
    /// `file-checkpoint` posts; ascending.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dirty: Vec<u16>,
}

impl FileDir {
    fn path(dir: &Path) -> PathBuf {
        dir.join("file.json")
    }

    /// Reads `dir/file.json`.
    pub fn load(dir: &Path) -> anyhow::Result<Self> {
        let p = Self::path(dir);
        let text = std::fs::read_to_string(&p).with_context(|| format!("cannot read {}", p.display()))?;
        serde_json::from_str(&text).with_context(|| format!("{} is not a dispersed file's record", p.display()))
    }

    /// Writes `dir/file.json` durably (temp file, fsync, rename).
    pub fn save(&self, dir: &Path) -> anyhow::Result<()> {
        let p = Self::path(dir);
        let tmp = dir.join("file.json.tmp");
        {
            use std::io::Write;
            let mut f = std::fs::File::create(&tmp).with_context(|| format!("cannot write {}", tmp.display()))?;
            f.write_all(serde_json::to_string_pretty(self)?.as_bytes())?;
            f.sync_all()?;
        }
        std::fs::rename(&tmp, &p).with_context(|| format!("cannot write {}", p.display()))?;
        Ok(())
    }

    /// The geometry.
    pub fn geometry(&self) -> anyhow::Result<Geometry> {
        Ok(Geometry::new(self.k, self.n, self.block_bytes)?)
    }
}

/// Picks `n` providers for shards of `blocks` blocks each: the registry read, then the
/// decision is `dpor_disperse::policy::pick_providers` (registered, with the stake, the
/// free capacity, a price ≤ `max_price` and collateral ≥ `min_collateral`; never the
/// owner itself, never one in `exclude` (the providers that already hold, or held, a
/// shard of the file) nor one sharing a peer id with them, never two with one peer id;
/// cheapest first, ties by address).
pub async fn pick_providers(
    market: &Market,
    n: usize,
    blocks: u64,
    max_price: Option<u128>,
    min_collateral: Option<u128>,
    exclude: &[Address],
) -> anyhow::Result<Vec<(Address, u128)>> {
    use dpor_disperse::policy::{self, Candidate, Terms};
    let me = market.account();
    let min_stake = market.min_stake().await?;
    let mut peers = Vec::new();
    for a in exclude {
        if let Ok(p) = market.get_provider(*a).await {
            peers.push(p.peer_id);
        }
    }
    let mut candidates = Vec::new();
    for a in market.registered_providers(0).await? {
        let p = market.get_provider(a).await?;
        candidates.push(Candidate {
            id: a,
            peer: p.peer_id,
            registered: p.registered,
            stake: p.stake,
            free_blocks: p.capacity_blocks.saturating_sub(p.used_blocks),
            price: p.price_per_block_epoch,
            collateral: p.collateral_per_block,
        });
    }
    let terms = Terms { blocks, min_stake, max_price, min_collateral };
    let peer_refs: Vec<_> = peers.iter().collect();
    match policy::pick_providers(&candidates, n, &terms, me.as_ref(), exclude, &peer_refs) {
        Ok(chosen) => Ok(chosen.into_iter().map(|i| (candidates[i].id, candidates[i].price)).collect()),
        Err(short) => {
            let refused: Vec<String> = short.refused.iter().map(|(i, why)| format!("{} {why}", candidates[*i].id)).collect();
            bail!(
                "only {} registered providers qualify, {n} are needed (one per shard){}",
                short.chosen,
                if refused.is_empty() { String::new() } else { format!("; not chosen: {}", refused.join("; ")) }
            )
        }
    }
}

/// Dials `provider`'s node by its registered multiaddrs.
///
/// # Errors
/// The chain cannot be read, or no address answers.
pub async fn dial(market: &Market, provider: Address, timeout: Duration) -> anyhow::Result<NodeClient> {
    let p = market.get_provider(provider).await?;
    crate::session::dial_registered(&p.multiaddrs, provider, timeout).await
}

/// Checks that `registry` is a FileManifest of this market: contract code at the
/// address, and its `market()` and `fileCount()` views answering as a FileManifest's
/// do, with `market()` naming the market the deals are opened on.
pub async fn check_manifest(market: &Market, registry: Address) -> anyhow::Result<()> {
    let reg = market.manifest_registry(registry);
    let not_one = || format!("--manifest {registry} is not a FileManifest contract");
    let has_code = reg.has_code().await.with_context(|| format!("reading the code at {registry}"))?;
    ensure!(has_code, "{}: there is no contract code at that address (give the registry's address, or set DPOR_MANIFEST)", not_one());
    let bound =
        reg.market_address().await.with_context(|| format!("{}: its market() view does not answer as a FileManifest's", not_one()))?;
    ensure!(
        bound == market.address(),
        "--manifest {registry} is the FileManifest of market {bound}, not of this market {}: it would refuse this market's deals",
        market.address()
    );
    reg.file_count().await.with_context(|| format!("{}: its fileCount() view does not answer as a FileManifest's", not_one()))?;
    Ok(())
}

/// What [`put`] did.
#[derive(Debug, Clone)]
pub struct Put {
    /// The file's record, as saved in `DIR/file.json`.
    pub record: FileDir,
    /// The file's id in the FileManifest.
    pub file_id: u64,
    /// Stripes (blocks per shard before rounding).
    pub stripes: u64,
    /// N, blocks of every shard's deal.
    pub num_blocks: u64,
    /// Seconds to encode the shards.
    pub encode_seconds: f64,
    /// Seconds to open the deals.
    pub deals_seconds: f64,
    /// Seconds of the parallel upload.
    pub upload_seconds: f64,
    /// Seconds in all.
    pub seconds: f64,
}

/// `dpor put FILE --providers n --data k`: disperses `file` k-of-n into `dir`, with the
/// FileManifest at `registry` (module docs). A chosen provider that other owners'
/// deals filled meanwhile (full at `openDeal`, or unable to accept; see `dpor_client::owner::deal::wait_active`) is
/// replaced by the next one that qualifies, the refused deal cancelled (module-private
/// `accept_or_replace`). Notes of the re-placements and of the shards' checkpoints
/// go to `notes`.
///
/// # Errors
/// `dir` already holds a file, not a FileManifest of this market, a bad k or n, an
/// empty or unreadable file, too few providers, a shard not placed after
/// [`PLACEMENT_ROUNDS`] tries, or a deal, upload or checkpoint failing.
#[allow(clippy::too_many_arguments)]
pub async fn put(
    ctx: &Session,
    file: &Path,
    n: u16,
    k: u16,
    dir: &Path,
    registry: Address,
    opts: &DealTerms,
    notes: &dyn Notes,
) -> anyhow::Result<Put> {
    let key = ctx.key()?.clone();
    let started = Instant::now();
    ensure!(!FileDir::path(dir).exists(), "{} already holds a dispersed file", dir.display());
    // Before any deal is opened: the file is recorded there last.
    check_manifest(&ctx.market, registry).await?;
    let geometry = Geometry::new(k, n, dpor_disperse::geometry::DEFAULT_BLOCK_BYTES)
        .context("--data k and --providers n must satisfy 1 ≤ k < n ≤ 256")?;
    let bytes = std::fs::read(file).with_context(|| format!("cannot read {}", file.display()))?;
    ensure!(!bytes.is_empty(), "{} is empty", file.display());
    let mut coder = StripeCoder::new(geometry)?;
    let shards = coder.split_file(&bytes)?;
    let encode_secs = started.elapsed().as_secs_f64();
    let stripes = geometry.stripes(bytes.len() as u64)?;
    let num_blocks = stripes.next_power_of_two();
    let chosen = pick_providers(&ctx.market, n as usize, num_blocks, opts.max_price, opts.min_collateral, &[]).await?;
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut record = FileDir {
        k,
        n,
        block_bytes: geometry.block_bytes(),
        file_bytes: bytes.len() as u64,
        registry,
        file_id: None,
        shards: Vec::new(),
        dirty: Vec::new(),
    };

    // (1) One deal per shard, with `deal open`'s own code (`owner::deal::open`) (sequential:
    // one key's nonces). A provider another owner filled since the registry was read is
    // replaced by the next one that qualifies.
    let mut tried: Vec<Address> = chosen.iter().map(|c| c.0).collect();
    for (i, &(first, first_price)) in chosen.iter().enumerate() {
        let name = format!("shard-{i}.json");
        let (mut provider, mut price) = (first, first_price);
        let mut attempts = 0;
        let deal = loop {
            match open_shard_deal(ctx, dir, &name, provider, price, num_blocks, geometry.block_bytes(), opts, attempts > 0).await {
                Ok(deal) => break deal,
                Err(e) if attempts < PLACEMENT_ROUNDS && !has_room(&ctx.market, provider, num_blocks).await? => {
                    let next = pick_providers(&ctx.market, 1, num_blocks, opts.max_price, opts.min_collateral, &tried)
                        .await
                        .with_context(|| format!("choosing another provider for shard {i} ({provider} is full: {e:#})"))?;
                    notes.note(&format!("shard {i}: {provider} has no room left ({e:#}); trying {}", next[0].0));
                    (provider, price) = next[0];
                    tried.push(provider);
                    attempts += 1;
                }
                Err(e) => return Err(e.context(format!("opening the deal of shard {i} with {provider}"))),
            }
        };
        record.shards.push(ShardFile { index: i as u16, deal, provider, state: name });
        record.save(dir)?;
    }
    // (1b) Every deal accepted; one its provider cannot take is re-placed.
    accept_or_replace(ctx, dir, &mut record, num_blocks, opts, &mut tried, notes).await?;
    let opened_secs = started.elapsed().as_secs_f64();

    // (2) Upload every shard in parallel with the single-deal upload flow.
    let upload_started = Instant::now();
    let mut uploads = tokio::task::JoinSet::new();
    for (s, data) in record.shards.iter().zip(shards) {
        let market = ctx.market.clone();
        let key = key.clone();
        let timeout = ctx.timeout;
        let path = dir.join(&s.state);
        let s = s.clone();
        uploads.spawn(async move {
            let r: anyhow::Result<()> = async {
                let mut state = OwnerState::load(&path)?;
                deal::wait_active(&market, s.deal).await?;
                let node = dial(&market, s.provider, timeout).await?;
                let auth = OwnerAuth { key: &key, chain_id: state.chain_id, market: state.market, deal: state.deal };
                let result = flows::upload(&node, &auth, &mut state, &data, None).await;
                state.save(&path)?;
                result.map(|_| ())
            }
            .await;
            (s.index, r.with_context(|| format!("uploading shard {} to deal {}", s.index, s.deal)))
        });
    }
    while let Some(joined) = uploads.join_next().await {
        let (_, r) = joined.context("an upload task failed")?;
        r?;
    }
    let upload_secs = upload_started.elapsed().as_secs_f64();

    // (3) Digest v1 of every shard, with `checkpoint`'s own code.
    let mut entries = Vec::new();
    for s in &record.shards {
        let done = checkpoint::checkpoint(&ctx.with_state(dir.join(&s.state)), notes)
            .await
            .with_context(|| format!("checkpointing shard {} (deal {})", s.index, s.deal))?;
        let version = match done {
            Checkpointed::Posted { version, .. } | Checkpointed::Resized { version, .. } => version,
        };
        entries.push(ShardEntry { deal_id: s.deal, digest_version: version });
    }

    // (4) The manifest, locally and on chain.
    let manifest = Manifest::new(record.file_bytes, geometry, entries)?;
    std::fs::write(dir.join("manifest.bin"), manifest.to_bytes()).context("writing manifest.bin")?;
    let deals: Vec<u64> = record.shards.iter().map(|s| s.deal).collect();
    let reg = ctx.market.manifest_registry(registry);
    let file_id = reg
        .record_file(k, n, geometry.block_bytes(), record.file_bytes, &deals)
        .await
        .with_context(|| format!("recording the file in the FileManifest at {registry}"))?;
    record.file_id = Some(file_id);
    record.save(dir)?;
    let seconds = started.elapsed().as_secs_f64();
    Ok(Put {
        record,
        file_id,
        stripes,
        num_blocks,
        encode_seconds: encode_secs,
        deals_seconds: opened_secs - encode_secs,
        upload_seconds: upload_secs,
        seconds,
    })
}

/// Opens one shard's deal with `provider` at `price` with `deal open`'s own code
/// (`owner::deal::open`), its owner state at `dir/name` (replacing one there only if
/// `replace`: the state of a cancelled deal of the same shard), and
/// derives the state's checksum seed from the owner's key (so `recover` can derive it
/// again). Returns the deal id.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn open_shard_deal(
    ctx: &Session,
    dir: &Path,
    name: &str,
    provider: Address,
    price: u128,
    num_blocks: u64,
    block_bytes: u32,
    opts: &DealTerms,
    replace: bool,
) -> anyhow::Result<u64> {
    let req = OpenDeal {
        provider,
        file: None,
        blocks: Some(num_blocks),
        block_bytes,
        lambda: opts.lambda,
        samples: opts.samples,
        epochs: opts.epochs,
        price: Some(price),
        min_collateral: None,
        mint: opts.mint,
        cache_levels: DEFAULT_CACHE_LEVELS,
        block_cache_levels: DEFAULT_BLOCK_CACHE_LEVELS,
        force: replace,
    };
    let opened = deal::open(&ctx.with_state(dir.join(name)), &req).await?;
    recover::derive_seed(ctx.key()?, &dir.join(name))?;
    Ok(opened.deal)
}

/// Whether `provider`'s free capacity (`capacityBlocks − usedBlocks`) still fits a deal
/// of `blocks` blocks.
async fn has_room(market: &Market, provider: Address, blocks: u64) -> anyhow::Result<bool> {
    let p = market.get_provider(provider).await?;
    Ok(p.capacity_blocks.saturating_sub(p.used_blocks) >= blocks)
}

/// Re-placements `put` tries for one shard (a full provider at `openDeal`, or rounds
/// of `accept_or_replace`) before it gives up.
pub const PLACEMENT_ROUNDS: usize = 3;

/// Waits, for all shards at once, until every deal of `record` is accepted
/// ([`deal::wait_active`]). A deal its provider does not accept (its free capacity
/// went to other owners' deals opened at the same time, since `openDeal` reserves
/// nothing, or no acceptance within a minute) is cancelled (`cancelDeal`: the escrow
/// comes back) and its shard re-opened with another provider, picked as `put` picks
/// ([`pick_providers`]) but never one in `tried` (the file's providers and every one
/// tried before; the new ones are added);
/// up to [`PLACEMENT_ROUNDS`] rounds. One note per re-placed shard goes to `notes`.
///
/// # Errors
/// A shard is still not accepted after the last round, no other provider qualifies,
/// or the chain cannot be read or written.
async fn accept_or_replace(
    ctx: &Session,
    dir: &Path,
    record: &mut FileDir,
    num_blocks: u64,
    opts: &DealTerms,
    tried: &mut Vec<Address>,
    notes: &dyn Notes,
) -> anyhow::Result<()> {
    for round in 0..=PLACEMENT_ROUNDS {
        let mut waits = tokio::task::JoinSet::new();
        for (slot, s) in record.shards.iter().enumerate() {
            let market = ctx.market.clone();
            let deal = s.deal;
            waits.spawn(async move { (slot, deal::wait_active(&market, deal).await) });
        }
        let mut refused = Vec::new();
        while let Some(joined) = waits.join_next().await {
            let (slot, r) = joined.context("a wait for a deal's acceptance failed")?;
            if let Err(e) = r {
                refused.push((slot, e));
            }
        }
        if refused.is_empty() {
            return Ok(());
        }
        refused.sort_by_key(|(slot, _)| *slot);
        if round == PLACEMENT_ROUNDS {
            let why: Vec<String> = refused.iter().map(|(slot, e)| format!("shard {slot}: {e:#}")).collect();
            bail!("{} shards not accepted after {PLACEMENT_ROUNDS} re-placements: {}", refused.len(), why.join("; "));
        }
        // Cancelled now, or accepted after all (the minute ran out just then): keep that one.
        let mut still = Vec::new();
        for (slot, why) in refused {
            let deal = record.shards[slot].deal;
            match ctx.market.get_deal(deal).await?.state {
                dpor_chain::DealState::Active => continue,
                dpor_chain::DealState::Open => {
                    ctx.market.cancel_deal(deal).await.with_context(|| format!("cancelling deal {deal}"))?;
                }
                _ => {}
            }
            still.push((slot, why));
        }
        let refused = still;
        if refused.is_empty() {
            return Ok(());
        }
        let others = pick_providers(&ctx.market, refused.len(), num_blocks, opts.max_price, opts.min_collateral, tried)
            .await
            .context("choosing providers for the shards whose deals were not accepted")?;
        for ((slot, why), (provider, price)) in refused.into_iter().zip(others) {
            let old = record.shards[slot].clone();
            let deal = open_shard_deal(ctx, dir, &old.state, provider, price, num_blocks, record.block_bytes, opts, true)
                .await
                .with_context(|| format!("opening the deal of shard {} with {provider}", old.index))?;
            notes.note(&format!(
                "shard {}: deal {} with {} not accepted ({why:#}); cancelled, placed with {provider} as deal {deal}",
                old.index, old.deal, old.provider
            ));
            tried.push(provider);
            record.shards[slot] = ShardFile { deal, provider, ..old };
            record.save(dir)?;
        }
    }
    Ok(())
}

/// Downloads shards of the file in `dir` from their providers, every block verified
/// against its deal's rootU (the single-deal download), skipping the shards in `skip`,
/// until k are complete. It asks k shards at once, the data shards first (no decoding
/// when they all answer), and one more for each shard that fails, or, hedging against a
/// slow provider, whenever `ctx.timeout` passes without a shard completing: a slow or
/// lying provider costs time, never correctness, and a healthy file costs k shards'
/// work, not n. Returns the n slots (`Some(bytes)` for the k shards used) and the
/// failures seen (one line each). Errors when fewer than k shards can be had.
///
/// # Errors
/// `record` lists fewer than n shards, or fewer than k shards can be had.
pub async fn fetch_shards(
    ctx: &Session,
    dir: &Path,
    record: &FileDir,
    skip: &[u16],
) -> anyhow::Result<(Vec<Option<Vec<u8>>>, Vec<String>)> {
    let geometry = record.geometry()?;
    ensure!(record.shards.len() == record.n as usize, "{} lists {} of {} shards", dir.display(), record.shards.len(), record.n);
    let shard_bytes = geometry.shard_bytes(record.file_bytes)?;
    // Shards in the order they are asked: data shards (0..k) first, then parity.
    let mut queue: std::collections::VecDeque<ShardFile> = record.shards.iter().filter(|s| !skip.contains(&s.index)).cloned().collect();
    let mut tasks = tokio::task::JoinSet::new();
    let spawn = |tasks: &mut tokio::task::JoinSet<(u16, anyhow::Result<Vec<u8>>)>, s: ShardFile| {
        let market = ctx.market.clone();
        let timeout = ctx.timeout;
        let path = dir.join(&s.state);
        tasks.spawn(async move {
            let r: anyhow::Result<Vec<u8>> = async {
                let state = OwnerState::load(&path)?;
                ensure!(state.deal == s.deal, "{} is the state of deal {}, not {}", path.display(), state.deal, s.deal);
                ensure!(
                    state.pending.is_none(),
                    "shard {} has an unfinished request: run `dpor --state {} status`",
                    s.index,
                    path.display()
                );
                let node = dial(&market, s.provider, timeout).await?;
                // Verifies every block against the deal's rootU.
                flows::download(&node, &state, None).await
            }
            .await;
            (s.index, r.with_context(|| format!("shard {} (deal {}, provider {})", s.index, s.deal, s.provider)))
        });
    };
    for _ in 0..record.k {
        if let Some(s) = queue.pop_front() {
            spawn(&mut tasks, s);
        }
    }
    let mut got: Vec<Option<Vec<u8>>> = vec![None; record.n as usize];
    let mut have = 0;
    let mut failed: Vec<String> =
        skip.iter().map(|i| format!("shard {i}: not asked (being repaired, or behind an unfinished write)")).collect();
    loop {
        let joined = match tokio::time::timeout(ctx.timeout, tasks.join_next()).await {
            Ok(Some(j)) => j,
            Ok(None) => break, // nothing left to ask
            Err(_) => {
                // No shard completed within the timeout: ask one more (hedge).
                if let Some(s) = queue.pop_front() {
                    spawn(&mut tasks, s);
                }
                continue;
            }
        };
        let (i, r) = match joined {
            Ok(x) => x,
            Err(e) => {
                failed.push(format!("a download task failed: {e}"));
                if let Some(s) = queue.pop_front() {
                    spawn(&mut tasks, s);
                }
                continue;
            }
        };
        match r {
            Ok(bytes) if bytes.len() as u64 == shard_bytes => {
                got[i as usize] = Some(bytes);
                have += 1;
                if have == record.k as usize {
                    break;
                }
                continue;
            }
            Ok(bytes) => failed.push(format!("shard {i}: {} bytes, a shard is {shard_bytes}", bytes.len())),
            Err(e) => failed.push(format!("{e:#}")),
        }
        if failed.len() > (record.n - record.k) as usize {
            break;
        }
        if let Some(s) = queue.pop_front() {
            spawn(&mut tasks, s);
        }
    }
    // The slower shards are not needed: stop them.
    tasks.abort_all();
    ensure!(
        have == record.k as usize,
        "{} of {} shards failed, at most {} may for a {}-of-{} file (got {have} verified shards, {} needed): {}",
        failed.len(),
        record.n,
        record.n - record.k,
        record.k,
        record.n,
        record.k,
        failed.join("; ")
    );
    Ok((got, failed))
}

/// Rolls an interrupted write across shards forward (`write::complete_pending`); a note
/// for the user when it did something. Errors if it cannot (a shard's node unreachable).
///
/// # Errors
/// No key, an unreadable intent, or a shard that cannot be written.
pub async fn settle_file(ctx: &Session, dir: &Path, record: &mut FileDir) -> anyhow::Result<Option<String>> {
    if write::WriteIntent::load(dir)?.is_none() {
        return Ok(None);
    }
    let key = ctx.key()?;
    let done = write::complete_pending(&ctx.market, ctx.timeout, key, dir, record).await?;
    Ok(done.map(|a| format!("completed an interrupted write: shards {:?}, {} blocks", a.shards_written, a.blocks_written)))
}

/// For the commands that only read the shards (`get`, and `repair`, which rebuilds from
/// them): rolls an interrupted write forward if it can; if it cannot (a shard it must
/// still write is unreachable), returns those shards, which are then not read: they
/// may hold the old bytes of the stripes the write touched, while every other shard
/// holds the new ones (or was not touched), so decoding from the others gives the new
/// version. A note for the user either way.
///
/// # Errors
/// The intent cannot be read.
pub async fn settle_or_skip(ctx: &Session, dir: &Path, record: &mut FileDir) -> anyhow::Result<(Vec<u16>, Option<String>)> {
    match settle_file(ctx, dir, record).await {
        Ok(note) => Ok((Vec::new(), note)),
        Err(e) => {
            let Some(intent) = write::WriteIntent::load(dir)? else {
                return Err(e);
            };
            let stale: Vec<u16> = intent.shards.iter().filter(|w| !w.done).map(|w| w.shard).collect();
            Ok((
                stale.clone(),
                Some(format!(
                    "an interrupted write could not be completed ({e:#}); shards {stale:?} are behind it and are not read (repair them, or run `dpor fsck` once their nodes are back)"
                )),
            ))
        }
    }
}

/// What [`file_write`] did.
#[derive(Debug, Clone)]
pub struct FileWritten {
    /// Shards written.
    pub shards_written: Vec<u16>,
    /// Blocks written over all shards.
    pub blocks_written: u64,
    /// Shards to checkpoint now (`file.json`'s `dirty`).
    pub dirty: Vec<u16>,
}

/// `dpor file-write`: writes `bytes` at byte `offset` of the file in `dir` ([`write`]),
/// after completing an interrupted write (its note to `notes`).
///
/// # Errors
/// No key, an interrupted write that cannot be completed, a range past the file's
/// end, or a shard that cannot be reached or written.
pub async fn file_write(ctx: &Session, dir: &Path, offset: u64, bytes: &[u8], notes: &dyn Notes) -> anyhow::Result<FileWritten> {
    let mut record = FileDir::load(dir)?;
    if let Some(note) = settle_file(ctx, dir, &mut record).await? {
        notes.note(&note);
    }
    let key = ctx.key()?;
    let all: Vec<u16> = (0..record.n).collect();
    let mut links = write::link_shards(&ctx.market, ctx.timeout, dir, &record, &all).await?;
    for l in links.iter_mut() {
        let auth = OwnerAuth { key, chain_id: l.state.chain_id, market: l.state.market, deal: l.state.deal };
        crate::owner::recover::recover(&l.node, &auth, &mut l.state).await.with_context(|| format!("settling shard {}", l.index))?;
    }
    let intent = write::plan(&record, &links, offset, bytes).await?;
    intent.save(dir)?;
    let applied = write::apply(dir, &mut record, intent, &mut links, key, None).await?;
    Ok(FileWritten { shards_written: applied.shards_written, blocks_written: applied.blocks_written, dirty: record.dirty })
}

/// `dpor file-checkpoint`: posts the digest of every shard written since its last
/// checkpoint, in shard order, `file.json` saved after each. Returns (shard, deal, what
/// its checkpoint did) for each.
///
/// # Errors
/// An interrupted write that cannot be completed, or a checkpoint failing (those before
/// it stay posted).
pub async fn file_checkpoint(ctx: &Session, dir: &Path, notes: &dyn Notes) -> anyhow::Result<Vec<(u16, u64, Checkpointed)>> {
    let mut record = FileDir::load(dir)?;
    if let Some(note) = settle_file(ctx, dir, &mut record).await? {
        notes.note(&note);
    }
    let mut posted = Vec::new();
    while let Some(&i) = record.dirty.first() {
        let s = record.shards.iter().find(|s| s.index == i).cloned().with_context(|| format!("no shard {i}"))?;
        let done = checkpoint::checkpoint(&ctx.with_state(dir.join(&s.state)), notes)
            .await
            .with_context(|| format!("checkpoint of shard {i} (deal {})", s.deal))?;
        posted.push((i, s.deal, done));
        record.dirty.remove(0);
        record.save(dir)?;
    }
    Ok(posted)
}

/// What [`fsck`] found.
#[derive(Debug, Clone)]
pub struct Fsck {
    /// What completing an interrupted write did, if there was one.
    pub completed: Option<String>,
    /// Shards to checkpoint.
    pub dirty: Vec<u16>,
    /// Shards with an unfinished single-deal request.
    pub shards_pending: Vec<u16>,
}

/// `dpor fsck`: completes an interrupted write across shards and reports the file's state.
///
/// # Errors
/// The interrupted write cannot be completed, or a state file cannot be read.
pub async fn fsck(ctx: &Session, dir: &Path) -> anyhow::Result<Fsck> {
    let mut record = FileDir::load(dir)?;
    let completed = settle_file(ctx, dir, &mut record).await?;
    let mut pending = Vec::new();
    for s in &record.shards {
        let st = OwnerState::load(&dir.join(&s.state))?;
        if st.pending.is_some() {
            pending.push(s.index);
        }
    }
    Ok(Fsck { completed, dirty: record.dirty, shards_pending: pending })
}

/// What [`get`] did.
#[derive(Debug, Clone)]
pub struct Got {
    /// Bytes written.
    pub bytes: usize,
    /// n.
    pub n: u16,
    /// The shards decoded from, ascending.
    pub shards_used: Vec<u16>,
    /// How many of them are parity shards.
    pub parity_used: usize,
    /// The failures seen (one line each).
    pub failed: Vec<String>,
    /// Seconds to decode.
    pub decode_seconds: f64,
    /// Seconds in all.
    pub seconds: f64,
}

/// `dpor get OUT`: the file in `dir` from any k shards ([`fetch_shards`]), decoded into
/// `out`; an interrupted write is completed first or its shards left out (the note to
/// `notes`).
///
/// # Errors
/// Fewer than k shards can be had, or `out` cannot be written.
pub async fn get(ctx: &Session, dir: &Path, out: &Path, notes: &dyn Notes) -> anyhow::Result<Got> {
    let started = Instant::now();
    let mut record = FileDir::load(dir)?;
    let (stale, note) = settle_or_skip(ctx, dir, &mut record).await?;
    if let Some(note) = note {
        notes.note(&note);
    }
    let geometry = record.geometry()?;
    let (got, failed) = fetch_shards(ctx, dir, &record, &stale).await?;
    let used: Vec<u16> = (0..record.n).filter(|&i| got[i as usize].is_some()).collect();
    let decode_started = Instant::now();
    let mut coder = StripeCoder::new(geometry)?;
    let refs: Vec<Option<&[u8]>> = got.iter().map(|g| g.as_deref()).collect();
    let data = coder.join_file(record.file_bytes, &refs)?;
    let decode_secs = decode_started.elapsed().as_secs_f64();
    std::fs::write(out, &data).with_context(|| format!("cannot write {}", out.display()))?;
    let seconds = started.elapsed().as_secs_f64();
    let parity_used = used.iter().filter(|&&i| !geometry.is_data(ShardIndex(i))).count();
    Ok(Got { bytes: data.len(), n: record.n, shards_used: used, parity_used, failed, decode_seconds: decode_secs, seconds })
}

/// Why the deal of `state` (whose file is `state_path`) is a shard of a dispersed
/// file, or `None` for a single-provider deal. A shard's checksum seed is derived from
/// the owner's key (`disperse::recover::shard_seed`, as `put` and `repair` set it),
/// where a single deal's is random; the `file.json` beside the state file also lists
/// its deal. Resizing a shard by hand is not supported (docs/OPERATIONS.md,
/// "Resizing"; `dpor repair` moves a shard instead).
pub fn dispersed_shard(state: &OwnerState, key: &alloy::signers::local::PrivateKeySigner, state_path: &Path) -> Option<String> {
    if state.seed == recover::shard_seed(key, state.chain_id, state.market, state.deal) {
        return Some("its checksum seed is the one `dpor put` derives from your key for a shard".into());
    }
    let dir = state_path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let record = FileDir::load(dir).ok()?;
    let s = record.shards.iter().find(|s| s.deal == state.deal)?;
    Some(format!("{} lists it as shard {}", dir.join("file.json").display(), s.index))
}
