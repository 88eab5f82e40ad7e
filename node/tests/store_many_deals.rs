//! A store holding more deals than it keeps U files open for (`handles.rs`): every
//! deal is read, written and reopened correctly while at most `open_u_deals` deals'
//! files are open, and a store far over the process's open-files limit for three files
//! a deal still opens.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use alloy_primitives::Address;
use dpor_node::store::{DealParams, Store, StoreConfig};

const N: u64 = 4;
const BETA: usize = 1024;

fn block(deal: u64, i: u64, round: u8) -> Vec<u8> {
    vec![(deal as u8).wrapping_mul(31) ^ (i as u8) ^ round; BETA]
}

fn upload(store: &Store, deal: u64) {
    let params = DealParams { deal, owner: Address::repeat_byte(2), num_blocks: N, block_bytes: BETA as u32 };
    store.upload_begin(params, 1).unwrap();
    let blocks: Vec<Vec<u8>> = (0..N).map(|i| block(deal, i, 0)).collect();
    store.upload_blocks(deal, 2, 0, blocks.clone(), &vec![[7u8; 32]; N as usize]).unwrap();
    store.upload_finish(deal, 3).unwrap();
}

#[test]
fn deals_beyond_the_open_files_bound_read_and_write_as_any_other() {
    let tmp = tempfile::tempdir().unwrap();
    let config = StoreConfig { open_u_deals: Some(3), ..Default::default() };
    let deals = 10u64;
    {
        let store = Store::open(tmp.path(), config.clone()).unwrap();
        for d in 1..=deals {
            upload(&store, d);
            assert!(store.open_u_deals() <= 3, "{} deals open", store.open_u_deals());
        }
        // Every deal read back (each read reopens a closed deal and closes another).
        for d in 1..=deals {
            for i in 0..N {
                assert_eq!(store.read(d, i).unwrap().0, block(d, i, 0), "deal {d} block {i}");
            }
        }
        // A write into each deal, in an order that closes every deal between its uses.
        for d in (1..=deals).rev() {
            store.write(d, 4, d % N, block(d, d % N, 9), [8u8; 32]).unwrap();
        }
        assert!(store.open_u_deals() <= 3);
    }
    let store = Store::open(tmp.path(), config).unwrap();
    assert!(store.open_u_deals() <= 3);
    for d in 1..=deals {
        for i in 0..N {
            let want = if i == d % N { block(d, i, 9) } else { block(d, i, 0) };
            let (got, sealed, _) = store.read(d, i).unwrap();
            assert_eq!(got, want, "deal {d} block {i} after reopening");
            assert_eq!(sealed, if i == d % N { [8u8; 32] } else { [7u8; 32] });
        }
        assert_eq!(store.view(d).unwrap().damaged, None);
    }
}

/// More deals than the open-files limit allows three files each: lowered to 300
/// files for this process, 150 deals need 450 files if all are kept open.
#[test]
fn a_store_over_the_open_files_limit_opens() {
    let (soft, hard) = rlimit::getrlimit(rlimit::Resource::NOFILE).unwrap();
    let limit = 300u64.min(hard);
    rlimit::setrlimit(rlimit::Resource::NOFILE, limit, hard).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let config = StoreConfig { open_u_deals: Some(40), ..Default::default() };
    let deals = 150u64;
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        {
            let store = Store::open(tmp.path(), config.clone()).unwrap();
            for d in 1..=deals {
                upload(&store, d);
            }
        }
        let store = Store::open(tmp.path(), config).unwrap();
        assert_eq!(store.deals().len() as u64, deals);
        for d in 1..=deals {
            assert_eq!(store.view(d).unwrap().damaged, None, "deal {d}");
            assert_eq!(store.read(d, 1).unwrap().0, block(d, 1, 0));
        }
    }));
    rlimit::setrlimit(rlimit::Resource::NOFILE, soft, hard).unwrap();
    result.unwrap();
}
