//! A `Devnet` leaves no process behind: it starts the real anvil binary (not the npm
//! Node wrapper, which does not pass a kill on to the anvil it starts), and dropping it
//! ends every process of its process group.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use dpor_chain::{Devnet, DevnetOptions};

/// Pids of the live processes whose process group is `pgid` (Linux /proc).
fn group_members(pgid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { continue };
        // Fields after the command name (which may hold spaces) in parentheses:
        // state ppid pgrp ...
        let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else { continue };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        if fields.first() == Some(&"Z") {
            continue; // a zombie has ended; only its exit status is left
        }
        if fields.get(2).and_then(|g| g.parse::<u32>().ok()) == Some(pgid) {
            out.push(pid);
        }
    }
    out
}

#[tokio::test]
async fn dropping_a_devnet_ends_the_real_anvil() {
    if !std::path::Path::new("/proc/self/stat").exists() {
        eprintln!("SKIP: needs Linux /proc to list processes");
        return;
    }
    let dev = Devnet::start(None).await.expect("devnet (is `npm install` done?)");
    assert_ends_cleanly(dev).await;
}

/// The beacon devnet too: it once started the npm wrapper outside a process group of
/// its own, and its anvil outlived every test that used it (seen by script/test's
/// leftover check).
#[tokio::test]
async fn dropping_a_beacon_devnet_ends_the_real_anvil() {
    if !std::path::Path::new("/proc/self/stat").exists() {
        eprintln!("SKIP: needs Linux /proc to list processes");
        return;
    }
    let local = dpor_beacon::LocalBeacon::from_seed(b"dpor devnet cleanup beacon key 1").unwrap();
    let (dev, _) = Devnet::start_with_beacon(DevnetOptions::default(), local.public_key_words(), 3)
        .await
        .expect("devnet with beacon (is `npm install` done?)");
    assert_ends_cleanly(dev).await;
}

/// Asserts `dev` runs the anvil binary as the leader of its own process group, and
/// that dropping it leaves no process of that group.
async fn assert_ends_cleanly(dev: Devnet) {
    let pid = dev.pid();
    let exe = std::fs::read_link(format!("/proc/{pid}/exe")).unwrap();
    assert_eq!(
        exe.file_name().and_then(|n| n.to_str()),
        Some("anvil"),
        "the devnet must start the anvil binary itself, not a wrapper: {}",
        exe.display()
    );
    assert!(group_members(pid).contains(&pid), "anvil leads its own process group");
    dev.block_number().await.expect("anvil answers");
    drop(dev);
    assert_eq!(group_members(pid), Vec::<u32>::new(), "processes of the devnet left running");
}
