//! `dpor beacon relay --drand-url`: real drand evmnet rounds (the fixture
//! `contracts/test/fixtures/beacon_evmnet.json`) served by a local loopback HTTP server
//! in drand's API format, relayed to a `DrandBeacon` holding evmnet's public key on an
//! anvil whose clock runs at the time those rounds were emitted. Checked: a round whose
//! signature was tampered with is refused before any transaction; only the epochs an
//! Active deal runs in are fetched; the real round is recorded with drand's randomness
//! and gives the deal's epoch its seed.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use dpor_chain::{Deployment, Devnet, DevnetOptions, Market, ANVIL_KEYS, U256};
use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response, StatusCode};
use std::collections::HashMap;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

const EVMNET: &str = include_str!("../../contracts/test/fixtures/beacon_evmnet.json");
/// The fixture round the deal's first epoch takes its seed from.
const ROUND: u64 = 10_000_000;
/// The market's epoch (its floor).
const EPOCH: u64 = 21_600;

/// A drand HTTP API for the fixture's rounds: `GET /{chain hash}/public/{round}`.
struct Drand {
    chain_hash: String,
    /// round → (signature hex, randomness hex)
    rounds: HashMap<u64, (String, String)>,
    /// Answer with a signature of which one byte is changed (randomness kept consistent).
    tamper: AtomicBool,
    /// Every path asked, in order.
    asked: Mutex<Vec<String>>,
}

impl Drand {
    fn answer(&self, path: &str) -> Response<Full<Bytes>> {
        self.asked.lock().unwrap().push(path.to_string());
        let round = path
            .strip_prefix(&format!("/{}/public/", self.chain_hash))
            .and_then(|r| r.parse::<u64>().ok())
            .and_then(|r| self.rounds.get(&r).map(|v| (r, v)));
        let Some((round, (sig, rand))) = round else {
            let mut r = Response::new(Full::new(Bytes::from_static(b"{\"error\":\"not found\"}")));
            *r.status_mut() = StatusCode::NOT_FOUND;
            return r;
        };
        let (sig, rand) = if self.tamper.load(Ordering::SeqCst) {
            let mut b = hex::decode(sig.trim_start_matches("0x")).unwrap();
            b[40] ^= 1;
            (hex::encode(&b), hex::encode(dpor_beacon::randomness(&b)))
        } else {
            (sig.trim_start_matches("0x").to_string(), rand.trim_start_matches("0x").to_string())
        };
        let body = serde_json::json!({"round": round, "randomness": rand, "signature": sig}).to_string();
        Response::new(Full::new(Bytes::from(body)))
    }
}

/// Serves `drand` on a free loopback port until the test's runtime ends; returns the URL.
async fn serve(drand: Arc<Drand>) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let d = drand.clone();
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(move |req: Request<Incoming>| {
                    let d = d.clone();
                    async move { Ok::<_, std::convert::Infallible>(d.answer(req.uri().path())) }
                });
                let _ = hyper::server::conn::http1::Builder::new().serve_connection(hyper_util::rt::TokioIo::new(stream), svc).await;
            });
        }
    });
    url
}

async fn relay(rpc: &str, deployment: &std::path::Path, url: &str) -> (bool, String) {
    let dir = deployment.parent().unwrap();
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_dpor"))
        .args(["--json", "--deployment"])
        .arg(deployment)
        .args(["beacon", "relay", "--once", "--drand-url", url])
        .env("DPOR_RPC_URL", rpc)
        .env("DPOR_KEY_FILE", dir.join("key4"))
        .env_remove("DPOR_MARKET")
        .env_remove("DPOR_DEPLOYMENT")
        .env_remove("DPOR_DRAND_URL")
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output()
        .await
        .unwrap();
    (out.status.success(), format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
}

fn e18(n: u64) -> U256 {
    U256::from(n) * U256::from(10u64).pow(U256::from(18u64))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relays_verified_evmnet_rounds_only_for_epochs_a_deal_needs() {
    let v: serde_json::Value = serde_json::from_str(EVMNET).unwrap();
    let genesis = v["genesisTime"].as_u64().unwrap();
    let period = v["period"].as_u64().unwrap();
    let rounds: HashMap<u64, (String, String)> = v["rounds"]
        .as_array()
        .unwrap()
        .iter()
        .enumerate()
        .map(|(i, r)| {
            (r.as_u64().unwrap(), (v["signatures"][i].as_str().unwrap().to_string(), v["randomness"][i].as_str().unwrap().to_string()))
        })
        .collect();
    let chain_hash = v["chainHash"].as_str().unwrap().trim_start_matches("0x").to_string();
    assert_eq!(chain_hash, dpor_beacon::EVMNET_CHAIN_HASH_HEX, "the CLI's default chain hash is the fixture's");
    let expected_randomness = rounds[&ROUND].1.clone();
    let drand = Arc::new(Drand { chain_hash, rounds, tamper: AtomicBool::new(true), asked: Mutex::new(Vec::new()) });
    let url = serve(drand.clone()).await;

    // The market's global epoch 1 starts when ROUND is emitted: genesis = that − P.
    let emitted = genesis + (ROUND - 1) * period;
    let market_genesis = emitted - EPOCH;
    let mut dev = Devnet::start_bare(DevnetOptions { genesis_timestamp: Some(market_genesis - 600), ..Default::default() })
        .await
        .expect("anvil (is `npm install` done?)");
    let third = ANVIL_KEYS[5];
    let token = dev.forge_create("contracts/src/token/TestToken.sol:TestToken", third, &[]).await.unwrap();
    let words: Vec<&str> = v["publicKey"].as_array().unwrap().iter().map(|w| w.as_str().unwrap()).collect();
    let args = [format!("[{}]", words.join(",")), genesis.to_string(), period.to_string()];
    let beacon = dev.forge_create("contracts/src/beacon/DrandBeacon.sol:DrandBeacon", third, &args).await.unwrap();
    dev.set_next_timestamp(market_genesis).await.unwrap();
    let env = [
        ("TOKEN", format!("{token:?}")),
        ("BEACON", format!("{beacon:?}")),
        ("EPOCH_SECONDS", EPOCH.to_string()),
        ("ANSWER_SECONDS", "54000".to_string()),
        ("DEPLOYER_KEY", ANVIL_KEYS[0].to_string()),
    ];
    let run = dev.forge_script_deploy(&env).await.unwrap();
    assert!(run.ok, "{}", run.output);
    let d = Deployment::from_output(&run.output).unwrap();
    dev.adopt(&d);
    let dir = tempfile::tempdir().unwrap();
    let deployment = dir.path().join("deployment.json");
    std::fs::write(&deployment, serde_json::to_string(&d).unwrap()).unwrap();
    std::fs::write(dir.path().join("key4"), ANVIL_KEYS[4]).unwrap();

    let relayer: Market = dev.client(4).await.unwrap();
    let params = relayer.params().await.unwrap();
    assert_eq!(params.genesis, market_genesis, "the market's genesis block got the timestamp set for it");
    assert_eq!(relayer.beacon_round_at(beacon, params.global_start(1)).await.unwrap(), ROUND);

    // Global epoch 0 has started, and no deal runs in it: nothing is fetched.
    let (ok, out) = relay(dev.rpc_url(), &deployment, &url).await;
    assert!(ok, "{out}");
    assert!(drand.asked.lock().unwrap().is_empty(), "fetched rounds no deal needs: {:?}", drand.asked.lock().unwrap());

    // A deal accepted in epoch 0 runs from global epoch 1.
    let provider = dev.client(1).await.unwrap();
    let owner = dev.client(2).await.unwrap();
    let p = provider.account().unwrap();
    provider.mint(p, e18(10_000)).await.unwrap();
    provider.approve_market(e18(10_000)).await.unwrap();
    provider.register(vec![0], vec!["/ip4/127.0.0.1/tcp/4001".into()], 1_000_000, 1_000_000, 1 << 20, e18(1000)).await.unwrap();
    owner.mint(owner.account().unwrap(), e18(10_000)).await.unwrap();
    owner.approve_market(e18(10_000)).await.unwrap();
    let deal = owner.open_deal(p, 8, 256, 4, 1, 5, 1_000_000, 1_000_000).await.unwrap();
    provider.accept_deal(deal).await.unwrap();
    assert_eq!(owner.get_deal(deal).await.unwrap().start_epoch, 1);

    // Its first epoch: the round is emitted; the server lies first, then answers.
    dev.warp_to(emitted).await.unwrap();
    let (ok, out) = relay(dev.rpc_url(), &deployment, &url).await;
    assert!(!ok && out.contains("is not the beacon's signature"), "a tampered round was not refused:\n{out}");
    assert_eq!(relayer.beacon_randomness(beacon, ROUND).await.unwrap(), None, "the tampered round was recorded");
    let path = format!("/{}/public/{ROUND}", dpor_beacon::EVMNET_CHAIN_HASH_HEX);
    assert_eq!(*drand.asked.lock().unwrap(), vec![path.clone()], "only the round of the deal's epoch is fetched");

    drand.tamper.store(false, Ordering::SeqCst);
    let (ok, out) = relay(dev.rpc_url(), &deployment, &url).await;
    assert!(ok, "{out}");
    assert!(out.contains("\"round\":10000000"), "{out}");
    let r = relayer.beacon_randomness(beacon, ROUND).await.unwrap().expect("round recorded");
    assert_eq!(format!("{r:?}"), expected_randomness.to_lowercase(), "drand's randomness of the round");
    assert!(relayer.epoch_seed(deal, 0).await.unwrap().is_some(), "the deal's epoch 0 has its seed");
    assert_eq!(drand.asked.lock().unwrap().len(), 2);

    // Recorded already: a further pass fetches nothing.
    let (ok, out) = relay(dev.rpc_url(), &deployment, &url).await;
    assert!(ok && out.contains("\"recorded\":0"), "{out}");
    assert_eq!(drand.asked.lock().unwrap().len(), 2);
}
