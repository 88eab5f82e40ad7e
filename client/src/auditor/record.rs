//! Posting an audit outcome (`dpor record`: `recordAudit`, no economic effect;
//! docs/CONTRACTS.md §7).

use super::{deal_info, revert_name};
use crate::session::Session;
use alloy_primitives::B256;
use anyhow::{ensure, Context};

/// Records the audit of `deal`'s epoch `epoch` against digest `version` (default: the
/// latest posted) as `passed` or failed, with its transcript hash. Returns (audit id,
/// the version recorded).
///
/// # Errors
/// No such deal, no digest, or the chain refuses (with a hint for the usual reverts).
pub async fn run(ctx: &Session, deal: u64, epoch: u64, version: Option<u64>, passed: bool, transcript: B256) -> anyhow::Result<(u64, u64)> {
    let d = deal_info(ctx, deal).await?;
    let version = version.unwrap_or(d.digest_version);
    ensure!(version > 0, "deal {deal} has no posted digest: there is no version to record an audit of");
    let id = match ctx.market.record_audit(deal, epoch, version, passed, transcript).await {
        Ok(id) => id,
        Err(e) => {
            let e = anyhow::Error::new(e);
            let hint = match revert_name(&e).as_deref() {
                Some("StaleVersion") => format!(" (version must be 1..={})", d.digest_version),
                Some("EpochOutOfRange") => format!(" (the deal has {} epochs)", d.num_epochs),
                _ => String::new(),
            };
            return Err(e).context(format!("recording the audit of deal {deal}{hint}"));
        }
    };
    Ok((id, version))
}
