import Foundation
import LaminaModel
import LaminaStoreTestSupport
import Testing

@testable import LaminaStore

/// Suspended users (`user_suspensions`) and settings read by key prefix (the shared Server API
/// tokens), on both backends.
@Suite struct UserSuspensionStorageTests {
    @Test(arguments: StoreBackend.allCases) func suspensionsAreSetAndClearedOncePerUser(_ backend: StoreBackend)
        async throws
    {
        try await withTemporaryStore(backend: backend) { store, _ in
            let now = Timestamp(millisecondsSince1970: 1_000)
            func suspended(_ user: UserID) async throws -> Bool {
                try await store.read { r in try r.isSuspended(user) }
            }
            func set(_ on: Bool) async throws -> Bool {
                try await store.write { tx in try tx.setSuspended(on, user: "alice", at: now) }
            }
            let before = try await suspended("alice")
            let first = try await set(true)
            let again = try await set(true)
            let during = (try await suspended("alice"), try await suspended("bob"))
            let lifted = try await set(false)
            let liftedAgain = try await set(false)
            let after = try await suspended("alice")
            #expect(!before && first && !again && during == (true, false))
            #expect(lifted && !liftedAgain && !after)
        }
    }

    @Test(arguments: StoreBackend.allCases) func settingsAreReadByPrefix(_ backend: StoreBackend) async throws {
        try await withTemporaryStore(backend: backend) { store, _ in
            try await store.write { tx in
                try tx.setSetting("server-api/tokens/a", [1, 2])
                try tx.setSetting("server-api/tokens/b", [3])
                try tx.setSetting("server-api/app-id", [4])
            }
            let tokens = try await store.read { r in try r.settings(withPrefix: "server-api/tokens/") }
            #expect(tokens == ["server-api/tokens/a": [1, 2], "server-api/tokens/b": [3]])
            var refused = false
            do { _ = try await store.read { r in try r.settings(withPrefix: "server_api/") } } catch {
                refused = error is StorageError
            }
            #expect(refused)
        }
    }

    @Test(arguments: StoreBackend.allCases) func notificationIDsAreRememberedForALifetime(_ backend: StoreBackend)
        async throws
    {
        try await withTemporaryStore(backend: backend) { store, _ in
            let (first, second) = (UUID(), UUID())
            func record(_ id: UUID, at ms: Int64, forgetting oldest: Int64) async throws -> Bool {
                try await store.write { tx in
                    try tx.recordNotificationID(
                        id, at: Timestamp(millisecondsSince1970: ms),
                        forgettingBefore: Timestamp(millisecondsSince1970: oldest))
                }
            }
            let new = try await record(first, at: 1_000, forgetting: 0)
            let repeated = try await record(first, at: 2_000, forgetting: 0)
            let other = try await record(second, at: 3_000, forgetting: 0)
            // Once its time is before the oldest kept, the id is forgotten: new again.
            let afterLifetime = try await record(first, at: 10_000, forgetting: 2_500)
            let secondKept = try await record(second, at: 10_000, forgetting: 2_500)
            #expect(new && !repeated && other && afterLifetime && !secondKept)
        }
    }
}
