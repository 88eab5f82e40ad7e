//! `dpor audit DEAL [--epoch E] [--record] [--dispute]`: the public audit
//! (SCHEME.md §9, ENCODING.md §7).
//!
//! 1. digest = the latest `DigestPosted` preimage of the deal, whose EIP-712 hash must
//!    equal both the log's hash and the hash the contract stores for the deal;
//! 2. seed = the epoch's seed (`epochSeeds`, else `peekSeed`); λ and β from the deal;
//! 3. plan = `audit_plan(digest, hash, seed, λ)`: λ positions per run (runs of ≤ λ
//!    blocks whole), runs named by `Digest::run_ids`;
//! 4. each run's samples are asked from the node in batches that fit one message; a
//!    node error or timeout for a run makes that run's remaining samples Missing and
//!    never aborts the audit (a node that does not answer fails it);
//! 5. `verify_audit` checks every sample's length and run path against the digest;
//! 6. the transcript hash ([`transcript_hash`]) summarizes what the node returned;
//! 7. with `--record` the outcome is posted (`recordAudit`); with `--dispute` a
//!    failure opens a dispute on the first failed sample ([`dispute_target`]);
//! 8. the report ([`Audit`]) says what was found and done; the caller (the CLI) prints it
//!    and fails a failed audit after that.

use super::{deal_info, default_epoch, revert_name};
use crate::node_client::NodeClient;
use crate::progress::Progress;
use crate::session::Session;
use alloy_primitives::{keccak256, B256};
use anyhow::{bail, ensure, Context};
use dpor_core::audit::{audit_plan, verify_audit, RunResponse, SampleFailure, SampleFault, SampleResponse};
use dpor_core::merkle::{chunk_count, CHUNK_BYTES};
use dpor_core::{BlockFormat, RunId, RunTag};
use dpor_proto::messages::{batch_len, WireRun};
use std::time::Instant;

/// Domain of the audit transcript hash ([`transcript_hash`]).
pub const TRANSCRIPT_DOMAIN: &[u8] = b"dpor.audit-transcript.v1";

/// The transcript hash of an audit: keccak256 of the canonical encoding
///
/// ```text
/// "dpor.audit-transcript.v1" ‖ digest hash (32) ‖ seed (32) ‖ u64be(runs)
///   ‖ for each run, in run order (C, then filled levels ascending):
///       u32be(tag) ‖ u64be(built_at) ‖ u64be(samples returned)
///       ‖ for each returned sample, in the order asked:
///           u64be(position) ‖ keccak256(coded block) ‖ keccak256(path[0] ‖ … ‖ path[d−1])
/// ```
///
/// Everything is fixed-width and counted, so the encoding is injective: two audits
/// have the same transcript hash exactly when they audited the same digest with the
/// same seed and the node returned the same blocks and paths (positions with no
/// answer are simply absent: the count says how many came back). With λ from the deal
/// the digest and seed determine the positions asked, so anyone holding the
/// returned samples can recompute the hash and the verdict.
pub fn transcript_hash(digest_hash: B256, seed: B256, runs: &[(RunId, Vec<SampleResponse>)]) -> B256 {
    let mut buf = Vec::with_capacity(TRANSCRIPT_DOMAIN.len() + 72 + runs.iter().map(|r| 20 + 72 * r.1.len()).sum::<usize>());
    buf.extend_from_slice(TRANSCRIPT_DOMAIN);
    buf.extend_from_slice(digest_hash.as_slice());
    buf.extend_from_slice(seed.as_slice());
    buf.extend_from_slice(&(runs.len() as u64).to_be_bytes());
    for (id, samples) in runs {
        buf.extend_from_slice(&id.tag.0.to_be_bytes());
        buf.extend_from_slice(&id.built_at.to_be_bytes());
        buf.extend_from_slice(&(samples.len() as u64).to_be_bytes());
        for s in samples {
            buf.extend_from_slice(&s.position.to_be_bytes());
            buf.extend_from_slice(keccak256(&s.block).as_slice());
            let mut path = Vec::with_capacity(32 * s.path.len());
            for h in &s.path {
                path.extend_from_slice(h.as_slice());
            }
            buf.extend_from_slice(keccak256(&path).as_slice());
        }
    }
    keccak256(&buf)
}

/// What a dispute on a failed sample names: (run tag, position, chunk index).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DisputeTarget {
    /// The run (0 = C, ℓ + 1 = level ℓ).
    pub run_tag: u8,
    /// Position in the run.
    pub position: u64,
    /// The 128-byte chunk of the coded block the provider must open.
    pub chunk: u32,
}

/// The dispute arguments for a failed sample, given what the node returned for it.
///
/// The run and position are the failed sample's. The chunk is the challenger's
/// choice (docs/CONTRACTS.md §7): the provider can answer only by producing the chunk
/// whose hash chains, through the block's chunk tree and the run path, to the run root
/// of the signed digest, i.e. the right data; so the challenger should name a chunk
/// the provider cannot open. What the auditor knows:
///
/// - the block is missing, or came for the wrong position, or has the wrong length:
///   nothing about which chunks the provider still has → chunk 0;
/// - the block came but its run path does not lead to the root: some chunk of the
///   block (or the path) is wrong, but without the right block root the auditor cannot
///   tell which; a provider that lost data typically returns it zeroed (that is also
///   what `dpor-node erase` does), and a coded block's chunk is all zeros essentially
///   only if it was lost, so the first all-zero chunk is named if there is one, else
///   chunk 0. If the block was right and only the path wrong, the provider can answer
///   any chunk and the dispute is lost, whatever chunk is named: that is the cost of
///   not being able to tell, and why the bond exists.
///
/// Returns `None` if the tag does not fit the contract's `uint8`.
pub fn dispute_target(failure: &SampleFailure, returned: Option<&SampleResponse>, coded_block_bytes: usize) -> Option<DisputeTarget> {
    let run_tag = u8::try_from(failure.tag.0).ok()?;
    let chunks = chunk_count(coded_block_bytes).max(1);
    let chunk = match (&failure.fault, returned) {
        (SampleFault::Path(_), Some(s)) if s.block.len() == coded_block_bytes => {
            s.block.chunks(CHUNK_BYTES).take(chunks).position(|c| c.iter().all(|&b| b == 0)).unwrap_or(0)
        }
        _ => 0,
    };
    Some(DisputeTarget { run_tag, position: failure.position, chunk: u32::try_from(chunk).ok()? })
}

/// One run's answer as collected from the node.
struct Collected {
    id: RunId,
    samples: Vec<SampleResponse>,
    /// Why the run's answer stopped short, if it did.
    error: Option<String>,
}

/// Asks the node for `positions` of `run` in batches of `batch`; stops at the first
/// error (the rest count as Missing).
async fn collect_run(
    node: Option<&NodeClient>,
    deal: u64,
    id: RunId,
    positions: &[u64],
    batch: usize,
    bar: Option<&dyn Progress>,
    coded_bytes: u64,
) -> Collected {
    let mut out = Collected { id, samples: Vec::with_capacity(positions.len()), error: None };
    let Some(node) = node else {
        out.error = Some("node unreachable".into());
        return out;
    };
    for chunk in positions.chunks(batch.max(1)) {
        match node.samples(deal, WireRun::from(id), chunk.to_vec()).await {
            Ok(got) => {
                if let Some(bar) = bar {
                    bar.inc(coded_bytes * got.len() as u64);
                }
                out.samples.extend(got.into_iter().map(|s| SampleResponse {
                    position: s.position,
                    block: s.block.into_vec(),
                    path: s.path,
                }));
            }
            Err(e) => {
                out.error = Some(format!("{e:#}"));
                break;
            }
        }
    }
    out
}

/// A run's name for people (`C`, `H3`, ...).
pub fn run_label(tag: RunTag) -> String {
    tag.to_string()
}

/// The seed of the audit of `epoch`: the epoch's sample seed once it cannot change
/// (stored, or a recorded beacon round). In dev mode an untouched seed is stored first
/// (`touchSeed`, needs a key); otherwise the previous epoch's seed is used. Returns the
/// epoch actually used.
///
/// # Errors
/// The chain cannot be read, or no seed of `epoch` (nor of the one before) exists yet.
pub async fn audit_seed(ctx: &Session, deal: u64, epoch: u64) -> anyhow::Result<(u64, B256)> {
    if let Some(s) = ctx.market.stable_epoch_seed(deal, epoch).await.context("reading the epoch seed")? {
        return Ok((epoch, s));
    }
    if ctx.market.account().is_some() && ctx.market.epoch_seed(deal, epoch).await?.is_some() {
        // dev mode, started but untouched: store it (the seed is then final)
        if ctx.market.touch_seed(deal, epoch).await.is_ok() {
            if let Some(s) = ctx.market.stable_epoch_seed(deal, epoch).await? {
                return Ok((epoch, s));
            }
        }
    }
    if epoch > 0 {
        if let Some(s) = ctx.market.stable_epoch_seed(deal, epoch - 1).await? {
            return Ok((epoch - 1, s));
        }
    }
    bail!("the seed of epoch {epoch} of deal {deal} is not available yet (epoch not started, or its beacon round not recorded)")
}

/// When a failed audit opens a dispute.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DisputePolicy {
    /// Never (report and record only).
    Never,
    /// On the first failed sample, whatever the fault (`dpor audit --dispute`).
    FirstFailure,
    /// Only on a sample the node served wrong (a block that came back with the wrong
    /// position, length or root): a node that does not answer is a missed epoch, not a
    /// dispute (`dpor watch` until its retries run out).
    ServedWrong,
}

/// One run of an audit, as asked and answered.
#[derive(Debug, Clone)]
pub struct RunReport {
    /// The run.
    pub tag: RunTag,
    /// Its build time (0 if the digest names none).
    pub built_at: u64,
    /// Its size in coded blocks (0 if unknown).
    pub size: u64,
    /// Samples asked.
    pub asked: usize,
    /// Samples the node returned.
    pub returned: usize,
    /// Samples that failed.
    pub failed: usize,
    /// Why the node's answer stopped short, if it did.
    pub error: Option<String>,
}

/// What happened to the dispute an audit's policy called for.
#[derive(Debug, Clone)]
pub enum DisputeOutcome {
    /// Opened.
    Opened {
        /// The dispute's id.
        id: u64,
        /// What it names.
        target: DisputeTarget,
        /// The provider must answer by this timestamp.
        deadline: u64,
        /// The bond locked, token base units.
        bond: u128,
    },
    /// The chain refused, or the digest changed since the audit (`{e:#}`).
    Failed(String),
    /// The failed sample's run tag does not fit a dispute (nothing sent).
    Unfit,
}

/// What happened to the record of an audit's outcome.
#[derive(Debug, Clone)]
pub enum RecordOutcome {
    /// Recorded on chain as this audit id.
    Recorded(u64),
    /// The chain refused (the error).
    Failed(String),
}

/// An audit's report ([`run_with`]).
#[derive(Debug)]
pub struct Audit {
    /// The deal.
    pub deal: u64,
    /// The epoch whose seed was used.
    pub epoch: u64,
    /// The digest audited: its version.
    pub version: u64,
    /// Its EIP-712 hash.
    pub digest_hash: B256,
    /// The epoch's seed.
    pub seed: B256,
    /// λ, samples per run.
    pub lambda: u32,
    /// Per run, in plan order.
    pub runs: Vec<RunReport>,
    /// Samples checked.
    pub samples_checked: usize,
    /// Bytes received from the node.
    pub bytes_received: u64,
    /// Seconds taken by the audit itself (before any transaction).
    pub seconds: f64,
    /// Every sample verified.
    pub passed: bool,
    /// The failed samples.
    pub failures: Vec<SampleFailure>,
    /// The transcript hash ([`transcript_hash`]).
    pub transcript: B256,
    /// The node could not be reached (every sample then failed).
    pub node_error: Option<String>,
    /// The dispute, if the policy called for one.
    pub dispute: Option<DisputeOutcome>,
    /// The record, if asked for and no dispute was to be opened.
    pub record: Option<RecordOutcome>,
    /// An on-chain step that failed (dispute or record): the audit's report is
    /// complete, but the command fails.
    pub chain_error: Option<anyhow::Error>,
}

/// Runs the public audit of `deal` at `epoch` (default: [`default_epoch`]), recording
/// it (`record`) and opening a dispute per `policy`; the bytes received are reported to
/// `bar`. A node that cannot be reached fails every sample; an on-chain step that
/// fails is in [`Audit::chain_error`].
///
/// # Errors
/// No such deal, no digest, a posted digest that does not match the contract's hash or
/// is malformed, an epoch out of range, or no seed yet.
pub async fn run_with(
    ctx: &Session,
    deal: u64,
    epoch: Option<u64>,
    record: bool,
    policy: DisputePolicy,
    bar: Option<&dyn Progress>,
) -> anyhow::Result<Audit> {
    let started = Instant::now();
    let d = deal_info(ctx, deal).await?;
    ensure!(d.has_digest(), "deal {deal} has no posted digest yet: there is nothing to audit");
    let (digest, hash) = ctx
        .market
        .latest_digest(deal)
        .await
        .context("reading the posted digests")?
        .with_context(|| format!("no DigestPosted log found for deal {deal}"))?;
    ensure!(
        hash == d.digest_hash,
        "the latest DigestPosted log of deal {deal} (v{}, {hash}) is not the digest the contract holds (v{}, {})",
        digest.version,
        d.digest_version,
        d.digest_hash
    );
    let local = digest.digest_hash(ctx.market.chain_id(), ctx.market.address());
    ensure!(local == hash, "the posted digest's preimage hashes to {local}, not to the stored {hash}");
    digest.validate().context("the posted digest is malformed")?;

    let epoch = match epoch {
        Some(e) => e,
        None => default_epoch(ctx, &d).await?,
    };
    ensure!(epoch < u64::from(d.num_epochs), "deal {deal} has {} epochs; epoch {epoch} is out of range", d.num_epochs);
    let (epoch, seed) = audit_seed(ctx, deal, epoch).await?;

    let lambda = u32::from(d.lambda).max(1);
    let format = BlockFormat::new(d.block_size as usize).with_context(|| format!("deal {deal} has block size {}", d.block_size))?;
    let coded_bytes = format.coded_block_bytes();
    let plan = audit_plan(&digest, hash, seed, lambda);
    let ids = digest.run_ids();
    let total_samples: usize = plan.iter().map(|(_, p)| p.len()).sum();

    // Connect; a node that cannot be reached fails every sample (it does not abort).
    let node = match ctx.node_for_deal(deal).await {
        Ok(n) => Some(n),
        Err(e) => {
            tracing::warn!("cannot reach the provider's node: {e:#}");
            None
        }
    };
    let connect_error = if node.is_none() { Some("the provider's node could not be reached".to_string()) } else { None };

    if let Some(bar) = bar {
        bar.set_length((total_samples * coded_bytes) as u64);
    }
    let mut collected = Vec::with_capacity(plan.len());
    for (tag, positions) in &plan {
        let Some((id, size, _)) = ids.iter().find(|(id, _, _)| id.tag == *tag) else {
            // Cannot happen for a validated digest; count the run as unanswered.
            collected.push(Collected {
                id: RunId { tag: *tag, built_at: 0 },
                samples: Vec::new(),
                error: Some("run has no build time".into()),
            });
            continue;
        };
        let path_bytes = 32 * u64::from(size.trailing_zeros());
        let batch = batch_len(coded_bytes as u64 + path_bytes + 64) as usize;
        collected.push(collect_run(node.as_ref(), deal, *id, positions, batch, bar, coded_bytes as u64).await);
    }

    let responses: Vec<RunResponse> = collected.iter().map(|c| RunResponse { tag: c.id.tag, samples: c.samples.clone() }).collect();
    let outcome = verify_audit(&digest, hash, seed, lambda, &format, &responses);
    let transcript_runs: Vec<(RunId, Vec<SampleResponse>)> = collected.iter().map(|c| (c.id, c.samples.clone())).collect();
    let transcript = transcript_hash(hash, seed, &transcript_runs);
    let bytes_received = node.as_ref().map(|n| n.traffic().1).unwrap_or(0);
    let seconds = started.elapsed().as_secs_f64();
    let passed = outcome.passed();
    let runs: Vec<RunReport> = plan
        .iter()
        .zip(&collected)
        .map(|((tag, positions), c)| RunReport {
            tag: *tag,
            built_at: c.id.built_at,
            size: ids.iter().find(|(id, _, _)| id.tag == *tag).map(|r| r.1).unwrap_or(0),
            asked: positions.len(),
            returned: c.samples.len(),
            failed: outcome.failures.iter().filter(|f| f.tag == *tag).count(),
            error: c.error.clone(),
        })
        .collect();
    let mut report = Audit {
        deal,
        epoch,
        version: digest.version,
        digest_hash: hash,
        seed,
        lambda,
        runs,
        samples_checked: outcome.checked,
        bytes_received,
        seconds,
        passed,
        failures: outcome.failures.clone(),
        transcript,
        node_error: connect_error,
        dispute: None,
        record: None,
        chain_error: None,
    };

    // On-chain consequences. Errors here are reported, and fail the command, but only
    // after the report is complete.
    let target_failure = match policy {
        DisputePolicy::Never => None,
        DisputePolicy::FirstFailure => outcome.failures.first(),
        DisputePolicy::ServedWrong => outcome.failures.iter().find(|f| !matches!(f.fault, SampleFault::Missing)),
    };
    let open = target_failure.is_some();
    if let Some(first) = target_failure {
        let returned =
            collected.iter().find(|c| c.id.tag == first.tag).and_then(|c| c.samples.iter().find(|s| s.position == first.position));
        match dispute_target(first, returned, coded_bytes) {
            None => {
                report.dispute = Some(DisputeOutcome::Unfit);
                report.chain_error = Some(anyhow::anyhow!("run tag {} does not fit a dispute", first.tag.0));
            }
            Some(t) => {
                let result = async {
                    let now = deal_info(ctx, deal).await?;
                    ensure!(
                        now.digest_version == digest.version,
                        "digest v{} was posted since the audit of v{}: a dispute must name the latest version; audit again",
                        now.digest_version,
                        digest.version
                    );
                    let id = ctx.market.open_dispute(deal, epoch, digest.version, transcript, t.run_tag, t.position, t.chunk).await?;
                    let info = ctx.market.get_dispute(id).await?;
                    Ok((id, info.deadline, info.bond))
                }
                .await;
                match result {
                    Ok((id, deadline, bond)) => report.dispute = Some(DisputeOutcome::Opened { id, target: t, deadline, bond }),
                    Err(e) => {
                        let name = revert_name(&e);
                        report.dispute = Some(DisputeOutcome::Failed(format!("{e:#}")));
                        report.chain_error = Some(e.context(match name {
                            Some(n) => format!("openDispute rejected: {n}"),
                            None => "opening the dispute".to_string(),
                        }));
                    }
                }
            }
        }
    }
    if record && !open {
        match ctx.market.record_audit(deal, epoch, digest.version, passed, transcript).await {
            Ok(id) => report.record = Some(RecordOutcome::Recorded(id)),
            Err(e) => {
                report.record = Some(RecordOutcome::Failed(e.to_string()));
                report.chain_error = Some(anyhow::Error::new(e).context("recording the audit"));
            }
        }
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use dpor_core::merkle::MerkleError;

    fn sample(position: u64, fill: u8) -> SampleResponse {
        SampleResponse { position, block: vec![fill; 4696], path: vec![B256::repeat_byte(fill), B256::repeat_byte(fill ^ 1)] }
    }

    fn runs() -> Vec<(RunId, Vec<SampleResponse>)> {
        vec![
            (RunId { tag: RunTag::C, built_at: 0 }, vec![sample(3, 1), sample(9, 2)]),
            (RunId { tag: RunTag::level(2), built_at: 12 }, vec![sample(0, 3)]),
        ]
    }

    #[test]
    fn transcript_is_deterministic() {
        let (d, s) = (B256::repeat_byte(0xd1), B256::repeat_byte(0x5e));
        assert_eq!(transcript_hash(d, s, &runs()), transcript_hash(d, s, &runs()));
        assert_eq!(transcript_hash(d, s, &runs()), transcript_hash(d, s, &runs().clone()));
    }

    #[test]
    fn transcript_binds_every_part() {
        let (d, s) = (B256::repeat_byte(0xd1), B256::repeat_byte(0x5e));
        let base = transcript_hash(d, s, &runs());
        assert_ne!(base, transcript_hash(B256::repeat_byte(0xd2), s, &runs()));
        assert_ne!(base, transcript_hash(d, B256::repeat_byte(0x5f), &runs()));
        let mut r = runs();
        r[0].1[1].block[100] ^= 1;
        assert_ne!(base, transcript_hash(d, s, &r), "a block byte");
        let mut r = runs();
        r[0].1[1].path[1] = B256::ZERO;
        assert_ne!(base, transcript_hash(d, s, &r), "a path hash");
        let mut r = runs();
        r[0].1[0].position = 4;
        assert_ne!(base, transcript_hash(d, s, &r), "a position");
        let mut r = runs();
        r[1].0.built_at = 13;
        assert_ne!(base, transcript_hash(d, s, &r), "a run's build time");
        let mut r = runs();
        r[0].1.pop();
        assert_ne!(base, transcript_hash(d, s, &r), "a missing sample");
        // Moving a sample from one run to the next is not the same transcript either.
        let mut r = runs();
        let moved = r[0].1.pop().unwrap();
        r[1].1.insert(0, moved);
        assert_ne!(base, transcript_hash(d, s, &r), "run boundaries");
        // Known answer for the empty audit (pins the encoding).
        let empty = transcript_hash(B256::ZERO, B256::ZERO, &[]);
        let mut buf = TRANSCRIPT_DOMAIN.to_vec();
        buf.extend_from_slice(&[0u8; 64]);
        buf.extend_from_slice(&0u64.to_be_bytes());
        assert_eq!(empty, keccak256(&buf));
    }

    fn failure(tag: RunTag, position: u64, fault: SampleFault) -> SampleFailure {
        SampleFailure { tag, position, fault }
    }

    #[test]
    fn missing_or_malformed_samples_dispute_chunk_zero() {
        let coded = 4696;
        let f = failure(RunTag::level(3), 17, SampleFault::Missing);
        assert_eq!(dispute_target(&f, None, coded), Some(DisputeTarget { run_tag: 4, position: 17, chunk: 0 }));
        let f = failure(RunTag::C, 5, SampleFault::WrongPosition(6));
        assert_eq!(dispute_target(&f, Some(&sample(6, 0)), coded), Some(DisputeTarget { run_tag: 0, position: 5, chunk: 0 }));
        let f = failure(RunTag::C, 5, SampleFault::Length { got: 10, expected: coded });
        let short = SampleResponse { position: 5, block: vec![0; 10], path: vec![] };
        assert_eq!(dispute_target(&f, Some(&short), coded).map(|t| t.chunk), Some(0));
    }

    #[test]
    fn a_wrong_block_disputes_its_first_zeroed_chunk() {
        let coded = 4696; // 37 chunks, the last one partial
        let f = failure(RunTag::level(0), 1, SampleFault::Path(MerkleError::Mismatch));
        // Whole block zeroed (what `dpor-node erase` does): chunk 0.
        assert_eq!(dispute_target(&f, Some(&sample(1, 0)), coded).map(|t| t.chunk), Some(0));
        // Chunks 0..4 intact, chunk 5 zeroed: chunk 5.
        let mut s = sample(1, 7);
        s.block[5 * CHUNK_BYTES..6 * CHUNK_BYTES].fill(0);
        assert_eq!(dispute_target(&f, Some(&s), coded), Some(DisputeTarget { run_tag: 1, position: 1, chunk: 5 }));
        // The last (partial) chunk zeroed.
        let mut s = sample(1, 7);
        s.block[36 * CHUNK_BYTES..].fill(0);
        assert_eq!(dispute_target(&f, Some(&s), coded).map(|t| t.chunk), Some(36));
        // Corrupted but nothing zeroed: no better guess than chunk 0.
        assert_eq!(dispute_target(&f, Some(&sample(1, 9)), coded).map(|t| t.chunk), Some(0));
    }

    #[test]
    fn tags_beyond_uint8_cannot_be_disputed() {
        let f = failure(RunTag(300), 0, SampleFault::Missing);
        assert_eq!(dispute_target(&f, None, 4696), None);
    }
}
