// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {IDporMarket, IDporMarketFull} from "../market/IDporMarket.sol";

/// @title FileManifest
/// @notice Which market deals hold which shards of a dispersed file (issue 12,
///         docs/CONTRACTS.md §10): a file is striped over k data and n − k parity shards
///         (dpor-disperse), each shard one deal with a distinct provider. The owner records
///         the file once and updates a shard's deal when it repairs that shard. Every
///         change is an event indexed by file id and owner, so a fresh machine rebuilds
///         the owner's file list from `FileRecorded` and `ShardReplaced` logs alone (the
///         storage here serves the same data to views).
/// @dev Deals' owners and providers never change in the market, so the checks made when
///      a deal is listed stay true: the file's owner owns every listed deal, and no two
///      listed deals share a provider. Digest versions are not copied here: the market
///      has each deal's latest (`getDeal(id).digestVersion`).
contract FileManifest {
    /// @notice The most shards one file may list (as dpor-disperse's MAX_SHARDS).
    uint16 public constant MAX_SHARDS = 256;

    /// @notice One shard's deal and that deal's provider (one storage slot).
    struct ShardRef {
        uint64 dealId;
        address provider;
    }

    /// @notice A recorded file. Shard i (0..n) is `shards[i]`; shards 0..k hold data.
    struct FileInfo {
        address owner;
        uint16 k;
        uint16 n;
        /// β, the block size of every shard's deal.
        uint32 blockBytes;
        /// L, the file's length in bytes.
        uint64 fileBytes;
        ShardRef[] shards;
    }

    /// @notice The market whose deals are listed.
    IDporMarketFull public immutable market;

    /// @notice Files recorded; ids are 1..fileCount.
    uint256 public fileCount;

    mapping(uint256 fileId => FileInfo) internal _files;

    /// @notice A file was recorded: shard i is in deal `dealIds[i]`.
    event FileRecorded(
        uint256 indexed fileId,
        address indexed owner,
        uint16 k,
        uint16 n,
        uint32 blockBytes,
        uint64 fileBytes,
        uint64[] dealIds
    );
    /// @notice Shard `shard` of file `fileId` moved from deal `oldDealId` to `newDealId` (a repair).
    event ShardReplaced(
        uint256 indexed fileId, address indexed owner, uint16 indexed shard, uint64 oldDealId, uint64 newDealId
    );
    /// @notice The file's record was deleted by its owner.
    event FileDeleted(uint256 indexed fileId, address indexed owner);

    /// @notice k, n not 1 ≤ k < n ≤ MAX_SHARDS, or `dealIds.length` ≠ n.
    error BadShape(uint256 k, uint256 n, uint256 deals);
    /// @notice File length 0.
    error EmptyFile();
    /// @notice The caller does not own deal `dealId` (or the file).
    error NotOwner(uint256 dealId);
    /// @notice Deal `dealId` is neither Open nor Active.
    error DealNotLive(uint256 dealId, IDporMarket.DealState state);
    /// @notice Deal `dealId`'s block size or block count cannot hold a shard of this file.
    error DealTooSmall(uint256 dealId, uint32 blockSize, uint64 numBlocks, uint64 shardBlocks);
    /// @notice Two shards would share provider `provider` (deals `dealA`, `dealB`).
    error SameProvider(address provider, uint256 dealA, uint256 dealB);
    /// @notice No file `fileId`.
    error NoSuchFile(uint256 fileId);
    /// @notice Shard index ≥ n.
    error NoSuchShard(uint256 fileId, uint16 shard);

    /// @param market_ The market (a deployed DporMarket).
    constructor(IDporMarketFull market_) {
        market = market_;
    }

    /// @notice Records a dispersed file: shard i lives in deal `dealIds[i]`.
    /// @dev Every deal must be the caller's, Open or Active, of block size `blockBytes`
    ///      with at least ⌈⌈fileBytes/β⌉/k⌉ blocks, and the deals' providers pairwise
    ///      distinct.
    /// @param k Data shards (any k of the n decode the file).
    /// @param n All shards.
    /// @param blockBytes β, the block size of every deal.
    /// @param fileBytes L, the file's length in bytes (≥ 1).
    /// @param dealIds The n deals, in shard order.
    /// @return fileId The new file's id (1, 2, …).
    function recordFile(uint16 k, uint16 n, uint32 blockBytes, uint64 fileBytes, uint64[] calldata dealIds)
        external
        returns (uint256 fileId)
    {
        if (k == 0 || k >= n || n > MAX_SHARDS || dealIds.length != n) revert BadShape(k, n, dealIds.length);
        if (fileBytes == 0) revert EmptyFile();
        uint64 need = _shardBlocks(k, blockBytes, fileBytes);
        fileId = ++fileCount;
        FileInfo storage f = _files[fileId];
        f.owner = msg.sender;
        f.k = k;
        f.n = n;
        f.blockBytes = blockBytes;
        f.fileBytes = fileBytes;
        for (uint256 i; i < n; ++i) {
            address p = _checkDeal(dealIds[i], blockBytes, need);
            for (uint256 j; j < i; ++j) {
                if (f.shards[j].provider == p) revert SameProvider(p, f.shards[j].dealId, dealIds[i]);
            }
            f.shards.push(ShardRef(dealIds[i], p));
        }
        emit FileRecorded(fileId, msg.sender, k, n, blockBytes, fileBytes, dealIds);
    }

    /// @notice Moves shard `shard` of file `fileId` to deal `newDealId` (after a repair).
    /// @dev Only the file's owner; the new deal must pass the checks of {recordFile} and
    ///      its provider differ from the other shards' providers (the replaced shard's
    ///      own provider may be reused, e.g. for a new deal with the same provider).
    function replaceShard(uint256 fileId, uint16 shard, uint64 newDealId) external {
        FileInfo storage f = _file(fileId);
        if (f.owner != msg.sender) revert NotOwner(newDealId);
        if (shard >= f.n) revert NoSuchShard(fileId, shard);
        address p = _checkDeal(newDealId, f.blockBytes, _shardBlocks(f.k, f.blockBytes, f.fileBytes));
        uint256 n = f.n;
        for (uint256 j; j < n; ++j) {
            if (j != shard && f.shards[j].provider == p) revert SameProvider(p, f.shards[j].dealId, newDealId);
        }
        uint64 old = f.shards[shard].dealId;
        f.shards[shard] = ShardRef(newDealId, p);
        emit ShardReplaced(fileId, msg.sender, shard, old, newDealId);
    }

    /// @notice Deletes file `fileId`'s record (the owner's; the deals are untouched).
    function deleteFile(uint256 fileId) external {
        FileInfo storage f = _file(fileId);
        if (f.owner != msg.sender) revert NotOwner(0);
        delete _files[fileId];
        emit FileDeleted(fileId, msg.sender);
    }

    /// @notice File `fileId`'s record (reverts NoSuchFile if none or deleted).
    function getFile(uint256 fileId) external view returns (FileInfo memory) {
        return _file(fileId);
    }

    function _file(uint256 fileId) internal view returns (FileInfo storage f) {
        f = _files[fileId];
        if (f.owner == address(0)) revert NoSuchFile(fileId);
    }

    /// @dev ⌈⌈L/β⌉/k⌉, the blocks every shard needs; β = 0 reverts through DealTooSmall
    ///      in _checkDeal (no deal has block size 0), so it is not divided by here.
    function _shardBlocks(uint16 k, uint32 blockBytes, uint64 fileBytes) internal pure returns (uint64) {
        if (blockBytes == 0) return type(uint64).max;
        uint256 blocks = (uint256(fileBytes) + blockBytes - 1) / blockBytes;
        return uint64((blocks + k - 1) / k);
    }

    /// @dev Checks deal `id` for a shard and returns its provider.
    function _checkDeal(uint64 id, uint32 blockBytes, uint64 shardBlocks) internal view returns (address) {
        IDporMarket.Deal memory d = market.getDeal(id);
        if (d.owner != msg.sender) revert NotOwner(id);
        if (d.state != IDporMarket.DealState.Open && d.state != IDporMarket.DealState.Active) {
            revert DealNotLive(id, d.state);
        }
        if (d.blockSize != blockBytes || d.numBlocks < shardBlocks) {
            revert DealTooSmall(id, d.blockSize, d.numBlocks, shardBlocks);
        }
        return d.provider;
    }
}
