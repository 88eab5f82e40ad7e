//! The one state machine every state-changing request of the owner goes through: a
//! single write, a batch of writes, a resize, the upload's finish (and so dispersal,
//! which runs these per shard).
//!
//! ```text
//!                 intend(Pending)               Request::send          Request::settle
//!  Phase::Idle ───────────────▶ Phase::Intent ───────────────▶ answer ───────────────▶ Phase::Idle
//!      ▲          (saved, with        │  ▲                        │      (checked,      or Phase::Verified
//!      │           σ in the sidecar)  │  │ NotApplied: resent,    │       committed)   (StoreSealed{next}:
//!      │                              │  │ same nonce             │                     σ̃ stored from next)
//!      │   refused (nothing applied)  │  │                        │ failed the checks
//!      └──────────────────────────────┤  └── resume: Outcome(nonce)? ──Applied(answer)──▶ settle
//!                                     │                           ▼
//!          crash / no answer ─────────┘                    Phase::Rejected (the owner stays on its
//!          (the intent stays)                              previous state; the node is disputed)
//! ```
//!
//! - [`Phase::Intent`] is durable: the owner saves the request ([`Pending`]) and the
//!   checksums its answer must match before sending it ([`intend`]). There is no
//!   separate saved "requested" phase: whether the request reached the node is asked of
//!   the node by nonce ([`resume`], `Request::Outcome`), which applies a nonce at most once.
//! - An answer, fresh ([`settle`]) or reported by the node after a crash ([`resume`]), is
//!   checked by one and the same [`Request::settle`] of its kind: roots, runs, a spot-check
//!   against the stashed checksums. A pass commits the new state ([`Phase::Idle`], or
//!   [`Phase::Verified`] while the new run's σ̃ still go to the node); a failure marks the
//!   intent rejected ([`Phase::Rejected`]).
//! - A definite refusal (nothing applied) drops the intent; any other failure keeps it,
//!   for [`resume`] by the next command (`owner::recover`, which dispatches a saved
//!   [`Pending`] to its kind's [`Request`]).
//!
//! The kinds implement [`Request`] beside their flows (`flows::WriteRequest`,
//! `flows::UploadFinishRequest`, `batch::BatchRequest`, `resize::ResizeRequest`); this
//! module knows none of them, so the flows and `recover` import it and never each other.

use crate::node_client::{definitely_refused, refusal, NodeClient, OwnerAuth};
use crate::owner_state::{OwnerState, Pending};
use anyhow::{bail, Context};
use dpor_proto::messages::{ErrorCode, Response, WireOutcome};

/// Where the owner's pending request stands, as saved in its state file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Nothing pending: a new request may start.
    Idle,
    /// A request is saved ([`Pending::Write`], [`Pending::WriteBatch`],
    /// [`Pending::Resize`], [`Pending::UploadFinish`]); it may or may not have reached
    /// the node.
    Intent,
    /// The node's answer passed the checks and the new state is committed; the new
    /// runs' σ̃ are still being stored on the node ([`Pending::StoreSealed`]).
    Verified,
    /// The node's answer failed the checks: the owner stays on its previous state and
    /// refuses further requests for the deal ([`rejected`]).
    Rejected,
}

/// The phase of `state`'s pending request.
pub fn phase(state: &OwnerState) -> Phase {
    match &state.pending {
        None => Phase::Idle,
        Some(p) if rejected(p).is_some() => Phase::Rejected,
        Some(Pending::StoreSealed { .. }) => Phase::Verified,
        Some(_) => Phase::Intent,
    }
}

/// One kind of state-changing request, as the machine drives it. A value holds what
/// the saved intent holds (nonce, payload), so it can be sent again after a crash.
pub(crate) trait Request {
    /// The node's answer, as the typed client decodes it.
    type Answer;
    /// What settling reports.
    type Report;
    /// The request for the user ("write of block 3 (nonce 9)").
    fn what(&self) -> String;
    /// Its nonce.
    fn nonce(&self) -> u64;
    /// Sends it (first time, or again with the same nonce), its payload read from the
    /// saved intent in `state`.
    async fn send(&self, node: &NodeClient, auth: &OwnerAuth<'_>, state: &OwnerState) -> anyhow::Result<Self::Answer>;
    /// Its answer from the node's record of it (`Outcome::Applied`); errors on another kind.
    fn applied(&self, answer: Response) -> anyhow::Result<Self::Answer>;
    /// Checks `answer` against the saved intent and commits the new state (or marks the
    /// intent rejected and errors).
    async fn settle(
        &self,
        node: &NodeClient,
        auth: &OwnerAuth<'_>,
        state: &mut OwnerState,
        answer: Self::Answer,
    ) -> anyhow::Result<Self::Report>;
    /// The note for the user once [`resume`] settled it (`resent`: the node had not got it).
    fn settled_note(&self, report: &Self::Report, resent: bool) -> String;
    /// The note when the node refused it on [`resume`] (the intent is dropped).
    fn refused_note(&self, e: &anyhow::Error) -> String {
        format!("the interrupted {} was not applied: the node refuses it ({e:#})", self.what())
    }
}

/// Refuses to start a request while another is pending (settle it first with
/// `owner::recover`); otherwise moves the owner's nonce past the node's last accepted
/// one (a crash between an acknowledged σ̃ batch and the save leaves the node's ahead)
/// and drops a leftover checksum sidecar (a crash before the intent was saved).
pub async fn ready(node: &NodeClient, state: &mut OwnerState) -> anyhow::Result<()> {
    match state.pending.as_ref() {
        None => {
            idle(node, state).await;
            Ok(())
        }
        Some(p) => match rejected(p) {
            Some(why) => bail!("{why}"),
            None => bail!("an earlier request of this owner is unfinished: settle it with the node first (`owner::recover`)"),
        },
    }
}

/// The idle step of [`ready`] (best effort: a node that does not know the deal yet has
/// no nonce).
pub(crate) async fn idle(node: &NodeClient, state: &mut OwnerState) {
    idle_nonce(node, state).await;
    state.drop_sigma();
}

/// Moves the owner's nonce past the node's last accepted one (best effort).
pub(crate) async fn idle_nonce(node: &NodeClient, state: &mut OwnerState) {
    if let Ok(s) = node.status(state.deal).await {
        state.nonce = state.nonce.max(s.last_nonce);
    }
}

/// [`Phase::Idle`] → [`Phase::Intent`]: saves `intent` durably. The caller has stashed
/// the checksums the answer must match ([`OwnerState::stash_sigma`]) and sends the
/// request only after this returns.
pub fn intend(state: &mut OwnerState, intent: Pending) -> anyhow::Result<()> {
    state.pending = Some(intent);
    state.persist()
}

/// [`Phase::Intent`] → settled: takes the answer to the request just sent (`sent`) and
/// settles it ([`Request::settle`]). A definite refusal drops the intent and returns
/// the refusal; any other failure to get an answer keeps the intent, for [`resume`],
/// and says so ([`LOST_ANSWER`]).
pub(crate) async fn settle<R: Request>(
    node: &NodeClient,
    auth: &OwnerAuth<'_>,
    state: &mut OwnerState,
    request: &R,
    sent: anyhow::Result<R::Answer>,
) -> anyhow::Result<R::Report> {
    let answer = answer_to_intent(state, sent)?;
    request.settle(node, auth, state, answer).await
}

/// [`settle`] of `request` sent now.
pub(crate) async fn run<R: Request>(
    node: &NodeClient,
    auth: &OwnerAuth<'_>,
    state: &mut OwnerState,
    request: &R,
) -> anyhow::Result<R::Report> {
    let sent = request.send(node, auth, state).await;
    settle(node, auth, state, request, sent).await
}

/// The answer to a request whose intent the owner saved before sending it: a definite
/// refusal (nothing was applied) drops the intent ([`OwnerState::drop_intent`]) and
/// returns the refusal; any other failure keeps the intent, for the next command to
/// settle with the node ([`resume`]), and says so ([`LOST_ANSWER`]).
pub(crate) fn answer_to_intent<T>(state: &mut OwnerState, answer: anyhow::Result<T>) -> anyhow::Result<T> {
    match answer {
        Ok(a) => Ok(a),
        Err(e) if definitely_refused(&e) => {
            state.drop_intent()?;
            Err(e)
        }
        Err(e) => Err(e.context(LOST_ANSWER)),
    }
}

/// What an owner command says when a request got no answer (its intent is saved).
pub const LOST_ANSWER: &str = "the node did not answer; the request is saved and the next command \
     (e.g. `dpor status`) learns its outcome from the node and completes it";

/// What [`resume`] did with a saved intent.
pub(crate) enum Resumed {
    /// Settled, or refused by the node (the intent dropped): the note for the user.
    Done(String),
    /// The re-sent request met its own first copy ([`ErrorCode::Replay`]): ask again.
    Again,
}

/// [`Phase::Intent`] after a crash or a lost answer: asks the node what became of the
/// request's nonce. An applied request's answer is settled exactly as a fresh one
/// ([`Request::settle`]); a request the node never applied is sent again with the same
/// nonce and settled; a definite refusal drops the intent.
///
/// Errors: the node unreachable (the intent stays); an answer failing the checks (the
/// intent is marked rejected); another client having used the deal's nonces since
/// (`Outcome::Superseded`).
pub(crate) async fn resume<R: Request>(
    node: &NodeClient,
    auth: &OwnerAuth<'_>,
    state: &mut OwnerState,
    request: &R,
) -> anyhow::Result<Resumed> {
    let nonce = request.nonce();
    let outcome =
        node.outcome(state.deal, nonce).await.with_context(|| format!("asking the node about the interrupted {}", request.what()))?;
    let (answer, resent) = match outcome {
        WireOutcome::Applied { answer, .. } => (request.applied(*answer), false),
        WireOutcome::NotApplied { .. } => (request.send(node, auth, state).await, true),
        WireOutcome::Superseded { last_nonce } => bail!(superseded(nonce, last_nonce)),
    };
    match answer {
        Ok(a) => {
            let report = request.settle(node, auth, state, a).await?;
            Ok(Resumed::Done(request.settled_note(&report, resent)))
        }
        Err(e) if definitely_refused(&e) => {
            // A copy sent again can be refused because its first copy was still being
            // applied when the outcome was asked (a CLI killed mid-request: an upload's
            // finish then meets "already live"). Ask once more before dropping anything.
            if resent {
                let again = node.outcome(state.deal, nonce).await.with_context(|| format!("asking again about the refused {}", request.what()))?;
                if matches!(again, WireOutcome::Applied { .. }) {
                    return Ok(Resumed::Again);
                }
            }
            state.drop_intent()?;
            Ok(Resumed::Done(request.refused_note(&e)))
        }
        Err(e) if refusal(&e) == Some(ErrorCode::Replay) => Ok(Resumed::Again),
        Err(e) => Err(e.context(format!("completing the interrupted {}", request.what()))),
    }
}

/// The words for how a resumed request reached its answer.
pub(crate) fn how(resent: bool) -> &'static str {
    if resent {
        "had not reached the node and was sent again"
    } else {
        "had been applied by the node"
    }
}

/// Why the pending request was rejected, if it was.
pub fn rejected(p: &Pending) -> Option<String> {
    let (what, why) = match p {
        Pending::Write { rejected: Some(why), nonce, index, .. } => (format!("write of block {index} (nonce {nonce})"), why),
        Pending::UploadFinish { rejected: Some(why), nonce, .. } => (format!("upload finish (nonce {nonce})"), why),
        Pending::WriteBatch { rejected: Some(why), nonce, writes, .. } => {
            (format!("batch of {} writes (nonce {nonce})", writes.len()), why)
        }
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
