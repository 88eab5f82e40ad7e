//! `dpor audit --secret`: the owner's compact secret audit (the audit itself is
//! `dpor_client::owner::secret_audit`; this is the command and its output).

use crate::context::Ctx;
use crate::output::Output;
use crate::owner_state::OwnerState;
use anyhow::{ensure, Context};
use dpor_client::owner::secret_audit::secret_audit;
use serde_json::json;

/// A secret audit that found a failed run: `main` prints the report it carries, then
/// exits non-zero.
#[derive(Debug)]
pub struct SecretAuditFailed(pub Output);

impl std::fmt::Display for SecretAuditFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let j = &self.0.json;
        write!(f, "the secret audit of deal {} failed: {} of {} runs", j["deal"], j["failed_runs"], j["runs"].as_array().map_or(0, Vec::len))
    }
}

impl std::error::Error for SecretAuditFailed {}

/// `dpor audit --secret [DEAL] [--lambda λ]`: the owner's secret audit of its current
/// state (the state file's deal; `deal`, if given, must be the same).
///
/// Errors: no state file or another deal's, the node unreachable, a pending write
/// that cannot be settled, and [`SecretAuditFailed`] if any run fails.
pub async fn run(ctx: &Ctx, deal: Option<u64>, lambda: Option<u32>) -> anyhow::Result<Output> {
    let mut state = OwnerState::load(&ctx.state_path)?;
    if let Some(d) = deal {
        ensure!(
            d == state.deal,
            "the secret audit needs the owner's keys: {} holds deal {}, not {d} (use --state, or the public `dpor audit {d}`)",
            ctx.state_path.display(),
            state.deal
        );
    }
    let node = ctx.node_for_deal(state.deal).await?;
    // After a rejected answer the owner audits its previous state, whose runs the node keeps.
    match state.pending.as_ref().and_then(super::recover::rejected) {
        Some(why) => eprintln!("dpor: warning: {why}"),
        None => super::commands::settle_if_pending(ctx, &node, &mut state).await?,
    }
    let lambda = lambda.unwrap_or(state.lambda);
    let seed: [u8; 32] = rand::random();
    let report = secret_audit(&node, &state, lambda, seed).await.context("secret audit")?;
    let failed = report.runs.iter().filter(|r| r.fault.is_some()).count();
    let mut human = format!(
        "secret audit of deal {} (λ = {lambda}, {} runs): {}; {} bytes sent, {} received, {:.0} ms\n",
        state.deal,
        report.runs.len(),
        if failed == 0 { "passed".to_string() } else { format!("{failed} runs FAILED") },
        report.bytes_sent,
        report.bytes_received,
        report.seconds * 1e3
    );
    for r in &report.runs {
        human.push_str(&format!(
            "  run {:>10}: {:>4} samples of {:>8}{}: {}\n",
            r.run,
            r.samples,
            r.size,
            if r.cached { " (cached σ)" } else { "" },
            r.fault.as_deref().unwrap_or("ok")
        ));
    }
    let out = Output::new(
        human.trim_end().to_string(),
        json!({
            "deal": state.deal,
            "passed": failed == 0,
            "failed_runs": failed,
            "lambda": lambda,
            "runs": report.runs,
            "bytes_sent": report.bytes_sent,
            "bytes_received": report.bytes_received,
            "seconds": report.seconds,
        }),
    );
    if failed > 0 {
        return Err(SecretAuditFailed(out).into());
    }
    Ok(out)
}
