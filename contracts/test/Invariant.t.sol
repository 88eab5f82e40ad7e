// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {MarketFixture, TreeKit} from "./utils/MarketFixture.sol";
import {TestBase} from "./utils/Vm.sol";
import {TestToken} from "../src/token/TestToken.sol";
import {DporMarket} from "../src/DporMarket.sol";
import {IDporMarket, IDporMarketFull} from "../src/market/IDporMarket.sol";
import {Digest, SampleProof, BlockProof} from "../src/lib/DporTypes.sol";
import {DporMerkle} from "../src/lib/DporMerkle.sol";
import {DporCommitment} from "../src/lib/DporCommitment.sol";

/// @notice Drives the market with random, mostly valid call sequences (any provider
///         behaviour: it proves only when called, so faults, slashes and terminations occur).
contract Handler is TestBase, TreeKit {
    IDporMarketFull internal market;
    TestToken internal token;
    uint256 internal ownerPk;
    uint256 internal providerPk;
    address public owner;
    address public provider;
    address public challenger;
    uint32 internal constant BETA = 200;

    uint256[] public deals;
    uint256[] public disputes;
    mapping(uint256 => uint64) public lastVersion;
    mapping(bytes32 => Digest) internal preimage;
    bool public versionDecreased;
    bool public overWithdrawn;
    uint256 public calls;
    uint256 public resizes;

    constructor(IDporMarketFull m, TestToken t, uint256 oPk, uint256 pPk, address c) {
        market = m;
        token = t;
        ownerPk = oPk;
        providerPk = pPk;
        owner = vm.addr(oPk);
        provider = vm.addr(pPk);
        challenger = c;
    }

    modifier checked() {
        ++calls;
        _;
        for (uint256 i; i < deals.length; ++i) {
            uint64 v = market.getDeal(deals[i]).digestVersion;
            if (v < lastVersion[deals[i]]) versionDecreased = true;
            lastVersion[deals[i]] = v;
        }
    }

    function dealCount() external view returns (uint256) {
        return deals.length;
    }

    function disputeCount() external view returns (uint256) {
        return disputes.length;
    }

    function _pick(uint256 i) internal view returns (uint256) {
        return deals[i % deals.length];
    }

    function openDeal(uint8 nExp, uint8 epochs, bool accept) external checked {
        uint64 n = uint64(1) << (nExp % 3);
        vm.prank(owner);
        uint256 id = market.openDeal(provider, n, BETA, 4, 1, 1 + epochs % 4, 1e18, 0);
        deals.push(id);
        if (accept) {
            vm.prank(provider);
            market.acceptDeal(id);
        }
    }

    function acceptDeal(uint256 i) external checked {
        if (deals.length == 0) return;
        vm.prank(provider);
        market.acceptDeal(_pick(i));
    }

    function cancelDeal(uint256 i) external checked {
        if (deals.length == 0) return;
        vm.prank(owner);
        market.cancelDeal(_pick(i));
    }

    function postDigest(uint256 i, uint64 t, uint8 skip) external checked {
        if (deals.length == 0) return;
        uint256 id = _pick(i);
        IDporMarket.Deal memory d = market.getDeal(id);
        if (d.numBlocks == 0) return;
        Digest memory g = buildDigest(id, d.digestVersion + 1 + skip % 3, d.numBlocks, t % d.numBlocks, 0, BETA);
        bytes32 h = market.digestHash(g);
        (uint8 v1, bytes32 r1, bytes32 s1) = vm.sign(ownerPk, h);
        (uint8 v2, bytes32 r2, bytes32 s2) = vm.sign(providerPk, h);
        market.postDigest(g, abi.encodePacked(r1, s1, v1), abi.encodePacked(r2, s2, v2));
        preimage[h] = g;
    }

    /// Resizes a deal (App. A.3) to N ∈ {1, 2, 4}, a per-block price of 0..2 tokens and a
    /// collateral of 0..6 tokens per block (so the collateral bound below still holds);
    /// the escrow and collateral differences are pulled or credited.
    function resize(uint256 i, uint8 nExp, uint8 skip, uint8 priceSel, uint8 colSel) external checked {
        if (deals.length == 0) return;
        uint256 id = _pick(i);
        IDporMarket.Deal memory d = market.getDeal(id);
        if (d.numBlocks == 0) return;
        uint64 n = uint64(1) << (nExp % 3);
        Digest memory g = buildDigest(id, d.digestVersion + 1 + skip % 3, n, 0, 0, BETA);
        uint128 price = uint128(n) * (priceSel % 3) * 1e18;
        uint128 col = uint128(n) * (colSel % 7) * 1e18;
        bytes32 h = market.resizeHash(g, price, col);
        (uint8 v1, bytes32 r1, bytes32 s1) = vm.sign(ownerPk, h);
        (uint8 v2, bytes32 r2, bytes32 s2) = vm.sign(providerPk, h);
        market.resizeDeal(g, price, col, abi.encodePacked(r1, s1, v1), abi.encodePacked(r2, s2, v2));
        preimage[market.digestHash(g)] = g;
        ++resizes;
    }

    /// Tries a stale version: must always revert, and the version must not move.
    function postStale(uint256 i) external checked {
        if (deals.length == 0) return;
        uint256 id = _pick(i);
        IDporMarket.Deal memory d = market.getDeal(id);
        if (d.digestVersion == 0) return;
        Digest memory g = buildDigest(id, d.digestVersion, d.numBlocks, 0, 0, BETA);
        bytes32 h = market.digestHash(g);
        (uint8 v1, bytes32 r1, bytes32 s1) = vm.sign(ownerPk, h);
        (uint8 v2, bytes32 r2, bytes32 s2) = vm.sign(providerPk, h);
        try market.postDigest(g, abi.encodePacked(r1, s1, v1), abi.encodePacked(r2, s2, v2)) {
            versionDecreased = true;
        } catch {}
    }

    function proveCurrentEpoch(uint256 i) external checked {
        if (deals.length == 0) return;
        uint256 id = _pick(i);
        IDporMarket.Deal memory d = market.getDeal(id);
        if (d.state != IDporMarket.DealState.Active) return;
        uint256 g0 = (block.timestamp - market.genesis()) / market.epochSeconds();
        if (g0 < d.startEpoch) return;
        uint64 e = uint64(g0 - d.startEpoch);
        if (e >= d.numEpochs) return;
        (, bytes32 h,) = market.digestInForce(id, e);
        if (h == bytes32(0)) return;
        Digest memory g = preimage[h];
        BlockProof[] memory ps = new BlockProof[](1);
        (uint8 tag, uint64 pos) = market.epochSample(id, e, 0);
        ps[0] = buildBlockProof(tag, pos, g.numBlocks, BETA); // the N of the digest in force (resizes)
        market.submitEpochProof(id, e, g, ps);
    }

    function markMissed(uint256 i, uint8 e) external checked {
        if (deals.length == 0) return;
        market.markMissed(_pick(i), e % 4);
    }

    function warp(uint32 secs) external checked {
        vm.warp(block.timestamp + 1 + secs % 2 days);
    }

    function requestExit(uint256 i, bool byOwner) external checked {
        if (deals.length == 0) return;
        vm.prank(byOwner ? owner : provider);
        market.requestExit(_pick(i));
    }

    function exitBeforeUpload(uint256 i, bool byOwner) external checked {
        if (deals.length == 0) return;
        vm.prank(byOwner ? owner : provider);
        market.exitBeforeUpload(_pick(i));
    }

    function openDispute(uint256 i, uint64 pos, uint32 ci) external checked {
        if (deals.length == 0) return;
        uint256 id = _pick(i);
        IDporMarket.Deal memory d = market.getDeal(id);
        vm.prank(challenger);
        uint256 q = market.openDispute(id, 0, d.digestVersion, bytes32("x"), 0, pos % (2 * d.numBlocks), ci % 2);
        disputes.push(q);
    }

    function answerDispute(uint256 k) external checked {
        if (disputes.length == 0) return;
        uint256 q = disputes[k % disputes.length];
        IDporMarket.Dispute memory x = market.getDispute(q);
        Digest memory g = preimage[x.digestHash];
        SampleProof memory p = buildProof(x.runTag, x.position, x.chunkIndex, g.numBlocks, BETA);
        vm.prank(provider);
        market.answerDispute(q, g, p);
    }

    function slash(uint256 k) external checked {
        if (disputes.length == 0) return;
        market.slash(disputes[k % disputes.length]);
    }

    function closeDeal(uint256 i) external checked {
        if (deals.length == 0) return;
        market.closeDeal(_pick(i));
    }

    // ------------------------------------------------------------ epoch commitments

    mapping(uint64 => bytes32[]) internal leavesOf;
    mapping(uint64 => mapping(uint256 => uint256)) internal indexOf;

    /// The provider commits the current global epoch: honestly (a tree over the honest
    /// responses of its deals) or a garbage root.
    function commitEpoch(bool honest) external checked {
        uint64 g = uint64((block.timestamp - market.genesis()) / market.epochSeconds());
        bytes32 root = keccak256(abi.encode("garbage", g));
        uint32 count;
        if (honest) {
            delete leavesOf[g];
            for (uint256 i; i < deals.length; ++i) {
                uint256 id = deals[i];
                IDporMarket.Deal memory d = market.getDeal(id);
                if (d.state != IDporMarket.DealState.Active || g < d.startEpoch || g - d.startEpoch >= d.numEpochs) {
                    continue;
                }
                uint64 e = g - d.startEpoch;
                (, bytes32 h,) = market.digestInForce(id, e);
                if (h == bytes32(0)) continue;
                leavesOf[g].push(_leafOf(id, e, preimage[h]));
                indexOf[g][id] = leavesOf[g].length;
            }
            root = DporMerkle.rootOfLeaves(leavesOf[g]);
            count = uint32(leavesOf[g].length);
        }
        vm.prank(provider);
        market.commitEpoch(g, root, count);
    }

    function _proofsOf(uint256 id, uint64 e, Digest memory g) internal view returns (BlockProof[] memory ps) {
        ps = new BlockProof[](market.getDeal(id).samplesPerEpoch);
        for (uint256 j; j < ps.length; ++j) {
            (uint8 tag, uint64 pos) = market.epochSample(id, e, j);
            ps[j] = buildBlockProof(tag, pos, g.numBlocks, BETA);
        }
    }

    function _leafOf(uint256 id, uint64 e, Digest memory g) internal view returns (bytes32) {
        BlockProof[] memory ps = _proofsOf(id, e, g);
        bytes[] memory blocks = new bytes[](ps.length);
        for (uint256 j; j < ps.length; ++j) blocks[j] = ps[j].codedBlock;
        return DporCommitment.leaf(id, e, g.version, DporCommitment.responseHash(market.peekSeed(id, e), blocks));
    }

    function challengeEntry(uint256 i, uint8 e) external checked {
        if (deals.length == 0) return;
        vm.prank(challenger);
        market.challengeEntry(_pick(i), e % 4);
    }

    /// The provider answers challenge k with its honest response (fails when it committed garbage).
    function answerChallenge(uint256 k) external checked {
        uint256 n = market.challengeCount();
        if (n == 0) return;
        uint256 c = 1 + k % n;
        IDporMarket.Challenge memory ch = market.getChallenge(c);
        uint64 g = market.getDeal(ch.dealId).startEpoch + ch.epoch;
        (, bytes32 h,) = market.digestInForce(ch.dealId, ch.epoch);
        uint256 idx = indexOf[g][ch.dealId];
        if (idx == 0) return;
        Digest memory dg = preimage[h];
        BlockProof[] memory ps = _proofsOf(ch.dealId, ch.epoch, dg);
        bytes32[] memory path = DporMerkle.pathOf(leavesOf[g], idx - 1);
        vm.prank(provider);
        market.answerChallenge(c, dg, ps, idx - 1, path);
    }

    function faultChallenge(uint256 k) external checked {
        uint256 n = market.challengeCount();
        if (n == 0) return;
        market.faultChallenge(1 + k % n);
    }

    function claimEpochs(uint256 i, uint8 upTo) external checked {
        if (deals.length == 0) return;
        market.claimEpochs(_pick(i), upTo % 6);
    }

    function withdraw(uint8 who) external checked {
        address a = [owner, provider, challenger][who % 3];
        uint256 due = market.owed(a);
        uint256 before = token.balanceOf(a);
        vm.prank(a);
        try market.withdraw() returns (uint256 got) {
            if (got != due || token.balanceOf(a) != before + due || market.owed(a) != 0) overWithdrawn = true;
        } catch {
            if (due != 0) overWithdrawn = true;
        }
    }
}

/// @notice Invariants over random call sequences (forge `invariant_*`).
contract InvariantTest is MarketFixture {
    Handler internal handler;

    function setUp() public override {
        super.setUp();
        handler = new Handler(market, token, OWNER_PK, PROVIDER_PK, challenger);
        address[3] memory who = [owner, provider, challenger];
        for (uint256 i; i < 3; ++i) {
            token.mint(who[i], 1e30);
        }
    }

    /// Forge fuzzes only the handler.
    function targetContracts() public view returns (address[] memory t) {
        t = new address[](1);
        t[0] = address(handler);
    }

    /// The market holds exactly escrow + collateral + open bonds + stakes + what it owes.
    function invariant_tokensConserved() public view {
        uint256 sum = market.getProvider(provider).stake;
        for (uint256 i = 1; i <= market.dealCount(); ++i) {
            IDporMarket.Deal memory d = market.getDeal(i);
            sum += d.escrow;
            if (d.state != IDporMarket.DealState.Open) sum += d.collateral; // Open: required, not yet locked
        }
        for (uint256 q = 1; q <= market.disputeCount(); ++q) {
            IDporMarket.Dispute memory x = market.getDispute(q);
            if (x.state == IDporMarket.DisputeState.Open) sum += x.bond;
        }
        for (uint256 c = 1; c <= market.challengeCount(); ++c) {
            IDporMarket.Challenge memory x = market.getChallenge(c);
            if (x.state == IDporMarket.ChallengeState.Open) sum += x.bond;
        }
        sum += market.owed(owner) + market.owed(provider) + market.owed(challenger);
        vm.assertEq(token.balanceOf(address(market)), sum, "token conservation");
    }

    /// Every withdrawal paid exactly what was owed, never more.
    function invariant_noOverWithdraw() public view {
        vm.assertFalse(handler.overWithdrawn(), "withdrew more (or other) than owed");
    }

    /// A deal's digest version never decreases.
    function invariant_versionMonotone() public view {
        vm.assertFalse(handler.versionDecreased(), "digest version decreased or stale accepted");
        for (uint256 i; i < handler.dealCount(); ++i) {
            uint256 id = handler.deals(i);
            vm.assertGe(market.getDeal(id).digestVersion, handler.lastVersion(id));
        }
    }

    /// Collateral never exceeds what was locked; escrow never exceeds what was paid in.
    function invariant_dealBounds() public view {
        for (uint256 i = 1; i <= market.dealCount(); ++i) {
            IDporMarket.Deal memory d = market.getDeal(i);
            vm.assertLe(d.numEpochs, d.termEpochs);
            vm.assertLe(d.escrow, uint256(d.pricePerEpoch) * d.termEpochs);
            vm.assertLe(d.collateral, uint256(d.numBlocks) * COLLATERAL);
            if (d.failures >= MAX_FAILURES) vm.assertEq(uint256(d.state), uint256(IDporMarket.DealState.Terminated));
            if (d.state == IDporMarket.DealState.Active) vm.assertLe(d.settledWithDigest, d.numEpochs);
            // what resizeDeal relies on: escrow = price × unsettled epochs, a whole multiple
            if (d.state == IDporMarket.DealState.Active && d.pricePerEpoch != 0) {
                vm.assertEq(d.escrow % d.pricePerEpoch, 0);
            }
        }
    }

    /// The provider's used capacity is the sum of the N of its active deals (accept,
    /// resizes, close and termination keep it so).
    function invariant_capacityAccounted() public view {
        uint256 used;
        for (uint256 i = 1; i <= market.dealCount(); ++i) {
            IDporMarket.Deal memory d = market.getDeal(i);
            if (d.state == IDporMarket.DealState.Active) used += d.numBlocks;
        }
        vm.assertEq(market.getProvider(provider).usedBlocks, used, "capacity accounting");
    }

    /// The provider's on-chain deal list (safety draws) is exactly its Active deals, each
    /// at its recorded index; a deal's open disputes count its open disputes and challenges.
    function invariant_dealListAndOpenCounts() public view {
        uint256[] memory list = market.providerDeals(provider);
        uint256 active;
        for (uint256 i = 1; i <= market.dealCount(); ++i) {
            if (market.getDeal(i).state == IDporMarket.DealState.Active) ++active;
        }
        vm.assertEq(list.length, active, "list length");
        for (uint256 i; i < list.length; ++i) {
            IDporMarket.Deal memory d = market.getDeal(list[i]);
            vm.assertEq(uint256(d.state), uint256(IDporMarket.DealState.Active), "listed deal not active");
            vm.assertEq(d.listIndex, i, "list index");
        }
        uint256[] memory open = new uint256[](market.dealCount() + 1);
        for (uint256 q = 1; q <= market.disputeCount(); ++q) {
            IDporMarket.Dispute memory x = market.getDispute(q);
            if (x.state == IDporMarket.DisputeState.Open) ++open[x.dealId];
        }
        for (uint256 c = 1; c <= market.challengeCount(); ++c) {
            IDporMarket.Challenge memory x = market.getChallenge(c);
            if (x.state == IDporMarket.ChallengeState.Open) {
                ++open[x.dealId];
                vm.assertEq(
                    uint256(market.epochStatus(x.dealId, x.epoch)), uint256(IDporMarket.EpochStatus.Challenged)
                );
            }
        }
        for (uint256 i = 1; i <= market.dealCount(); ++i) {
            vm.assertEq(market.getDeal(i).openDisputes, open[i], "open disputes + challenges");
        }
    }
}

/// @notice The handler's commitment actions do reach the market (so the invariants above
///         see open, answered and faulted challenges and claims).
contract InvariantHandlerCommitTest is MarketFixture {
    Handler internal handler;

    function setUp() public override {
        super.setUp();
        handler = new Handler(market, token, OWNER_PK, PROVIDER_PK, challenger);
    }

    function test_handlerCommitsChallengesAnswersFaultsClaims() public {
        handler.openDeal(1, 3, true); // N = 2, 4 epochs
        handler.postDigest(0, 1, 0);
        vm.warp(T0 + EPOCH + 1); // deal epoch 0
        handler.commitEpoch(true);
        if (market.challengeCount() == 0) handler.challengeEntry(0, 0);
        handler.answerChallenge(0);
        vm.assertEq(uint256(market.getChallenge(1).state), uint256(IDporMarket.ChallengeState.Answered));
        vm.warp(T0 + 2 * EPOCH + 1); // deal epoch 1: garbage root, challenged, faulted
        handler.commitEpoch(false);
        uint256 n = market.challengeCount();
        if (market.getChallenge(n).epoch != 1) handler.challengeEntry(0, 1);
        n = market.challengeCount();
        vm.warp(block.timestamp + ANSWER + 1);
        handler.faultChallenge(n - 1);
        vm.assertEq(uint256(market.getChallenge(n).state), uint256(IDporMarket.ChallengeState.Faulted));
        vm.assertEq(market.getDeal(1).failures, 1);
        vm.warp(T0 + 10 * EPOCH);
        handler.claimEpochs(0, 5);
        vm.assertEq(market.getDeal(1).claimCursor, 4);
    }
}
