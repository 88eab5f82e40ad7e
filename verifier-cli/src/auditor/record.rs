//! `dpor record DEAL --epoch E [--digest-version V] --passed|--failed [--transcript H]`:
//! posts an audit outcome (`recordAudit`, no economic effect; docs/CONTRACTS.md §7).

use super::{deal_info, revert_name};
use crate::context::Ctx;
use crate::output::Output;
use alloy_primitives::B256;
use anyhow::{ensure, Context};
use serde_json::json;

/// Runs `record`.
pub async fn run(ctx: &Ctx, deal: u64, epoch: u64, version: Option<u64>, passed: bool, transcript: B256) -> anyhow::Result<Output> {
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
    let verdict = if passed { "passed" } else { "failed" };
    Ok(Output::new(
        format!("audit {id} recorded: deal {deal}, epoch {epoch}, digest v{version}, {verdict}, transcript {transcript}"),
        json!({"audit_id": id, "deal": deal, "epoch": epoch, "version": version, "passed": passed, "transcript_hash": transcript}),
    ))
}
