//! End to end, real processes (anvil + contracts, `dpor-node`, `dpor`): bad input that
//! `dpor` used to accept, or refuse only halfway (issue 21, item 4). Each case runs the
//! `dpor` binary, which must exit non-zero with a clear message and change nothing:
//! no transaction (deal count, balances, allowance, deals' size and terms on chain), no
//! request that changes the node (its deal status), no change to the owner's state.
//!
//! - `deal open` of 2^40 blocks, past the provider's room, without the tokens, or with
//!   β·K above what an epoch proof may carry;
//! - `audit` before the deal's first epoch names epoch 0;
//! - byte-range edits past N·β point to `dpor resize`;
//! - `resize` with terms the node refuses (price 1, collateral above its rate), and a
//!   resize whose on-chain step failed after the node resized is posted by the next
//!   `checkpoint` with the terms asked for, not the defaults;
//! - `watch --repair` on a missing folder, `watch --watch-state` in a missing folder;
//! - `put --manifest` of an address that is no FileManifest, `resize` of a shard.
//!
//! See `e2e_harness/mod.rs` for the harness.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "e2e_harness/mod.rs"]
mod harness;

use alloy_primitives::Address;
use dpor_chain::{DealInfo, EpochStatus, Market, ANVIL_KEYS};
use dpor_client::node_client::NodeClient;
use dpor_proto::messages::DealStatus;
use harness::{e18, node_bin, within, CliRun, Proc, World, AUDITOR, OWNER, PROVIDER};
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

/// Asserts that `r` failed with a message containing `phrase` (on stderr).
fn refused(r: &CliRun, what: &str, phrase: &str) {
    assert!(!r.ok, "{what} must fail:\nstdout: {}\nstderr: {}", r.stdout, r.stderr);
    assert!(r.stderr.contains(phrase), "{what}: the message should say {phrase:?}:\n{}", r.stderr);
}

/// What a refused command must not change of a deal on chain.
fn terms(d: &DealInfo) -> impl PartialEq + std::fmt::Debug {
    (d.state, d.num_blocks, d.price_per_epoch, d.escrow, d.collateral, d.digest_version)
}

/// What a refused command must not change of the node's copy of a deal.
fn node_state(s: &DealStatus) -> impl PartialEq + std::fmt::Debug {
    (s.num_blocks, s.last_nonce, s.write_count, s.rebuild_count, s.root_u, s.c, s.levels.clone())
}

/// The status of `deal` on the node of `provider` (dialled by its registered address).
async fn node_status(market: &Market, provider: Address, deal: u64) -> DealStatus {
    let p = market.get_provider(provider).await.unwrap();
    let node = NodeClient::connect(&p.multiaddrs[0], Duration::from_secs(30)).await.expect("connect to the node");
    node.status(deal).await.expect("node status")
}

/// Starts the node of anvil account `account` with its files `<stem>` (data dir),
/// `<stem>.addr`, `<stem>.log` in the world's folder, on `port` (0: any), with the
/// config file `config` if given; returns once it listens (its address file written).
async fn spawn_node(w: &World, account: usize, stem: &str, port: u16, config: Option<&Path>) -> Proc {
    let key_file = w.path(&format!("key{account}"));
    std::fs::write(&key_file, ANVIL_KEYS[account]).unwrap();
    let addr_file = w.path(&format!("{stem}.addr"));
    let _ = std::fs::remove_file(&addr_file);
    let log = std::fs::OpenOptions::new().create(true).append(true).open(w.path(&format!("{stem}.log"))).unwrap();
    let mut cmd = std::process::Command::new(node_bin());
    cmd.args(["run", "--data-dir"])
        .arg(w.path(stem))
        .args(["--listen", &format!("/ip4/127.0.0.1/tcp/{port}"), "--rpc-url", w.dev.rpc_url(), "--market"])
        .arg(format!("{:?}", w.dev.market()))
        .arg("--provider-key-file")
        .arg(&key_file)
        .arg("--addr-file")
        .arg(&addr_file)
        .args(["--poll-interval-ms", "200"]);
    if let Some(c) = config {
        cmd.arg("--config").arg(c);
    }
    let child = cmd.stdin(Stdio::null()).stdout(log.try_clone().unwrap()).stderr(log).spawn().unwrap();
    let mut node = Proc::new(child, &format!("dpor-node {account}"));
    let deadline = Instant::now() + Duration::from_secs(60);
    while !addr_file.exists() {
        assert!(node.alive(), "node {account} exited:\n{}", std::fs::read_to_string(w.path(&format!("{stem}.log"))).unwrap_or_default());
        assert!(Instant::now() < deadline, "node {account} did not listen within 60 s");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    node
}

/// Restarts the world's node on its port (the address registered on chain), with the
/// config file `config` if given.
async fn restart_node(w: &mut World, config: Option<&Path>) {
    w.node.kill9();
    // /ip4/127.0.0.1/tcp/PORT/p2p/…
    let port: u16 = w.node_addr.split('/').nth(4).and_then(|p| p.parse().ok()).expect("a port in the node's address");
    w.node = spawn_node(w, PROVIDER, "node", port, config).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn single_deal_bad_input_is_refused_before_anything_changes() {
    within(600, async {
        let mut w = World::start().await;
        let market = w.client(OWNER).await;
        let owner = w.dev.key(OWNER).address();
        let provider = format!("{:?}", w.provider);

        // deal open: 2^40 blocks (the market takes it, the code does not), more than
        // the provider's room (capacity 2^24), and an escrow the owner cannot pay.
        let (balance, allowance) = (market.balance_of(owner).await.unwrap(), market.allowance(owner).await.unwrap());
        let open = |blocks: &'static str, mint: bool| {
            let (w, provider) = (&w, &provider);
            async move {
                let mut args = vec!["deal", "open", "--provider", provider.as_str(), "--blocks", blocks];
                if mint {
                    args.push("--mint");
                }
                w.dpor(OWNER, &args).await
            }
        };
        refused(&open("1099511627776", true).await, "deal open --blocks 2^40", "at most 2^31");
        refused(&open("33554432", true).await, "deal open past the provider's capacity", "has room for 16777216 more blocks");
        refused(&open("4", false).await, "deal open without the escrow's tokens", "holds 0 tokens");
        // β·K above 64 KiB: epoch proofs no transaction can carry (the market refuses it too).
        let args = ["deal", "open", "--provider", provider.as_str(), "--blocks", "4", "--block-bytes", "65536", "--samples", "2", "--mint"];
        refused(&w.dpor(OWNER, &args).await, "deal open with unprovable blocks", "an epoch proof may carry");
        assert_eq!(market.deal_count().await.unwrap(), 0, "a refused deal open sent a transaction");
        assert_eq!(market.balance_of(owner).await.unwrap(), balance);
        assert_eq!(market.allowance(owner).await.unwrap(), allowance, "a refused deal open approved tokens");
        assert!(!w.path("owner.json").exists(), "a refused deal open wrote a state file");

        // A deal of N = 4 blocks.
        w.make_file("file", 16 << 10, 21);
        let deal = w.open_and_upload("file", 16).await;
        let ds = deal.to_string();
        let chain_before = terms(&market.get_deal(deal).await.unwrap());
        let node_before = node_state(&node_status(&market, w.provider, deal).await);
        let state_before = std::fs::read(w.path("owner.json")).unwrap();
        let unchanged = |what: &'static str| {
            let (market, w, chain_before, node_before, state_before) = (&market, &w, &chain_before, &node_before, &state_before);
            async move {
                assert_eq!(&terms(&market.get_deal(deal).await.unwrap()), chain_before, "{what} changed the deal on chain");
                assert_eq!(&node_state(&node_status(market, w.provider, deal).await), node_before, "{what} changed the node's copy");
                assert!(&std::fs::read(w.path("owner.json")).unwrap() == state_before, "{what} changed the owner state");
            }
        };

        // audit before the deal's first epoch: names epoch 0 (not the last epoch, 99).
        let r = w.dpor(AUDITOR, &["audit", &ds]).await;
        refused(&r, "audit before epoch 0", "first epoch, epoch 0, has not started");
        assert!(!r.stderr.contains("epoch 99"), "{}", r.stderr);

        // Byte-range edits past N·β = 16 KiB say how to grow the deal.
        std::fs::write(w.path("patch"), [7u8; 100]).unwrap();
        let r = w.dpor(OWNER, &["write", "--offset", "16380", w.path("patch").to_str().unwrap()]).await;
        refused(&r, "write --offset past N·β", "dpor resize --blocks");
        w.make_file("big", 20 << 10, 22);
        let r = w.dpor(OWNER, &["sync", w.path("big").to_str().unwrap()]).await;
        refused(&r, "sync of a file past N·β", "dpor resize --file");
        unchanged("a byte-range edit past N·β").await;

        // resize with terms the provider's node refuses: before the node resizes.
        let r = w.dpor(OWNER, &["resize", "--blocks", "8", "--price-per-epoch", "1", "--mint"]).await;
        refused(&r, "resize --price-per-epoch 1", "is below provider");
        let r = w.dpor(OWNER, &["resize", "--blocks", "8", "--collateral", &e18(1_000_000).to_string(), "--mint"]).await;
        refused(&r, "resize --collateral past the provider's rate", "is above provider");
        unchanged("a refused resize").await;

        // watch --repair on a missing folder: refused before any pass.
        let ws = w.path("watch.json");
        let missing = w.path("no-such-file-dir");
        let r = w.dpor(AUDITOR, &["watch", "--once", "--repair", missing.to_str().unwrap(), "--watch-state", ws.to_str().unwrap()]).await;
        refused(&r, "watch --repair MISSING", "no such folder");
        assert!(!ws.exists(), "a refused watch wrote its state");

        // watch --watch-state in a missing folder, during epoch 0 (a pass would audit
        // and record): refused before any audit.
        let auditor = w.client(AUDITOR).await;
        w.dev.warp_to(auditor.epoch_window(deal, 0).await.unwrap().start).await.unwrap();
        // The node's agent proves epoch 0 on its own (paid from the escrow): wait for it,
        // so that the deal's terms compared below do not change under the test.
        let t0 = Instant::now();
        while auditor.epoch_status(deal, 0).await.unwrap() == EpochStatus::None {
            assert!(t0.elapsed() < Duration::from_secs(120), "the node did not settle epoch 0:\n{}", w.node_log());
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let chain_in_epoch = terms(&market.get_deal(deal).await.unwrap());
        let ws = w.path("no-such-dir/watch.json");
        let r = w.dpor(AUDITOR, &["watch", "--once", "--deal", &ds, "--watch-state", ws.to_str().unwrap()]).await;
        refused(&r, "watch --watch-state in a missing folder", "does not exist");
        let me = w.dev.key(AUDITOR).address();
        assert!(auditor.audits_by(deal, 0, me, 0).await.unwrap().is_empty(), "a refused watch recorded an audit");
        assert_eq!(terms(&market.get_deal(deal).await.unwrap()), chain_in_epoch, "a refused watch changed the deal on chain");
        assert_eq!(node_state(&node_status(&market, w.provider, deal).await), node_before, "a refused watch changed the node's copy");
        assert!(std::fs::read(w.path("owner.json")).unwrap() == state_before, "a refused watch changed the owner state");

        // A resize the node refuses to co-sign after resizing (its configured ask is
        // above the one registered on chain, which `dpor` checks): the terms asked for
        // are kept, and the next checkpoint posts those, not the defaults.
        let ask = market.get_provider(w.provider).await.unwrap().price_per_block_epoch;
        let asked = 2 * ask * 8;
        let default = market.get_deal(deal).await.unwrap().price_per_epoch * 2;
        assert_ne!(asked, default);
        let config = w.path("dear.toml");
        std::fs::write(&config, format!("price_per_block_epoch = {}\n", 100 * ask)).unwrap();
        restart_node(&mut w, Some(&config)).await;
        let r = w.dpor(OWNER, &["resize", "--blocks", "8", "--price-per-epoch", &asked.to_string(), "--mint"]).await;
        refused(&r, "resize the node refuses to co-sign", "dpor checkpoint");
        assert_eq!(market.get_deal(deal).await.unwrap().num_blocks, 4, "the resize is not on chain yet");
        restart_node(&mut w, None).await;
        let cp = w.dpor(OWNER, &["checkpoint"]).await.expect_ok("checkpoint posting the resize");
        assert_eq!(cp["to_blocks"].as_u64(), Some(8), "{cp}");
        let d = market.get_deal(deal).await.unwrap();
        assert_eq!((d.num_blocks, d.price_per_epoch), (8, asked), "the checkpoint posted other terms than those asked");
        assert!(!Path::new(&format!("{}.resize-terms", w.path("owner.json").display())).exists(), "the kept terms outlive the resize");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dispersal_bad_input_is_refused_before_anything_changes() {
    within(600, async {
        let w = World::start().await;
        // A second provider: a 1-of-2 file.
        let second = w.dev.key(4).address();
        let m4 = w.client(4).await;
        m4.mint(second, e18(1_000_000)).await.unwrap();
        let _node4 = spawn_node(&w, 4, "node4", 0, None).await;
        let deadline = Instant::now() + Duration::from_secs(60);
        while !m4.get_provider(second).await.map(|p| p.registered).unwrap_or(false) {
            assert!(Instant::now() < deadline, "the second node did not register within 60 s");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let market = w.client(OWNER).await;
        let owner = w.dev.key(OWNER).address();
        w.make_file("file", 8 << 10, 31);
        let dir = w.path("dispersed");
        let put = |manifest: String| {
            let (w, dir) = (&w, &dir);
            async move {
                let file = w.path("file");
                let args = ["put", file.to_str().unwrap(), "--providers", "2", "--data", "1", "--dir", dir.to_str().unwrap(), "--manifest", &manifest, "--lambda", "16", "--epochs", "10", "--mint"];
                w.dpor(OWNER, &args).await
            }
        };

        // put --manifest of an address with no FileManifest: refused before any deal.
        let balance = market.balance_of(owner).await.unwrap();
        refused(&put("0x000000000000000000000000000000000000dEaD".into()).await, "put --manifest 0x…dEaD", "is not a FileManifest contract");
        // The market itself is a contract, but not a FileManifest.
        refused(&put(format!("{:?}", w.dev.market())).await, "put --manifest MARKET", "is not a FileManifest contract");
        assert_eq!(market.deal_count().await.unwrap(), 0, "a refused put opened deals");
        assert_eq!(market.balance_of(owner).await.unwrap(), balance, "a refused put moved tokens");
        assert!(!dir.exists(), "a refused put created its folder");

        // resize of a shard's deal: refused before the node is asked.
        let p = put(format!("{:?}", w.dev.manifest())).await.expect_ok("put 1-of-2");
        let deal = p["deals"][0].as_u64().unwrap();
        let d = market.get_deal(deal).await.unwrap();
        let chain_before = terms(&d);
        let node_before = node_state(&node_status(&market, d.provider, deal).await);
        let shard = dir.join("shard-0.json");
        let state_before = std::fs::read(&shard).unwrap();
        let blocks = (2 * d.num_blocks).to_string();
        let r = w.dpor(OWNER, &["--state", shard.to_str().unwrap(), "resize", "--blocks", &blocks, "--mint"]).await;
        refused(&r, "resize of a shard's deal", "is a shard of a dispersed file");
        assert_eq!(terms(&market.get_deal(deal).await.unwrap()), chain_before, "a refused resize changed the deal on chain");
        assert_eq!(node_state(&node_status(&market, d.provider, deal).await), node_before, "a refused resize changed the node's copy");
        assert!(std::fs::read(&shard).unwrap() == state_before, "a refused resize changed the shard's state");
    })
    .await;
}
