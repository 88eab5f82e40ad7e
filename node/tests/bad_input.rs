//! Bad input to a real node over libp2p (store on disk, the request handler, the
//! libp2p server): each is refused with a clear error code, the connection keeps
//! working, and nothing is stored (the deal's status is unchanged).

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use alloy::signers::local::PrivateKeySigner;
use alloy::signers::SignerSync;
use alloy_primitives::{Address, B256, U256};
use async_trait::async_trait;
use dpor_core::checksum::{OwnerKeys, Place};
use dpor_core::digest::Digest;
use dpor_core::BlockFormat;
use dpor_node::handler::{ChainDeal, DealLookup, NodeHandler};
use dpor_node::signing::ProviderSigner;
use dpor_node::store::{Store, StoreConfig};
use dpor_proto::messages::{
    owner_request_hash, ErrorCode, OwnerOp, Request, Response, Signed, WireDigest, WireRun,
};
use dpor_proto::net::{self, Client, NetConfig};
use serde_bytes::ByteBuf;
use std::sync::Arc;

const BETA: usize = 64;
const N: u64 = 8;
const CHAIN: u64 = 31337;

struct Deals(Vec<(u64, ChainDeal)>);

#[async_trait]
impl DealLookup for Deals {
    async fn deal(&self, id: u64) -> anyhow::Result<Option<ChainDeal>> {
        Ok(self.0.iter().find(|(i, _)| *i == id).map(|(_, d)| d.clone()))
    }
}

struct Fixture {
    client: Client<Request, Response>,
    owner: PrivateKeySigner,
    market: Address,
    nonce: u64,
    _server: net::ServerHandle,
    _dir: tempfile::TempDir,
}

impl Fixture {
    async fn new(quota: Option<u64>) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let owner = PrivateKeySigner::random();
        let provider = PrivateKeySigner::random();
        let market = Address::repeat_byte(0x42);
        let store = Arc::new(Store::open(&dir.path().join("store"), StoreConfig { quota_bytes: quota, ..Default::default() }).unwrap());
        let deal = ChainDeal { owner: owner.address(), provider: provider.address(), num_blocks: N, block_bytes: BETA as u32, active: true };
        let other = ChainDeal { provider: Address::repeat_byte(1), ..deal.clone() };
        let handler = NodeHandler::new(store, Arc::new(Deals(vec![(1, deal), (2, other)])), Arc::new(ProviderSigner::new(provider, CHAIN, market)));
        let server = net::serve(
            net::load_or_create_keypair(&dir.path().join("k")).unwrap(),
            "/ip4/127.0.0.1/tcp/0".parse().unwrap(),
            Arc::new(handler),
            NetConfig::default(),
        )
        .await
        .unwrap();
        let addr = server.listen_addrs()[0].clone().with(libp2p::multiaddr::Protocol::P2p(server.peer_id()));
        let client = Client::connect(addr, NetConfig::default()).await.unwrap();
        Fixture { client, owner, market, nonce: 0, _server: server, _dir: dir }
    }

    fn signed_by(&self, key: &PrivateKeySigner, deal: u64, nonce: u64, op: &OwnerOp) -> Request {
        let bytes = op.to_bytes();
        let sig = key.sign_hash_sync(&owner_request_hash(CHAIN, self.market, deal, nonce, &bytes)).unwrap();
        Request::Owner(Signed { deal, nonce, op: ByteBuf::from(bytes), signature: ByteBuf::from(sig.as_bytes().to_vec()), blocks: vec![] })
    }

    /// The owner's request for an op with `blocks` beside the signature.
    async fn owner_with_blocks(&mut self, op: OwnerOp, blocks: Vec<Vec<u8>>) -> Response {
        self.nonce += 1;
        let mut r = self.signed_by(&self.owner.clone(), 1, self.nonce, &op);
        if let Request::Owner(signed) = &mut r {
            signed.blocks = blocks.into_iter().map(ByteBuf::from).collect();
        }
        self.client.request(r).await.unwrap()
    }

    async fn owner(&mut self, op: OwnerOp) -> Response {
        self.nonce += 1;
        let r = self.signed_by(&self.owner.clone(), 1, self.nonce, &op);
        self.client.request(r).await.unwrap()
    }

    async fn call(&self, r: Request) -> Response {
        self.client.request(r).await.unwrap()
    }

    async fn status(&self) -> Response {
        self.call(Request::Status { deal: 1 }).await
    }

    /// Uploads N blocks and finishes.
    async fn upload(&mut self) {
        let keys = OwnerKeys::derive(&[3u8; 32], BlockFormat::new(BETA).unwrap().width());
        let format = BlockFormat::new(BETA).unwrap();
        assert_eq!(self.owner(OwnerOp::UploadBegin { num_blocks: N, block_bytes: BETA as u32 }).await, Response::Accepted);
        let blocks: Vec<Vec<u8>> = (0..N).map(|i| vec![i as u8; BETA]).collect();
        let sealed: Vec<B256> = blocks
            .iter()
            .enumerate()
            .map(|(i, b)| B256::from(keys.seal(Place::U { index: i as u64 }, &keys.checksum(&format.record(i as u64, b).unwrap()).unwrap())))
            .collect();
        let op = OwnerOp::UploadBlocks { start: 0, blocks: blocks.into_iter().map(ByteBuf::from).collect(), sealed_u: sealed };
        assert_eq!(self.owner(op).await, Response::Accepted);
        assert!(matches!(self.owner(OwnerOp::UploadFinish).await, Response::Committed { .. }));
    }
}

fn code(r: &Response) -> ErrorCode {
    match r {
        Response::Error(e) => {
            assert!(!e.message.is_empty(), "an error needs a message");
            e.code
        }
        other => panic!("expected an error, got {other:?}"),
    }
}

#[tokio::test]
async fn unknown_deal_and_out_of_range_are_refused_and_the_connection_is_kept() {
    let mut f = Fixture::new(None).await;
    assert_eq!(code(&f.call(Request::Status { deal: 9 }).await), ErrorCode::UnknownDeal);
    assert_eq!(code(&f.call(Request::Read { deal: 9, index: 0 }).await), ErrorCode::UnknownDeal);
    f.upload().await;
    assert_eq!(code(&f.call(Request::Read { deal: 1, index: N }).await), ErrorCode::OutOfRange);
    assert_eq!(code(&f.call(Request::Read { deal: 1, index: u64::MAX }).await), ErrorCode::OutOfRange);
    assert_eq!(code(&f.call(Request::Samples { deal: 1, run: WireRun { tag: 0, built_at: 0 }, positions: vec![2 * N] }).await), ErrorCode::OutOfRange);
    assert_eq!(code(&f.call(Request::Samples { deal: 1, run: WireRun { tag: 5, built_at: 77 }, positions: vec![0] }).await), ErrorCode::UnknownRun);
    assert_eq!(code(&f.call(Request::Download { deal: 1, start: 0, count: 1 << 40 }).await), ErrorCode::TooLarge);
    // A deal the chain says belongs to another provider.
    let other = f.signed_by(&f.owner.clone(), 2, 1, &OwnerOp::UploadBegin { num_blocks: N, block_bytes: BETA as u32 });
    assert_eq!(code(&f.call(other).await), ErrorCode::UnknownDeal);
    // Still serving.
    assert!(matches!(f.call(Request::Read { deal: 1, index: 3 }).await, Response::Block { .. }));
}

#[tokio::test]
async fn owner_requests_unsigned_foreign_or_replayed_are_refused_and_change_nothing() {
    let mut f = Fixture::new(None).await;
    f.upload().await;
    let before = f.status().await;
    let write = OwnerOp::Write { index: 1, block: ByteBuf::from(vec![7u8; BETA]), sealed_u: B256::ZERO };
    // Unsigned.
    let unsigned = Request::Owner(Signed { deal: 1, nonce: 100, op: ByteBuf::from(write.to_bytes()), signature: ByteBuf::new(), blocks: vec![] });
    assert_eq!(code(&f.call(unsigned).await), ErrorCode::Unauthorized);
    // Signed by someone else.
    let mallory = PrivateKeySigner::random();
    assert_eq!(code(&f.call(f.signed_by(&mallory, 1, 100, &write)).await), ErrorCode::Unauthorized);
    // Garbage op bytes.
    let garbage =
        Request::Owner(Signed { deal: 1, nonce: 100, op: ByteBuf::from(vec![0xff; 10]), signature: ByteBuf::from(vec![0; 65]), blocks: vec![] });
    assert_eq!(code(&f.call(garbage).await), ErrorCode::Malformed);
    assert_eq!(f.status().await, before, "refused requests change nothing");
    // A real write, then the very same request replayed.
    f.nonce += 1;
    let req = f.signed_by(&f.owner.clone(), 1, f.nonce, &write);
    assert!(matches!(f.call(req.clone()).await, Response::Written { .. }));
    let after = f.status().await;
    assert_eq!(code(&f.call(req).await), ErrorCode::Replay);
    assert_eq!(f.status().await, after, "a replay changes nothing");
}

#[tokio::test]
async fn wrong_sizes_and_digest_rollback_are_refused() {
    let mut f = Fixture::new(None).await;
    f.upload().await;
    let before = f.status().await;
    let short = OwnerOp::Write { index: 1, block: ByteBuf::from(vec![7u8; BETA - 1]), sealed_u: B256::ZERO };
    assert_eq!(code(&f.owner(short).await), ErrorCode::BadBlock);
    let far = OwnerOp::Write { index: N, block: ByteBuf::from(vec![7u8; BETA]), sealed_u: B256::ZERO };
    assert_eq!(code(&f.owner(far).await), ErrorCode::OutOfRange);
    assert_eq!(f.status().await.clone_status().root_u, before.clone_status().root_u);
    // Co-sign the current state at version 2, then try version 1 and a wrong root.
    let s = f.status().await.clone_status();
    let digest = Digest {
        dealId: U256::from(1u64),
        version: 2,
        numBlocks: N,
        writeCount: s.write_count,
        rebuildCount: s.rebuild_count,
        rootU: s.root_u,
        rootC: s.c.1,
        levelRoots: s.levels.iter().map(|l| l.2).collect(),
    };
    // A Cosign must carry the owner's EIP-712 signature of the digest (issue 22):
    // none, or one by another key, is Unauthorized and signs nothing.
    let cosign = |d: &Digest, key: &PrivateKeySigner, market: Address| OwnerOp::Cosign {
        digest: WireDigest::from(d),
        owner_signature: ByteBuf::from(key.sign_hash_sync(&d.digest_hash(CHAIN, market)).unwrap().as_bytes().to_vec()),
    };
    let unsigned = OwnerOp::Cosign { digest: WireDigest::from(&digest), owner_signature: ByteBuf::new() };
    assert_eq!(code(&f.owner(unsigned).await), ErrorCode::Unauthorized);
    let stranger = PrivateKeySigner::random();
    assert_eq!(code(&f.owner(cosign(&digest, &stranger, f.market)).await), ErrorCode::Unauthorized);
    let other_market = cosign(&digest, &f.owner.clone(), Address::repeat_byte(0x43));
    assert_eq!(code(&f.owner(other_market).await), ErrorCode::Unauthorized);
    let mut garbage = cosign(&digest, &f.owner.clone(), f.market);
    if let OwnerOp::Cosign { owner_signature, .. } = &mut garbage {
        owner_signature.truncate(64);
    }
    assert_eq!(code(&f.owner(garbage).await), ErrorCode::Unauthorized);
    assert!(matches!(f.owner(cosign(&digest, &f.owner.clone(), f.market)).await, Response::Cosigned { .. }));
    let old = Digest { version: 1, ..digest.clone() };
    assert_eq!(code(&f.owner(cosign(&old, &f.owner.clone(), f.market)).await), ErrorCode::StaleVersion);
    let lie = Digest { version: 3, rootU: B256::repeat_byte(9), ..digest.clone() };
    assert_eq!(code(&f.owner(cosign(&lie, &f.owner.clone(), f.market)).await), ErrorCode::Mismatch);

    // Resizes (App. A.3): a size that is not another power of two changes nothing.
    let root_u = f.status().await.clone_status().root_u;
    for bad in [N, N + 1, 0] {
        assert_eq!(code(&f.owner(OwnerOp::Resize { num_blocks: bad }).await), ErrorCode::OutOfRange, "N' = {bad}");
    }
    assert_eq!(f.status().await.clone_status().root_u, root_u);
    // A resize co-signature for the deal's own N on chain, or for a state the node
    // does not hold, is refused.
    let same_n = OwnerOp::CosignResize { digest: WireDigest::from(&Digest { version: 3, ..digest.clone() }), price_per_epoch: 1, collateral: 1 };
    assert_eq!(code(&f.owner(same_n).await), ErrorCode::Mismatch);
    let not_held = Digest { version: 3, numBlocks: 2 * N, writeCount: 0, levelRoots: vec![], ..digest.clone() };
    let op = OwnerOp::CosignResize { digest: WireDigest::from(&not_held), price_per_epoch: 1, collateral: 1 };
    assert_eq!(code(&f.owner(op).await), ErrorCode::Mismatch);
    // After the resize the same request describes the node's state and is signed.
    let r = f.owner(OwnerOp::Resize { num_blocks: 2 * N }).await;
    let Response::Written { run, run_root, root_u, .. } = r else { panic!("resize: {r:?}") };
    let s = f.status().await.clone_status();
    assert_eq!((s.root_u, s.c.1, s.write_count), (root_u, run_root, 0));
    let resized = Digest { version: 3, numBlocks: 2 * N, writeCount: 0, rebuildCount: run.built_at / (2 * N), rootU: root_u, rootC: run_root, levelRoots: vec![], ..digest };
    let op = OwnerOp::CosignResize { digest: WireDigest::from(&resized), price_per_epoch: 1, collateral: 1 };
    assert!(matches!(f.owner(op).await, Response::Cosigned { .. }));
}

/// Requests signed over block roots (issue 23 #3; PROTOCOL.md): the blocks travel
/// beside the signature, and one that does not hash to the root the owner signed is
/// refused `Unauthorized` with nothing stored, as are blocks of the wrong count
/// (`Malformed`) and blocks beside an op that takes none; the honest requests commit
/// the rootU the owner computes from its own roots.
#[tokio::test]
async fn requests_signed_over_block_roots_need_blocks_that_hash_to_them() {
    use dpor_core::merkle;
    let mut f = Fixture::new(None).await;
    assert_eq!(f.owner(OwnerOp::UploadBegin { num_blocks: N, block_bytes: BETA as u32 }).await, Response::Accepted);
    let blocks: Vec<Vec<u8>> = (0..N).map(|i| vec![i as u8 + 1; BETA]).collect();
    let roots = merkle::block_roots(&blocks);
    let sealed: Vec<[u8; 32]> = (0..N).map(|i| [i as u8; 32]).collect();
    let sealed_u: Vec<B256> = sealed.iter().map(|s| B256::from(*s)).collect();
    let upload = OwnerOp::UploadByRoots { start: 0, roots: roots.clone(), sealed_u: sealed_u.clone() };
    let uploading = |f: &Response| matches!(f, Response::Status(s) if s.phase == dpor_proto::messages::WirePhase::Uploading { received: 0 });
    // One byte of one block changed after signing.
    let mut tampered = blocks.clone();
    tampered[5][0] ^= 1;
    let r = f.owner_with_blocks(upload.clone(), tampered).await;
    assert_eq!(code(&r), ErrorCode::Unauthorized);
    assert!(format!("{r:?}").contains("block 5"), "{r:?}");
    // Blocks missing, or none at all.
    assert_eq!(code(&f.owner_with_blocks(upload.clone(), blocks[..N as usize - 1].to_vec()).await), ErrorCode::Malformed);
    assert_eq!(code(&f.owner(upload.clone()).await), ErrorCode::Malformed);
    // Blocks beside an op that names none.
    assert_eq!(code(&f.owner_with_blocks(OwnerOp::UploadFinish, blocks.clone()).await), ErrorCode::Malformed);
    assert!(uploading(&f.status().await), "refused requests store nothing");
    assert_eq!(f.owner_with_blocks(upload, blocks.clone()).await, Response::Accepted);
    let Response::Committed { root_u, .. } = f.owner(OwnerOp::UploadFinish).await else { panic!("upload finish") };
    let mut tree = merkle::u_tree_of_roots(&roots, &sealed).unwrap();
    assert_eq!(root_u, tree.root(), "the node's rootU from the blocks equals the owner's from its roots");

    // A batch of writes, the same way.
    let new_block = vec![0xeeu8; BETA];
    let new_root = merkle::block_root(&new_block);
    let batch = OwnerOp::WriteBatchByRoots {
        writes: vec![dpor_proto::messages::WireWriteRoot { index: 2, root: new_root, sealed_u: B256::repeat_byte(7) }],
    };
    let before = f.status().await;
    assert_eq!(code(&f.owner_with_blocks(batch.clone(), vec![vec![0xefu8; BETA]]).await), ErrorCode::Unauthorized);
    assert_eq!(code(&f.owner_with_blocks(batch.clone(), vec![new_block.clone(), new_block.clone()]).await), ErrorCode::Malformed);
    assert_eq!(f.status().await, before, "refused batches change nothing");
    let r = f.owner_with_blocks(batch, vec![new_block.clone()]).await;
    let Response::WrittenBatch { count, root_u, .. } = r else { panic!("batch: {r:?}") };
    tree.set_leaves(&[(2, merkle::u_leaf(2, &new_root, &[7u8; 32]))]).unwrap();
    assert_eq!((count, root_u), (1, tree.root()));
    assert!(matches!(f.call(Request::Read { deal: 1, index: 2 }).await, Response::Block { block, .. } if block.as_ref() == new_block.as_slice()));
    // The same index twice in one batch: the later block and its root stay.
    let (first, second) = (vec![0x11u8; BETA], vec![0x22u8; BETA]);
    let (r1, r2) = (merkle::block_root(&first), merkle::block_root(&second));
    let twice = OwnerOp::WriteBatchByRoots {
        writes: vec![
            dpor_proto::messages::WireWriteRoot { index: 4, root: r1, sealed_u: B256::repeat_byte(8) },
            dpor_proto::messages::WireWriteRoot { index: 4, root: r2, sealed_u: B256::repeat_byte(9) },
        ],
    };
    // Blocks in the wrong order are each checked against their own position's root.
    assert_eq!(code(&f.owner_with_blocks(twice.clone(), vec![second.clone(), first.clone()]).await), ErrorCode::Unauthorized);
    let r = f.owner_with_blocks(twice, vec![first, second.clone()]).await;
    let Response::WrittenBatch { count, root_u, .. } = r else { panic!("batch: {r:?}") };
    tree.set_leaves(&[(4, merkle::u_leaf(4, &r2, &[9u8; 32]))]).unwrap();
    assert_eq!((count, root_u), (2, tree.root()));
    assert!(matches!(f.call(Request::Read { deal: 1, index: 4 }).await, Response::Block { block, .. } if block.as_ref() == second.as_slice()));
}

#[tokio::test]
async fn a_full_disk_refuses_the_upload_without_corrupting() {
    // A quota below what U + C need (U is 512 bytes, C 1408).
    let mut f = Fixture::new(Some(1000)).await;
    // The node may refuse at any step (it knows the sizes from UploadBegin on).
    let mut r = f.owner(OwnerOp::UploadBegin { num_blocks: N, block_bytes: BETA as u32 }).await;
    if r == Response::Accepted {
        let blocks: Vec<ByteBuf> = (0..N).map(|i| ByteBuf::from(vec![i as u8; BETA])).collect();
        r = f.owner(OwnerOp::UploadBlocks { start: 0, blocks, sealed_u: vec![B256::ZERO; N as usize] }).await;
    }
    if r == Response::Accepted {
        r = f.owner(OwnerOp::UploadFinish).await;
    }
    assert_eq!(code(&r), ErrorCode::DiskFull);
    // The node still answers, and holds nothing it could not finish: either no deal
    // at all (refused at UploadBegin) or a deal still uploading, never a Live one.
    match f.status().await {
        Response::Error(e) => assert_eq!(e.code, ErrorCode::UnknownDeal),
        Response::Status(s) => assert!(matches!(s.phase, dpor_proto::messages::WirePhase::Uploading { .. })),
        other => panic!("unexpected {other:?}"),
    }
}

trait StatusExt {
    fn clone_status(&self) -> dpor_proto::messages::DealStatus;
}

impl StatusExt for Response {
    fn clone_status(&self) -> dpor_proto::messages::DealStatus {
        match self {
            Response::Status(s) => s.clone(),
            other => panic!("expected a status, got {other:?}"),
        }
    }
}
