// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {TestBase} from "./Vm.sol";
import {TestToken} from "../../src/token/TestToken.sol";
import {DporMarket} from "../../src/DporMarket.sol";
import {DporCommitmentsExt} from "../../src/market/DporCommitmentsExt.sol";
import {IDporMarket, IDporMarketFull} from "../../src/market/IDporMarket.sol";
import {IRandomnessBeacon} from "../../src/market/IRandomnessBeacon.sol";
import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {Digest, SampleProof, BlockProof, MarketParams} from "../../src/lib/DporTypes.sol";
import {MockBeacon} from "./MockBeacon.sol";
import {DporMerkle} from "../../src/lib/DporMerkle.sol";
import {DporSampling} from "../../src/lib/DporSampling.sol";

/// @notice Builds real run trees for small deals (every coded block distinct) and the
///         digests and sample proofs over them.
abstract contract TreeKit {
    /// @dev Coded block `pos` of run `tag`, `len` bytes, deterministic pseudo-random content.
    function codedBlock(uint256 tag, uint256 pos, uint256 len) internal pure returns (bytes memory b) {
        b = new bytes(len + 32);
        for (uint256 i; i < len; i += 32) {
            bytes32 w = keccak256(abi.encode(tag, pos, i));
            assembly ("memory-safe") {
                mstore(add(add(b, 32), i), w)
            }
        }
        assembly ("memory-safe") {
            mstore(b, len)
        }
    }

    function runLeaves(uint256 tag, uint256 size, uint256 len) internal pure returns (bytes32[] memory leaves) {
        leaves = new bytes32[](size);
        for (uint256 p; p < size; ++p) {
            leaves[p] = DporMerkle.runLeaf(p, DporMerkle.blockRoot(codedBlock(tag, p, len)));
        }
    }

    function runRoot(uint256 tag, uint256 size, uint256 len) internal pure returns (bytes32) {
        return DporMerkle.rootOfLeaves(runLeaves(tag, size, len));
    }

    /// @dev A digest over real trees: N blocks, write count t, coded blocks of β = blockSize.
    function buildDigest(uint256 dealId, uint64 version, uint64 n, uint64 t, uint64 rebuilds, uint256 blockSize)
        internal
        pure
        returns (Digest memory d)
    {
        uint256 len = DporSampling.codedBlockBytes(blockSize);
        d.dealId = dealId;
        d.version = version;
        d.numBlocks = n;
        d.writeCount = t;
        d.rebuildCount = rebuilds;
        d.rootU = keccak256(abi.encode("U", dealId, version));
        d.rootC = runRoot(0, 2 * n, len);
        d.levelRoots = new bytes32[](DporSampling.popcount(t));
        uint256 k;
        for (uint256 l; l < 64; ++l) {
            if ((t >> l) & 1 == 1) d.levelRoots[k++] = runRoot(l + 1, uint256(1) << (l + 1), len);
        }
    }

    /// @dev The whole-block proof of (tag, pos) in the trees of {buildDigest}.
    function buildBlockProof(uint256 tag, uint256 pos, uint64 n, uint256 blockSize)
        internal
        pure
        returns (BlockProof memory p)
    {
        uint256 len = DporSampling.codedBlockBytes(blockSize);
        p.runTag = uint8(tag);
        p.position = uint64(pos);
        p.codedBlock = codedBlock(tag, pos, len);
        p.runPath = DporMerkle.pathOf(runLeaves(tag, DporSampling.runSize(tag, n), len), pos);
    }

    /// @dev The proof of (tag, pos, chunkIndex) in the trees of {buildDigest}.
    function buildProof(uint256 tag, uint256 pos, uint256 chunkIndex, uint64 n, uint256 blockSize)
        internal
        pure
        returns (SampleProof memory p)
    {
        uint256 len = DporSampling.codedBlockBytes(blockSize);
        bytes memory blk = codedBlock(tag, pos, len);
        p.runTag = uint8(tag);
        p.position = uint64(pos);
        p.chunkIndex = uint32(chunkIndex);
        p.chunk = DporMerkle.chunkAt(blk, chunkIndex);
        p.chunkPath = DporMerkle.pathOf(DporMerkle.chunkLeaves(blk), chunkIndex);
        p.runPath = DporMerkle.pathOf(runLeaves(tag, DporSampling.runSize(tag, n), len), pos);
    }
}

/// @notice Deploys the token, a mock beacon and the market (beacon mode) and registers a
///         provider. Times are real production-scale parameters; tests warp.
abstract contract MarketFixture is TestBase, TreeKit {
    TestToken internal token;
    IDporMarketFull internal market;
    MockBeacon internal beacon;

    uint256 internal constant OWNER_PK = 0xA11CE;
    uint256 internal constant PROVIDER_PK = 0xB0B;
    uint256 internal constant STRANGER_PK = 0x5757;
    address internal owner;
    address internal provider;
    address internal stranger;
    address internal challenger = address(0xC4A11);

    uint64 internal constant EPOCH = 1 days;
    uint64 internal constant ANSWER = 1 days;
    uint64 internal constant GRACE = 2 days;
    uint64 internal constant UPLOAD = 1 days;
    uint32 internal constant NOTICE = 2;
    uint128 internal constant BOND = 100e18;
    uint16 internal constant SHARE_BPS = 5000;
    uint16 internal constant MAX_FAILURES = 3;
    uint256 internal constant MIN_STAKE = 1000e18;
    uint128 internal constant PRICE = 1e18;
    uint128 internal constant COLLATERAL = 6e18;
    uint64 internal constant CAPACITY = 1 << 22;
    uint32 internal constant BETA = 200; // coded block 240 bytes, 2 chunks
    /// @dev Deployment time (forge starts at timestamp 1; a realistic value avoids edge cases).
    uint256 internal constant T0 = 1_700_000_000;

    function _params() internal pure returns (MarketParams memory p) {
        p = MarketParams(EPOCH, ANSWER, GRACE, UPLOAD, NOTICE, BOND, SHARE_BPS, MAX_FAILURES, MIN_STAKE);
    }

    function setUp() public virtual {
        vm.warp(T0);
        owner = vm.addr(OWNER_PK);
        provider = vm.addr(PROVIDER_PK);
        stranger = vm.addr(STRANGER_PK);
        token = new TestToken();
        beacon = new MockBeacon(T0 - 999, 3); // rounds emitted exactly at epoch starts
        market = _deployMarket(IERC20(address(token)), IRandomnessBeacon(address(beacon)), _params());
        address[4] memory who = [owner, provider, stranger, challenger];
        for (uint256 i; i < who.length; ++i) {
            token.mint(who[i], 1e30);
            vm.prank(who[i]);
            token.approve(address(market), type(uint256).max);
        }
        vm.prank(provider);
        market.register(hex"0024080112", _addrs(), PRICE, COLLATERAL, CAPACITY, MIN_STAKE);
    }

    /// @dev A market with its commitments extension installed (what contracts/script/Deploy.s.sol does).
    function _deployMarket(IERC20 t, IRandomnessBeacon b, MarketParams memory p)
        internal
        returns (IDporMarketFull m)
    {
        m = IDporMarketFull(address(new DporMarket(t, b, p)));
        m.installCommitments(address(new DporCommitmentsExt(m)));
    }

    function _addrs() internal pure returns (string[] memory a) {
        a = new string[](2);
        a[0] = "/ip4/127.0.0.1/tcp/4001";
        a[1] = "/ip4/127.0.0.1/udp/4001/quic-v1";
    }

    function _open(uint64 n, uint32 beta, uint8 k, uint32 epochs) internal returns (uint256 id) {
        vm.prank(owner);
        id = market.openDeal(provider, n, beta, 16, k, epochs, PRICE, COLLATERAL);
    }

    function _openAccepted(uint64 n, uint32 beta, uint8 k, uint32 epochs) internal returns (uint256 id) {
        id = _open(n, beta, k, epochs);
        vm.prank(provider);
        market.acceptDeal(id);
    }

    function _sig(uint256 pk, bytes32 h) internal pure returns (bytes memory) {
        (uint8 v, bytes32 r, bytes32 s) = vm.sign(pk, h);
        return abi.encodePacked(r, s, v);
    }

    function _post(Digest memory d) internal {
        bytes32 h = market.digestHash(d);
        market.postDigest(d, _sig(OWNER_PK, h), _sig(PROVIDER_PK, h));
    }

    /// @dev Posts a real digest (version v, write count t) for deal `id`.
    function _postReal(uint256 id, uint64 v, uint64 t) internal returns (Digest memory d) {
        IDporMarket.Deal memory deal = market.getDeal(id);
        d = buildDigest(id, v, deal.numBlocks, t, 0, deal.blockSize);
        _post(d);
    }

    /// @dev The owner's and the provider's signatures of a resize (App. A.3).
    function _resizeSigs(Digest memory d, uint128 price, uint128 collateral)
        internal
        view
        returns (bytes memory so, bytes memory sp)
    {
        bytes32 h = market.resizeHash(d, price, collateral);
        so = _sig(OWNER_PK, h);
        sp = _sig(PROVIDER_PK, h);
    }

    /// @dev Resizes deal `d.dealId` to `d` (signed by both parties, relayed by a stranger).
    function _resize(Digest memory d, uint128 price, uint128 collateral) internal {
        (bytes memory so, bytes memory sp) = _resizeSigs(d, price, collateral);
        vm.prank(stranger);
        market.resizeDeal(d, price, collateral, so, sp);
    }

    /// @dev The first digest of a new size n over real trees (write count 0, no levels).
    function _resizeDigest(uint256 id, uint64 v, uint64 n) internal view returns (Digest memory d) {
        d = buildDigest(id, v, n, 0, 0, market.getDeal(id).blockSize);
    }

    /// @dev Warps to the start of deal epoch `e` (if not there yet).
    function _enterEpoch(uint256 id, uint64 e) internal {
        (uint256 start,) = market.epochWindow(id, e);
        if (block.timestamp < start) vm.warp(start);
    }

    /// @dev Warps to the deadline of deal epoch `e` (markMissed becomes possible).
    function _pastEpoch(uint256 id, uint64 e) internal {
        (, uint256 deadline) = market.epochWindow(id, e);
        if (block.timestamp < deadline) vm.warp(deadline);
    }

    /// @dev Warps past the last deadline + grace (closeDeal becomes possible).
    function _pastGrace(uint256 id) internal {
        IDporMarket.Deal memory deal = market.getDeal(id);
        (, uint256 deadline) = market.epochWindow(id, deal.numEpochs - 1);
        if (block.timestamp < deadline + GRACE) vm.warp(deadline + GRACE);
    }

    /// @dev The K whole-block proofs of epoch `e` against digest `d` (built with {buildDigest}).
    function _epochProofs(uint256 id, uint64 e, Digest memory d) internal view returns (BlockProof[] memory ps) {
        IDporMarket.Deal memory deal = market.getDeal(id);
        ps = new BlockProof[](deal.samplesPerEpoch);
        for (uint256 j; j < ps.length; ++j) {
            (uint8 tag, uint64 pos) = market.epochSample(id, e, j);
            ps[j] = buildBlockProof(tag, pos, d.numBlocks, deal.blockSize);
        }
    }

    function _prove(uint256 id, uint64 e, Digest memory d) internal {
        _enterEpoch(id, e);
        market.submitEpochProof(id, e, d, _epochProofs(id, e, d));
    }
}
