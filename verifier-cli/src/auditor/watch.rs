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
//! Every action is logged, one line each (human, or one JSON object with `--json`).

use super::audit::{run_with, DisputePolicy};
use super::AuditFailed;
use crate::context::Ctx;
use crate::output::Output;
use anyhow::{Context, Result};
use dpor_chain::{DealInfo, DealState, DisputeState, EpochStatus, MarketParams};
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// What `watch` remembers about one deal.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct DealProgress {
    /// Epochs audited to the end (recorded, or disputed).
    pub audited: BTreeSet<u64>,
    /// Epochs below this were checked for markMissed (settled by someone).
    pub settled_below: u64,
    /// Failed audits of an epoch where the node returned nothing wrong, only missing
    /// samples: epoch → attempts so far.
    pub missing_tries: BTreeMap<u64, u32>,
    /// Disputes this auditor opened: id → done (slashed, answered).
    pub disputes: BTreeMap<u64, bool>,
    /// Epochs whose committed entry was checked (verified, or challenged).
    #[serde(default)]
    pub commit_checked: BTreeSet<u64>,
    /// Committed entries the node did not serve: epoch → attempts so far.
    #[serde(default)]
    pub commit_missing: BTreeMap<u64, u32>,
    /// Challenges of committed entries this watcher opened: id → done.
    #[serde(default)]
    pub challenges: BTreeMap<u64, bool>,
}

/// The state file of `watch`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct WatchState {
    /// The market this state belongs to (a state file is refused for another market).
    pub market: String,
    /// Per deal.
    pub deals: BTreeMap<u64, DealProgress>,
}

impl WatchState {
    /// Loads `path`, or a fresh state if it does not exist. Errors: unreadable or
    /// malformed file, or a file for another market.
    pub fn load(path: &Path, market: &str) -> Result<WatchState> {
        match std::fs::read(path) {
            Ok(b) => {
                let s: WatchState =
                    serde_json::from_slice(&b).with_context(|| format!("{} is not a watch state file", path.display()))?;
                anyhow::ensure!(
                    s.market.eq_ignore_ascii_case(market),
                    "{} belongs to market {}, not {market}",
                    path.display(),
                    s.market
                );
                Ok(s)
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                Ok(WatchState { market: market.to_string(), deals: BTreeMap::new() })
            }
            Err(e) => Err(e).with_context(|| format!("cannot read {}", path.display())),
        }
    }

    /// Writes the state atomically: a temporary file next to `path`, fsync, rename.
    pub fn save(&self, path: &Path) -> Result<()> {
        use std::io::Write;
        let tmp = path.with_extension("tmp");
        let mut f = std::fs::File::create(&tmp).with_context(|| format!("cannot write {}", tmp.display()))?;
        f.write_all(&serde_json::to_vec_pretty(self)?)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path).with_context(|| format!("cannot replace {}", path.display()))?;
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            if let Ok(d) = std::fs::File::open(dir) {
                let _ = d.sync_all();
            }
        }
        Ok(())
    }
}

/// `watch` settings.
#[derive(Debug, Clone)]
pub struct WatchArgs {
    /// Deals to watch (empty with `all`: every deal).
    pub deals: Vec<u64>,
    /// Every deal on the market.
    pub all: bool,
    /// The state file.
    pub state: PathBuf,
    /// Time between passes.
    pub interval: Duration,
    /// Audits with only missing samples before a dispute is opened anyway.
    pub retries: u32,
    /// One pass, then exit.
    pub once: bool,
    /// Dispersed files (their directories) to repair on each pass (issue 12).
    pub repair: Vec<PathBuf>,
    /// How `repair` judges and replaces shards.
    pub repair_options: dpor_client::disperse::repair::RepairOptions,
    /// Check only the providers' epoch commitments (docs/COMMITMENTS.md §7), not a
    /// public audit recorded on chain per deal per epoch: what scales to thousands of
    /// deals (an audit record costs ≈ 130k gas each).
    pub commitments_only: bool,
    /// Serve the watcher's metrics here while it runs ([`super::watch_metrics`]).
    pub metrics_listen: Option<std::net::SocketAddr>,
}

/// One log line about `deal` (0: about the account, e.g. a withdrawal; the JSON line
/// then has no `deal` field).
pub(crate) fn log(ctx: &Ctx, action: &str, deal: u64, human: String, mut extra: serde_json::Value) {
    if let Some(m) = super::watch_metrics::get() {
        m.action(action, &extra);
    }
    if ctx.json {
        extra["action"] = json!(action);
        if deal != 0 {
            extra["deal"] = json!(deal);
        }
        println!("{extra}");
    } else if deal != 0 {
        println!("watch: deal {deal}: {human}");
    } else {
        println!("watch: {human}");
    }
}

/// Refuses settings `watch` could not work with, before it does anything: a state
/// file whose folder does not exist (every action's progress is saved there; without
/// it a pass would act on chain and remember nothing), and a `--repair` folder that
/// holds no recorded dispersed file.
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

/// Runs `watch` until killed (or one pass with `once`), after [`check_args`]. Returns
/// a summary of the last pass.
pub async fn run(ctx: &Ctx, args: WatchArgs) -> Result<Output> {
    check_args(&args)?;
    let me = ctx.key()?.address();
    let market = format!("{:?}", ctx.market.address());
    let mut state = WatchState::load(&args.state, &market)?;
    let params = ctx.market.params().await.context("reading the market's parameters")?;
    let _metrics = match args.metrics_listen {
        Some(at) => {
            let server = super::watch_metrics::start(at).await.context("--metrics-listen")?;
            eprintln!("watch: metrics on http://{}/metrics", server.local_addr());
            Some(server)
        }
        None => None,
    };
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
        for id in ids {
            watched += 1;
            match pass_deal(ctx, &args, &params, &mut state, &mut nodes, me, id).await {
                Ok(n) => actions += n,
                Err(e) => log(ctx, "error", id, format!("{e:#} (retrying next pass)"), json!({"error": format!("{e:#}")})),
            }
        }
        for dir in &args.repair {
            match crate::disperse::repair(ctx, dir, &args.repair_options).await {
                Ok(out) => {
                    let n = out.json["repaired"].as_array().map_or(0, |r| r.len());
                    actions += n as u64;
                    if n > 0 {
                        log(ctx, "repair", 0, format!("{}: {}", dir.display(), out.human), out.json);
                    }
                }
                Err(e) => log(ctx, "error", 0, format!("repair of {}: {e:#} (retrying next pass)", dir.display()), json!({"error": format!("{e:#}"), "dir": dir})),
            }
        }
        match ctx.market.owed(me).await {
            Ok(o) if !o.is_zero() => match ctx.market.withdraw().await {
                Ok(a) => {
                    actions += 1;
                    log(ctx, "withdraw", 0, format!("withdrew {} tokens", super::tokens(a)), json!({"amount": a.to_string()}));
                }
                Err(e) => log(ctx, "error", 0, format!("withdraw failed: {e}"), json!({"error": e.to_string()})),
            },
            _ => {}
        }
        // What a pass learnt without acting on chain (entries verified, misses counted,
        // epochs settled) is saved once here; every on-chain action was saved as taken.
        state.save(&args.state)?;
        let seconds = started.elapsed().as_secs_f64();
        log(ctx, "pass", 0, format!("pass over {watched} deals in {seconds:.1} s"), json!({"deals": watched, "seconds": seconds}));
        if args.once {
            break;
        }
        tokio::time::sleep(args.interval).await;
    }
    Ok(Output::new(format!("watch: {actions} actions"), json!({"actions": actions, "state": args.state})))
}

/// One deal, one pass. Returns the number of on-chain actions taken.
async fn pass_deal(
    ctx: &Ctx,
    args: &WatchArgs,
    params: &MarketParams,
    state: &mut WatchState,
    nodes: &mut super::watch_commit::NodeCache,
    me: alloy_primitives::Address,
    id: u64,
) -> Result<u64> {
    let deal = ctx.market.get_deal(id).await?;
    if deal.state == DealState::None {
        return Ok(0);
    }
    let now = ctx.market.latest_timestamp().await?;
    let mut n = 0;
    if deal.state == DealState::Active {
        if !args.commitments_only {
            n += audit_step(ctx, args, params, state, me, &deal, now).await?;
        }
        n += super::watch_commit::commitment_step(ctx, args, params, state, nodes, &deal, now).await?;
        n += missed_step(ctx, &args.state, params, state, &deal, now).await?;
    }
    n += slash_step(ctx, &args.state, state, id, now).await?;
    n += super::watch_commit::fault_step(ctx, args, state, id, now).await?;
    Ok(n)
}

async fn audit_step(
    ctx: &Ctx,
    args: &WatchArgs,
    params: &MarketParams,
    state: &mut WatchState,
    me: alloy_primitives::Address,
    deal: &DealInfo,
    now: u64,
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
    let (out, passed) = match run_with(ctx, id, Some(epoch), false, policy).await {
        Ok(o) => (o, true),
        Err(e) => match e.downcast::<AuditFailed>() {
            Ok(f) => (f.0, false),
            Err(e) => return Err(e.context(format!("auditing epoch {epoch}"))),
        },
    };
    let used_epoch = out.json["epoch"].as_u64().unwrap_or(epoch);
    let transcript: alloy_primitives::B256 =
        out.json["transcript_hash"].as_str().and_then(|s| s.parse().ok()).unwrap_or_default();
    let version = out.json["version"].as_u64().unwrap_or(deal.digest_version);
    let p = state.deals.entry(id).or_default();
    if let Some(q) = out.json["dispute_id"].as_u64() {
        p.disputes.insert(q, false);
        p.audited.insert(used_epoch);
        p.missing_tries.remove(&used_epoch);
        state.save(&args.state)?;
        log(ctx, "dispute", id, format!("epoch {used_epoch}: audit FAILED ({} bad samples); dispute {q} opened", out.json["failures_total"]),
            json!({"epoch": used_epoch, "dispute_id": q, "failures": out.json["failures_total"], "transcript_hash": transcript}));
        return Ok(1);
    }
    if !passed {
        // Only missing samples (node silent): retry later; the epoch proof decides.
        let p = state.deals.entry(id).or_default();
        let t = p.missing_tries.entry(used_epoch).or_insert(0);
        *t += 1;
        let t = *t;
        state.save(&args.state)?;
        log(ctx, "audit-unanswered", id, format!("epoch {used_epoch}: the node did not answer (attempt {t} of {}); no bond staked", args.retries),
            json!({"epoch": used_epoch, "attempt": t}));
        return Ok(0);
    }
    let audit_id = ctx.market.record_audit(id, used_epoch, version, true, transcript).await?;
    let p = state.deals.entry(id).or_default();
    p.audited.insert(used_epoch);
    p.missing_tries.remove(&used_epoch);
    state.save(&args.state)?;
    log(ctx, "record", id, format!("epoch {used_epoch}: audit passed, recorded as audit {audit_id}"),
        json!({"epoch": used_epoch, "audit_id": audit_id, "passed": true, "transcript_hash": transcript}));
    Ok(1)
}

async fn missed_step(ctx: &Ctx, path: &Path, params: &MarketParams, state: &mut WatchState, deal: &DealInfo, now: u64) -> Result<u64> {
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
            log(ctx, "mark-missed", id, format!("epoch {e}: not proven; marked missed (faults now {f})"), json!({"epoch": e, "failures": f}));
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

async fn slash_step(ctx: &Ctx, path: &Path, state: &mut WatchState, id: u64, now: u64) -> Result<u64> {
    let open: Vec<u64> =
        state.deals.get(&id).map(|p| p.disputes.iter().filter(|(_, done)| !**done).map(|(q, _)| *q).collect()).unwrap_or_default();
    let mut n = 0;
    for q in open {
        let info = ctx.market.get_dispute(q).await?;
        match info.state {
            DisputeState::Open if now > info.deadline => {
                ctx.market.slash(q).await.with_context(|| format!("slash dispute {q}"))?;
                n += 1;
                log(ctx, "slash", id, format!("dispute {q} unanswered past its deadline: slashed"), json!({"dispute_id": q}));
            }
            DisputeState::Open => continue,
            DisputeState::Answered => {
                log(ctx, "dispute-answered", id, format!("dispute {q} was answered (bond to the provider)"), json!({"dispute_id": q}))
            }
            _ => {}
        }
        state.deals.entry(id).or_default().disputes.insert(q, true);
        state.save(path)?;
    }
    Ok(n)
}
