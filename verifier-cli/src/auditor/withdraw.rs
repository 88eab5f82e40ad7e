//! `dpor withdraw`: pulls everything the market owes the caller's account (bonds,
//! slash shares, refunds, payments; docs/CONTRACTS.md §6).

use super::{revert_name, tokens};
use crate::context::Ctx;
use crate::output::Output;
use anyhow::Context;
use serde_json::json;

/// Runs `withdraw`.
pub async fn run(ctx: &Ctx) -> anyhow::Result<Output> {
    let me = ctx.market.account().context("withdraw needs your key: pass --key-file (or set DPOR_KEY_FILE)")?;
    let amount = match ctx.market.withdraw().await {
        Ok(a) => a,
        Err(e) => {
            let e = anyhow::Error::new(e);
            if revert_name(&e).as_deref() == Some("NothingOwed") {
                return Ok(Output::new(format!("{me} is owed nothing"), json!({"account": me, "amount": "0"})));
            }
            return Err(e).context("withdrawing");
        }
    };
    let balance = ctx.market.balance_of(me).await?;
    Ok(Output::new(
        format!("{me} withdrew {} tokens; balance now {} tokens", tokens(amount), tokens(balance)),
        json!({"account": me, "amount": amount.to_string(), "balance": balance.to_string()}),
    ))
}
