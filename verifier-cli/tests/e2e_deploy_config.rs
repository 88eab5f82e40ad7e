//! End to end, real processes, on a chain deployed as an operator would deploy to a
//! chain of their own (issue 24, item 3): a fresh anvil; an ERC-20 and a drand-style
//! beacon deployed beforehand by another account (a third party's contracts);
//! `contracts/script/Deploy.s.sol` run with a TOML config written to a temp dir (no
//! file of the repository changed) that names them; then the demo's deal on that
//! deployment with every address taken from the deployment JSON: the node's config has
//! `deployment = "…"` and no market, the CLI gets `--deployment` and no `--market`. The
//! node registers, the owner opens a deal and uploads a real file, checkpoints, the
//! epoch's beacon round is relayed (`dpor beacon relay`) and the node proves the epoch.
//! See `e2e_harness/mod.rs` for the harness (node binary, processes killed on drop).

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "e2e_harness/mod.rs"]
mod harness;

use dpor_beacon::{KeyFile, LocalBeacon};
use dpor_chain::devnet::repo_root;
use dpor_chain::{foundry_overlay, Deployment, Devnet, DevnetOptions, EpochStatus, ANVIL_KEYS};
use harness::{e18, node_bin, within, CliRun, Proc, BETA, OWNER, PROVIDER};
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

/// The account that deploys the token and the beacon beforehand (not the deployer).
const THIRD_PARTY: usize = 5;
/// Seconds between beacon rounds.
const BEACON_PERIOD: u64 = 30;

/// Runs `dpor --json --deployment DEPLOYMENT ARGS` as anvil account `key`, with no
/// market from the environment (DPOR_MARKET removed).
async fn dpor(dir: &Path, rpc: &str, deployment: Option<&Path>, key: usize, args: &[&str]) -> CliRun {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_dpor"));
    cmd.arg("--json");
    if let Some(d) = deployment {
        cmd.arg("--deployment").arg(d);
    }
    let out = cmd
        .args(args)
        .env("DPOR_RPC_URL", rpc)
        .env("DPOR_KEY_FILE", dir.join(format!("key{key}")))
        .env("DPOR_STATE", dir.join("owner.json"))
        .env_remove("DPOR_MARKET")
        .env_remove("DPOR_DEPLOYMENT")
        .env_remove("DPOR_MANIFEST")
        .env_remove("DPOR_NODE")
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output()
        .await
        .expect("run dpor");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let json = stdout
        .lines()
        .find(|l| l.trim_start().starts_with('{'))
        .and_then(|l| serde_json::from_str(l).ok())
        .unwrap_or(serde_json::Value::Null);
    CliRun { ok: out.status.success(), json, stdout, stderr: String::from_utf8_lossy(&out.stderr).to_string() }
}

fn repo_status() -> Option<String> {
    let out = std::process::Command::new("git").arg("-C").arg(repo_root()).args(["status", "--porcelain"]).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deal_is_proven_on_a_deployment_made_from_a_config_file() {
    within(600, async {
        let mut dev = Devnet::start_bare(DevnetOptions::default()).await.expect("anvil (is `npm install` done?)");
        let dir = tempfile::tempdir().expect("tempdir");
        let dir = dir.path();
        for (i, k) in ANVIL_KEYS.iter().enumerate().take(6) {
            std::fs::write(dir.join(format!("key{i}")), k).expect("key file");
        }

        // A third party's token and beacon, deployed before ours.
        let third = ANVIL_KEYS[THIRD_PARTY];
        let token = dev.forge_create("contracts/src/token/TestToken.sol:TestToken", third, &[]).await.expect("token");
        let local = LocalBeacon::from_seed(b"dpor e2e deploy-config beacon 01").expect("beacon key");
        KeyFile::new(&local).write_new(&dir.join("beacon.key")).expect("beacon key file");
        let w = local.public_key_words();
        let words = format!("[{},{},{},{}]", w[0], w[1], w[2], w[3]);
        let now = dev.timestamp().await.expect("time");
        let args = [words, now.to_string(), BEACON_PERIOD.to_string()];
        let beacon = dev.forge_create("contracts/src/beacon/DrandBeacon.sol:DrandBeacon", third, &args).await.expect("beacon");

        // Deploy.s.sol with a config file in the temp dir, writing the deployment there.
        let config = dir.join("deploy.toml");
        let out = dir.join("deployment.json");
        std::fs::write(
            &config,
            format!(
                "token = \"{token:?}\"\nbeacon = \"{beacon:?}\"\nout = \"{}\"\nepoch_seconds = 21600\nanswer_seconds = 54000\nupload_seconds = 86400\n",
                out.display()
            ),
        )
        .expect("deploy.toml");
        let overlay = foundry_overlay(dir, &[&config], &[dir]).expect("foundry overlay");
        let before = repo_status();
        let env = [
            ("FOUNDRY_CONFIG", overlay.display().to_string()),
            ("DPOR_DEPLOY_CONFIG", config.display().to_string()),
            ("DEPLOYER_KEY", ANVIL_KEYS[0].to_string()),
        ];
        let run = dev.forge_script_deploy(&env).await.expect("forge");
        assert!(run.ok, "Deploy.s.sol failed:\n{}", run.output);
        assert_eq!(repo_status(), before, "the deployment changed files of the repository");
        let d = Deployment::load(&out).expect("the deployment file");
        assert_eq!((d.chain_id, d.token, d.token_deployed, d.beacon, d.dev_seeds), (31337, Some(token), false, Some(beacon), false));
        // Without a TestToken of its own the market is the deployer's nonce 0 and the
        // CLI's and node's local default (nonce 1) is the manifest here: only the file
        // gives the right addresses.
        assert_ne!(format!("{:?}", d.market).to_lowercase(), dpor_cli::context::LOCAL_MARKET.to_lowercase());
        dev.adopt(&d);

        // The provider's tokens (the third party's token is a TestToken: anyone mints).
        let provider = dev.key(PROVIDER).address();
        let p = dev.client(PROVIDER).await.expect("provider client");
        assert_eq!(p.token_address(), token);
        p.mint(provider, e18(1_000_000)).await.expect("mint the provider's tokens");

        // The node: its config names the deployment file, not the market.
        let node_toml = dir.join("node.toml");
        std::fs::write(
            &node_toml,
            format!(
                "deployment = {:?}\ndata_dir = {:?}\nlisten = \"/ip4/127.0.0.1/tcp/0\"\nrpc_url = {:?}\nprovider_key_file = {:?}\npoll_interval_ms = 200\n",
                out.display().to_string(),
                dir.join("node").display().to_string(),
                dev.rpc_url(),
                dir.join(format!("key{PROVIDER}")).display().to_string()
            ),
        )
        .expect("node.toml");
        let log = std::fs::File::create(dir.join("node.log")).expect("node log");
        let child = std::process::Command::new(node_bin())
            .args(["run", "--config"])
            .arg(&node_toml)
            .arg("--addr-file")
            .arg(dir.join("node.addr"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .expect("start dpor-node");
        let mut node = Proc::new(child, "dpor-node");
        let node_log = || std::fs::read_to_string(dir.join("node.log")).unwrap_or_default();
        let deadline = Instant::now() + Duration::from_secs(60);
        while !p.get_provider(provider).await.map(|i| i.registered).unwrap_or(false) {
            assert!(node.alive(), "the node exited:\n{}", node_log());
            assert!(Instant::now() < deadline, "the node did not register within 60 s:\n{}", node_log());
            tokio::time::sleep(Duration::from_millis(100)).await;
        }

        // The CLI without the file would talk to the manifest as if it were the market.
        let rpc = dev.rpc_url().to_string();
        let r = dpor(dir, &rpc, None, OWNER, &["status"]).await;
        assert!(!r.ok && r.stderr.contains("cannot reach the market"), "dpor without --deployment:\n{}\n{}", r.stdout, r.stderr);

        // The owner: a real file, a deal, the upload and a checkpoint, all by the file.
        let data: Vec<u8> = harness::pseudo_random(40 * BETA + 123, 24);
        std::fs::write(dir.join("file"), &data).expect("file");
        let file = dir.join("file").display().to_string();
        let dep = Some(out.as_path());
        let provider_s = format!("{provider:?}");
        let open = ["deal", "open", "--provider", &provider_s, "--file", &file, "--lambda", "16", "--samples", "2", "--epochs", "100", "--mint"];
        let deal = dpor(dir, &rpc, dep, OWNER, &open).await.expect_ok("deal open")["deal"].as_u64().expect("deal id");
        dpor(dir, &rpc, dep, OWNER, &["upload", &file]).await.expect_ok("upload");
        dpor(dir, &rpc, dep, OWNER, &["checkpoint"]).await.expect_ok("checkpoint");
        let down = dir.join("down.bin").display().to_string();
        dpor(dir, &rpc, dep, OWNER, &["download", &down]).await.expect_ok("download");
        assert!(std::fs::read(&down).expect("down.bin") == data, "download differs from the file");

        // Epoch 0: warp to its beacon round, relay it with the CLI, the node proves it.
        let w0 = p.epoch_window(deal, 0).await.expect("window");
        let round = p.beacon_round_at(beacon, w0.start).await.expect("round");
        let t = p.beacon_round_time(beacon, round).await.expect("round time");
        dev.warp_to(t.max(w0.start)).await.expect("warp");
        let beacon_key = dir.join("beacon.key").display().to_string();
        let relay = dpor(dir, &rpc, dep, THIRD_PARTY, &["beacon", "relay", "--once", "--beacon-key", &beacon_key]).await;
        assert!(relay.ok, "relay:\n{}\n{}", relay.stdout, relay.stderr);
        assert!(p.beacon_randomness(beacon, round).await.expect("randomness").is_some(), "round {round} not recorded: {}", relay.stdout);
        let t0 = Instant::now();
        loop {
            let s = p.epoch_status(deal, 0).await.expect("status");
            if s == EpochStatus::Proven {
                break;
            }
            assert_eq!(s, EpochStatus::None, "epoch 0 settled otherwise:\n{}", node_log());
            assert!(node.alive(), "the node exited:\n{}", node_log());
            assert!(t0.elapsed() < Duration::from_secs(120), "epoch 0 not proven within 120 s:\n{}", node_log());
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
    .await;
}
