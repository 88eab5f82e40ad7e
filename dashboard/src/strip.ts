// A deal's epochs as a strip of cells, one per epoch of its term, coloured by state.
// Each cell carries data-epoch and data-state (the browser test reads them) and a
// tooltip with its window.

import type { Deal } from "./api";
import { esc, time } from "./format";

export function strip(d: Deal, big = false): string {
  const cells = d.epochs
    .map((s, e) => {
      const start = d.epoch0_start ? d.epoch0_start + e * d.epoch_seconds : 0;
      const title = `epoch ${e}: ${s}${start ? ` (from ${time(start)})` : ""}`;
      return `<span class="cell ${s}" data-epoch="${e}" data-state="${s}" title="${esc(title)}"></span>`;
    })
    .join("");
  return `<div class="strip${big ? " big" : ""}" data-deal="${d.id}" role="img" aria-label="epochs of deal ${d.id}">${cells}</div>`;
}
