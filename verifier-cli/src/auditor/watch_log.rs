//! `dpor watch`: the long-running auditor's output. Its passes are the library's
//! `dpor_client::auditor::watch`; every action it takes or sees is reported to a
//! [`Printer`], which prints one line each (human, or one JSON object with `--json`)
//! and counts it in the metrics ([`super::watch_metrics`]), so that the metrics and
//! the log cannot disagree.

use crate::context::Ctx;
use crate::output::Output;
use anyhow::Context;
use dpor_client::auditor::watch::{self as lib, WatchArgs, WatchLog};
use dpor_client::disperse::repair::RepairReport;
use serde_json::json;
use std::path::Path;

/// Prints `watch`'s actions on stdout (and a repair's notes on stderr).
pub struct Printer {
    /// One JSON object per line instead of text.
    pub json: bool,
}

impl dpor_client::progress::Notes for Printer {
    fn note(&self, line: &str) {
        eprintln!("{line}");
    }
}

impl WatchLog for Printer {
    fn log(&self, action: &str, deal: u64, human: String, mut extra: serde_json::Value) {
        if let Some(m) = super::watch_metrics::get() {
            m.action(action, &extra);
        }
        if self.json {
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

    fn repaired(&self, dir: &Path, report: &RepairReport) {
        let out = crate::disperse::repair_output(report);
        self.log("repair", 0, format!("{}: {}", dir.display(), out.human), out.json);
    }
}

/// Runs `watch` until killed (or one pass with `once`), serving its metrics on
/// `metrics_listen` if given. Returns a summary of all passes.
///
/// # Errors
/// Those of `dpor_client::auditor::watch::run`, or a metrics address that cannot be bound.
pub async fn run(ctx: &Ctx, args: WatchArgs, metrics_listen: Option<std::net::SocketAddr>) -> anyhow::Result<Output> {
    lib::check_args(&args)?;
    let _metrics = match metrics_listen {
        Some(at) => {
            let server = super::watch_metrics::start(at).await.context("--metrics-listen")?;
            eprintln!("watch: metrics on http://{}/metrics", server.local_addr());
            Some(server)
        }
        None => None,
    };
    let state = args.state.clone();
    let actions = lib::run(ctx, args, &Printer { json: ctx.json }).await?;
    Ok(Output::new(format!("watch: {actions} actions"), json!({"actions": actions, "state": state})))
}
