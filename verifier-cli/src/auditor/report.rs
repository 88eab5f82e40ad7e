//! The output of the auditor's commands: each library report
//! (`dpor_client::auditor`) as a human text and a JSON value ([`Output`]).

use super::AuditFailed;
use crate::output::Output;
use alloy_primitives::{B256, U256};
use dpor_client::auditor::audit::{run_label, Audit, DisputeOutcome, RecordOutcome};
use dpor_client::auditor::{challenge, dispute, mark_missed, slash, tokens, withdraw};
use dpor_core::RunTag;
use serde_json::json;

/// Most failures listed in the human report (the JSON lists all of them).
const HUMAN_FAILURES: usize = 10;

/// `dpor audit`'s output. A failed audit, or one whose on-chain step failed, is
/// [`AuditFailed`] carrying the complete report (`main` prints it, then exits non-zero).
///
/// # Errors
/// [`AuditFailed`], as said.
pub fn audit(a: Audit) -> anyhow::Result<Output> {
    let (deal, epoch, hash, seed, lambda, transcript) = (a.deal, a.epoch, a.digest_hash, a.seed, a.lambda, a.transcript);
    let failures_json: Vec<_> = a
        .failures
        .iter()
        .map(|f| json!({"run": run_label(f.tag), "run_tag": f.tag.0, "position": f.position, "fault": f.fault.to_string()}))
        .collect();
    let runs_json: Vec<_> = a
        .runs
        .iter()
        .map(|r| {
            json!({
                "run": run_label(r.tag), "run_tag": r.tag.0, "built_at": r.built_at, "size": r.size,
                "asked": r.asked, "returned": r.returned, "failed": r.failed, "error": r.error,
            })
        })
        .collect();
    let mut json = json!({
        "deal": deal, "epoch": epoch, "version": a.version, "digest_hash": hash, "seed": seed,
        "lambda": lambda, "runs_checked": a.runs.len(), "samples_checked": a.samples_checked,
        "bytes_received": a.bytes_received, "seconds": a.seconds, "passed": a.passed,
        "failures_total": a.failures.len(), "failures": failures_json, "runs": runs_json,
        "transcript_hash": transcript, "node_error": a.node_error,
    });
    let mut human = format!(
        "audit of deal {deal}, epoch {epoch}, digest v{} ({hash})\n  seed {seed}, λ = {lambda}\n  {} runs, {} samples checked, {} bytes received in {:.2} s\n",
        a.version,
        a.runs.len(),
        a.samples_checked,
        a.bytes_received,
        a.seconds
    );
    for r in &a.runs {
        human.push_str(&format!(
            "  run {:>4} (built at {:>6}): {:>4} asked, {:>4} returned, {:>4} failed{}\n",
            run_label(r.tag),
            r.built_at,
            r.asked,
            r.returned,
            r.failed,
            r.error.as_ref().map(|e| format!(" (node error: {e})")).unwrap_or_default()
        ));
    }
    if a.passed {
        human.push_str("  PASSED: every sample verified against the posted digest\n");
    } else {
        human.push_str(&format!("  FAILED: {} of {} samples\n", a.failures.len(), a.samples_checked));
        for f in a.failures.iter().take(HUMAN_FAILURES) {
            human.push_str(&format!("    run {} position {}: {}\n", run_label(f.tag), f.position, f.fault));
        }
        if a.failures.len() > HUMAN_FAILURES {
            human.push_str(&format!("    … and {} more\n", a.failures.len() - HUMAN_FAILURES));
        }
    }
    human.push_str(&format!("  transcript {transcript}"));
    match &a.dispute {
        Some(DisputeOutcome::Opened { id, target: t, deadline, bond }) => {
            json["dispute"] = json!({"dispute_id": id, "run_tag": t.run_tag, "position": t.position, "chunk": t.chunk, "deadline": deadline, "bond": bond.to_string()});
            json["dispute_id"] = json!(id);
            human.push_str(&format!(
                "\n  dispute {id} opened on run {} position {} chunk {} (bond {} tokens); the provider must answer by timestamp {deadline}, else anyone may `dpor slash {id}`",
                RunTag(u32::from(t.run_tag)),
                t.position,
                t.chunk,
                tokens(U256::from(*bond))
            ));
        }
        Some(DisputeOutcome::Failed(e)) => {
            json["dispute_error"] = json!(e);
            human.push_str(&format!("\n  could not open a dispute: {e}"));
        }
        Some(DisputeOutcome::Unfit) | None => {}
    }
    match &a.record {
        Some(RecordOutcome::Recorded(id)) => {
            json["record"] = json!({"audit_id": id});
            human.push_str(&format!("\n  recorded on chain as audit {id} ({})", if a.passed { "passed" } else { "failed" }));
        }
        Some(RecordOutcome::Failed(e)) => {
            json["record_error"] = json!(e);
            human.push_str(&format!("\n  could not record the audit: {e}"));
        }
        None => {}
    }
    let output = Output::new(human, json);
    if !a.passed {
        return Err(anyhow::Error::new(AuditFailed(output)));
    }
    match a.chain_error {
        // The audit passed but the chain refused the record: print the report, fail.
        Some(e) => Err(anyhow::Error::new(AuditFailed(output)).context(format!("{e:#}"))),
        None => Ok(output),
    }
}

/// `dpor record`'s output: audit `id` recorded for `deal`'s `epoch` against digest `version`.
pub fn record(id: u64, deal: u64, epoch: u64, version: u64, passed: bool, transcript: B256) -> Output {
    let verdict = if passed { "passed" } else { "failed" };
    Output::new(
        format!("audit {id} recorded: deal {deal}, epoch {epoch}, digest v{version}, {verdict}, transcript {transcript}"),
        json!({"audit_id": id, "deal": deal, "epoch": epoch, "version": version, "passed": passed, "transcript_hash": transcript}),
    )
}

/// `dpor dispute`'s output: the dispute `req` asked for, opened as `q`.
pub fn dispute(req: &dispute::DisputeRequest, q: &dispute::Opened) -> Output {
    let (deal, run_tag, position, chunk, transcript) = (req.deal, req.run_tag, req.position, req.chunk, req.transcript);
    let (id, epoch, version) = (q.id, q.epoch, q.version);
    Output::new(
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
    )
}

/// `dpor challenge DEAL EPOCH`'s output.
pub fn challenge_opened(c: &challenge::Opened) -> Output {
    let (id, deal, epoch, bond) = (c.id, c.deal, c.epoch, c.bond);
    Output::new(
        format!(
            "challenge {id} opened on deal {deal} epoch {epoch} ({} tokens bonded); the provider must answer on chain before timestamp {}",
            tokens(U256::from(bond)),
            c.deadline
        ),
        json!({"challenge_id": id, "deal": deal, "epoch": epoch, "bond": bond.to_string(), "deadline": c.deadline}),
    )
}

/// `dpor challenge --fault ID`'s output.
pub fn challenge_faulted(c: &challenge::Faulted) -> Output {
    let id = c.id;
    Output::new(
        format!(
            "challenge {id} faulted: deal {} epoch {} missed, {} fault(s), collateral left {} tokens",
            c.deal,
            c.epoch,
            c.failures,
            tokens(U256::from(c.collateral_left))
        ),
        json!({"challenge_id": id, "deal": c.deal, "epoch": c.epoch, "tx": c.tx, "failures": c.failures, "collateral_left": c.collateral_left.to_string()}),
    )
}

/// `dpor slash DISPUTE`'s output.
pub fn slash(dispute: u64, s: &slash::Slashed) -> Output {
    Output::new(
        format!(
            "dispute {dispute} slashed (deal {}): challenger {} credited {} tokens (share + bond), owner {} credited {}; collateral left {} tokens, {} fault(s), deal {:?}",
            s.deal,
            s.challenger,
            tokens(s.to_challenger),
            s.owner,
            tokens(s.to_owner),
            tokens(U256::from(s.collateral_left)),
            s.failures,
            s.deal_state
        ),
        json!({
            "dispute_id": dispute, "deal": s.deal, "tx": s.tx, "challenger": s.challenger,
            "to_challenger": s.to_challenger.to_string(), "owner": s.owner, "to_owner": s.to_owner.to_string(),
            "collateral_left": s.collateral_left.to_string(), "failures": s.failures, "deal_state": format!("{:?}", s.deal_state),
        }),
    )
}

/// `dpor mark-missed`'s output: `deal`'s `epoch` marked missed.
pub fn mark_missed(deal: u64, epoch: u64, m: &mark_missed::Marked) -> Output {
    Output::new(
        format!(
            "epoch {epoch} of deal {deal} marked missed: owner {} credited {} tokens (refund{}); {} fault(s), deal {:?}",
            m.owner,
            tokens(m.owner_credited),
            if m.slashed { " + slash" } else { "" },
            m.failures,
            m.deal_state
        ),
        json!({
            "deal": deal, "epoch": epoch, "owner_credited": m.owner_credited.to_string(), "failures": m.failures,
            "collateral_left": U256::from(m.collateral_left).to_string(), "deal_state": format!("{:?}", m.deal_state),
        }),
    )
}

/// `dpor withdraw`'s output.
pub fn withdraw(w: &withdraw::Withdrawn) -> Output {
    let me = w.account;
    match w.balance {
        None => Output::new(format!("{me} is owed nothing"), json!({"account": me, "amount": "0"})),
        Some(balance) => Output::new(
            format!("{me} withdrew {} tokens; balance now {} tokens", tokens(w.amount), tokens(balance)),
            json!({"account": me, "amount": w.amount.to_string(), "balance": balance.to_string()}),
        ),
    }
}
