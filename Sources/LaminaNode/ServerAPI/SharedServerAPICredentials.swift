import Foundation
import LaminaStore
import LaminaTransport
import Logging
import NIOConcurrencyHelpers

/// Several nodes on one PostgreSQL store answer for one app (issue #33): its app id is the
/// store's (`server-api/app-id` in `node_settings`: the first node to start sets it, every
/// node adopts it and writes it to its own `server-api/app-id` file), and a Server API token
/// of any node's tokens file is good on every node: each node publishes the SHA-256 of its
/// tokens under `server-api/tokens/<node id>` and reads every node's every
/// ``refreshInterval`` (deleting a line from a node's file revokes the token everywhere within
/// about a second). The webhooks' payload URLs and the Client API's app id follow the app id.
final class SharedServerAPICredentials: Sendable {
    static let appIDKey = "server-api/app-id"
    static let tokensPrefix = "server-api/tokens/"
    static let refreshInterval: Duration = .seconds(1)

    /// Every node's published token hashes (this node's included).
    let hashes = NIOLockedValueBox<[[UInt8]]>([])
    private let store: NodeStore
    private let key: String
    private let tokensFile: URL?
    private let published = NIOLockedValueBox<[UInt8]?>(nil)
    private let task = NIOLockedValueBox<Task<Void, Never>?>(nil)
    private let logger = Logger(label: "lamina.server-api")

    private init(store: NodeStore, node: UInt64, tokensFile: URL?) {
        self.store = store
        key = Self.tokensPrefix + String(node, radix: 16)
        self.tokensFile = tokensFile
    }

    /// On a shared store: `credentials` with the store's app id (set from `credentials` when
    /// this node is the first), this node's tokens published and every node's read, and the
    /// refresh running (``stop()`` ends it). Elsewhere nil.
    static func start(_ credentials: inout ServerAPICredentials, store: NodeStore, node: UInt64) async throws
        -> SharedServerAPICredentials?
    {
        guard store.isShared else { return nil }
        let local = credentials.appID
        let stored = try await store.write { tx -> [UInt8]? in
            try tx.setSettingIfAbsent(appIDKey, Array(local.utf8))
            return try tx.read.setting(appIDKey)
        }
        guard let stored, let appID = String(validating: stored, as: UTF8.self), UUID(uuidString: appID) != nil else {
            throw ServerAPISharedCredentialsError(description: "the store's app id is not a UUID")
        }
        if appID != local, let file = credentials.tokensFile {
            let appFile = file.deletingLastPathComponent().appendingPathComponent("app-id")
            try Data((appID + "\n").utf8).write(to: appFile, options: .atomic)
        }
        credentials.appID = appID
        let shared = SharedServerAPICredentials(store: store, node: node, tokensFile: credentials.tokensFile)
        try await shared.refresh(own: credentials.tokens)
        let task = Task { [weak shared] in
            while !Task.isCancelled {
                do { try await Task.sleep(for: refreshInterval) } catch { return }
                guard let shared else { return }
                do { try await shared.refresh(own: nil) } catch {
                    shared.logger.warning(
                        "the shared Server API tokens were not refreshed", metadata: ["error": "\(error)"])
                }
            }
        }
        shared.task.withLockedValue { $0 = task }
        return shared
    }

    /// Ends the refresh.
    func stop() { task.withLockedValue { $0 }?.cancel() }

    /// Publishes this node's token hashes when they changed (`own`, else its tokens file read
    /// again), then reads every node's.
    private func refresh(own: [[UInt8]]?) async throws {
        let tokens = try own ?? tokensFile.map(ServerAPICredentials.tokens(in:)) ?? []
        let mine = try tokens.flatMap { try SHA256Hasher.hash($0) }
        if published.withLockedValue({ $0 }) != mine {
            let key = self.key
            try await store.write { tx in try tx.setSetting(key, mine) }
            published.withLockedValue { $0 = mine }
        }
        let all = try await store.read { r in try r.settings(withPrefix: Self.tokensPrefix) }
        var out: [[UInt8]] = []
        for (_, value) in all.sorted(by: { $0.key < $1.key }) {
            for start in stride(from: 0, to: value.count - value.count % 32, by: 32) {
                out.append(Array(value[start..<start + 32]))
            }
        }
        hashes.withLockedValue { $0 = out }
    }
}

struct ServerAPISharedCredentialsError: Error, CustomStringConvertible {
    var description: String
}
