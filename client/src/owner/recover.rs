//! Crash recovery: settling the owner's saved intent ([`Pending`]) with the node.
//!
//! The owner's side of every state-changing request is a small state machine whose
//! states are saved in the owner state file before each transition
//! (`owner_state` module docs):
//!
//! ```text
//!  Idle ──save intent──▶ Sent(nonce) ──answer checked──▶ Committed ──σ̃ stored──▶ Idle
//!                          │   ▲                           (StoreSealed{next})
//!          no answer /     │   │ NotApplied: same request,
//!          crash           ▼   │ same nonce, sent again
//!                      Outcome(nonce)? ──Applied(answer)──▶ checked as if it had arrived
//! ```
//!
//! [`recover`] runs first in every owner command. For a [`Pending::Write`] or
//! [`Pending::UploadFinish`] it asks the node what became of the nonce
//! ([`Request::Outcome`](dpor_proto::messages::Request::Outcome)): an applied request's
//! answer goes through exactly the checks the reply would have (roots, run, a fresh
//! spot-check against the stashed checksums) and the state moves on; a request the node
//! never applied is sent again with the same nonce (the node applies a nonce at most
//! once, so a late copy of the first attempt cannot apply it twice); a definite refusal
//! clears the intent. A [`Pending::StoreSealed`] step continues from the saved position.
//! An answer that fails the checks marks the intent rejected: the owner stays on its
//! previous state (whose runs the node keeps, see docs/ARCHITECTURE.md) and every
//! command that needs the node's new state refuses until the dispute is settled.

use super::batch::finish_write_batch;
use super::flows::{finish_upload, finish_write, store_pending_sealed};
use crate::node_client::{definitely_refused, refusal, NodeClient, OwnerAuth, Written, WrittenBatch};
use crate::owner_state::{OwnerState, Pending};
use anyhow::{bail, Context};
use dpor_proto::messages::{ErrorCode, Response, WireOutcome};

/// Most rounds of asking and re-sending before giving up (a round repeats only when a
/// re-sent request meets its own first copy, [`ErrorCode::Replay`]).
const ROUNDS: usize = 4;

/// Settles `state.pending` with the node (see the module docs), saving the state after
/// each step. Returns what it did, for the user (empty when nothing was pending).
///
/// Errors: the node unreachable or refusing (the intent stays, to be settled by a later
/// command); an earlier answer rejected by the owner's checks ([`rejected`]); another
/// client having used the deal's nonces since ([`WireOutcome::Superseded`]).
pub async fn recover(node: &NodeClient, auth: &OwnerAuth<'_>, state: &mut OwnerState) -> anyhow::Result<Vec<String>> {
    let mut notes = Vec::new();
    for _ in 0..ROUNDS {
        match state.pending.clone() {
            None => {
                // A crash between an acknowledged σ̃ batch and the save leaves the node's
                // nonce ahead; a leftover sidecar (crash before the intent) is dropped.
                sync_nonce(node, state).await;
                state.drop_sigma();
                return Ok(notes);
            }
            Some(p) if rejected(&p).is_some() => {
                bail!("{}", rejected(&p).unwrap_or_default())
            }
            Some(Pending::StoreSealed { run, next, .. }) => {
                sync_nonce(node, state).await;
                store_pending_sealed(node, auth, state, &state.keys()?)
                    .await
                    .with_context(|| format!("storing the remaining σ̃ of run {run:?} from position {next}"))?;
                notes.push(format!("finished storing the checksums of run {} (from position {next})", dpor_core::RunId::from(run)));
            }
            Some(Pending::Write { nonce, index, block, sealed_u, .. }) => {
                let (answer, resent) = match node.outcome(state.deal, nonce).await.context("asking the node about the interrupted write")? {
                    WireOutcome::Applied { answer, .. } => match *answer {
                        Response::Written { step, run, run_root, root_u } => (Ok(Written { step, run, run_root, root_u }), false),
                        _ => bail!("the node reports another kind of answer for the write with nonce {nonce}"),
                    },
                    WireOutcome::NotApplied { .. } => (node.write(auth, nonce, index, block.to_vec(), sealed_u).await, true),
                    WireOutcome::Superseded { last_nonce } => bail!(superseded(nonce, last_nonce)),
                };
                match answer {
                    Ok(w) => {
                        let r = finish_write(node, auth, state, w).await?;
                        notes.push(format!(
                            "the interrupted write of block {index} (nonce {nonce}) {}, verified: rebuilt {} ({}), spot-checked {} positions",
                            if resent { "had not reached the node and was sent again" } else { "had been applied by the node" },
                            r.rebuilt,
                            r.run,
                            r.spot_checked
                        ));
                    }
                    Err(e) if definitely_refused(&e) => {
                        state.drop_intent()?;
                        notes.push(format!("the interrupted write of block {index} was not applied: the node refuses it ({e:#})"));
                    }
                    Err(e) if refusal(&e) == Some(ErrorCode::Replay) => continue,
                    Err(e) => return Err(e.context("completing the interrupted write")),
                }
            }
            Some(Pending::WriteBatch { nonce, writes, .. }) => {
                let count = writes.len();
                let (answer, resent) = match node.outcome(state.deal, nonce).await.context("asking the node about the interrupted batch")? {
                    WireOutcome::Applied { answer, .. } => match *answer {
                        Response::WrittenBatch { count, root_u, runs } => (Ok(WrittenBatch { count, root_u, runs }), false),
                        _ => bail!("the node reports another kind of answer for the batch with nonce {nonce}"),
                    },
                    WireOutcome::NotApplied { .. } => {
                        let wire = writes
                            .iter()
                            .map(|w| dpor_proto::messages::WireWrite {
                                index: w.index,
                                block: serde_bytes::ByteBuf::from(w.block.to_vec()),
                                sealed_u: w.sealed_u,
                            })
                            .collect();
                        (node.write_batch(auth, nonce, wire).await, true)
                    }
                    WireOutcome::Superseded { last_nonce } => bail!(superseded(nonce, last_nonce)),
                };
                match answer {
                    Ok(b) => {
                        let r = finish_write_batch(node, auth, state, b).await?;
                        notes.push(format!(
                            "the interrupted batch of {count} writes (nonce {nonce}) {}, verified: new runs {} (checked at the next checkpoint)",
                            if resent { "had not reached the node and was sent again" } else { "had been applied by the node" },
                            r.runs.join(", ")
                        ));
                    }
                    Err(e) if definitely_refused(&e) => {
                        state.drop_intent()?;
                        notes.push(format!("the interrupted batch of {count} writes was not applied: the node refuses it ({e:#})"));
                    }
                    Err(e) if refusal(&e) == Some(ErrorCode::Replay) => continue,
                    Err(e) => return Err(e.context("completing the interrupted batch")),
                }
            }
            Some(Pending::Resize { nonce, num_blocks, .. }) => {
                let (answer, resent) = match node.outcome(state.deal, nonce).await.context("asking the node about the interrupted resize")? {
                    WireOutcome::Applied { answer, .. } => match *answer {
                        Response::Written { step, run, run_root, root_u } => (Ok(Written { step, run, run_root, root_u }), false),
                        _ => bail!("the node reports another kind of answer for the resize with nonce {nonce}"),
                    },
                    WireOutcome::NotApplied { .. } => (node.resize(auth, nonce, num_blocks).await, true),
                    WireOutcome::Superseded { last_nonce } => bail!(superseded(nonce, last_nonce)),
                };
                match answer {
                    Ok(w) => {
                        let r = super::resize::finish_resize(node, auth, state, w).await?;
                        notes.push(format!(
                            "the interrupted resize to {num_blocks} blocks (nonce {nonce}) {}, verified: new C {}, spot-checked {} positions",
                            if resent { "had not reached the node and was sent again" } else { "had been applied by the node" },
                            r.run,
                            r.spot_checked
                        ));
                    }
                    Err(e) if definitely_refused(&e) => {
                        state.drop_intent()?;
                        notes.push(format!("the interrupted resize to {num_blocks} blocks was not applied: the node refuses it ({e:#})"));
                    }
                    Err(e) if refusal(&e) == Some(ErrorCode::Replay) => continue,
                    Err(e) => return Err(e.context("completing the interrupted resize")),
                }
            }
            Some(Pending::UploadFinish { nonce, .. }) => {
                let (answer, resent) = match node.outcome(state.deal, nonce).await.context("asking the node about the interrupted upload")? {
                    WireOutcome::Applied { answer, .. } => match *answer {
                        Response::Committed { root_u, c, root_c } => (Ok((root_u, c, root_c)), false),
                        _ => bail!("the node reports another kind of answer for the upload finish with nonce {nonce}"),
                    },
                    WireOutcome::NotApplied { .. } => (node.upload_finish(auth, nonce).await, true),
                    WireOutcome::Superseded { last_nonce } => bail!(superseded(nonce, last_nonce)),
                };
                match answer {
                    Ok((root_u, c, root_c)) => {
                        let checked = finish_upload(node, auth, state, root_u, c, root_c).await?;
                        notes.push(format!(
                            "the interrupted upload (nonce {nonce}) {}, verified: rootU {root_u}, C spot-checked at {checked} positions",
                            if resent { "was finished again" } else { "had been finished by the node" }
                        ));
                    }
                    Err(e) if definitely_refused(&e) => {
                        state.drop_intent()?;
                        notes.push(format!("the interrupted upload was not finished: the node refuses it ({e:#}); run `upload` again"));
                    }
                    Err(e) if refusal(&e) == Some(ErrorCode::Replay) => continue,
                    Err(e) => return Err(e.context("completing the interrupted upload")),
                }
            }
        }
    }
    bail!("the interrupted request could not be settled with the node after {ROUNDS} rounds")
}

/// Why the pending request was rejected, if it was.
pub fn rejected(p: &Pending) -> Option<String> {
    let (what, why) = match p {
        Pending::Write { rejected: Some(why), nonce, index, .. } => (format!("write of block {index} (nonce {nonce})"), why),
        Pending::UploadFinish { rejected: Some(why), nonce, .. } => (format!("upload finish (nonce {nonce})"), why),
        Pending::WriteBatch { rejected: Some(why), nonce, writes, .. } => (format!("batch of {} writes (nonce {nonce})", writes.len()), why),
        Pending::Resize { rejected: Some(why), nonce, num_blocks, .. } => (format!("resize to {num_blocks} blocks (nonce {nonce})"), why),
        _ => return None,
    };
    Some(format!(
        "the node's answer to the {what} failed the owner's checks ({why}); the owner stays on its previous \
         verified state: `extract` still works from it, and the provider can be disputed (`dpor audit`)"
    ))
}

fn superseded(nonce: u64, last: u64) -> String {
    format!(
        "the node has accepted owner nonce {last} after this owner's request {nonce}: another copy of this owner \
         state (or the owner key) is sending requests for the deal; use the newest state file"
    )
}

/// Moves the owner's nonce past the node's last accepted one (best effort: a node
/// that does not know the deal yet has none).
async fn sync_nonce(node: &NodeClient, state: &mut OwnerState) {
    if let Ok(s) = node.status(state.deal).await {
        state.nonce = state.nonce.max(s.last_nonce);
    }
}
