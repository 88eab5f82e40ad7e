//! `contracts/script/Deploy.s.sol` as an operator runs it on a chain of their own, on a
//! fresh anvil each: an existing ERC-20 and beacon (deployed beforehand by another
//! account, as a third party would have), every parameter from a TOML file in a temp
//! dir, the environment overriding the file, the deployment JSON checked against the
//! chain, and no file of the repository changed; the refusals: development seeds and
//! the default key on a non-local chain id, an unknown key, a token without code.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use alloy::providers::{Provider, ProviderBuilder};
use dpor_beacon::LocalBeacon;
use dpor_chain::devnet::repo_root;
use dpor_chain::{foundry_overlay, Address, Deployment, Devnet, DevnetOptions, Market, ANVIL_KEYS, U256};
use std::path::Path;

/// The account that deploys the token and the beacon (not the market's deployer).
const THIRD_PARTY: usize = 5;

/// `git status --porcelain` of the repository (None without git): what a run changed.
fn repo_status() -> Option<String> {
    let out = std::process::Command::new("git").arg("-C").arg(repo_root()).args(["status", "--porcelain"]).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).to_string())
}

/// Deploys `DrandBeacon` (a local key, round 1 now, a round every 30 s) from `key`.
async fn deploy_beacon(dev: &Devnet, key: &str) -> Address {
    let local = LocalBeacon::from_seed(b"dpor deploy-config test beacon 1").unwrap();
    let w = local.public_key_words();
    let words = format!("[{},{},{},{}]", w[0], w[1], w[2], w[3]);
    let now = dev.timestamp().await.unwrap();
    dev.forge_create("contracts/src/beacon/DrandBeacon.sol:DrandBeacon", key, &[words, now.to_string(), "30".into()]).await.unwrap()
}

async fn nonce(dev: &Devnet, who: Address) -> u64 {
    ProviderBuilder::new().connect_http(dev.rpc_url().parse().unwrap()).get_transaction_count(who).await.unwrap()
}

async fn has_code(dev: &Devnet, at: Address) -> bool {
    !ProviderBuilder::new().connect_http(dev.rpc_url().parse().unwrap()).get_code_at(at).await.unwrap().is_empty()
}

/// `FOUNDRY_CONFIG` reading `config` and writing into `dir`, and `DPOR_DEPLOY_CONFIG`.
fn file_env(dir: &Path, config: &Path) -> Vec<(&'static str, String)> {
    let overlay = foundry_overlay(dir, &[config], &[dir]).unwrap();
    vec![("FOUNDRY_CONFIG", overlay.display().to_string()), ("DPOR_DEPLOY_CONFIG", config.display().to_string())]
}

#[tokio::test]
async fn deploys_over_an_existing_token_and_beacon_from_a_config_file() {
    let mut dev = Devnet::start_bare(DevnetOptions::default()).await.expect("anvil (is `npm install` done?)");
    let third = ANVIL_KEYS[THIRD_PARTY];
    let token = dev.forge_create("contracts/src/token/TestToken.sol:TestToken", third, &[]).await.unwrap();
    let beacon = deploy_beacon(&dev, third).await;

    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("deployment.json");
    let config = dir.path().join("deploy.toml");
    std::fs::write(
        &config,
        format!(
            "# a third party's token and beacon\ntoken = \"{token:?}\"\nbeacon = \"{beacon:?}\"\nout = \"{}\"\n\
             epoch_seconds = 21600\nanswer_seconds = 54000\nupload_seconds = 86400\n\
             dispute_bond = \"50000000000000000000\"\nmin_stake = \"2000000000000000000000\"\nmax_failures = 5\n",
            out.display()
        ),
    )
    .unwrap();
    let before = repo_status();
    let mut env = file_env(dir.path(), &config);
    // The environment overrides the file: 12 h epochs, not the file's 6 h.
    env.push(("EPOCH_SECONDS", "43200".into()));
    env.push(("DEPLOYER_KEY", ANVIL_KEYS[0].into()));
    let run = dev.forge_script_deploy(&env).await.unwrap();
    assert!(run.ok, "forge script failed:\n{}", run.output);
    assert_eq!(repo_status(), before, "the deployment changed files of the repository");

    // The file and the printed line are the same deployment.
    let d = Deployment::load(&out).unwrap();
    assert_eq!(Deployment::from_output(&run.output).unwrap(), d);
    let raw: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(d.chain_id, 31337);
    assert_eq!(d.token, Some(token));
    assert!(!d.token_deployed, "{raw}");
    assert_eq!(d.beacon, Some(beacon));
    assert!(!d.dev_seeds);
    assert_eq!(raw["params"]["epoch_seconds"], 43200, "{raw}");
    assert_eq!(raw["params"]["dispute_bond"], "50000000000000000000", "{raw}");
    // The KEY=value lines (the demos read them) agree.
    let line = |k: &str| run.output.lines().find_map(|l| l.trim().strip_prefix(k).map(str::to_string)).unwrap();
    assert_eq!(line("DPOR_MARKET=").parse::<Address>().unwrap(), d.market);
    assert_eq!(line("DPOR_TOKEN=").parse::<Address>().unwrap(), token);
    // No TestToken from the deployer: its nonce 0 is the market, and the deployer sent
    // the market, the manifest, the extension and its installation.
    let deployer = dev.key(0).address();
    assert_eq!(d.deployer, Some(deployer));
    assert_eq!(d.market, deployer.create(0), "no token deployed: the market takes the deployer's nonce 0");
    assert_eq!(nonce(&dev, deployer).await, 4);

    // The chain agrees with the file.
    for a in [d.market, d.manifest.unwrap(), d.commitments.unwrap()] {
        assert!(has_code(&dev, a).await, "no code at {a}");
    }
    let m = Market::connect(dev.rpc_url(), d.market, None).await.unwrap();
    d.check(&m).await.unwrap();
    assert_eq!(m.token_address(), token);
    let p = m.params().await.unwrap();
    assert_eq!((p.epoch_seconds, p.answer_seconds, p.grace_seconds, p.upload_seconds), (43200, 54000, 172800, 86400));
    assert_eq!((p.dispute_bond, p.max_failures, p.beacon), (50_000_000_000_000_000_000, 5, beacon));
    assert_eq!(m.min_stake().await.unwrap(), U256::from(2000u64) * U256::from(10u64).pow(U256::from(18u64)));
    assert_eq!(m.manifest_registry(d.manifest.unwrap()).market_address().await.unwrap(), d.market);
    // A file naming another token, or another chain, does not pass the check.
    let wrong = Deployment { token: Some(beacon), ..d.clone() };
    assert!(wrong.check(&m).await.unwrap_err().to_string().contains("token"));
    let wrong = Deployment { chain_id: 11155111, ..d.clone() };
    let e = wrong.check(&m).await.unwrap_err().to_string();
    assert!(e.contains("chain id 11155111") && e.contains("31337"), "{e}");
    dev.adopt(&d);
    assert_eq!(dev.market(), d.market);
}

#[tokio::test]
async fn refuses_unknown_keys_and_a_token_without_code() {
    let dev = Devnet::start_bare(DevnetOptions::default()).await.expect("anvil (is `npm install` done?)");
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("deploy.toml");

    std::fs::write(&config, "epoch_second = 21600\n").unwrap();
    let run = dev.forge_script_deploy(&file_env(dir.path(), &config)).await.unwrap();
    assert!(!run.ok && run.output.contains("unknown key `epoch_second`"), "{}", run.output);

    std::fs::write(&config, "token = \"0x000000000000000000000000000000000000dEaD\"\n").unwrap();
    let run = dev.forge_script_deploy(&file_env(dir.path(), &config)).await.unwrap();
    assert!(!run.ok && run.output.contains("has no contract code"), "{}", run.output);
    assert_eq!(nonce(&dev, dev.key(0).address()).await, 0, "a refused deployment sent a transaction");
}

#[tokio::test]
async fn dev_seeds_and_the_default_key_are_refused_on_a_non_local_chain() {
    let dev =
        Devnet::start_bare(DevnetOptions { chain_id: Some(11155111), ..Default::default() }).await.expect("anvil (is `npm install` done?)");
    let deployer = dev.key(0).address();

    // No beacon: refused, naming the chain id, before any transaction.
    let run = dev.forge_script_deploy(&[("DEPLOYER_KEY", ANVIL_KEYS[0].into())]).await.unwrap();
    assert!(!run.ok, "dev seeds deployed on chain id 11155111:\n{}", run.output);
    assert!(run.output.contains("refusing development seeds") && run.output.contains("11155111"), "{}", run.output);
    assert_eq!(nonce(&dev, deployer).await, 0, "a refused deployment sent a transaction");

    // A beacon but no key: anvil's public key 0 is not a default here.
    let beacon = deploy_beacon(&dev, ANVIL_KEYS[THIRD_PARTY]).await;
    let run = dev.forge_script_deploy(&[("BEACON", format!("{beacon:?}"))]).await.unwrap();
    assert!(!run.ok && run.output.contains("no DEPLOYER_KEY on chain id 11155111"), "{}", run.output);

    // Both: deployed, in beacon mode, on chain 11155111 (the refusals above are not
    // refusals of everything on this chain).
    let run = dev.forge_script_deploy(&[("BEACON", format!("{beacon:?}")), ("DEPLOYER_KEY", ANVIL_KEYS[0].into())]).await.unwrap();
    assert!(run.ok, "{}", run.output);
    let d = Deployment::from_output(&run.output).unwrap();
    assert_eq!((d.chain_id, d.beacon, d.dev_seeds), (11155111, Some(beacon), false));
    d.check(&Market::connect(dev.rpc_url(), d.market, None).await.unwrap()).await.unwrap();
}
