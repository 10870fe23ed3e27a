// swift-tools-version:5.4
// libFuzzer targets for Lamina's sync-frame codec and the node's other network-facing parsers. Built only by fuzz.sh, with
// `-sanitize=fuzzer,address -parse-as-library`; see README.md.
//
// Tools version 5.4 on purpose: from 5.5 on, SwiftPM renames an executable's entry point
// to `<Target>_main` and links `main` to it, which fails for a libFuzzer target (it has no
// entry point of its own; libFuzzer supplies `main`). The targets are small files;
// everything they test is built by the main package in Swift 6 mode.
import PackageDescription

/// A fuzz target: one executable whose entry point is `LLVMFuzzerTestOneInput`.
func fuzzTarget(_ name: String, checks: String = "LaminaWireFuzzChecks") -> Target {
    .executableTarget(
        name: name,
        dependencies: [
            .product(name: checks, package: "Lamina")
        ]
    )
}

let package = Package(
    name: "LaminaFuzz",
    platforms: [.macOS("14.0")],
    dependencies: [
        .package(name: "Lamina", path: "..")
    ],
    targets: [
        fuzzTarget("FuzzDecode"),
        fuzzTarget("FuzzRoundTrip"),
        fuzzTarget("FuzzSplitFeed"),
        fuzzTarget("FuzzContentHeaders", checks: "LaminaNodeFuzzChecks"),
        fuzzTarget("FuzzIdentityToken", checks: "LaminaNodeFuzzChecks"),
        fuzzTarget("FuzzServerAPI", checks: "LaminaNodeFuzzChecks"),
        fuzzTarget("FuzzClientAPI", checks: "LaminaNodeFuzzChecks"),
        fuzzTarget("FuzzWebhookRequest", checks: "LaminaNodeFuzzChecks"),
        fuzzTarget("FuzzWebSocketPacket", checks: "LaminaNodeFuzzChecks"),
        fuzzTarget("FuzzHTTP2FrameScanner", checks: "LaminaNodeFuzzChecks"),
    ]
)
