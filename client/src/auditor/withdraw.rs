//! Withdrawing everything the market owes the caller's account (`dpor withdraw`: bonds,
//! slash shares, refunds, payments; docs/CONTRACTS.md §6).

use super::revert_name;
use crate::session::Session;
use alloy_primitives::{Address, U256};
use anyhow::Context;

/// What [`run`] did.
#[derive(Debug, Clone)]
pub struct Withdrawn {
    /// The account.
    pub account: Address,
    /// Withdrawn, token base units (zero: nothing was owed).
    pub amount: U256,
    /// The account's token balance after (None when nothing was owed).
    pub balance: Option<U256>,
}

/// Withdraws what the market owes the session's account.
///
/// # Errors
/// No key, or the chain refuses for another reason than nothing owed.
pub async fn run(ctx: &Session) -> anyhow::Result<Withdrawn> {
    let me = ctx.market.account().context("withdraw needs your key: pass --key-file (or set DPOR_KEY_FILE)")?;
    let amount = match ctx.market.withdraw().await {
        Ok(a) => a,
        Err(e) => {
            let e = anyhow::Error::new(e);
            if revert_name(&e).as_deref() == Some("NothingOwed") {
                return Ok(Withdrawn { account: me, amount: U256::ZERO, balance: None });
            }
            return Err(e).context("withdrawing");
        }
    };
    let balance = ctx.market.balance_of(me).await?;
    Ok(Withdrawn { account: me, amount, balance: Some(balance) })
}
