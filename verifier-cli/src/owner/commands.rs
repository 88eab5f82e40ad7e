//! The owner's commands: open a deal, upload, read, write (blocks or a byte range),
//! sync, checkpoint, download, extract, status. Each loads the owner state, talks to the chain and the node,
//! verifies, saves the state and reports.

use super::{edit, extract, flows, recover};
use crate::context::Ctx;
use crate::node_client::OwnerAuth;
use crate::output::Output;
use crate::owner_state::{DealParams, OwnerState, DEFAULT_BLOCK_CACHE_LEVELS, DEFAULT_CACHE_LEVELS};
use dpor_core::block::{MAX_BLOCK_BYTES, MAX_EPOCH_PROOF_DATA_BYTES, MAX_LOG_BLOCKS};
use alloy::signers::SignerSync;
use alloy_primitives::{Address, Bytes, B256, U256};
use anyhow::{bail, ensure, Context};
use clap::Subcommand;
use dpor_proto::messages::WireDigest;
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
            if ctx.state_path.exists() && !force {
                bail!("{} already exists (another deal's state); pass --force or --state NEW", ctx.state_path.display());
            }
            let key = ctx.key()?;
            let n = match (file, blocks) {
                (Some(f), _) => {
                    let meta = std::fs::metadata(&f).with_context(|| format!("cannot read {}", f.display()))?;
                    ensure!(meta.is_file(), "{} is not a regular file (a directory?): --file sizes the deal for one file", f.display());
                    let len = meta.len();
                    ensure!(len > 0, "{} is empty", f.display());
                    len.div_ceil(block_bytes as u64).next_power_of_two()
                }
                (None, Some(b)) => b,
                (None, None) => bail!("give --file or --blocks"),
            };
            ensure!(n.is_power_of_two(), "N = {n} is not a power of two");
            // What the market and the node would refuse is refused here, before any
            // transaction (issue 21 #4).
            check_deal_shape(n, block_bytes, samples, lambda, epochs)?;
            let p = ctx.market.get_provider(provider).await?;
            ensure!(p.registered, "{provider} is not a registered provider");
            let price = price.unwrap_or(p.price_per_block_epoch);
            let escrow = check_deal_terms(ctx, provider, &p, n, epochs, price, min_collateral, mint).await?;
            if mint {
                ctx.market.mint(key.address(), U256::from(escrow)).await.context("minting test tokens")?;
            }
            ctx.market.approve_market(U256::from(escrow)).await.context("approving the escrow")?;
            let min_collateral = min_collateral.unwrap_or(p.collateral_per_block);
            let deal =
                ctx.market.open_deal(provider, n, block_bytes, lambda, samples, epochs, price, min_collateral).await?;
            let seed: [u8; 32] = rand::random();
            let params = DealParams {
                deal,
                chain_id: ctx.market.chain_id(),
                market: ctx.market.address(),
                provider,
                num_blocks: n,
                block_bytes,
                lambda: lambda as u32,
            };
            let state = OwnerState::new(params, B256::from(seed), cache_levels, block_cache_levels);
            state.save(&ctx.state_path)?;
            Ok(Output::new(
                format!(
                    "deal {deal} opened with provider {provider}: {n} blocks of {block_bytes} bytes, {epochs} epochs, escrow {escrow} (state in {})",
                    ctx.state_path.display()
                ),
                json!({"deal": deal, "provider": provider, "num_blocks": n, "block_bytes": block_bytes, "epochs": epochs, "escrow": escrow.to_string(), "state": ctx.state_path}),
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
                    format!("deal {deal} will end after epoch {} (its last deadline is at timestamp {end}); prove until then", n.saturating_sub(1)),
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
            wait_active(ctx, state.deal).await?;
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
                        format!("block {index} ({} bytes) verified against rootU and its checksum, written to {}", block.len(), p.display()),
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
                match super::batch::write_batch(&node, &auth, &mut state, chunk).await {
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
                    format!("deal {}: the node's copy is back at N = {target} blocks, the size on chain (C rebuilt: {})", state.deal, r.run),
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
        OwnerCommand::Checkpoint => {
            let mut state = OwnerState::load(&ctx.state_path)?;
            let key = ctx.key()?;
            let node = ctx.node_for_deal(state.deal).await?;
            let auth = OwnerAuth { key, chain_id: state.chain_id, market: state.market, deal: state.deal };
            settle(&node, &auth, &mut state).await?;
            ensure!(state.uploaded, "upload the file first");
            if ctx.market.get_deal(state.deal).await?.num_blocks != state.num_blocks {
                // An interrupted `resize`: its on-chain step is this checkpoint.
                let chain = super::resize::resize_on_chain(&ctx.market, &node, &auth, key, &mut state, None).await;
                state.save(&ctx.state_path)?;
                let chain = chain?;
                return Ok(Output::new(
                    format!(
                        "deal {} resized on chain from {} to {} blocks: digest v{} posted with resizeDeal (hash {})",
                        state.deal, chain.from_blocks, state.num_blocks, chain.version, chain.digest_hash
                    ),
                    json!({"deal": state.deal, "from_blocks": chain.from_blocks, "to_blocks": state.num_blocks, "version": chain.version, "digest_hash": chain.digest_hash}),
                ));
            }
            // Every run the digest references must be checked before the owner signs
            // it: those that batches built are checked now (deferred checks).
            let deferred = super::batch::verify_deferred(&node, &auth, &mut state).await;
            state.save(&ctx.state_path)?;
            let deferred = deferred.context("checking the runs built by batches of writes since the last checkpoint")?;
            if !deferred.recomputed.is_empty() || !deferred.spot_checked.is_empty() {
                eprintln!(
                    "dpor: checked the batches' runs: recomputed {:?}, spot-checked {:?} ({} samples)",
                    deferred.recomputed, deferred.spot_checked, deferred.samples
                );
            }
            let onchain = ctx.market.get_deal(state.deal).await?;
            // Above any version the node co-signed: after a lost co-sign answer the node
            // has signed a version the owner never posted, and will not sign it again.
            let node_cosigned = node.status(state.deal).await?.cosigned_version.unwrap_or(0);
            let version = state.digest_version.max(onchain.digest_version).max(node_cosigned) + 1;
            let digest = flows::next_digest(&state, version);
            let hash = digest.digest_hash(state.chain_id, state.market);
            let owner_sig = key.sign_hash_sync(&hash).context("signing the digest")?.as_bytes().to_vec();
            let nonce = state.next_nonce();
            let cosigned = node.cosign(&auth, nonce, WireDigest::from(&digest)).await;
            state.save(&ctx.state_path)?;
            let (provider_sig, provider) = cosigned?;
            let signer = super::resize::check_provider_signature(&provider_sig, provider, hash, onchain.provider, "digest")?;
            match ctx.market.post_digest(&digest, Bytes::from(owner_sig), Bytes::from(provider_sig)).await {
                Ok(_) => {}
                // The node may post a digest it co-signed itself (with the owner's
                // signature the Cosign carried, issue 22), before ours is estimated
                // (StaleVersion) or mined (our transaction then reverts on chain): this
                // very digest on chain is the checkpoint done, whoever posted it.
                Err(e) => {
                    if !ctx.market.digest_record(state.deal, version).await.is_ok_and(|r| r.digest_hash == hash) {
                        return Err(e.into());
                    }
                }
            }
            state.digest_version = version;
            state.save(&ctx.state_path)?;
            Ok(Output::new(
                format!(
                    "digest v{version} posted for deal {} (hash {hash}): t = {}, {} C-rebuilds, {} filled levels; signed by owner {} and provider {}",
                    state.deal,
                    state.write_count,
                    state.rebuild_count,
                    digest.levelRoots.len(),
                    key.address(),
                    signer
                ),
                json!({"deal": state.deal, "version": version, "digest_hash": hash, "write_count": state.write_count, "rebuild_count": state.rebuild_count, "levels": digest.levelRoots.len()}),
            ))
        }
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
                    let (data, _) = extracted.with_context(|| format!("downloading U failed ({why}), and so did the fallback extraction"))?;
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
                    if s.root_u == state.root_u && s.write_count == state.write_count { " (in sync)" } else { " (NOT in sync with the owner)" }
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

/// Refuses deal parameters no deal can have: N above 2^[`MAX_LOG_BLOCKS`] (what the
/// code supports: 2N coded blocks within the field's two-adicity; the market's own
/// limit, 2^40, is higher), β outside 1..=[`MAX_BLOCK_BYTES`], β·K above
/// [`MAX_EPOCH_PROOF_DATA_BYTES`] (K = `samples`, 0 meaning 1: the epoch proofs would
/// not fit a transaction), λ or the term 0.
fn check_deal_shape(n: u64, block_bytes: u32, samples: u8, lambda: u16, epochs: u32) -> anyhow::Result<()> {
    ensure!(
        n <= 1u64 << MAX_LOG_BLOCKS,
        "N = {n} blocks is more than a deal can hold: at most 2^{MAX_LOG_BLOCKS} = {} blocks (the code needs 2N ≤ 2^32)",
        1u64 << MAX_LOG_BLOCKS
    );
    ensure!(
        block_bytes >= 1 && block_bytes as usize <= MAX_BLOCK_BYTES,
        "--block-bytes {block_bytes}: β must be in 1..={MAX_BLOCK_BYTES}"
    );
    let k = u64::from(samples.max(1));
    ensure!(
        u64::from(block_bytes) * k <= MAX_EPOCH_PROOF_DATA_BYTES,
        "--block-bytes {block_bytes} with --samples {k}: β·K = {} bytes is more than the {MAX_EPOCH_PROOF_DATA_BYTES} an epoch proof may carry (its whole coded blocks must fit one transaction); use smaller blocks or fewer samples",
        u64::from(block_bytes) * k
    );
    ensure!(lambda >= 1, "--lambda 0: an audit needs at least one sample per run");
    ensure!(epochs >= 1, "--epochs 0: a deal lasts at least one epoch");
    Ok(())
}

/// Refuses a deal of `n` blocks for `epochs` epochs at `price` with `provider` (record
/// `p`) that the market's `openDeal` or `acceptDeal` would refuse, or whose escrow the
/// owner cannot pay (unless `mint`): N within the provider's free capacity, the price
/// at least its ask, its collateral rate at least `min_collateral`, escrow and
/// collateral below 2^128. Returns the escrow, price·N·epochs.
#[allow(clippy::too_many_arguments)]
async fn check_deal_terms(
    ctx: &Ctx,
    provider: Address,
    p: &dpor_chain::ProviderInfo,
    n: u64,
    epochs: u32,
    price: u128,
    min_collateral: Option<u128>,
    mint: bool,
) -> anyhow::Result<u128> {
    let free = p.capacity_blocks.saturating_sub(p.used_blocks);
    ensure!(
        n <= free,
        "provider {provider} has room for {free} more blocks (capacity {}, {} in use): it cannot accept a deal of N = {n} blocks",
        p.capacity_blocks,
        p.used_blocks
    );
    ensure!(
        price >= p.price_per_block_epoch,
        "a price of {price} per block per epoch is below provider {provider}'s ask of {}",
        p.price_per_block_epoch
    );
    if let Some(m) = min_collateral {
        ensure!(
            p.collateral_per_block >= m,
            "provider {provider} locks {} collateral per block, less than the --min-collateral {m} you ask",
            p.collateral_per_block
        );
    }
    ensure!(
        p.collateral_per_block.checked_mul(u128::from(n)).is_some(),
        "the collateral of N = {n} blocks at {} per block is over the market's limit of 2^128 − 1",
        p.collateral_per_block
    );
    let escrow = price
        .checked_mul(u128::from(n))
        .and_then(|x| x.checked_mul(u128::from(epochs)))
        .with_context(|| format!("the escrow of {price} × N = {n} × {epochs} epochs is over the market's limit of 2^128 − 1"))?;
    if !mint {
        let owner = ctx.key()?.address();
        let have = ctx.market.balance_of(owner).await.context("reading your token balance")?;
        ensure!(
            have >= U256::from(escrow),
            "the escrow is {escrow} (price {price} × N = {n} blocks × {epochs} epochs), but your account {owner} holds {have} tokens"
        );
    }
    Ok(escrow)
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
            let (i, f) = line
                .split_once(char::is_whitespace)
                .with_context(|| format!("{} line {}: expected `INDEX FILE`", b.display(), n + 1))?;
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
    let notes = recover::recover(node, auth, state).await.context("settling the previous, interrupted request with the node")?;
    for n in notes {
        eprintln!("dpor: recovered: {n}");
    }
    Ok(())
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

/// Waits up to a minute for the provider to accept the deal.
async fn wait_active(ctx: &Ctx, deal: u64) -> anyhow::Result<()> {
    for _ in 0..240 {
        let d = ctx.market.get_deal(deal).await?;
        match d.state {
            dpor_chain::DealState::Active => return Ok(()),
            dpor_chain::DealState::Open => tokio::time::sleep(std::time::Duration::from_millis(250)).await,
            other => bail!("deal {deal} is {other:?}, not active"),
        }
    }
    bail!("the provider has not accepted deal {deal} after a minute")
}
