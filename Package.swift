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
        .library(name: "LaminaTransport", targets: ["LaminaTransport"]),
        .executable(name: "lamina-bench", targets: ["lamina-bench"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.0"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.0"),
        .package(url: "https://github.com/apple/swift-protobuf.git", from: "1.39.0"),
    ],
    targets: [
        // Value types of the domain. No dependencies beyond Foundation.
        .target(name: "LaminaModel"),
        // The sync-frame codec: frames <-> bytes. Pure: no sockets, threads or storage.
        .target(
            name: "LaminaWire",
            dependencies: [
                "LaminaModel",
                .product(name: "NIOCore", package: "swift-nio"),
            ]
        ),
        // Pure merge and ordering rules shared by node, peers and SDK.
        .target(name: "LaminaMerge", dependencies: ["LaminaModel"]),
        // OpenSSL 3 (libssl-dev) with a shim header for the macros Swift cannot call.
        .systemLibrary(name: "COpenSSL", pkgConfig: "openssl", providers: [.apt(["libssl-dev"])]),
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
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ],
            exclude: ["README.md"]
        ),
        // Load generator and measurements (codec benchmark first).
        .executableTarget(
            name: "lamina-bench",
            dependencies: [
                "LaminaModel",
                "LaminaWire",
                "LaminaTransport",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
            ]
        ),
        .testTarget(name: "LaminaModelTests", dependencies: ["LaminaModel"]),
        .testTarget(
            name: "LaminaTransportTests",
            dependencies: [
                "LaminaTransport",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ]
        ),
    ]
)
