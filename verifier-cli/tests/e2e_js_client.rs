//! End to end, real processes (anvil + contracts, `dpor-node`, `dpor`, and the
//! TypeScript client `@dpor/client` run by Node.js as `clients/js/dist/cli.js`): the
//! TypeScript client agrees with the Rust one on everything a second implementation
//! could get wrong.
//!
//! - EIP-712: for the deal's posted digest and for a resize, the hash the TypeScript
//!   client computes equals the contract's (`digestHash`, `resizeHash` views) and
//!   Rust's, and its signature with the owner's key is byte for byte the Rust one
//!   (`dpor_chain::sign_digest`; deterministic ECDSA);
//! - the public audit: `dpor-js audit` and `dpor audit --json` on the same deal, epoch
//!   and seed report the same verdict, runs, samples, failures and transcript hash,
//!   field by field: on an honest node (both pass), and on a node that lost most of a
//!   level (both fail, on the same samples, with the same faults).
//!
//! The package must be built first (`npm run build -w @dpor/client`; script/test does).
//! See `e2e_harness/mod.rs`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "e2e_harness/mod.rs"]
mod harness;

use dpor_core::digest::{Digest, Resize};
use harness::{within, World, AUDITOR, BETA, OWNER};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Stdio;

/// The repository root.
fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

/// The built CLI of the TypeScript client; panics (never skips) if it is missing.
fn js_cli() -> PathBuf {
    let cli = repo_root().join("clients/js/dist/cli.js");
    assert!(
        cli.is_file(),
        "{} is missing: run `npm install` and `npm run build -w @dpor/client` at the repository root (script/test does)",
        cli.display()
    );
    cli
}

/// Runs `node clients/js/dist/cli.js ARGS`; returns (exit code, the first JSON line of stdout, stderr).
async fn dpor_js(args: &[&str]) -> (i32, Value, String) {
    let out = tokio::process::Command::new("node")
        .arg(js_cli())
        .args(args)
        .current_dir(repo_root())
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output()
        .await
        .expect("run node (Node.js must be installed: the Foundry toolchain of `npm install` needs it too)");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let json = stdout.lines().find_map(|l| serde_json::from_str::<Value>(l).ok()).unwrap_or(Value::Null);
    (out.status.code().unwrap_or(-1), json, String::from_utf8_lossy(&out.stderr).to_string())
}

/// A digest as the JSON `dpor-js` reads (integers as decimal strings, roots as hex).
fn digest_json(d: &Digest) -> String {
    json!({
        "dealId": d.dealId.to_string(), "version": d.version.to_string(), "numBlocks": d.numBlocks.to_string(),
        "writeCount": d.writeCount.to_string(), "rebuildCount": d.rebuildCount.to_string(),
        "rootU": d.rootU.to_string(), "rootC": d.rootC.to_string(),
        "levelRoots": d.levelRoots.iter().map(|r| r.to_string()).collect::<Vec<_>>(),
    })
    .to_string()
}

/// Writes `count` pseudo-random blocks at indices `i·3 mod n` as the owner.
async fn writes(w: &World, n: usize, count: usize) {
    for k in 0..count {
        let i = (k * 3) % n;
        std::fs::write(w.path("block"), harness::pseudo_random(BETA, 1000 + k as u64)).unwrap();
        w.dpor(OWNER, &["write", &i.to_string(), w.path("block").to_str().unwrap()]).await.expect_ok(&format!("write {k}"));
    }
}

/// Asserts that the TypeScript audit report `js` says what the Rust one `rs` says:
/// every field except the timing and the byte count, and each run's node error only
/// as present or absent (the texts are each implementation's own).
fn assert_same_audit(rs: &Value, js: &Value) {
    for k in [
        "deal",
        "epoch",
        "version",
        "digest_hash",
        "seed",
        "lambda",
        "runs_checked",
        "samples_checked",
        "passed",
        "failures_total",
        "failures",
        "transcript_hash",
        "node_error",
    ] {
        assert!(rs.get(k).is_some(), "the Rust report has no {k}: {rs}");
        assert_eq!(rs[k], js[k], "field {k}:\nRust {rs}\nJS   {js}");
    }
    let (rr, jr) = (rs["runs"].as_array().expect("runs"), js["runs"].as_array().expect("runs"));
    assert_eq!(rr.len(), jr.len(), "runs:\nRust {rs}\nJS   {js}");
    for (r, j) in rr.iter().zip(jr) {
        for k in ["run", "run_tag", "built_at", "size", "asked", "returned", "failed"] {
            assert_eq!(r[k], j[k], "run {} field {k}:\nRust {r}\nJS   {j}", r["run"]);
        }
        assert_eq!(r["error"].is_null(), j["error"].is_null(), "run {} error:\nRust {r}\nJS   {j}", r["run"]);
    }
    assert!(js["bytes_received"].as_u64().unwrap_or(0) > 0 || js["node_error"].is_string(), "{js}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_typescript_client_signs_and_audits_as_the_rust_one_does() {
    js_cli();
    within(900, async {
        let mut w = World::start().await;
        // 32 KiB, β = 4096: N = 8. λ = 4: C (16 coded blocks) is sampled with
        // replacement; 3 writes fill levels 0 and 1 (2 and 4 blocks: read whole).
        w.make_file("file", 32 << 10, 17);
        let deal = w.open_and_upload("file", 4).await;
        writes(&w, 8, 3).await;
        let cp = w.dpor(OWNER, &["checkpoint"]).await.expect_ok("checkpoint v2");
        assert_eq!(cp["version"], 2, "{cp}");

        let market = w.client(AUDITOR).await;
        let (chain_id, address) = (w.dev.chain_id(), w.dev.market());
        let (chain_id_s, address_s) = (chain_id.to_string(), format!("{address:?}"));
        let (digest, hash) = market.latest_digest(deal).await.unwrap().expect("a posted digest");
        assert_eq!(digest.writeCount, 3);
        assert_eq!(market.get_deal(deal).await.unwrap().digest_hash, hash);
        let owner_key = w.dev.key(OWNER);
        let key_file = w.path(&format!("key{OWNER}"));
        let key_file = key_file.to_str().unwrap();

        // EIP-712 of the posted digest: the contract's hash, Rust's signature.
        let dj = digest_json(&digest);
        let (code, j, stderr) =
            dpor_js(&["sign", "--key-file", key_file, "--chain-id", &chain_id_s, "--market", &address_s, "--digest", &dj]).await;
        assert_eq!(code, 0, "{stderr}");
        assert_eq!(j["hash"], json!(hash.to_string()), "the digest hash must be the contract's");
        assert_eq!(j["hash"], json!(market.digest_hash(&digest).await.unwrap().to_string()));
        let rust_sig = dpor_chain::sign_digest(&owner_key, hash).unwrap();
        assert_eq!(j["signature"], json!(rust_sig.to_string()), "the digest signature must be Rust's, byte for byte");
        assert_eq!(j["signer"], json!(owner_key.address().to_checksum(None)));

        // EIP-712 of a resize (to N = 16; a price above 2^64 exercises uint128).
        let mut first = digest.clone();
        first.version += 1;
        first.numBlocks = 16;
        first.writeCount = 0;
        first.levelRoots = vec![];
        let (price, collateral) = (123_456_789_012_345_678_901_234_567u128, 5_000_000_000_000_000_000u128);
        let resize = Resize { digest: first.clone(), pricePerEpoch: price, collateral };
        let rh = resize.signing_hash(chain_id, address);
        assert_eq!(rh, market.resize_hash(&first, price, collateral).await.unwrap(), "Rust and the contract agree");
        let (price_s, coll_s) = (price.to_string(), collateral.to_string());
        let fj = digest_json(&first);
        let args = [
            "sign",
            "--key-file",
            key_file,
            "--chain-id",
            &chain_id_s,
            "--market",
            &address_s,
            "--digest",
            &fj,
            "--price",
            &price_s,
            "--collateral",
            &coll_s,
        ];
        let (code, j, stderr) = dpor_js(&args).await;
        assert_eq!(code, 0, "{stderr}");
        assert_eq!(j["hash"], json!(rh.to_string()), "the resize hash must be the contract's");
        assert_eq!(
            j["signature"],
            json!(dpor_chain::sign_digest(&owner_key, rh).unwrap().to_string()),
            "the resize signature must be Rust's"
        );
        // One field changed, another hash (the CLI does not sign a fixed message).
        let other = (collateral + 1).to_string();
        let args = [
            "digest-hash",
            "--chain-id",
            &chain_id_s,
            "--market",
            &address_s,
            "--digest",
            &fj,
            "--price",
            &price_s,
            "--collateral",
            &other,
        ];
        let (code, j, _) = dpor_js(&args).await;
        assert_eq!(code, 0);
        assert_eq!(j["hash"], json!(market.resize_hash(&first, price, collateral + 1).await.unwrap().to_string()));
        assert_ne!(j["hash"], json!(rh.to_string()));

        // The public audit, on an honest node: both pass, with the same report.
        let start = market.epoch_window(deal, 0).await.expect("window").start;
        w.dev.warp_to(start).await.expect("warp");
        let rs = w.dpor(AUDITOR, &["audit", &deal.to_string()]).await.expect_ok("dpor audit");
        assert_eq!(rs["passed"], true, "{rs}");
        assert_eq!(rs["runs_checked"], 3, "{rs}");
        assert_eq!(rs["samples_checked"], 4 + 2 + 4, "{rs}");
        let epoch = rs["epoch"].as_u64().expect("epoch").to_string();
        let seed = rs["seed"].as_str().expect("seed").to_string();
        let deal_s = deal.to_string();
        let rpc = w.dev.rpc_url().to_string();
        // The seed read from the chain by the TypeScript client itself, and the node
        // found from the provider's registration on chain.
        let audit = ["audit", "--rpc-url", &rpc, "--market", &address_s, "--deal", &deal_s, "--epoch", &epoch];
        let (code, js, stderr) = dpor_js(&audit).await;
        assert_eq!(code, 0, "the TypeScript audit of an honest node must pass:\n{js}\n{stderr}");
        assert_same_audit(&rs, &js);
        // The seed given, the node given.
        let mut with_seed = audit.to_vec();
        with_seed.extend(["--seed", &seed, "--node", &w.node_addr]);
        let (code, js2, stderr) = dpor_js(&with_seed).await;
        assert_eq!(code, 0, "{stderr}");
        assert_same_audit(&rs, &js2);
        // Another seed: other positions of C, so another transcript (the seed is used).
        let other_seed = format!("0x{}", "5e".repeat(32));
        let mut reseeded = audit.to_vec();
        reseeded.extend(["--seed", &other_seed]);
        let (code, js3, stderr) = dpor_js(&reseeded).await;
        assert_eq!(code, 0, "{stderr}");
        assert_eq!(js3["seed"], json!(other_seed));
        assert_ne!(js3["transcript_hash"], js["transcript_hash"]);

        // The node loses 3 of the 4 coded blocks of level 1: both audits fail, on the
        // same samples, with the same faults and transcript.
        let report = w.erase(deal, &["--largest-level", "--fraction", "0.75"]);
        assert!(report.contains("zeroed 3 of 4"), "{report}");
        let rs = w.dpor(AUDITOR, &["audit", &deal.to_string(), "--epoch", &epoch]).await;
        assert!(!rs.ok, "dpor audit must fail:\n{}", rs.stdout);
        let rs = rs.json;
        assert_eq!(rs["passed"], false, "{rs}");
        assert_eq!(rs["failures_total"], 3, "{rs}");
        let (code, js, stderr) = dpor_js(&audit).await;
        assert_eq!(code, 1, "the TypeScript audit of a node that lost data must exit 1:\n{js}\n{stderr}");
        assert!(stderr.contains("audit FAILED"), "{stderr}");
        assert_same_audit(&rs, &js);
        let faults: Vec<&str> = js["failures"].as_array().unwrap().iter().map(|f| f["fault"].as_str().unwrap()).collect();
        assert!(faults.iter().all(|f| f.starts_with("Merkle path")), "{faults:?}");

        // A node that cannot be reached: every sample missing, in both.
        w.node.kill9();
        let mut unreachable = audit.to_vec();
        unreachable.extend(["--node", &w.node_addr]);
        let (code, js, stderr) = dpor_js(&unreachable).await;
        assert_eq!(code, 1, "{stderr}");
        assert_eq!(js["node_error"], json!("the provider's node could not be reached"), "{js}");
        assert_eq!(js["failures_total"], js["samples_checked"], "{js}");
        assert!(js["failures"].as_array().unwrap().iter().all(|f| f["fault"] == "missing"), "{js}");
    })
    .await;
}
