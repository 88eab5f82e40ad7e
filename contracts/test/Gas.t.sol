// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {MarketFixture} from "./utils/MarketFixture.sol";
import {IDporMarket, IDporMarketFull} from "../src/market/IDporMarket.sol";
import {DporCommitmentsExt} from "../src/market/DporCommitmentsExt.sol";
import {DporMarket} from "../src/DporMarket.sol";
import {IRandomnessBeacon} from "../src/market/IRandomnessBeacon.sol";
import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {Digest, SampleProof, BlockProof} from "../src/lib/DporTypes.sol";
import {DporMerkle} from "../src/lib/DporMerkle.sol";
import {DporSampling} from "../src/lib/DporSampling.sol";
import {DporCommitment} from "../src/lib/DporCommitment.sol";

/// @notice Gas of the main operations for a 2^20-block file of 4 KiB blocks with ten
///         filled levels (docs/PERFORMANCE.md). Run with
///         `npx forge test --match-contract GasTest -vv`.
///
///         Every coded block has the same pseudo-random (almost all non-zero) content,
///         the worst case for calldata. Level runs are real trees; the C tree (2^21
///         leaves) is real for positions 0..1023 and uses arbitrary sibling hashes
///         above height 10; the beacon is salted until the sampled C positions fall in
///         that part. Before each measured call every touched account is cooled
///         (vm.cool), so storage and account accesses are cold as in a lone transaction.
///         Reported: execution gas (the call, measured) and the whole transaction's gas
///         under EIP-7623 (prague): 21000 + max(4·tokens + execution, 10·tokens),
///         tokens = zero bytes + 4·non-zero bytes of the calldata.
contract GasTest is MarketFixture {
    uint64 internal constant N = 1 << 20;
    uint32 internal constant B = 4096;
    uint256 internal constant LOW = 10;

    bytes internal blk;
    bytes32 internal blkRoot;
    bytes32[] internal lowLeaves;
    bytes32[] internal upper;
    Digest internal dg;

    function setUp() public override {
        super.setUp();
        blk = codedBlock(0, 0, DporSampling.codedBlockBytes(B));
        blkRoot = DporMerkle.blockRoot(blk);
        bytes32[] memory low = new bytes32[](1 << LOW);
        for (uint256 p; p < low.length; ++p) low[p] = DporMerkle.runLeaf(p, blkRoot);
        lowLeaves = low;
        bytes32 root = DporMerkle.rootOfLeaves(low);
        for (uint256 hgt = LOW; hgt < 21; ++hgt) {
            bytes32 s = keccak256(abi.encode("sib", hgt));
            upper.push(s);
            root = DporMerkle.node(root, s);
        }
        dg.numBlocks = N;
        dg.writeCount = 0x3ff; // ten filled levels
        dg.rebuildCount = 1;
        dg.rootU = keccak256("U");
        dg.rootC = root;
        // level ℓ (size 2^(ℓ+1)) over copies of the same block: its real root is the
        // root of the first 2^(ℓ+1) low leaves.
        for (uint256 l; l < 10; ++l) {
            bytes32[] memory lv = new bytes32[](uint256(1) << (l + 1));
            for (uint256 p; p < lv.length; ++p) lv[p] = low[p];
            dg.levelRoots.push(DporMerkle.rootOfLeaves(lv));
        }
    }

    function _tokens(bytes memory data) internal pure returns (uint256 t) {
        for (uint256 i; i < data.length; ++i) t += data[i] == 0 ? 1 : 4;
    }

    function _cool() internal {
        vm.cool(address(market));
        vm.cool(market.extension());
        vm.cool(market.commitments());
        vm.cool(market.verifier());
        vm.cool(address(beacon));
        vm.cool(address(token));
    }

    /// @dev Logs execution gas, calldata bytes and EIP-7623 transaction gas; returns the latter.
    function _report(string memory name, uint256 exec, bytes memory data) internal returns (uint256 txGas) {
        uint256 tokens = _tokens(data);
        uint256 standard = 4 * tokens + exec;
        uint256 floor = 10 * tokens;
        txGas = 21000 + (standard > floor ? standard : floor);
        emit log_named_uint(string.concat(name, ": execution gas"), exec);
        emit log_named_uint(string.concat(name, ": calldata bytes"), data.length);
        emit log_named_uint(string.concat(name, ": tx gas (EIP-7623)"), txGas);
    }

    /// @dev Whole-block proof of position `pos` of run `tag` (every block is `blk`).
    function _blockProof(uint256 tag, uint256 pos) internal view returns (BlockProof memory p) {
        p.runTag = uint8(tag);
        p.position = uint64(pos);
        p.codedBlock = blk;
        bytes32[] memory lowPath = DporMerkle.pathOf(lowLeaves, pos);
        if (tag == 0) {
            p.runPath = new bytes32[](21);
            for (uint256 i; i < LOW; ++i) p.runPath[i] = lowPath[i];
            for (uint256 i; i < upper.length; ++i) p.runPath[LOW + i] = upper[i];
        } else {
            bytes32[] memory lv = new bytes32[](uint256(1) << tag);
            for (uint256 i; i < lv.length; ++i) lv[i] = lowLeaves[i];
            p.runPath = DporMerkle.pathOf(lv, pos);
        }
    }

    function _chunkProof(uint256 pos, uint256 ci) internal view returns (SampleProof memory p) {
        bytes32[] memory leaves = DporMerkle.chunkLeaves(blk);
        p.runTag = 0;
        p.position = uint64(pos);
        p.chunkIndex = uint32(ci);
        p.chunk = DporMerkle.chunkAt(blk, ci);
        p.chunkPath = DporMerkle.pathOf(leaves, ci);
        bytes32[] memory lowPath = DporMerkle.pathOf(lowLeaves, pos);
        p.runPath = new bytes32[](21);
        for (uint256 i; i < LOW; ++i) p.runPath[i] = lowPath[i];
        for (uint256 i; i < upper.length; ++i) p.runPath[LOW + i] = upper[i];
    }

    function _deal(uint8 k) internal returns (uint256 id, Digest memory d) {
        bytes memory data = abi.encodeCall(market.openDeal, (provider, N, B, 128, k, 10, PRICE, COLLATERAL));
        _cool();
        vm.prank(owner);
        uint256 g = gasleft();
        id = market.openDeal(provider, N, B, 128, k, 10, PRICE, COLLATERAL);
        _report("openDeal", g - gasleft(), data);
        data = abi.encodeCall(market.acceptDeal, (id));
        _cool();
        vm.prank(provider);
        g = gasleft();
        market.acceptDeal(id);
        _report("acceptDeal", g - gasleft(), data);
        d = dg;
        d.dealId = id;
        d.version = 1;
        _postOne(d, "postDigest (first, 10 level roots)");
        d.version = 2;
        _postOne(d, "postDigest (next, 10 level roots)");
    }

    function _postOne(Digest memory d, string memory name) internal {
        bytes32 h = market.digestHash(d);
        bytes memory so = _sig(OWNER_PK, h);
        bytes memory sp = _sig(PROVIDER_PK, h);
        bytes memory data = abi.encodeCall(market.postDigest, (d, so, sp));
        _cool();
        uint256 g = gasleft();
        market.postDigest(d, so, sp);
        _report(name, g - gasleft(), data);
    }

    /// @dev Salts the beacon until every sample of epoch 0 is provable here (C positions
    ///      below 2^LOW); returns the proofs.
    function _grind(uint256 id, Digest memory d, uint256 k) internal returns (BlockProof[] memory ps) {
        return _grindAt(id, d, k, 0);
    }

    function _grindAt(uint256 id, Digest memory d, uint256 k, uint64 e) internal returns (BlockProof[] memory ps) {
        bytes32 h = market.digestHash(d);
        (uint256 start,) = market.epochWindow(id, e);
        vm.warp(start + 60);
        uint64 round = beacon.roundAt(start);
        for (uint256 i;; ++i) {
            beacon.setSalt(keccak256(abi.encode("grind", i)));
            bytes32 seed = keccak256(abi.encode(beacon.randomness(round), id, uint256(e)));
            if (_provable(seed, h, k)) break;
        }
        ps = new BlockProof[](k);
        for (uint256 j; j < k; ++j) {
            (uint8 tag, uint64 p) = market.epochSample(id, e, j);
            ps[j] = _blockProof(tag, p);
        }
    }

    function _provable(bytes32 seed, bytes32 h, uint256 k) internal pure returns (bool) {
        for (uint256 j; j < k; ++j) {
            (uint256 tag, uint256 p) = DporSampling.epochSample(seed, h, j, N, 0x3ff);
            if (tag == 0 && p >= (1 << LOW)) return false;
        }
        return true;
    }

    function _epoch(uint256 id, Digest memory d, uint8 k, bool seedStored) internal returns (uint256 txGas) {
        BlockProof[] memory ps = _grind(id, d, k);
        if (seedStored) market.touchSeed(id, 0);
        bytes memory data = abi.encodeCall(market.submitEpochProof, (id, 0, d, ps));
        _cool();
        uint256 g = gasleft();
        market.submitEpochProof(id, 0, d, ps);
        uint256 exec = g - gasleft();
        string memory name = string.concat(
            "submitEpochProof (N=2^20, 10 levels, K=",
            vm.toString(uint256(k)),
            seedStored ? ", seed already stored)" : ", first touch of the global seed)"
        );
        txGas = _report(name, exec, data);
        vm.assertEq(uint256(market.epochStatus(id, 0)), uint256(IDporMarket.EpochStatus.Proven));
    }

    function test_gas_epochProof_K1() public {
        (uint256 id, Digest memory d) = _deal(1);
        _epoch(id, d, 1, false);
    }

    function test_gas_epochProof_K1_seedStored() public {
        (uint256 id, Digest memory d) = _deal(1);
        _epoch(id, d, 1, true);
    }

    /// Steady state: a later epoch of the deal (status word and the provider's owed
    /// balance already non-zero) whose global seed another deal's proof already stored.
    function _steady(uint8 k) internal {
        (uint256 id, Digest memory d) = _deal(k);
        BlockProof[] memory ps = _grind(id, d, k);
        market.submitEpochProof(id, 0, d, ps);
        ps = _grindAt(id, d, k, 1);
        market.touchSeed(id, 1);
        bytes memory data = abi.encodeCall(market.submitEpochProof, (id, 1, d, ps));
        _cool();
        uint256 g = gasleft();
        market.submitEpochProof(id, 1, d, ps);
        uint256 exec = g - gasleft();
        _report(
            string.concat("submitEpochProof (N=2^20, 10 levels, K=", vm.toString(uint256(k)), ", steady state)"),
            exec,
            data
        );
    }

    function test_gas_epochProof_K1_steady() public {
        _steady(1);
    }

    function test_gas_epochProof_K2_steady() public {
        _steady(2);
    }

    function test_gas_epochProof_K2() public {
        (uint256 id, Digest memory d) = _deal(2);
        _epoch(id, d, 2, false);
    }

    function test_gas_epochProof_K2_seedStored() public {
        (uint256 id, Digest memory d) = _deal(2);
        _epoch(id, d, 2, true);
    }

    /// resizeDeal (App. A.3) of the 2^20-block deal: a grow to 2^21 (escrow and collateral
    /// pulled, the new C root, no levels) and a shrink back (both differences credited).
    function test_gas_resizeDeal() public {
        (uint256 id,) = _deal(1);
        _resizeOne(id, 3, 2 * N, "resizeDeal (grow 2^20 -> 2^21, escrow and collateral pulled)");
        _resizeOne(id, 4, N, "resizeDeal (shrink 2^21 -> 2^20, both differences credited)");
    }

    function _resizeOne(uint256 id, uint64 v, uint64 n, string memory name) internal {
        Digest memory d;
        d.dealId = id;
        d.version = v;
        d.numBlocks = n;
        d.rebuildCount = 2;
        d.rootU = keccak256(abi.encode("U", v));
        d.rootC = keccak256(abi.encode("C", v));
        uint128 price = uint128(n) * PRICE;
        uint128 col = uint128(n) * COLLATERAL;
        bytes32 h = market.resizeHash(d, price, col);
        bytes memory so = _sig(OWNER_PK, h);
        bytes memory sp = _sig(PROVIDER_PK, h);
        bytes memory data = abi.encodeCall(market.resizeDeal, (d, price, col, so, sp));
        _cool();
        uint256 g = gasleft();
        market.resizeDeal(d, price, col, so, sp);
        _report(name, g - gasleft(), data);
        vm.assertEq(market.getDeal(id).numBlocks, n);
    }

    function test_gas_deployment() public {
        uint256 g = gasleft();
        DporMarket m = new DporMarket(IERC20(address(token)), IRandomnessBeacon(address(beacon)), _params());
        emit log_named_uint("deployment of DporMarket + DporMarketExt + DporVerifier: execution gas", g - gasleft());
        g = gasleft();
        DporCommitmentsExt c = new DporCommitmentsExt(IDporMarketFull(address(m)));
        IDporMarketFull(address(m)).installCommitments(address(c));
        emit log_named_uint("deployment and installation of DporCommitmentsExt: execution gas", g - gasleft());
    }

    function test_gas_disputesAndOthers() public {
        (uint256 id, Digest memory d) = _deal(1);
        uint256 pos = 5;
        uint256 ci = 7;
        SampleProof memory p = _chunkProof(pos, ci);
        bytes memory data = abi.encodeCall(market.openDispute, (id, 0, 2, bytes32("t"), 0, uint64(pos), uint32(ci)));
        _cool();
        vm.prank(challenger);
        uint256 g = gasleft();
        uint256 q = market.openDispute(id, 0, 2, bytes32("t"), 0, uint64(pos), uint32(ci));
        _report("openDispute", g - gasleft(), data);
        data = abi.encodeCall(market.recordAudit, (id, 0, 2, true, bytes32("t")));
        _cool();
        g = gasleft();
        market.recordAudit(id, 0, 2, true, bytes32("t"));
        _report("recordAudit", g - gasleft(), data);
        data = abi.encodeCall(market.answerDispute, (q, d, p));
        _cool();
        g = gasleft();
        market.answerDispute(q, d, p);
        _report("answerDispute (N=2^20, one chunk)", g - gasleft(), data);

        vm.prank(challenger);
        q = market.openDispute(id, 0, 2, bytes32("t"), 0, 5, 5);
        vm.warp(block.timestamp + ANSWER + 1);
        data = abi.encodeCall(market.slash, (q));
        _cool();
        g = gasleft();
        market.slash(q);
        _report("slash", g - gasleft(), data);

        _pastEpoch(id, 1);
        data = abi.encodeCall(market.markMissed, (id, 1));
        _cool();
        g = gasleft();
        market.markMissed(id, 1);
        _report("markMissed", g - gasleft(), data);

        _pastGrace(id);
        data = abi.encodeCall(market.closeDeal, (id));
        _cool();
        g = gasleft();
        market.closeDeal(id);
        _report("closeDeal (faults the 8 remaining epochs at once)", g - gasleft(), data);

        data = abi.encodeCall(market.withdraw, ());
        _cool();
        vm.prank(owner);
        g = gasleft();
        market.withdraw();
        _report("withdraw", g - gasleft(), data);
    }

    // ------------------------------------------------------------ epoch commitments (docs/COMMITMENTS.md)

    /// @dev Opens and accepts `count` more small deals (N = 1) of the provider, each with a
    ///      digest. External (called as this.moreDeals) so the memory it uses does not
    ///      raise the measuring frame's memory cost.
    function moreDeals(uint256 count) external {
        for (uint256 i; i < count; ++i) {
            vm.prank(owner);
            uint256 id = market.openDeal(provider, 1, 64, 1, 1, 1000, PRICE, COLLATERAL);
            vm.prank(provider);
            market.acceptDeal(id);
            _post(buildDigest(id, 1, 1, 0, 0, 64));
        }
    }

    /// @dev Salts the beacon so that the provider's safety draw at g hits or misses.
    function _draw(uint64 g, bool hit) internal {
        uint64 round = beacon.roundAt(uint256(market.genesis()) + uint256(g) * EPOCH);
        for (uint256 i;; ++i) {
            beacon.setSalt(keccak256(abi.encode("draw", i)));
            uint256 r = uint256(keccak256(abi.encode(beacon.randomness(round), provider, "dpor.safety")));
            if ((r % 16 == 0) == hit) return;
        }
    }

    /// @dev Measures commitEpoch of global epoch g (warps into it).
    function _commitGas(uint64 g, bool hit, bool seedStored, string memory name) internal returns (uint256 exec) {
        vm.warp(uint256(market.genesis()) + uint256(g) * EPOCH + 60);
        _draw(g, hit);
        if (seedStored) market.recordSeed(g);
        bytes32 root = keccak256(abi.encode("root", g));
        bytes memory data = abi.encodeCall(market.commitEpoch, (g, root, 1000));
        _cool();
        vm.prank(provider);
        uint256 gl = gasleft();
        market.commitEpoch(g, root, 1000);
        exec = gl - gasleft();
        _report(name, exec, data);
    }

    /// commitEpoch costs the same whatever the number D of the provider's deals: no loop
    /// over deals; the deal list and its Fenwick tree are read only when the draw hits
    /// (test_gas_commitEpoch_drawByDeals).
    function test_gas_commitEpoch_flatInDeals() public {
        _commitGas(1, false, false, "commitEpoch (D=0, first commitment: fresh bitmap word)");
        uint256[4] memory ds = [uint256(1), 10, 100, 1000];
        uint256 have;
        uint256[4] memory got;
        for (uint256 i; i < 4; ++i) {
            this.moreDeals(ds[i] - have);
            have = ds[i];
            got[i] = _commitGas(
                uint64(2 + i), false, false, string.concat("commitEpoch (D=", vm.toString(have), ", no draw, stores the seed)")
            );
        }
        // flat in D: equal up to a few gas of calldata-dependent arithmetic
        for (uint256 i = 1; i < 4; ++i) {
            vm.assertLe(got[i], got[0] + 50);
            vm.assertGe(got[i] + 50, got[0]);
        }
        uint256 seeded = _commitGas(6, false, true, "commitEpoch (D=1000, no draw, seed already stored)");
        uint256 before = market.challengeCount();
        uint256 drawn = _commitGas(7, true, false, "commitEpoch (D=1000, safety draw opens a challenge)");
        vm.assertEq(market.challengeCount(), before + 1);
        vm.assertLt(got[0], 100_000);
        vm.assertLt(seeded, got[0]);
        vm.assertLt(drawn, 250_000);
    }

    /// commitEpoch whose safety draw opens a challenge, at D = 1, 10, 100, 1000 deals: the
    /// draw weighted by size descends the provider's Fenwick tree, ⌊log2 D⌋ + 1 node reads
    /// (docs/COMMITMENTS.md §5), so it grows with log D only. After a first commitment
    /// with a draw, so that each measured one writes warm-started words as in steady state.
    function test_gas_commitEpoch_drawByDeals() public {
        this.moreDeals(1);
        // the provider's first commitment and the market's first challenge (fresh words)
        _commitGas(1, true, false, "commitEpoch (D=1, first commitment, first challenge)");
        uint256[4] memory ds = [uint256(1), 10, 100, 1000];
        uint256 have = 1;
        uint256[4] memory got;
        for (uint256 i; i < 4; ++i) {
            this.moreDeals(ds[i] - have);
            have = ds[i];
            uint256 before = market.challengeCount();
            got[i] = _commitGas(
                uint64(2 + i),
                true,
                false,
                string.concat("commitEpoch (D=", vm.toString(have), ", safety draw opens a challenge)")
            );
            vm.assertEq(market.challengeCount(), before + 1);
        }
        vm.assertLt(got[3], 250_000);
        vm.assertTrue(got[3] < got[0] + 30_000, "O(log D)");
    }

    /// @dev Opens and accepts one deal of `n` blocks with no digest; returns it and the
    ///      measured acceptDeal execution gas.
    function acceptOne(uint64 n) external returns (uint256 id, uint256 exec) {
        vm.prank(owner);
        id = market.openDeal(provider, n, 64, 1, 1, 1000, PRICE, COLLATERAL);
        _cool();
        vm.prank(provider);
        uint256 gl = gasleft();
        market.acceptDeal(id);
        exec = gl - gasleft();
    }

    /// The Fenwick tree's updates (docs/COMMITMENTS.md §5) at D ≈ 1000: acceptDeal's
    /// append (1023 → 1024: 10 child nodes read, the longest; the mean over 24
    /// appends), a release from position 1 (exitBeforeUpload of a 2-block deal, the last
    /// deal of 1 block moving there: ⌊log2 D⌋ nodes written, the longest path, and the
    /// last node cleared) and a resize of position 1.
    function test_gas_dealListTree() public {
        (uint256 first,) = this.acceptOne(2); // position 1, no digest (exitable), 2 blocks
        this.moreDeals(999);
        uint256 sum;
        uint256 max;
        uint256 last;
        for (uint256 i; i < 24; ++i) {
            (uint256 id, uint256 exec) = this.acceptOne(1); // positions 1001..1024
            sum += exec;
            if (exec > max) max = exec;
            last = id;
        }
        emit log_named_uint("acceptDeal at D = 1000..1023: mean execution gas", sum / 24);
        emit log_named_uint("acceptDeal at D = 1023 (position 1024, 10 child nodes read): execution gas", max);
        vm.warp(block.timestamp + UPLOAD);
        bytes memory data = abi.encodeCall(market.exitBeforeUpload, (first));
        _cool();
        vm.prank(owner);
        uint256 gl = gasleft();
        market.exitBeforeUpload(first);
        _report("exitBeforeUpload (release of position 1 of 1024: 10 nodes + the last cleared)", gl - gasleft(), data);
        vm.assertEq(market.getDeal(last).listIndex, 0, "the last deal moved to position 1");
        _resizeOne(last, 1, 2, "resizeDeal (position 1 of 1023: 10 tree nodes written)");
    }

    /// challengeEntry, answerChallenge (N = 2^20, β = 4096, K = 1; the deal's leaf among
    /// 1024), faultChallenge and claimEpochs.
    function test_gas_challengeAndClaim() public {
        (uint256 id, Digest memory d) = _deal(1);
        uint64 g = _answerGas(id, d);
        _faultAndClaimGas(id, g);
    }

    /// @dev Commits a 1024-leaf tree with the deal's honest leaf of epoch 0 at index 517.
    function _commitTree(uint256 id, Digest memory d, BlockProof[] memory ps)
        internal
        returns (bytes32[] memory leaves, uint64 g)
    {
        g = market.getDeal(id).startEpoch;
        bytes[] memory blocks = new bytes[](1);
        blocks[0] = ps[0].codedBlock;
        leaves = new bytes32[](1024);
        for (uint256 i; i < leaves.length; ++i) leaves[i] = keccak256(abi.encode("other", i));
        leaves[517] = DporCommitment.leaf(id, 0, d.version, DporCommitment.responseHash(market.peekSeed(id, 0), blocks));
        vm.prank(provider);
        market.commitEpoch(g, DporMerkle.rootOfLeaves(leaves), 1024);
    }

    /// @dev The safety draw's challenge of the commitment if it took the deal, else a
    ///      measured challengeEntry.
    function _challengeGas(uint256 id, uint256 before) internal returns (uint256 cid) {
        if (market.challengeCount() > before) return before + 1;
        bytes memory data = abi.encodeCall(market.challengeEntry, (id, 0));
        _cool();
        vm.prank(challenger);
        uint256 gl = gasleft();
        cid = market.challengeEntry(id, 0);
        _report("challengeEntry", gl - gasleft(), data);
    }

    function _answerGas(uint256 id, Digest memory d) internal returns (uint64 g) {
        BlockProof[] memory ps = _grind(id, d, 1);
        uint256 before = market.challengeCount();
        bytes32[] memory leaves;
        (leaves, g) = _commitTree(id, d, ps);
        uint256 cid = _challengeGas(id, before);
        bytes32[] memory path = DporMerkle.pathOf(leaves, 517);
        bytes memory data = abi.encodeCall(market.answerChallenge, (cid, d, ps, 517, path));
        _cool();
        vm.prank(provider);
        uint256 gl = gasleft();
        market.answerChallenge(cid, d, ps, 517, path);
        uint256 answer = _report("answerChallenge (N=2^20, beta=4096, K=1, 1024 leaves)", gl - gasleft(), data);
        vm.assertLt(answer, 300_000);
        vm.assertEq(uint256(market.epochStatus(id, 0)), uint256(IDporMarket.EpochStatus.Proven));
    }

    function _faultAndClaimGas(uint256 id, uint64 g) internal {
        bytes memory data;
        uint256 gl;
        // an unanswered challenge on epoch 1, faulted
        vm.warp(uint256(market.genesis()) + uint256(g + 1) * EPOCH + 60);
        _draw(g + 1, false);
        vm.prank(provider);
        market.commitEpoch(g + 1, bytes32(uint256(1)), 1);
        data = abi.encodeCall(market.challengeEntry, (id, 1));
        _cool();
        vm.prank(challenger);
        gl = gasleft();
        uint256 c2 = market.challengeEntry(id, 1);
        _report("challengeEntry (epoch 1)", gl - gasleft(), data);
        vm.warp(block.timestamp + ANSWER + 1);
        data = abi.encodeCall(market.faultChallenge, (c2));
        _cool();
        gl = gasleft();
        market.faultChallenge(c2);
        _report("faultChallenge", gl - gasleft(), data);
        // commit epochs 2..9 and claim them all after their windows
        for (uint64 e = 2; e < 10; ++e) {
            vm.warp(uint256(market.genesis()) + uint256(g + e) * EPOCH + 60);
            _draw(g + e, false);
            vm.prank(provider);
            market.commitEpoch(g + e, bytes32(uint256(1)), 1);
        }
        vm.warp(block.timestamp + EPOCH + GRACE);
        data = abi.encodeCall(market.claimEpochs, (id, 10));
        _cool();
        gl = gasleft();
        market.claimEpochs(id, 10);
        _report("claimEpochs (8 committed epochs)", gl - gasleft(), data);
        vm.assertEq(market.getDeal(id).claimCursor, 10);
    }

    /// claimEpochs over 120 committed epochs (30 days of 6-h epochs): the per-epoch cost.
    function test_gas_claimEpochs_perEpoch() public {
        vm.prank(owner);
        uint256 id = market.openDeal(provider, 1, 64, 1, 1, 120, PRICE, COLLATERAL);
        vm.prank(provider);
        market.acceptDeal(id);
        Digest memory d = buildDigest(id, 1, 1, 0, 0, 64);
        _post(d);
        uint64 g0 = market.getDeal(id).startEpoch;
        for (uint64 e; e < 120; ++e) {
            vm.warp(uint256(market.genesis()) + uint256(g0 + e) * EPOCH + 1);
            _draw(g0 + e, false);
            vm.prank(provider);
            market.commitEpoch(g0 + e, bytes32(uint256(1)), 1);
        }
        vm.warp(block.timestamp + EPOCH + GRACE);
        bytes memory data = abi.encodeCall(market.claimEpochs, (id, 120));
        _cool();
        uint256 gl = gasleft();
        market.claimEpochs(id, 120);
        uint256 exec = gl - gasleft();
        _report("claimEpochs (120 committed epochs)", exec, data);
        emit log_named_uint("claimEpochs: execution gas per epoch (120)", exec / 120);
        vm.assertEq(market.getDeal(id).claimCursor, 120);
    }
}
