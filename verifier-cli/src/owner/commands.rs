//! The owner's commands: open a deal, upload, read, write (blocks or a byte range),
//! sync, checkpoint, download, extract, status. Each loads the owner state, talks to the chain and the node,
//! verifies, saves the state and reports.

use super::checkpoint::{self, Checkpointed};
use super::{deal, edit, extract, flows, recover};
use crate::context::Ctx;
use crate::node_client::OwnerAuth;
use crate::output::Output;
use crate::output::Stderr;
use crate::owner_state::{OwnerState, DEFAULT_BLOCK_CACHE_LEVELS, DEFAULT_CACHE_LEVELS};
use alloy_primitives::{Address, U256};
use anyhow::{bail, ensure, Context};
use clap::Subcommand;
use serde_json::json;
use std::io::Read;
use std::path::PathBuf;
use std::time::Instant;

/// Owner commands.
#[derive(Debug, Subcommand)]
pub enum OwnerCommand {
    /// Deals: open one (escrowing payment) with a provider.
    #[command(subcommand)]
    Deal(DealCommand),
    /// Upload FILE to the deal's node and verify the node's U and C (§6 Init).
    Upload {
        /// The file.
        file: PathBuf,
    },
    /// Read block I, verified against rootU and its checksum; writes it to --out or stdout.
    Read {
        /// Block index.
        index: u64,
        /// Output file (default: stdout).
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Write block INDEX from FILE (or - for stdin; at most β bytes, zero-padded), verifying the node's rebuild (§5.4).
    /// Several `INDEX FILE` pairs, or --batch, send one batch of writes: the new runs
    /// are checked at the next `checkpoint` (deferred checks, issue 11).
    Write {
        /// `INDEX FILE` pairs (FILE may be - for stdin once).
        #[arg(num_args = 0..)]
        pairs: Vec<String>,
        /// A file of `INDEX FILE` lines (blank lines and `#` comments skipped), written
        /// as batches (paths relative to that file's folder).
        #[arg(long, conflicts_with = "offset")]
        batch: Option<PathBuf>,
        /// Byte-range write: put the bytes of the one FILE given (or -) at this byte
        /// offset of the file, across block boundaries, keeping the other bytes of the
        /// edge blocks; the file grows if the range ends past it (up to N·β bytes).
        #[arg(long, value_name = "BYTES")]
        offset: Option<u64>,
    },
    /// Make the stored file equal to NEWFILE, writing only the blocks that differ
    /// (compared by chunk-tree root against the node's U leaves, checked against
    /// rootU); the file grows or shrinks within the deal's N·β bytes.
    Sync {
        /// The new content of the file.
        file: PathBuf,
    },
    /// Resize the deal to N' blocks (App. A.3): the node rebuilds C for N' (new blocks
    /// are zero; a shrink drops the blocks past N'), the owner verifies it like a
    /// C-rebuild, then both parties sign the new size and terms and `resizeDeal`
    /// adjusts price, escrow and collateral on chain. Terms default to the deal's
    /// per-block price and collateral scaled to N'. Everything the market and the
    /// provider check is checked first, before the node resizes; a shard of a
    /// dispersed file is refused. The terms are kept until the resize is on chain.
    Resize {
        /// N', blocks (a power of two).
        #[arg(long, conflicts_with = "file", required_unless_present = "file")]
        blocks: Option<u64>,
        /// Size the deal for this file (N' = blocks it needs, rounded up to a power of two).
        #[arg(long)]
        file: Option<PathBuf>,
        /// New price per epoch for the whole deal, in token base units.
        #[arg(long)]
        price_per_epoch: Option<u128>,
        /// New collateral of the deal, in token base units.
        #[arg(long)]
        collateral: Option<u128>,
        /// Local chain only: mint the escrow increase with the test token first.
        #[arg(long)]
        mint: bool,
    },
    /// Checkpoint: get the provider's signature on the current digest and post the dual-signed digest on chain.
    /// While the deal on chain still has the old N (an interrupted `resize`), it submits the resize instead,
    /// with the terms the resize was asked with.
    Checkpoint,
    /// Download the whole file (U), verified against rootU, into OUT.
    Download {
        /// Output file.
        out: PathBuf,
    },
    /// Recover the file from coded blocks only (C and H), decoding what is missing, into OUT.
    Extract {
        /// Output file.
        out: PathBuf,
    },
    /// Show the owner's state, the node's view and the deal on chain.
    Status,
}

/// `deal` subcommands.
#[derive(Debug, Subcommand)]
pub enum DealCommand {
    /// Open a deal with a provider: escrows price·N·epochs tokens; writes the owner state file.
    Open {
        /// The provider's account.
        #[arg(long)]
        provider: Address,
        /// Size the deal for this file (N = blocks it needs, rounded up to a power of two).
        #[arg(long, conflicts_with = "blocks")]
        file: Option<PathBuf>,
        /// N, blocks (a power of two).
        #[arg(long)]
        blocks: Option<u64>,
        /// β, bytes per block (β·K at most 65536: an epoch proof carries K whole
        /// coded blocks in one transaction).
        #[arg(long, default_value_t = 4096)]
        block_bytes: u32,
        /// λ, audit samples per run.
        #[arg(long, default_value_t = 128)]
        lambda: u16,
        /// K, whole coded blocks in each epoch's on-chain proof (1..8; docs/CONTRACTS.md:
        /// K = 1 meets the 250k-gas target, each more block costs ≈ 200k gas).
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u8).range(1..=8))]
        samples: u8,
        /// Duration in epochs.
        #[arg(long, default_value_t = 100)]
        epochs: u32,
        /// Price per block per epoch in token base units (default: the provider's ask).
        #[arg(long)]
        price: Option<u128>,
        /// The least collateral per block (token base units) you accept: the deal
        /// cannot be accepted at a lower rate (default: the provider's current rate, so
        /// a rate cut between now and acceptance fails the deal instead of robbing you).
        #[arg(long)]
        min_collateral: Option<u128>,
        /// Local chain only: mint the escrow with the test token first.
        #[arg(long)]
        mint: bool,
        /// Smallest levels whose checksums stay in the state file.
        #[arg(long, default_value_t = DEFAULT_CACHE_LEVELS)]
        cache_levels: u32,
        /// Smallest levels whose blocks the owner keeps (App. A.1, in `<state>.recent`):
        /// batches' runs of those levels are recomputed at checkpoint time instead of
        /// being spot-checked (at most 2^L − 1 blocks kept).
        #[arg(long, default_value_t = DEFAULT_BLOCK_CACHE_LEVELS)]
        block_cache_levels: u32,
        /// Replace an existing state file.
        #[arg(long)]
        force: bool,
    },
    /// Leave the deal early (owner or provider). Without --before-upload:
    /// `requestExit`, the term ends after the current epoch plus the market's notice;
    /// epochs until then still have to be proven. With --before-upload:
    /// `exitBeforeUpload`, for a deal that never got a digest once the upload period
    /// has passed (no fault; the provider is paid the epochs the deal held its
    /// capacity, the rest of the escrow comes back).
    Exit {
        /// The deal (default: the state file's).
        #[arg(long)]
        deal: Option<u64>,
        /// End a deal that never got a digest (after acceptance + uploadSeconds).
        #[arg(long)]
        before_upload: bool,
    },
}

fn hex(b: &[u8]) -> String {
    format!("0x{}", ::hex::encode(b))
}

/// Runs an owner command.
pub async fn run(ctx: &Ctx, cmd: OwnerCommand) -> anyhow::Result<Output> {
    match cmd {
        OwnerCommand::Deal(DealCommand::Open {
            provider,
            file,
            blocks,
            block_bytes,
            lambda,
            samples,
            epochs,
            price,
            min_collateral,
            mint,
            cache_levels,
            block_cache_levels,
            force,
        }) => {
            let req = deal::OpenDeal {
                provider,
                file,
                blocks,
                block_bytes,
                lambda,
                samples,
                epochs,
                price,
                min_collateral,
                mint,
                cache_levels,
                block_cache_levels,
                force,
            };
            let o = deal::open(ctx, &req).await?;
            Ok(Output::new(
                format!(
                    "deal {} opened with provider {}: {} blocks of {} bytes, {} epochs, escrow {} (state in {})",
                    o.deal,
                    o.provider,
                    o.num_blocks,
                    o.block_bytes,
                    o.epochs,
                    o.escrow,
                    ctx.state_path.display()
                ),
                json!({"deal": o.deal, "provider": o.provider, "num_blocks": o.num_blocks, "block_bytes": o.block_bytes, "epochs": o.epochs, "escrow": o.escrow.to_string(), "state": ctx.state_path}),
            ))
        }
        OwnerCommand::Deal(DealCommand::Exit { deal, before_upload }) => {
            let deal = match deal {
                Some(d) => d,
                None => OwnerState::load(&ctx.state_path)?.deal,
            };
            if before_upload {
                let tx = ctx.market.exit_before_upload(deal).await.context("exitBeforeUpload")?;
                Ok(Output::new(
                    format!("deal {deal} ended before upload: the provider is paid the epochs it held the capacity, the rest of the escrow goes back to the owner, the collateral to the provider (tx {tx})"),
                    json!({"deal": deal, "exit": "before-upload", "tx": tx}),
                ))
            } else {
                let n = ctx.market.request_exit(deal).await.context("requestExit")?;
                let d = ctx.market.get_deal(deal).await?;
                let params = ctx.market.params().await?;
                let end = params.last_deadline(&d);
                Ok(Output::new(
                    format!(
                        "deal {deal} will end after epoch {} (its last deadline is at timestamp {end}); prove until then",
                        n.saturating_sub(1)
                    ),
                    json!({"deal": deal, "exit": "requested", "num_epochs": n, "last_deadline": end}),
                ))
            }
        }
        OwnerCommand::Upload { file } => {
            let mut state = OwnerState::load(&ctx.state_path)?;
            let data = std::fs::read(&file).with_context(|| format!("cannot read {}", file.display()))?;
            let node = ctx.node_for_deal(state.deal).await?;
            let key = ctx.key()?;
            let auth = OwnerAuth { key, chain_id: state.chain_id, market: state.market, deal: state.deal };
            // Wait (briefly) for the provider to accept the deal.
            deal::wait_active(&ctx.market, state.deal).await?;
            settle(&node, &auth, &mut state).await?;
            let bar = ctx.bar("upload");
            let started = Instant::now();
            let result = flows::upload(&node, &auth, &mut state, &data, Some(&bar)).await;
            bar.finish_and_clear();
            state.save(&ctx.state_path)?;
            let r = result?;
            let secs = started.elapsed().as_secs_f64();
            let (sent, received) = node.traffic();
            Ok(Output::new(
                format!(
                    "uploaded {} bytes as {} blocks in {:.2} s ({:.1} MB/s); rootU {} verified, C spot-checked at {} positions (rootC {})",
                    r.file_bytes,
                    r.num_blocks,
                    secs,
                    r.file_bytes as f64 / secs / 1e6,
                    r.root_u,
                    r.spot_checked,
                    r.root_c
                ),
                json!({"report": r, "seconds": secs, "bytes_sent": sent, "bytes_received": received}),
            ))
        }
        OwnerCommand::Read { index, out } => {
            let mut state = OwnerState::load(&ctx.state_path)?;
            let node = ctx.node_for_deal(state.deal).await?;
            settle_if_pending(ctx, &node, &mut state).await?;
            let block = flows::read(&node, &state, index).await?;
            match out {
                Some(p) => {
                    std::fs::write(&p, &block).with_context(|| format!("cannot write {}", p.display()))?;
                    Ok(Output::new(
                        format!(
                            "block {index} ({} bytes) verified against rootU and its checksum, written to {}",
                            block.len(),
                            p.display()
                        ),
                        json!({"index": index, "bytes": block.len(), "out": p}),
                    ))
                }
                None if ctx.json => Ok(Output::new("", json!({"index": index, "block": hex(&block)}))),
                None => {
                    use std::io::Write;
                    std::io::stdout().write_all(&block)?;
                    Ok(Output::new("", json!({})))
                }
            }
        }
        OwnerCommand::Write { pairs, batch: _, offset: Some(offset) } => {
            ensure!(pairs.len() == 1, "with --offset, give one FILE (or -): the bytes to write there");
            let data = read_input(std::path::Path::new(&pairs[0]))?;
            ensure!(!data.is_empty(), "{} is empty: nothing to write", pairs[0]);
            edit_command(ctx, Edit::Range(offset, data)).await
        }
        OwnerCommand::Sync { file } => {
            let data = std::fs::read(&file).with_context(|| format!("cannot read {}", file.display()))?;
            edit_command(ctx, Edit::Sync(data)).await
        }
        OwnerCommand::Write { pairs, batch, offset: None } => {
            let mut state = OwnerState::load(&ctx.state_path)?;
            let writes = write_args(&pairs, batch.as_deref())?;
            let node = ctx.node_for_deal(state.deal).await?;
            let key = ctx.key()?;
            let auth = OwnerAuth { key, chain_id: state.chain_id, market: state.market, deal: state.deal };
            settle(&node, &auth, &mut state).await?;
            if let [(index, data)] = writes.as_slice() {
                let index = *index;
                let result = flows::write(&node, &auth, &mut state, index, data).await;
                state.save(&ctx.state_path)?;
                let r = result?;
                let (sent, received) = node.traffic();
                return Ok(Output::new(
                    format!(
                        "wrote block {index}: rebuilt {} ({}), spot-checked {} positions; rootU {}; {} bytes sent, {} received",
                        r.rebuilt, r.run, r.spot_checked, r.root_u, sent, received
                    ),
                    json!({"report": r, "bytes_sent": sent, "bytes_received": received, "write_count": state.write_count, "rebuild_count": state.rebuild_count}),
                ));
            }
            let bar = ctx.bar("write");
            bar.set_length(writes.len() as u64);
            let mut reports = Vec::new();
            let per = super::batch::max_batch(state.block_bytes as usize).max(1);
            let mut result = Ok(());
            for chunk in writes.chunks(per) {
                // Each commit is saved with the next batch's intent; `state.save` below
                // writes the last (also after an error).
                match super::batch::write_batch_deferred(&node, &auth, &mut state, chunk).await {
                    Ok(r) => reports.push(r),
                    Err(e) => {
                        result = Err(e);
                        break;
                    }
                }
                bar.inc(chunk.len() as u64);
            }
            bar.finish_and_clear();
            state.save(&ctx.state_path)?;
            result?;
            let (sent, received) = node.traffic();
            let runs: Vec<String> = reports.last().map(|r| r.runs.clone()).unwrap_or_default();
            Ok(Output::new(
                format!(
                    "wrote {} blocks in {} batch(es); rootU {}; new runs {} are checked at the next checkpoint; {} bytes sent, {} received",
                    writes.len(),
                    reports.len(),
                    state.root_u,
                    runs.join(", "),
                    sent,
                    received
                ),
                json!({"reports": reports, "bytes_sent": sent, "bytes_received": received, "write_count": state.write_count, "rebuild_count": state.rebuild_count}),
            ))
        }
        OwnerCommand::Resize { blocks, file, price_per_epoch, collateral, mint } => {
            let mut state = OwnerState::load(&ctx.state_path)?;
            let key = ctx.key()?;
            if let Some(why) = crate::disperse::dispersed_shard(&state, key, &ctx.state_path) {
                bail!(
                    "deal {} is a shard of a dispersed file ({why}): its size is the FileManifest's, and resizing one shard by hand is not supported; `dpor repair` moves a shard to a new deal",
                    state.deal
                );
            }
            let target = match (blocks, file) {
                (Some(b), _) => b,
                (None, Some(f)) => {
                    let len = std::fs::metadata(&f).with_context(|| format!("cannot read {}", f.display()))?.len();
                    len.div_ceil(u64::from(state.block_bytes)).max(1).next_power_of_two()
                }
                (None, None) => bail!("give --blocks or --file"),
            };
            ensure!(state.uploaded, "upload the file first");
            // Everything the market and the node will check, before the node resizes
            // (issue 21 #4): a resize that cannot land on chain is not started.
            let onchain = ctx.market.get_deal(state.deal).await?;
            ensure!(
                !(onchain.num_blocks == target && state.num_blocks == target),
                "deal {} already has N = {target} blocks, on chain and in the owner state",
                state.deal
            );
            if onchain.num_blocks == target {
                // Back to the size on chain before an unfinished resize landed: the node
                // only (nothing to post).
                let node = ctx.node_for_deal(state.deal).await?;
                let auth = OwnerAuth { key, chain_id: state.chain_id, market: state.market, deal: state.deal };
                let r = super::resize::resize(&node, &auth, &mut state, target).await;
                state.save(&ctx.state_path)?;
                let r = r?;
                return Ok(Output::new(
                    format!(
                        "deal {}: the node's copy is back at N = {target} blocks, the size on chain (C rebuilt: {})",
                        state.deal, r.run
                    ),
                    json!({"deal": state.deal, "from_blocks": r.from_blocks, "to_blocks": target, "node": r, "on_chain": false}),
                ));
            }
            let scaled = super::resize::ResizeTerms::scaled(onchain.price_per_epoch, onchain.collateral, onchain.num_blocks, target);
            let terms = match (price_per_epoch, collateral) {
                // A resize whose on-chain step is still to come keeps the terms it was asked with.
                (None, None) => super::resize_terms::load(&ctx.state_path, target)?.unwrap_or(scaled),
                (p, c) => super::resize::ResizeTerms {
                    price_per_epoch: p.unwrap_or(scaled.price_per_epoch),
                    collateral: c.unwrap_or(scaled.collateral),
                },
            };
            super::resize_terms::check(&ctx.market, state.deal, key.address(), target, terms, mint).await?;
            super::resize_terms::save(&ctx.state_path, target, terms)?;
            let node = ctx.node_for_deal(state.deal).await?;
            let auth = OwnerAuth { key, chain_id: state.chain_id, market: state.market, deal: state.deal };
            let started = Instant::now();
            let report = if target != state.num_blocks {
                let r = super::resize::resize(&node, &auth, &mut state, target).await;
                state.save(&ctx.state_path)?;
                Some(r?)
            } else {
                settle(&node, &auth, &mut state).await?;
                None
            };
            ensure!(state.num_blocks == target, "the node's copy has N = {} blocks, not {target}", state.num_blocks);
            if mint {
                let need = U256::from(terms.price_per_epoch).saturating_mul(U256::from(onchain.num_epochs));
                ctx.market.mint(key.address(), need).await.context("minting test tokens")?;
            }
            let chain = super::resize::resize_on_chain(&ctx.market, &node, &auth, key, &mut state, Some(terms)).await;
            state.save(&ctx.state_path)?;
            let chain = chain.with_context(|| {
                format!(
                    "the node holds N' = {target} blocks, but the resize is not on chain yet: `dpor checkpoint` posts it with the same terms ({} wei per epoch, collateral {} wei), or run `dpor resize --blocks {target}` with other --price-per-epoch / --collateral",
                    terms.price_per_epoch, terms.collateral
                )
            })?;
            let after = ctx.market.get_deal(state.deal).await?;
            let secs = started.elapsed().as_secs_f64();
            Ok(Output::new(
                format!(
                    "deal {} resized from {} to {} blocks{}; digest v{} posted with resizeDeal: price {} wei/epoch, escrow {} wei, collateral {} wei ({:.1} s)",
                    state.deal,
                    chain.from_blocks,
                    state.num_blocks,
                    report
                        .as_ref()
                        .map(|r| format!(" (C rebuilt for N' = {}: {}, spot-checked at {} positions)", r.to_blocks, r.run, r.spot_checked))
                        .unwrap_or_default(),
                    chain.version,
                    after.price_per_epoch,
                    after.escrow,
                    after.collateral,
                    secs
                ),
                json!({"deal": state.deal, "from_blocks": chain.from_blocks, "to_blocks": state.num_blocks, "node": report,
                    "version": chain.version, "digest_hash": chain.digest_hash, "price_per_epoch": after.price_per_epoch.to_string(),
                    "escrow": after.escrow.to_string(), "collateral": after.collateral.to_string(), "seconds": secs}),
            ))
        }
        OwnerCommand::Checkpoint => Ok(checkpoint_output(checkpoint::checkpoint(ctx, &Stderr).await?)),
        OwnerCommand::Download { out } => {
            let mut state = OwnerState::load(&ctx.state_path)?;
            let node = ctx.node_for_deal(state.deal).await?;
            settle_if_pending(ctx, &node, &mut state).await?;
            let bar = ctx.bar("download");
            let started = Instant::now();
            let data = flows::download(&node, &state, Some(&bar)).await;
            bar.finish_and_clear();
            // U that fails verification, or that the node refuses (a deal it quarantined
            // because its U files are damaged): the file comes from the coded runs.
            let (data, u_error) = match data {
                Ok(data) => (data, None),
                Err(e) => {
                    let why = format!("{e:#}");
                    eprintln!("dpor: downloading U failed ({why}); falling back to extraction from the coded runs");
                    let bar = ctx.bar("extract");
                    let extracted = extract::extract(&node, &state, Some(&bar)).await;
                    bar.finish_and_clear();
                    let (data, _) =
                        extracted.with_context(|| format!("downloading U failed ({why}), and so did the fallback extraction"))?;
                    (data, Some(why))
                }
            };
            std::fs::write(&out, &data).with_context(|| format!("cannot write {}", out.display()))?;
            let secs = started.elapsed().as_secs_f64();
            let human = match &u_error {
                None => format!("downloaded {} bytes in {:.2} s, every block verified against rootU, into {}", data.len(), secs, out.display()),
                Some(why) => format!(
                    "downloading U failed ({why}); extracted {} bytes from the coded runs instead in {:.2} s, verified against rootU, into {}",
                    data.len(),
                    secs,
                    out.display()
                ),
            };
            Ok(Output::new(
                human,
                json!({"bytes": data.len(), "seconds": secs, "out": out, "fallback": u_error.as_ref().map(|_| "extract"), "download_error": u_error}),
            ))
        }
        OwnerCommand::Extract { out } => {
            let mut state = OwnerState::load(&ctx.state_path)?;
            let node = ctx.node_for_deal(state.deal).await?;
            // After a rejected answer the owner extracts from its previous state, whose
            // runs the node keeps.
            match state.pending.as_ref().and_then(recover::rejected) {
                Some(why) => eprintln!("dpor: warning: {why}"),
                None => settle_if_pending(ctx, &node, &mut state).await?,
            }
            let bar = ctx.bar("extract");
            let started = Instant::now();
            let result = extract::extract(&node, &state, Some(&bar)).await;
            bar.finish_and_clear();
            let (data, runs) = result?;
            std::fs::write(&out, &data).with_context(|| format!("cannot write {}", out.display()))?;
            let secs = started.elapsed().as_secs_f64();
            let mut human = format!("extracted {} bytes from coded blocks only in {:.2} s into {}\n", data.len(), secs, out.display());
            for r in &runs {
                human.push_str(&format!(
                    "  run {:>10}: {:>7} of {:>7} coded blocks intact ({:.1}%)",
                    r.run,
                    r.intact,
                    r.size,
                    100.0 * r.intact as f64 / r.size as f64
                ));
                if r.bad_checksum > 0 || r.corrected > 0 {
                    human.push_str(&format!(", {} wrong dropped by checksum, {} corrected by decoding", r.bad_checksum, r.corrected));
                }
                human.push('\n');
            }
            Ok(Output::new(human.trim_end().to_string(), json!({"bytes": data.len(), "seconds": secs, "runs": runs, "out": out})))
        }
        OwnerCommand::Status => {
            let mut state = OwnerState::load(&ctx.state_path)?;
            let mut recovery = None;
            if state.pending.is_some() {
                if let Ok(n) = ctx.node_for_deal(state.deal).await {
                    recovery = Some(settle_if_pending(ctx, &n, &mut state).await.map_err(|e| format!("{e:#}")));
                }
            }
            let onchain = ctx.market.get_deal(state.deal).await.ok().filter(|d| d.state != dpor_chain::DealState::None);
            let node = match ctx.node_for_deal(state.deal).await {
                Ok(n) => n.status(state.deal).await.map_err(|e| format!("{e:#}")),
                Err(e) => Err(format!("{e:#}")),
            };
            let mut human = format!(
                "deal {}: {} blocks of {} bytes, file {} bytes, uploaded {}\n  owner: t = {}, {} C-rebuilds, rootU {}, {} filled levels, last digest v{}, nonce {}",
                state.deal,
                state.num_blocks,
                state.block_bytes,
                state.file_bytes,
                state.uploaded,
                state.write_count,
                state.rebuild_count,
                state.root_u,
                state.levels.iter().flatten().count(),
                state.digest_version,
                state.nonce
            );
            match (&recovery, &state.pending) {
                (Some(Err(e)), _) => human.push_str(&format!("\n  unfinished request: {e}")),
                (_, Some(p)) => human.push_str(&format!("\n  unfinished request: {p:?}")),
                _ => {}
            }
            if let Some(d) = &onchain {
                human.push_str(&format!("\n  chain: {:?}, digest v{}, provider {}", d.state, d.digest_version, d.provider));
                if d.num_blocks != state.num_blocks {
                    human.push_str(&format!(
                        "\n  resize to {} blocks done on the node, not yet on chain (N = {} there): run `dpor checkpoint`",
                        state.num_blocks, d.num_blocks
                    ));
                }
            }
            match &node {
                Ok(s) => human.push_str(&format!(
                    "\n  node: {:?}, t = {}, {} C-rebuilds, rootU {}, co-signed v{:?}, posted v{:?}{}",
                    s.phase,
                    s.write_count,
                    s.rebuild_count,
                    s.root_u,
                    s.cosigned_version,
                    s.posted_version,
                    if s.root_u == state.root_u && s.write_count == state.write_count {
                        " (in sync)"
                    } else {
                        " (NOT in sync with the owner)"
                    }
                )),
                Err(e) => human.push_str(&format!("\n  node: unreachable: {e}")),
            }
            if let Some(why) = node.as_ref().ok().and_then(|s| s.damaged.as_ref()) {
                human.push_str(&format!(
                    "\n  node: deal QUARANTINED, its files on the node are damaged ({why}); writes are refused, `dpor extract` recovers the file from the coded runs"
                ));
            }
            Ok(Output::new(
                human,
                json!({
                    "deal": state.deal, "num_blocks": state.num_blocks, "block_bytes": state.block_bytes,
                    "file_bytes": state.file_bytes, "write_count": state.write_count, "rebuild_count": state.rebuild_count,
                    "root_u": state.root_u, "digest_version": state.digest_version, "nonce": state.nonce,
                    "pending": state.pending.as_ref().map(|p| serde_json::to_value(p).unwrap_or_default()),
                    "recovery_error": recovery.as_ref().and_then(|r| r.as_ref().err()),
                    "chain_state": onchain.as_ref().map(|d| format!("{:?}", d.state)),
                    "chain_digest_version": onchain.as_ref().map(|d| d.digest_version),
                    "node": node.as_ref().ok().map(|s| json!({"write_count": s.write_count, "root_u": s.root_u, "cosigned_version": s.cosigned_version, "posted_version": s.posted_version, "damaged": s.damaged})),
                }),
            ))
        }
    }
}

/// The writes a `dpor write` names: `INDEX FILE` pairs and the lines of a batch file.
fn write_args(pairs: &[String], batch: Option<&std::path::Path>) -> anyhow::Result<Vec<(u64, Vec<u8>)>> {
    ensure!(pairs.len().is_multiple_of(2), "give INDEX FILE pairs (got {} arguments)", pairs.len());
    let mut list: Vec<(String, PathBuf)> = pairs.chunks(2).map(|p| (p[0].clone(), PathBuf::from(&p[1]))).collect();
    if let Some(b) = batch {
        let text = std::fs::read_to_string(b).with_context(|| format!("cannot read the batch file {}", b.display()))?;
        let base = b.parent().map(|p| p.to_path_buf()).unwrap_or_default();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (i, f) =
                line.split_once(char::is_whitespace).with_context(|| format!("{} line {}: expected `INDEX FILE`", b.display(), n + 1))?;
            list.push((i.to_string(), base.join(f.trim())));
        }
    }
    ensure!(!list.is_empty(), "nothing to write: give INDEX FILE (or several pairs, or --batch FILE)");
    let mut stdin_used = false;
    let mut out = Vec::with_capacity(list.len());
    for (i, f) in list {
        let index: u64 = i.parse().with_context(|| format!("`{i}` is not a block index"))?;
        if f.as_os_str() == "-" {
            ensure!(!stdin_used, "stdin (-) can be read only once");
            stdin_used = true;
        }
        let data = read_input(&f)?;
        ensure!(!data.is_empty(), "{} is empty: a write takes the block's new bytes (1 to β bytes, zero-padded to β)", f.display());
        out.push((index, data));
    }
    Ok(out)
}

/// The bytes of FILE, or of stdin for `-`.
fn read_input(f: &std::path::Path) -> anyhow::Result<Vec<u8>> {
    if f.as_os_str() == "-" {
        let mut v = Vec::new();
        std::io::stdin().read_to_end(&mut v)?;
        Ok(v)
    } else {
        std::fs::read(f).with_context(|| format!("cannot read {}", f.display()))
    }
}

/// A byte-level edit: `write --offset` or `sync`.
enum Edit {
    /// These bytes at this offset.
    Range(u64, Vec<u8>),
    /// The file becomes these bytes.
    Sync(Vec<u8>),
}

/// What every byte-level edit shares: settle, edit with a progress bar, save, report.
async fn edit_command(ctx: &Ctx, what: Edit) -> anyhow::Result<Output> {
    let mut state = OwnerState::load(&ctx.state_path)?;
    let node = ctx.node_for_deal(state.deal).await?;
    let key = ctx.key()?;
    let auth = OwnerAuth { key, chain_id: state.chain_id, market: state.market, deal: state.deal };
    settle(&node, &auth, &mut state).await?;
    let bar = ctx.bar("write");
    let result = match &what {
        Edit::Range(offset, data) => edit::write_range(&node, &auth, &mut state, *offset, data, Some(&bar)).await,
        Edit::Sync(data) => edit::sync(&node, &auth, &mut state, data, Some(&bar)).await,
    };
    bar.finish_and_clear();
    state.save(&ctx.state_path)?;
    let r = result?;
    let (sent, received) = node.traffic();
    Ok(Output::new(
        format!(
            "wrote {} blocks in {} batch(es) ({} edge blocks read first); the file is {} bytes (was {}); rootU {}; new runs are checked at the next checkpoint; {} bytes sent, {} received",
            r.blocks_written,
            r.batches.len(),
            r.blocks_read,
            r.new_bytes,
            r.old_bytes,
            state.root_u,
            sent,
            received
        ),
        json!({"report": r, "root_u": state.root_u, "bytes_sent": sent, "bytes_received": received, "write_count": state.write_count, "rebuild_count": state.rebuild_count}),
    ))
}

/// Settles the owner's unfinished request with the node ([`recover::recover`]) and
/// tells the user what it did (on stderr, so `--json` output stays one object).
async fn settle(node: &crate::node_client::NodeClient, auth: &OwnerAuth<'_>, state: &mut OwnerState) -> anyhow::Result<()> {
    checkpoint::settle(node, auth, state, &Stderr).await
}

/// What `checkpoint` prints.
pub fn checkpoint_output(c: Checkpointed) -> Output {
    match c {
        Checkpointed::Resized { deal, from_blocks, to_blocks, version, digest_hash } => Output::new(
            format!(
                "deal {deal} resized on chain from {from_blocks} to {to_blocks} blocks: digest v{version} posted with resizeDeal (hash {digest_hash})"
            ),
            json!({"deal": deal, "from_blocks": from_blocks, "to_blocks": to_blocks, "version": version, "digest_hash": digest_hash}),
        ),
        Checkpointed::Posted { deal, version, digest_hash, write_count, rebuild_count, levels, owner, provider } => Output::new(
            format!(
                "digest v{version} posted for deal {deal} (hash {digest_hash}): t = {write_count}, {rebuild_count} C-rebuilds, {levels} filled levels; signed by owner {owner} and provider {provider}"
            ),
            json!({"deal": deal, "version": version, "digest_hash": digest_hash, "write_count": write_count, "rebuild_count": rebuild_count, "levels": levels}),
        ),
    }
}

/// [`settle`] for commands that need no key unless a request is unfinished.
pub(crate) async fn settle_if_pending(ctx: &Ctx, node: &crate::node_client::NodeClient, state: &mut OwnerState) -> anyhow::Result<()> {
    if state.pending.is_none() {
        return Ok(());
    }
    let key = ctx.key()?;
    let auth = OwnerAuth { key, chain_id: state.chain_id, market: state.market, deal: state.deal };
    settle(node, &auth, state).await
}
