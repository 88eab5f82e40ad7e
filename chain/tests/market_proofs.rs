//! Epoch proofs and disputes against a real anvil: proofs built from the state's runs
//! with `epoch_samples` + `chunk_proof` are accepted (and verify locally first), a
//! dispute on a held sample is answered (bond to the provider), one that is not
//! answered is slashed after the deadline.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use dpor_chain::{verify_sample_proof, B256, DisputeState, EpochStatus, U256};
use dpor_core::audit::{epoch_samples, RunTag};

#[tokio::test]
async fn epoch_proof_is_accepted_and_pays_the_provider() {
    let s = setup().await;
    let (d, h) = s.post(1).await;
    let me = s.provider.account().unwrap();
    let owed0 = s.provider.owed(me).await.unwrap();

    let epoch = s.provider.current_epoch(s.deal).await.unwrap().unwrap();
    assert_eq!(epoch, 0);
    let w = s.provider.epoch_window(s.deal, epoch).await.unwrap();
    assert!(w.contains(s.dev.block_number().await.unwrap() + 1));
    let seed = s.provider.epoch_seed(s.deal, epoch).await.unwrap().unwrap();
    let samples = epoch_samples(seed, h, d.numBlocks, d.writeCount, s.fixture.coded_block_bytes(), SAMPLES as u32);
    let proofs: Vec<_> = samples.iter().map(|x| s.fixture.proof(x.tag, x.position, x.chunk).unwrap()).collect();
    for p in &proofs {
        verify_sample_proof(&d, s.fixture.coded_block_bytes(), p).unwrap();
        assert_eq!(p.chunkPath.len(), 2, "β = 256: 3 chunks, depth 2");
    }
    // a corrupted chunk fails locally and on chain
    let mut bad = proofs.clone();
    bad[0].chunk = {
        let mut c = bad[0].chunk.to_vec();
        c[0] ^= 1;
        c.into()
    };
    assert!(verify_sample_proof(&d, s.fixture.coded_block_bytes(), &bad[0]).is_err());
    let err = s.provider.submit_epoch_proof(s.deal, epoch, &d, bad).await.unwrap_err();
    assert_eq!(err.revert_name(), Some("InvalidProof"), "{err}");

    s.provider.submit_epoch_proof(s.deal, epoch, &d, proofs.clone()).await.unwrap();
    assert_eq!(s.provider.epoch_status(s.deal, epoch).await.unwrap(), EpochStatus::Proven);
    // the stored seed is the one we proved against
    assert_eq!(s.provider.epoch_seed(s.deal, epoch).await.unwrap(), Some(seed));
    let pay = s.provider.get_deal(s.deal).await.unwrap().price_per_epoch;
    assert_eq!(s.provider.owed(me).await.unwrap(), owed0 + U256::from(pay));
    // once per epoch
    let err = s.provider.submit_epoch_proof(s.deal, epoch, &d, proofs).await.unwrap_err();
    assert_eq!(err.revert_name(), Some("EpochSettled"), "{err}");

    // the next epoch has not started: no seed yet
    assert_eq!(s.provider.epoch_seed(s.deal, 1).await.unwrap(), None);
    // withdraw pays it out
    let bal0 = s.provider.balance_of(me).await.unwrap();
    let got = s.provider.withdraw().await.unwrap();
    assert_eq!(got, U256::from(pay));
    assert_eq!(s.provider.balance_of(me).await.unwrap(), bal0 + got);
    let err = s.provider.withdraw().await.unwrap_err();
    assert_eq!(err.revert_name(), Some("NothingOwed"));

    // an epoch nobody proves is marked missed after its deadline (with a fault)
    let w1 = s.provider.epoch_window(s.deal, 1).await.unwrap();
    let err = s.owner.mark_missed(s.deal, 1).await.unwrap_err();
    assert_eq!(err.revert_name(), Some("EpochNotOver"));
    let now = s.dev.block_number().await.unwrap();
    s.dev.mine(w1.deadline - now).await.unwrap();
    s.owner.mark_missed(s.deal, 1).await.unwrap();
    assert_eq!(s.owner.epoch_status(s.deal, 1).await.unwrap(), EpochStatus::Missed);
    assert_eq!(s.owner.get_deal(s.deal).await.unwrap().failures, 1);
}

#[tokio::test]
async fn disputes_answered_pay_the_bond_unanswered_are_slashed() {
    let s = setup().await;
    let (d, h) = s.post(1).await;
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

    // 2. a dispute the provider cannot answer (it "lost" C position 5): garbage fails,
    //    and after the deadline anyone slashes.
    let id2 = auditor.open_dispute(s.deal, 0, 1, B256::repeat_byte(0xbb), 0, 5, 1).await.unwrap();
    let mut garbage = s.fixture.proof(RunTag::C, 5, 1).unwrap();
    garbage.chunk = vec![0x55u8; 128].into();
    assert!(verify_sample_proof(&against, s.fixture.coded_block_bytes(), &garbage).is_err());
    let err = s.provider.answer_dispute(id2, &against, garbage).await.unwrap_err();
    assert_eq!(err.revert_name(), Some("InvalidProof"));
    let err = auditor.slash(id2).await.unwrap_err();
    assert_eq!(err.revert_name(), Some("DeadlineNotPassed"));
    let q2 = auditor.get_dispute(id2).await.unwrap();
    let now = s.dev.block_number().await.unwrap();
    s.dev.mine(q2.deadline - now).await.unwrap();
    let owed_c0 = auditor.owed(who).await.unwrap();
    auditor.slash(id2).await.unwrap();
    assert_eq!(auditor.get_dispute(id2).await.unwrap().state, DisputeState::Slashed);
    assert!(auditor.owed(who).await.unwrap() > owed_c0 + bond, "bond back plus a share of the slash");
    assert_eq!(s.owner.get_deal(s.deal).await.unwrap().failures, 1);
    assert_eq!(s.provider.disputes_for_deal(s.deal, 0).await.unwrap().len(), 2);
    assert_eq!(s.provider.deals_for_provider(provider, 0).await.unwrap().len(), 1);
}
