//! End to end, real processes: a file dispersed 3-of-5 over five `dpor-node`s (the
//! harness's node and four more, each its own provider account), recorded in the
//! on-chain FileManifest, downloaded byte for byte; then with two nodes killed -9 it
//! still downloads from the other three (decoding from parity: the written bytes
//! too, after a `file-write` across shards and `file-checkpoint`; the owner's state
//! recovered on a "fresh machine" from the key, the chain and the nodes equals the
//! original and downloads the same file), and with a third
//! killed `dpor get` fails with a clear error instead of a wrong file.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "e2e_harness/mod.rs"]
mod harness;

use dpor_chain::ANVIL_KEYS;
use harness::{e18, node_bin, pseudo_random, within, Proc, World, OWNER, PROVIDER};

/// Accounts of the four extra nodes (1 is the harness's node, 2 the owner, 3 the auditor).
const EXTRA: [usize; 4] = [4, 5, 6, 7];
use std::process::Stdio;
use std::time::{Duration, Instant};

/// Spawns the node of anvil account `account` (its key file written) on `port` (0: any),
/// with `args` added.
fn spawn_node(w: &World, account: usize, port: u16, args: &[&str]) -> Proc {
    let key_file = w.path(&format!("key{account}"));
    std::fs::write(&key_file, ANVIL_KEYS[account]).unwrap();
    let log = std::fs::OpenOptions::new().create(true).append(true).open(w.path(&format!("node{account}.log"))).unwrap();
    let child = std::process::Command::new(node_bin())
        .args(["run", "--data-dir"])
        .arg(w.path(&format!("node{account}")))
        .args(["--listen", &format!("/ip4/127.0.0.1/tcp/{port}"), "--rpc-url", w.dev.rpc_url(), "--market"])
        .arg(format!("{:?}", w.dev.market()))
        .arg("--provider-key-file")
        .arg(&key_file)
        .arg("--addr-file")
        .arg(w.path(&format!("node{account}.addr")))
        .args(["--poll-interval-ms", "200"])
        .args(args)
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .unwrap();
    Proc::new(child, &format!("dpor-node {account}"))
}

/// Kills node `account` (one of [`EXTRA`]) and starts it again on the same port (the
/// address registered on chain), with `args`; returns once it listens.
async fn restart_node(w: &World, nodes: &mut [Proc], account: usize, args: &[&str]) {
    let pos = EXTRA.iter().position(|&a| a == account).expect("one of our nodes");
    nodes[pos].kill9();
    let addr_file = w.path(&format!("node{account}.addr"));
    let old = std::fs::read_to_string(&addr_file).unwrap();
    // /ip4/127.0.0.1/tcp/PORT/p2p/…
    let port: u16 = old.trim().split('/').nth(4).and_then(|p| p.parse().ok()).expect("a port in the address file");
    std::fs::remove_file(&addr_file).unwrap();
    nodes[pos] = spawn_node(w, account, port, args);
    let deadline = Instant::now() + Duration::from_secs(60);
    while !addr_file.exists() {
        assert!(nodes[pos].alive(), "node {account} exited on restart");
        assert!(Instant::now() < deadline, "node {account} did not listen again within 60 s");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Starts another node as anvil account `account` (funded first); returns once it is
/// registered on chain.
async fn extra_node(w: &World, account: usize) -> Proc {
    let provider = w.dev.key(account).address();
    let p = w.client(account).await;
    p.mint(provider, e18(1_000_000)).await.unwrap();
    let mut node = spawn_node(w, account, 0, &[]);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        assert!(
            node.alive(),
            "node {account} exited:\n{}",
            std::fs::read_to_string(w.path(&format!("node{account}.log"))).unwrap_or_default()
        );
        if p.get_provider(provider).await.map(|p| p.registered).unwrap_or(false) {
            return node;
        }
        assert!(Instant::now() < deadline, "node {account} did not register within 60 s");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn put_3_of_5_then_get_from_any_3_and_fail_clearly_with_2() {
    within(600, async {
        let mut w = World::start().await;
        let mut nodes = Vec::new();
        for account in EXTRA {
            nodes.push(extra_node(&w, account).await);
        }
        // 5 stripes of 3 × 4 KiB and a bit: the last stripe is partial.
        let file = pseudo_random(3 * 4096 * 5 + 1234, 42);
        std::fs::write(w.path("big.bin"), &file).unwrap();
        let dir = w.path("file");
        let (dir_s, file_s) = (dir.to_str().unwrap(), w.path("big.bin"));
        let manifest = format!("{:?}", w.dev.manifest());
        let put = w
            .dpor(
                OWNER,
                &[
                    "put",
                    file_s.to_str().unwrap(),
                    "--providers",
                    "5",
                    "--data",
                    "3",
                    "--dir",
                    dir_s,
                    "--manifest",
                    &manifest,
                    "--lambda",
                    "16",
                    "--epochs",
                    "10",
                    "--mint",
                ],
            )
            .await
            .expect_ok("put 3-of-5");
        eprintln!("put: {put}");
        let deals: Vec<u64> = put["deals"].as_array().unwrap().iter().map(|d| d.as_u64().unwrap()).collect();
        assert_eq!(deals.len(), 5);

        // On chain: the manifest names the five deals, five distinct providers, all owned
        // by the owner, each with digest v1 posted.
        let owner = w.client(OWNER).await;
        let reg = owner.manifest_registry(w.dev.manifest());
        let rec = reg.get_file(put["file_id"].as_u64().unwrap()).await.unwrap();
        assert_eq!((rec.k, rec.n, rec.file_bytes), (3, 5, file.len() as u64));
        assert_eq!(rec.shards.iter().map(|s| s.deal_id).collect::<Vec<_>>(), deals);
        let mut providers: Vec<_> = rec.shards.iter().map(|s| s.provider).collect();
        providers.sort();
        providers.dedup();
        assert_eq!(providers.len(), 5, "five distinct providers");
        for d in &deals {
            let deal = owner.get_deal(*d).await.unwrap();
            assert_eq!(deal.owner, w.dev.key(OWNER).address());
            assert_eq!(deal.digest_version, 1, "deal {d} checkpointed");
        }
        // A fresh machine finds the file from the events alone.
        let from_logs = reg.files_of(w.dev.key(OWNER).address(), 0).await.unwrap();
        assert_eq!(from_logs.len(), 1);
        assert_eq!(from_logs[0].deal_ids, deals);

        let (r, out) = get(&w, "all.bin").await;
        let j = r.expect_ok("get with all nodes up");
        assert_eq!(std::fs::read(&out).unwrap(), file);
        assert_eq!(j["shards_used"].as_array().unwrap().len(), 3);

        // A write across shards (file blocks 2..=4: stripes 0 and 1, so data shards 2, 0,
        // 1 and both parity shards), then the touched shards' digests posted.
        let mut file = file;
        let (offset, patch) = (3 * 4096 - 100, pseudo_random(5000, 7));
        std::fs::write(w.path("patch.bin"), &patch).unwrap();
        let j = w
            .dpor(OWNER, &["file-write", w.path("patch.bin").to_str().unwrap(), "--offset", &offset.to_string(), "--dir", dir_s])
            .await
            .expect_ok("file-write");
        assert_eq!(j["shards_written"], serde_json::json!([0, 1, 2, 3, 4]), "{j}");
        file[offset..offset + patch.len()].copy_from_slice(&patch);
        w.dpor(OWNER, &["file-checkpoint", "--dir", dir_s]).await.expect_ok("file-checkpoint");
        for d in &deals {
            assert_eq!(owner.get_deal(*d).await.unwrap().digest_version, 2, "deal {d} checkpointed after the write");
        }
        let j = w.dpor(OWNER, &["fsck", "--dir", dir_s]).await.expect_ok("fsck");
        assert_eq!(j["dirty"], serde_json::json!([]), "{j}");
        let (r, out) = get(&w, "written.bin").await;
        r.expect_ok("get after the write");
        assert_eq!(std::fs::read(&out).unwrap(), file, "the written file, byte for byte");

        // A fresh machine: the owner's key alone, the chain and the providers give back
        // every shard's state, equal to the original field by field.
        let fresh = w.path("fresh");
        let j = w.dpor(OWNER, &["recover", "--dir", fresh.to_str().unwrap(), "--manifest", &manifest]).await.expect_ok("recover");
        assert_eq!(j["file_id"], put["file_id"], "{j}");
        for i in 0..5 {
            let original = normalized(&dir.join(format!("shard-{i}.json")));
            let recovered = normalized(&fresh.join(format!("shard-{i}.json")));
            assert_eq!(recovered, original, "shard {i}: the recovered state differs from the original");
        }
        let r = w.dpor(OWNER, &["get", w.path("fresh.bin").to_str().unwrap(), "--dir", fresh.to_str().unwrap()]).await;
        r.expect_ok("get from the recovered state");
        assert_eq!(std::fs::read(w.path("fresh.bin")).unwrap(), file, "the file from the recovered state, byte for byte");
        // Recovering again into a directory that holds a file is refused.
        let r = w.dpor(OWNER, &["recover", "--dir", fresh.to_str().unwrap(), "--manifest", &manifest]).await;
        assert!(!r.ok && r.stderr.contains("already holds"), "{}", r.stderr);
        // The recovered state carries on: a write across shards and a checkpoint from it
        // (nonces, checksum keys and cached σ all as the node expects). From here on the
        // fresh directory is the owner's state.
        let (offset2, patch2) = (5 * 4096 + 11, pseudo_random(3000, 8));
        std::fs::write(w.path("patch2.bin"), &patch2).unwrap();
        w.dpor(
            OWNER,
            &["file-write", w.path("patch2.bin").to_str().unwrap(), "--offset", &offset2.to_string(), "--dir", fresh.to_str().unwrap()],
        )
        .await
        .expect_ok("file-write from the recovered state");
        file[offset2..offset2 + patch2.len()].copy_from_slice(&patch2);
        w.dpor(OWNER, &["file-checkpoint", "--dir", fresh.to_str().unwrap()]).await.expect_ok("file-checkpoint from the recovered state");
        let fresh_s = fresh.to_str().unwrap();

        // Kill -9 the providers of data shards 0 and 2, found by provider address.
        kill_shard(&mut w, &mut nodes, rec.shards[0].provider);
        kill_shard(&mut w, &mut nodes, rec.shards[2].provider);
        let (r, out) = get_from(&w, fresh_s, "two_down.bin").await;
        let j = r.expect_ok("get with two nodes down");
        assert_eq!(std::fs::read(&out).unwrap(), file, "decoded from parity byte for byte");
        let used: Vec<u64> = j["shards_used"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap()).collect();
        assert_eq!(used, vec![1, 3, 4]);

        // A third one down: n − k + 1 lost, a clear error and no output file.
        kill_shard(&mut w, &mut nodes, rec.shards[1].provider);
        let (r, out) = get_from(&w, fresh_s, "three_down.bin").await;
        assert!(!r.ok, "get must fail with 3 of 5 down: {}", r.stdout);
        assert!(r.stderr.contains("3 of 5 shards failed, at most 2 may for a 3-of-5 file"), "{}", r.stderr);
        assert!(!out.exists());
    })
    .await;
}

/// Two owners' deals can race for one provider's last free blocks: `openDeal` reserves
/// nothing, only `acceptDeal` checks the capacity. Here the provider `put` picks for one
/// shard loses its room while the deal waits (its node is down, so it cannot accept
/// first; then the provider gives its capacity away, `updateProvider` to 0 blocks, as
/// another owner's accepted deal would take it). `put` sees at once that the deal can
/// no longer be accepted, cancels it (the escrow comes back) and places the shard with
/// the spare provider; the file downloads byte for byte.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn put_replaces_a_provider_whose_capacity_went_to_other_deals() {
    within(600, async {
        let mut w = World::start().await;
        let mut nodes = Vec::new();
        for account in EXTRA {
            nodes.push(extra_node(&w, account).await);
        }
        // The lost provider: its node down, still registered, the cheapest (so picked).
        let lost = EXTRA[0];
        let lost_addr = w.dev.key(lost).address();
        kill_shard(&mut w, &mut nodes, lost_addr);
        let lost_market = w.client(lost).await;
        let p = lost_market.get_provider(lost_addr).await.unwrap();
        assert!(p.price_per_block_epoch > 0, "the test lowers the price below the others'");
        let cheaper = p.price_per_block_epoch - 1;
        lost_market
            .update_provider(p.peer_id.to_vec(), p.multiaddrs.clone(), cheaper, p.collateral_per_block, p.capacity_blocks)
            .await
            .unwrap();

        let file = pseudo_random(2 * 4096 * 6 + 99, 11);
        std::fs::write(w.path("big.bin"), &file).unwrap();
        let dir = w.path("file");
        let (dir_s, file_s) = (dir.to_str().unwrap(), w.path("big.bin"));
        let manifest = format!("{:?}", w.dev.manifest());
        let args = [
            "put",
            file_s.to_str().unwrap(),
            "--providers",
            "4",
            "--data",
            "2",
            "--dir",
            dir_s,
            "--manifest",
            &manifest,
            "--lambda",
            "16",
            "--epochs",
            "10",
            "--mint",
        ];
        let owner = w.client(OWNER).await;
        let first = owner.deal_count().await.unwrap() + 1;
        // As soon as `put` opened the lost provider's deal, its capacity goes elsewhere.
        let squeeze = async {
            let deadline = Instant::now() + Duration::from_secs(300);
            loop {
                for d in first..=owner.deal_count().await.unwrap() {
                    if owner.get_deal(d).await.unwrap().provider == lost_addr {
                        lost_market
                            .update_provider(p.peer_id.to_vec(), p.multiaddrs.clone(), cheaper, p.collateral_per_block, 0)
                            .await
                            .unwrap();
                        return d;
                    }
                }
                assert!(Instant::now() < deadline, "put never opened a deal with the cheapest provider");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        };
        let started = Instant::now();
        let (put, lost_deal) = tokio::join!(w.dpor(OWNER, &args), squeeze);
        eprintln!("put in {:?}; its notes:\n{}", started.elapsed(), put.stderr);
        assert!(
            put.stderr.contains(&format!("deal {lost_deal} with {lost_addr} not accepted")),
            "a note names the re-placement:\n{}",
            put.stderr
        );
        let put = put.expect_ok("put 2-of-4 with one provider's capacity gone");
        let d = owner.get_deal(lost_deal).await.unwrap();
        assert_eq!((d.state, d.escrow), (dpor_chain::DealState::Cancelled, 0), "the lost provider's deal cancelled, its escrow back");
        let deals: Vec<u64> = put["deals"].as_array().unwrap().iter().map(|d| d.as_u64().unwrap()).collect();
        assert_eq!(deals.len(), 4);
        assert!(!deals.contains(&lost_deal), "{put}");
        let reg = owner.manifest_registry(w.dev.manifest());
        let rec = reg.get_file(put["file_id"].as_u64().unwrap()).await.unwrap();
        let mut providers: Vec<_> = rec.shards.iter().map(|s| s.provider).collect();
        assert!(!providers.contains(&lost_addr), "the lost provider holds no shard");
        providers.sort();
        providers.dedup();
        assert_eq!(providers.len(), 4, "four distinct providers");
        for s in &rec.shards {
            let deal = owner.get_deal(s.deal_id).await.unwrap();
            assert_eq!((deal.state, deal.digest_version), (dpor_chain::DealState::Active, 1), "deal {} active and checkpointed", s.deal_id);
        }
        let (r, out) = get(&w, "replaced.bin").await;
        r.expect_ok("get after the re-placement");
        assert_eq!(std::fs::read(&out).unwrap(), file, "byte for byte");
    })
    .await;
}

/// An owner state file as JSON, with the trailing empty levels dropped (a state that
/// never wrote has none listed; one rebuilt from a digest lists all log N), and without
/// the nonce: the original counts the nonces of co-signature requests, which the node
/// does not record, while the recovered state starts from the node's last accepted
/// nonce; either is a valid next nonce for the node.
fn normalized(path: &std::path::Path) -> serde_json::Value {
    let mut v: serde_json::Value = serde_json::from_str(&dpor_client::owner_state::read_json(path).unwrap()).unwrap();
    v.as_object_mut().unwrap().remove("nonce");
    if let Some(levels) = v["levels"].as_array_mut() {
        while levels.last().is_some_and(|l| l.is_null()) {
            levels.pop();
        }
    }
    v
}

/// `dpor get OUT --dir file` as the owner.
async fn get(w: &World, out: &str) -> (harness::CliRun, std::path::PathBuf) {
    get_from(w, w.path("file").to_str().unwrap(), out).await
}

/// `dpor get OUT --dir DIR` as the owner.
async fn get_from(w: &World, dir: &str, out: &str) -> (harness::CliRun, std::path::PathBuf) {
    let out = w.path(out);
    let r = w.dpor(OWNER, &["get", out.to_str().unwrap(), "--dir", dir]).await;
    (r, out)
}

/// Kills -9 the node of `provider` (the harness's, account 1, or one of ours, 4..=7).
fn kill_shard(w: &mut World, nodes: &mut [Proc], provider: dpor_chain::Address) {
    let account = (0..10).find(|&i| w.dev.key(i).address() == provider).expect("an anvil account");
    if account == PROVIDER {
        w.node.kill9();
    } else {
        nodes[EXTRA.iter().position(|&a| a == account).expect("one of our nodes")].kill9();
    }
}

/// Repair restores full redundancy: 2-of-4 over five nodes (one spare). The provider of
/// shard 0 is killed for good; `dpor repair` finds it unreachable, rebuilds shard 0 from
/// two others (byte for byte the shard first uploaded: same rootU), places it with the
/// spare under a new deal and points the on-chain manifest at it. Then two more of the
/// original providers are killed (n − k again): the file still downloads, which without
/// the repair (three of four shards gone) it could not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repair_moves_a_lost_shard_to_a_spare_provider_and_restores_full_redundancy() {
    within(600, async {
        let mut w = World::start().await;
        let mut nodes = Vec::new();
        for account in EXTRA {
            nodes.push(extra_node(&w, account).await);
        }
        let file = pseudo_random(2 * 4096 * 9 + 77, 7);
        std::fs::write(w.path("big.bin"), &file).unwrap();
        let dir = w.path("file");
        let (dir_s, file_s) = (dir.to_str().unwrap(), w.path("big.bin"));
        let manifest = format!("{:?}", w.dev.manifest());
        let terms = ["--lambda", "16", "--epochs", "10", "--mint"];
        let mut args = vec!["put", file_s.to_str().unwrap(), "--providers", "4", "--data", "2", "--dir", dir_s, "--manifest", &manifest];
        args.extend_from_slice(&terms);
        let put = w.dpor(OWNER, &args).await.expect_ok("put 2-of-4");
        let file_id = put["file_id"].as_u64().unwrap();
        let owner = w.client(OWNER).await;
        let reg = owner.manifest_registry(w.dev.manifest());
        let before = reg.get_file(file_id).await.unwrap();

        // Healthy: nothing to repair.
        let mut args = vec!["repair", "--dir", dir_s];
        args.extend_from_slice(&terms);
        let r = w.dpor(OWNER, &args).await.expect_ok("repair with every node up");
        assert!(r["repaired"].as_array().unwrap().is_empty(), "{r}");

        // Shard 0's provider dies: a dry run names it, the repair moves it.
        kill_shard(&mut w, &mut nodes, before.shards[0].provider);
        let r = w.dpor(OWNER, &["repair", "--dir", dir_s, "--dry-run"]).await.expect_ok("repair --dry-run");
        let flagged: Vec<u64> =
            r["shards"].as_array().unwrap().iter().filter(|s| s["repair"] == true).map(|s| s["shard"].as_u64().unwrap()).collect();
        assert_eq!(flagged, vec![0], "{r}");
        let r = w.dpor(OWNER, &args).await.expect_ok("repair after a kill");
        let rep = r["repaired"].as_array().unwrap();
        assert_eq!(rep.len(), 1, "{r}");
        assert_eq!(rep[0]["shard"], 0);
        let new_deal = rep[0]["deal"].as_u64().unwrap();

        // On chain: shard 0 is the new deal, with a provider that held no shard before;
        // the deal is active and checkpointed.
        let after = reg.get_file(file_id).await.unwrap();
        assert_eq!(after.shards[0].deal_id, new_deal);
        assert!(before.shards.iter().all(|s| s.provider != after.shards[0].provider), "a provider that held no shard");
        assert_eq!(&after.shards[1..], &before.shards[1..], "the other shards are unchanged");
        let d = owner.get_deal(new_deal).await.unwrap();
        assert_eq!((d.state, d.digest_version), (dpor_chain::DealState::Active, 1));

        // Two more original providers go: 2 of 4 shards left, one of them the repaired one.
        kill_shard(&mut w, &mut nodes, before.shards[1].provider);
        kill_shard(&mut w, &mut nodes, before.shards[2].provider);
        let (r, out) = get(&w, "after_repair.bin").await;
        let j = r.expect_ok("get after the repair with two more nodes down");
        assert_eq!(std::fs::read(&out).unwrap(), file, "byte for byte");
        let used: Vec<u64> = j["shards_used"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap()).collect();
        assert_eq!(used, vec![0, 3]);
    })
    .await;
}

/// A write across shards that one shard's node refuses (it drops every write) stays
/// an intent with that shard not done; the node then dies for good. `get` leaves the
/// stale shard out and decodes the new version from the others; `repair` rebuilds the
/// shard from them (the new version), which completes the write; the checkpoint posts
/// every shard's digest, and the file reads back as written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_a_lost_shard_never_got_is_read_around_and_completed_by_its_repair() {
    within(600, async {
        let w = World::start().await;
        let mut nodes = Vec::new();
        for account in EXTRA {
            nodes.push(extra_node(&w, account).await);
        }
        let mut file = pseudo_random(2 * 4096 * 6 + 500, 9);
        std::fs::write(w.path("f.bin"), &file).unwrap();
        let dir = w.path("file");
        let dir_s = dir.to_str().unwrap();
        let manifest = format!("{:?}", w.dev.manifest());
        let terms = ["--lambda", "16", "--epochs", "10", "--mint"];
        let f = w.path("f.bin");
        let mut args = vec!["put", f.to_str().unwrap(), "--providers", "4", "--data", "2", "--dir", dir_s, "--manifest", &manifest];
        args.extend_from_slice(&terms);
        let put = w.dpor(OWNER, &args).await.expect_ok("put 2-of-4");
        let rec = w.client(OWNER).await.manifest_registry(w.dev.manifest()).get_file(put["file_id"].as_u64().unwrap()).await.unwrap();
        // The highest shard (2 or 3) on one of our nodes: the write reaches shards 0, 1 first.
        let (stale, account) = (2..4usize)
            .rev()
            .find_map(|i| EXTRA.iter().find(|&&a| w.dev.key(a).address() == rec.shards[i].provider).map(|&a| (i as u64, a)))
            .expect("shard 2 or 3 is on an extra node");
        restart_node(&w, &mut nodes, account, &["--misbehave", "drop-writes"]).await;

        // Stripe 0 whole (data shards 0 and 1, both parity shards): the stale shard refuses.
        let patch = pseudo_random(2 * 4096, 10);
        std::fs::write(w.path("patch.bin"), &patch).unwrap();
        let r = w.dpor(OWNER, &["file-write", w.path("patch.bin").to_str().unwrap(), "--offset", "0", "--dir", dir_s]).await;
        assert!(!r.ok, "the write cannot complete on shard {stale}: {}", r.stdout);
        assert!(r.stderr.contains("the next command completes it"), "{}", r.stderr);
        file[..patch.len()].copy_from_slice(&patch);
        let intent: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(dir.join("write-intent.json")).unwrap()).unwrap();
        let undone: Vec<u64> =
            intent["shards"].as_array().unwrap().iter().filter(|s| s["done"] == false).map(|s| s["shard"].as_u64().unwrap()).collect();
        assert!(undone.contains(&stale) && undone.iter().all(|&s| s >= 2), "{intent}");

        // The node is lost for good: get reads around it and gives the new version.
        let pos = EXTRA.iter().position(|&a| a == account).unwrap();
        nodes[pos].kill9();
        let (r, out) = get(&w, "around.bin").await;
        let stderr = r.stderr.clone();
        let j = r.expect_ok("get with a shard behind the write");
        assert!(stderr.contains("are not read"), "{stderr}");
        assert_eq!(std::fs::read(&out).unwrap(), file, "the new version, byte for byte");
        assert!(!j["shards_used"].as_array().unwrap().iter().any(|s| s.as_u64() == Some(stale)), "{j}");

        // Its repair rebuilds it from the new version and completes the write.
        let mut args = vec!["repair", "--dir", dir_s];
        args.extend_from_slice(&terms);
        let r = w.dpor(OWNER, &args).await.expect_ok("repair of the lost shard");
        assert!(r["repaired"].as_array().unwrap().iter().any(|x| x["shard"].as_u64() == Some(stale)), "{r}");
        assert!(!dir.join("write-intent.json").exists(), "the write is complete once the lost shard is rebuilt");
        let j = w.dpor(OWNER, &["file-checkpoint", "--dir", dir_s]).await.expect_ok("file-checkpoint");
        assert_eq!(j["checkpoints"].as_array().unwrap().len(), 4, "{j}");
        let (r, out) = get(&w, "after.bin").await;
        r.expect_ok("get after the repair");
        assert_eq!(std::fs::read(&out).unwrap(), file);
    })
    .await;
}

/// A deal a repair left behind (its provider accepted, then the upload failed the
/// owner's checks: state file `shard-<i>.d<deal>.refused.json`) is ended by `watch
/// --repair` once the market allows it: not before `uploadSeconds` have passed since
/// its acceptance, then `exitBeforeUpload` (escrow back, less the epochs it held the
/// capacity) and the state file renamed `….ended.json`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_repair_ends_a_deal_a_repair_left_behind() {
    within(600, async {
        let w = World::start().await;
        let mut nodes = Vec::new();
        for account in &EXTRA[..2] {
            nodes.push(extra_node(&w, *account).await);
        }
        let file = pseudo_random(3 * 4096 + 5, 11);
        std::fs::write(w.path("f.bin"), &file).unwrap();
        let dir = w.path("file");
        let dir_s = dir.to_str().unwrap();
        let manifest = format!("{:?}", w.dev.manifest());
        let f = w.path("f.bin");
        let args = ["put", f.to_str().unwrap(), "--providers", "3", "--data", "2", "--dir", dir_s, "--manifest", &manifest];
        w.dpor(OWNER, &[&args[..], &["--lambda", "16", "--epochs", "10", "--mint"]].concat()).await.expect_ok("put 2-of-3");

        // The deal a repair would leave: accepted by its node, never uploaded.
        let provider = format!("{:?}", w.dev.key(PROVIDER).address());
        let st = w.path("left.json");
        let open = ["--state", st.to_str().unwrap(), "deal", "open", "--provider", &provider, "--blocks", "2", "--lambda", "16", "--epochs", "10", "--mint"];
        let deal = w.dpor(OWNER, &open).await.expect_ok("deal open")["deal"].as_u64().unwrap();
        let owner = w.client(OWNER).await;
        let mut d = owner.get_deal(deal).await.unwrap();
        for _ in 0..600 {
            if d.state == dpor_chain::DealState::Active {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
            d = owner.get_deal(deal).await.unwrap();
        }
        assert_eq!(d.state, dpor_chain::DealState::Active, "the node accepts the deal");
        let refused = dir.join(format!("shard-0.d{deal}.refused.json"));
        std::fs::rename(&st, &refused).unwrap();

        let ws = w.path("watch.json");
        let watch = ["watch", "--repair", dir_s, "--once", "--watch-state", ws.to_str().unwrap()];
        let ended = |out: &str| {
            harness::actions(out).into_iter().filter(|a| a["action"] == "refused-deal-ended").map(|a| a["deal"].as_u64().unwrap()).collect::<Vec<_>>()
        };
        // Within the upload period the market refuses: nothing is ended yet.
        let r = w.dpor(OWNER, &watch).await;
        assert!(r.ok, "watch pass 1: {}\n{}", r.stdout, r.stderr);
        assert!(ended(&r.stdout).is_empty(), "{}", r.stdout);
        assert!(refused.exists());
        assert_eq!(owner.get_deal(deal).await.unwrap().state, dpor_chain::DealState::Active);

        let params = owner.params().await.unwrap();
        w.dev.warp_to(d.accepted_at + params.upload_seconds + 1).await.unwrap();
        let r = w.dpor(OWNER, &watch).await;
        assert!(r.ok, "watch pass 2: {}\n{}", r.stdout, r.stderr);
        assert_eq!(ended(&r.stdout), vec![deal], "{}", r.stdout);
        let after = owner.get_deal(deal).await.unwrap();
        assert_ne!(after.state, dpor_chain::DealState::Active, "exitBeforeUpload closed it");
        assert_eq!(after.escrow, 0, "the escrow is paid out");
        assert!(!refused.exists() && dir.join(format!("shard-0.d{deal}.ended.json")).exists());
        // Once ended, later passes leave it alone.
        let r = w.dpor(OWNER, &watch).await;
        assert!(r.ok && ended(&r.stdout).is_empty(), "watch pass 3: {}\n{}", r.stdout, r.stderr);
        drop(nodes);
    })
    .await;
}
