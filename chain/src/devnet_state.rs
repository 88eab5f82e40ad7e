//! An in-memory provider state for tests (feature `devnet`): a
//! [`dpor_core::state::ServerState`] with the run trees of its runs, the digest that
//! commits to them and the sample proofs an honest node would send. Stands in for the
//! node's disk in tests of this crate and of the node's chain agent.

use crate::convert::{block_proof, sample_proof, BlockProof, SampleProof};
use crate::sampling::BlockSample;
use crate::error::ChainError;
use alloy_primitives::{B256, U256};
use dpor_core::audit::RunTag;
use dpor_core::block::BlockFormat;
use dpor_core::digest::Digest;
use dpor_core::merkle::{run_tree, u_tree, MerkleTree};
use dpor_core::state::{RunId, ServerState};

/// One run: its name, coded blocks (8·s bytes each) and tree.
#[derive(Debug, Clone)]
pub struct FixtureRun {
    /// The run's name.
    pub id: RunId,
    /// Coded blocks in position order.
    pub blocks: Vec<Vec<u8>>,
    /// The run tree over them.
    pub tree: MerkleTree,
}

/// A provider state (U, C, H) after some writes, with everything needed to prove it.
#[derive(Debug, Clone)]
pub struct StateFixture {
    /// The state.
    pub state: ServerState,
    /// C, then the filled levels ascending (digest order).
    pub runs: Vec<FixtureRun>,
}

impl StateFixture {
    /// N = `num_blocks` data blocks of β = `block_bytes` bytes (deterministic content
    /// from `seed`), then `writes` writes (so H has `popcount(writes mod N)` levels).
    ///
    /// Errors: [`ChainError::Proof`] for a shape core rejects (N not a power of two, β 0).
    pub fn new(block_bytes: usize, num_blocks: usize, writes: u64, seed: u8) -> Result<Self, ChainError> {
        let e = |m: String| ChainError::Proof(m);
        let format = BlockFormat::new(block_bytes).map_err(|x| e(x.to_string()))?;
        let data = |i: u64, round: u64| -> Vec<u8> {
            (0..block_bytes).map(|j| (i as u8).wrapping_mul(31) ^ (j as u8) ^ seed ^ (round as u8).wrapping_mul(7)).collect()
        };
        let blocks = (0..num_blocks as u64).map(|i| data(i, 0)).collect();
        let mut state = ServerState::new(format, blocks).map_err(|x| e(x.to_string()))?;
        for w in 0..writes {
            let i = (w * 3) % num_blocks as u64;
            state.write(i, data(i, w + 1)).map_err(|x| e(x.to_string()))?;
        }
        let width = state.format().width();
        let mut runs = Vec::new();
        for run in state.runs() {
            let size = run.size(width);
            let mut coded = Vec::with_capacity(size as usize);
            for p in 0..size {
                let b = run.block(p, width).ok_or_else(|| e(format!("run {} has no block {p}", run.id())))?;
                coded.push(state.format().coded_to_bytes(b).map_err(|x| e(x.to_string()))?);
            }
            let tree = run_tree(&coded).map_err(|x| e(x.to_string()))?;
            runs.push(FixtureRun { id: run.id(), blocks: coded, tree });
        }
        Ok(Self { state, runs })
    }

    /// Bytes of a coded block (8·s).
    pub fn coded_block_bytes(&self) -> usize {
        self.state.format().coded_block_bytes()
    }

    /// The digest of this state for `deal_id` at `version` (rootU over all-zero sealed
    /// checksums: the chain never checks rootU).
    pub fn digest(&self, deal_id: u64, version: u64) -> Digest {
        let sealed = vec![[0u8; 32]; self.state.u().len()];
        let root_u = u_tree(self.state.u(), &sealed).map(|t| t.root()).unwrap_or_default();
        Digest {
            dealId: U256::from(deal_id),
            version,
            numBlocks: self.state.num_blocks(),
            writeCount: self.state.write_count(),
            rebuildCount: self.state.rebuild_count(),
            rootU: root_u,
            rootC: self.runs[0].tree.root(),
            levelRoots: self.runs[1..].iter().map(|r| r.tree.root()).collect(),
        }
    }

    /// The run named `id`.
    pub fn run(&self, id: RunId) -> Option<&FixtureRun> {
        self.runs.iter().find(|r| r.id == id)
    }

    /// The run with tag `tag`.
    pub fn run_by_tag(&self, tag: RunTag) -> Option<&FixtureRun> {
        self.runs.iter().find(|r| r.id.tag == tag)
    }

    /// Coded block `position` of run `id` and its run path.
    pub fn coded_block(&self, id: RunId, position: u64) -> Option<(Vec<u8>, Vec<B256>)> {
        let r = self.run(id)?;
        let block = r.blocks.get(position as usize)?.clone();
        Some((block, r.tree.path(position).ok()?))
    }

    /// The honest sample proof of (tag, position, chunk).
    pub fn proof(&self, tag: RunTag, position: u64, chunk: u64) -> Result<SampleProof, ChainError> {
        let r = self.run_by_tag(tag).ok_or_else(|| ChainError::Proof(format!("no run {tag}")))?;
        let (block, path) =
            self.coded_block(r.id, position).ok_or_else(|| ChainError::Proof(format!("no block {position} in {tag}")))?;
        sample_proof(&block, path, tag, position, chunk)
    }

    /// The honest epoch proof of the whole coded block at (tag, position).
    pub fn block_proof(&self, tag: RunTag, position: u64) -> Result<BlockProof, ChainError> {
        let r = self.run_by_tag(tag).ok_or_else(|| ChainError::Proof(format!("no run {tag}")))?;
        let (block, path) =
            self.coded_block(r.id, position).ok_or_else(|| ChainError::Proof(format!("no block {position} in {tag}")))?;
        block_proof(&block, path, tag, position)
    }

    /// The honest epoch proofs of `samples`, in order.
    pub fn block_proofs(&self, samples: &[BlockSample]) -> Result<Vec<BlockProof>, ChainError> {
        samples.iter().map(|x| self.block_proof(x.tag, x.position)).collect()
    }
}
