//! The auditor's commands (DESIGN §6 "Public audit", docs/CONTRACTS.md §7): their
//! arguments and output. What they do is the library's `dpor_client::auditor` (the
//! public audit, its on-chain consequences, and `watch`'s passes); each returns a report
//! that [`report`] turns into the human and JSON output, and `watch` reports its actions
//! to [`watch_log::Printer`], which prints them and feeds [`watch_metrics`].

pub mod report;
pub mod watch_log;
pub mod watch_metrics;

use crate::context::Ctx;
use crate::output::Output;
use alloy_primitives::B256;
use anyhow::Context;
use clap::Subcommand;
use dpor_client::auditor::{self as lib, audit::DisputePolicy};

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
            let policy = if dispute { DisputePolicy::FirstFailure } else { DisputePolicy::Never };
            let deal = deal.context("give the DEAL to audit")?;
            let bar = ctx.bar("audit");
            let audit = lib::audit::run_with(ctx, deal, epoch, record, policy, Some(&bar)).await;
            bar.finish_and_clear();
            report::audit(audit?)
        }
        AuditorCommand::Record { deal, epoch, version, passed, failed, transcript } => {
            let passed = passed && !failed;
            let (id, version) = lib::record::run(ctx, deal, epoch, version, passed, transcript).await?;
            Ok(report::record(id, deal, epoch, version, passed, transcript))
        }
        AuditorCommand::Dispute { deal, epoch, run_tag, position, chunk, transcript } => {
            let req = lib::dispute::DisputeRequest { deal, epoch, run_tag, position, chunk, transcript };
            Ok(report::dispute(&req, &lib::dispute::open(ctx, &req).await?))
        }
        AuditorCommand::Challenge { fault: Some(id), .. } => Ok(report::challenge_faulted(&lib::challenge::fault(ctx, id).await?)),
        AuditorCommand::Challenge { deal, epoch, .. } => {
            let opened = lib::challenge::open(ctx, deal.context("give DEAL EPOCH")?, epoch.context("give DEAL EPOCH")?).await?;
            Ok(report::challenge_opened(&opened))
        }
        AuditorCommand::Slash { dispute } => Ok(report::slash(dispute, &lib::slash::run(ctx, dispute).await?)),
        AuditorCommand::MarkMissed { deal, epoch } => Ok(report::mark_missed(deal, epoch, &lib::mark_missed::run(ctx, deal, epoch).await?)),
        AuditorCommand::Withdraw => Ok(report::withdraw(&lib::withdraw::run(ctx).await?)),
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
            let args = lib::watch::WatchArgs {
                deals,
                all,
                state: watch_state,
                interval: std::time::Duration::from_secs(interval.max(1)),
                retries,
                once,
                repair,
                repair_options: dpor_client::disperse::repair::RepairOptions {
                    shards: Vec::new(),
                    max_faults,
                    unreachable_epochs,
                    dry_run: false,
                    terms: terms.into(),
                },
                commitments_only,
            };
            watch_log::run(ctx, args, metrics_listen).await
        }
    }
}
