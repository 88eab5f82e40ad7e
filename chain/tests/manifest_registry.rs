//! The FileManifest registry against a real anvil through the generated bindings:
//! record a 2-of-3 file over three providers' deals, read it back, repair a shard,
//! refuse a stranger and a repeated provider by name, and rebuild the owner's file
//! list from the events alone (as `dpor recover` on a fresh machine will).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use dpor_chain::{ChainError, Devnet, FileFromLogs, Market};

async fn provider(dev: &Devnet, i: usize) -> Market {
    let p = dev.client(i).await.unwrap();
    let me = p.account().unwrap();
    p.mint(me, wei(1_000_000)).await.unwrap();
    p.approve_market(wei(1_000_000)).await.unwrap();
    p.register(vec![0, 0x24, 8, i as u8], vec![format!("/ip4/127.0.0.1/tcp/{}", 4000 + i)], E18, 6 * E18, 1 << 20, wei(1000))
        .await
        .unwrap();
    p
}

#[tokio::test]
async fn record_read_repair_and_rebuild_from_logs() {
    let dev = Devnet::start(None).await.unwrap();
    let ps = [provider(&dev, 1).await, provider(&dev, 3).await, provider(&dev, 4).await, provider(&dev, 5).await];
    let owner = dev.client(2).await.unwrap();
    let me = owner.account().unwrap();
    let listed = owner.registered_providers(0).await.unwrap();
    assert_eq!(listed, ps.iter().map(|p| p.account().unwrap()).collect::<Vec<_>>());
    owner.mint(me, wei(100_000)).await.unwrap();
    owner.approve_market(wei(100_000)).await.unwrap();
    let mut deals = Vec::new();
    for p in &ps {
        deals.push(owner.open_deal(p.account().unwrap(), 8, 256, 4, 1, 5, E18, 6 * E18).await.unwrap());
    }
    let reg = owner.manifest_registry(dev.manifest());
    assert_ne!(dev.manifest(), dpor_chain::Address::ZERO);
    // 2-of-3, L = 2 shards × 8 blocks × 256 bytes: exactly fits.
    let file = reg.record_file(2, 3, 256, 2 * 8 * 256, &deals[..3]).await.unwrap();
    assert_eq!(file, 1);
    let rec = reg.get_file(file).await.unwrap();
    assert_eq!((rec.owner, rec.k, rec.n, rec.block_bytes, rec.file_bytes), (me, 2, 3, 256, 4096));
    assert_eq!(rec.shards.iter().map(|s| s.deal_id).collect::<Vec<_>>(), deals[..3].to_vec());
    assert_eq!(rec.shards[1].provider, ps[1].account().unwrap());

    // One byte more does not fit the deals.
    let err = reg.record_file(2, 3, 256, 2 * 8 * 256 + 1, &deals[..3]).await.unwrap_err();
    assert!(matches!(&err, ChainError::Reverted { error, .. } if error == "DealTooSmall"), "{err}");
    // A stranger cannot record the owner's deals.
    let stranger = dev.client(6).await.unwrap().manifest_registry(dev.manifest());
    let err = stranger.record_file(2, 3, 256, 100, &deals[..3]).await.unwrap_err();
    assert!(matches!(&err, ChainError::Reverted { error, .. } if error == "NotOwner"), "{err}");
    // Nor repair the owner's file.
    let err = stranger.replace_shard(file, 0, deals[3]).await.unwrap_err();
    assert!(matches!(&err, ChainError::Reverted { error, .. } if error == "NotOwner"), "{err}");
    // Moving shard 0 to provider 1's second deal would put two shards on one provider.
    let second = owner.open_deal(ps[1].account().unwrap(), 8, 256, 4, 1, 5, E18, 6 * E18).await.unwrap();
    let err = reg.replace_shard(file, 0, second).await.unwrap_err();
    assert!(matches!(&err, ChainError::Reverted { error, .. } if error == "SameProvider"), "{err}");

    // Repair shard 2 onto the fourth provider, record a second file, delete it.
    reg.replace_shard(file, 2, deals[3]).await.unwrap();
    assert_eq!(reg.get_file(file).await.unwrap().shards[2].deal_id, deals[3]);
    let other = reg.record_file(1, 2, 256, 10, &[second, deals[0]]).await.unwrap();
    assert_eq!(reg.file_count().await.unwrap(), 2);
    reg.delete_file(other).await.unwrap();
    let err = reg.get_file(other).await.unwrap_err();
    assert!(matches!(&err, ChainError::Reverted { error, .. } if error == "NoSuchFile"), "{err}");

    // A fresh machine: only the owner's address and the registry.
    let fresh = dev.client(0).await.unwrap().manifest_registry(dev.manifest());
    let files = fresh.files_of(me, 0).await.unwrap();
    assert_eq!(
        files,
        vec![FileFromLogs {
            file_id: file,
            k: 2,
            n: 3,
            block_bytes: 256,
            file_bytes: 4096,
            deal_ids: vec![deals[0], deals[1], deals[3]],
        }]
    );
    assert!(fresh.files_of(dev.key(6).address(), 0).await.unwrap().is_empty());
}
