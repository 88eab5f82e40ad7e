//! Opening a dispute on one sample of a deal's current digest (`dpor dispute`;
//! docs/CONTRACTS.md §7), locking the dispute bond (approved first if needed).

use super::{deal_info, default_epoch, revert_name};
use crate::session::Session;
use alloy_primitives::B256;
use anyhow::{ensure, Context};

/// What to dispute: `dpor dispute`'s arguments.
#[derive(Debug, Clone, Copy)]
pub struct DisputeRequest {
    /// The deal.
    pub deal: u64,
    /// The epoch of the failed audit (default: the current epoch).
    pub epoch: Option<u64>,
    /// The run: 0 for C, ℓ + 1 for level ℓ of H.
    pub run_tag: u8,
    /// Position of the coded block in the run.
    pub position: u64,
    /// The 128-byte chunk of that coded block the provider must open.
    pub chunk: u32,
    /// The failed audit's transcript hash.
    pub transcript: B256,
}

/// A dispute opened ([`open`]).
#[derive(Debug, Clone)]
pub struct Opened {
    /// Its id.
    pub id: u64,
    /// The epoch named.
    pub epoch: u64,
    /// The digest version disputed (the deal's current one).
    pub version: u64,
    /// The provider must answer by this timestamp.
    pub deadline: u64,
    /// The bond locked, token base units.
    pub bond: u128,
    /// The disputed digest's hash.
    pub digest_hash: B256,
}

/// Opens the dispute `req` names on the deal's current digest.
///
/// # Errors
/// No such deal, no digest, no epoch to default to, or the chain refuses (with a hint
/// for the usual reverts).
pub async fn open(ctx: &Session, req: &DisputeRequest) -> anyhow::Result<Opened> {
    let DisputeRequest { deal, epoch, run_tag, position, chunk, transcript } = *req;
    let d = deal_info(ctx, deal).await?;
    ensure!(d.has_digest(), "deal {deal} has no posted digest: there is nothing to dispute");
    let epoch = match epoch {
        Some(e) => e,
        None => default_epoch(ctx, &d).await?,
    };
    let version = d.digest_version;
    let id = match ctx.market.open_dispute(deal, epoch, version, transcript, run_tag, position, chunk).await {
        Ok(id) => id,
        Err(e) => {
            let e = anyhow::Error::new(e);
            let hint = match revert_name(&e).as_deref() {
                Some("WrongSample") => " (no such run, position or chunk in the current digest)".to_string(),
                Some("StaleVersion") => " (a newer digest was posted meanwhile)".to_string(),
                Some(n) if n.starts_with("ERC20") => " (the bond: mint or buy tokens, the allowance is set automatically)".to_string(),
                _ => String::new(),
            };
            return Err(e).context(format!("opening a dispute on deal {deal}{hint}"));
        }
    };
    let q = ctx.market.get_dispute(id).await.context("reading the dispute back")?;
    Ok(Opened { id, epoch, version, deadline: q.deadline, bond: q.bond, digest_hash: q.digest_hash })
}
