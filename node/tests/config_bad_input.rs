//! Bad configuration given to the `dpor-node` binary: refused with a clear error before
//! the node touches its data dir or the chain.
#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

fn run(args: &[&str], data_dir: &std::path::Path) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_dpor-node"))
        .arg("run")
        .arg("--data-dir")
        .arg(data_dir)
        // Nothing listens here: the node must fail on the config, before the chain.
        .args(["--rpc-url", "http://127.0.0.1:9", "--listen", "/ip4/127.0.0.1/tcp/0"])
        .args(args)
        .output()
        .expect("run dpor-node");
    (out.status.success(), String::from_utf8_lossy(&out.stderr).to_string())
}

#[test]
fn a_zero_poll_interval_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("node");
    let (ok, stderr) = run(&["--poll-interval-ms", "0"], &data);
    assert!(!ok, "poll interval 0 must be refused:\n{stderr}");
    assert!(stderr.contains("poll_interval_ms = 0") && stderr.contains("50"), "{stderr}");
    assert!(!data.exists(), "the data dir must not be created for a refused config");

    let config = dir.path().join("node.toml");
    std::fs::write(&config, "poll_interval_ms = 10\n").unwrap();
    let (ok, stderr) = run(&["--config", config.to_str().unwrap()], &data);
    assert!(!ok && stderr.contains("poll_interval_ms = 10"), "{stderr}");
}
