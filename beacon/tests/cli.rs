//! The `dpor-beacon` binary as a user (or the demo script) runs it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::{Command, Output};

use alloy_primitives::U256;
use dpor_beacon::{randomness, verify, KeyFile, PublicKey};

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_dpor-beacon"))
        .args(args)
        .output()
        .expect("run dpor-beacon")
}

fn stdout(o: &Output) -> String {
    assert!(
        o.status.success(),
        "failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout.clone()).unwrap()
}

/// keygen prints the four constructor words of the key it wrote; sign prints a signature that verifies under them
/// (checked by the library and by `verify --key`); keygen never overwrites; round 0 and a tampered key file fail.
#[test]
fn keygen_sign_verify() {
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("beacon.key");
    let key_s = key.to_str().unwrap();
    let words: Vec<U256> = stdout(&run(&["keygen", "--out", key_s]))
        .lines()
        .map(|l| l.parse().unwrap())
        .collect();
    assert_eq!(words.len(), 4);
    let pk = PublicKey::from_words(&[words[0], words[1], words[2], words[3]]).unwrap();
    assert_eq!(KeyFile::load(&key).unwrap().public_key(), pk);
    assert_eq!(
        stdout(&run(&["pubkey", "--key", key_s])),
        stdout(&run(&["pubkey", "--key", key_s]))
    );

    let sig_hex = stdout(&run(&["sign", "--key", key_s, "--round", "42"]))
        .trim()
        .to_string();
    let sig = hex::decode(sig_hex.trim_start_matches("0x")).unwrap();
    verify(&pk, 42, &sig).unwrap();
    let rand = stdout(&run(&[
        "verify", "--key", key_s, "--round", "42", "--sig", &sig_hex,
    ]));
    assert_eq!(rand.trim(), format!("0x{}", hex::encode(randomness(&sig))));
    // Under evmnet's key (the default) the local signature is rejected.
    assert!(!run(&["verify", "--round", "42", "--sig", &sig_hex])
        .status
        .success());
    assert!(
        !run(&["verify", "--key", key_s, "--round", "43", "--sig", &sig_hex])
            .status
            .success()
    );

    assert!(
        !run(&["keygen", "--out", key_s]).status.success(),
        "keygen must not overwrite a key"
    );
    assert!(!run(&["sign", "--key", key_s, "--round", "0"])
        .status
        .success());

    // A key file whose public key does not match its secret key is refused.
    let text = std::fs::read_to_string(&key).unwrap();
    let mut kf: KeyFile = serde_json::from_str(&text).unwrap();
    kf.public_key.swap(0, 1);
    let bad = dir.path().join("bad.key");
    std::fs::write(&bad, serde_json::to_string(&kf).unwrap()).unwrap();
    let o = run(&["sign", "--key", bad.to_str().unwrap(), "--round", "1"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("does not match"));
}

/// `--seed` makes keygen reproducible (the demo can regenerate the same key); short seeds are refused.
#[test]
fn seeded_keygen_is_deterministic() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.key");
    let b = dir.path().join("b.key");
    let seed = "00112233445566778899aabbccddeeff";
    let wa = stdout(&run(&[
        "keygen",
        "--out",
        a.to_str().unwrap(),
        "--seed",
        seed,
    ]));
    let wb = stdout(&run(&[
        "keygen",
        "--out",
        b.to_str().unwrap(),
        "--seed",
        seed,
    ]));
    assert_eq!(wa, wb);
    assert!(!run(&[
        "keygen",
        "--out",
        dir.path().join("c").to_str().unwrap(),
        "--seed",
        "0011"
    ])
    .status
    .success());
}

/// `verify` with evmnet's key accepts a real round (6390578, from drand/drand-client's tests) and prints drand's
/// randomness for it; `round-at` prints DrandBeacon.roundAt.
#[test]
fn verify_real_evmnet_round_and_round_at() {
    let sig = "0d0d705983f50d6a2846e77d8d12a238f0be277a2307eb3e0d5206dc6765b0f91f04e596e3b28295086e8fda9047d40d37f7c2d8fb2f6686839101692e4f5f13";
    let out = stdout(&run(&["verify", "--round", "6390578", "--sig", sig]));
    assert_eq!(
        out.trim(),
        "0x466262e8cb50407310fa05024bff96e52a8c701e7f6b209ac5cdbdf01cf903f2"
    );
    assert!(!run(&["verify", "--round", "6390579", "--sig", sig])
        .status
        .success());
    let r = stdout(&run(&[
        "round-at",
        "--time",
        &(1_727_521_075u64 + 9_999_999 * 3).to_string(),
    ]));
    assert_eq!(r.trim(), "10000000");
    assert_eq!(
        stdout(&run(&[
            "round-at",
            "--time",
            "1001",
            "--genesis",
            "1000",
            "--period",
            "3"
        ]))
        .trim(),
        "2"
    );
}
