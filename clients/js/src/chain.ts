// Reads of the market a public audit needs, with viem and the generated ABI
// (src/abi.ts): the deal, the latest posted digest (`DigestPosted` logs), the epoch's
// sample seed and the provider's registered addresses. Read-only: nothing is sent.
import { encodeAbiParameters, keccak256, type Address, type Hex, type PublicClient } from 'viem'
import { dporMarketAbi } from './abi.js'
import type { Digest } from './eip712.js'

/** The deal as `getDeal` returns it (IDporMarket.Deal). */
export type Deal = Awaited<ReturnType<typeof getDeal>>

/** `getDeal(dealId)`; throws if the deal does not exist (no owner). */
export async function getDeal (client: PublicClient, market: Address, deal: bigint) {
  const d = await client.readContract({ address: market, abi: dporMarketAbi, functionName: 'getDeal', args: [deal] })
  if (/^0x0{40}$/.test(d.owner)) throw new Error(`deal ${deal} does not exist on chain`)
  return d
}

/** A digest posted for a deal: its preimage and the hash the log carries. */
export interface PostedDigest {
  /** The digest (preimage). */
  digest: Digest
  /** Its hash as logged (`digestHash`). */
  hash: Hex
}

/** The `DigestPosted` log of `deal` with the highest version (`latest_digest` in Rust), or `undefined` if none. */
export async function latestDigest (client: PublicClient, market: Address, deal: bigint): Promise<PostedDigest | undefined> {
  const logs = await client.getContractEvents({ address: market, abi: dporMarketAbi, eventName: 'DigestPosted', args: { dealId: deal }, fromBlock: 0n, toBlock: 'latest' })
  let best: PostedDigest | undefined
  for (const l of logs) {
    const { digest, digestHash } = l.args
    if (digest === undefined || digestHash === undefined || digest.dealId !== deal) continue
    if (best === undefined || digest.version > best.digest.version) best = { digest: { ...digest, levelRoots: [...digest.levelRoots] }, hash: digestHash }
  }
  return best
}

/** The per-deal sample seed S = keccak256(abi.encode(globalSeed, dealId, epoch)) (ENCODING §9). */
export function sampleSeed (globalSeed: Hex, deal: bigint, epoch: bigint): Hex {
  return keccak256(encodeAbiParameters([{ type: 'bytes32' }, { type: 'uint256' }, { type: 'uint256' }], [globalSeed, deal, epoch]))
}

/**
 * The sample seed of deal epoch `epoch` once it can no longer change
 * (`stable_epoch_seed` in Rust): from the stored global seed; else, outside the dev
 * seed mode, `peekSeed` (a recorded beacon round). `undefined` while not available.
 */
export async function stableEpochSeed (client: PublicClient, market: Address, deal: bigint, epoch: bigint): Promise<Hex | undefined> {
  const d = await getDeal(client, market, deal)
  if (d.acceptedAt === 0n || epoch >= BigInt(d.numEpochs)) return undefined
  const g = await client.readContract({ address: market, abi: dporMarketAbi, functionName: 'globalSeeds', args: [d.startEpoch + epoch] })
  if (!/^0x0{64}$/.test(g)) return sampleSeed(g, deal, epoch)
  if (await client.readContract({ address: market, abi: dporMarketAbi, functionName: 'devSeeds' })) return undefined
  try {
    return await client.readContract({ address: market, abi: dporMarketAbi, functionName: 'peekSeed', args: [deal, epoch] })
  } catch {
    return undefined
  }
}

/** The multiaddrs the deal's provider registered (`getProvider`), in order. */
export async function providerAddrs (client: PublicClient, market: Address, provider: Address): Promise<string[]> {
  const p = await client.readContract({ address: market, abi: dporMarketAbi, functionName: 'getProvider', args: [provider] })
  if (!p.registered) throw new Error(`${provider} is not a registered provider`)
  return [...p.multiaddrs]
}
