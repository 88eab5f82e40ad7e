//! Epoch proofs and disputes against a real anvil (time-based global epochs, warped
//! with `anvil_setNextBlockTimestamp`): whole-block proofs built from the state's runs
//! with the mirrored sample rule (ENCODING §8 v2) are accepted and match the contract's
//! `epochSample`; a proof against the digest in force still passes after a newer digest
//! is posted (issue 9 finding 2); epochs before the first digest are not faults
//! (finding 1); a dispute on a held sample is answered, one that is not answered is
//! slashed after its deadline; exits and closeDeal settlement.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use dpor_chain::{epoch_block_samples, sample_seed, verify_block_proof, verify_sample_proof, B256, DisputeState, EpochStatus, U256};
use dpor_core::audit::RunTag;

#[tokio::test]
async fn epoch_proof_is_accepted_and_pays_the_provider() {
    let s = setup().await;
    let (d, h) = s.post(1).await;
    let me = s.provider.account().unwrap();
    let owed0 = s.provider.owed(me).await.unwrap();
    let deal = s.provider.get_deal(s.deal).await.unwrap();
    let params = s.provider.params().await.unwrap();
    assert!(params.dev_seeds());

    // Deal epoch 0 starts at the next global epoch boundary after acceptance.
    assert_eq!(s.provider.current_epoch(s.deal).await.unwrap(), None);
    assert_eq!(s.provider.epoch_seed(s.deal, 0).await.unwrap(), None, "not started: no seed");
    let ts = s.warp_to_epoch(0).await;
    assert_eq!(params.deal_epoch_at(&deal, ts), Some(0));
    assert_eq!(s.provider.current_epoch(s.deal).await.unwrap(), Some(0));
    let w = s.provider.epoch_window(s.deal, 0).await.unwrap();
    assert_eq!(w, params.window(&deal, 0));
    assert!(w.contains(ts));
    let inf = s.provider.digest_in_force(s.deal, 0).await.unwrap();
    assert_eq!((inf.version, inf.hash, inf.write_count), (1, h, d.writeCount));

    // dev mode: touch the seed first (it is a blockhash until stored)
    s.provider.touch_seed(s.deal, 0).await.unwrap();
    let seed = s.provider.epoch_seed(s.deal, 0).await.unwrap().unwrap();
    let g = s.provider.global_seed(deal.start_epoch).await.unwrap().unwrap();
    assert_eq!(sample_seed(g, s.deal, 0), seed, "S = keccak(seed(G), dealId, e)");
    let samples = epoch_block_samples(seed, h, d.numBlocks, d.writeCount, u32::from(SAMPLES));
    for (j, x) in samples.iter().enumerate() {
        let (tag, pos) = s.provider.epoch_sample(s.deal, 0, j as u64).await.unwrap();
        assert_eq!((u32::from(tag), pos), (x.tag.0, x.position), "sample {j}: mirror = contract");
    }
    let proofs = s.fixture.block_proofs(&samples).unwrap();
    for p in &proofs {
        verify_block_proof(&d, s.fixture.coded_block_bytes(), p).unwrap();
    }
    // a block with one byte changed fails locally and on chain
    let mut bad = proofs.clone();
    let mut b = bad[1].codedBlock.to_vec();
    b[200] ^= 1;
    bad[1].codedBlock = b.into();
    assert!(verify_block_proof(&d, s.fixture.coded_block_bytes(), &bad[1]).is_err());
    let err = s.provider.submit_epoch_proof(s.deal, 0, &d, bad).await.unwrap_err();
    assert_eq!(err.revert_name(), Some("InvalidProof"), "{err}");
    // a truncated block (the node kept part of it) is rejected
    let mut short = proofs.clone();
    short[0].codedBlock = short[0].codedBlock[..128].to_vec().into();
    assert!(verify_block_proof(&d, s.fixture.coded_block_bytes(), &short[0]).is_err());
    let err = s.provider.submit_epoch_proof(s.deal, 0, &d, short).await.unwrap_err();
    assert!(matches!(err.revert_name(), Some("WrongBlockLength") | Some("InvalidProof")), "{err}");

    s.provider.submit_epoch_proof(s.deal, 0, &d, proofs.clone()).await.unwrap();
    assert_eq!(s.provider.epoch_status(s.deal, 0).await.unwrap(), EpochStatus::Proven);
    let pay = deal.price_per_epoch;
    assert_eq!(s.provider.owed(me).await.unwrap(), owed0 + U256::from(pay));
    let err = s.provider.submit_epoch_proof(s.deal, 0, &d, proofs).await.unwrap_err();
    assert_eq!(err.revert_name(), Some("EpochSettled"), "{err}");

    // the next epoch has not started: no seed yet, markMissed too early
    assert_eq!(s.provider.epoch_seed(s.deal, 1).await.unwrap(), None);
    let err = s.owner.mark_missed(s.deal, 1).await.unwrap_err();
    assert_eq!(err.revert_name(), Some("EpochNotOver"));
    let got = s.provider.withdraw().await.unwrap();
    assert_eq!(got, U256::from(pay));
    assert_eq!(s.provider.withdraw().await.unwrap_err().revert_name(), Some("NothingOwed"));

    // epoch 1 nobody proves: missed after its deadline, with a fault (digest in force)
    let w1 = s.provider.epoch_window(s.deal, 1).await.unwrap();
    s.dev.warp_to(w1.deadline).await.unwrap();
    s.owner.mark_missed(s.deal, 1).await.unwrap();
    assert_eq!(s.owner.epoch_status(s.deal, 1).await.unwrap(), EpochStatus::Missed);
    assert_eq!(s.owner.get_deal(s.deal).await.unwrap().failures, 1);
}

/// Finding 2: the owner posts a version bump inside the epoch's window, before the
/// provider's proof; the proof against the digest in force at the epoch's start still
/// passes, and one against the new digest is refused for this epoch.
#[tokio::test]
async fn proof_against_digest_in_force_survives_a_newer_digest() {
    let s = setup().await;
    let (d1, h1) = s.post(1).await;
    s.warp_to_epoch(0).await;
    let (d2, h2) = s.post(2).await; // same state, higher version, posted after the start
    assert_ne!(h1, h2);
    let inf = s.provider.digest_in_force(s.deal, 0).await.unwrap();
    assert_eq!((inf.version, inf.hash), (1, h1), "the bump is not in force for epoch 0");
    let rec = s.provider.digest_record(s.deal, 1).await.unwrap();
    assert_eq!((rec.digest_hash, rec.next_version, rec.prev_version), (h1, 2, 0));
    s.provider.touch_seed(s.deal, 0).await.unwrap();
    let seed = s.provider.epoch_seed(s.deal, 0).await.unwrap().unwrap();
    // proving against the newer digest is refused
    let p2 = s.fixture.block_proofs(&epoch_block_samples(seed, h2, d2.numBlocks, d2.writeCount, 3)).unwrap();
    let err = s.provider.submit_epoch_proof(s.deal, 0, &d2, p2).await.unwrap_err();
    assert_eq!(err.revert_name(), Some("DigestNotInForce"), "{err}");
    // the digest in force passes
    let p1 = s.fixture.block_proofs(&epoch_block_samples(seed, h1, d1.numBlocks, d1.writeCount, 3)).unwrap();
    s.provider.submit_epoch_proof(s.deal, 0, &d1, p1).await.unwrap();
    assert_eq!(s.provider.epoch_status(s.deal, 0).await.unwrap(), EpochStatus::Proven);
    // epoch 1: version 2 is in force
    assert_eq!(s.provider.digest_in_force(s.deal, 1).await.unwrap().version, 2);
}

/// Finding 1: epochs that pass before the first digest are refunded, not faulted.
#[tokio::test]
async fn epochs_before_the_first_digest_are_not_faults() {
    let s = setup().await;
    let w2 = s.owner.epoch_window(s.deal, 2).await.unwrap();
    s.dev.warp_to(w2.start).await.unwrap();
    s.post(1).await; // posted during epoch 2: epochs 0..=2 have no digest in force
    s.dev.warp_to(w2.deadline).await.unwrap();
    for e in 0..3 {
        assert_eq!(s.owner.digest_in_force(s.deal, e).await.unwrap().version, 0);
        s.owner.mark_missed(s.deal, e).await.unwrap();
    }
    let deal = s.owner.get_deal(s.deal).await.unwrap();
    assert_eq!(deal.failures, 0, "no fault before the data exists");
    assert_eq!(deal.state, dpor_chain::DealState::Active);
    assert_eq!(s.owner.digest_in_force(s.deal, 3).await.unwrap().version, 1);
}

#[tokio::test]
async fn disputes_answered_pay_the_bond_unanswered_are_slashed() {
    let s = setup().await;
    let (d, h) = s.post(1).await;
    s.warp_to_epoch(0).await;
    let auditor = s.dev.client(3).await.unwrap();
    let who = auditor.account().unwrap();
    auditor.mint(who, wei(1000)).await.unwrap();
    let bond = U256::from(auditor.dispute_bond().await.unwrap());
    let provider = s.provider.account().unwrap();

    // 1. a dispute on a sample the provider holds (level 1, position 3, chunk 2): answered.
    let tag = RunTag::level(1);
    let id = auditor.open_dispute(s.deal, 0, 1, B256::repeat_byte(0xaa), tag.0 as u8, 3, 2).await.unwrap();
    let q = auditor.get_dispute(id).await.unwrap();
    assert_eq!((q.state, q.digest_hash, q.deal_id, q.position, q.chunk_index), (DisputeState::Open, h, s.deal, 3, 2));
    let evs = s.provider.disputes_for_deal(s.deal, 0).await.unwrap();
    assert_eq!(evs.len(), 1);
    assert_eq!((evs[0].dispute_id, evs[0].run_tag, evs[0].digest_hash), (id, tag.0 as u8, h));
    let against = s.provider.digest_by_hash(s.deal, q.digest_hash, 0).await.unwrap().unwrap();
    assert_eq!(against, d);
    let proof = s.fixture.proof(tag, 3, 2).unwrap();
    verify_sample_proof(&against, s.fixture.coded_block_bytes(), &proof).unwrap();
    let owed0 = s.provider.owed(provider).await.unwrap();
    s.provider.answer_dispute(id, &against, proof.clone()).await.unwrap();
    assert_eq!(auditor.get_dispute(id).await.unwrap().state, DisputeState::Answered);
    assert_eq!(s.provider.owed(provider).await.unwrap(), owed0 + bond, "the bond goes to the provider");
    let err = s.provider.answer_dispute(id, &against, proof).await.unwrap_err();
    assert_eq!(err.revert_name(), Some("DisputeNotOpen"));

    // 2. a dispute the provider cannot answer: garbage fails, after the deadline anyone slashes.
    let id2 = auditor.open_dispute(s.deal, 0, 1, B256::repeat_byte(0xbb), 0, 5, 1).await.unwrap();
    let mut garbage = s.fixture.proof(RunTag::C, 5, 1).unwrap();
    garbage.chunk = vec![0x55u8; 128].into();
    assert!(verify_sample_proof(&against, s.fixture.coded_block_bytes(), &garbage).is_err());
    let err = s.provider.answer_dispute(id2, &against, garbage).await.unwrap_err();
    assert_eq!(err.revert_name(), Some("InvalidProof"));
    let err = auditor.slash(id2).await.unwrap_err();
    assert_eq!(err.revert_name(), Some("DeadlineNotPassed"));
    let q2 = auditor.get_dispute(id2).await.unwrap();
    s.dev.warp_to(q2.deadline + 1).await.unwrap();
    let owed_c0 = auditor.owed(who).await.unwrap();
    auditor.slash(id2).await.unwrap();
    assert_eq!(auditor.get_dispute(id2).await.unwrap().state, DisputeState::Slashed);
    assert!(auditor.owed(who).await.unwrap() > owed_c0 + bond, "bond back plus a share of the slash");
    assert_eq!(s.owner.get_deal(s.deal).await.unwrap().failures, 1);
    assert_eq!(s.provider.disputes_for_deal(s.deal, 0).await.unwrap().len(), 2);
    assert_eq!(s.provider.deals_for_provider(provider, 0).await.unwrap().len(), 1);
}

/// Exits: exitBeforeUpload after the upload deadline with no digest (no fault);
/// requestExit shortens the term; closeDeal after the grace period faults the
/// unsettled epochs that had a digest in force (finding 5).
#[tokio::test]
async fn exits_and_close_settle_every_epoch() {
    let s = setup().await;
    let params = s.owner.params().await.unwrap();
    // a second deal with no digest: exit before upload once uploadSeconds have passed
    let deal2 = open_deal(&s.owner, s.provider.account().unwrap()).await;
    s.provider.accept_deal(deal2).await.unwrap();
    let err = s.owner.exit_before_upload(deal2).await.unwrap_err();
    assert_eq!(err.revert_name(), Some("UploadNotOver"));

    // deal 1: digest, then the owner asks to exit: term = current epoch + notice (≤ 5)
    s.post(1).await;
    s.warp_to_epoch(0).await;
    let n = s.owner.request_exit(s.deal).await.unwrap();
    assert_eq!(u64::from(n), (1 + u64::from(params.exit_notice_epochs)).min(5));
    let deal = s.owner.get_deal(s.deal).await.unwrap();
    assert_eq!(deal.num_epochs, n);
    assert_eq!(deal.term_epochs, 5);

    let a2 = s.owner.get_deal(deal2).await.unwrap().accepted_at;
    s.dev.warp_to(a2 + params.upload_seconds).await.unwrap();
    s.provider.exit_before_upload(deal2).await.unwrap();
    let d2 = s.owner.get_deal(deal2).await.unwrap();
    assert_eq!((d2.state, d2.failures), (dpor_chain::DealState::Completed, 0));

    // close: not before last deadline + grace; then every unsettled epoch is a fault
    let end = params.dispute_period_end(&deal);
    s.dev.warp_to(params.last_deadline(&deal)).await.unwrap();
    assert_eq!(s.owner.close_deal(s.deal).await.unwrap_err().revert_name(), Some("DealNotOver"));
    s.dev.warp_to(end).await.unwrap();
    s.owner.close_deal(s.deal).await.unwrap();
    let closed = s.owner.get_deal(s.deal).await.unwrap();
    // all n epochs had the digest in force and none was settled: n faults (≥ maxFailures)
    assert_eq!(u32::from(closed.failures), n, "unsettled epochs faulted: {closed:?}");
    assert!(matches!(closed.state, dpor_chain::DealState::Terminated | dpor_chain::DealState::Completed));
}
