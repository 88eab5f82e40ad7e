//! Testing only: a provider that *commits* wrong coded blocks (issue 10, finding 1).
//!
//! With a [`CommitFault`] set ([`Store::set_commit_fault`]), every run the store
//! builds (C at upload and at each C-rebuild, each level of H) gets some of its coded
//! blocks changed *before* its Merkle tree is computed, so the run root the node
//! returns (and the owner signs) commits to the wrong blocks: they pass every Merkle
//! check and only the owner's checksums, or error-correcting decoding, reveal them. A
//! later HAdd reads them back, so the damage spreads into the levels built from them,
//! as it would with a real cheater. `dpor-node run --misbehave commit-wrong` and the
//! owner-flow tests use it.

use super::Store;
use dpor_core::field::Fp;
use dpor_core::state::RunId;
use std::sync::Arc;

/// Which positions of a run being built to commit wrong: `(run, size) → positions`
/// (positions ≥ size are ignored).
#[derive(Clone)]
pub struct CommitFault(pub Arc<dyn Fn(RunId, u64) -> Vec<u64> + Send + Sync>);

impl std::fmt::Debug for CommitFault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CommitFault(..)")
    }
}

impl CommitFault {
    /// One wrong block per run, at a position that depends on the run's name.
    pub fn one_per_run() -> Self {
        CommitFault(Arc::new(|run: RunId, size: u64| {
            let h = run.built_at.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ u64::from(run.tag.0).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            vec![(h >> 7) % size.max(1)]
        }))
    }

    /// One wrong block, at `position` of the run named `target`; every other run is
    /// committed honestly.
    pub fn at(target: RunId, position: u64) -> Self {
        CommitFault(Arc::new(move |run: RunId, _size: u64| if run == target { vec![position] } else { vec![] }))
    }
}

impl Store {
    /// Testing only: from now on, commit wrong coded blocks at the positions `fault`
    /// names in every run built (`None`: honest again). See the module docs.
    pub fn set_commit_fault(&self, fault: Option<CommitFault>) {
        *super::lock(&self.commit_fault) = fault;
    }

    /// Applies the commit fault, if any, to the run `run` about to be written (flat
    /// coded blocks of `width`): adds 1 to one element of each chosen block.
    pub(crate) fn apply_commit_fault(&self, run: RunId, blocks: &mut [Fp], width: usize) {
        let Some(fault) = super::lock(&self.commit_fault).clone() else { return };
        if width == 0 {
            return;
        }
        let size = (blocks.len() / width) as u64;
        for p in (fault.0)(run, size) {
            if p < size {
                let column = (p as usize).wrapping_mul(31).wrapping_add(7) % width;
                blocks[p as usize * width + column] += Fp::from(1u64);
                tracing::warn!(%run, position = p, "TESTING ONLY: committing a wrong coded block");
            }
        }
    }
}
