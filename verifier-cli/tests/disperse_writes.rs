//! Writes across the shards of a dispersed file (issue 12 #2), against real nodes in
//! process (one per shard, one owner key) and a plain byte array as the model: after
//! every write, every set of k shards decodes to the model; a write interrupted
//! between shards (the state an owner crash leaves: the intent saved, some shards
//! written) decodes wrong from some sets of k shards until the next command rolls it
//! forward, and right from every set afterwards.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "inproc/mod.rs"]
mod inproc;

use alloy::signers::local::PrivateKeySigner;
use alloy_primitives::Address;
use dpor_client::disperse::write::{self, ShardLink, WriteIntent};
use dpor_client::disperse::{FileDir, ShardFile};
use dpor_client::node_client::OwnerAuth;
use dpor_client::owner::flows;
use dpor_client::owner_state::OwnerState;
use dpor_disperse::{Geometry, StripeCoder};
use dpor_node::handler::Misbehavior;
use inproc::{node_for, state, Node, CHAIN};
use rand::{Rng, SeedableRng};
use std::path::Path;

const K: u16 = 2;
const N: u16 = 4;
const BETA: u32 = 64;

/// Every k-subset of 0..n.
fn subsets() -> Vec<Vec<usize>> {
    let mut out = Vec::new();
    for mask in 0u32..(1 << N) {
        if mask.count_ones() == K as u32 {
            out.push((0..N as usize).filter(|i| mask >> i & 1 == 1).collect());
        }
    }
    out
}

/// Downloads every shard (verified) and decodes the file from each k-subset.
async fn decode_all(links: &[ShardLink], record: &FileDir) -> Vec<(Vec<usize>, Vec<u8>)> {
    let mut shards = Vec::new();
    for l in links {
        shards.push(flows::download(&l.node, &l.state, None).await.unwrap());
    }
    let mut coder = StripeCoder::new(record.geometry().unwrap()).unwrap();
    subsets()
        .into_iter()
        .map(|set| {
            let refs: Vec<Option<&[u8]>> = (0..N as usize).map(|i| set.contains(&i).then(|| shards[i].as_slice())).collect();
            let file = coder.join_file(record.file_bytes, &refs).unwrap();
            (set, file)
        })
        .collect()
}

/// Reloads every shard's owner state from the directory, as a new process would.
fn reload(links: &mut [ShardLink], dir: &Path, record: &FileDir) {
    for l in links.iter_mut() {
        l.state = OwnerState::load(&dir.join(&record.shards[l.index as usize].state)).unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_across_shards_decode_from_every_k_set_and_an_interrupted_one_rolls_forward() {
    let owner = PrivateKeySigner::random();
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let g = Geometry::new(K, N, BETA).unwrap();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(12);
    // 2 × 8 blocks of 64 bytes, less 50: the last stripe is partial.
    let mut model: Vec<u8> = (0..(K as usize * 8 * BETA as usize - 50)).map(|_| rng.gen()).collect();
    let stripes = g.stripes(model.len() as u64).unwrap();
    let mut coder = StripeCoder::new(g).unwrap();
    let shards = coder.split_file(&model).unwrap();

    // One node per shard, every shard uploaded as an ordinary deal.
    let mut nodes: Vec<Node> = Vec::new();
    let mut links = Vec::new();
    let mut files = Vec::new();
    for (i, shard) in shards.iter().enumerate() {
        let node = node_for(owner.clone(), stripes, BETA, Misbehavior::None).await;
        let mut st = state(1, stripes, BETA, node.market);
        let name = format!("shard-{i}.json");
        st.path = Some(dir.join(&name));
        let auth = OwnerAuth { key: &owner, chain_id: CHAIN, market: node.market, deal: 1 };
        flows::upload(&node.client, &auth, &mut st, shard, None).await.unwrap();
        st.persist().unwrap();
        files.push(ShardFile { index: i as u16, deal: 1, provider: Address::repeat_byte(i as u8 + 1), state: name });
        links.push(ShardLink { index: i as u16, node: node.client.clone(), state: st });
        nodes.push(node);
    }
    let mut record = FileDir {
        k: K,
        n: N,
        block_bytes: BETA,
        file_bytes: model.len() as u64,
        registry: Address::ZERO,
        file_id: Some(1),
        shards: files,
        dirty: Vec::new(),
    };
    record.save(dir).unwrap();

    // Random writes, across block and stripe boundaries, each applied whole.
    for _ in 0..6 {
        let offset = rng.gen_range(0..model.len() - 1);
        let len = rng.gen_range(1..=(model.len() - offset).min(300));
        let data: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
        let intent = write::plan(&record, &links, offset as u64, &data).await.unwrap();
        intent.save(dir).unwrap();
        write::apply(dir, &mut record, intent, &mut links, &owner, None).await.unwrap();
        model[offset..offset + len].copy_from_slice(&data);
        for (set, file) in decode_all(&links, &record).await {
            assert_eq!(file, model, "shards {set:?} decode to something else");
        }
    }
    assert!(WriteIntent::load(dir).unwrap().is_none(), "no intent left after complete writes");
    assert!(!record.dirty.is_empty(), "written shards wait for their checkpoint");

    // Interrupted between shards: a write over two whole stripes, applied to one shard
    // only (data shard 0), then the process "dies".
    let (offset, len) = (BETA as usize, 2 * K as usize * BETA as usize);
    let data: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
    let intent = write::plan(&record, &links, offset as u64, &data).await.unwrap();
    intent.save(dir).unwrap();
    let applied = write::apply(dir, &mut record, intent, &mut links, &owner, Some(1)).await.unwrap();
    assert_eq!(applied.shards_written, vec![0]);
    reload(&mut links, dir, &record);
    let mut record = FileDir::load(dir).unwrap();
    let mut new_model = model.clone();
    new_model[offset..offset + len].copy_from_slice(&data);
    // The danger the intent exists for: some k-sets now decode to neither version.
    let mixed = decode_all(&links, &record).await;
    let wrong: Vec<&Vec<usize>> = mixed.iter().filter(|(_, f)| *f != model && *f != new_model).map(|(s, _)| s).collect();
    assert!(!wrong.is_empty(), "a half-applied write must be visible in some k-set, or this test shows nothing");

    // The next command rolls it forward (here its library call, with every shard reachable).
    let intent = WriteIntent::load(dir).unwrap().expect("the intent survives the crash");
    assert_eq!(intent.shards.iter().filter(|w| w.done).count(), 1);
    let rest = write::apply(dir, &mut record, intent, &mut links, &owner, None).await.unwrap();
    assert_eq!(rest.shards_written, vec![1, 2, 3]);
    assert!(WriteIntent::load(dir).unwrap().is_none());
    reload(&mut links, dir, &record);
    for (set, file) in decode_all(&links, &record).await {
        assert_eq!(file, new_model, "after the roll-forward, shards {set:?} decode to something else");
    }
    // Bad input: past the file's end, or empty; nothing is saved.
    let e = write::plan(&record, &links, new_model.len() as u64 - 1, &[1, 2]).await.err().unwrap().to_string();
    assert!(e.contains("past the file's"), "{e}");
    assert!(write::plan(&record, &links, 0, &[]).await.is_err());
    assert!(WriteIntent::load(dir).unwrap().is_none());
}
