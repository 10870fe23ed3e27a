#!/usr/bin/env bash
# Turns every vector in Protocol/vectors into seed inputs for the fuzz targets, so the
# seeds are always in step with the vectors. Run by fuzz.sh before every run.
#   Fuzz/make-seeds.sh [output directory, default Fuzz/corpus-work/seeds]
# Writes <out>/FuzzDecode, <out>/FuzzRoundTrip, <out>/FuzzSplitFeed, and copies
# Fuzz/seeds/<target>/ (hand-made seeds of the other targets) to <out>/<target>. Needs only bash,
# sed and grep: each vector's "hex" string is one JSON string on one line.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
vectors="$here/../Protocol/vectors"
out="${1:-$here/corpus-work/seeds}"

# hex_of FILE: prints the vector's "hex" value without white space.
hex_of() {
    local hex
    hex="$(sed -n 's/.*"hex"[[:space:]]*:[[:space:]]*"\([0-9a-fA-F[:space:]]*\)".*/\1/p' "$1" | head -n 1 | tr -d '[:space:]')"
    if [[ -z "$hex" && -z "$(grep -E '"hex"[[:space:]]*:[[:space:]]*""' "$1" || true)" ]]; then
        echo "make-seeds: no \"hex\" string in $1" >&2
        return 1
    fi
    if (( ${#hex} % 2 != 0 )); then
        echo "make-seeds: odd number of hex digits in $1" >&2
        return 1
    fi
    printf '%s' "$hex"
}

# write_bytes HEX FILE: writes the bytes the hex digits spell.
write_bytes() {
    printf '%b' "$(printf '%s' "$1" | sed 's/\(..\)/\\x\1/g')" > "$2"
}

shopt -s nullglob
valid=("$vectors"/valid/*.json)
invalid=("$vectors"/invalid/*.json)
if (( ${#valid[@]} + ${#invalid[@]} == 0 )); then
    echo "make-seeds: no vectors under $vectors" >&2
    exit 1
fi

rm -rf "$out"
mkdir -p "$out/FuzzDecode" "$out/FuzzRoundTrip" "$out/FuzzSplitFeed"

stream=""   # every valid vector back to back: a stream of many frames
for file in "${valid[@]}" "${invalid[@]}"; do
    name="$(basename "$file" .json)"
    kind="$(basename "$(dirname "$file")")"
    hex="$(hex_of "$file")"
    write_bytes "$hex" "$out/FuzzDecode/$kind-$name"
    write_bytes "$hex" "$out/FuzzRoundTrip/$kind-$name"
    # Split-feed inputs: control byte n (n % 8 chunk sizes follow), then the stream.
    write_bytes "00$hex" "$out/FuzzSplitFeed/$kind-$name-whole"
    write_bytes "0101$hex" "$out/FuzzSplitFeed/$kind-$name-drip"
    write_bytes "03020507$hex" "$out/FuzzSplitFeed/$kind-$name-mixed"
    if [[ "$kind" == valid ]]; then stream+="$hex"; fi
done
write_bytes "$stream" "$out/FuzzDecode/stream-all-valid"
write_bytes "0401031100$stream" "$out/FuzzSplitFeed/stream-all-valid"

# Hand-made seeds of the node's other parsers (content headers, identity tokens).
for folder in "$here"/seeds/*/; do
    target="$(basename "$folder")"
    mkdir -p "$out/$target"
    cp "$folder"* "$out/$target/"
done

echo "make-seeds: ${#valid[@]} valid and ${#invalid[@]} invalid vectors -> $out"
