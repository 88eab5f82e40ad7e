// script/lib/cargo-bins.mjs FILE NAME...: the directory of the binaries NAME... that a
// cargo build wrote, from its JSON messages in FILE (`--message-format=json-...`, one
// message per line). Prints that directory; fails (exit 1, a reason on stderr) when a
// name has no executable in the messages, or when the names are not all in one directory.
// Only plain binaries count (target kind "bin", not the bin's unit-test harness).
import { readFileSync } from "node:fs";
import { dirname } from "node:path";

const [file, ...names] = process.argv.slice(2);
if (!file || names.length === 0) {
  console.error("usage: cargo-bins.mjs FILE NAME...");
  process.exit(2);
}
const found = new Map();
for (const line of readFileSync(file, "utf8").split("\n")) {
  if (!line.startsWith("{")) continue;
  let m;
  try {
    m = JSON.parse(line);
  } catch {
    continue;
  }
  if (m.reason !== "compiler-artifact" || !m.executable || m.profile?.test) continue;
  if (!m.target?.kind?.includes("bin")) continue;
  found.set(m.target.name, m.executable);
}
const dirs = new Set();
for (const n of names) {
  const exe = found.get(n);
  if (!exe) {
    console.error(`cargo-bins: the build wrote no executable named ${n} (found: ${[...found.keys()].join(", ") || "none"})`);
    process.exit(1);
  }
  dirs.add(dirname(exe));
}
if (dirs.size !== 1) {
  console.error(`cargo-bins: ${names.join(", ")} are in more than one directory: ${[...dirs].join(", ")}`);
  process.exit(1);
}
console.log([...dirs][0]);
