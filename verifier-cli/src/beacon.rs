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

use crate::context::Ctx;
use crate::output::Output;
use anyhow::{bail, ensure, Context, Result};
use clap::Subcommand;
use dpor_chain::{Address, DealState, Market};
use serde::Deserialize;
use serde_json::json;
use std::path::PathBuf;
use std::time::Duration;

/// The largest drand answer read (a round's JSON is about 300 bytes).
const MAX_ANSWER_BYTES: usize = 64 << 10;

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

/// One round's answer of the drand HTTP API (other fields ignored).
#[derive(Debug, Deserialize)]
struct DrandRound {
    round: u64,
    signature: String,
    #[serde(default)]
    randomness: Option<String>,
}

/// A drand HTTP API endpoint for one chain.
#[derive(Debug, Clone)]
pub struct DrandHttp {
    client: reqwest::Client,
    base: String,
    chain_hash: String,
}

impl DrandHttp {
    /// A client of `{url}/{chain_hash}/public/{round}`.
    ///
    /// # Errors
    /// A URL that is not http(s), a chain hash that is not 32 bytes of hex.
    pub fn new(url: &str, chain_hash: &str, timeout: Duration) -> Result<Self> {
        let base = url.trim().trim_end_matches('/').to_string();
        ensure!(base.starts_with("http://") || base.starts_with("https://"), "--drand-url {url:?}: give an http:// or https:// URL");
        let hash = chain_hash.trim().trim_start_matches("0x").to_lowercase();
        ensure!(
            hash.len() == 64 && hash.bytes().all(|b| b.is_ascii_hexdigit()),
            "--chain-hash {chain_hash:?}: give the drand chain's 32-byte hash in hex"
        );
        let client = reqwest::Client::builder().timeout(timeout).build().context("cannot build the HTTP client")?;
        Ok(Self { client, base, chain_hash: hash })
    }

    /// The URL of `round`.
    pub fn url(&self, round: u64) -> String {
        format!("{}/{}/public/{round}", self.base, self.chain_hash)
    }

    /// Fetches `round`'s signature (64 bytes), checking the answer names that round and,
    /// if it gives `randomness`, that it is sha256 of the signature. The signature itself
    /// is not verified here (see [`verified_signature`]).
    ///
    /// # Errors
    /// The request fails, the status is not a success, the answer is too large, not the
    /// JSON of a round, of another round, or inconsistent.
    pub async fn fetch(&self, round: u64) -> Result<Vec<u8>> {
        let url = self.url(round);
        let mut resp = self.client.get(&url).send().await.with_context(|| format!("GET {url}"))?;
        let status = resp.status();
        ensure!(status.is_success(), "GET {url}: HTTP {status}");
        let mut body = Vec::new();
        while let Some(chunk) = resp.chunk().await.with_context(|| format!("GET {url}: reading the answer"))? {
            body.extend_from_slice(&chunk);
            ensure!(body.len() <= MAX_ANSWER_BYTES, "GET {url}: the answer exceeds {MAX_ANSWER_BYTES} bytes");
        }
        let r: DrandRound = serde_json::from_slice(&body).with_context(|| format!("GET {url}: not a drand round"))?;
        ensure!(r.round == round, "GET {url}: the answer is round {}, not {round}", r.round);
        let sig = dpor_beacon::decode_hex("signature", &r.signature).map_err(|e| anyhow::anyhow!("GET {url}: {e}"))?;
        if let Some(rand) = &r.randomness {
            let rand = dpor_beacon::decode_hex("randomness", rand).map_err(|e| anyhow::anyhow!("GET {url}: {e}"))?;
            ensure!(rand == dpor_beacon::randomness(&sig), "GET {url}: its randomness is not sha256 of its signature");
        }
        Ok(sig)
    }
}

/// `sig` if it is `pk`'s signature of `round` (the check `DrandBeacon.record` makes on
/// chain, made here first so that a bad answer costs no gas).
///
/// # Errors
/// The signature does not verify, naming `source`.
pub fn verified_signature(pk: &dpor_beacon::PublicKey, round: u64, sig: Vec<u8>, source: &str) -> Result<Vec<u8>> {
    dpor_beacon::verify(pk, round, &sig)
        .map_err(|e| anyhow::anyhow!("round {round} from {source} is not the beacon's signature ({e}): not recorded"))?;
    Ok(sig)
}

/// The global epochs some Active deal runs in, as half-open ranges
/// `[start_epoch, start_epoch + num_epochs)`. Reads every deal (one call each).
///
/// # Errors
/// A chain read fails.
pub async fn active_deal_epochs(market: &Market) -> Result<Vec<(u64, u64)>> {
    let mut ranges = Vec::new();
    for id in 1..=market.deal_count().await? {
        let d = market.get_deal(id).await?;
        if d.state == DealState::Active {
            ranges.push((d.start_epoch, d.start_epoch.saturating_add(u64::from(d.num_epochs))));
        }
    }
    Ok(ranges)
}

/// Where the signatures come from.
enum Source {
    Local(dpor_beacon::LocalBeacon),
    Drand { http: DrandHttp, pk: dpor_beacon::PublicKey },
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
        (Some(f), _) => Source::Local(
            dpor_beacon::KeyFile::load(&f)
                .map_err(|e| anyhow::anyhow!("{e}"))
                .with_context(|| format!("loading the beacon key {}", f.display()))?,
        ),
        (None, Some(url)) => {
            let words = ctx.market.beacon_public_key(beacon).await?;
            let pk = dpor_beacon::PublicKey::from_words(&words).map_err(|e| anyhow::anyhow!("the beacon {beacon}'s public key: {e}"))?;
            Source::Drand { http: DrandHttp::new(&url, &chain_hash, Duration::from_secs(drand_timeout.max(1)))?, pk }
        }
        (None, None) => bail!("give --beacon-key FILE or --drand-url URL"),
    };
    let now = ctx.market.latest_timestamp().await?;
    let mut next = match from_epoch {
        Some(g) => g,
        None => params.global_epoch_at(now).unwrap_or(0).saturating_sub(back),
    };
    let mut recorded = 0u64;
    loop {
        let now = ctx.market.latest_timestamp().await?;
        let needed = match &source {
            Source::Local(_) => None,
            Source::Drand { .. } => Some(active_deal_epochs(&ctx.market).await?),
        };
        while params.global_start(next) <= now {
            if let Some(ranges) = &needed {
                if !ranges.iter().any(|&(a, b)| a <= next && next < b) {
                    next += 1; // no deal runs in this epoch: its seed is never read
                    continue;
                }
            }
            let start = params.global_start(next);
            let round = ctx.market.beacon_round_at(beacon, start).await?;
            if ctx.market.beacon_randomness(beacon, round).await?.is_none() {
                let t = ctx.market.beacon_round_time(beacon, round).await?;
                if t > now {
                    break; // the round is emitted just after the epoch's start; next pass
                }
                let (sig, from) = match &source {
                    Source::Local(local) => (local.sign(round), "local".to_string()),
                    Source::Drand { http, pk } => {
                        let url = http.url(round);
                        (verified_signature(pk, round, http.fetch(round).await?, &url)?, url)
                    }
                };
                let tx = ctx.market.beacon_record(beacon, round, sig).await.with_context(|| format!("record round {round}"))?;
                recorded += 1;
                if ctx.json {
                    println!("{}", json!({"action": "beacon-record", "global_epoch": next, "round": round, "tx": tx, "from": from}));
                } else {
                    println!("beacon: global epoch {next}: recorded round {round} from {from} (tx {tx})");
                }
            }
            next += 1;
        }
        if once {
            break;
        }
        tokio::time::sleep(Duration::from_secs(interval.max(1))).await;
    }
    Ok(Output::new(
        format!("beacon: recorded {recorded} rounds; next global epoch {next}"),
        json!({"recorded": recorded, "next_epoch": next}),
    ))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn drand_urls_and_hashes_are_checked() {
        let h = DrandHttp::new("http://127.0.0.1:9/", dpor_beacon::EVMNET_CHAIN_HASH_HEX, Duration::from_secs(1)).unwrap();
        assert_eq!(h.url(7), format!("http://127.0.0.1:9/{}/public/7", dpor_beacon::EVMNET_CHAIN_HASH_HEX));
        assert!(DrandHttp::new("ftp://x", dpor_beacon::EVMNET_CHAIN_HASH_HEX, Duration::from_secs(1)).is_err());
        assert!(DrandHttp::new("http://x", "abcd", Duration::from_secs(1)).is_err());
    }

    #[test]
    fn a_signature_of_another_round_or_key_is_refused() {
        let local = dpor_beacon::LocalBeacon::from_seed(b"dpor relay unit test beacon key").unwrap();
        let pk = local.public_key();
        assert!(verified_signature(&pk, 5, local.sign(5), "test").is_ok());
        let e = verified_signature(&pk, 5, local.sign(6), "test").unwrap_err().to_string();
        assert!(e.contains("round 5 from test is not the beacon's signature"), "{e}");
        let other = dpor_beacon::LocalBeacon::from_seed(b"another key, not the beacon's!!").unwrap();
        assert!(verified_signature(&pk, 5, other.sign(5), "test").is_err());
    }
}
