//! The auditor's side (DESIGN §6 "Public audit", docs/CONTRACTS.md §7) as a library:
//! each operation returns what it found and did; the CLI (`dpor-cli`'s `auditor`)
//! parses the arguments and prints.
//!
//! An auditor holds no secret. [`audit`] reads the latest posted digest (from the
//! `DigestPosted` logs, checked against the hash the contract stores) and the epoch
//! seed from the chain, asks the provider's node for the coded blocks the seed picks
//! (`dpor_core::audit::audit_plan`), and verifies every one against the run roots of
//! the digest. Its outcome can be recorded on chain ([`record`]); a failure with
//! consequences is a dispute on one failed sample ([`dispute`]), which the provider
//! must answer within the dispute window or be slashed by anyone ([`slash`]).
//! [`mark_missed`] settles an epoch nobody proved, [`withdraw`] pulls what the market
//! owes the caller (bonds, slash shares), [`challenge`] challenges a committed entry.
//! [`watch`] (with [`watch_commit`]) is the long-running auditor's pass: its decisions,
//! each action reported to a [`watch::WatchLog`]; what the two share is [`watch_state`].

pub mod audit;
pub mod challenge;
pub mod dispute;
pub mod mark_missed;
pub mod record;
pub mod slash;
pub mod watch;
pub mod watch_commit;
pub mod watch_state;
pub mod withdraw;

use crate::session::Session;
use anyhow::{bail, Context};
use dpor_chain::{DealInfo, DealState};

/// `get_deal`'s answer as an `Option` (`None` for an unknown deal), whichever shape
/// the chain client returns: a [`DealInfo`] whose state is `None` for an unknown deal,
/// or an `Option<DealInfo>`. (dpor-chain's API was still moving when this was written;
/// this keeps the auditor independent of that choice.)
pub(crate) trait IntoDeal {
    /// The deal, if it exists.
    fn into_deal(self) -> Option<DealInfo>;
}

impl IntoDeal for DealInfo {
    fn into_deal(self) -> Option<DealInfo> {
        (self.state != DealState::None).then_some(self)
    }
}

impl IntoDeal for Option<DealInfo> {
    fn into_deal(self) -> Option<DealInfo> {
        self.and_then(IntoDeal::into_deal)
    }
}

/// Deal `deal` from the chain, or a clear error if it does not exist.
///
/// # Errors
/// The chain cannot be read, or the deal does not exist.
pub async fn deal_info(ctx: &Session, deal: u64) -> anyhow::Result<DealInfo> {
    let d = ctx.market.get_deal(deal).await.with_context(|| format!("reading deal {deal} from the chain"))?;
    d.into_deal().with_context(|| format!("deal {deal} does not exist on chain"))
}

/// The epoch to use when none was given: the one whose window contains the latest
/// block's timestamp, or, once the deal's epochs are over, its last epoch. Before its
/// first epoch (deal epoch 0 is the global epoch after acceptance, docs/CONTRACTS.md
/// §2) there is nothing to audit: the error names epoch 0 and when it starts.
///
/// # Errors
/// The deal was never accepted, has no epochs, or its first has not started.
pub async fn default_epoch(ctx: &Session, d: &DealInfo) -> anyhow::Result<u64> {
    if d.accepted_at == 0 {
        bail!("deal {} was never accepted: it has no epochs", d.id);
    }
    let params = ctx.market.params().await.context("reading the market's parameters")?;
    let now = ctx.market.latest_timestamp().await?;
    if let Some(e) = params.deal_epoch_at(d, now) {
        return Ok(e);
    }
    let first = params.window(d, 0).start;
    if now < first {
        bail!(
            "deal {}'s first epoch, epoch 0, has not started: it starts at timestamp {first}, in {} s (chain time), and no epoch has a seed to audit before",
            d.id,
            first - now
        );
    }
    match d.num_epochs {
        0 => bail!("deal {} has no epochs", d.id),
        n => Ok(u64::from(n) - 1),
    }
}

/// A `ChainError` revert name, if `e` carries one (for clear messages).
pub fn revert_name(e: &anyhow::Error) -> Option<String> {
    e.chain().find_map(|c| c.downcast_ref::<dpor_chain::ChainError>()).and_then(|c| c.revert_name().map(str::to_string))
}

/// Token base units (wei, 18 decimals) as a decimal number of tokens, for people:
/// every significant decimal, trailing zeros trimmed (`100.0`, `0.0000107`).
pub fn tokens(wei: alloy_primitives::U256) -> String {
    let unit = alloy_primitives::U256::from(10u64).pow(alloy_primitives::U256::from(18u64));
    let whole = wei / unit;
    let frac = format!("{:018}", (wei % unit).to::<u64>());
    let frac = frac.trim_end_matches('0');
    format!("{whole}.{}", if frac.is_empty() { "0" } else { frac })
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloy_primitives::{B256, U256};

    #[test]
    fn tokens_print_every_significant_decimal() {
        assert_eq!(tokens(U256::from(0u64)), "0.0");
        assert_eq!(tokens(U256::from(1_500_000_000_000_000_000u128)), "1.5");
        assert_eq!(tokens(U256::from(100u64) * U256::from(10u64).pow(U256::from(18u64))), "100.0");
        assert_eq!(tokens(U256::from(10_700_000_000_000u64)), "0.0000107");
        assert_eq!(tokens(U256::from(1u64)), "0.000000000000000001");
    }

    #[test]
    fn unknown_deal_is_none_either_way() {
        let d = DealInfo {
            id: 1,
            owner: Default::default(),
            provider: Default::default(),
            state: DealState::None,
            num_epochs: 0,
            term_epochs: 0,
            block_size: 0,
            lambda: 0,
            samples_per_epoch: 0,
            num_blocks: 0,
            accepted_at: 0,
            start_epoch: 0,
            failures: 0,
            open_disputes: 0,
            digest_version: 0,
            write_count: 0,
            digest_hash: B256::ZERO,
            first_digest_at: 0,
            settled_with_digest: 0,
            price_per_epoch: 0,
            escrow: 0,
            collateral: 0,
            slash_per_fault: 0,
        };
        assert!(d.clone().into_deal().is_none());
        assert!(Some(d.clone()).into_deal().is_none());
        let active = DealInfo { state: DealState::Active, ..d };
        assert!(active.clone().into_deal().is_some());
        assert!(Some(active).into_deal().is_some());
        assert!(None::<DealInfo>.into_deal().is_none());
    }
}
