// Formatting of bytes, token amounts (decimal strings of base units), addresses, times.

/** 1536 → "1.5 KiB". */
export function bytes(n: number): string {
  const units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
  let i = 0;
  let v = n;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${Number.isInteger(v) ? v : v.toFixed(v < 10 ? 2 : 1)} ${units[i]}`;
}

/** A base-unit amount (decimal string, may exceed 2^53) with thousands separators. */
export function amount(s: string): string {
  if (!/^\d+$/.test(s)) return s;
  return s.replace(/\B(?=(\d{3})+(?!\d))/g, "\u202f");
}

/** A base-unit amount short enough for a card: 16000000000000 → "1.600e13". */
export function amountShort(s: string): string {
  if (!/^\d+$/.test(s) || s.length <= 10) return amount(s);
  return `${s[0]}.${s.slice(1, 4)}e${s.length - 1}`;
}

/** 0x1234…abcd. */
export function short(addr: string): string {
  return addr.length > 12 ? `${addr.slice(0, 6)}…${addr.slice(-4)}` : addr;
}

/** Unix seconds as a local date and time. */
export function time(t: number): string {
  return t ? new Date(t * 1000).toLocaleString() : "—";
}

/** Text escaped for HTML. */
export function esc(s: string | number): string {
  return String(s).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}
