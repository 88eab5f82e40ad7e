//! The beacon relay's logic (`dpor beacon relay`): for each global epoch whose start
//! has passed, record on chain the beacon round `roundAt(start)` the market takes that
//! epoch's seed from, through `DrandBeacon.record` (the contract verifies the BLS
//! signature; docs/CONTRACTS.md, "Randomness"). The signatures come from a local beacon
//! key (offline demos and tests: every started epoch is relayed) or from a drand HTTP
//! API (`GET {URL}/{chain hash}/public/{round}`, as drand's `api.drand.sh` serves
//! evmnet): each round is verified here against the beacon contract's own public key
//! before any gas is spent (a server that lies is refused, nothing is sent), and only
//! the rounds of epochs some Active deal runs in are fetched and recorded.

use anyhow::{ensure, Context, Result};
use dpor_chain::{Address, DealState, Market, MarketParams};
use serde::Deserialize;
use std::time::Duration;

/// The largest drand answer read (a round's JSON is about 300 bytes).
const MAX_ANSWER_BYTES: usize = 64 << 10;

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
pub enum SignatureSource {
    /// A local beacon key (`dpor-beacon keygen`) signs every round.
    Local(dpor_beacon::LocalBeacon),
    /// A drand HTTP API, each answer verified against the beacon's public key `pk`.
    Drand {
        /// The API endpoint.
        http: DrandHttp,
        /// The beacon contract's public key (read from the chain).
        pk: dpor_beacon::PublicKey,
    },
}

/// One round recorded on chain.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// The global epoch whose seed the round gives.
    pub global_epoch: u64,
    /// The beacon round.
    pub round: u64,
    /// The `record` transaction's hash.
    pub tx: alloy_primitives::B256,
    /// Where the signature came from: `local`, or the drand URL it was fetched from.
    pub from: String,
}

/// A relay over one market: the market's parameters and beacon, the signature
/// source, and the next global epoch to look at.
pub struct Relay {
    /// The market's parameters (epoch grid, beacon address).
    pub params: MarketParams,
    /// The beacon contract (`params.beacon`).
    pub beacon: Address,
    /// Where the signatures come from.
    pub source: SignatureSource,
    /// The next global epoch to relay.
    pub next: u64,
}

impl Relay {
    /// One pass: every global epoch from [`Self::next`] whose start has passed (at the
    /// chain's latest timestamp) gets its round recorded, unless it is recorded already
    /// or (from drand) no Active deal runs in it; stops at a round not yet emitted.
    /// Calls `on_record` after each recording. Returns the rounds recorded.
    ///
    /// # Errors
    /// A chain read or transaction fails, drand's answer fails or does not verify.
    pub async fn pass(&mut self, market: &Market, mut on_record: impl FnMut(&Recorded)) -> Result<u64> {
        let now = market.latest_timestamp().await?;
        let needed = match &self.source {
            SignatureSource::Local(_) => None,
            SignatureSource::Drand { .. } => Some(active_deal_epochs(market).await?),
        };
        let mut recorded = 0u64;
        while self.params.global_start(self.next) <= now {
            let next = self.next;
            if let Some(ranges) = &needed {
                if !ranges.iter().any(|&(a, b)| a <= next && next < b) {
                    self.next += 1; // no deal runs in this epoch: its seed is never read
                    continue;
                }
            }
            let start = self.params.global_start(next);
            let round = market.beacon_round_at(self.beacon, start).await?;
            if market.beacon_randomness(self.beacon, round).await?.is_none() {
                let t = market.beacon_round_time(self.beacon, round).await?;
                if t > now {
                    break; // the round is emitted just after the epoch's start; next pass
                }
                let (sig, from) = match &self.source {
                    SignatureSource::Local(local) => (local.sign(round), "local".to_string()),
                    SignatureSource::Drand { http, pk } => {
                        let url = http.url(round);
                        (verified_signature(pk, round, http.fetch(round).await?, &url)?, url)
                    }
                };
                let tx = market.beacon_record(self.beacon, round, sig).await.with_context(|| format!("record round {round}"))?;
                recorded += 1;
                on_record(&Recorded { global_epoch: next, round, tx, from });
            }
            self.next += 1;
        }
        Ok(recorded)
    }
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
