// The public audit run from JavaScript (`dpor audit DEAL --epoch E` in Rust,
// verifier-cli/src/auditor/audit.rs): the latest posted digest, checked against the
// hash the contract stores and recomputed with EIP-712; the epoch's seed; λ positions
// per run; the samples asked from the provider's node in batches; every sample
// verified against the digest's run roots; the transcript hash. Read-only (no
// `--record`, no `--dispute`). The report has the fields of `dpor audit --json`.
import type { Address, Hex, PublicClient } from 'viem'
import { auditPlan, codedBlockBytes, runIds, runLabel, transcriptHash, validateDigest, verifyAudit } from './audit.js'
import { getDeal, latestDigest, providerAddrs, stableEpochSeed } from './chain.js'
import { digestHash } from './eip712.js'
import { batchLen, NodeClient, type WireRun, type WireSample } from './wire.js'

/** What to audit and where. */
export interface PublicAuditOptions {
  /** A viem public client of the market's chain. */
  client: PublicClient
  /** The DporMarket address. */
  market: Address
  /** The deal id. */
  deal: bigint
  /** The deal epoch whose seed is used (reported as `epoch`). */
  epoch: bigint
  /** The sample seed; by default the epoch's stable seed read from the chain. */
  seed?: Hex
  /** The node's multiaddr; by default the provider's registered addresses, first that answers. */
  node?: string
}

/** The report, field for field as `dpor audit --json` (numbers as JSON numbers, hashes as 0x hex). */
export interface PublicAuditReport {
  deal: number
  epoch: number
  version: number
  digest_hash: Hex
  seed: Hex
  lambda: number
  runs_checked: number
  samples_checked: number
  bytes_received: number
  seconds: number
  passed: boolean
  failures_total: number
  failures: Array<{ run: string, run_tag: number, position: number, fault: string }>
  runs: Array<{ run: string, run_tag: number, built_at: number, size: number, asked: number, returned: number, failed: number, error: string | null }>
  transcript_hash: Hex
  node_error: string | null
}

async function connectNode (opts: PublicAuditOptions, provider: Address): Promise<NodeClient> {
  if (opts.node !== undefined) return NodeClient.connect(opts.node)
  const addrs = await providerAddrs(opts.client, opts.market, provider)
  let last: unknown = new Error(`provider ${provider} registered no addresses`)
  for (const a of addrs) {
    try {
      return await NodeClient.connect(a)
    } catch (e) {
      last = e
    }
  }
  throw last
}

const errText = (e: unknown): string => (e instanceof Error ? e.message : String(e))

/**
 * Runs the public audit. Throws if the audit cannot start (no deal, no digest, a
 * digest whose hash does not match the contract's, no seed); a node that cannot be
 * reached or that errs does not throw: its samples count as missing, as in Rust.
 */
export async function publicAudit (opts: PublicAuditOptions): Promise<PublicAuditReport> {
  const started = performance.now()
  const { client, market, deal, epoch } = opts
  const d = await getDeal(client, market, deal)
  if (/^0x0{64}$/.test(d.digestHash)) throw new Error(`deal ${deal} has no posted digest yet: there is nothing to audit`)
  const posted = await latestDigest(client, market, deal)
  if (posted === undefined) throw new Error(`no DigestPosted log found for deal ${deal}`)
  const { digest, hash } = posted
  if (hash !== d.digestHash) throw new Error(`the latest DigestPosted log of deal ${deal} (v${digest.version}, ${hash}) is not the digest the contract holds (v${d.digestVersion}, ${d.digestHash})`)
  const local = digestHash(digest, await client.getChainId(), market)
  if (local !== hash) throw new Error(`the posted digest's preimage hashes to ${local}, not to the stored ${hash}`)
  validateDigest(digest)
  if (epoch >= BigInt(d.numEpochs)) throw new Error(`deal ${deal} has ${d.numEpochs} epochs; epoch ${epoch} is out of range`)
  const seed = opts.seed ?? await stableEpochSeed(client, market, deal, epoch)
  if (seed === undefined) throw new Error(`the seed of epoch ${epoch} of deal ${deal} is not available yet`)

  const lambda = Math.max(1, d.lambda)
  const coded = codedBlockBytes(d.blockSize)
  const plan = auditPlan(digest, hash, seed, lambda)
  const ids = runIds(digest)

  let node: NodeClient | undefined
  let nodeError: string | null = null
  try {
    node = await connectNode(opts, d.provider)
  } catch {
    nodeError = "the provider's node could not be reached"
  }
  const collected: Array<{ run: WireRun, samples: WireSample[], error: string | null }> = []
  try {
    for (const { tag, positions } of plan) {
      const id = ids.find(r => r.tag === tag)
      if (id === undefined) {
        collected.push({ run: { tag, built_at: 0n }, samples: [], error: 'run has no build time' })
        continue
      }
      const depth = id.size.toString(2).length - 1
      const batch = batchLen(coded + 32 * depth + 64)
      const c = { run: id.run, samples: [] as WireSample[], error: null as string | null }
      if (node === undefined) c.error = 'node unreachable'
      for (let i = 0; node !== undefined && i < positions.length; i += batch) {
        try {
          c.samples.push(...await node.samples(deal, id.run, positions.slice(i, i + batch)))
        } catch (e) {
          c.error = errText(e)
          break
        }
      }
      collected.push(c)
    }
  } finally {
    await node?.stop()
  }

  const outcome = verifyAudit(digest, hash, seed, lambda, coded, new Map(collected.map(c => [c.run.tag, c.samples])))
  const transcript = transcriptHash(hash, seed, collected)
  return {
    deal: Number(deal),
    epoch: Number(epoch),
    version: Number(digest.version),
    digest_hash: hash,
    seed,
    lambda,
    runs_checked: plan.length,
    samples_checked: outcome.checked,
    bytes_received: node?.bytesReceived ?? 0,
    seconds: (performance.now() - started) / 1000,
    passed: outcome.failures.length === 0,
    failures_total: outcome.failures.length,
    failures: outcome.failures.map(f => ({ run: runLabel(f.tag), run_tag: f.tag, position: Number(f.position), fault: f.fault })),
    runs: plan.map(({ tag, positions }, i) => ({
      run: runLabel(tag),
      run_tag: tag,
      built_at: Number(collected[i]!.run.built_at),
      size: Number(ids.find(r => r.tag === tag)?.size ?? 0n),
      asked: positions.length,
      returned: collected[i]!.samples.length,
      failed: outcome.failures.filter(f => f.tag === tag).length,
      error: collected[i]!.error
    })),
    transcript_hash: transcript,
    node_error: nodeError
  }
}
