#!/usr/bin/env bash
# Builds one fuzz target and runs it for N seconds.
#   Fuzz/fuzz.sh <FuzzDecode|FuzzRoundTrip|FuzzSplitFeed|FuzzContentHeaders|FuzzIdentityToken|FuzzServerAPI|FuzzClientAPI|FuzzWebhookRequest|FuzzWebSocketPacket|FuzzHTTP2FrameScanner> <seconds> [libFuzzer flags...]
# Seeds are remade from Protocol/vectors and Fuzz/seeds first (make-seeds.sh, into
# Fuzz/corpus-work/seeds-<target>/). New corpus entries go to
# Fuzz/corpus-work/<target>/, the log to Fuzz/artifacts/<target>.log, and any crashing,
# leaking or timed-out input to Fuzz/FailCases/<target>-<kind>-<sha1>, which the main
# suite's FailCasesReplayTests replays. Exits non-zero when the target found a failure.
# Set FUZZ_SKIP_BUILD=1 to reuse the last build (e.g. for several targets at once).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
targets=(FuzzDecode FuzzRoundTrip FuzzSplitFeed FuzzContentHeaders FuzzIdentityToken FuzzServerAPI FuzzClientAPI FuzzWebhookRequest FuzzWebSocketPacket FuzzHTTP2FrameScanner)

usage() {
    echo "usage: $0 <${targets[*]// /|}> <seconds> [libFuzzer flags...]" >&2
    exit 2
}

(( $# >= 2 )) || usage
target="$1"
seconds="$2"
shift 2
[[ " ${targets[*]} " == *" $target "* ]] || usage
[[ "$seconds" =~ ^[0-9]+$ ]] || usage

build_flags=(
    --package-path "$here"
    -c release
    -Xswiftc -sanitize=fuzzer,address
    -Xswiftc -parse-as-library
    -Xswiftc -g
)

# Each target gets its own seed folder, so several targets can start at once.
seeds_root="$here/corpus-work/seeds-$target"
"$here/make-seeds.sh" "$seeds_root"

if [[ "${FUZZ_SKIP_BUILD:-0}" != 1 ]]; then
    # The targets compile the main package's sources by path, and SwiftPM does not notice a
    # source file added there: a kept build plan then compiles without it. Plan again when the
    # list of source files changed since the last build.
    stamp="$here/.build/sources.list"
    sources="$(cd "$here/.." && find Sources Fuzz/Sources -name '*.swift' | sort)"
    if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$sources" ]]; then
        rm -f "$here/.build/release.yaml"
    fi
    echo "fuzz.sh: building $target"
    swift build "${build_flags[@]}" --product "$target"
    printf '%s' "$sources" > "$stamp"
fi
binary="$(swift build "${build_flags[@]}" --show-bin-path)/$target"
[[ -x "$binary" ]] || { echo "fuzz.sh: $binary was not built" >&2; exit 1; }

corpus="$here/corpus-work/$target"
seeds="$seeds_root/$target"
log="$here/artifacts/$target.log"
mkdir -p "$corpus" "$here/artifacts" "$here/FailCases"

# A target's dictionary of tokens, when it has one.
dictionary=()
[[ -f "$here/dictionaries/$target.dict" ]] && dictionary=(-dict="$here/dictionaries/$target.dict")

before="$(ls "$here/FailCases")"
echo "fuzz.sh: running $target for ${seconds}s (log: $log)"
set +e
# The Swift runtime's own crash backtracer would race libFuzzer's crash handling under ASan.
# LeakSanitizer's false positives (Data reached only through a tagged enum) are suppressed:
# see lsan-suppressions.txt.
SWIFT_BACKTRACE=enable=no \
LSAN_OPTIONS="suppressions=$here/lsan-suppressions.txt${LSAN_OPTIONS:+:$LSAN_OPTIONS}" \
"$binary" \
    -max_total_time="$seconds" \
    -timeout=10 \
    -rss_limit_mb=2048 \
    -print_final_stats=1 \
    -artifact_prefix="$here/FailCases/$target-" \
    ${dictionary[@]+"${dictionary[@]}"} \
    "$@" \
    "$corpus" "$seeds" > "$log" 2>&1
status=$?
set -e

grep -E '^#[0-9]+[[:space:]]+DONE' "$log" | tail -n 1 || true
grep -E '^stat::' "$log" || true
executed="$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)"
echo "fuzz.sh: $target (up to ${seconds}s): executed units: ${executed:-unknown}, exit status $status"

new="$(comm -13 <(printf '%s\n' "$before") <(ls "$here/FailCases"))"
if (( status != 0 )) || [[ -n "$new" ]]; then
    echo "fuzz.sh: $target FAILED; see $log" >&2
    grep -E 'violated|Fatal error|ERROR: (AddressSanitizer|libFuzzer)' "$log" | head -n 5 >&2 || true
    [[ -z "$new" ]] || printf 'fuzz.sh: saved failing input: Fuzz/FailCases/%s\n' $new >&2
    exit 1
fi
