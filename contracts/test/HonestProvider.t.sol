// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {MarketFixture, TreeKit} from "./utils/MarketFixture.sol";
import {TestBase} from "./utils/Vm.sol";
import {TestToken} from "../src/token/TestToken.sol";
import {IDporMarket, IDporMarketFull} from "../src/market/IDporMarket.sol";
import {Digest, BlockProof, SampleProof} from "../src/lib/DporTypes.sol";
import {DporMerkle} from "../src/lib/DporMerkle.sol";
import {DporCommitment} from "../src/lib/DporCommitment.sol";

/// @notice An honest provider (it co-signs only states it stores, always proves every
///         epoch that has a digest in force and answers every dispute at once) against an
///         owner and an auditor doing anything the interface allows: post digests and
///         version bumps at any time, resizes (new N, price and collateral) at any time,
///         dispute any sample, markMissed, closeDeal, exits, seeds, withdrawals, and warps
///         of up to one epoch (the provider acts before and after each one, so it gets a
///         turn in every proof window).
contract HonestHandler is TestBase, TreeKit {
    IDporMarketFull internal market;
    TestToken internal token;
    uint256 internal ownerPk;
    uint256 internal providerPk;
    address public owner;
    address public provider;
    address public auditor;
    uint32 internal constant BETA = 200;

    uint256[] public deals;
    uint256[] public disputes;
    mapping(bytes32 => Digest) internal preimage;
    mapping(uint256 => uint128) public lockedCollateral;

    /// Provider's expected credits: proven epochs' pay + collateral returned + bonds won.
    uint256 public expectedProviderCredits;
    uint256 public providerWithdrawn;
    /// Set when a duty of the honest provider failed (it must never happen).
    string public dutyFailure;
    uint256 public proofs;
    uint256 public answers;
    uint256 public resizes;

    constructor(IDporMarketFull m, TestToken t, uint256 oPk, uint256 pPk, address a) {
        market = m;
        token = t;
        ownerPk = oPk;
        providerPk = pPk;
        owner = vm.addr(oPk);
        provider = vm.addr(pPk);
        auditor = a;
    }

    modifier duty() {
        _duty();
        _;
        _duty();
    }

    /// The provider acts only after the call (no time passes in it): with {warpLate}, an
    /// epoch that started during the warp is still unproven when the call runs.
    modifier dutyAfter() {
        _;
        _duty();
    }

    function dealCount() external view returns (uint256) {
        return deals.length;
    }

    function _pick(uint256 i) internal view returns (uint256) {
        return deals[i % deals.length];
    }

    // ------------------------------------------------------------ the honest provider

    function _duty() internal virtual {
        for (uint256 i; i < disputes.length; ++i) _answer(disputes[i]);
        for (uint256 i; i < deals.length; ++i) _proveNow(deals[i]);
    }

    function _answer(uint256 q) internal {
        IDporMarket.Dispute memory x = market.getDispute(q);
        if (x.state != IDporMarket.DisputeState.Open) return;
        Digest memory g = preimage[x.digestHash];
        SampleProof memory p = buildProof(x.runTag, x.position, x.chunkIndex, g.numBlocks, BETA);
        vm.prank(provider);
        try market.answerDispute(q, g, p) {
            expectedProviderCredits += x.bond;
            answers++;
        } catch {
            dutyFailure = "answerDispute failed";
        }
    }

    function _proveNow(uint256 id) internal {
        IDporMarket.Deal memory d = market.getDeal(id);
        if (d.state != IDporMarket.DealState.Active) return;
        uint256 g0 = (block.timestamp - market.genesis()) / market.epochSeconds();
        if (g0 < d.startEpoch) return;
        uint256 e = g0 - d.startEpoch;
        if (e >= d.numEpochs) return;
        if (market.epochStatus(id, uint64(e)) != IDporMarket.EpochStatus.None) return;
        (, bytes32 h,) = market.digestInForce(id, uint64(e));
        if (h == bytes32(0)) return;
        Digest memory g = preimage[h];
        BlockProof[] memory ps = new BlockProof[](d.samplesPerEpoch);
        for (uint256 j; j < ps.length; ++j) {
            (uint8 tag, uint64 pos) = market.epochSample(id, uint64(e), j);
            ps[j] = buildBlockProof(tag, pos, g.numBlocks, BETA); // the digest's N, not the deal's (resizes)
        }
        vm.prank(provider);
        try market.submitEpochProof(id, uint64(e), g, ps) {
            expectedProviderCredits += d.pricePerEpoch;
            proofs++;
        } catch {
            dutyFailure = "submitEpochProof failed";
        }
    }

    function _credit(uint256 id) internal {
        // after a close or an exit, the provider must have got its whole collateral back
        IDporMarket.Deal memory d = market.getDeal(id);
        if (d.state == IDporMarket.DealState.Completed && lockedCollateral[id] != 0) {
            expectedProviderCredits += lockedCollateral[id];
            lockedCollateral[id] = 0;
        }
    }

    // ------------------------------------------------------------ owner and auditor actions

    function openDeal(uint8 nExp, uint8 epochs, uint8 k) external duty {
        uint64 n = uint64(1) << (nExp % 3);
        vm.prank(owner);
        uint256 id = market.openDeal(provider, n, BETA, 4, 1 + k % 3, 1 + epochs % 6, 1e18, 0);
        deals.push(id);
        vm.prank(provider);
        market.acceptDeal(id);
        lockedCollateral[id] = market.getDeal(id).collateral;
    }

    function postDigest(uint256 i, uint64 t, uint8 skip) external duty {
        if (deals.length == 0) return;
        uint256 id = _pick(i);
        IDporMarket.Deal memory d = market.getDeal(id);
        if (d.state != IDporMarket.DealState.Active) return;
        Digest memory g = buildDigest(id, d.digestVersion + 1 + skip % 3, d.numBlocks, t % d.numBlocks, 0, BETA);
        bytes32 h = market.digestHash(g);
        (uint8 v1, bytes32 r1, bytes32 s1) = vm.sign(ownerPk, h);
        (uint8 v2, bytes32 r2, bytes32 s2) = vm.sign(providerPk, h);
        preimage[h] = g; // the provider stores the state before it co-signs
        market.postDigest(g, abi.encodePacked(r1, s1, v1), abi.encodePacked(r2, s2, v2));
    }

    /// The owner resizes a deal (App. A.3) at any moment to N ∈ {1, 2, 4}, with a price
    /// of 0..2 and a collateral of 0..6 tokens per block; the provider co-signs after
    /// storing the new state and keeps the old one for the epoch under way, which it
    /// still proves against the pre-resize digest and its N (after the resize: {dutyAfter}).
    function resize(uint256 i, uint8 nExp, uint8 skip, uint8 priceSel, uint8 colSel) external dutyAfter {
        if (deals.length == 0) return;
        uint256 id = _pick(i);
        IDporMarket.Deal memory d = market.getDeal(id);
        if (d.state != IDporMarket.DealState.Active) return;
        uint64 n = uint64(1) << (nExp % 3);
        Digest memory g = buildDigest(id, d.digestVersion + 1 + skip % 3, n, 0, 0, BETA);
        uint128 price = uint128(n) * (priceSel % 3) * 1e18;
        uint128 col = uint128(n) * (colSel % 7) * 1e18;
        bytes32 h = market.resizeHash(g, price, col);
        (uint8 v1, bytes32 r1, bytes32 s1) = vm.sign(ownerPk, h);
        (uint8 v2, bytes32 r2, bytes32 s2) = vm.sign(providerPk, h);
        preimage[market.digestHash(g)] = g;
        market.resizeDeal(g, price, col, abi.encodePacked(r1, s1, v1), abi.encodePacked(r2, s2, v2));
        if (col < d.collateral) expectedProviderCredits += d.collateral - col;
        lockedCollateral[id] = col;
        resizes++;
    }

    function openDispute(uint256 i, uint8 tagSel, uint64 pos, uint32 ci, bool byOwner) external duty {
        if (deals.length == 0) return;
        uint256 id = _pick(i);
        (uint64 v, uint8 tag, uint64 p) = _sample(id, tagSel, pos);
        if (v == 0) return;
        vm.prank(byOwner ? owner : auditor);
        disputes.push(market.openDispute(id, 0, v, bytes32("x"), tag, p, ci % 2));
    }

    /// Any existing sample of the deal's latest digest.
    function _sample(uint256 id, uint8 tagSel, uint64 pos) internal view returns (uint64 v, uint8 tag, uint64 p) {
        IDporMarket.Deal memory d = market.getDeal(id);
        v = d.digestVersion;
        tag = tagSel % 4;
        if (tag != 0 && (d.writeCount >> (tag - 1)) & 1 == 0) tag = 0;
        uint256 size = tag == 0 ? 2 * d.numBlocks : (uint256(1) << tag);
        p = uint64(pos % size);
    }

    function markMissed(uint256 i, uint8 e) external duty {
        if (deals.length == 0) return;
        vm.prank(owner);
        market.markMissed(_pick(i), e % 6);
    }

    function closeDeal(uint256 i) external duty {
        if (deals.length == 0) return;
        uint256 id = _pick(i);
        vm.prank(owner);
        market.closeDeal(id);
        _credit(id);
    }

    function requestExit(uint256 i, bool byOwner) external duty {
        if (deals.length == 0) return;
        vm.prank(byOwner ? owner : provider);
        market.requestExit(_pick(i));
    }

    function exitBeforeUpload(uint256 i, bool byOwner) external duty {
        if (deals.length == 0) return;
        uint256 id = _pick(i);
        IDporMarket.Deal memory d = market.getDeal(id);
        vm.prank(byOwner ? owner : provider);
        market.exitBeforeUpload(id);
        // the price of the global epochs the deal held the capacity, up to the escrow (F21)
        uint256 held = (block.timestamp - market.genesis()) / market.epochSeconds() + 2 - d.startEpoch;
        uint256 fee = held * d.pricePerEpoch;
        expectedProviderCredits += fee < d.escrow ? fee : d.escrow;
        _credit(id);
    }

    function touchSeed(uint256 i, uint8 e) external duty {
        if (deals.length == 0) return;
        market.touchSeed(_pick(i), e % 6);
    }

    function withdraw(bool isProvider) external duty {
        address a = isProvider ? provider : owner;
        vm.prank(a);
        uint256 got = market.withdraw();
        if (isProvider) providerWithdrawn += got;
    }

    /// Time passes, at most one epoch at a time (the provider acts before and after).
    function warp(uint32 secs) external duty {
        vm.warp(block.timestamp + 1 + secs % market.epochSeconds());
    }

    /// The same, the provider acting only at the next call (every call lets it act before
    /// time passes again, and no call moves time by more than one epoch, so it still has
    /// its turn in the window); a {resize} next lands before the proof of the new epoch.
    function warpLate(uint32 secs) external {
        _duty();
        vm.warp(block.timestamp + 1 + secs % market.epochSeconds());
    }
}

/// @notice Invariant: the honest provider's collateral is never slashed and its proven
///         epochs are always paid, whatever the owner and auditors do.
contract HonestProviderInvariantTest is MarketFixture {
    HonestHandler internal handler;

    function setUp() public override {
        super.setUp();
        handler = new HonestHandler(market, token, OWNER_PK, PROVIDER_PK, challenger);
    }

    function targetContracts() public view returns (address[] memory t) {
        t = new address[](1);
        t[0] = address(handler);
    }

    /// Every duty of the honest provider (proof of each epoch with a digest in force,
    /// answer of each dispute) succeeded.
    function invariant_honestDutiesNeverFail() public view {
        vm.assertEq(handler.dutyFailure(), "");
    }

    /// No fault, no termination, collateral intact on every deal.
    function invariant_honestNeverSlashed() public view {
        for (uint256 i; i < handler.dealCount(); ++i) {
            uint256 id = handler.deals(i);
            IDporMarket.Deal memory d = market.getDeal(id);
            vm.assertEq(d.failures, 0, "fault on an honest provider");
            vm.assertTrue(d.state != IDporMarket.DealState.Terminated, "terminated");
            if (d.state == IDporMarket.DealState.Active) {
                vm.assertEq(d.collateral, handler.lockedCollateral(id), "collateral slashed");
            }
        }
    }

    /// The provider was credited exactly: every proven epoch's pay, every answered
    /// dispute's bond, and its whole collateral for each ended deal.
    function invariant_honestAlwaysPaid() public view {
        vm.assertEq(
            market.owed(provider) + handler.providerWithdrawn(), handler.expectedProviderCredits(), "provider credits"
        );
    }
}

/// @notice The invariant's handler really proves, answers and gets paid, and the
///         invariants do catch a slash when the provider misses its turn (negative control).
contract HonestHandlerSanityTest is MarketFixture {
    HonestHandler internal handler;

    function setUp() public override {
        super.setUp();
        handler = new HonestHandler(market, token, OWNER_PK, PROVIDER_PK, challenger);
        handler.openDeal(1, 3, 1); // N = 2, 4 epochs, K = 2
        handler.postDigest(0, 1, 0);
    }

    function test_handlerProvesAnswersAndIsPaid() public {
        handler.openDispute(0, 0, 1, 1, true);
        vm.assertEq(handler.answers(), 1);
        for (uint256 i; i < 6; ++i) handler.warp(uint32(EPOCH - 1));
        vm.assertGe(handler.proofs(), 3);
        handler.warp(uint32(GRACE % EPOCH));
        handler.warp(uint32(EPOCH - 1));
        handler.warp(uint32(EPOCH - 1));
        handler.closeDeal(0);
        vm.assertEq(uint256(market.getDeal(1).state), uint256(IDporMarket.DealState.Completed));
        vm.assertEq(market.owed(provider), handler.expectedProviderCredits());
        vm.assertEq(handler.dutyFailure(), "");
    }

    /// A resize inside an epoch not yet proven: the provider proves that epoch against
    /// the old digest and N, the later ones against the new, and is paid and refunded exactly.
    function test_handlerProvesAcrossResize() public {
        (uint256 start,) = market.epochWindow(1, 0);
        vm.warp(start); // epoch 0 under way, not yet proven (the handler has not acted)
        handler.resize(0, 2, 0, 2, 3); // N 2 -> 4, price 2, collateral 3 per block; then the proof
        vm.assertEq(handler.resizes(), 1);
        vm.assertEq(market.getDigestRecord(1, 1).numBlocks, 2);
        vm.assertEq(market.getDigestRecord(1, 2).numBlocks, 4);
        vm.assertEq(uint256(market.epochStatus(1, 0)), uint256(IDporMarket.EpochStatus.Proven));
        for (uint256 i; i < 6; ++i) handler.warp(uint32(EPOCH - 1));
        vm.assertGe(handler.proofs(), 4);
        vm.assertEq(handler.dutyFailure(), "");
        vm.assertEq(market.owed(provider), handler.expectedProviderCredits());
    }

    function test_negativeControl_skippedTurnIsAFault() public {
        (, uint256 deadline) = market.epochWindow(1, 0);
        vm.warp(deadline); // two windows pass without the provider's turn
        handler.markMissed(0, 0);
        vm.assertEq(market.getDeal(1).failures, 1); // invariant_honestNeverSlashed would fail
        vm.assertLt(market.getDeal(1).collateral, handler.lockedCollateral(1));
    }
}

/// @notice The honest provider of {HonestHandler} on the commitment path (docs/COMMITMENTS.md):
///         instead of a proof per deal it commits, in every global epoch, one root over the
///         honest responses of all its deals, answers every challenge (auditors' and
///         safety draws) and every dispute at once. The owner and auditors do everything
///         {HonestHandler} lets them, plus challenge any entry and claim any epochs.
contract CommittingHandler is HonestHandler {
    mapping(uint64 => bytes32[]) internal leavesOf;
    /// index + 1 of a deal's leaf in g's tree (0 = not in it)
    mapping(uint64 => mapping(uint256 => uint256)) internal indexOf;
    uint256 public commits;
    uint256 public challengeAnswers;

    constructor(IDporMarketFull m, TestToken t, uint256 oPk, uint256 pPk, address a)
        HonestHandler(m, t, oPk, pPk, a)
    {}

    function _duty() internal override {
        for (uint256 i; i < disputes.length; ++i) _answer(disputes[i]);
        _commitNow();
        _answerChallenges();
    }

    /// The deal epoch of `id` at global epoch g and its in-force digest, if it has both.
    function _entry(uint256 id, uint64 g) internal view returns (bool ok, uint64 e, Digest memory d) {
        IDporMarket.Deal memory deal = market.getDeal(id);
        if (deal.state != IDporMarket.DealState.Active || g < deal.startEpoch) return (false, 0, d);
        e = g - deal.startEpoch;
        if (e >= deal.numEpochs) return (false, 0, d);
        (, bytes32 h,) = market.digestInForce(id, e);
        if (h == bytes32(0)) return (false, 0, d);
        return (true, e, preimage[h]);
    }

    function _proofs(uint256 id, uint64 e, Digest memory d) internal view returns (BlockProof[] memory ps) {
        ps = new BlockProof[](market.getDeal(id).samplesPerEpoch);
        for (uint256 j; j < ps.length; ++j) {
            (uint8 tag, uint64 pos) = market.epochSample(id, e, j);
            ps[j] = buildBlockProof(tag, pos, d.numBlocks, BETA);
        }
    }

    function _commitNow() internal {
        uint64 g = uint64((block.timestamp - market.genesis()) / market.epochSeconds());
        (, bool done) = market.getCommitment(provider, g);
        if (done) return;
        bytes32[] storage l = leavesOf[g];
        for (uint256 i; i < deals.length; ++i) {
            uint256 id = deals[i]; // ascending
            (bool ok, uint64 e, Digest memory d) = _entry(id, g);
            if (!ok) continue;
            BlockProof[] memory ps = _proofs(id, e, d);
            bytes[] memory blocks = new bytes[](ps.length);
            for (uint256 j; j < ps.length; ++j) blocks[j] = ps[j].codedBlock;
            l.push(DporCommitment.leaf(id, e, d.version, DporCommitment.responseHash(market.peekSeed(id, e), blocks)));
            indexOf[g][id] = l.length;
        }
        vm.prank(provider);
        try market.commitEpoch(g, DporMerkle.rootOfLeaves(l), uint32(l.length)) {
            commits++;
        } catch {
            dutyFailure = "commitEpoch failed";
        }
    }

    function _answerChallenges() internal {
        uint256 n = market.challengeCount();
        for (uint256 c = 1; c <= n; ++c) {
            IDporMarket.Challenge memory ch = market.getChallenge(c);
            if (ch.state != IDporMarket.ChallengeState.Open) continue;
            uint64 g = market.getDeal(ch.dealId).startEpoch + ch.epoch;
            (, bytes32 h,) = market.digestInForce(ch.dealId, ch.epoch);
            Digest memory d = preimage[h];
            uint256 idx = indexOf[g][ch.dealId];
            if (idx == 0) {
                dutyFailure = "challenged entry not in the tree";
                continue;
            }
            BlockProof[] memory ps = _proofs(ch.dealId, ch.epoch, d);
            bytes32[] memory path = DporMerkle.pathOf(leavesOf[g], idx - 1);
            vm.prank(provider);
            try market.answerChallenge(c, d, ps, idx - 1, path) {
                challengeAnswers++;
            } catch {
                dutyFailure = "answerChallenge failed";
            }
        }
    }

    function challenge(uint256 i, uint8 e, bool byOwner) external duty {
        if (deals.length == 0) return;
        vm.prank(byOwner ? owner : auditor);
        market.challengeEntry(_pick(i), e % 6);
    }

    function claim(uint256 i, uint8 upTo) external duty {
        if (deals.length == 0) return;
        market.claimEpochs(_pick(i), upTo % 7);
    }
}

/// @notice Invariant: a provider that commits every epoch honestly and answers every
///         challenge is never faulted, whatever the owner and auditors do.
contract CommittingProviderInvariantTest is MarketFixture {
    CommittingHandler internal handler;

    function setUp() public override {
        super.setUp();
        handler = new CommittingHandler(market, token, OWNER_PK, PROVIDER_PK, challenger);
    }

    function targetContracts() public view returns (address[] memory t) {
        t = new address[](1);
        t[0] = address(handler);
    }

    function invariant_committingDutiesNeverFail() public view {
        vm.assertEq(handler.dutyFailure(), "");
    }

    function invariant_committingNeverSlashed() public view {
        for (uint256 i; i < handler.dealCount(); ++i) {
            uint256 id = handler.deals(i);
            IDporMarket.Deal memory d = market.getDeal(id);
            vm.assertEq(d.failures, 0, "fault on an honest committing provider");
            vm.assertTrue(d.state != IDporMarket.DealState.Terminated, "terminated");
            if (d.state == IDporMarket.DealState.Active) {
                vm.assertEq(d.collateral, handler.lockedCollateral(id), "collateral slashed");
            }
        }
    }
}

/// @notice The committing handler really commits, answers challenges (auditors' and
///         safety draws) and gets every epoch paid through claims and close.
contract CommittingHandlerSanityTest is MarketFixture {
    CommittingHandler internal handler;

    function setUp() public override {
        super.setUp();
        handler = new CommittingHandler(market, token, OWNER_PK, PROVIDER_PK, challenger);
        handler.openDeal(1, 3, 1); // N = 2, 4 epochs, K = 2
        handler.openDeal(2, 3, 0); // N = 4, 4 epochs, K = 1
        handler.postDigest(0, 1, 0);
        handler.postDigest(1, 2, 0);
    }

    function test_commitsAnswersAndIsPaid() public {
        handler.warp(uint32(EPOCH - 1)); // into deal epoch 0: commit
        vm.assertEq(handler.commits(), 2); // epoch 0 (no deal yet) and deal epoch 0
        handler.challenge(0, 0, false);
        handler.challenge(1, 0, true);
        vm.assertEq(handler.challengeAnswers(), 2);
        for (uint256 i; i < 8; ++i) handler.warp(uint32(EPOCH - 1));
        handler.closeDeal(0);
        handler.closeDeal(1);
        vm.assertEq(handler.dutyFailure(), "");
        for (uint256 i; i < 2; ++i) {
            IDporMarket.Deal memory d = market.getDeal(handler.deals(i));
            vm.assertEq(uint256(d.state), uint256(IDporMarket.DealState.Completed));
            vm.assertEq(d.failures, 0);
            for (uint64 e; e < d.numEpochs; ++e) {
                vm.assertEq(uint256(market.epochStatus(d.numBlocks == 2 ? 1 : 2, e)), uint256(IDporMarket.EpochStatus.Proven));
            }
        }
        // 2 deals × 4 epochs of pay (N·1e18 each), both bonds, all collateral back
        uint256 pay = 4 * 2e18 + 4 * 4e18;
        vm.assertEq(market.owed(provider), pay + 2 * BOND + 2 * COLLATERAL + 4 * COLLATERAL);
    }

    function test_negativeControl_missedCommitmentIsAFault() public {
        (, uint256 deadline) = market.epochWindow(1, 0);
        vm.warp(deadline); // the whole window of epoch 0 passes without the provider's turn
        handler.markMissed(0, 0);
        vm.assertEq(market.getDeal(1).failures, 1); // invariant_committingNeverSlashed would fail
    }
}
