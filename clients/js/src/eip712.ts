// EIP-712 typed data of the market (docs/ENCODING.md §5, docs/CONTRACTS.md §4.1;
// `dpor_core::digest` in Rust, `DporMarket.digestHash` / `resizeHash` on chain):
// the digest both parties sign for `postDigest`, and the resize they sign for
// `resizeDeal`. Signatures are 65 bytes r ‖ s ‖ v (v = 27/28) over the signing hash,
// as `dpor` and `dpor-node` produce them (deterministic ECDSA, RFC 6979: the same
// key and message give the same bytes in Rust and here).
//
// This module imports viem only (no Node.js module): a web page can import it alone as
// `@dpor/client/eip712` (the dashboard does), without the libp2p parts of the index.
import { hashTypedData, recoverTypedDataAddress, type Address, type Hex, type LocalAccount } from 'viem'

/** A provider's whole state at one moment (Solidity `struct Digest`; ENCODING §5). */
export interface Digest {
  /** The deal id. */
  dealId: bigint
  /** Digest version (strictly increasing per deal). */
  version: bigint
  /** N, a power of two. */
  numBlocks: bigint
  /** t: writes since the last C-rebuild (< N); its set bits are the filled levels of H. */
  writeCount: bigint
  /** C-rebuilds so far. */
  rebuildCount: bigint
  /** Root of U. */
  rootU: Hex
  /** Root of C. */
  rootC: Hex
  /** Roots of the filled levels of H, ascending. */
  levelRoots: readonly Hex[]
}

/** A deal resize (Solidity `struct Resize`): the first digest of the new size, the new price per epoch and collateral (wei). */
export interface Resize {
  /** The digest of the resized state (t = 0, no level roots). */
  digest: Digest
  /** New price per epoch, wei (uint128). */
  pricePerEpoch: bigint
  /** New collateral, wei (uint128). */
  collateral: bigint
}

/** EIP-712 domain name of the market contract. */
export const DOMAIN_NAME = 'dpor'
/** EIP-712 domain version. */
export const DOMAIN_VERSION = '1'

/** The EIP-712 types of `Digest` and `Resize`, field for field as in the contracts. */
export const eip712Types = {
  Digest: [
    { name: 'dealId', type: 'uint256' },
    { name: 'version', type: 'uint64' },
    { name: 'numBlocks', type: 'uint64' },
    { name: 'writeCount', type: 'uint64' },
    { name: 'rebuildCount', type: 'uint64' },
    { name: 'rootU', type: 'bytes32' },
    { name: 'rootC', type: 'bytes32' },
    { name: 'levelRoots', type: 'bytes32[]' }
  ],
  Resize: [
    { name: 'digest', type: 'Digest' },
    { name: 'pricePerEpoch', type: 'uint128' },
    { name: 'collateral', type: 'uint128' }
  ]
} as const

/** The EIP-712 domain of the market at `market` on chain `chainId`. */
export function domain (chainId: number | bigint, market: Address) {
  return { name: DOMAIN_NAME, version: DOMAIN_VERSION, chainId: BigInt(chainId), verifyingContract: market } as const
}

function digestMessage (d: Digest) {
  return { ...d, levelRoots: [...d.levelRoots] }
}

/** The digest hash: the EIP-712 signing hash both parties sign and the contract stores (`digestHash`). */
export function digestHash (d: Digest, chainId: number | bigint, market: Address): Hex {
  return hashTypedData({ domain: domain(chainId, market), types: eip712Types, primaryType: 'Digest', message: digestMessage(d) })
}

/** The EIP-712 signing hash of a resize (the contract's `resizeHash`). */
export function resizeHash (r: Resize, chainId: number | bigint, market: Address): Hex {
  return hashTypedData({
    domain: domain(chainId, market),
    types: eip712Types,
    primaryType: 'Resize',
    message: { digest: digestMessage(r.digest), pricePerEpoch: r.pricePerEpoch, collateral: r.collateral }
  })
}

/** The 65-byte signature (r ‖ s ‖ v, v = 27/28) of `account` over the digest's EIP-712 hash: `postDigest`'s `ownerSig` / `providerSig`. */
export async function signDigest (account: LocalAccount, d: Digest, chainId: number | bigint, market: Address): Promise<Hex> {
  return account.signTypedData({ domain: domain(chainId, market), types: eip712Types, primaryType: 'Digest', message: digestMessage(d) })
}

/** The 65-byte signature of `account` over a resize's EIP-712 hash: `resizeDeal`'s signatures. */
export async function signResize (account: LocalAccount, r: Resize, chainId: number | bigint, market: Address): Promise<Hex> {
  return account.signTypedData({
    domain: domain(chainId, market),
    types: eip712Types,
    primaryType: 'Resize',
    message: { digest: digestMessage(r.digest), pricePerEpoch: r.pricePerEpoch, collateral: r.collateral }
  })
}

/**
 * The address whose key made `signature` (65 bytes r ‖ s ‖ v) over the digest's EIP-712
 * hash: the owner's or the provider's address if it is their `postDigest` signature.
 * Throws if `signature` is not a well-formed ECDSA signature.
 */
export async function recoverDigestSigner (d: Digest, signature: Hex, chainId: number | bigint, market: Address): Promise<Address> {
  return recoverTypedDataAddress({ domain: domain(chainId, market), types: eip712Types, primaryType: 'Digest', message: digestMessage(d), signature })
}

/** As {@link recoverDigestSigner}, for a signature over a resize's EIP-712 hash (`resizeDeal`'s signatures). */
export async function recoverResizeSigner (r: Resize, signature: Hex, chainId: number | bigint, market: Address): Promise<Address> {
  return recoverTypedDataAddress({
    domain: domain(chainId, market),
    types: eip712Types,
    primaryType: 'Resize',
    message: { digest: digestMessage(r.digest), pricePerEpoch: r.pricePerEpoch, collateral: r.collateral },
    signature
  })
}

/** A digest from JSON (numbers or decimal strings for the integers, hex for the roots), e.g. as `dpor` prints one. */
export function digestFromJson (j: Record<string, unknown>): Digest {
  const int = (k: string, ...alts: string[]): bigint => {
    const v = [k, ...alts].map(x => j[x]).find(x => x !== undefined)
    if (typeof v === 'number' || typeof v === 'string' || typeof v === 'bigint') return BigInt(v)
    throw new Error(`digest JSON: ${k} missing or not an integer`)
  }
  const hex = (k: string, ...alts: string[]): Hex => {
    const v = [k, ...alts].map(x => j[x]).find(x => x !== undefined)
    if (typeof v === 'string' && /^0x[0-9a-fA-F]{64}$/.test(v)) return v as Hex
    throw new Error(`digest JSON: ${k} missing or not a 32-byte hex string`)
  }
  const roots = j.levelRoots ?? j.level_roots
  if (!Array.isArray(roots) || roots.some(r => typeof r !== 'string' || !/^0x[0-9a-fA-F]{64}$/.test(r))) {
    throw new Error('digest JSON: levelRoots must be an array of 32-byte hex strings')
  }
  return {
    dealId: int('dealId', 'deal_id'),
    version: int('version'),
    numBlocks: int('numBlocks', 'num_blocks'),
    writeCount: int('writeCount', 'write_count'),
    rebuildCount: int('rebuildCount', 'rebuild_count'),
    rootU: hex('rootU', 'root_u'),
    rootC: hex('rootC', 'root_c'),
    levelRoots: roots as Hex[]
  }
}
