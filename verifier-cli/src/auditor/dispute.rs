//! `dpor dispute DEAL [--epoch E] --run-tag T --position P [--chunk C] [--transcript H]`:
//! opens a dispute on one sample of the deal's current digest (docs/CONTRACTS.md §7),
//! locking the dispute bond (approved first if needed).

use super::{deal_info, default_epoch, revert_name, tokens};
use crate::context::Ctx;
use crate::output::Output;
use alloy_primitives::{B256, U256};
use anyhow::{ensure, Context};
use dpor_core::RunTag;
use serde_json::json;

/// Runs `dispute`.
pub async fn run(
    ctx: &Ctx,
    deal: u64,
    epoch: Option<u64>,
    run_tag: u8,
    position: u64,
    chunk: u32,
    transcript: B256,
) -> anyhow::Result<Output> {
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
    Ok(Output::new(
        format!(
            "dispute {id} opened on deal {deal} (digest v{version}): run {} position {position} chunk {chunk}; bond {} tokens locked; the provider must answer by timestamp {}",
            RunTag(u32::from(run_tag)),
            tokens(U256::from(q.bond)),
            q.deadline
        ),
        json!({
            "dispute_id": id, "deal": deal, "epoch": epoch, "version": version, "run_tag": run_tag,
            "position": position, "chunk": chunk, "deadline": q.deadline, "bond": q.bond.to_string(),
            "digest_hash": q.digest_hash, "transcript_hash": transcript,
        }),
    ))
}
