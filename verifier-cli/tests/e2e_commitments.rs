//! End to end, real processes (anvil + contracts, `dpor-node --epoch-commitments`,
//! `dpor`): a provider with two deals posts ONE commitment per epoch over both
//! (docs/COMMITMENTS.md); `dpor watch --commitments-only` fetches and verifies both
//! committed responses over libp2p; a griefing challenge of an honest entry is answered
//! on chain by the node (the bond goes to the provider, the epoch is paid); after the
//! node loses one deal's data, that deal drops out of the next commitment, the watcher
//! challenges its entry, nobody can answer, and the watcher faults it: one fault
//! slashed from that deal only.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "e2e_harness/mod.rs"]
mod harness;

use dpor_chain::{ChallengeState, EpochStatus, U256};
use harness::{actions, within, World, AUDITOR};
use std::time::Duration;


fn of<'a>(acts: &'a [serde_json::Value], what: &str, deal: u64) -> Vec<&'a serde_json::Value> {
    acts.iter().filter(|a| a["action"] == what && a["deal"] == deal).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_commitment_per_epoch_watched_challenged_answered_and_a_lost_deal_slashed() {
    within(900, async {
        let w = World::start_with(&["--epoch-commitments"]).await;
        w.make_file("a", 64 << 10, 21);
        w.make_file("b", 32 << 10, 22);
        let a = w.open_and_upload("a", 8).await;
        let b = w.open_and_upload_in("b", 8, "owner-b.json").await;
        let market = w.client(AUDITOR).await;
        let (da, db) = (market.get_deal(a).await.unwrap(), market.get_deal(b).await.unwrap());
        // Both deals start at the same global epoch unless acceptance straddled a boundary.
        let g0 = da.start_epoch.max(db.start_epoch);
        let (ea, eb) = (g0 - da.start_epoch, g0 - db.start_epoch);
        let params = market.params().await.unwrap();

        // Global epoch g0 starts: the node commits both deals at once.
        w.dev.warp_to(params.global_start(g0)).await.unwrap();
        let commit = wait_commitment(&w, &market, g0).await;
        assert_eq!(commit.leaf_count, 2, "one commitment over both deals");

        let state = w.path("watch.json");
        let st = state.to_str().unwrap();
        let (sa, sb) = (a.to_string(), b.to_string());
        let args = ["watch", "--commitments-only", "--once", "--watch-state", st, "--retries", "0", "--deal", &sa, "--deal", &sb];
        let watch = |_retries: &str| w.dpor(AUDITOR, &args);
        let r = watch("0").await;
        assert!(r.ok, "watch pass 1: {}\n{}", r.stdout, r.stderr);
        let acts = actions(&r.stdout);
        assert_eq!(of(&acts, "commitment-ok", a).len(), 1, "{acts:?}");
        assert_eq!(of(&acts, "commitment-ok", b).len(), 1, "{acts:?}");
        assert!(of(&acts, "challenge", a).is_empty() && of(&acts, "challenge", b).is_empty(), "{acts:?}");

        // A griefing challenge of an honest entry: answered by the node, bond to it. (If
        // the seed drew one of the deals for a safety proof, the node answered that
        // market-opened challenge already: that epoch is Proven; challenge the other.)
        let mut unsettled = None;
        for (d, e) in [(a, ea), (b, eb)] {
            match market.epoch_status(d, e).await.unwrap() {
                EpochStatus::None => unsettled = unsettled.or(Some((d, e))),
                EpochStatus::Challenged => assert_eq!(wait_epoch(&w, &market, d, e).await, EpochStatus::Proven, "safety draw answered"),
                s => assert_eq!(s, EpochStatus::Proven, "deal {d} epoch {e}"),
            }
        }
        let (d, e) = unsettled.expect("at most one deal is drawn per epoch");
        let bond = market.dispute_bond().await.unwrap();
        market.ensure_allowance(U256::from(bond)).await.unwrap();
        let q = market.challenge_entry(d, e).await.unwrap();
        let answered = wait_challenge(&w, &market, q).await;
        assert_eq!(answered, ChallengeState::Answered, "{}", w.node_log());
        assert_eq!(market.epoch_status(d, e).await.unwrap(), EpochStatus::Proven);

        // The node loses deal b's data: b drops out of the next commitment.
        let report = w.erase(b, &["--fraction", "1.0"]);
        assert!(report.contains("zeroed") || report.contains("erased"), "{report}");
        let g1 = g0 + 1;
        w.dev.warp_to(params.global_start(g1)).await.unwrap();
        let commit = wait_commitment(&w, &market, g1).await;
        assert_eq!(commit.leaf_count, 1, "the lost deal is left out: {}", w.node_log());

        let faults_before = market.get_deal(b).await.unwrap().failures;
        let r = watch("0").await;
        assert!(r.ok, "watch pass 2: {}\n{}", r.stdout, r.stderr);
        let acts = actions(&r.stdout);
        assert_eq!(of(&acts, "commitment-ok", a).len(), 1, "deal a's epoch {} verifies: {acts:?}", ea + 1);
        // (If g1's safety draw picked deal b, the market challenged the entry first:
        // the watcher takes that challenge over, `challenge-exists`.)
        let ch: Vec<_> = of(&acts, "challenge", b).into_iter().chain(of(&acts, "challenge-exists", b)).collect();
        assert_eq!(ch.len(), 1, "deal b's missing entry is challenged: {acts:?}");
        let qb = ch[0]["challenge_id"].as_u64().unwrap();
        assert_eq!(ch[0]["epoch"].as_u64(), Some(eb + 1));

        // Nobody can answer it; past its deadline the watcher faults it.
        let c = market.get_challenge(qb).await.unwrap();
        w.dev.warp_to(c.deadline + 1).await.unwrap();
        let r = watch("0").await;
        assert!(r.ok, "watch pass 3: {}\n{}", r.stdout, r.stderr);
        let acts = actions(&r.stdout);
        assert_eq!(of(&acts, "challenge-faulted", b).len(), 1, "{acts:?}");
        assert_eq!(market.get_challenge(qb).await.unwrap().state, ChallengeState::Faulted);
        assert_eq!(market.get_deal(b).await.unwrap().failures, faults_before + 1, "one fault on deal b");
        assert_eq!(market.get_deal(a).await.unwrap().failures, 0, "deal a untouched");
        assert_eq!(market.epoch_status(b, eb + 1).await.unwrap(), EpochStatus::Missed);

        // Someone else reaches the next failing entry first (a second auditor here; the
        // market's safety draw at a commitment does the same): the watcher's
        // challengeEntry reverts EpochSettled. It must not fail the pass: it takes the
        // open challenge over and faults it past its deadline (a safety draw's has no
        // challenger to do it).
        let g2 = params.global_epoch_at(market.latest_timestamp().await.unwrap()).unwrap() + 1;
        w.dev.warp_to(params.global_start(g2)).await.unwrap();
        let commit = wait_commitment(&w, &market, g2).await;
        assert_eq!(commit.leaf_count, 1, "deal b still left out: {}", w.node_log());
        let e2 = g2 - db.start_epoch;
        let other = w.client(4).await;
        let q2 = if market.epoch_status(b, e2).await.unwrap() == EpochStatus::Challenged {
            commit.safety_challenge_id
        } else {
            other.mint(w.dev.key(4).address(), harness::e18(10_000)).await.unwrap();
            other.ensure_allowance(U256::from(bond)).await.unwrap();
            other.challenge_entry(b, e2).await.unwrap()
        };
        let r = watch("0").await;
        assert!(r.ok, "watch pass 4: {}\n{}", r.stdout, r.stderr);
        let acts = actions(&r.stdout);
        // (Only epoch e2's: if pass 3 ran before the node committed the global epoch
        // after the warp past qb's deadline, this pass may also take over that one's
        // safety draw on deal b.)
        let taken: Vec<_> = of(&acts, "challenge-exists", b).into_iter().filter(|c| c["epoch"].as_u64() == Some(e2)).collect();
        assert_eq!(taken.len(), 1, "the watcher takes the open challenge over: {acts:?}");
        assert_eq!(taken[0]["challenge_id"].as_u64(), Some(q2), "{acts:?}");
        assert!(of(&acts, "challenge", b).iter().all(|c| c["epoch"].as_u64() != Some(e2)), "not challenged twice: {acts:?}");
        w.dev.warp_to(market.get_challenge(q2).await.unwrap().deadline + 1).await.unwrap();
        let r = watch("0").await;
        assert!(r.ok, "watch pass 5: {}\n{}", r.stdout, r.stderr);
        let faulted = actions(&r.stdout);
        assert!(of(&faulted, "challenge-faulted", b).iter().any(|c| c["challenge_id"].as_u64() == Some(q2)), "{}", r.stdout);
        assert_eq!(market.get_challenge(q2).await.unwrap().state, ChallengeState::Faulted);
        assert!(market.get_deal(b).await.unwrap().failures >= faults_before + 2, "a second fault on deal b");
    })
    .await;
}

/// Waits until the provider's commitment for global epoch `g` is on chain.
async fn wait_commitment(w: &World, market: &dpor_chain::Market, g: u64) -> dpor_chain::EpochCommittedEvent {
    for _ in 0..600 {
        let evs = market.commitments_of(w.provider, 0).await.unwrap();
        if let Some(e) = evs.into_iter().find(|e| e.global_epoch == g) {
            return e;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("no commitment for global epoch {g}:\n{}", w.node_log());
}

/// Waits until deal `d`'s epoch `e` is no longer Challenged.
async fn wait_epoch(w: &World, market: &dpor_chain::Market, d: u64, e: u64) -> EpochStatus {
    for _ in 0..600 {
        let s = market.epoch_status(d, e).await.unwrap();
        if s != EpochStatus::Challenged {
            return s;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("deal {d} epoch {e} still challenged:\n{}", w.node_log());
}

/// Waits until challenge `q` is no longer open (or 120 s of polling).
async fn wait_challenge(w: &World, market: &dpor_chain::Market, q: u64) -> ChallengeState {
    for _ in 0..600 {
        let c = market.get_challenge(q).await.unwrap();
        if c.state != ChallengeState::Open {
            return c.state;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("challenge {q} still open:\n{}", w.node_log());
}
