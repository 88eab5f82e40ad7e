//! Marking an epoch nobody proved missed, after its deadline (`dpor mark-missed`;
//! anyone may; docs/CONTRACTS.md §5–6).

use super::{deal_info, revert_name};
use crate::session::Session;
use alloy_primitives::{Address, U256};
use anyhow::Context;
use dpor_chain::DealState;

/// An epoch marked missed ([`run`]).
#[derive(Debug, Clone)]
pub struct Marked {
    /// The deal's owner.
    pub owner: Address,
    /// What the owner was credited (refund, and a slash share if the provider was slashed).
    pub owner_credited: U256,
    /// The provider was slashed (the deal's fault count went up).
    pub slashed: bool,
    /// The deal's faults after.
    pub failures: u16,
    /// The deal's collateral left, token base units.
    pub collateral_left: u128,
    /// The deal's state after.
    pub deal_state: DealState,
}

/// Marks epoch `epoch` of `deal` missed.
///
/// # Errors
/// No such deal, or the chain refuses (with a hint: the window not over, already settled).
pub async fn run(ctx: &Session, deal: u64, epoch: u64) -> anyhow::Result<Marked> {
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
    Ok(Marked {
        owner: d.owner,
        owner_credited: credited,
        slashed: after.failures > d.failures,
        failures: after.failures,
        collateral_left: after.collateral,
        deal_state: after.state,
    })
}
