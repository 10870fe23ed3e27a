// swift-tools-version:6.0
// Lamina: a messaging relay node and its native client SDK.
// The module map and the direction of dependencies follow ARCHITECTURE (see README.md).
import PackageDescription

let package = Package(
    name: "Lamina",
    platforms: [.macOS(.v14)],
    products: [
        .library(name: "LaminaModel", targets: ["LaminaModel"]),
        .library(name: "LaminaWire", targets: ["LaminaWire"]),
        .library(name: "LaminaMerge", targets: ["LaminaMerge"]),
        .library(name: "LaminaClient", targets: ["LaminaClient"]),
        .library(name: "LaminaNode", targets: ["LaminaNode"]),
        // The codec properties shared by the fuzz targets (Fuzz/) and the replay tests.
        .library(name: "LaminaWireFuzzChecks", targets: ["LaminaWireFuzzChecks"]),
        .library(name: "LaminaNodeFuzzChecks", targets: ["LaminaNodeFuzzChecks"]),
        .library(name: "LaminaTransport", targets: ["LaminaTransport"]),
        .executable(name: "lamina-bench", targets: ["lamina-bench"]),
        .executable(name: "lamina-vectors", targets: ["lamina-vectors"]),
        .executable(name: "lamina-node", targets: ["lamina-node"]),
        .executable(name: "lamina", targets: ["lamina"]),
        .executable(name: "lamina-conformance", targets: ["lamina-conformance"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.0"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.0"),
        .package(url: "https://github.com/apple/swift-protobuf.git", from: "1.39.0"),
        .package(url: "https://github.com/groue/GRDB.swift.git", from: "7.10.0"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.0"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.0"),
        .package(url: "https://github.com/apple/swift-atomics.git", from: "1.3.0"),
        // `swift package generate-documentation --target LaminaClient` (DocC; .ci/run builds it).
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.5.0"),
        // The node's parts as services of one ServiceGroup (ordered start, graceful shutdown).
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
    ],
    targets: [
        // Value types of the domain. No dependencies beyond Foundation.
        .target(name: "LaminaModel"),
        // The sync-frame codec: frames <-> bytes. Pure: no sockets, threads or storage.
        .target(
            name: "LaminaWire",
            dependencies: [
                "LaminaModel",
                // For `VersionVector`: one type, its lattice in LaminaMerge, its codec here.
                "LaminaMerge",
                .product(name: "NIOCore", package: "swift-nio"),
            ]
        ),
        // The codec's properties (decode, round-trip, split-feed) as functions that report
        // a violation instead of trapping: used by Fuzz/ and by LaminaWireTests.
        .target(
            name: "LaminaWireFuzzChecks",
            dependencies: [
                "LaminaWire",
                .product(name: "NIOCore", package: "swift-nio"),
            ]
        ),
        // The node's network-facing parsers (content headers and ranges, identity tokens, the
        // Server API's requests, the webhooks API's registration body) as properties that
        // report a violation: used by Fuzz/ and by LaminaNodeTests.
        .target(
            name: "LaminaNodeFuzzChecks",
            dependencies: [
                "LaminaNode", "LaminaStore", "LaminaWire", "LaminaWireFuzzChecks", "LaminaTransport", "LaminaModel",
                .product(name: "NIOCore", package: "swift-nio"),
            ]
        ),
        // Pure merge and ordering rules shared by node, peers and SDK.
        .target(name: "LaminaMerge", dependencies: ["LaminaModel"]),
        // Child processes: one launch at a time, output pipes read without trapping on EINTR.
        .target(name: "LaminaProcess", dependencies: ["CLaminaSpawn"]),
        .target(name: "CLaminaSpawn"),
        // lamina-node's jemalloc options (`malloc_conf`, read by jemalloc when it starts).
        .target(name: "CLaminaAllocator"),
        // A pass-through SQLite VFS that joins a commit's WAL writes into one (the store's writer).
        .target(name: "CLaminaSQLiteWAL", linkerSettings: [.linkedLibrary("sqlite3")]),
        // What tools on the same machine share with a zero-config node: its default address,
        // its data directory's layout and the dev identity key that mints tokens it accepts.
        // The node and the `lamina` CLI both use it; the CLI never links the node.
        .target(name: "LaminaLocalNode", dependencies: ["LaminaModel", "LaminaTransport"]),
        // The node's store: the only SQL and the only GRDB / PostgreSQL import. SQLite/ and
        // PostgreSQL/ are the backends; the dialect, the writer (group commit) and the typed
        // operations (the SQL forms of the merge rules) are shared. Its interface is `package`.
        .target(
            name: "LaminaStore",
            dependencies: [
                "LaminaModel",
                "LaminaWire",
                "LaminaMerge",
                "CLibpq",
                "CLaminaSQLiteWAL",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "GRDBSQLite", package: "GRDB.swift"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "Atomics", package: "swift-atomics"),
                .product(name: "Logging", package: "swift-log"),
            ],
            exclude: ["Writer/WRITE-PATH.md", "PostgreSQL/POSTGRES.md"]
        ),
        // The relay node: auth, sessions, sync, fan-out, server, over LaminaStore.
        .target(
            name: "LaminaNode",
            dependencies: [
                "LaminaModel",
                "LaminaWire",
                "LaminaMerge",
                "LaminaStore",
                "LaminaTransport",
                "LaminaLocalNode",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "Atomics", package: "swift-atomics"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            exclude: ["Server/RESOURCES.md", "Engine/PRESENCE-CHANNELS.md"],
            // The web chat page, served in dev mode (ClientAPI/WebChatPage.swift): plain files, embedded.
            resources: [.embedInCode("ClientAPI/WebChat/index.html"), .embedInCode("ClientAPI/WebChat/chat.js")]
        ),
        // The relay node executable: zero-config start, flags or a JSON config file.
        .executableTarget(
            name: "lamina-node",
            dependencies: [
                "LaminaNode",
                "LaminaLocalNode",
                "LaminaProcess",
                "CLaminaAllocator",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            // jemalloc (libjemalloc-dev) in place of glibc's malloc for the whole process
            // (SQLite, OpenSSL and the Swift runtime included), with the options of
            // CLaminaAllocator: Server/RESOURCES.md §14.
            linkerSettings: [.linkedLibrary("jemalloc", .when(platforms: [.linux]))]
        ),
        // The native client SDK: local store, change notifications, queries, content rules,
        // the app-facing API and the sync engine's pure core (over an abstract frame channel).
        .target(
            name: "LaminaClient",
            dependencies: [
                "LaminaModel",
                "LaminaWire",
                "LaminaMerge",
                "LaminaTransport",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "GRDB", package: "GRDB.swift"),
            ]
        ),
        // The `lamina` command-line client's logic (settings, dev tokens, sessions, status
        // marks, formatting, chat input), kept out of the executable so it can be unit tested.
        .target(
            name: "LaminaCLI",
            dependencies: [
                "LaminaClient",
                "LaminaModel",
                "LaminaWire",
                "LaminaLocalNode",
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ]
        ),
        // The `lamina` command-line client: token, conversations, send, tail, chat.
        .executableTarget(
            name: "lamina",
            dependencies: [
                "LaminaCLI",
                "LaminaClient",
                "LaminaModel",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        // `lamina-conformance`: drives a node through the session-state table of
        // Protocol/SPEC.md §5.7 and prints what it got (Protocol/conformance/README.md).
        .executableTarget(
            name: "lamina-conformance",
            dependencies: [
                "LaminaCLI",
                "LaminaClient",
                "LaminaMerge",
                "LaminaModel",
                "LaminaWire",
            ]
        ),
        // Counts heap allocations by replacing malloc & co.; linked into lamina-bench only.
        .target(name: "CAllocationCounter"),
        // OpenSSL 3 (libssl-dev) with a shim header for the macros Swift cannot call.
        .systemLibrary(name: "COpenSSL", pkgConfig: "openssl", providers: [.apt(["libssl-dev"])]),
        // libpq (libpq-dev): the PostgreSQL store's libpq driver (LaminaStore/PostgreSQL/Libpq*.swift).
        .systemLibrary(name: "CLibpq", pkgConfig: "libpq", providers: [.apt(["libpq-dev"])]),
        // libnghttp2 1.52 (libnghttp2-dev).
        .systemLibrary(name: "CNghttp2", pkgConfig: "libnghttp2", providers: [.apt(["libnghttp2-dev"])]),
        // TLS (OpenSSL over memory BIOs) and HTTP/2 (nghttp2) as SwiftNIO handlers, both roles.
        .target(
            name: "LaminaTransport",
            dependencies: [
                "COpenSSL",
                "CNghttp2",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "Atomics", package: "swift-atomics"),
            ],
            exclude: ["README.md"]
        ),
        // Load generator and measurements (codec benchmark first).
        .executableTarget(
            name: "lamina-bench",
            dependencies: [
                "LaminaModel",
                "LaminaWire",
                "LaminaNode",
                "LaminaStore",
                "LaminaLocalNode",
                "LaminaClient",
                "CAllocationCounter",
                "LaminaTransport",
                "LaminaProcess",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
                // device-search reads a client store's file directly (its index's pages).
                .product(name: "GRDB", package: "GRDB.swift"),
            ],
            // bench.pb.swift is generated from it once and committed (see the file).
            exclude: ["Codec/bench.proto"]
        ),
        // Writes Protocol/vectors from a catalog of frames, checking each against the codec.
        .executableTarget(
            name: "lamina-vectors",
            dependencies: [
                "LaminaModel",
                "LaminaWire",
                "LaminaMerge",
                .product(name: "NIOCore", package: "swift-nio"),
            ]
        ),
        // Test support: a throwaway PostgreSQL cluster per test process (or LAMINA_TEST_POSTGRES).
        .target(name: "LaminaTestPostgres", dependencies: ["LaminaProcess"], path: "Tests/LaminaTestPostgres"),
        // Test support: temporary stores on either backend and model fixtures, for the storage
        // suites (LaminaStoreTests) and the engine's (LaminaNodeTests).
        .target(
            name: "LaminaStoreTestSupport",
            dependencies: ["LaminaStore", "LaminaModel", "LaminaTestPostgres"],
            path: "Tests/LaminaStoreTestSupport"
        ),
        .testTarget(name: "LaminaModelTests", dependencies: ["LaminaModel"]),
        .testTarget(name: "LaminaMergeTests", dependencies: ["LaminaMerge", "LaminaModel"]),
        .testTarget(
            name: "LaminaClientTests",
            dependencies: [
                "LaminaClient",
                "LaminaModel",
                "LaminaWire",
                "LaminaTransport",
                .product(name: "NIOCore", package: "swift-nio"),
            ]
        ),
        .testTarget(
            name: "LaminaWireTests",
            dependencies: [
                "LaminaModel",
                "LaminaWire",
                "LaminaMerge",
                "LaminaWireFuzzChecks",
                .product(name: "NIOCore", package: "swift-nio"),
            ]
        ),
        // The store alone, on both backends (no engine).
        .testTarget(
            name: "LaminaStoreTests",
            dependencies: [
                "LaminaStore", "LaminaStoreTestSupport", "LaminaTestPostgres", "LaminaModel", "LaminaMerge",
                .product(name: "GRDB", package: "GRDB.swift"),
            ]
        ),
        .testTarget(
            name: "LaminaNodeTests",
            dependencies: ["LaminaNode", "LaminaStore", "LaminaStoreTestSupport", "LaminaLocalNode", "LaminaModel", "LaminaWire", "LaminaMerge", "LaminaTransport", "LaminaNodeFuzzChecks", "LaminaTestPostgres", "LaminaProcess",
                           .product(name: "NIOCore", package: "swift-nio")]
        ),
        // A real node in-process (and the built binary) over TLS + HTTP/2 on loopback.
        .testTarget(
            name: "IntegrationTests",
            dependencies: [
                "LaminaProcess",
                "LaminaTestPostgres",
                "LaminaNode",
                "LaminaStore",
                "LaminaLocalNode",
                "LaminaClient",
                "LaminaModel",
                "LaminaWire",
                "LaminaTransport",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
            ]
        ),
        // LaminaCLI's logic, and the built `lamina` binary against a real node on loopback.
        .testTarget(
            name: "CLITests",
            dependencies: [
                "LaminaProcess",
                "LaminaCLI",
                "LaminaClient",
                "LaminaModel",
                "LaminaNode",
                "LaminaLocalNode",
                "lamina",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .testTarget(
            name: "LaminaTransportTests",
            dependencies: [
                "LaminaProcess",
                "LaminaTransport",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
            ]
        ),
    ]
)
