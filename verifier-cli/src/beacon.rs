//! `dpor beacon relay`: records on chain, for each global epoch whose start has passed,
//! the beacon round `roundAt(start)` the market takes that epoch's seed from, through
//! `DrandBeacon.record` (the contract verifies the BLS signature). The signatures come
//! from one of two sources:
//!
//! - `--beacon-key FILE`: a local beacon key (`dpor-beacon keygen`) signs every round;
//!   every started epoch is relayed. This is how offline demos and tests run.
//! - `--drand-url URL`: a drand HTTP API (`GET {URL}/{chain hash}/public/{round}`, JSON
//!   with `round` and `signature`, as drand's `api.drand.sh` serves evmnet). Each round
//!   is verified here against the beacon contract's own public key before any gas is
//!   spent (a server that lies is refused, nothing is sent), and only the rounds of
//!   epochs some Active deal runs in are fetched and recorded.

//!
//! The relay's logic is `dpor_client::beacon_relay`; this is its argument parsing and
//! output.

use crate::context::Ctx;
use crate::output::Output;
use anyhow::{bail, Context, Result};
use clap::Subcommand;
use dpor_chain::Address;
use dpor_client::beacon_relay::{DrandHttp, Relay, SignatureSource};
use serde_json::json;
use std::path::PathBuf;
use std::time::Duration;

/// `beacon` subcommands.
#[derive(Debug, Subcommand)]
pub enum BeaconCommand {
    /// Record the beacon round of every started global epoch: signed with a local key
    /// (--beacon-key), or fetched from a drand HTTP API and verified (--drand-url), the
    /// latter only for epochs a deal needs.
    Relay {
        /// The local beacon's key file (`dpor-beacon keygen`).
        #[arg(long, required_unless_present = "drand_url", conflicts_with = "drand_url")]
        beacon_key: Option<PathBuf>,
        /// A drand HTTP API to fetch the rounds from, e.g. https://api.drand.sh.
        #[arg(long, env = "DPOR_DRAND_URL")]
        drand_url: Option<String>,
        /// The drand chain's hash, hex (default: evmnet's).
        #[arg(long, default_value = dpor_beacon::EVMNET_CHAIN_HASH_HEX)]
        chain_hash: String,
        /// Seconds to wait for the drand API's answer.
        #[arg(long, default_value_t = 10)]
        drand_timeout: u64,
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
    let BeaconCommand::Relay { beacon_key, drand_url, chain_hash, drand_timeout, from_epoch, back, interval, once } = cmd;
    ctx.key()?;
    let params = ctx.market.params().await?;
    if params.dev_seeds() {
        bail!("the market at {} has no beacon (dev seeds): nothing to relay", ctx.market.address());
    }
    let beacon: Address = params.beacon;
    let source = match (beacon_key, drand_url) {
        (Some(f), _) => SignatureSource::Local(
            dpor_beacon::KeyFile::load(&f)
                .map_err(|e| anyhow::anyhow!("{e}"))
                .with_context(|| format!("loading the beacon key {}", f.display()))?,
        ),
        (None, Some(url)) => {
            let words = ctx.market.beacon_public_key(beacon).await?;
            let pk = dpor_beacon::PublicKey::from_words(&words).map_err(|e| anyhow::anyhow!("the beacon {beacon}'s public key: {e}"))?;
            SignatureSource::Drand { http: DrandHttp::new(&url, &chain_hash, Duration::from_secs(drand_timeout.max(1)))?, pk }
        }
        (None, None) => bail!("give --beacon-key FILE or --drand-url URL"),
    };
    let now = ctx.market.latest_timestamp().await?;
    let next = match from_epoch {
        Some(g) => g,
        None => params.global_epoch_at(now).unwrap_or(0).saturating_sub(back),
    };
    let mut relay = Relay { params, beacon, source, next };
    let mut recorded = 0u64;
    loop {
        recorded += relay
            .pass(&ctx.market, |r| {
                if ctx.json {
                    println!(
                        "{}",
                        json!({"action": "beacon-record", "global_epoch": r.global_epoch, "round": r.round, "tx": r.tx, "from": r.from})
                    );
                } else {
                    println!("beacon: global epoch {}: recorded round {} from {} (tx {})", r.global_epoch, r.round, r.from, r.tx);
                }
            })
            .await?;
        if once {
            break;
        }
        tokio::time::sleep(Duration::from_secs(interval.max(1))).await;
    }
    let next = relay.next;
    Ok(Output::new(
        format!("beacon: recorded {recorded} rounds; next global epoch {next}"),
        json!({"recorded": recorded, "next_epoch": next}),
    ))
}
