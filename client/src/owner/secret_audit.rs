//! The owner's compact secret audit (`dpor audit --secret`) (§5.5; docs/SCHEME.md §9).
//!
//! The owner draws a fresh seed and asks the node, for C and every filled level of its
//! current verified state, for one aggregated coded block Σ r_j·B_{p_j} over λ
//! positions (positions and coefficients derived from the seed by both sides,
//! `dpor_core::secret_audit::challenge`) and the σ̃ of those positions (not for levels
//! whose σ the owner caches). It checks σ(aggregate) against Σ r_j·σ_j with its secret
//! checksum keys. About one coded block and λ·32 bytes per run cross the wire, against
//! λ coded blocks with their paths for the public audit. A failed run means a sampled
//! coded block is wrong or missing on the node; the audit cannot say which (use the
//! public audit or `extract` to locate it) and has no on-chain consequence.

use crate::node_client::NodeClient;
use crate::owner_state::{sigma_from_u64, OwnerState};
use anyhow::ensure;
use dpor_core::checksum::RHO;
use dpor_core::secret_audit::{challenge, verify_run, MAX_SECRET_LAMBDA};
use dpor_core::RunId;
use dpor_proto::messages::{Request, Response, SecretRunAsk, MAX_BATCH_BYTES};
use serde::Serialize;
use std::time::Instant;

/// The verdict on one run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RunVerdict {
    /// The run's name (`C@0`, `H3@40`, …).
    pub run: String,
    /// Its size in coded blocks.
    pub size: u64,
    /// Positions sampled (λ, or the whole run if smaller).
    pub samples: usize,
    /// True if σ came from the owner's cache (no σ̃ fetched).
    pub cached: bool,
    /// Why the run failed, if it did.
    pub fault: Option<String>,
}

/// What a secret audit found.
#[derive(Debug, Clone, Serialize)]
pub struct SecretAuditReport {
    /// Per run, in run order (C, then levels ascending).
    pub runs: Vec<RunVerdict>,
    /// λ used.
    pub lambda: u32,
    /// Message bytes sent to the node (frames included).
    pub bytes_sent: u64,
    /// Message bytes received from the node.
    pub bytes_received: u64,
    /// Wall time, seconds.
    pub seconds: f64,
}

impl SecretAuditReport {
    /// True if every run passed.
    pub fn passed(&self) -> bool {
        self.runs.iter().all(|r| r.fault.is_none())
    }
}

/// Runs the secret audit of `state`'s current runs against `node` with `seed` (draw a
/// fresh random one per audit: a node that knows the seed in advance can keep only the
/// aggregates) and λ = `lambda`. A run that fails is reported in its verdict; errors
/// are for audits that could not be run (node unreachable, refused, malformed answer).
///
/// Errors: λ out of range, no uploaded state, the node's refusal, an answer that does
/// not name the runs asked.
pub async fn secret_audit(node: &NodeClient, state: &OwnerState, lambda: u32, seed: [u8; 32]) -> anyhow::Result<SecretAuditReport> {
    ensure!((1..=MAX_SECRET_LAMBDA).contains(&lambda), "λ = {lambda} is out of range 1..={MAX_SECRET_LAMBDA}");
    ensure!(state.uploaded, "upload the file first: there is nothing to audit");
    ensure!(
        state.c_snapshot.is_none() && state.runs().iter().all(|(e, _)| e.root != alloy_primitives::B256::ZERO),
        "the runs of the last batches of writes are being built and have no checksums on the node yet: run `dpor checkpoint` first"
    );
    let keys = state.keys()?;
    let format = state.format()?;
    let started = Instant::now();
    let (s0, r0) = node.traffic();
    // Each run: its name, size, cached σ (if complete) and challenge.
    let mut plan = Vec::new();
    for (entry, size) in state.runs() {
        let id = RunId::from(entry.run);
        let cached = match &entry.sigma {
            Some(v) if v.len() as u64 == size * RHO as u64 => Some(sigma_from_u64(v)?),
            _ => None,
        };
        let ch = challenge(&seed, id, size, lambda)?;
        plan.push((entry.run, size, cached, ch));
    }
    let per_run = format.coded_block_bytes() as u64 + 34 * lambda as u64;
    let per_request = (MAX_BATCH_BYTES / per_run).max(1) as usize;
    let mut runs = Vec::with_capacity(plan.len());
    for batch in plan.chunks(per_request) {
        let asks: Vec<SecretRunAsk> = batch.iter().map(|(run, _, cached, _)| SecretRunAsk { run: *run, sealed: cached.is_none() }).collect();
        let request = Request::SecretAudit { deal: state.deal, seed: seed.into(), lambda, runs: asks };
        let proofs = match node.call(request).await? {
            Response::SecretAudit { runs } => runs,
            other => return crate::node_client::unexpected("secret-audit", &other),
        };
        ensure!(proofs.len() == batch.len(), "the node answered {} runs of the {} asked", proofs.len(), batch.len());
        for ((run, size, cached, ch), proof) in batch.iter().zip(proofs) {
            let id = RunId::from(*run);
            let fault = if proof.run != *run {
                Some(format!("the node answered for run {} instead", RunId::from(proof.run)))
            } else {
                let sealed: Vec<Option<[u8; 32]>> = proof.sealed.iter().map(|s| s.map(|b| b.0)).collect();
                verify_run(&keys, &format, ch, &proof.aggregate, &sealed, cached.as_deref()).err().map(|f| f.to_string())
            };
            runs.push(RunVerdict { run: id.to_string(), size: *size, samples: ch.positions.len(), cached: cached.is_some(), fault });
        }
    }
    let (s1, r1) = node.traffic();
    Ok(SecretAuditReport {
        runs,
        lambda,
        bytes_sent: s1 - s0,
        bytes_received: r1 - r0,
        seconds: started.elapsed().as_secs_f64(),
    })
}
