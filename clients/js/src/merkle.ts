// The Merkle trees of docs/ENCODING.md §2 and §4 (`dpor_core::merkle`): a block's chunk
// tree, run leaves and U leaves, and path verification, with the same error messages
// as the Rust `MerkleError` (the audit report prints them).
import { concat, equalBytes, keccak, u64be } from './bytes.js'

/** Bytes of a chunk, the leaf unit of a block's tree. */
export const CHUNK_BYTES = 128

/** An inner node: `keccak256(0x01 ‖ left ‖ right)`. */
export function node (left: Uint8Array, right: Uint8Array): Uint8Array {
  return keccak(concat(Uint8Array.of(0x01), left, right))
}

/** A chunk leaf: `keccak256(0x00 ‖ chunk)`, the chunk zero-padded to 128 bytes. */
export function chunkLeaf (chunk: Uint8Array): Uint8Array {
  const padded = new Uint8Array(1 + CHUNK_BYTES)
  padded.set(chunk.subarray(0, CHUNK_BYTES), 1)
  return keccak(padded)
}

/** Chunks of a block of `bytes` bytes: ⌈bytes/128⌉, at least 1. */
export function chunkCount (bytes: number): number {
  return Math.max(1, Math.ceil(bytes / CHUNK_BYTES))
}

/**
 * The block root of a block's bytes (ENCODING §2): the root of its chunk leaves,
 * padded to a power of two with zero leaves (`bytes32(0)`).
 */
export function blockRoot (block: Uint8Array): Uint8Array {
  const chunks = chunkCount(block.length)
  let width = 1
  while (width < chunks) width *= 2
  let level: Uint8Array[] = []
  for (let c = 0; c < width; c++) {
    level.push(c < chunks ? chunkLeaf(block.subarray(c * CHUNK_BYTES, (c + 1) * CHUNK_BYTES)) : new Uint8Array(32))
  }
  while (level.length > 1) {
    const next: Uint8Array[] = []
    for (let i = 0; i < level.length; i += 2) next.push(node(level[i]!, level[i + 1]!))
    level = next
  }
  return level[0]!
}

/** A run leaf: `keccak256(0x02 ‖ u64be(position) ‖ blockRoot)`. */
export function runLeaf (position: bigint, root: Uint8Array): Uint8Array {
  return keccak(concat(Uint8Array.of(0x02), u64be(position), root))
}

/** A U leaf: `keccak256(0x03 ‖ u64be(index) ‖ blockRoot ‖ σ̃)`. */
export function uLeaf (index: bigint, root: Uint8Array, sealedU: Uint8Array): Uint8Array {
  return keccak(concat(Uint8Array.of(0x03), u64be(index), root, sealedU))
}

/** The root a path leads to from `leaf` at `index`: bit h of the index says whether the node at height h is a right child. */
export function rootFromPath (leaf: Uint8Array, index: bigint, path: readonly Uint8Array[]): Uint8Array {
  let acc = leaf
  path.forEach((sib, h) => {
    acc = (index >> BigInt(h)) & 1n ? node(sib, acc) : node(acc, sib)
  })
  return acc
}

/** A failed path check, its message as `dpor_core::merkle::MerkleError` displays it. */
export class MerkleError extends Error {}

/**
 * Checks that `path` leads from `leaf` at `index` to `root` in a tree of depth `depth`.
 * Throws a {@link MerkleError}: index outside the tree, wrong path length, or mismatch.
 */
export function verifyPath (root: Uint8Array, depth: number, index: bigint, leaf: Uint8Array, path: readonly Uint8Array[]): void {
  if (depth >= 64 || index >> BigInt(depth) !== 0n) {
    const leaves = depth >= 64 ? 2n ** 64n - 1n : 1n << BigInt(depth)
    throw new MerkleError(`leaf ${index} is outside a tree of ${leaves} leaves`)
  }
  if (path.length !== depth) throw new MerkleError(`path has ${path.length} siblings, the tree has depth ${depth}`)
  if (!equalBytes(rootFromPath(leaf, index, path), root)) throw new MerkleError('Merkle path does not match the root')
}
