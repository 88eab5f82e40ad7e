//! The node's answer to every request of the wire protocol (`dpor_proto::messages`).
//!
//! Public reads go straight to the [`Store`]; owner operations are authenticated
//! first: the signature must recover to the deal's owner (read from the chain when the
//! upload begins, then kept with the deal), over `owner_request_hash` for this chain
//! and market; the store then checks the nonce atomically with the operation. Every
//! failure becomes an error response with a code; nothing a peer sends can panic the
//! node, and storage work runs on tokio's blocking pool.

use crate::signing::{recover_owner, recover_prehash, ProviderSigner};
use crate::store::{CosignKind, DealParams, LastAnswer, Phase, Store, StoreError};
use alloy_primitives::{Address, B256};
use async_trait::async_trait;
use dpor_core::digest::{Digest, Resize};
use dpor_core::RunId;
use dpor_proto::codec::FrameError;
use dpor_proto::messages::{
    batch_len, DealStatus, ErrorCode, OwnerOp, Request, Response, Signed, WireOutcome, WirePhase, WireRun, WireSample,
    MAX_BATCH_BYTES,
};
use libp2p::PeerId;
use serde_bytes::ByteBuf;
use std::sync::Arc;

/// A deal as the chain knows it: what the node checks an upload against.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainDeal {
    /// The owner (opened the deal; signs owner requests).
    pub owner: Address,
    /// The provider the deal is with.
    pub provider: Address,
    /// N, blocks.
    pub num_blocks: u64,
    /// β, bytes per block.
    pub block_bytes: u32,
    /// True once the provider accepted (collateral locked) and until the deal ends.
    pub active: bool,
}

/// Where the handler looks deals up (the market contract; a fixed table in tests).
#[async_trait]
pub trait DealLookup: Send + Sync + 'static {
    /// The deal `id`, or `None` if the chain has no such deal.
    async fn deal(&self, id: u64) -> anyhow::Result<Option<ChainDeal>>;

    /// Makes the provider account ready for `resizeDeal` of deal `id` to lock
    /// `collateral` wei in total (docs/CONTRACTS.md, "Resizing"): if that is more than
    /// the deal's collateral now, checks the account's balance and approves the
    /// market for the difference. The default (a fixed table in tests) does nothing.
    async fn prepare_resize(&self, id: u64, collateral: u128) -> anyhow::Result<()> {
        let _ = (id, collateral);
        Ok(())
    }
}

/// The terms a node co-signs a resize under (docs/CONTRACTS.md, "Resizing"): its ask
/// and collateral rate (wei per block per epoch, wei per block, as registered) and
/// the most blocks it takes in one deal (its capacity).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResizePolicy {
    /// Least price per block per epoch, wei.
    pub price_per_block_epoch: u128,
    /// Most collateral per block, wei.
    pub collateral_per_block: u128,
    /// Most blocks (N') of one deal.
    pub max_blocks: u64,
}

/// Testing only: ways a cheating node answers audits and spot-checks, so that tests
/// can show each is caught (`dpor-node run --misbehave …`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Misbehavior {
    /// Honest.
    #[default]
    None,
    /// Flip a bit in every block it serves (samples, reads).
    WrongBlock,
    /// Serve an older level (or C) in place of the level asked for, as a node that
    /// stopped maintaining H would.
    StaleLevel,
    /// Serve the blocks of another deal it holds.
    OtherDeal,
    /// Commit one wrong coded block in every run it builds (C at upload and at each
    /// C-rebuild, every level), inside the run root it returns
    /// ([`crate::store::CommitFault::one_per_run`]); serve honestly what it stored.
    CommitWrong,
    /// Keep only the first half of every coded block (the rest reads as zeros): a node
    /// that saves storage on every block. Applies to audits and to the chain agent's
    /// epoch proofs (issue 9 finding 3: whole-block proofs catch it).
    PartialBlocks,
    /// Drop every owner `Write` / `WriteBatch` / `Resize` before applying it and answer
    /// `Internal`, as if the request was lost on the way (the owner's intent recovery
    /// must send it again).
    DropWrites,
    /// Apply every owner `Write` / `WriteBatch` / `Resize` / `UploadFinish`, then answer
    /// `Internal` instead of the reply, as if the answer was lost (the owner's recovery
    /// must learn it with `Outcome`).
    LoseWriteAnswers,
    /// Answer the first `Outcome` asked `NotApplied` whatever the record says, as a node
    /// still applying the request asked about answers at that instant (a CLI killed
    /// mid-request and restarted at once); later ones truthfully. The owner's recovery
    /// must not take the refusal of the copy it then sends for a refusal of the request.
    StaleOutcomeOnce,
    /// Co-sign every digest the owner sends (the node records the version as signed),
    /// then answer `Internal` instead of the signature, as if the answer was lost (the
    /// owner's next checkpoint must take a higher version).
    LoseCosignAnswers,
}

impl std::str::FromStr for Misbehavior {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "none" => Ok(Self::None),
            "wrong-block" => Ok(Self::WrongBlock),
            "stale-level" => Ok(Self::StaleLevel),
            "other-deal" => Ok(Self::OtherDeal),
            "commit-wrong" => Ok(Self::CommitWrong),
            "partial-blocks" => Ok(Self::PartialBlocks),
            "drop-writes" => Ok(Self::DropWrites),
            "lose-write-answers" => Ok(Self::LoseWriteAnswers),
            "lose-cosign-answers" => Ok(Self::LoseCosignAnswers),
            "stale-outcome-once" => Ok(Self::StaleOutcomeOnce),
            _ => Err(format!(
                "unknown misbehavior {s:?} (none, wrong-block, stale-level, other-deal, commit-wrong, partial-blocks, drop-writes, lose-write-answers, lose-cosign-answers, stale-outcome-once)"
            )),
        }
    }
}

/// Paces bulk reads to a byte rate (a leaky bucket shared by every request): each
/// answer of `bytes` is sent once the link it would use is free, `bytes / rate` after
/// the previous one.
struct ServeRate {
    bytes_per_sec: u64,
    free_at: tokio::sync::Mutex<tokio::time::Instant>,
}

impl ServeRate {
    async fn pace(&self, bytes: u64) {
        let wait = {
            let mut free_at = self.free_at.lock().await;
            let now = tokio::time::Instant::now();
            let start = (*free_at).max(now);
            *free_at = start + std::time::Duration::from_secs_f64(bytes as f64 / self.bytes_per_sec as f64);
            *free_at
        };
        tokio::time::sleep_until(wait).await;
    }
}

/// The request handler: the store, the chain's deal table, and the provider's key.
pub struct NodeHandler {
    store: Arc<Store>,
    deals: Arc<dyn DealLookup>,
    signer: Arc<ProviderSigner>,
    misbehavior: Misbehavior,
    serve_rate: Option<ServeRate>,
    resize_policy: Option<ResizePolicy>,
    metrics: Option<Arc<crate::metrics::NodeMetrics>>,
    /// Whether [`Misbehavior::StaleOutcomeOnce`] has told its one stale outcome.
    stale_outcome_told: std::sync::atomic::AtomicBool,
}

impl NodeHandler {
    /// A handler over `store`, checking uploads against `deals`, co-signing with `signer`.
    pub fn new(store: Arc<Store>, deals: Arc<dyn DealLookup>, signer: Arc<ProviderSigner>) -> Self {
        Self {
            store,
            deals,
            signer,
            misbehavior: Misbehavior::None,
            serve_rate: None,
            resize_policy: None,
            metrics: None,
            stale_outcome_told: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// Counts every request, its latency and the block bytes written and served in
    /// `metrics` (docs/OPERATIONS.md, "Metrics").
    pub fn with_metrics(mut self, metrics: Arc<crate::metrics::NodeMetrics>) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// The terms under which resizes are done and co-signed; without one (tests), any
    /// terms are accepted.
    pub fn with_resize_policy(mut self, policy: ResizePolicy) -> Self {
        self.resize_policy = Some(policy);
        self
    }

    /// Caps bulk reads (`Download`, `Coded`) at `bytes_per_sec` across all peers
    /// (config `serve_rate_bytes_per_sec`); `None` or 0: no cap.
    pub fn with_serve_rate(mut self, bytes_per_sec: Option<u64>) -> Self {
        self.serve_rate = bytes_per_sec
            .filter(|r| *r > 0)
            .map(|r| ServeRate { bytes_per_sec: r, free_at: tokio::sync::Mutex::new(tokio::time::Instant::now()) });
        self
    }

    async fn pace(&self, bytes: u64) {
        if let Some(r) = &self.serve_rate {
            r.pace(bytes).await;
        }
    }

    /// Testing only: a cheating handler.
    pub fn with_misbehavior(mut self, m: Misbehavior) -> Self {
        self.misbehavior = m;
        if m == Misbehavior::CommitWrong {
            self.store.set_commit_fault(Some(crate::store::CommitFault::one_per_run()));
        }
        self
    }

    /// Where a cheating node takes the samples of `run` from instead.
    fn cheat_source(&self, deal: u64, run: RunId) -> Option<(u64, RunId)> {
        match self.misbehavior {
            Misbehavior::StaleLevel if run.tag.as_level().is_some() => {
                let view = self.store.view(deal).ok()?;
                let other = view
                    .levels
                    .iter()
                    .map(|(_, r, _)| *r)
                    .filter(|r| *r != run)
                    .min_by_key(|r| r.built_at)
                    .unwrap_or(view.c.0);
                Some((deal, other))
            }
            Misbehavior::OtherDeal => {
                let other = self.store.deals().into_iter().find(|d| *d != deal)?;
                let view = self.store.view(other).ok()?;
                let same = view.levels.iter().map(|(_, r, _)| *r).find(|r| r.tag == run.tag).unwrap_or(view.c.0);
                Some((other, same))
            }
            _ => None,
        }
    }

    /// Answers one request (never panics; errors become [`Response::Error`]).
    pub async fn answer(&self, request: Request) -> Response {
        let kind = request.kind();
        tracing::trace!(request = kind, "request");
        let started = std::time::Instant::now();
        let mut op = OpInfo { kind, written: 0 };
        let result = match request {
            Request::Owner(signed) => self.owner(signed, &mut op).await,
            public => self.public(public).await,
        };
        if let Some(m) = &self.metrics {
            m.request(op.kind, result.is_ok(), started.elapsed());
            if let Ok(r) = &result {
                m.written(op.written);
                m.served(r);
            }
        }
        match result {
            Ok(r) => r,
            Err(e) => {
                tracing::debug!(request = kind, error = %e.message, "request refused");
                Response::Error(e)
            }
        }
    }

    async fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Store) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, Fail> {
        let store = self.store.clone();
        match tokio::task::spawn_blocking(move || f(&store)).await {
            Ok(r) => r.map_err(Fail::from),
            Err(e) => Err(Fail::new(ErrorCode::Internal, format!("storage task failed: {e}"))),
        }
    }

    /// After a committed batch: U's files are updated off the answer's path (issue 23
    /// #2); a failure is retried by the next write.
    fn apply_pending_later(&self, deal: u64) {
        let store = self.store.clone();
        tokio::task::spawn_blocking(move || {
            if let Err(e) = store.apply_pending_updates(deal) {
                tracing::warn!(deal, "batch committed, U files not yet updated (the next write retries): {e}");
            }
        });
    }

    async fn public(&self, request: Request) -> Result<Response, Fail> {
        match request {
            Request::Status { deal } => {
                let view = self.blocking(move |s| s.view(deal)).await?;
                Ok(Response::Status(status(&view)))
            }
            Request::Built { deal } => {
                let view = self.blocking(move |s| s.settle(deal).and_then(|()| s.view(deal))).await?;
                Ok(Response::Status(status(&view)))
            }
            Request::Read { deal, index } => {
                let (mut block, sealed, path) = self.blocking(move |s| s.read(deal, index)).await?;
                if self.misbehavior == Misbehavior::WrongBlock {
                    flip(&mut block);
                }
                Ok(Response::Block { index, block: ByteBuf::from(block), sealed_u: B256::from(sealed), path })
            }
            Request::UPath { deal, index } => {
                let (_, sealed, path) = self.blocking(move |s| s.read(deal, index)).await?;
                let leaf = self.blocking(move |s| s.u_leaves(deal, index, 1)).await?;
                let (block_root, _) = leaf.first().copied().ok_or_else(|| Fail::new(ErrorCode::OutOfRange, "no such index"))?;
                Ok(Response::UPath { index, block_root, sealed_u: B256::from(sealed), path })
            }
            Request::UPaths { deal, indices } => {
                let depth = self.blocking(move |s| s.view(deal)).await?.params.num_blocks.trailing_zeros() as u64;
                check_batch(indices.len() as u64, 32 * (depth + 3))?;
                let asked = indices.clone();
                let got = self.blocking(move |s| s.u_paths(deal, &indices)).await?;
                let items = asked.into_iter().zip(got).map(|(i, (root, sealed, path))| (i, root, B256::from(sealed), path)).collect();
                Ok(Response::UPaths { items })
            }
            Request::Download { deal, start, count } => {
                let beta = self.blocking(move |s| s.view(deal)).await?.params.block_bytes as u64;
                check_batch(count, beta)?;
                let blocks = self.blocking(move |s| s.u_blocks(deal, start, count)).await?;
                self.pace(blocks.iter().map(|b| b.len() as u64).sum()).await;
                Ok(Response::Blocks { start, blocks: blocks.into_iter().map(ByteBuf::from).collect() })
            }
            Request::ULeaves { deal, start, count } => {
                check_batch(count, 64)?;
                let leaves = self.blocking(move |s| s.u_leaves(deal, start, count)).await?;
                Ok(Response::ULeaves { start, leaves: leaves.into_iter().map(|(r, s)| (r, B256::from(s))).collect() })
            }
            Request::Samples { deal, run, positions } => {
                let coded = self.coded_bytes(deal).await?;
                check_batch(positions.len() as u64, coded + 32 * 40)?;
                let id = RunId::from(run);
                let mut positions2 = positions.clone();
                let (src_deal, src_run) = self.cheat_source(deal, id).unwrap_or((deal, id));
                if (src_deal, src_run) != (deal, id) {
                    let view = self.blocking(move |s| s.view(src_deal)).await?;
                    let src_size = if src_run.tag.as_level().is_none() { 2 * view.params.num_blocks } else { 2u64 << src_run.tag.0.saturating_sub(1) };
                    positions2.iter_mut().for_each(|p| *p %= src_size.max(1));
                }
                let mut got = self.blocking(move |s| s.served(src_deal, src_run, &positions2)).await?;
                if self.misbehavior == Misbehavior::WrongBlock {
                    got.iter_mut().for_each(|(b, _)| flip(b));
                }
                if self.misbehavior == Misbehavior::PartialBlocks {
                    got.iter_mut().for_each(|(b, _)| keep_half(b));
                }
                let samples = positions
                    .into_iter()
                    .zip(got)
                    .map(|(position, (block, path))| WireSample { position, block: ByteBuf::from(block), path })
                    .collect();
                Ok(Response::Samples { run, samples })
            }
            Request::Coded { deal, run, start, count } => {
                let coded = self.coded_bytes(deal).await?;
                check_batch(count, coded)?;
                let mut blocks = self.blocking(move |s| s.coded_range(deal, run.into(), start, count)).await?;
                if self.misbehavior == Misbehavior::PartialBlocks {
                    blocks.iter_mut().for_each(|b| keep_half(b));
                }
                self.pace(blocks.iter().map(|b| b.len() as u64).sum()).await;
                Ok(Response::Coded { run, start, blocks: blocks.into_iter().map(ByteBuf::from).collect() })
            }
            Request::RunLeaves { deal, run, start, count } => {
                check_batch(count, 32)?;
                let leaves = self.blocking(move |s| s.run_leaves(deal, run.into(), start, count)).await?;
                Ok(Response::RunLeaves { run, start, leaves })
            }
            Request::Sealed { deal, run, start, count } => {
                check_batch(count, 33)?;
                let sealed = self.blocking(move |s| s.sealed(deal, run.into(), start, count)).await?;
                Ok(Response::Sealed { run, start, sealed: sealed.into_iter().map(|s| s.map(B256::from)).collect() })
            }
            Request::Outcome { deal, nonce } => {
                let (last_nonce, answer) = self.blocking(move |s| s.outcome(deal, nonce)).await?;
                if self.misbehavior == Misbehavior::StaleOutcomeOnce
                    && answer.is_some()
                    && !self.stale_outcome_told.swap(true, std::sync::atomic::Ordering::SeqCst)
                {
                    return Ok(Response::Outcome(WireOutcome::NotApplied { last_nonce: nonce.saturating_sub(1) }));
                }
                let outcome = match answer {
                    Some(LastAnswer::Written(o)) => WireOutcome::Applied {
                        nonce,
                        answer: Box::new(Response::Written { step: o.step.into(), run: o.run.into(), run_root: o.run_root, root_u: o.root_u }),
                    },
                    Some(LastAnswer::Committed(root_u, c, root_c)) => {
                        WireOutcome::Applied { nonce, answer: Box::new(Response::Committed { root_u, c: c.into(), root_c }) }
                    }
                    Some(LastAnswer::WrittenBatch(b)) => WireOutcome::Applied { nonce, answer: Box::new(batch_response(&b)) },
                    None if nonce > last_nonce => WireOutcome::NotApplied { last_nonce },
                    None => WireOutcome::Superseded { last_nonce },
                };
                Ok(Response::Outcome(outcome))
            }
            Request::SecretAudit { deal, seed, lambda, runs } => {
                // The owner's compact audit (§5.5): per run, one aggregated coded block
                // over the challenge's positions and the σ̃ stored for them.
                use dpor_core::secret_audit::{aggregate, challenge, MAX_SECRET_LAMBDA};
                if lambda == 0 || lambda > MAX_SECRET_LAMBDA {
                    return Err(Fail::new(ErrorCode::OutOfRange, format!("λ = {lambda} is out of range 1..={MAX_SECRET_LAMBDA}")));
                }
                let view = self.blocking(move |s| s.view(deal)).await?;
                let format = dpor_core::BlockFormat::new(view.params.block_bytes as usize)
                    .map_err(|e| Fail::new(ErrorCode::Internal, e.to_string()))?;
                check_batch(runs.len() as u64, format.coded_block_bytes() as u64 + 34 * lambda as u64)?;
                let mut proofs = Vec::with_capacity(runs.len());
                for ask in runs {
                    let id = RunId::from(ask.run);
                    let size = match id.tag.as_level() {
                        None => 2 * view.params.num_blocks,
                        Some(l) if l < 63 => 2u64 << l,
                        Some(_) => return Err(Fail::new(ErrorCode::UnknownRun, format!("no run {id}"))),
                    };
                    let ch = challenge(&seed.0, id, size, lambda).map_err(|e| Fail::new(ErrorCode::OutOfRange, e.to_string()))?;
                    let (src_deal, src_run) = self.cheat_source(deal, id).unwrap_or((deal, id));
                    let mut positions = ch.positions.clone();
                    if (src_deal, src_run) != (deal, id) {
                        let v = self.blocking(move |s| s.view(src_deal)).await?;
                        let src_size = src_run.tag.as_level().map_or(2 * v.params.num_blocks, |l| 2u64 << l.min(62));
                        positions.iter_mut().for_each(|p| *p %= src_size.max(1));
                    }
                    let mut blocks: Vec<Vec<u8>> =
                        self.blocking(move |s| s.served(src_deal, src_run, &positions)).await?.into_iter().map(|(b, _)| b).collect();
                    match self.misbehavior {
                        Misbehavior::WrongBlock => blocks.iter_mut().for_each(|b| flip(b)),
                        Misbehavior::PartialBlocks => blocks.iter_mut().for_each(|b| keep_half(b)),
                        _ => {}
                    }
                    // A block the node cannot read (damaged run): no aggregate, an empty one.
                    let agg = aggregate(&format, &ch.coefficients, &blocks)
                        .ok()
                        .and_then(|a| format.coded_to_bytes(&a).ok())
                        .unwrap_or_default();
                    let mut sealed = Vec::new();
                    if ask.sealed {
                        let ps = ch.positions.clone();
                        let got = self
                            .blocking(move |s| {
                                ps.iter().map(|&p| s.sealed(deal, id, p, 1).map(|v| v.into_iter().next().flatten())).collect::<Result<Vec<_>, _>>()
                            })
                            .await?;
                        sealed = got.into_iter().map(|o| o.map(B256::from)).collect();
                    }
                    proofs.push(dpor_proto::messages::SecretRunProof { run: ask.run, aggregate: ByteBuf::from(agg), sealed });
                }
                Ok(Response::SecretAudit { runs: proofs })
            }
            Request::EpochResponse { deal, epoch } => {
                let kept = self.blocking(move |s| s.epoch_response(deal, epoch)).await?;
                let bytes = kept.ok_or_else(|| {
                    Fail::new(ErrorCode::NotFound, format!("no committed response kept for deal {deal} epoch {epoch}"))
                })?;
                let resp: dpor_proto::messages::WireEpochResponse = dpor_proto::codec::decode_body(&bytes)
                    .map_err(|e| Fail::new(ErrorCode::Internal, format!("kept response of deal {deal} epoch {epoch}: {e}")))?;
                Ok(Response::EpochResponse(resp))
            }
            Request::Owner(_) => Err(Fail::new(ErrorCode::Internal, "owner request on the public path")),
        }
    }

    async fn coded_bytes(&self, deal: u64) -> Result<u64, Fail> {
        let view = self.blocking(move |s| s.view(deal)).await?;
        let format = dpor_core::BlockFormat::new(view.params.block_bytes as usize)
            .map_err(|e| Fail::new(ErrorCode::Internal, e.to_string()))?;
        Ok(format.coded_block_bytes() as u64)
    }

    /// The owner the signature must come from: the stored deal's, or (for the first
    /// upload request) the chain's.
    async fn owner_of(&self, deal: u64, op: &OwnerOp) -> Result<Address, Fail> {
        match self.blocking(move |s| s.view(deal)).await {
            Ok(view) if !matches!(op, OwnerOp::UploadBegin { .. }) => return Ok(view.params.owner),
            Ok(_) | Err(Fail { code: ErrorCode::UnknownDeal, .. }) => {}
            Err(e) => return Err(e),
        }
        let chain = self.chain_deal(deal).await?;
        Ok(chain.owner)
    }

    async fn chain_deal(&self, deal: u64) -> Result<ChainDeal, Fail> {
        let found = self
            .deals
            .deal(deal)
            .await
            .map_err(|e| Fail::new(ErrorCode::Internal, format!("cannot read deal {deal} from the chain: {e:#}")))?;
        let d = found.ok_or_else(|| Fail::new(ErrorCode::UnknownDeal, format!("deal {deal} does not exist on chain")))?;
        if d.provider != self.signer.address() {
            return Err(Fail::new(ErrorCode::UnknownDeal, format!("deal {deal} is with provider {}, not this node", d.provider)));
        }
        Ok(d)
    }

    async fn owner(&self, signed: Signed, info: &mut OpInfo) -> Result<Response, Fail> {
        let Signed { deal, nonce, op, signature, blocks } = signed;
        let parsed = OwnerOp::from_bytes(&op).map_err(|e| Fail::new(ErrorCode::Malformed, format!("owner op: {e}")))?;
        let outside: u64 = blocks.iter().map(|b| b.len() as u64).sum();
        *info = OpInfo { kind: parsed.kind(), written: crate::metrics::op_block_bytes(&parsed) + outside };
        let by_roots = matches!(parsed, OwnerOp::UploadByRoots { .. } | OwnerOp::WriteBatchByRoots { .. });
        if !by_roots && !blocks.is_empty() {
            return Err(Fail::new(ErrorCode::Malformed, format!("a {} request carries no blocks outside its op", parsed.kind())));
        }
        let owner = self.owner_of(deal, &parsed).await?;
        let signer = recover_owner(self.signer.chain_id(), self.signer.market(), deal, nonce, &op, &signature)
            .map_err(|e| Fail::new(ErrorCode::Unauthorized, e))?;
        if signer != owner {
            return Err(Fail::new(
                ErrorCode::Unauthorized,
                format!("request signed by {signer}, but deal {deal} belongs to {owner}"),
            ));
        }
        tracing::debug!(deal, nonce, op = parsed.kind(), "owner request");
        let is_write =
            matches!(parsed, OwnerOp::Write { .. } | OwnerOp::WriteBatch { .. } | OwnerOp::WriteBatchByRoots { .. } | OwnerOp::Resize { .. });
        if is_write && self.misbehavior == Misbehavior::DropWrites {
            return Err(Fail::new(ErrorCode::Internal, "TESTING ONLY: write dropped"));
        }
        let loses_answer = match self.misbehavior {
            Misbehavior::LoseWriteAnswers => is_write || matches!(parsed, OwnerOp::UploadFinish),
            Misbehavior::LoseCosignAnswers => matches!(parsed, OwnerOp::Cosign { .. }),
            _ => false,
        };
        let kind = parsed.kind();
        let answer = self.owner_op(deal, nonce, owner, parsed, blocks).await;
        if loses_answer && answer.is_ok() {
            return Err(Fail::new(ErrorCode::Internal, format!("TESTING ONLY: {kind} applied, answer lost")));
        }
        answer
    }

    /// Runs one authenticated owner operation; `blocks` are those an op signed over
    /// block roots names (empty for the others).
    async fn owner_op(&self, deal: u64, nonce: u64, owner: Address, parsed: OwnerOp, blocks: Vec<ByteBuf>) -> Result<Response, Fail> {
        match parsed {
            OwnerOp::UploadBegin { num_blocks, block_bytes } => {
                let chain = self.chain_deal(deal).await?;
                if !chain.active {
                    return Err(Fail::new(ErrorCode::WrongPhase, format!("deal {deal} is not active on chain (accept it first)")));
                }
                if chain.num_blocks != num_blocks || chain.block_bytes != block_bytes {
                    return Err(Fail::new(
                        ErrorCode::Mismatch,
                        format!(
                            "upload of {num_blocks} blocks of {block_bytes} bytes, but the deal is {} blocks of {} bytes",
                            chain.num_blocks, chain.block_bytes
                        ),
                    ));
                }
                let params = DealParams { deal, owner, num_blocks, block_bytes };
                self.blocking(move |s| s.upload_begin(params, nonce)).await?;
                Ok(Response::Accepted)
            }
            OwnerOp::UploadBlocks { start, blocks, sealed_u } => {
                if blocks.len() != sealed_u.len() {
                    return Err(Fail::new(
                        ErrorCode::Malformed,
                        format!("{} blocks but {} checksums", blocks.len(), sealed_u.len()),
                    ));
                }
                let blocks: Vec<Vec<u8>> = blocks.into_iter().map(ByteBuf::into_vec).collect();
                let sealed: Vec<[u8; 32]> = sealed_u.into_iter().map(|s| s.0).collect();
                self.blocking(move |s| s.upload_blocks(deal, nonce, start, blocks, &sealed)).await?;
                Ok(Response::Accepted)
            }
            OwnerOp::UploadByRoots { start, roots, sealed_u } => {
                if roots.len() != sealed_u.len() || blocks.len() != roots.len() {
                    return Err(Fail::new(
                        ErrorCode::Malformed,
                        format!("{} blocks, {} block roots and {} checksums", blocks.len(), roots.len(), sealed_u.len()),
                    ));
                }
                let blocks = signed_blocks(blocks, roots.clone()).await?;
                let sealed: Vec<[u8; 32]> = sealed_u.into_iter().map(|s| s.0).collect();
                self.blocking(move |s| s.upload_blocks_with_roots(deal, nonce, start, blocks, &sealed, Some(&roots))).await?;
                Ok(Response::Accepted)
            }
            OwnerOp::UploadFinish => {
                let (root_u, c, root_c) = self.blocking(move |s| s.upload_finish(deal, nonce)).await?;
                tracing::info!(deal, %root_u, %root_c, "upload finished: U and C built");
                Ok(Response::Committed { root_u, c: c.into(), root_c })
            }
            OwnerOp::Write { index, block, sealed_u } => {
                let out = self.blocking(move |s| s.write(deal, nonce, index, block.into_vec(), sealed_u.0)).await?;
                tracing::debug!(deal, index, run = %out.run, "write applied");
                Ok(Response::Written { step: out.step.into(), run: out.run.into(), run_root: out.run_root, root_u: out.root_u })
            }
            OwnerOp::WriteBatch { writes } => {
                let block_bytes = writes.first().map(|w| w.block.len() as u64).unwrap_or(0);
                check_batch(writes.len() as u64, block_bytes + 48)?;
                let writes: Vec<crate::store::BatchWrite> =
                    writes.into_iter().map(|w| (w.index, w.block.into_vec(), w.sealed_u.0)).collect();
                let count = writes.len();
                let out = self.blocking(move |s| s.write_batch(deal, nonce, writes)).await?;
                tracing::debug!(deal, count, runs = out.runs.len(), "write batch applied");
                self.apply_pending_later(deal);
                Ok(batch_response(&out))
            }
            OwnerOp::WriteBatchByRoots { writes } => {
                let block_bytes = blocks.first().map(|b| b.len() as u64).unwrap_or(0);
                check_batch(writes.len() as u64, block_bytes + 48)?;
                if blocks.len() != writes.len() {
                    return Err(Fail::new(ErrorCode::Malformed, format!("{} writes but {} blocks", writes.len(), blocks.len())));
                }
                let roots: Vec<B256> = writes.iter().map(|w| w.root).collect();
                let blocks = signed_blocks(blocks, roots.clone()).await?;
                let writes: Vec<crate::store::BatchWrite> =
                    writes.into_iter().zip(blocks).map(|(w, block)| (w.index, block, w.sealed_u.0)).collect();
                let count = writes.len();
                let out = self.blocking(move |s| s.write_batch_with_roots(deal, nonce, writes, Some(roots))).await?;
                tracing::debug!(deal, count, runs = out.runs.len(), "write batch applied");
                self.apply_pending_later(deal);
                Ok(batch_response(&out))
            }
            OwnerOp::StoreSealed { run, start, sealed } => {
                check_batch(sealed.len() as u64, 33)?;
                let sealed: Vec<[u8; 32]> = sealed.into_iter().map(|s| s.0).collect();
                self.blocking(move |s| s.store_sealed(deal, nonce, run.into(), start, &sealed)).await?;
                Ok(Response::Accepted)
            }
            OwnerOp::Cosign { digest, owner_signature } => {
                if digest.deal != deal {
                    return Err(Fail::new(ErrorCode::Mismatch, format!("digest for deal {} sent for deal {deal}", digest.deal)));
                }
                let d = Digest::from(&digest);
                d.validate().map_err(|e| Fail::new(ErrorCode::Mismatch, e.to_string()))?;
                let hash = d.digest_hash(self.signer.chain_id(), self.signer.market());
                // Issue 22: the node must be able to post what it co-signs, so the
                // owner's own signature of the digest comes with the request.
                if owner_signature.is_empty() {
                    return Err(Fail::new(
                        ErrorCode::Unauthorized,
                        "a Cosign request must carry the owner's signature of the digest (owner_signature, docs/PROTOCOL.md): update the client",
                    ));
                }
                let digest_signer = recover_prehash(hash, &owner_signature)
                    .map_err(|e| Fail::new(ErrorCode::Unauthorized, format!("owner_signature: {e}")))?;
                if digest_signer != owner {
                    return Err(Fail::new(
                        ErrorCode::Unauthorized,
                        format!("owner_signature of digest {hash} recovers to {digest_signer}, not the deal's owner {owner}"),
                    ));
                }
                let (d2, signer, owner_sig) = (d.clone(), self.signer.clone(), owner_signature.into_vec());
                let signature = self
                    .blocking(move |s| s.cosign(deal, &d2, CosignKind::Digest, owner_sig, || signer.sign(hash)))
                    .await?;
                tracing::info!(deal, version = d.version, %hash, "co-signed digest");
                Ok(Response::Cosigned { signature: ByteBuf::from(signature), provider: self.signer.address() })
            }
            OwnerOp::Resize { num_blocks } => {
                let chain = self.chain_deal(deal).await?;
                if !chain.active {
                    return Err(Fail::new(ErrorCode::WrongPhase, format!("deal {deal} is not active on chain")));
                }
                if let Some(p) = self.resize_policy {
                    if num_blocks > p.max_blocks {
                        return Err(Fail::new(
                            ErrorCode::DiskFull,
                            format!("a deal of {num_blocks} blocks is over this node's capacity of {} blocks", p.max_blocks),
                        ));
                    }
                }
                let out = self.blocking(move |s| s.resize(deal, nonce, num_blocks)).await?;
                Ok(Response::Written { step: out.step.into(), run: out.run.into(), run_root: out.run_root, root_u: out.root_u })
            }
            OwnerOp::CosignResize { digest, price_per_epoch, collateral } => {
                if digest.deal != deal {
                    return Err(Fail::new(ErrorCode::Mismatch, format!("digest for deal {} sent for deal {deal}", digest.deal)));
                }
                let resize = Resize { digest: Digest::from(&digest), pricePerEpoch: price_per_epoch, collateral };
                resize.validate().map_err(|e| Fail::new(ErrorCode::Mismatch, format!("not a resize digest: {e}")))?;
                let n = resize.digest.numBlocks;
                let chain = self.chain_deal(deal).await?;
                if !chain.active || chain.num_blocks == n {
                    return Err(Fail::new(
                        ErrorCode::Mismatch,
                        format!("deal {deal} already has N = {} on chain (active: {}): co-sign its digest instead", chain.num_blocks, chain.active),
                    ));
                }
                if let Some(p) = self.resize_policy {
                    let ask = p.price_per_block_epoch.saturating_mul(u128::from(n));
                    let most = p.collateral_per_block.saturating_mul(u128::from(n));
                    if price_per_epoch < ask || collateral > most {
                        return Err(Fail::new(
                            ErrorCode::Mismatch,
                            format!(
                                "terms refused for N' = {n}: price {price_per_epoch} wei/epoch (ask ≥ {ask}), collateral {collateral} wei (≤ {most})"
                            ),
                        ));
                    }
                }
                let d2 = resize.digest.clone();
                self.blocking(move |s| s.precheck_cosign(deal, &d2)).await?;
                self.deals
                    .prepare_resize(deal, collateral)
                    .await
                    .map_err(|e| Fail::new(ErrorCode::Internal, format!("cannot lock the new collateral: {e:#}")))?;
                let hash = resize.signing_hash(self.signer.chain_id(), self.signer.market());
                // Recorded (its runs pinned until a version ≥ its own is posted) before
                // the signature leaves the node; only `resizeDeal` can post it, which
                // the node does not do itself (no owner signature of the resize).
                let (d2, signer) = (resize.digest.clone(), self.signer.clone());
                let signature = self
                    .blocking(move |s| s.cosign(deal, &d2, CosignKind::Resize, Vec::new(), || signer.sign(hash)))
                    .await?;
                tracing::info!(deal, n, price_per_epoch, collateral, %hash, "co-signed a resize");
                Ok(Response::Cosigned { signature: ByteBuf::from(signature), provider: self.signer.address() })
            }
        }
    }
}

#[async_trait]
impl dpor_proto::net::Handler<Request, Response> for NodeHandler {
    fn response_too_large(&self, len: u64, max: u64) -> Option<Response> {
        Some(Response::error(ErrorCode::TooLarge, format!("the answer is {len} bytes, over the {max}-byte frame limit; ask for fewer items")))
    }

    async fn handle(&self, _peer: PeerId, request: Result<Request, FrameError>) -> Response {
        match request {
            Ok(r) => self.answer(r).await,
            Err(e) => {
                let code = match e {
                    FrameError::TooLarge { .. } => ErrorCode::TooLarge,
                    _ => ErrorCode::Malformed,
                };
                Response::error(code, e.to_string())
            }
        }
    }
}

/// What the metrics learn of an owner request once parsed: its operation's kind and
/// the block bytes it carries.
struct OpInfo {
    kind: &'static str,
    written: u64,
}

/// Flips one bit of a block (testing only).
/// Testing only ([`Misbehavior::PartialBlocks`]): zeroes the second half of a coded
/// block, as a node that stored only its first half would serve it.
pub fn keep_half(block: &mut [u8]) {
    let h = block.len() / 2;
    block[h..].iter_mut().for_each(|x| *x = 0);
}

fn flip(block: &mut [u8]) {
    if let Some(b) = block.get_mut(block.len() / 2) {
        *b ^= 1;
    }
}

/// The wire status of a deal view.
pub fn status(view: &crate::store::DealView) -> DealStatus {
    DealStatus {
        deal: view.params.deal,
        phase: match view.phase {
            Phase::Uploading { received } => WirePhase::Uploading { received },
            Phase::Live => WirePhase::Live,
        },
        num_blocks: view.params.num_blocks,
        block_bytes: view.params.block_bytes,
        last_nonce: view.last_nonce,
        write_count: view.write_count,
        rebuild_count: view.rebuild_count,
        root_u: view.root_u,
        c: (WireRun::from(view.c.0), view.c.1),
        levels: view.levels.iter().map(|(l, r, root)| (*l, WireRun::from(*r), *root)).collect(),
        cosigned_version: view.cosigned.as_ref().map(|d| d.version),
        posted_version: view.posted.as_ref().map(|d| d.version),
        damaged: view.damaged.clone(),
    }
}

/// Refuses a batch of `count` items of `item_bytes` over [`MAX_BATCH_BYTES`].
fn check_batch(count: u64, item_bytes: u64) -> Result<(), Fail> {
    if count > batch_len(item_bytes) || count.saturating_mul(item_bytes) > MAX_BATCH_BYTES.max(item_bytes) {
        return Err(Fail::new(
            ErrorCode::TooLarge,
            format!("{count} items of {item_bytes} bytes is over the {MAX_BATCH_BYTES}-byte batch limit (ask for at most {})", batch_len(item_bytes)),
        ));
    }
    Ok(())
}

/// A refused request: a code and a message.
type Fail = dpor_proto::messages::WireError;

trait FailExt {
    fn new(code: ErrorCode, message: impl Into<String>) -> Self;
}

impl FailExt for Fail {
    fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Fail { code, message: message.into() }
    }
}

impl From<StoreError> for Fail {
    fn from(e: StoreError) -> Self {
        let code = match &e {
            StoreError::UnknownDeal(_) => ErrorCode::UnknownDeal,
            StoreError::UnknownRun { .. } => ErrorCode::UnknownRun,
            StoreError::Replay { .. } => ErrorCode::Replay,
            StoreError::Index { .. } | StoreError::Range { .. } | StoreError::Params(_) => ErrorCode::OutOfRange,
            StoreError::BlockSize { .. } => ErrorCode::BadBlock,
            StoreError::Phase(_) | StoreError::Unposted { .. } => ErrorCode::WrongPhase,
            StoreError::StaleVersion { .. } => ErrorCode::StaleVersion,
            StoreError::DigestMismatch(_) => ErrorCode::Mismatch,
            StoreError::DiskFull { .. } => ErrorCode::DiskFull,
            StoreError::Damaged { .. } => ErrorCode::Damaged,
            _ => ErrorCode::Internal,
        };
        Fail { code, message: e.to_string() }
    }
}

/// The blocks of a request signed over block roots, once each block's chunk tree
/// (hashed on the blocking pool, all cores) gives the root the owner signed for it, in
/// order; else [`ErrorCode::Unauthorized`] naming the first that does not (the
/// signature does not cover that block). The caller checked the counts.
async fn signed_blocks(blocks: Vec<ByteBuf>, roots: Vec<B256>) -> Result<Vec<Vec<u8>>, Fail> {
    let checked = tokio::task::spawn_blocking(move || {
        let blocks: Vec<Vec<u8>> = blocks.into_iter().map(ByteBuf::into_vec).collect();
        let hashed = dpor_core::merkle::block_roots(&blocks);
        match hashed.iter().zip(&roots).position(|(h, r)| h != r) {
            None => Ok(blocks),
            Some(i) => Err(Fail::new(ErrorCode::Unauthorized, format!("block {i} of the request does not hash to the block root the owner signed"))),
        }
    });
    match checked.await {
        Ok(r) => r,
        Err(e) => Err(Fail::new(ErrorCode::Internal, format!("hashing the blocks failed: {e}"))),
    }
}

/// The wire answer of a batch of writes.
fn batch_response(b: &crate::store::BatchOutcome) -> Response {
    Response::WrittenBatch { count: b.count, root_u: b.root_u, runs: b.runs.iter().map(|(id, root)| ((*id).into(), *root)).collect() }
}

#[cfg(test)]
mod serve_rate_tests {
    use super::ServeRate;
    use std::time::Duration;

    /// Paced answers leave at the configured rate, back to back, whatever their
    /// concurrency: 5 × 200 KB at 1 MB/s take 1 s of (paused, virtual) time, and an
    /// idle link does not bank credit.
    #[tokio::test(start_paused = true)]
    async fn answers_leave_at_the_rate_and_idle_time_is_not_banked() {
        let r = std::sync::Arc::new(ServeRate { bytes_per_sec: 1_000_000, free_at: tokio::sync::Mutex::new(tokio::time::Instant::now()) });
        let t0 = tokio::time::Instant::now();
        let mut tasks = Vec::new();
        for _ in 0..5 {
            let r = r.clone();
            tasks.push(tokio::spawn(async move { r.pace(200_000).await }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        assert_eq!(t0.elapsed(), Duration::from_secs(1));
        tokio::time::sleep(Duration::from_secs(10)).await;
        let t1 = tokio::time::Instant::now();
        r.pace(500_000).await;
        assert_eq!(t1.elapsed(), Duration::from_millis(500));
    }
}
