// Checks of a deal's digest history in the page, with @dpor/client's EIP-712 functions
// (its browser-safe entry `@dpor/client/eip712`: viem only, no libp2p): each digest the
// node's API lists is hashed again here (the hash the market contract stored, which the
// API reports from the `DigestPosted` event), and the owner's signature it was posted
// with is recovered to an address, which must be the deal's owner.

import { digestHash, recoverDigestSigner, recoverResizeSigner, resizeHash, type Digest, type Resize } from "@dpor/client/eip712";
import type { Deal, DigestRow } from "./api";

type Hex = `0x${string}`;

/** What the page found for one digest of the history. */
export interface DigestCheck {
  /** The EIP-712 hash computed in the page (for a resize: the resize's hash, which the contract stores for it). */
  hash: string;
  /** The computed hash equals the hash the chain stored. */
  hashMatches: boolean;
  /** The address the owner's signature recovers to; null without a signature (or a malformed one). */
  signer: string | null;
  /** The hash matches and the signature recovers to the deal's owner. */
  verified: boolean;
  /** Why it is not verified, for the cell's title ("" when verified). */
  reason: string;
}

/** The row's digest as @dpor/client's `Digest`. */
export function digestOf(dealId: number, g: DigestRow): Digest {
  return {
    dealId: BigInt(dealId),
    version: BigInt(g.version),
    numBlocks: BigInt(g.num_blocks),
    writeCount: BigInt(g.write_count),
    rebuildCount: BigInt(g.rebuild_count),
    rootU: g.root_u as Hex,
    rootC: g.root_c as Hex,
    levelRoots: g.level_roots as Hex[],
  };
}

async function check(d: Deal, g: DigestRow, chainId: number, market: Hex): Promise<DigestCheck> {
  const digest = digestOf(d.id, g);
  const resize: Resize | null = g.resize
    ? { digest, pricePerEpoch: BigInt(g.resize.price_per_epoch), collateral: BigInt(g.resize.collateral) }
    : null;
  const hash = resize ? resizeHash(resize, chainId, market) : digestHash(digest, chainId, market);
  const hashMatches = hash.toLowerCase() === g.hash.toLowerCase();
  let signer: string | null = null;
  let reason = "";
  if (!g.owner_sig) {
    reason = "the node could not read the owner's signature from the posting transaction";
  } else {
    try {
      const sig = g.owner_sig as Hex;
      signer = resize ? await recoverResizeSigner(resize, sig, chainId, market) : await recoverDigestSigner(digest, sig, chainId, market);
    } catch (e) {
      reason = `malformed owner signature: ${String(e)}`;
    }
  }
  const ownerSigned = signer !== null && signer.toLowerCase() === d.owner.toLowerCase();
  if (!hashMatches) reason = `the chain stored ${g.hash}, the page computes ${hash}`;
  else if (signer !== null && !ownerSigned) reason = `the signature recovers to ${signer}, not the owner`;
  return { hash, hashMatches, signer, verified: hashMatches && ownerSigned, reason };
}

/** The checks of every digest of `d`'s history (by version), on chain `chainId`, market `market`. */
export async function checkDigests(d: Deal, chainId: number, market: string): Promise<Map<number, DigestCheck>> {
  const out = new Map<number, DigestCheck>();
  for (const g of d.digests ?? []) out.set(g.version, await check(d, g, chainId, market as Hex));
  return out;
}
