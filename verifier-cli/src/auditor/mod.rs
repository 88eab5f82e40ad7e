//! The auditor's commands (DESIGN §6 "Public audit", docs/CONTRACTS.md §7).
//!
//! An auditor holds no secret. `audit` reads the latest posted digest (from the
//! `DigestPosted` logs, checked against the hash the contract stores) and the epoch
//! seed from the chain, asks the provider's node for the coded blocks the seed picks
//! (`dpor_core::audit::audit_plan`), and verifies every one against the run roots of
//! the digest. Its outcome can be recorded on chain (`record`, or `audit --record`);
//! a failure with consequences is a dispute on one failed sample (`dispute`, or
//! `audit --dispute`), which the provider must answer within the dispute window or be
//! slashed by anyone (`slash`). `mark-missed` settles an epoch nobody proved, and
//! `withdraw` pulls what the market owes the caller (bonds, slash shares).
//!
//! One file per command: [`audit`], [`record`], [`dispute`], [`slash`],
//! [`mark_missed`], [`withdraw`].

pub mod audit;
pub mod challenge;
pub mod dispute;
pub mod mark_missed;
pub mod record;
pub mod slash;
pub mod watch;
pub mod watch_commit;
pub mod watch_metrics;
pub mod withdraw;

use crate::context::Ctx;
use crate::output::Output;
use alloy_primitives::B256;
use anyhow::{bail, Context};
use clap::Subcommand;
use dpor_chain::{DealInfo, DealState};

/// Auditor commands (no secret needed; `record`, `dispute`, `slash`, `mark-missed` and
/// `withdraw` send transactions from `--key-file`).
#[derive(Debug, Subcommand)]
pub enum AuditorCommand {
    /// Public audit of DEAL: reads the posted digest and the epoch seed from the chain,
    /// asks the provider's node for λ coded blocks per run and verifies every one.
    /// Exits non-zero if any sample fails (after printing, recording and disputing).
    /// With --secret: the owner's compact secret audit (§5.5) of its current state
    /// instead (needs the owner state file; no chain consequence).
    Audit {
        /// The deal (optional with --secret: the state file's deal).
        #[arg(required_unless_present = "secret")]
        deal: Option<u64>,
        /// The owner's secret audit: one aggregated coded block per run plus λ σ̃,
        /// checked with the owner's checksum keys (docs/SCHEME.md §9).
        #[arg(long, conflicts_with_all = ["epoch", "record", "dispute"])]
        secret: bool,
        /// λ, samples per run for --secret (default: the deal's λ).
        #[arg(long, requires = "secret")]
        lambda: Option<u32>,
        /// The epoch whose seed picks the samples (default: the current epoch, or the
        /// latest one whose seed exists).
        #[arg(long)]
        epoch: Option<u64>,
        /// Post the outcome on chain (`recordAudit`; with --dispute a failure is recorded
        /// by the dispute itself).
        #[arg(long)]
        record: bool,
        /// On failure, open a dispute on the first failed sample (locks the dispute bond).
        #[arg(long)]
        dispute: bool,
    },
    /// Record an audit outcome on chain (`recordAudit`; no economic effect).
    Record {
        /// The deal.
        deal: u64,
        /// The epoch audited.
        #[arg(long)]
        epoch: u64,
        /// The digest version audited (default: the latest posted).
        #[arg(long = "digest-version")]
        version: Option<u64>,
        /// The audit passed.
        #[arg(long, conflicts_with = "failed", required_unless_present = "failed")]
        passed: bool,
        /// The audit failed.
        #[arg(long)]
        failed: bool,
        /// The audit's transcript hash (0x…, 32 bytes; default zero).
        #[arg(long, default_value_t = B256::ZERO)]
        transcript: B256,
    },
    /// Open a dispute on one sample of DEAL's current digest: the provider must answer
    /// with that chunk's proof within the dispute window or be slashed; if it answers,
    /// your bond goes to it.
    Dispute {
        /// The deal.
        deal: u64,
        /// The epoch of the failed audit (default: the current epoch).
        #[arg(long)]
        epoch: Option<u64>,
        /// The run: 0 for C, ℓ + 1 for level ℓ of H.
        #[arg(long)]
        run_tag: u8,
        /// Position of the coded block in the run.
        #[arg(long)]
        position: u64,
        /// The 128-byte chunk of that coded block the provider must open.
        #[arg(long, default_value_t = 0)]
        chunk: u32,
        /// The failed audit's transcript hash (0x…, 32 bytes; default zero).
        #[arg(long, default_value_t = B256::ZERO)]
        transcript: B256,
    },
    /// Challenge the provider's committed entry for DEAL's EPOCH (docs/COMMITMENTS.md;
    /// the market's bond is locked, paid to the provider if it answers), or with
    /// `--fault ID` fault an unanswered challenge after its deadline (anyone may).
    Challenge {
        /// The deal (with EPOCH).
        #[arg(required_unless_present = "fault")]
        deal: Option<u64>,
        /// The deal epoch (0-based).
        #[arg(required_unless_present = "fault")]
        epoch: Option<u64>,
        /// Fault this challenge instead (after its deadline).
        #[arg(long, value_name = "ID", conflicts_with_all = ["deal", "epoch"])]
        fault: Option<u64>,
    },
    /// Slash the provider of an unanswered dispute after its deadline (anyone may).
    Slash {
        /// The dispute id.
        dispute: u64,
    },
    /// Mark an unproven epoch of DEAL missed after its deadline (anyone may): the
    /// owner is refunded the epoch's price; the provider is slashed only if a digest
    /// was in force at the epoch's start (issue 9 finding 1: no fault before the data).
    MarkMissed {
        /// The deal.
        deal: u64,
        /// The epoch.
        #[arg(long)]
        epoch: u64,
    },
    /// Withdraw everything the market owes your account (bonds, slash shares, payments).
    Withdraw,
    /// Long-running auditor: each epoch audits the deals (public audit), records the
    /// outcome, disputes a sample the node served wrong (a silent node only after
    /// --retries audits), marks unproven epochs missed, slashes unanswered disputes
    /// and withdraws its share. Progress survives restarts (--watch-state, written
    /// atomically); one log line per action (--json: one JSON object per line).
    Watch {
        /// A deal to watch (repeatable).
        #[arg(long = "deal")]
        deals: Vec<u64>,
        /// Watch every deal on the market.
        #[arg(long, conflicts_with = "deals")]
        all: bool,
        /// The progress file.
        #[arg(long, default_value = "dpor-watch.json")]
        watch_state: std::path::PathBuf,
        /// Seconds between passes.
        #[arg(long, default_value_t = 30)]
        interval: u64,
        /// Audits of an epoch with only missing samples before a dispute is opened anyway.
        #[arg(long, default_value_t = 3)]
        retries: u32,
        /// One pass, then exit.
        #[arg(long)]
        once: bool,
        /// Also keep this dispersed file whole (its directory, as given to `dpor put`;
        /// repeatable): each pass runs `dpor repair` on it (issue 12). Needs the owner's key.
        #[arg(long = "repair")]
        repair: Vec<std::path::PathBuf>,
        /// With --repair: epochs a provider may stay unreachable before its shard moves.
        #[arg(long, default_value_t = 1)]
        unreachable_epochs: u64,
        /// With --repair: faults a shard's deal may count before its shard moves.
        #[arg(long, default_value_t = 0)]
        max_faults: u16,
        /// With --repair: the terms of the new deals.
        #[command(flatten)]
        terms: crate::disperse::DealTerms,
        /// Check only the providers' epoch commitments (fetch, verify, challenge), not
        /// a public audit recorded on chain per deal per epoch: for thousands of deals.
        #[arg(long)]
        commitments_only: bool,
        /// Serve the watcher's Prometheus metrics on http://ADDR/metrics while it runs
        /// (e.g. 127.0.0.1:9465; keep it on loopback). Off unless set.
        #[arg(long, value_name = "ADDR")]
        metrics_listen: Option<std::net::SocketAddr>,
    },
}

/// The error an audit that found failed samples returns *after* printing its report
/// (and recording / disputing): `main` prints the report it carries, then exits
/// non-zero, so that scripts can branch on the exit code.
#[derive(Debug)]
pub struct AuditFailed(pub Output);

impl std::fmt::Display for AuditFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let j = &self.0.json;
        write!(
            f,
            "the audit of deal {} (epoch {}, digest v{}) failed: {} of {} samples",
            j["deal"], j["epoch"], j["version"], j["failures_total"], j["samples_checked"]
        )
    }
}

impl std::error::Error for AuditFailed {}

/// Runs an auditor command.
pub async fn run(ctx: &Ctx, cmd: AuditorCommand) -> anyhow::Result<Output> {
    match cmd {
        AuditorCommand::Audit { deal, secret: true, lambda, .. } => crate::owner::secret_audit::run(ctx, deal, lambda).await,
        AuditorCommand::Audit { deal, epoch, record, dispute, .. } => {
            audit::run(ctx, deal.context("give the DEAL to audit")?, epoch, record, dispute).await
        }
        AuditorCommand::Record { deal, epoch, version, passed, failed, transcript } => {
            record::run(ctx, deal, epoch, version, passed && !failed, transcript).await
        }
        AuditorCommand::Dispute { deal, epoch, run_tag, position, chunk, transcript } => {
            dispute::run(ctx, deal, epoch, run_tag, position, chunk, transcript).await
        }
        AuditorCommand::Challenge { fault: Some(id), .. } => challenge::fault(ctx, id).await,
        AuditorCommand::Challenge { deal, epoch, .. } => {
            challenge::open(ctx, deal.context("give DEAL EPOCH")?, epoch.context("give DEAL EPOCH")?).await
        }
        AuditorCommand::Slash { dispute } => slash::run(ctx, dispute).await,
        AuditorCommand::MarkMissed { deal, epoch } => mark_missed::run(ctx, deal, epoch).await,
        AuditorCommand::Withdraw => withdraw::run(ctx).await,
        AuditorCommand::Watch {
            deals,
            all,
            watch_state,
            interval,
            retries,
            once,
            repair,
            unreachable_epochs,
            max_faults,
            terms,
            commitments_only,
            metrics_listen,
        } => {
            anyhow::ensure!(all || !deals.is_empty() || !repair.is_empty(), "give --deal ID (repeatable), --all or --repair DIR");
            let args = watch::WatchArgs {
                deals,
                all,
                state: watch_state,
                interval: std::time::Duration::from_secs(interval.max(1)),
                retries,
                once,
                repair,
                repair_options: dpor_client::disperse::repair::RepairOptions { shards: Vec::new(), max_faults, unreachable_epochs, dry_run: false, terms: terms.into() },
                commitments_only,
                metrics_listen,
            };
            watch::run(ctx, args).await
        }
    }
}

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
pub(crate) async fn deal_info(ctx: &Ctx, deal: u64) -> anyhow::Result<DealInfo> {
    let d = ctx.market.get_deal(deal).await.with_context(|| format!("reading deal {deal} from the chain"))?;
    d.into_deal().with_context(|| format!("deal {deal} does not exist on chain"))
}

/// The epoch to use when none was given: the one whose window contains the latest
/// block's timestamp, or, once the deal's epochs are over, its last epoch. Before its
/// first epoch (deal epoch 0 is the global epoch after acceptance, docs/CONTRACTS.md
/// §2) there is nothing to audit: the error names epoch 0 and when it starts.
pub(crate) async fn default_epoch(ctx: &Ctx, d: &DealInfo) -> anyhow::Result<u64> {
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
pub(crate) fn revert_name(e: &anyhow::Error) -> Option<String> {
    e.chain()
        .find_map(|c| c.downcast_ref::<dpor_chain::ChainError>())
        .and_then(|c| c.revert_name().map(str::to_string))
}

/// Token base units (wei, 18 decimals) as a decimal number of tokens, for people:
/// every significant decimal, trailing zeros trimmed (`100.0`, `0.0000107`).
pub(crate) fn tokens(wei: alloy_primitives::U256) -> String {
    let unit = alloy_primitives::U256::from(10u64).pow(alloy_primitives::U256::from(18u64));
    let whole = wei / unit;
    let frac = format!("{:018}", (wei % unit).to::<u64>());
    let frac = frac.trim_end_matches('0');
    format!("{whole}.{}", if frac.is_empty() { "0" } else { frac })
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloy_primitives::U256;

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
