// The dashboard's browser test, driven by verifier-cli/tests/e2e_dashboard.rs (which
// starts the chain, the node and a deal, and checks what this prints against the chain).
//
//   node dashboard/test/browser.mjs URL DEAL SCREENSHOT
//
// Starts Debian's Chromium (/usr/bin/chromium, or $DPOR_CHROMIUM) headless through
// playwright-core, opens URL, waits for deal DEAL's row and prints
//   SHOWN {json}      what the page shows of the deal (state, size, epoch cells, digest,
//                     and per digest the EIP-712 hash the page computed with @dpor/client
//                     and whether the owner's signature verified)
// then reads lines from stdin: "proven E" makes it wait (without reloading the page)
// until epoch E of the deal shows as proven in the table and in the detail strip, then
// it saves a screenshot to SCREENSHOT and prints
//   UPDATED {json}
// and exits 0. Any failure (no browser, page error, time out) prints the reason on
// stderr and exits 1: this test never skips.

import { chromium } from "playwright-core";
import { createInterface } from "node:readline";
import { existsSync } from "node:fs";

const [url, dealArg, shot] = process.argv.slice(2);
if (!url || !dealArg || !shot) {
  console.error("usage: browser.mjs URL DEAL SCREENSHOT");
  process.exit(2);
}
const deal = Number(dealArg);
const executablePath = process.env.DPOR_CHROMIUM || "/usr/bin/chromium";
if (!existsSync(executablePath)) {
  console.error(`browser.mjs: no Chromium at ${executablePath}: run script/install-chromium (script/test does)`);
  process.exit(1);
}
const WAIT_MS = 120_000;

let browser;
async function closeAndExit(code) {
  try {
    if (browser) await browser.close();
  } finally {
    process.exit(code);
  }
}
process.on("SIGTERM", () => void closeAndExit(1));
process.on("SIGINT", () => void closeAndExit(1));

const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();

/** What the page shows of the deal now. */
async function shown(page) {
  return page.evaluate((id) => {
    const row = document.querySelector(`tr[data-deal-id="${id}"]`);
    if (!row) return null;
    const field = (f) => row.querySelector(`[data-field="${f}"]`)?.textContent?.trim() ?? null;
    const cells = (root) => [...(root?.querySelectorAll(".cell[data-epoch]") ?? [])].map((c) => c.dataset.state);
    return {
      state: field("state"),
      size: field("size"),
      proven: Number(field("proven")),
      missed: Number(field("missed")),
      pending: Number(field("pending")),
      digest: field("digest"),
      earned: field("earned"),
      row_epochs: cells(row),
      detail_epochs: cells(document.querySelector(`#detail .strip[data-deal="${id}"]`)),
      digest_rows: document.querySelectorAll('#detail table[data-table="digests"] tbody tr').length,
      // Per digest: the EIP-712 hash the page computed with @dpor/client and whether
      // the owner's signature recovered to the deal's owner.
      digest_checks: [...document.querySelectorAll('#detail table[data-table="digests"] tbody tr[data-version]')].map((tr) => ({
        version: Number(tr.dataset.version),
        computed_hash: tr.querySelector('[data-field="computed-hash"]')?.dataset.hash ?? null,
        verified: tr.querySelector('[data-field="owner-sig"]')?.dataset.verified ?? null,
        shown: tr.querySelector('[data-field="owner-sig"]')?.textContent?.trim() ?? null,
      })),
      cards: document.querySelector('[data-card="epochs"] .value')?.textContent ?? null,
      marker: window.__dporMarker ?? null,
    };
  }, deal);
}

try {
  browser = await chromium.launch({
    executablePath,
    headless: true,
    // Without the background-networking flags Chromium tries to reach Google's hosts
    // at every start, which this closed network refuses (docs/OPERATIONS.md).
    args: [
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
  });
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  const errors = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  await page.goto(url, { waitUntil: "load", timeout: WAIT_MS });
  await page.waitForSelector(`tr[data-deal-id="${deal}"]`, { timeout: WAIT_MS });
  await page.waitForSelector(`#detail .strip[data-deal="${deal}"]`, { timeout: WAIT_MS });
  // A marker that a reload would lose: the update below must come without one.
  await page.evaluate(() => {
    window.__dporMarker = "first-load";
  });
  console.log(`SHOWN ${JSON.stringify(await shown(page))}`);
  for (;;) {
    const next = await lines.next();
    if (next.done) throw new Error("stdin closed before a 'proven E' line");
    const m = /^proven (\d+)$/.exec(next.value.trim());
    if (!m) throw new Error(`unexpected line on stdin: ${next.value}`);
    const epoch = Number(m[1]);
    await page.waitForFunction(
      ([id, e]) =>
        document.querySelector(`tr[data-deal-id="${id}"] .cell[data-epoch="${e}"]`)?.dataset.state === "proven" &&
        document.querySelector(`#detail .strip[data-deal="${id}"] .cell[data-epoch="${e}"]`)?.dataset.state === "proven",
      [deal, epoch],
      { timeout: WAIT_MS, polling: 250 },
    );
    await page.screenshot({ path: shot, fullPage: true });
    const now = await shown(page);
    if (errors.length) throw new Error(`errors in the page: ${errors.join("; ")}`);
    console.log(`UPDATED ${JSON.stringify(now)}`);
    break;
  }
  await closeAndExit(0);
} catch (e) {
  console.error(`browser.mjs: ${e?.stack ?? e}`);
  await closeAndExit(1);
}
