//! A typed client of one storage node: each protocol request as an async method that
//! returns the expected answer or a clear error (`dpor_proto::messages`).
//!
//! Owner operations are signed here with the owner's key over
//! `owner_request_hash(chain id, market, deal, nonce, op)`.

use alloy::signers::local::PrivateKeySigner;
use alloy::signers::SignerSync;
use alloy_primitives::{Address, B256};
use anyhow::{anyhow, bail, Context};
use dpor_proto::messages::{
    owner_request_hash, DealStatus, ErrorCode, OwnerOp, Request, Response, Signed, WireDigest, WireError, WireOutcome,
    WireRun, WireSample, WireStep, WireWrite, WireWriteRoot,
};
use dpor_proto::net::{Client, Multiaddr, NetConfig};
use serde_bytes::ByteBuf;
use std::time::Duration;

/// A connection to one node.
#[derive(Clone)]
pub struct NodeClient {
    client: Client<Request, Response>,
    /// Bytes sent in requests (CBOR bodies), for bandwidth figures.
    sent: std::sync::Arc<std::sync::atomic::AtomicU64>,
    /// Bytes received in responses (CBOR bodies).
    received: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

/// What a write returned.
#[derive(Debug, Clone, Copy)]
pub struct Written {
    /// What was rebuilt.
    pub step: WireStep,
    /// The new run.
    pub run: WireRun,
    /// Its root.
    pub run_root: B256,
    /// The new rootU.
    pub root_u: B256,
}

impl Written {
    /// The answer `got` to a write or a resize (`what`, for the error): a
    /// [`Response::Written`], or an error naming what came instead.
    pub fn from_response(what: &str, got: Response) -> anyhow::Result<Written> {
        match got {
            Response::Written { step, run, run_root, root_u } => Ok(Written { step, run, run_root, root_u }),
            other => unexpected(what, &other),
        }
    }
}

/// What a batch of writes returned.
#[derive(Debug, Clone)]
pub struct WrittenBatch {
    /// Writes applied.
    pub count: u64,
    /// The new rootU.
    pub root_u: B256,
    /// The runs the batch built that the new state holds (C first, then levels ascending).
    pub runs: Vec<(WireRun, B256)>,
}

fn cbor_len<T: serde::Serialize>(v: &T) -> u64 {
    let mut w = CountingWriter(0);
    let _ = ciborium::into_writer(v, &mut w);
    w.0
}

struct CountingWriter(u64);

impl std::io::Write for CountingWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 += buf.len() as u64;
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl NodeClient {
    /// Dials the node at `addr` (a multiaddr, ideally with `/p2p/<peer id>`).
    pub async fn connect(addr: &str, timeout: Duration) -> anyhow::Result<Self> {
        let addr: Multiaddr = addr.parse().with_context(|| format!("bad node address {addr:?}"))?;
        let config = NetConfig { request_timeout: timeout, ..NetConfig::default() };
        let client = Client::connect(addr.clone(), config).await.with_context(|| format!("cannot connect to the node at {addr}"))?;
        Ok(Self { client, sent: Default::default(), received: Default::default() })
    }

    /// (bytes sent, bytes received) in message bodies so far (each frame adds 4 bytes).
    pub fn traffic(&self) -> (u64, u64) {
        use std::sync::atomic::Ordering::Relaxed;
        (self.sent.load(Relaxed), self.received.load(Relaxed))
    }

    /// Sends a request; a [`Response::Error`] becomes an error naming the request.
    pub async fn call(&self, request: Request) -> anyhow::Result<Response> {
        use std::sync::atomic::Ordering::Relaxed;
        let kind = request.kind();
        self.sent.fetch_add(cbor_len(&request) + 4, Relaxed);
        let response = self.client.request(request).await.with_context(|| format!("{kind} request failed"))?;
        self.received.fetch_add(cbor_len(&response) + 4, Relaxed);
        match response {
            Response::Error(e) => Err(anyhow!(e).context(format!("the node refused the {kind} request"))),
            r => Ok(r),
        }
    }

    /// The node's view of `deal`.
    pub async fn status(&self, deal: u64) -> anyhow::Result<DealStatus> {
        match self.call(Request::Status { deal }).await? {
            Response::Status(s) => Ok(s),
            other => unexpected("status", &other),
        }
    }

    /// The deal's status once every run of its current state is built (the node
    /// finishes deferred rebuilds first): roots to check and sign.
    pub async fn built(&self, deal: u64) -> anyhow::Result<DealStatus> {
        match self.call(Request::Built { deal }).await? {
            Response::Status(s) => Ok(s),
            other => unexpected("built", &other),
        }
    }

    /// What became of the owner request with `nonce` (crash recovery).
    pub async fn outcome(&self, deal: u64, nonce: u64) -> anyhow::Result<WireOutcome> {
        match self.call(Request::Outcome { deal, nonce }).await? {
            Response::Outcome(o) => Ok(o),
            other => unexpected("outcome", &other),
        }
    }

    /// The response the node committed for `deal`'s deal epoch `epoch`
    /// (docs/COMMITMENTS.md §6); an error if it did not commit it or no longer keeps it.
    pub async fn epoch_response(&self, deal: u64, epoch: u64) -> anyhow::Result<dpor_proto::messages::WireEpochResponse> {
        match self.call(Request::EpochResponse { deal, epoch }).await? {
            Response::EpochResponse(r) => Ok(r),
            other => unexpected("epoch-response", &other),
        }
    }

    /// Read(i): (block, σ̃_U, U path).
    pub async fn read(&self, deal: u64, index: u64) -> anyhow::Result<(Vec<u8>, B256, Vec<B256>)> {
        match self.call(Request::Read { deal, index }).await? {
            Response::Block { index: i, block, sealed_u, path } if i == index => Ok((block.into_vec(), sealed_u, path)),
            other => unexpected("read", &other),
        }
    }

    /// U's leaf parts and path for `index`: (block root, σ̃_U, path).
    pub async fn u_path(&self, deal: u64, index: u64) -> anyhow::Result<(B256, B256, Vec<B256>)> {
        match self.call(Request::UPath { deal, index }).await? {
            Response::UPath { index: i, block_root, sealed_u, path } if i == index => Ok((block_root, sealed_u, path)),
            other => unexpected("u-path", &other),
        }
    }

    /// [`NodeClient::u_path`] for several indices (one request per
    /// [`batch_len`](dpor_proto::messages::batch_len) of them): (block root, σ̃_U, path)
    /// per index, in order. Unverified: the caller checks them against its rootU.
    pub async fn u_paths(&self, deal: u64, indices: &[u64], depth: u32) -> anyhow::Result<Vec<(B256, B256, Vec<B256>)>> {
        let per = dpor_proto::messages::batch_len(32 * (depth as u64 + 3)) as usize;
        let mut out = Vec::with_capacity(indices.len());
        for chunk in indices.chunks(per.max(1)) {
            match self.call(Request::UPaths { deal, indices: chunk.to_vec() }).await? {
                Response::UPaths { items } if items.len() == chunk.len() && items.iter().zip(chunk).all(|(it, i)| it.0 == *i) => {
                    out.extend(items.into_iter().map(|(_, root, sealed, path)| (root, sealed, path)));
                }
                other => return unexpected("u-paths", &other),
            }
        }
        Ok(out)
    }

    /// `count` blocks of U from `start`.
    pub async fn download(&self, deal: u64, start: u64, count: u64) -> anyhow::Result<Vec<Vec<u8>>> {
        match self.call(Request::Download { deal, start, count }).await? {
            Response::Blocks { start: s, blocks } if s == start && blocks.len() as u64 == count => {
                Ok(blocks.into_iter().map(ByteBuf::into_vec).collect())
            }
            other => unexpected("download", &other),
        }
    }

    /// (block root, σ̃_U) for `count` indices from `start`.
    pub async fn u_leaves(&self, deal: u64, start: u64, count: u64) -> anyhow::Result<Vec<(B256, B256)>> {
        match self.call(Request::ULeaves { deal, start, count }).await? {
            Response::ULeaves { start: s, leaves } if s == start && leaves.len() as u64 == count => Ok(leaves),
            other => unexpected("u-leaves", &other),
        }
    }

    /// Coded blocks at `positions` of `run`, with run paths.
    pub async fn samples(&self, deal: u64, run: WireRun, positions: Vec<u64>) -> anyhow::Result<Vec<WireSample>> {
        let n = positions.len();
        match self.call(Request::Samples { deal, run, positions }).await? {
            Response::Samples { run: r, samples } if r == run && samples.len() == n => Ok(samples),
            other => unexpected("samples", &other),
        }
    }

    /// `count` raw coded blocks of `run` from `start`.
    pub async fn coded(&self, deal: u64, run: WireRun, start: u64, count: u64) -> anyhow::Result<Vec<Vec<u8>>> {
        match self.call(Request::Coded { deal, run, start, count }).await? {
            Response::Coded { run: r, start: s, blocks } if r == run && s == start && blocks.len() as u64 == count => {
                Ok(blocks.into_iter().map(ByteBuf::into_vec).collect())
            }
            other => unexpected("coded", &other),
        }
    }

    /// `count` leaves of `run`'s tree from `start`.
    pub async fn run_leaves(&self, deal: u64, run: WireRun, start: u64, count: u64) -> anyhow::Result<Vec<B256>> {
        match self.call(Request::RunLeaves { deal, run, start, count }).await? {
            Response::RunLeaves { run: r, start: s, leaves } if r == run && s == start && leaves.len() as u64 == count => Ok(leaves),
            other => unexpected("run-leaves", &other),
        }
    }

    /// The owner's σ̃ for `count` positions of `run` from `start`.
    pub async fn sealed(&self, deal: u64, run: WireRun, start: u64, count: u64) -> anyhow::Result<Vec<Option<B256>>> {
        match self.call(Request::Sealed { deal, run, start, count }).await? {
            Response::Sealed { run: r, start: s, sealed } if r == run && s == start && sealed.len() as u64 == count => Ok(sealed),
            other => unexpected("sealed", &other),
        }
    }
}

/// An owner's signing context for one deal.
pub struct OwnerAuth<'a> {
    /// The owner key.
    pub key: &'a PrivateKeySigner,
    /// Chain id.
    pub chain_id: u64,
    /// Market contract.
    pub market: Address,
    /// The deal.
    pub deal: u64,
}

impl OwnerAuth<'_> {
    /// The signed request for `op` with `nonce`.
    pub fn sign(&self, nonce: u64, op: &OwnerOp) -> anyhow::Result<Request> {
        self.sign_with_blocks(nonce, op, Vec::new())
    }

    /// The signed request for an op that names its blocks by block root
    /// ([`OwnerOp::UploadByRoots`], [`OwnerOp::WriteBatchByRoots`]), the blocks
    /// outside the signature in [`Signed::blocks`] (docs/PROTOCOL.md).
    pub fn sign_with_blocks(&self, nonce: u64, op: &OwnerOp, blocks: Vec<ByteBuf>) -> anyhow::Result<Request> {
        let bytes = op.to_bytes();
        let hash = owner_request_hash(self.chain_id, self.market, self.deal, nonce, &bytes);
        let sig = self.key.sign_hash_sync(&hash).context("signing the request")?;
        Ok(Request::Owner(Signed {
            deal: self.deal,
            nonce,
            op: ByteBuf::from(bytes),
            signature: ByteBuf::from(sig.as_bytes().to_vec()),
            blocks,
        }))
    }
}

impl NodeClient {
    /// Sends an owner op expecting [`Response::Accepted`].
    pub async fn owner_accepted(&self, auth: &OwnerAuth<'_>, nonce: u64, op: OwnerOp) -> anyhow::Result<()> {
        let kind = op.kind();
        match self.call(auth.sign(nonce, &op)?).await.with_context(|| format!("owner {kind}"))? {
            Response::Accepted => Ok(()),
            other => unexpected(kind, &other),
        }
    }

    /// UploadFinish: (rootU, C's name, rootC).
    pub async fn upload_finish(&self, auth: &OwnerAuth<'_>, nonce: u64) -> anyhow::Result<(B256, WireRun, B256)> {
        match self.call(auth.sign(nonce, &OwnerOp::UploadFinish)?).await.context("owner upload-finish")? {
            Response::Committed { root_u, c, root_c } => Ok((root_u, c, root_c)),
            other => unexpected("upload-finish", &other),
        }
    }

    /// Write(i, B).
    pub async fn write(&self, auth: &OwnerAuth<'_>, nonce: u64, index: u64, block: Vec<u8>, sealed_u: B256) -> anyhow::Result<Written> {
        let op = OwnerOp::Write { index, block: ByteBuf::from(block), sealed_u };
        Written::from_response("write", self.call(auth.sign(nonce, &op)?).await.context("owner write")?)
    }

    /// A batch of writes ([`OwnerOp::WriteBatch`]): (count, new rootU, runs built).
    pub async fn write_batch(&self, auth: &OwnerAuth<'_>, nonce: u64, writes: Vec<WireWrite>) -> anyhow::Result<WrittenBatch> {
        match self.call(auth.sign(nonce, &OwnerOp::WriteBatch { writes })?).await.context("owner write-batch")? {
            Response::WrittenBatch { count, root_u, runs } => Ok(WrittenBatch { count, root_u, runs }),
            other => unexpected("write-batch", &other),
        }
    }

    /// A batch of writes signed over block roots ([`OwnerOp::WriteBatchByRoots`]):
    /// `writes` are (index, block, block root, σ̃_U), the roots the caller's own
    /// (`merkle::block_roots` of the blocks; a wrong one is refused `Unauthorized`).
    /// Answer: as [`NodeClient::write_batch`].
    pub async fn write_batch_by_roots(
        &self,
        auth: &OwnerAuth<'_>,
        nonce: u64,
        writes: Vec<(u64, Vec<u8>, B256, B256)>,
    ) -> anyhow::Result<WrittenBatch> {
        let (ops, blocks): (Vec<WireWriteRoot>, Vec<ByteBuf>) = writes
            .into_iter()
            .map(|(index, block, root, sealed_u)| (WireWriteRoot { index, root, sealed_u }, ByteBuf::from(block)))
            .unzip();
        let request = auth.sign_with_blocks(nonce, &OwnerOp::WriteBatchByRoots { writes: ops }, blocks)?;
        match self.call(request).await.context("owner write-batch-by-roots")? {
            Response::WrittenBatch { count, root_u, runs } => Ok(WrittenBatch { count, root_u, runs }),
            other => unexpected("write-batch-by-roots", &other),
        }
    }

    /// Upload blocks `start..` signed over their block roots
    /// ([`OwnerOp::UploadByRoots`]): `roots` and `sealed_u` one per block, the roots
    /// the caller's own (`merkle::block_roots`). Answer: `Accepted`.
    pub async fn upload_by_roots(
        &self,
        auth: &OwnerAuth<'_>,
        nonce: u64,
        start: u64,
        blocks: Vec<ByteBuf>,
        roots: Vec<B256>,
        sealed_u: Vec<B256>,
    ) -> anyhow::Result<()> {
        let request = auth.sign_with_blocks(nonce, &OwnerOp::UploadByRoots { start, roots, sealed_u }, blocks)?;
        match self.call(request).await.context("owner upload-by-roots")? {
            Response::Accepted => Ok(()),
            other => unexpected("upload-by-roots", &other),
        }
    }

    /// Resize ([`OwnerOp::Resize`], App. A.3): the node's answer as for a write that
    /// rebuilt C (the new C and the new rootU).
    pub async fn resize(&self, auth: &OwnerAuth<'_>, nonce: u64, num_blocks: u64) -> anyhow::Result<Written> {
        Written::from_response("resize", self.call(auth.sign(nonce, &OwnerOp::Resize { num_blocks })?).await.context("owner resize")?)
    }

    /// Co-sign a resize ([`OwnerOp::CosignResize`]): the provider's signature over the
    /// EIP-712 `Resize` and its address.
    pub async fn cosign_resize(
        &self,
        auth: &OwnerAuth<'_>,
        nonce: u64,
        digest: WireDigest,
        price_per_epoch: u128,
        collateral: u128,
    ) -> anyhow::Result<(Vec<u8>, Address)> {
        let op = OwnerOp::CosignResize { digest, price_per_epoch, collateral };
        match self.call(auth.sign(nonce, &op)?).await.context("owner cosign-resize")? {
            Response::Cosigned { signature, provider } => Ok((signature.into_vec(), provider)),
            other => unexpected("cosign-resize", &other),
        }
    }

    /// Cosign: the provider's signature and address. The request carries the owner's
    /// EIP-712 signature of the digest (made here with `auth`'s key, for `auth`'s chain
    /// and market), which the node keeps so that it can post the digest itself
    /// (docs/PROTOCOL.md, issue 22).
    pub async fn cosign(&self, auth: &OwnerAuth<'_>, nonce: u64, digest: WireDigest) -> anyhow::Result<(Vec<u8>, Address)> {
        let hash = dpor_core::digest::Digest::from(&digest).digest_hash(auth.chain_id, auth.market);
        let owner_signature = ByteBuf::from(auth.key.sign_hash_sync(&hash).context("signing the digest")?.as_bytes().to_vec());
        match self.call(auth.sign(nonce, &OwnerOp::Cosign { digest, owner_signature })?).await.context("owner cosign")? {
            Response::Cosigned { signature, provider } => Ok((signature.into_vec(), provider)),
            other => unexpected("cosign", &other),
        }
    }
}

/// The node's refusal code, if `e` is a refusal ([`Response::Error`]) rather than a
/// transport failure or an unexpected answer.
pub fn refusal(e: &anyhow::Error) -> Option<ErrorCode> {
    e.chain().find_map(|c| c.downcast_ref::<WireError>()).map(|w| w.code)
}

/// Whether `e` proves the node did not apply the request: a refusal other than
/// [`ErrorCode::Replay`] (a replay means the nonce was used, perhaps by this very
/// request arriving twice) and [`ErrorCode::Internal`] (which may come after a commit).
pub fn definitely_refused(e: &anyhow::Error) -> bool {
    refusal(e).is_some_and(|c| !matches!(c, ErrorCode::Replay | ErrorCode::Internal))
}

/// The error for an answer of the wrong kind (named, never printed whole).
pub fn unexpected<T>(what: &str, got: &Response) -> anyhow::Result<T> {
    let name = match got {
        Response::Status(_) => "Status",
        Response::Block { .. } => "Block",
        Response::UPath { .. } => "UPath",
        Response::Blocks { .. } => "Blocks",
        Response::ULeaves { .. } => "ULeaves",
        Response::Samples { .. } => "Samples",
        Response::Coded { .. } => "Coded",
        Response::RunLeaves { .. } => "RunLeaves",
        Response::Sealed { .. } => "Sealed",
        Response::Accepted => "Accepted",
        Response::Committed { .. } => "Committed",
        Response::Written { .. } => "Written",
        Response::WrittenBatch { .. } => "WrittenBatch",
        Response::UPaths { .. } => "UPaths",
        Response::Cosigned { .. } => "Cosigned",
        Response::Outcome(_) => "Outcome",
        Response::SecretAudit { .. } => "SecretAudit",
        Response::EpochResponse(_) => "EpochResponse",
        Response::Error(_) => "Error",
    };
    bail!("the node answered the {what} request with an unexpected or mismatched {name} response")
}
