//! `dpor repair` (issue 12, item 4): finds the shards of a dispersed file that no longer
//! protect it, rebuilds each from any k others and places it with a new provider under a
//! new deal, then points the on-chain FileManifest at the new deal.
//!
//! A shard needs repair when (checked in this order, from the chain and the network):
//! 1. its deal is no longer `Active` (completed, terminated by faults, cancelled);
//! 2. its deal counted more than `max_faults` faults (missed epochs, lost disputes):
//!    the provider failed challenges, so its copy is not trusted to be whole;
//! 3. its provider's node does not answer a status request for the deal, and has not
//!    since a first failed probe at least `unreachable_epochs` epochs ago (chain time;
//!    the first failure is remembered in `DIR/health.json`);
//!
//! A shard is also repaired when the owner names it (`--shard I`).
//!
//! The repair of shard i: the file is fetched from k healthy shards (every block
//! verified against its deal's rootU), split again with the same code (the k fetched
//! shards must come out unchanged, a check of the decoding; the rebuilt shard i is then
//! byte for byte the shard first uploaded; rootUs differ between deals, since each U
//! leaf seals a checksum under that deal's own keys), a provider
//! is chosen from the registry that holds no shard of the file and shares no peer id
//! with one that does, a deal is opened with it, the shard is uploaded (verified as any
//! upload) and checkpointed (digest v1 on chain), `FileManifest.replaceShard` records it,
//! and `DIR/file.json` and `DIR/manifest.bin` follow. The old deal's state file is kept
//! (`shard-<i>.json` of the old deal stays on disk under its name) for its refunds.
//!
//! Crash safety: the new deal's state file is `shard-<i>.next.json` until the manifest
//! is updated; a repair that finds one continues with that deal (if it is still open or
//! active) instead of opening another.

use super::{dial, fetch_shards, pick_providers, DealTerms, FileDir, ShardFile};
use crate::node_client::OwnerAuth;
use crate::owner::deal::wait_active;
use crate::owner::{checkpoint, flows};
use crate::owner_state::OwnerState;
use crate::progress::Notes;
use crate::session::Session;
use alloy_primitives::Address;
use anyhow::{ensure, Context};
use dpor_chain::DealState;
use dpor_disperse::policy::{self, Reason, RepairRules};
use dpor_disperse::{Manifest, ShardEntry, StripeCoder};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Options of `dpor repair` (and of `dpor watch --repair`).
#[derive(Debug, Clone)]
pub struct RepairOptions {
    /// Shards to repair whatever their health (shard indices).
    pub shards: Vec<u16>,
    /// Faults a shard's deal may have counted and still be healthy (default 0).
    pub max_faults: u16,
    /// Epochs a provider may stay unreachable before its shard is repaired (0: at once).
    pub unreachable_epochs: u64,
    /// Only report the shards' health; repair nothing.
    pub dry_run: bool,
    /// The terms of the new deals.
    pub terms: DealTerms,
}

impl RepairOptions {
    /// The thresholds as `dpor_disperse::policy` takes them.
    pub fn rules(&self) -> RepairRules {
        RepairRules { max_faults: self.max_faults, unreachable_epochs: self.unreachable_epochs }
    }
}

/// Why a shard needs repair.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// It protects the file.
    Healthy,
    /// Its deal is in this state, not `Active`.
    DealEnded(DealState),
    /// Its deal counted this many faults.
    Faulted(u16),
    /// Its node did not answer (the error), since the given chain time; repair is due.
    Unreachable(String),
    /// Its node did not answer, but the grace period is not over.
    UnreachableGrace(String),
    /// The owner asked for it.
    Asked,
}

impl Verdict {
    /// Whether the shard is to be repaired now.
    pub fn needs_repair(&self) -> bool {
        !matches!(self, Verdict::Healthy | Verdict::UnreachableGrace(_))
    }

    /// The verdict in words.
    pub fn describe(&self) -> String {
        match self {
            Verdict::Healthy => "healthy".into(),
            Verdict::DealEnded(s) => format!("deal {s:?}, no longer active"),
            Verdict::Faulted(f) => format!("deal counted {f} fault(s)"),
            Verdict::Unreachable(e) => format!("unreachable past the grace period ({e})"),
            Verdict::UnreachableGrace(e) => format!("unreachable, within the grace period ({e})"),
            Verdict::Asked => "repair asked for".into(),
        }
    }
}

/// `DIR/health.json`: since when (chain time, UNIX seconds) each shard's node has failed
/// to answer, by shard index. Cleared for a shard when it answers or is repaired.
/// `refused`: providers whose upload of a repaired shard failed (their node's answer
/// failed the owner's checks, or the upload broke off): never chosen again for this
/// file (found by `script/emulate`: a cheating node with free space, the cheapest,
/// was otherwise chosen again on every pass and no repair of the file ever finished).
#[derive(Debug, Default, Serialize, Deserialize)]
struct Health {
    unreachable_since: BTreeMap<u16, u64>,
    #[serde(default)]
    refused: Vec<Address>,
}

impl Health {
    fn load(dir: &Path) -> anyhow::Result<Self> {
        let p = dir.join("health.json");
        match std::fs::read_to_string(&p) {
            Ok(t) => serde_json::from_str(&t).with_context(|| format!("{} is corrupt", p.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Self::default()),
            Err(e) => Err(e).with_context(|| format!("cannot read {}", p.display())),
        }
    }

    fn save(&self, dir: &Path) -> anyhow::Result<()> {
        let p = dir.join("health.json");
        std::fs::write(&p, serde_json::to_string_pretty(self)?).with_context(|| format!("cannot write {}", p.display()))
    }
}

/// The health of shard `s` (see the module docs), updating `health`: the chain and the
/// node read here, the decision by `dpor_disperse::policy` (`chain_reason`, then
/// `unreachable_due`), the rules the simulator (`dpor-sim`) applies as well.
async fn check(
    ctx: &Session,
    s: &ShardFile,
    opts: &RepairOptions,
    health: &mut Health,
    now: u64,
    epoch_seconds: u64,
) -> anyhow::Result<Verdict> {
    let rules = opts.rules();
    if opts.shards.contains(&s.index) {
        return Ok(Verdict::Asked);
    }
    let deal = ctx.market.get_deal(s.deal).await.with_context(|| format!("reading deal {} of shard {}", s.deal, s.index))?;
    match policy::chain_reason(false, deal.state == DealState::Active, deal.failures, &rules) {
        Some(Reason::DealEnded) => return Ok(Verdict::DealEnded(deal.state)),
        Some(Reason::Faulted(f)) => return Ok(Verdict::Faulted(f)),
        Some(Reason::Asked | Reason::Unreachable) | None => {}
    }
    let probe: anyhow::Result<()> = async {
        let node = dial(&ctx.market, s.provider, ctx.timeout).await?;
        node.status(s.deal).await?;
        Ok(())
    }
    .await;
    match probe {
        Ok(()) => {
            health.unreachable_since.remove(&s.index);
            Ok(Verdict::Healthy)
        }
        Err(e) => {
            let since = *health.unreachable_since.entry(s.index).or_insert(now);
            let why = format!("{e:#}");
            if policy::unreachable_due(since, now, &rules, epoch_seconds) {
                Ok(Verdict::Unreachable(why))
            } else {
                Ok(Verdict::UnreachableGrace(why))
            }
        }
    }
}

/// One shard's health as [`repair`] judged it.
#[derive(Debug, Clone)]
pub struct ShardHealth {
    /// The shard as it was before the repair.
    pub shard: ShardFile,
    /// Its verdict.
    pub verdict: Verdict,
}

/// A shard [`repair`] placed anew.
#[derive(Debug, Clone)]
pub struct Replaced {
    /// Shard index.
    pub shard: u16,
    /// Its new deal.
    pub deal: u64,
    /// Its new provider.
    pub provider: Address,
    /// The deal it had.
    pub old_deal: u64,
    /// The provider it had.
    pub old_provider: Address,
    /// Seconds its placement took.
    pub seconds: f64,
}

/// What [`repair`] found and did.
#[derive(Debug, Clone)]
pub struct RepairReport {
    /// The file's id in the FileManifest.
    pub file_id: u64,
    /// k, data shards.
    pub k: u16,
    /// n, shards.
    pub n: u16,
    /// L, the file's length.
    pub file_bytes: u64,
    /// Every shard's health, in shard order.
    pub health: Vec<ShardHealth>,
    /// The shards that need repair (with `dry_run`, that would be repaired).
    pub bad: Vec<u16>,
    /// The shards repaired, in order; empty when nothing needed it or with `dry_run`.
    pub repaired: Vec<Replaced>,
    /// Seconds to fetch the healthy shards and rebuild (None when nothing was repaired).
    pub rebuild_seconds: Option<f64>,
    /// Seconds in all.
    pub seconds: f64,
}

/// `dpor repair --dir DIR`: checks every shard and repairs those that need it. Notes
/// (an interrupted write completed or skipped; the shards' checkpoints) go to `notes`.
///
/// # Errors
/// The file was never recorded, a `--shard` out of range, more shards to repair than
/// the code can rebuild, too few healthy shards, or a chain or node failure.
pub async fn repair(ctx: &Session, dir: &Path, opts: &RepairOptions, notes: &dyn Notes) -> anyhow::Result<RepairReport> {
    let started = Instant::now();
    let mut record = FileDir::load(dir)?;
    let file_id = record.file_id.context("the file was never recorded in the FileManifest (an unfinished `put`?)")?;
    // Stripes must agree before any shard is rebuilt from others: an interrupted write
    // is completed, or the shards it could not reach are left out of the rebuild.
    let (stale, note) = super::settle_or_skip(ctx, dir, &mut record).await?;
    if let Some(note) = note {
        notes.note(&note);
    }
    for i in &opts.shards {
        ensure!(*i < record.n, "--shard {i}: the file has shards 0..{}", record.n);
    }
    let mut health = Health::load(dir)?;
    let now = ctx.market.latest_timestamp().await?;
    let epoch_seconds = ctx.market.epoch_seconds().await?;
    let mut verdicts = Vec::new();
    for s in &record.shards {
        verdicts.push(check(ctx, s, opts, &mut health, now, epoch_seconds).await?);
    }
    health.save(dir)?;
    let bad: Vec<u16> = record.shards.iter().zip(&verdicts).filter(|(_, v)| v.needs_repair()).map(|(s, _)| s.index).collect();
    let health_of: Vec<ShardHealth> =
        record.shards.iter().zip(&verdicts).map(|(s, v)| ShardHealth { shard: s.clone(), verdict: v.clone() }).collect();
    let (k, n, file_bytes) = (record.k, record.n, record.file_bytes);
    let report = move |health: Vec<ShardHealth>, bad: Vec<u16>, repaired: Vec<Replaced>, rebuild_seconds: Option<f64>| RepairReport {
        file_id,
        k,
        n,
        file_bytes,
        health,
        bad,
        repaired,
        rebuild_seconds,
        seconds: started.elapsed().as_secs_f64(),
    };
    if bad.is_empty() || opts.dry_run {
        return Ok(report(health_of, bad, Vec::new(), None));
    }
    let lines: Vec<String> = health_of.iter().map(ShardHealth::describe).collect();
    ensure!(
        policy::can_rebuild(bad.len(), record.k, record.n),
        "{} shards need repair but a {}-of-{} file can rebuild at most {} at once from the others: {}",
        bad.len(),
        record.k,
        record.n,
        record.n - record.k,
        lines.join("; ")
    );

    // The file from k healthy shards, then every shard again with the same code.
    let fetch_started = Instant::now();
    let skip: Vec<u16> = bad.iter().chain(&stale).copied().collect::<std::collections::BTreeSet<_>>().into_iter().collect();
    let (got, _) = fetch_shards(ctx, dir, &record, &skip).await.context("rebuilding from the healthy shards")?;
    let geometry = record.geometry()?;
    let mut coder = StripeCoder::new(geometry)?;
    let refs: Vec<Option<&[u8]>> = got.iter().map(|g| g.as_deref()).collect();
    let data = coder.join_file(record.file_bytes, &refs)?;
    let rebuilt = coder.split_file(&data)?;
    // The code re-applied to the decoded file must give back every shard fetched (each
    // verified against its own deal's rootU): a check of the decoding itself.
    for (j, g) in got.iter().enumerate() {
        if let Some(g) = g {
            ensure!(
                rebuilt.get(j).map(|r| &r[..]) == Some(&g[..]),
                "shard {j} re-encoded differs from the verified shard fetched: the decoding is wrong"
            );
        }
    }
    let rebuild_secs = fetch_started.elapsed().as_secs_f64();

    let mut repaired = Vec::new();
    // Every provider that holds or held a shard of the file (the failed ones too), and
    // each new one as it is chosen: never two shards with one provider.
    let mut holders: Vec<Address> = record.shards.iter().map(|s| s.provider).collect();
    holders.extend(health.refused.iter().copied());
    for &i in &bad {
        let upload_started = Instant::now();
        let shard = rebuilt.get(i as usize).context("the code made fewer shards than the file has")?;
        let (deal, provider, state_name) = place(ctx, dir, &record, i, shard, &mut holders, &mut health, opts, notes).await?;
        let reg = ctx.market.manifest_registry(record.registry);
        reg.replace_shard(file_id, i, deal)
            .await
            .with_context(|| format!("recording deal {deal} as shard {i} of file {file_id} in the FileManifest"))?;
        let old = record.shards[i as usize].clone();
        let final_name = format!("shard-{i}.d{deal}.json");
        rename_state(dir, &state_name, &final_name)?;
        record.shards[i as usize] = ShardFile { index: i, deal, provider, state: final_name };
        record.save(dir)?;
        // Rebuilt from the new version: its part of an unfinished write is done.
        super::write::mark_replaced(dir, &mut record, i)?;
        health.unreachable_since.remove(&i);
        health.save(dir)?;
        let seconds = upload_started.elapsed().as_secs_f64();
        repaired.push(Replaced { shard: i, deal, provider, old_deal: old.deal, old_provider: old.provider, seconds });
    }
    write_manifest(dir, &record)?;
    Ok(report(health_of, bad, repaired, Some(rebuild_secs)))
}

impl ShardHealth {
    /// `shard I (deal D, provider P): VERDICT`.
    pub fn describe(&self) -> String {
        format!("shard {} (deal {}, provider {}): {}", self.shard.index, self.shard.deal, self.shard.provider, self.verdict.describe())
    }
}

/// Places shard `i` (its bytes `shard`) with a new provider: a deal opened (or the one
/// an interrupted repair left in `shard-<i>.next.json`), the shard uploaded and
/// checkpointed. Returns (deal, provider, state file name). A candidate whose node does
/// not answer is skipped; a deal its provider does not accept within a minute is
/// cancelled (the escrow comes back) and the next candidate tried, up to 3 attempts; so
/// is one whose upload fails (the node's answer failed the owner's checks, or the
/// upload broke off): its deal is left (state file `shard-<i>.d<deal>.refused.json`,
/// ended by [`end_refused_deals`] once the upload period is over) and the
/// provider added to `health.refused`. Every provider tried is added to `holders`.
#[allow(clippy::too_many_arguments)]
async fn place(
    ctx: &Session,
    dir: &Path,
    record: &FileDir,
    i: u16,
    shard: &[u8],
    holders: &mut Vec<Address>,
    health: &mut Health,
    opts: &RepairOptions,
    notes: &dyn Notes,
) -> anyhow::Result<(u64, Address, String)> {
    let name = format!("shard-{i}.next.json");
    let path = dir.join(&name);
    let old = OwnerState::load(&dir.join(&record.shards[i as usize].state)).ok();
    let num_blocks = old.as_ref().map(|o| o.num_blocks).filter(|n| *n > 0);
    let num_blocks = match num_blocks {
        Some(n) => n,
        None => record.geometry()?.stripes(record.file_bytes)?.next_power_of_two(),
    };
    let mut tried = Vec::new();
    for _attempt in 0..3 {
        let mut state = match OwnerState::load(&path) {
            Ok(s) if matches!(ctx.market.get_deal(s.deal).await?.state, DealState::Open | DealState::Active) => s,
            _ => {
                std::fs::remove_file(&path).ok();
                open_deal(ctx, record, i, dir, &name, num_blocks, holders, opts).await?
            }
        };
        if !holders.contains(&state.provider) {
            holders.push(state.provider);
        }
        if !state.uploaded {
            if let Err(e) = wait_active(&ctx.market, state.deal).await {
                // Not accepted: take the escrow back and try another provider.
                if ctx.market.get_deal(state.deal).await?.state == DealState::Open {
                    ctx.market.cancel_deal(state.deal).await.with_context(|| format!("cancelling deal {}", state.deal))?;
                }
                tried.push(format!("deal {} with {}: {e:#}", state.deal, state.provider));
                std::fs::remove_file(&path).ok();
                continue;
            }
            let node = dial(&ctx.market, state.provider, ctx.timeout).await?;
            let key = ctx.key()?.clone();
            let auth = OwnerAuth { key: &key, chain_id: state.chain_id, market: state.market, deal: state.deal };
            let result = flows::upload(&node, &auth, &mut state, shard, None).await;
            state.save(&path)?;
            if let Err(e) = result {
                tried.push(format!("uploading shard {i} to deal {} with {}: {e:#}", state.deal, state.provider));
                rename_state(dir, &name, &format!("shard-{i}.d{}.refused.json", state.deal))?;
                if !health.refused.contains(&state.provider) {
                    health.refused.push(state.provider);
                }
                health.save(dir)?;
                continue;
            }
        }
        if state.digest_version == 0 {
            checkpoint::checkpoint(&ctx.with_state(path.clone()), notes)
                .await
                .with_context(|| format!("checkpointing shard {i} (deal {})", state.deal))?;
        }
        return Ok((state.deal, state.provider, name));
    }
    anyhow::bail!("no provider accepted shard {i} in 3 attempts: {}", tried.join("; "))
}

/// Opens a deal for shard `i` with the cheapest registered provider not in `holders`
/// whose node answers, with `put`'s own code (`super::open_shard_deal`); its owner
/// state is written at `dir/name`.
#[allow(clippy::too_many_arguments)]
async fn open_deal(
    ctx: &Session,
    record: &FileDir,
    i: u16,
    dir: &Path,
    name: &str,
    num_blocks: u64,
    holders: &mut Vec<Address>,
    opts: &RepairOptions,
) -> anyhow::Result<OwnerState> {
    loop {
        let chosen = pick_providers(&ctx.market, 1, num_blocks, opts.terms.max_price, opts.terms.min_collateral, holders)
            .await
            .with_context(|| format!("choosing a new provider for shard {i}"))?;
        let (provider, price) = chosen[0];
        holders.push(provider);
        if dial(&ctx.market, provider, ctx.timeout).await.is_err() {
            continue; // its node does not answer: not a home for the shard
        }
        super::open_shard_deal(ctx, dir, name, provider, price, num_blocks, record.block_bytes, &opts.terms, false)
            .await
            .with_context(|| format!("opening a deal for shard {i} with {provider}"))?;
        return OwnerState::load(&dir.join(name));
    }
}

/// Ends the deals a repair left behind in `dir` (`shard-<i>.d<deal>.refused.json`: the
/// provider accepted, then the upload failed the owner's checks or broke off, and the
/// shard went to another provider; see [`place`]). Left alone, such a deal holds the
/// provider's capacity and the owner's escrow for its whole term and, while its provider
/// commits nothing, costs a `markMissed` every epoch (docs/SIMULATION.md, the 100-node
/// week). Once `uploadSeconds` have passed since its acceptance with no digest posted,
/// `exitBeforeUpload` closes it (the provider is paid the epochs it held the capacity,
/// the rest of the escrow comes back); a deal still Open is cancelled; one already ended
/// needs nothing. Its state file is then renamed `shard-<i>.d<deal>.ended.json`.
/// Returns the deals closed or cancelled now.
///
/// # Errors
/// `dir` or a state file cannot be read, or a chain call fails (the rest wait for the
/// next call).
pub async fn end_refused_deals(ctx: &Session, dir: &Path) -> anyhow::Result<Vec<u64>> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .with_context(|| format!("cannot list {}", dir.display()))?
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.starts_with("shard-") && n.ends_with(".refused.json"))
        .collect();
    let mut ended = Vec::new();
    if names.is_empty() {
        return Ok(ended);
    }
    names.sort();
    let upload_seconds = ctx.market.params().await?.upload_seconds;
    let now = ctx.market.latest_timestamp().await?;
    for name in names {
        let state = OwnerState::load(&dir.join(&name))?;
        let deal = ctx.market.get_deal(state.deal).await?;
        match deal.state {
            DealState::Active if deal.has_digest() => continue, // never co-signed by this owner: left for a person to look at
            DealState::Active if now < deal.accepted_at.saturating_add(upload_seconds) => continue,
            DealState::Active => {
                ctx.market.exit_before_upload(state.deal).await.with_context(|| format!("exitBeforeUpload of deal {}", state.deal))?;
                ended.push(state.deal);
            }
            DealState::Open => {
                ctx.market.cancel_deal(state.deal).await.with_context(|| format!("cancelling deal {}", state.deal))?;
                ended.push(state.deal);
            }
            _ => {}
        }
        rename_state(dir, &name, &name.replace(".refused.json", ".ended.json"))?;
    }
    Ok(ended)
}

/// Renames a shard's state file and its sidecars (`.sigma`, `.recent`, the checksum
/// sidecars `.sigma.<name>`, which the state names by their suffix). Crash-safe: the
/// sidecars are linked under the new name first, the state file renamed, then the old
/// names removed; a crash leaves either state whole (and at worst stray files).
fn rename_state(dir: &Path, from: &str, to: &str) -> anyhow::Result<()> {
    let mut sidecars: Vec<(PathBuf, PathBuf)> = crate::owner_state::sigma_sidecars(&dir.join(from))
        .into_iter()
        .map(|(name, a)| (a, dir.join(format!("{to}.sigma.{name}"))))
        .collect();
    for ext in [".sigma", ".recent"] {
        let a = dir.join(format!("{from}{ext}"));
        if a.exists() {
            sidecars.push((a, dir.join(format!("{to}{ext}"))));
        }
    }
    for (a, b) in &sidecars {
        let _ = std::fs::remove_file(b);
        std::fs::hard_link(a, b).or_else(|_| std::fs::copy(a, b).map(|_| ())).with_context(|| format!("cannot link {}", a.display()))?;
    }
    let a = dir.join(from);
    if a.exists() {
        std::fs::rename(&a, dir.join(to)).with_context(|| format!("cannot rename {}", a.display()))?;
    }
    for (a, _) in &sidecars {
        let _ = std::fs::remove_file(a);
    }
    Ok(())
}

/// Rewrites `DIR/manifest.bin` from the shard states (deals and digest versions).
fn write_manifest(dir: &Path, record: &FileDir) -> anyhow::Result<()> {
    let mut entries = Vec::new();
    for s in &record.shards {
        let state = OwnerState::load(&dir.join(&s.state))?;
        entries.push(ShardEntry { deal_id: s.deal, digest_version: state.digest_version });
    }
    let manifest = Manifest::new(record.file_bytes, record.geometry()?, entries)?;
    std::fs::write(dir.join("manifest.bin"), manifest.to_bytes()).context("writing manifest.bin")
}
