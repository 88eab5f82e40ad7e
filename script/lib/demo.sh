# script/lib/demo.sh: what script/demo and script/demo-providers share (sourced, not run).
# Each script sets `root` (the repository) and calls, in order:
#   demo_pick_file MIN [FILE]  the real file (default: this machine's C library): $file,
#                           $size; refused, before anything starts, below MIN bytes
#   demo_workdir            .demo/run-<pid>/ and the cleanup that stops every process started
#   demo_build              npm toolchain (Foundry, solc) + release binaries (DEMO_PROFILE), copied into
#                           .demo/run-<pid>/bin: $dpor, $node_bin, $beacon_bin (DEMO_BIN_DIR:
#                           binaries already built, a testing build of dpor-node; none built)
#   demo_chain              anvil + DrandBeacon + Deploy: $rpc, $token, $market, $manifest
# and then uses the helpers (say/info/fail, value and chain helpers, launch_node).
# Knobs: DEMO_UPLOAD_SECONDS (deal upload window, s; default 1 day, the floor),
# DEMO_ACCOUNTS (anvil's funded accounts; default 10), DEMO_BLOCK_TIME (anvil's seconds
# per block; default 1; 0: a block per transaction, at once), DEMO_POLL_MS (the nodes'
# chain polling, ms; default 500), EXIT_NOTICE_EPOCHS (exported: the market's exit
# notice, read by Deploy.s.sol; default 7), fail_log (the log `fail` shows).

# ---------------------------------------------------------------- output helpers
# fd 3: the demo's own stderr, kept for `fail` and the cleanup, so that their lines are
# seen even when they run inside a redirection (a probe of `wait_for`, a `$(...)`).
exec 3>&2
demo_pid=$$
say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
info() { printf '   %s\n' "$*"; }
# fail MESSAGE: prints "demo: FAIL: MESSAGE" (and the last lines of the node log) on the
# demo's stderr and ends the demo, running the cleanup. Called inside a subshell (a
# `$(...)`, a pipeline, a probe), where `exit` would only leave the subshell, it also
# signals the demo's shell, which then exits 1 through the same cleanup.
fail() {
  {
    echo "demo: FAIL: $*"
    local log="${work:-}/${fail_log:-node.log}"
    if [ -n "${work:-}" ] && [ -f "$log" ]; then
      echo "---- last lines of the node log ($log):"
      tail -n 25 "$log" || true
    fi
  } >&3 2>&1
  demo_failed=1
  if [ "$BASHPID" != "$demo_pid" ]; then
    kill -USR1 "$demo_pid" 2>/dev/null || true
  fi
  exit 1
}
demo_failed=0
trap 'demo_failed=1; exit 1' USR1

# ---------------------------------------------------------------- the file
BETA=4096
# demo_pick_file MIN [FILE]: sets $file (absolute) and $size (bytes); refuses a file of
# fewer than MIN bytes before anything is built or started.
demo_pick_file() {
  local min="$1"
  file="${2:-}"
  if [ -z "$file" ]; then
    # A real binary every Linux machine has, of a few MiB: the C library this shell runs on.
    file="$(ldd /bin/sh 2>/dev/null | awk '/libc\.so/ {print $3; exit}')"
    for f in "$file" /lib/x86_64-linux-gnu/libc.so.6 /usr/lib/x86_64-linux-gnu/libc.so.6 \
             /lib/aarch64-linux-gnu/libc.so.6 /lib64/libc.so.6 /usr/lib64/libc.so.6 /usr/lib/libc.so.6; do
      if [ -n "$f" ] && [ -f "$f" ]; then file="$f"; break; fi
    done
  fi
  [ -n "$file" ] && [ -f "$file" ] || fail "no such file: '${file}' (usage: $0 [FILE])"
  file="$(readlink -f "$file")"
  size="$(stat -c %s "$file")"
  [ "$size" -ge "$min" ] || fail "$file is $size bytes; $(basename "$0") needs a file of at least $min bytes"
}
# blocks_of BYTES: N for a file of BYTES, as `dpor deal open --file` sets it (the next
# power of two of the number of β-byte blocks).
blocks_of() { local b=$(( ($1 + BETA - 1) / BETA )) n=1; while [ "$n" -lt "$b" ]; do n=$(( n * 2 )); done; echo "$n"; }
# about_minutes SECONDS: "about M minutes", for an estimate.
about_minutes() { local m=$(( ($1 + 30) / 60 )); [ "$m" -ge 1 ] || m=1; echo "about $m minute$([ "$m" = 1 ] || echo s)"; }

# ---------------------------------------------------------------- toolchain and build
# demo_build: sets $forge, $anvil, $cast (Foundry), $node_bin, $dpor, $beacon_bin.
demo_build() {
  if ! script/foundry-bin forge >/dev/null 2>&1 || [ ! -f node_modules/solc/solc.js ]; then
    say "npm install (Foundry, solc, OpenZeppelin, pinned by package-lock.json)"
    npm install --no-audit --no-fund
  fi
  # The real Foundry executables (script/foundry-bin), never the npm wrappers in
  # node_modules/.bin: those exit 0 whatever the tool returns, so every `cast … || fail`
  # below would pass a failed call, and killing the anvil wrapper leaves anvil running.
  forge="$("$root/script/foundry-bin" forge)" || fail "no forge executable after npm install"
  anvil="$("$root/script/foundry-bin" anvil)" || fail "no anvil executable after npm install"
  cast="$("$root/script/foundry-bin" cast)" || fail "no cast executable after npm install"
  command -v node >/dev/null || fail "node (Node.js) is needed"

  # DEMO_PROFILE=test: cargo's test profile (optimized, in target/debug), the binaries
  # script/test builds for its end-to-end tests, so that a test of a demo compiles
  # nothing more; default: release.
  local profile="${DEMO_PROFILE:-release}" out=release
  [ "$profile" = release ] || out=debug
  [ "$profile" = release ] || [ "$profile" = test ] || fail "DEMO_PROFILE must be release or test (got $profile)"
  local bins="${CARGO_TARGET_DIR:-$root/target}/$out"
  if [ -n "${DEMO_BIN_DIR:-}" ]; then
    # DEMO_BIN_DIR: binaries already built (script/test passes those its `cargo test
    # --workspace --features dpor-node/testing` built), so nothing compiles here. A
    # `cargo build` of these three packages would build them again: cargo unifies
    # features over the packages a command selects, so its units differ from the test's.
    bins="$DEMO_BIN_DIR"
    say "binaries from DEMO_BIN_DIR=$bins (not built here)"
  else
    say "cargo build --profile $profile (dpor-node with its testing switches, dpor)"
    # Feature `testing` adds the node's cheat modes (`misbehave`); the demo's node uses them.
    cargo build --profile "$profile" --locked -p dpor-node -p dpor-cli -p dpor-beacon --features dpor-node/testing \
      || fail "cargo build --profile $profile failed"
  fi
  # The binaries just built are copied into the run directory at once and only the copies
  # are run: the shared target directory may be rebuilt meanwhile (a plain release build
  # drops the node's testing modes, a half-finished one leaves no binary at all). A copy
  # is a hard link where it can be (no disk of its own, 80 MB each otherwise): cargo and
  # the linker replace a binary by a new file, never rewrite it in place, so the link
  # keeps the bytes built here.
  local b
  mkdir -p "$work/bin"
  for b in dpor-node dpor dpor-beacon; do
    [ -f "$bins/$b" ] || fail "no $bins/$b after the build"
    ln -f "$bins/$b" "$work/bin/$b" 2>/dev/null || cp "$bins/$b" "$work/bin/$b" \
      || fail "cannot copy $bins/$b into $work/bin"
  done
  node_bin="$work/bin/dpor-node"
  dpor="$work/bin/dpor"
  beacon_bin="$work/bin/dpor-beacon"
  # (`--misbehave` is hidden from --help; a testing build names its modes for a bad one.)
  case "$("$node_bin" run --misbehave '?' 2>&1 || true)" in *commit-wrong*) true ;; *) false ;; esac \
    || fail "$bins/dpor-node has no testing modes (rebuilt without them before the demo copied it, or a DEMO_BIN_DIR of a normal build); run the demo again"
  info "binaries copied to $work/bin (the demo runs these copies)"
}

# ---------------------------------------------------------------- work dir and cleanup
# demo_workdir: sets $work and installs the cleanup (every pid in $pids is killed,
# every process group led by a pid in $groups is killed, on any exit).
demo_workdir() {
  work="$root/.demo/run-$$"
  rm -rf "$work"
  mkdir -p "$work"
  pids=()
  groups=() # pids that lead their own process group (setsid): the cleanup kills the group
  trap "cleanup 2>/dev/null" EXIT # (its lines go to fd 3; bash may warn "wait_for: No record of process")
  trap 'demo_failed=1; echo "demo: interrupted" >&3; exit 130' INT TERM
}
cleanup() {
  local code=$?
  trap - USR1
  # A command that failed under `set -e` outside `fail` (none should) still says so.
  if [ "$code" -ne 0 ] && [ "$demo_failed" = 0 ]; then
    echo "demo: FAIL: exit $code at: $BASH_COMMAND" >&3
  fi
  {
    for pid in "${groups[@]}"; do kill -- "-$pid" || true; done
    for pid in "${pids[@]}"; do kill "$pid" || true; done
    for pid in "${pids[@]}"; do wait "$pid" || true; done
    # Anything else still running one of this run's binaries: a child of a killed
    # subshell (a backgrounded shell function forks one) is in no list above.
    case "$work" in */.demo/run-[0-9]*) pkill -KILL -f "^$work/bin/" || true ;; esac
  } 2>/dev/null
  {
    if [ "$code" -ne 0 ]; then echo "demo: stopped every process it started; files and logs in $work"; fi
    echo "demo: the run directory takes $(du -sh --exclude=bin "$work" 2>/dev/null | cut -f1) besides bin/ (the binaries it ran," \
      "$(du -sh "$work/bin" 2>/dev/null | cut -f1), hard links of the build where possible); remove it with: rm -rf $work" \
      "(every run's: rm -rf $root/.demo/run-*)"
  } >&3 2>&1
}

# ---------------------------------------------------------------- values
free_port() { node -e 'const s=require("net").createServer();s.listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'; }
now() { date +%s.%N; }
secs_since() { node -e 'console.log((Number(process.argv[2])-Number(process.argv[1])).toFixed(2))' "$1" "$(now)"; }
# Token amount (wei, 18 decimals) as tokens, every significant decimal (100.0, 0.0000107).
tok() { node -e 'const v=BigInt(process.argv[1]);const s=v<0n?"-":"";const a=v<0n?-v:v;const f=(a%10n**18n).toString().padStart(18,"0").replace(/0+$/,"");console.log(s+(a/10n**18n)+"."+(f||"0"))' -- "$1"; }
fmt3() { node -e 'console.log(Number(process.argv[1]||0).toFixed(3))' -- "$1"; }
sub() { node -e 'console.log((BigInt(process.argv[1])-BigInt(process.argv[2])).toString())' -- "$1" "$2"; }
add() { node -e 'console.log((BigInt(process.argv[1])+BigInt(process.argv[2])).toString())' -- "$1" "$2"; }
# Field $1 (dot path, e.g. report.spot_checked) of the first JSON line on stdin ("" if absent).
jget() { node -e '
  const lines=require("fs").readFileSync(0,"utf8").split("\n").filter(l=>l.trim().startsWith("{"));
  if(!lines.length){console.log("");process.exit(0)}
  let v=JSON.parse(lines[0]);
  for(const k of process.argv[1].split(".")){ if(v==null)break; v=v[k]; }
  console.log(v==null?"":(typeof v==="object"?JSON.stringify(v):String(v)))' "$1"; }
# Fields $1 $2 … (dot paths) of the first JSON line on stdin, on one line, separated by
# spaces ("-" if absent): one process for several fields (`read -r a b c < <(… | jgets …)`).
jgets() { node -e '
  const lines=require("fs").readFileSync(0,"utf8").split("\n").filter(l=>l.trim().startsWith("{"));
  const j=lines.length?JSON.parse(lines[0]):{};
  console.log(process.argv.slice(1).map(p=>{let v=j;for(const k of p.split(".")){if(v==null)break;v=v[k];}
    return v==null||v===""?"-":String(v).replace(/\s+/g,"_")}).join(" "))' "$@"; }
# Field $1 (index) of a cast --json tuple on stdin.
field() { node -e 'const v=JSON.parse(require("fs").readFileSync(0,"utf8"));const t=Array.isArray(v[0])?v[0]:v;console.log(JSON.stringify(t[+process.argv[1]]).replace(/^"|"$/g,""))' "$1"; }
# wait_for DESCRIPTION TIMEOUT_SECONDS COMMAND...: runs COMMAND every 0.5 s until it
# succeeds. COMMAND runs in a subshell, its output kept in $work/wait.out (the last
# try); a `fail` inside it ends the demo with its message (see `fail`); a timeout fails
# with "timed out after …s waiting for DESCRIPTION" and the probe's last output.
wait_for() {
  local what="$1" timeout="$2"; shift 2
  local deadline=$(( $(date +%s) + timeout )) out="${work:-/tmp}/wait.out"
  until ( "$@" ) >"$out" 2>&1; do
    [ "$(date +%s)" -lt "$deadline" ] \
      || fail "timed out after ${timeout}s waiting for $what$([ -s "$out" ] && printf '; the last try said: %s' "$(tail -n 3 "$out")")"
    sleep 0.5
  done
}

# ---------------------------------------------------------------- chain
chain_time() { "$cast" block latest -f timestamp --rpc-url "$rpc"; }
# demo_chain: anvil (1 block/s, or DEMO_BLOCK_TIME), a local randomness beacon, the contracts.
demo_chain() {
  say "local chain: anvil ($([ "${DEMO_BLOCK_TIME:-1}" = 0 ] && echo "a block per transaction" || echo "a block every ${DEMO_BLOCK_TIME:-1}s")) + contracts"
  port="$(free_port)"
  rpc="http://127.0.0.1:$port"
  # The real anvil, in its own process group so that the cleanup ends the whole group.
  local mining=(--block-time "${DEMO_BLOCK_TIME:-1}")
  [ "${DEMO_BLOCK_TIME:-1}" != 0 ] || mining=() # automine: one block per transaction, mined at once
  # --max-persisted-states 0: the old states anvil evicts from memory (past the recent
  # blocks' it keeps) are dropped, never written to ~/.foundry/anvil/tmp, which a killed anvil
  # never cleans (an emulation wrote 5.6 GB there in 20 minutes; nothing here reads
  # state at an old block).
  setsid "$anvil" --accounts "${DEMO_ACCOUNTS:-10}" --host 127.0.0.1 --port "$port" "${mining[@]}" --max-persisted-states 0 --silent >"$work/anvil.log" 2>&1 3>&- &
  pids+=($!)
  groups+=($!)
  wait_for "anvil on $rpc" 30 "$cast" chain-id --rpc-url "$rpc"
  EPOCH_SECONDS=21600   # 6 h, the market's floor
  ANSWER_SECONDS=54000  # 15 h, the floor
  BEACON_PERIOD=30
  "$beacon_bin" keygen --out "$work/beacon.key" --seed 64706f722d64656d6f2d6265616f6e2d6b6579 >"$work/beacon.pub" 2>&1 \
    || { cat "$work/beacon.pub" >&2; fail "dpor-beacon keygen"; }
  words="$(grep -oE '(0x[0-9a-fA-F]+|[0-9]{10,})' "$work/beacon.pub" | head -n 4 | paste -sd, -)"
  [ "$(echo "$words" | tr ',' '\n' | grep -c .)" = 4 ] || { cat "$work/beacon.pub" >&2; fail "no 4 public-key words from dpor-beacon keygen"; }
  out="$("$forge" create contracts/src/beacon/DrandBeacon.sol:DrandBeacon --rpc-url "$rpc" --broadcast \
    --private-key 0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80 \
    --constructor-args "[$words]" "$(chain_time)" "$BEACON_PERIOD" 2>&1)" || { echo "$out" >&2; fail "forge create DrandBeacon"; }
  beacon="$(echo "$out" | sed -n 's/^ *Deployed to: *//p')"
  [ -n "$beacon" ] || { echo "$out" >&2; fail "no beacon address in the forge create output"; }
  out="$(BEACON=$beacon EPOCH_SECONDS=$EPOCH_SECONDS ANSWER_SECONDS=$ANSWER_SECONDS UPLOAD_SECONDS=${DEMO_UPLOAD_SECONDS:-86400} "$forge" script contracts/script/Deploy.s.sol:Deploy \
    --rpc-url "$rpc" --broadcast 2>&1)" || { echo "$out" >&2; fail "forge script (deploy)"; }
  token="$(echo "$out" | sed -n 's/^ *DPOR_TOKEN=//p')"
  market="$(echo "$out" | sed -n 's/^ *DPOR_MARKET=//p')"
  manifest="$(echo "$out" | sed -n 's/^ *DPOR_MANIFEST=//p')"
  [ -n "$token" ] && [ -n "$market" ] && [ -n "$manifest" ] || { echo "$out" >&2; fail "no addresses in the deploy output"; }
  info "anvil at $rpc; token $token; market $market; manifest $manifest; local beacon $beacon (one round every ${BEACON_PERIOD}s)"
  info "epochs of ${EPOCH_SECONDS}s on a global grid, ${ANSWER_SECONDS}s to answer a dispute (chain time warped), bond $(tok "$("$cast" call --rpc-url "$rpc" "$market" 'disputeBond()(uint128)' | cut -d' ' -f1)") tokens"
}
# warp_to T: moves the chain's clock to UNIX time T (no-op if already past) and mines a block.
warp_to() {
  local d=$(( $1 - $(chain_time) ))
  if [ "$d" -gt 0 ]; then "$cast" rpc --rpc-url "$rpc" evm_increaseTime "$d" >/dev/null || fail "evm_increaseTime"; fi
  "$cast" rpc --rpc-url "$rpc" evm_mine >/dev/null || fail "evm_mine"
}
# relay: records the beacon round of every started global epoch (the epoch seeds), as
# the account in $relay_key_file (default: the auditor's; a script whose auditor sends
# transactions at the same time gives the relay its own account: two processes sending
# from one account race for its nonce, "nonce too low").
relay() { "$dpor" beacon relay --once --beacon-key "$work/beacon.key" --key-file "${relay_key_file:-$work/auditor.key}" >>"$work/relay.log" 2>&1 || fail "dpor beacon relay (see $work/relay.log)"; }

call() { "$cast" call --rpc-url "$rpc" "$@"; }
num() { call "$@" | cut -d' ' -f1; }
balance() { num "$token" "balanceOf(address)(uint256)" "$1"; }
owed() { num "$market" "owed(address)(uint256)" "$1"; }
deal_sig="getDeal(uint256)((address,uint32,uint32,uint16,uint8,uint8,address,uint64,uint16,uint16,uint64,uint64,uint64,uint64,bytes32,uint128,uint128,uint128,uint128,uint64,uint32,uint32,uint32,uint32))"
deal_field() { call "$market" "$deal_sig" "$1" --json | field "$2"; }
dispute_sig="getDispute(uint256)((uint256,address,uint64,uint8,uint8,uint64,uint32,uint64,uint128,bytes32))"
dispute_field() { call "$market" "$dispute_sig" "$1" --json | field "$2"; }
block_number() { "$cast" block-number --rpc-url "$rpc"; }

# launch_node NAME KEY_FILE PORT [ARGS...]: starts a node (config $work/node.toml) with
# data dir $work/NAME, log $work/NAME.log (appended: restarts keep the history), addr file
# $work/NAME.addr; sets $launched to its pid. The handler's debug lines ("write applied")
# are logged.
launch_node() {
  local name="$1" key="$2" p="$3"; shift 3
  RUST_LOG="info,libp2p=warn,dpor_node::handler=debug" "$node_bin" run --config "$work/node.toml" --data-dir "$work/$name" \
    --listen "/ip4/127.0.0.1/tcp/$p" --rpc-url "$rpc" --market "$market" --provider-key-file "$key" \
    --addr-file "$work/$name.addr" --poll-interval-ms "${DEMO_POLL_MS:-500}" "$@" >>"$work/$name.log" 2>&1 3>&- &
  launched=$!
  pids+=("$launched")
}

# catch_partial_blocks DEAL NAME PID: node NAME (pid PID), provider of DEAL, now runs with
# --misbehave partial-blocks (it keeps half of every coded block). Warps to the first epoch
# of DEAL with a digest in force, relays its seed, shows that the node cannot make its
# proof (a whole coded block must match the run's Merkle root), and that `dpor watch` (the
# auditor, no secret) disputes what it serves, marks the epoch missed and slashes it.
# Uses as_auditor and $auditor from the calling script.
alive_pid() { kill -0 "$1" 2>/dev/null || fail "node $2 exited (see $work/$2.log)"; }
catch_partial_blocks() {
  local deal="$1" name="$2" pid="$3" epoch=0 col0 out q
  in_force_of() { call "$market" "digestInForce(uint256,uint64)(uint64,bytes32,uint64)" "$deal" "$1" | head -n 1 | cut -d' ' -f1; }
  window_of() { call "$market" "epochWindow(uint256,uint64)(uint256,uint256)" "$deal" "$1" | sed -n "${2}p" | cut -d' ' -f1; }
  status_of() { num "$market" "epochStatus(uint256,uint64)(uint8)" "$deal" "$1"; }
  while [ "$(in_force_of "$epoch")" = 0 ]; do
    epoch=$(( epoch + 1 ))
    [ "$epoch" -lt 50 ] || fail "no epoch of deal $deal has a digest in force"
  done
  col0="$(deal_field "$deal" 17)"
  warp_to $(( $(window_of "$epoch" 1) + 2 * BEACON_PERIOD ))
  relay
  gave_up_of() { alive_pid "$pid" "$name"; grep -q "does not match the digest in force" "$work/$name.log"; }
  wait_for "node $name to try its proof of epoch $epoch" 120 gave_up_of
  info "epoch $epoch of deal $deal started (seed relayed): the node cannot build its proof, since a whole coded block must match the run's Merkle root:"
  info "  node log: \"$(grep -m1 "does not match the digest in force" "$work/$name.log" | sed 's/\x1b\[[0-9;]*m//g; s/.*epochs: //; s/ deal=.*//')\""
  watch() { as_auditor watch --deal "$deal" --once --watch-state "$work/watch-$deal.json" --retries 1 2>>"$work/watch.err"; }
  out="$(watch)" || fail "dpor watch (pass 1): $out $(tail -n 3 "$work/watch.err")"
  echo "$out" | sed 's/^/   /'
  q="$(num "$market" "disputeCount()(uint256)")"
  [ "$(dispute_field "$q" 3)" = 1 ] && [ "$(dispute_field "$q" 1 | tr 'A-F' 'a-f')" = "$(echo "$auditor" | tr 'A-F' 'a-f')" ] \
    || fail "dpor watch opened no dispute on deal $deal: $out"
  warp_to $(( $(window_of "$epoch" 2) > $(dispute_field "$q" 2) ? $(window_of "$epoch" 2) + 1 : $(dispute_field "$q" 2) + 1 ))
  relay
  [ "$(status_of "$epoch")" = 0 ] || fail "epoch $epoch of deal $deal was settled by someone ($(status_of "$epoch")): did the cheating node prove it?"
  info "chain time warped past epoch $epoch's deadline and the dispute's: epoch unproven, dispute unanswered"
  out="$(watch)" || fail "dpor watch (pass 2): $out $(tail -n 3 "$work/watch.err")"
  echo "$out" | sed 's/^/   /'
  [ "$(status_of "$epoch")" = 2 ] || fail "epoch $epoch of deal $deal is not Missed after dpor watch"
  [ "$(dispute_field "$q" 3)" = 3 ] || fail "dispute $q is not Slashed after dpor watch"
  info "epoch $epoch Missed and dispute $q Slashed: faults $(deal_field "$deal" 8), collateral $(tok "$col0") -> $(tok "$(deal_field "$deal" 17)") tokens"
}
