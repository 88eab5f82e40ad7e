//! Crash recovery: settling the owner's saved intent ([`Pending`]) with the node.
//!
//! Every state-changing request of the owner goes through one state machine
//! ([`machine`], whose module docs draw it); its phases are saved in the owner state
//! file before each transition (`owner_state` module docs). [`recover`] is the
//! machine's entry after a crash or a lost answer: it runs first in every owner
//! command, and dispatches the saved [`Pending`] to its kind's request
//! ([`WriteRequest`], [`BatchRequest`], [`ResizeRequest`], [`UploadFinishRequest`]),
//! which [`machine::resume`] settles: it asks the node what became of the nonce
//! ([`Request::Outcome`](dpor_proto::messages::Request::Outcome)); an applied request's
//! answer goes through exactly the checks the reply would have (roots, run, a fresh
//! spot-check against the stashed checksums) and the state moves on; a request the node
//! never applied is sent again with the same nonce (the node applies a nonce at most
//! once, so a late copy of the first attempt cannot apply it twice); a definite refusal
//! clears the intent. A [`Pending::StoreSealed`] step continues from the saved position.
//! An answer that fails the checks marks the intent rejected: the owner stays on its
//! previous state (whose runs the node keeps, see docs/ARCHITECTURE.md) and every
//! command that needs the node's new state refuses until the dispute is settled.
//!
//! The flows never call this module (they refuse to start while a request is pending,
//! [`machine::ready`]); it calls them through [`machine::Request`], so the modules
//! import each other without a cycle: `recover` → flows → `machine`.

use super::batch::BatchRequest;
use super::flows::{store_pending_sealed, UploadFinishRequest, WriteRequest};
use super::machine::{self, Request, Resumed};
use super::resize::ResizeRequest;
use crate::node_client::{NodeClient, OwnerAuth};
use crate::owner_state::{OwnerState, Pending};
use anyhow::{bail, Context};

pub use super::machine::rejected;

/// Most rounds of asking and re-sending before giving up (a round repeats only when a
/// re-sent request meets its own first copy, `ErrorCode::Replay`).
const ROUNDS: usize = 4;

/// Settles `state.pending` with the node (see the module docs), saving the state after
/// each step. Returns what it did, for the user (empty when nothing was pending).
///
/// Errors: the node unreachable or refusing (the intent stays, to be settled by a later
/// command); an earlier answer rejected by the owner's checks ([`rejected`]); another
/// client having used the deal's nonces since (`WireOutcome::Superseded`).
pub async fn recover(node: &NodeClient, auth: &OwnerAuth<'_>, state: &mut OwnerState) -> anyhow::Result<Vec<String>> {
    let mut notes = Vec::new();
    for _ in 0..ROUNDS {
        let step = match state.pending.clone() {
            None => {
                machine::idle(node, state).await;
                return Ok(notes);
            }
            Some(p) if rejected(&p).is_some() => {
                bail!("{}", rejected(&p).unwrap_or_default())
            }
            Some(Pending::StoreSealed { run, next, .. }) => {
                // Verified: continue storing σ̃ from the saved position.
                machine::idle_nonce(node, state).await;
                store_pending_sealed(node, auth, state, &state.keys()?)
                    .await
                    .with_context(|| format!("storing the remaining σ̃ of run {run:?} from position {next}"))?;
                Resumed::Done(format!("finished storing the checksums of run {} (from position {next})", dpor_core::RunId::from(run)))
            }
            Some(p @ Pending::Write { .. }) => resume(node, auth, state, WriteRequest::of(&p)).await?,
            Some(p @ Pending::WriteBatch { .. }) => resume(node, auth, state, BatchRequest::of(&p)).await?,
            Some(p @ Pending::Resize { .. }) => resume(node, auth, state, ResizeRequest::of(&p)).await?,
            Some(p @ Pending::UploadFinish { .. }) => resume(node, auth, state, UploadFinishRequest::of(&p)).await?,
        };
        if let Resumed::Done(note) = step {
            notes.push(note);
        }
    }
    bail!("the interrupted request could not be settled with the node after {ROUNDS} rounds")
}

/// [`machine::resume`] of a saved intent of kind `R` (`None`: the intent is not of that
/// kind, which the caller's match rules out).
async fn resume<R: Request>(
    node: &NodeClient,
    auth: &OwnerAuth<'_>,
    state: &mut OwnerState,
    request: Option<R>,
) -> anyhow::Result<Resumed> {
    let Some(request) = request else { bail!("the saved intent does not match its kind") };
    machine::resume(node, auth, state, &request).await
}
