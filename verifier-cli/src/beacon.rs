//! `dpor beacon relay --beacon-key FILE`: records on chain, for each global epoch whose
//! start has passed, the beacon round `roundAt(start)` the market takes that epoch's
//! seed from, signed by a local beacon key (`dpor-beacon keygen`), through
//! `DrandBeacon.record` — the same on-chain BLS verification path as drand's `evmnet`.
//! This is how offline demos and tests run in beacon mode. Against evmnet itself the
//! signatures come from drand's HTTP API instead (an operator task, docs/OPERATIONS.md).

use crate::context::Ctx;
use crate::output::Output;
use anyhow::{bail, Context, Result};
use clap::Subcommand;
use serde_json::json;
use std::path::PathBuf;
use std::time::Duration;

/// `beacon` subcommands.
#[derive(Debug, Subcommand)]
pub enum BeaconCommand {
    /// Record the beacon round of every started global epoch (signed with a local key).
    Relay {
        /// The local beacon's key file (`dpor-beacon keygen`).
        #[arg(long)]
        beacon_key: PathBuf,
        /// Start from this global epoch (default: the current one minus --back).
        #[arg(long)]
        from_epoch: Option<u64>,
        /// Without --from-epoch: also the epochs this many before the current one.
        #[arg(long, default_value_t = 2)]
        back: u64,
        /// Seconds between passes.
        #[arg(long, default_value_t = 5)]
        interval: u64,
        /// One pass, then exit.
        #[arg(long)]
        once: bool,
    },
}

/// Runs a beacon command.
pub async fn run(ctx: &Ctx, cmd: BeaconCommand) -> Result<Output> {
    let BeaconCommand::Relay { beacon_key, from_epoch, back, interval, once } = cmd;
    let local = dpor_beacon::KeyFile::load(&beacon_key)
        .map_err(|e| anyhow::anyhow!("{e}"))
        .with_context(|| format!("loading the beacon key {}", beacon_key.display()))?;
    ctx.key()?;
    let params = ctx.market.params().await?;
    if params.dev_seeds() {
        bail!("the market at {} has no beacon (dev seeds): nothing to relay", ctx.market.address());
    }
    let beacon = params.beacon;
    let now = ctx.market.latest_timestamp().await?;
    let mut next = match from_epoch {
        Some(g) => g,
        None => params.global_epoch_at(now).unwrap_or(0).saturating_sub(back),
    };
    let mut recorded = 0u64;
    loop {
        let now = ctx.market.latest_timestamp().await?;
        while params.global_start(next) <= now {
            let start = params.global_start(next);
            let round = ctx.market.beacon_round_at(beacon, start).await?;
            if ctx.market.beacon_randomness(beacon, round).await?.is_none() {
                let t = ctx.market.beacon_round_time(beacon, round).await?;
                if t > now {
                    break; // the round is emitted just after the epoch's start; next pass
                }
                let tx = ctx.market.beacon_record(beacon, round, local.sign(round)).await.with_context(|| format!("record round {round}"))?;
                recorded += 1;
                if ctx.json {
                    println!("{}", json!({"action": "beacon-record", "global_epoch": next, "round": round, "tx": tx}));
                } else {
                    println!("beacon: global epoch {next}: recorded round {round} (tx {tx})");
                }
            }
            next += 1;
        }
        if once {
            break;
        }
        tokio::time::sleep(Duration::from_secs(interval.max(1))).await;
    }
    Ok(Output::new(format!("beacon: recorded {recorded} rounds; next global epoch {next}"), json!({"recorded": recorded, "next_epoch": next})))
}
