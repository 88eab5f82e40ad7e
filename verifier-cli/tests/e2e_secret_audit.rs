//! End to end, real processes (anvil + contracts, `dpor-node`, `dpor`): the owner's
//! `dpor audit --secret` passes on an honest node at a small fraction of the public
//! audit's bytes, and fails (exit code, JSON report) once the node erased blocks of C.
//! See `e2e_harness/mod.rs` for the harness.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "e2e_harness/mod.rs"]
mod harness;

use harness::{within, World, OWNER};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_owners_secret_audit_passes_then_catches_erased_blocks() {
    within(600, async {
        let w = World::start().await;
        // 256 KiB, β = 4096: N = 64, C has 128 coded blocks; λ = 16.
        w.make_file("file", 256 << 10, 3);
        let deal = w.open_and_upload("file", 16).await;
        let block = vec![7u8; 4096];
        std::fs::write(w.path("block"), &block).expect("block file");
        for i in 0..3 {
            w.dpor(OWNER, &["write", &i.to_string(), w.path("block").to_str().expect("path")]).await.expect_ok("write");
        }
        // t = 3: levels 0 and 1 filled; C and two levels audited.
        let ok = w.dpor(OWNER, &["audit", "--secret"]).await.expect_ok("secret audit");
        assert_eq!(ok["passed"], true, "{ok}");
        assert_eq!(ok["runs"].as_array().map(Vec::len), Some(3), "{ok}");
        assert_eq!(ok["lambda"], 16, "{ok}");
        // With the deal named, and another λ.
        let ok = w.dpor(OWNER, &["audit", &deal.to_string(), "--secret", "--lambda", "32"]).await.expect_ok("secret audit, λ = 32");
        assert_eq!(ok["passed"], true, "{ok}");
        let bytes = ok["bytes_sent"].as_u64().unwrap() + ok["bytes_received"].as_u64().unwrap();
        assert!(bytes < 3 * (4696 + 32 * 40) + 2000, "{bytes} bytes for 3 runs at λ = 32: {ok}");
        // The wrong deal is refused before anything is sent.
        let other = w.dpor(OWNER, &["audit", &(deal + 1).to_string(), "--secret"]).await;
        assert!(!other.ok && other.stderr.contains("holds deal"), "{other:?}");

        // Erase 60% of C on disk (the node keeps running): λ = 16 samples of 128 all
        // miss the erased blocks with probability 0.4^16 ≈ 4·10^-7.
        w.erase(deal, &["--tag", "0", "--fraction", "0.6"]);
        let bad = w.dpor(OWNER, &["audit", "--secret"]).await;
        assert!(!bad.ok, "the secret audit passed a node that erased 60% of C: {bad:?}");
        assert_eq!(bad.json["passed"], false, "{bad:?}");
        assert_eq!(bad.json["failed_runs"], 1, "only C was erased: {bad:?}");
        assert!(bad.stderr.contains("secret audit of deal"), "{}", bad.stderr);
    })
    .await;
}
