//! End to end, real processes (anvil + contracts, `dpor-node`, `dpor`, and a JavaScript
//! client): what a new user or a second program trips on.
//!
//! - a second `dpor-node` on the port a node already uses fails with "address in use"
//!   (and the first node keeps every connection); so does a node on a port another
//!   program holds, with the OS's cause;
//! - bad input to the CLI is refused before anything is paid or stored: `deal open
//!   --file DIR`, `--samples 0`, `write I EMPTYFILE`;
//! - a client written in TypeScript from docs/PROTOCOL.md and docs/ENCODING.md alone
//!   (`@dpor/client`, `clients/js`: js-libp2p, cbor-x; its CLI `dpor-js read`) reads a block from the node and
//!   verifies it against rootU, and rejects it against any other root; a frame over
//!   the size limit that it sends whole is answered `TooLarge`, every time.
//!
//! See `e2e_harness/mod.rs`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "e2e_harness/mod.rs"]
mod harness;

use dpor_client::node_client::NodeClient;
use harness::{node_bin, within, World, BETA, OWNER};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

/// The TCP port of a `/ip4/…/tcp/PORT/…` multiaddr.
fn port_of(addr: &str) -> u16 {
    let parts: Vec<&str> = addr.split('/').collect();
    let i = parts.iter().position(|p| *p == "tcp").expect("a tcp address");
    parts[i + 1].parse().expect("a port")
}

/// Runs a second `dpor-node run` on `listen` with its own data dir against `w`'s chain
/// and waits for it to exit (it must: listening fails). Returns (success, stderr).
async fn second_node(w: &World, name: &str, listen: &str) -> (bool, String) {
    let child = tokio::process::Command::new(node_bin())
        .args(["run", "--data-dir"])
        .arg(w.path(name))
        .args(["--listen", listen, "--rpc-url", w.dev.rpc_url(), "--market"])
        .arg(format!("{:?}", w.dev.market()))
        .arg("--provider-key-file")
        .arg(w.path("key4"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start a second dpor-node");
    let out = tokio::time::timeout(Duration::from_secs(120), child.wait_with_output())
        .await
        .expect("the second node must exit (its listen address is in use), not run")
        .expect("wait for the second node");
    (out.status.success(), String::from_utf8_lossy(&out.stderr).to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_node_on_a_used_port_fails_clearly() {
    within(600, async {
        let w = World::start().await;
        let port = port_of(&w.node_addr);
        let listen = format!("/ip4/127.0.0.1/tcp/{port}");
        let (ok, stderr) = second_node(&w, "node2", &listen).await;
        assert!(!ok, "a second node on a used port must fail; stderr:\n{stderr}");
        assert!(
            stderr.contains(&format!("could not listen on {listen}: address in use")),
            "the error must say the address is in use:\n{stderr}"
        );
        // Every connection still reaches the first node (the one registered on chain).
        for _ in 0..10 {
            let c = NodeClient::connect(&w.node_addr, Duration::from_secs(30)).await.expect("connect to the first node");
            assert!(c.status(1).await.is_err(), "no deal 1 yet: the node answers UnknownDeal");
        }

        // A port another program holds: the cause is in the error.
        let holder = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let listen = format!("/ip4/127.0.0.1/tcp/{}", holder.local_addr().unwrap().port());
        let (ok, stderr) = second_node(&w, "node3", &listen).await;
        assert!(!ok, "a node on a held port must fail; stderr:\n{stderr}");
        assert!(stderr.contains(&format!("could not listen on {listen}: address in use")), "{stderr}");
        assert!(stderr.contains("os error"), "the OS's cause is kept:\n{stderr}");
        drop(holder);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_cli_input_is_refused_before_anything_is_paid_or_stored() {
    within(600, async {
        let w = World::start().await;
        let owner = w.dev.key(OWNER).address();
        let token = w.client(OWNER).await;
        let provider = format!("{:?}", w.provider);
        let dir = w.path("a-directory");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("inside"), vec![1u8; 10_000]).unwrap();
        let dir = dir.to_str().unwrap().to_string();

        // A directory is not a file to size a deal for.
        let r = w.dpor(OWNER, &["deal", "open", "--provider", &provider, "--file", &dir, "--epochs", "10", "--mint"]).await;
        assert!(!r.ok, "deal open --file DIR must fail:\n{}", r.stdout);
        assert!(r.stderr.contains("not a regular file"), "{}", r.stderr);
        assert!(!w.path("owner.json").exists(), "no deal state may be written");
        assert_eq!(token.balance_of(owner).await.unwrap(), alloy_primitives::U256::ZERO, "nothing minted or paid");

        // --samples must be within 1..=8, as the help says.
        w.make_file("file", 3 * BETA, 3);
        let file = w.path("file");
        let file = file.to_str().unwrap();
        for bad in ["0", "9"] {
            let r = w.dpor(OWNER, &["deal", "open", "--provider", &provider, "--file", file, "--samples", bad, "--mint"]).await;
            assert!(!r.ok, "--samples {bad} must fail:\n{}", r.stdout);
            assert!(r.stderr.contains("1..=8"), "--samples {bad}: {}", r.stderr);
        }
        assert!(!w.path("owner.json").exists());
        assert_eq!(token.balance_of(owner).await.unwrap(), alloy_primitives::U256::ZERO);

        // Writing an empty file is refused; the node's state does not move.
        let deal = w.open_and_upload("file", 16).await;
        let node = NodeClient::connect(&w.node_addr, Duration::from_secs(30)).await.unwrap();
        let before = node.status(deal).await.unwrap();
        std::fs::write(w.path("empty"), b"").unwrap();
        let r = w.dpor(OWNER, &["write", "0", w.path("empty").to_str().unwrap()]).await;
        assert!(!r.ok, "write I EMPTYFILE must fail:\n{}", r.stdout);
        assert!(r.stderr.contains("is empty"), "{}", r.stderr);
        let after = node.status(deal).await.unwrap();
        assert_eq!((after.last_nonce, after.write_count, after.root_u), (before.last_nonce, before.write_count, before.root_u));
    })
    .await;
}

/// The repository root.
fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

/// Runs the TypeScript client's verified read (`dpor-js read`); returns (exit code, stdout, stderr).
async fn js_read(addr: &str, deal: u64, index: u64, root_u: &str) -> (i32, String, String) {
    js_run(&["read", addr, &deal.to_string(), &index.to_string(), root_u]).await
}

/// Runs the TypeScript client's CLI (`clients/js/dist/cli.js`, built by
/// `npm run build -w @dpor/client`) with `args`; returns (exit code, stdout, stderr).
async fn js_run(args: &[&str]) -> (i32, String, String) {
    let cli = repo_root().join("clients/js/dist/cli.js");
    assert!(cli.is_file(), "{} is missing: run `npm run build -w @dpor/client` at the repository root (script/test does)", cli.display());
    let out = tokio::process::Command::new("node")
        .arg(cli)
        .args(args)
        .current_dir(repo_root())
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output()
        .await
        .expect("run node");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).to_string(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_javascript_client_reads_and_verifies_a_block() {
    if std::process::Command::new("node").arg("--version").output().is_err() {
        eprintln!("SKIP a_javascript_client_reads_and_verifies_a_block: `node` (Node.js) is not installed");
        return;
    }
    assert!(
        repo_root().join("node_modules/libp2p/package.json").is_file(),
        "the JavaScript client's packages are missing: run `npm install` at the repository root"
    );
    within(600, async {
        let w = World::start().await;
        let data = w.make_file("file", 5 * BETA + 100, 21);
        let deal = w.open_and_upload("file", 16).await;
        let state: serde_json::Value = serde_json::from_str(&dpor_client::owner_state::read_json(&w.path("owner.json")).unwrap()).unwrap();
        let root_u = state["root_u"].as_str().expect("root_u in the owner state").to_string();

        for index in [0u64, 3, 5] {
            let (code, stdout, stderr) = js_read(&w.node_addr, deal, index, &root_u).await;
            assert_eq!(code, 0, "the JS client failed on block {index}:\n{stderr}");
            let j: serde_json::Value = serde_json::from_str(stdout.trim()).expect("one JSON line");
            let block = hex::decode(j["block"].as_str().unwrap().trim_start_matches("0x")).unwrap();
            let lo = index as usize * BETA;
            let mut want = data[lo.min(data.len())..(lo + BETA).min(data.len())].to_vec();
            want.resize(BETA, 0);
            assert_eq!(block, want, "block {index} as the JS client read it");
            assert_eq!(j["root_u"].as_str(), Some(root_u.as_str()));
        }

        // Against any other root the same answer must not verify.
        let mut wrong = hex::decode(root_u.trim_start_matches("0x")).unwrap();
        wrong[31] ^= 1;
        let (code, _, stderr) = js_read(&w.node_addr, deal, 0, &format!("0x{}", hex::encode(wrong))).await;
        assert_eq!(code, 1, "a block must not verify against a wrong root:\n{stderr}");
        assert!(stderr.contains("does not verify"), "{stderr}");
        // A node error comes back decoded (an enum variant as a string code).
        let (code, _, stderr) = js_read(&w.node_addr, deal + 100, 0, &root_u).await;
        assert_eq!(code, 1);
        assert!(stderr.contains("UnknownDeal"), "{stderr}");

        // A frame over the limit, sent whole before reading (as js-libp2p clients
        // do), is answered TooLarge every time (a reset stream used to lose it).
        for round in 0..10 {
            let (code, stdout, stderr) = js_run(&["too-large", &w.node_addr]).await;
            assert_eq!(code, 0, "round {round}: no TooLarge answer:\n{stderr}");
            assert!(stdout.contains("\"code\":\"TooLarge\""), "round {round}: {stdout}");
        }
        // The node still answers on a new connection.
        let (code, _, stderr) = js_read(&w.node_addr, deal, 0, &root_u).await;
        assert_eq!(code, 0, "{stderr}");
    })
    .await;
}
