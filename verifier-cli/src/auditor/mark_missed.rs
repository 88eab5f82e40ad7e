//! `dpor mark-missed DEAL --epoch E`: settles an epoch nobody proved, after its
//! deadline (anyone may; docs/CONTRACTS.md §5–6).

use super::{deal_info, revert_name, tokens};
use crate::context::Ctx;
use crate::output::Output;
use alloy_primitives::U256;
use anyhow::Context;
use serde_json::json;

/// Runs `mark-missed`.
pub async fn run(ctx: &Ctx, deal: u64, epoch: u64) -> anyhow::Result<Output> {
    let d = deal_info(ctx, deal).await?;
    let owner0 = ctx.market.owed(d.owner).await?;
    if let Err(e) = ctx.market.mark_missed(deal, epoch).await {
        let e = anyhow::Error::new(e);
        let hint = match revert_name(&e).as_deref() {
            Some("EpochNotOver") => match ctx.market.epoch_window(deal, epoch).await {
                Ok(w) => format!(" (its window closes at timestamp {})", w.deadline),
                Err(_) => String::new(),
            },
            Some("EpochSettled") => " (it was already proven or marked)".to_string(),
            _ => String::new(),
        };
        return Err(e).context(format!("marking epoch {epoch} of deal {deal} missed{hint}"));
    }
    let credited = ctx.market.owed(d.owner).await?.saturating_sub(owner0);
    let after = deal_info(ctx, deal).await?;
    Ok(Output::new(
        format!(
            "epoch {epoch} of deal {deal} marked missed: owner {} credited {} tokens (refund{}); {} fault(s), deal {:?}",
            d.owner,
            tokens(credited),
            if after.failures > d.failures { " + slash" } else { "" },
            after.failures,
            after.state
        ),
        json!({
            "deal": deal, "epoch": epoch, "owner_credited": credited.to_string(), "failures": after.failures,
            "collateral_left": U256::from(after.collateral).to_string(), "deal_state": format!("{:?}", after.state),
        }),
    ))
}
