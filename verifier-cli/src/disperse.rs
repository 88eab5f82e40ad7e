//! The dispersal commands (`dpor put`, `get`, `file-write`, `file-checkpoint`, `fsck`,
//! `recover`, `repair`): their arguments and output. What they do is the library's
//! `dpor_client::disperse` (a file k-of-n over n providers' deals; see
//! docs/ARCHITECTURE.md, "Dispersal").

use crate::context::Ctx;
use crate::output::{Output, Stderr};
use crate::owner::commands::checkpoint_output;
use alloy_primitives::Address;
use anyhow::{ensure, Context};
use clap::Subcommand;
use dpor_client::disperse::{self as lib, repair::RepairOptions};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::time::Instant;

pub use dpor_client::disperse::{dispersed_shard, FileDir, ShardFile, LOCAL_MANIFEST};

/// Dispersal commands.
#[derive(Debug, Subcommand)]
pub enum DisperseCommand {
    /// Disperse FILE k-of-n: k data + (n − k) parity shards, each an ordinary deal with
    /// a distinct registered provider; uploads, checkpoints and records the manifest on chain.
    Put {
        /// The file.
        file: PathBuf,
        /// n, providers (= shards).
        #[arg(long)]
        providers: u16,
        /// k, data shards (any k shards give the file back).
        #[arg(long)]
        data: u16,
        /// The file's directory (shard states, manifest); must not hold a file yet.
        #[arg(long, default_value = "dpor-file")]
        dir: PathBuf,
        /// The FileManifest registry (default: the --deployment file's, else its address
        /// on a fresh local anvil).
        #[arg(long, env = "DPOR_MANIFEST")]
        manifest: Option<Address>,
        /// The terms of every shard's deal.
        #[command(flatten)]
        terms: DealTerms,
    },
    /// Download a dispersed file from any k of its shards (k asked in parallel, data
    /// shards first, another for each that fails or is slow; every block verified) into OUT.
    Get {
        /// Output file.
        out: PathBuf,
        /// The file's directory (as given to `put`).
        #[arg(long, default_value = "dpor-file")]
        dir: PathBuf,
    },
    /// Write bytes of a dispersed file: DATA (a file, or -) at --offset, within the
    /// file's length. In every stripe touched, the data shards' blocks and all parity
    /// blocks are written (dpor batched writes on each shard's deal); the write is saved
    /// as an intent first, so an interrupted one is completed by the next command. The
    /// shards' new digests are posted by `file-checkpoint`. See `dpor_client::disperse::write`.
    FileWrite {
        /// The bytes to write (a file, or - for stdin).
        data: PathBuf,
        /// Byte offset in the file.
        #[arg(long, value_name = "BYTES")]
        offset: u64,
        /// The file's directory (as given to `put`).
        #[arg(long, default_value = "dpor-file")]
        dir: PathBuf,
    },
    /// Checkpoint every shard written since its last checkpoint: each posts its
    /// dual-signed digest on chain (the single-deal `checkpoint`).
    FileCheckpoint {
        /// The file's directory (as given to `put`).
        #[arg(long, default_value = "dpor-file")]
        dir: PathBuf,
    },
    /// Rebuild the owner's state of a dispersed file on a fresh machine from the key
    /// alone: the FileManifest and the deals' digests on chain, the providers' nodes.
    /// See `dpor_client::disperse::recover`.
    Recover {
        /// The new directory for the file's state (must not hold one).
        #[arg(long, default_value = "dpor-file")]
        dir: PathBuf,
        /// The file's id in the FileManifest (default: the key's only file).
        #[arg(long)]
        file_id: Option<u64>,
        /// The FileManifest registry (default: the --deployment file's, else its address
        /// on a fresh local anvil).
        #[arg(long, env = "DPOR_MANIFEST")]
        manifest: Option<Address>,
    },
    /// Complete an interrupted write across shards (any other command on the file does
    /// it first as well), and report the file's state.
    Fsck {
        /// The file's directory (as given to `put`).
        #[arg(long, default_value = "dpor-file")]
        dir: PathBuf,
    },
    /// Check every shard of a dispersed file and repair those that no longer protect it
    /// (deal ended, faults counted, node unreachable past a grace period, or named with
    /// --shard): each is rebuilt from k others and placed with a new provider under a new
    /// deal, and the on-chain manifest follows. See `dpor_client::disperse::repair`.
    Repair {
        /// The file's directory (as given to `put`).
        #[arg(long, default_value = "dpor-file")]
        dir: PathBuf,
        /// Repair this shard whatever its health (repeatable).
        #[arg(long = "shard")]
        shards: Vec<u16>,
        /// Faults a shard's deal may count and still be healthy.
        #[arg(long, default_value_t = 0)]
        max_faults: u16,
        /// Epochs (chain time) a node may stay unreachable before its shard is repaired.
        #[arg(long, default_value_t = 0)]
        unreachable_epochs: u64,
        /// Only report each shard's health.
        #[arg(long)]
        dry_run: bool,
        /// The terms of the new deals.
        #[command(flatten)]
        terms: DealTerms,
    },
}

/// The terms of the deals `put` and `repair` open, one per shard.
#[derive(Debug, Clone, clap::Args)]
pub struct DealTerms {
    /// Only providers asking at most this price per block per epoch (token base units).
    #[arg(long)]
    pub max_price: Option<u128>,
    /// Only providers locking at least this collateral per block (token base units).
    #[arg(long)]
    pub min_collateral: Option<u128>,
    /// λ, audit samples per run, for every shard's deal.
    #[arg(long, default_value_t = 128)]
    pub lambda: u16,
    /// K, whole coded blocks per epoch proof (1..8).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u8).range(1..=8))]
    pub samples: u8,
    /// Term in epochs of every deal.
    #[arg(long, default_value_t = 100)]
    pub epochs: u32,
    /// Local chain only: mint each deal's escrow with the test token first.
    #[arg(long)]
    pub mint: bool,
}

impl From<DealTerms> for lib::DealTerms {
    fn from(t: DealTerms) -> Self {
        Self {
            max_price: t.max_price,
            min_collateral: t.min_collateral,
            lambda: t.lambda,
            samples: t.samples,
            epochs: t.epochs,
            mint: t.mint,
        }
    }
}

/// Runs a dispersal command.
pub async fn run(ctx: &Ctx, cmd: DisperseCommand) -> anyhow::Result<Output> {
    match cmd {
        DisperseCommand::Put { file, providers, data, dir, manifest, terms } => {
            let registry = ctx.manifest_address(manifest)?;
            let p = lib::put(ctx, &file, providers, data, &dir, registry, &terms.into(), &Stderr).await?;
            Ok(put_output(&p, &dir))
        }
        DisperseCommand::Get { out, dir } => Ok(get_output(&lib::get(ctx, &dir, &out, &Stderr).await?, &out)),
        DisperseCommand::FileWrite { data, offset, dir } => file_write(ctx, &dir, offset, &data).await,
        DisperseCommand::FileCheckpoint { dir } => {
            let posted = lib::file_checkpoint(ctx, &dir, &Stderr).await?;
            let posted: Vec<_> = posted
                .into_iter()
                .map(|(i, deal, done)| json!({"shard": i, "deal": deal, "checkpoint": checkpoint_output(done).json}))
                .collect();
            Ok(Output::new(
                format!(
                    "posted the digests of {} shard(s): {:?}",
                    posted.len(),
                    posted.iter().map(|p| p["shard"].clone()).collect::<Vec<_>>()
                ),
                json!({"checkpoints": posted}),
            ))
        }
        DisperseCommand::Fsck { dir } => {
            let f = lib::fsck(ctx, &dir).await?;
            Ok(Output::new(
                format!(
                    "{}; shards to checkpoint: {:?}; shards with an unfinished single-deal request (settled by their next command): {:?}",
                    f.completed.clone().unwrap_or_else(|| "no interrupted write across shards".into()),
                    f.dirty,
                    f.shards_pending
                ),
                json!({"completed": f.completed, "dirty": f.dirty, "shards_pending": f.shards_pending}),
            ))
        }
        DisperseCommand::Recover { dir, file_id, manifest } => {
            let r = lib::recover::recover(ctx, &dir, ctx.manifest_address(manifest)?, file_id).await?;
            Ok(Output::new(
                format!(
                    "recovered file {} ({} bytes, {}-of-{}) into {}: {} shard states from the chain (manifest, deals, digests) and the providers ({} coded blocks fetched for the cached checksums), {:.2} s",
                    r.file_id,
                    r.record.file_bytes,
                    r.record.k,
                    r.record.n,
                    dir.display(),
                    r.record.shards.len(),
                    r.coded_blocks_fetched,
                    r.seconds
                ),
                json!({"file_id": r.file_id, "file_bytes": r.record.file_bytes, "k": r.record.k, "n": r.record.n, "deals": r.record.shards.iter().map(|s| s.deal).collect::<Vec<_>>(), "coded_blocks_fetched": r.coded_blocks_fetched, "seconds": r.seconds, "dir": dir}),
            ))
        }
        DisperseCommand::Repair { dir, shards, max_faults, unreachable_epochs, dry_run, terms } => {
            let opts = RepairOptions { shards, max_faults, unreachable_epochs, dry_run, terms: terms.into() };
            repair(ctx, &dir, &opts).await
        }
    }
}

/// What `put` prints.
fn put_output(p: &lib::Put, dir: &Path) -> Output {
    let record = &p.record;
    let (k, n, file_id, num_blocks) = (record.k, record.n, p.file_id, p.num_blocks);
    let deals: Vec<u64> = record.shards.iter().map(|s| s.deal).collect();
    Output::new(
        format!(
            "dispersed {} bytes {k}-of-{n} as file {file_id} in {}: {} shards of {} blocks (N = {num_blocks}), deals {:?} with {} providers; encode {:.2} s, deals {:.2} s, parallel upload {:.2} s ({:.1} MB/s of file), total {:.2} s",
            record.file_bytes,
            dir.display(),
            n,
            p.stripes,
            deals,
            n,
            p.encode_seconds,
            p.deals_seconds,
            p.upload_seconds,
            record.file_bytes as f64 / p.upload_seconds / 1e6,
            p.seconds
        ),
        json!({
            "file_id": file_id, "k": k, "n": n, "file_bytes": record.file_bytes, "stripes": p.stripes,
            "num_blocks": num_blocks, "deals": deals,
            "providers": record.shards.iter().map(|s| s.provider).collect::<Vec<_>>(),
            "encode_seconds": p.encode_seconds, "upload_seconds": p.upload_seconds, "seconds": p.seconds,
            "dir": dir,
        }),
    )
}

/// What `get` prints.
fn get_output(g: &lib::Got, out: &Path) -> Output {
    let used = &g.shards_used;
    Output::new(
        format!(
            "downloaded {} bytes from shards {used:?} of {} ({} parity) in {:.2} s ({:.1} MB/s; decode {:.3} s), every block verified, into {}{}",
            g.bytes,
            g.n,
            g.parity_used,
            g.seconds,
            g.bytes as f64 / g.seconds / 1e6,
            g.decode_seconds,
            out.display(),
            if g.failed.is_empty() { String::new() } else { format!("; failed: {}", g.failed.join("; ")) }
        ),
        json!({"bytes": g.bytes, "shards_used": used, "failed": g.failed, "seconds": g.seconds, "decode_seconds": g.decode_seconds, "out": out}),
    )
}

async fn file_write(ctx: &Ctx, dir: &Path, offset: u64, data: &Path) -> anyhow::Result<Output> {
    let started = Instant::now();
    let bytes = if data.as_os_str() == "-" {
        let mut v = Vec::new();
        std::io::Read::read_to_end(&mut std::io::stdin(), &mut v)?;
        v
    } else {
        std::fs::read(data).with_context(|| format!("cannot read {}", data.display()))?
    };
    ensure!(!bytes.is_empty(), "{} is empty: nothing to write", data.display());
    let w = lib::file_write(ctx, dir, offset, &bytes, &Stderr).await?;
    let secs = started.elapsed().as_secs_f64();
    Ok(Output::new(
        format!(
            "wrote {} bytes at offset {offset}: {} blocks on shards {:?}; run `dpor file-checkpoint --dir {}` to post their digests ({:.2} s)",
            bytes.len(),
            w.blocks_written,
            w.shards_written,
            dir.display(),
            secs
        ),
        json!({"bytes": bytes.len(), "offset": offset, "shards_written": w.shards_written, "blocks_written": w.blocks_written, "dirty": w.dirty, "seconds": secs}),
    ))
}

/// `dpor repair` (and each pass of `dpor watch --repair`): the library's repair and
/// its output.
pub async fn repair(ctx: &Ctx, dir: &Path, opts: &RepairOptions) -> anyhow::Result<Output> {
    Ok(repair_output(&lib::repair::repair(ctx, dir, opts, &Stderr).await?))
}

/// A repair's report ([`lib::repair::RepairReport`]) as `dpor repair` prints it (and
/// `dpor watch --repair` logs it).
pub fn repair_output(r: &lib::repair::RepairReport) -> Output {
    let mut lines: Vec<String> = r.health.iter().map(|h| h.describe()).collect();
    let health_json: Vec<_> = r
        .health
        .iter()
        .map(|h| {
            let s = &h.shard;
            json!({"shard": s.index, "deal": s.deal, "provider": s.provider, "verdict": h.verdict.describe(), "repair": h.verdict.needs_repair()})
        })
        .collect();
    let Some(rebuild_secs) = r.rebuild_seconds else {
        let bad = &r.bad;
        lines.push(if bad.is_empty() { "nothing to repair".into() } else { format!("would repair shards {bad:?} (--dry-run)") });
        return Output::new(lines.join("\n"), json!({"file_id": r.file_id, "shards": health_json, "repaired": [], "seconds": r.seconds}));
    };
    let mut repaired = Vec::new();
    for p in &r.repaired {
        lines.push(format!(
            "shard {}: rebuilt from {} others and placed with {} under deal {} (was deal {} with {}); {:.2} s",
            p.shard, r.k, p.provider, p.deal, p.old_deal, p.old_provider, p.seconds
        ));
        repaired.push(json!({"shard": p.shard, "deal": p.deal, "provider": p.provider, "old_deal": p.old_deal, "old_provider": p.old_provider, "seconds": p.seconds}));
    }
    let secs = r.seconds;
    lines.push(format!(
        "file {}: {} shard(s) repaired in {secs:.2} s (fetch and rebuild {rebuild_secs:.2} s); the manifest on chain follows",
        r.file_id,
        repaired.len()
    ));
    Output::new(
        lines.join("\n"),
        json!({"file_id": r.file_id, "shards": health_json, "repaired": repaired, "rebuild_seconds": rebuild_secs, "seconds": secs, "file_bytes": r.file_bytes}),
    )
}
