//! `dpor watch`: the auditor that never sleeps (issue 9 finding 11). For a list of
//! deals (`--deal`, repeatable) or every deal on the market (`--all`), each pass:
//!
//! 1. **audit** the current epoch once (the public audit of [`super::audit`]) and record
//!    the outcome (`recordAudit`); a sample the node served WRONG opens a dispute on it
//!    (bond locked); samples the node did not return are retried on later passes
//!    (`--retries`), and only then disputed: a node that does not answer is a missed
//!    epoch, not a dispute;
//! 2. **markMissed** every epoch whose window is over and nobody settled;
//! 3. **slash** its own disputes left unanswered past their deadline;
//! 4. **withdraw** what the market owes it (bonds back, slash shares).
//!
//! Restarts: progress (epochs audited, epochs checked for markMissed, disputes opened,
//! retries) is kept in a JSON state file written atomically (temporary file, fsync,
//! rename) after every action. Before an audit's on-chain action it also asks the
//! chain whether it already recorded / disputed that epoch (`AuditRecorded` logs by
//! its account), so a crash between a transaction and the state write repeats
//! nothing; markMissed, slash and withdraw are idempotent on chain (status checks).
//! Every action is reported to a [`WatchLog`] (the CLI prints one line each, human or
//! one JSON object with `--json`, and feeds its metrics from them).

use super::audit::{run_with, DisputeOutcome, DisputePolicy};
pub use super::watch_state::{DealProgress, WatchArgs, WatchLog, WatchState};
use crate::session::Session;
use anyhow::{Context, Result};
use dpor_chain::{DealInfo, DealState, DisputeState, EpochStatus, MarketParams};
use serde_json::json;
use std::path::Path;

/// Refuses settings `watch` could not work with, before it does anything: a state
/// file whose folder does not exist (every action's progress is saved there; without
/// it a pass would act on chain and remember nothing), and a `--repair` folder that
/// holds no recorded dispersed file.
///
/// # Errors
/// Those settings.
pub fn check_args(args: &WatchArgs) -> Result<()> {
    let folder = args.state.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    anyhow::ensure!(
        folder.is_dir(),
        "--watch-state {}: the folder {} does not exist (watch saves its progress there after every action): create it first",
        args.state.display(),
        folder.display()
    );
    anyhow::ensure!(!args.state.is_dir(), "--watch-state {} is a folder: give a file path", args.state.display());
    for dir in &args.repair {
        anyhow::ensure!(dir.is_dir(), "--repair {}: no such folder (give the folder of a file dispersed with `dpor put --dir`)", dir.display());
        let record = crate::disperse::FileDir::load(dir)
            .with_context(|| format!("--repair {}: not the folder of a dispersed file", dir.display()))?;
        anyhow::ensure!(
            record.file_id.is_some(),
            "--repair {}: the file was never recorded in the FileManifest (an unfinished `dpor put`?)",
            dir.display()
        );
    }
    Ok(())
}

/// Runs `watch` until killed (or one pass with `once`), after [`check_args`], each
/// action reported to `out`. Returns the number of actions of all passes.
///
/// # Errors
/// Bad settings, no key, a state file of another market, the chain unreadable at
/// start; errors of one deal or one file are logged and retried on the next pass.
pub async fn run(ctx: &Session, args: WatchArgs, out: &dyn WatchLog) -> Result<u64> {
    check_args(&args)?;
    let me = ctx.key()?.address();
    let market = format!("{:?}", ctx.market.address());
    let mut state = WatchState::load(&args.state, &market)?;
    let params = ctx.market.params().await.context("reading the market's parameters")?;
    let mut actions = 0u64;
    let mut nodes = super::watch_commit::NodeCache::default();
    loop {
        let started = std::time::Instant::now();
        nodes.new_pass();
        let mut watched = 0u64;
        let ids: Vec<u64> = if args.all {
            let n = ctx.market.deal_count().await?;
            (1..=n).collect()
        } else {
            args.deals.clone()
        };
        super::watch_commit::prefetch(ctx, &params, &state, &mut nodes, &ids).await;
        for id in ids {
            watched += 1;
            match pass_deal(ctx, &args, &params, &mut state, &mut nodes, me, id, out).await {
                Ok(n) => actions += n,
                Err(e) => out.log("error", id, format!("{e:#} (retrying next pass)"), json!({"error": format!("{e:#}")})),
            }
        }
        for dir in &args.repair {
            match crate::disperse::repair::repair(ctx, dir, &args.repair_options, out).await {
                Ok(r) => {
                    let n = r.repaired.len();
                    actions += n as u64;
                    if n > 0 {
                        out.repaired(dir, &r);
                    }
                }
                Err(e) => out.log("error", 0, format!("repair of {}: {e:#} (retrying next pass)", dir.display()), json!({"error": format!("{e:#}"), "dir": dir})),
            }
            // Deals a repair left behind (accepted, upload refused): closed once allowed.
            match crate::disperse::repair::end_refused_deals(ctx, dir).await {
                Ok(ended) => {
                    for deal in ended {
                        actions += 1;
                        out.log("refused-deal-ended", deal,
                            format!("deal {deal} (left by a repair of {}: its upload was refused) ended: escrow back, less the epochs it held the capacity", dir.display()),
                            json!({"dir": dir}));
                    }
                }
                Err(e) => out.log("error", 0, format!("ending refused deals of {}: {e:#} (retrying next pass)", dir.display()), json!({"error": format!("{e:#}"), "dir": dir})),
            }
        }
        match ctx.market.owed(me).await {
            Ok(o) if !o.is_zero() => match ctx.market.withdraw().await {
                Ok(a) => {
                    actions += 1;
                    out.log("withdraw", 0, format!("withdrew {} tokens", super::tokens(a)), json!({"amount": a.to_string()}));
                }
                Err(e) => out.log("error", 0, format!("withdraw failed: {e}"), json!({"error": e.to_string()})),
            },
            _ => {}
        }
        // What a pass learnt without acting on chain (entries verified, misses counted,
        // epochs settled) is saved once here; every on-chain action was saved as taken.
        state.save(&args.state)?;
        let seconds = started.elapsed().as_secs_f64();
        out.log("pass", 0, format!("pass over {watched} deals in {seconds:.1} s"), json!({"deals": watched, "seconds": seconds}));
        if args.once {
            break;
        }
        tokio::time::sleep(args.interval).await;
    }
    Ok(actions)
}

/// One deal, one pass. Returns the number of on-chain actions taken.
#[allow(clippy::too_many_arguments)]
async fn pass_deal(
    ctx: &Session,
    args: &WatchArgs,
    params: &MarketParams,
    state: &mut WatchState,
    nodes: &mut super::watch_commit::NodeCache,
    me: alloy_primitives::Address,
    id: u64,
    out: &dyn WatchLog,
) -> Result<u64> {
    let deal = ctx.market.get_deal(id).await?;
    if deal.state == DealState::None {
        return Ok(0);
    }
    let now = ctx.market.latest_timestamp().await?;
    let mut n = 0;
    if deal.state == DealState::Active {
        if !args.commitments_only {
            n += audit_step(ctx, args, params, state, me, &deal, now, out).await?;
        }
        n += super::watch_commit::commitment_step(ctx, args, params, state, nodes, &deal, now, out).await?;
        n += missed_step(ctx, &args.state, params, state, &deal, now, out).await?;
    }
    n += slash_step(ctx, &args.state, state, id, now, out).await?;
    n += super::watch_commit::fault_step(ctx, args, state, id, now, out).await?;
    Ok(n)
}

#[allow(clippy::too_many_arguments)]
async fn audit_step(
    ctx: &Session,
    args: &WatchArgs,
    params: &MarketParams,
    state: &mut WatchState,
    me: alloy_primitives::Address,
    deal: &DealInfo,
    now: u64,
    out: &dyn WatchLog,
) -> Result<u64> {
    let id = deal.id;
    let Some(epoch) = params.deal_epoch_at(deal, now) else { return Ok(0) };
    if !deal.has_digest() || state.deals.get(&id).is_some_and(|p| p.audited.contains(&epoch)) {
        return Ok(0);
    }
    // Crash safety: did we record / dispute this epoch already (state not saved)?
    let done = ctx.market.audits_by(id, epoch, me, 0).await?;
    if !done.is_empty() {
        let p = state.deals.entry(id).or_default();
        p.audited.insert(epoch);
        for q in ctx.market.disputes_by(id, me, 0).await? {
            p.disputes.entry(q.dispute_id).or_insert(false);
        }
        state.save(&args.state)?;
        return Ok(0);
    }
    let tries = state.deals.get(&id).and_then(|p| p.missing_tries.get(&epoch)).copied().unwrap_or(0);
    let policy = if tries >= args.retries { DisputePolicy::FirstFailure } else { DisputePolicy::ServedWrong };
    let audit = run_with(ctx, id, Some(epoch), false, policy, None).await.with_context(|| format!("auditing epoch {epoch}"))?;
    let passed = audit.passed && audit.chain_error.is_none();
    let used_epoch = audit.epoch;
    let transcript = audit.transcript;
    let version = audit.version;
    let failures_total = audit.failures.len();
    let p = state.deals.entry(id).or_default();
    if let Some(DisputeOutcome::Opened { id: q, .. }) = audit.dispute {
        p.disputes.insert(q, false);
        p.audited.insert(used_epoch);
        p.missing_tries.remove(&used_epoch);
        state.save(&args.state)?;
        out.log("dispute", id, format!("epoch {used_epoch}: audit FAILED ({failures_total} bad samples); dispute {q} opened"),
            json!({"epoch": used_epoch, "dispute_id": q, "failures": failures_total, "transcript_hash": transcript}));
        return Ok(1);
    }
    if !passed {
        // Only missing samples (node silent): retry later; the epoch proof decides.
        let p = state.deals.entry(id).or_default();
        let t = p.missing_tries.entry(used_epoch).or_insert(0);
        *t += 1;
        let t = *t;
        state.save(&args.state)?;
        out.log("audit-unanswered", id, format!("epoch {used_epoch}: the node did not answer (attempt {t} of {}); no bond staked", args.retries),
            json!({"epoch": used_epoch, "attempt": t}));
        return Ok(0);
    }
    let audit_id = ctx.market.record_audit(id, used_epoch, version, true, transcript).await?;
    let p = state.deals.entry(id).or_default();
    p.audited.insert(used_epoch);
    p.missing_tries.remove(&used_epoch);
    state.save(&args.state)?;
    out.log("record", id, format!("epoch {used_epoch}: audit passed, recorded as audit {audit_id}"),
        json!({"epoch": used_epoch, "audit_id": audit_id, "passed": true, "transcript_hash": transcript}));
    Ok(1)
}

async fn missed_step(
    ctx: &Session,
    path: &Path,
    params: &MarketParams,
    state: &mut WatchState,
    deal: &DealInfo,
    now: u64,
    out: &dyn WatchLog,
) -> Result<u64> {
    let id = deal.id;
    let over = params.epochs_over(deal, now);
    let from = state.deals.get(&id).map(|p| p.settled_below).unwrap_or(0);
    let mut n = 0;
    for e in from..over {
        // An epoch whose provider committed is settled by challenges and claims, never
        // marked missed (the market refuses: EpochCommitted).
        let committed = ctx.market.get_commitment(deal.provider, deal.start_epoch + e).await?.is_some();
        if !committed && ctx.market.epoch_status(id, e).await? == EpochStatus::None {
            ctx.market.mark_missed(id, e).await.with_context(|| format!("markMissed epoch {e}"))?;
            n += 1;
            let f = ctx.market.get_deal(id).await?.failures;
            out.log("mark-missed", id, format!("epoch {e}: not proven; marked missed (faults now {f})"), json!({"epoch": e, "failures": f}));
        }
        state.deals.entry(id).or_default().settled_below = e + 1;
        if n > 0 {
            state.save(path)?;
        }
        if ctx.market.get_deal(id).await?.state != DealState::Active {
            break;
        }
    }
    Ok(n)
}

async fn slash_step(ctx: &Session, path: &Path, state: &mut WatchState, id: u64, now: u64, out: &dyn WatchLog) -> Result<u64> {
    let open: Vec<u64> =
        state.deals.get(&id).map(|p| p.disputes.iter().filter(|(_, done)| !**done).map(|(q, _)| *q).collect()).unwrap_or_default();
    let mut n = 0;
    for q in open {
        let info = ctx.market.get_dispute(q).await?;
        match info.state {
            DisputeState::Open if now > info.deadline => {
                ctx.market.slash(q).await.with_context(|| format!("slash dispute {q}"))?;
                n += 1;
                out.log("slash", id, format!("dispute {q} unanswered past its deadline: slashed"), json!({"dispute_id": q}));
            }
            DisputeState::Open => continue,
            DisputeState::Answered => {
                out.log("dispute-answered", id, format!("dispute {q} was answered (bond to the provider)"), json!({"dispute_id": q}))
            }
            _ => {}
        }
        state.deals.entry(id).or_default().disputes.insert(q, true);
        state.save(path)?;
    }
    Ok(n)
}
