import Foundation
import LaminaModel
import LaminaStoreTestSupport
import Testing

@testable import LaminaStore

@Suite struct AuthStorageTests {
    func ms(_ v: Int64) -> Timestamp { Timestamp(millisecondsSince1970: v) }

    @Test(arguments: StoreBackend.allCases) func noncesAreSingleUseWithDistinguishableFailures(_ backend: StoreBackend)
        async throws
    {
        try await withTemporaryStore(backend: backend) { store, _ in
            let nonce = NodeStore.makeNonce()
            #expect(nonce.utf8.count == 43)
            #expect(NodeStore.makeNonce() != nonce)
            let stale = NodeStore.makeNonce()
            try await store.write { tx in
                try tx.issueNonce(nonce, issuedAt: self.ms(1_000), expiresAt: self.ms(601_000))
                try tx.issueNonce(stale, issuedAt: self.ms(1_000), expiresAt: self.ms(2_000))
            }
            try await store.write { tx in try tx.consumeNonce(nonce, at: self.ms(5_000)) }
            let reused = await storageErrorCode {
                try await store.write { tx in try tx.consumeNonce(nonce, at: self.ms(6_000)) }
            }
            let unknown = await storageErrorCode {
                try await store.write { tx in try tx.consumeNonce("never-issued", at: self.ms(6_000)) }
            }
            let expired = await storageErrorCode {
                try await store.write { tx in try tx.consumeNonce(stale, at: self.ms(2_000)) }
            }
            #expect(reused == .nonceReused)
            #expect(unknown == .nonceUnknown)
            #expect(expired == .nonceExpired)
            // An expired nonce stays refused; a duplicate issue is refused.
            #expect(
                await storageErrorCode {
                    try await store.write { tx in try tx.consumeNonce(stale, at: self.ms(3_000)) }
                } == .nonceExpired)
            #expect(
                await storageErrorCode {
                    try await store.write { tx in try tx.issueNonce(nonce, issuedAt: self.ms(1), expiresAt: self.ms(2))
                    }
                } == .alreadyExists)
            #expect(
                await storageErrorCode {
                    try await store.write { tx in try tx.issueNonce("", issuedAt: self.ms(1), expiresAt: self.ms(2)) }
                } == .invalidArgument)
            let pruned = try await store.write { tx in try tx.pruneNonces(expiredBefore: self.ms(10_000)) }
            #expect(pruned == 1)
        }
    }

    @Test(arguments: StoreBackend.allCases) func sessionsCanBeLookedUpRevokedAndExpire(_ backend: StoreBackend)
        async throws
    {
        try await withTemporaryStore(backend: backend) { store, _ in
            let hash = Array(repeating: UInt8(1), count: 32)
            let other = Array(repeating: UInt8(2), count: 32)
            let session = SessionRecord(
                tokenHash: hash, user: "alice", device: "phone", createdAt: ms(1_000), expiresAt: ms(100_000))
            try await store.write { tx in
                try tx.createSession(session)
                try tx.createSession(
                    SessionRecord(
                        tokenHash: other, user: "alice", device: "laptop", createdAt: self.ms(1_000),
                        expiresAt: self.ms(100_000)))
            }
            #expect(try await store.read { r in try r.session(tokenHash: hash, at: self.ms(50_000)) } == session)
            #expect(
                await storageErrorCode {
                    _ = try await store.read { r in try r.session(tokenHash: hash, at: self.ms(100_000)) }
                } == .sessionExpired)
            #expect(
                await storageErrorCode {
                    _ = try await store.read { r in
                        try r.session(tokenHash: Array(repeating: 3, count: 32), at: self.ms(1))
                    }
                } == .sessionUnknown)
            #expect(
                await storageErrorCode {
                    _ = try await store.read { r in try r.session(tokenHash: [1, 2], at: self.ms(1)) }
                } == .invalidArgument)
            let revoked = try await store.write { tx in try tx.revokeSession(tokenHash: hash, at: self.ms(60_000)) }
            #expect(revoked)
            #expect(
                await storageErrorCode {
                    _ = try await store.read { r in try r.session(tokenHash: hash, at: self.ms(60_001)) }
                } == .sessionRevoked)
            #expect(try await store.write { tx in try tx.revokeSession(tokenHash: hash, at: self.ms(60_002)) } == false)
            #expect(try await store.write { tx in try tx.revokeSessions(of: "alice", at: self.ms(70_000)) } == 1)
            #expect(
                await storageErrorCode {
                    _ = try await store.read { r in try r.session(tokenHash: other, at: self.ms(70_001)) }
                } == .sessionRevoked)
            #expect(
                await storageErrorCode { try await store.write { tx in try tx.createSession(session) } }
                    == .alreadyExists)
            #expect(try await store.write { tx in try tx.pruneSessions(expiredBefore: self.ms(200_000)) } == 2)
        }
    }

    @Test(arguments: StoreBackend.allCases) func uploadsTrackProgressWithinTheDeclaredSize(_ backend: StoreBackend)
        async throws
    {
        try await withTemporaryStore(backend: backend) { store, _ in
            let upload = ContentUpload(
                id: .random(), owner: "alice", declaredSize: 10_000, sha256: Array(repeating: 9, count: 32),
                createdAt: ms(1))
            try await store.write { tx in
                try tx.createUpload(upload)
                try tx.updateUpload(upload.id, receivedBytes: 4_096, state: .uploading, at: self.ms(2))
            }
            let stored = try #require(try await store.read { r in try r.upload(upload.id) })
            #expect(stored.receivedBytes == 4_096 && stored.state == .uploading && stored.owner == "alice")
            #expect(
                await storageErrorCode {
                    try await store.write { tx in
                        try tx.updateUpload(upload.id, receivedBytes: 10_001, state: .uploading, at: self.ms(3))
                    }
                } == .invalidArgument)
            var tooBig = upload
            tooBig.id = .random()
            tooBig.declaredSize = Limits.maxPartBytes + 1
            let tooBigUpload = tooBig
            #expect(
                await storageErrorCode { try await store.write { tx in try tx.createUpload(tooBigUpload) } }
                    == .invalidArgument)
        }
    }

    @Test(arguments: StoreBackend.allCases) func replicationLogKeepsCountersPerOriginWithoutGaps(
        _ backend: StoreBackend
    ) async throws {
        try await withTemporaryStore(backend: backend) { store, _ in
            let (one, two) = try await store.write { tx in
                (
                    try tx.appendLocalOperation([1], origin: nodeA, hlc: hlc(1)),
                    try tx.appendLocalOperation([2], origin: nodeA, hlc: hlc(2))
                )
            }
            #expect((one, two) == (1, 2))
            let fromPeer = ReplicationRecord(origin: nodeB, counter: 1, hlc: hlc(3, 0, nodeB), op: [3])
            let firstApply = try await store.write { tx in try tx.appendOperation(fromPeer) }
            let replay = try await store.write { tx in try tx.appendOperation(fromPeer) }
            #expect(firstApply && !replay)
            let gap = ReplicationRecord(origin: nodeB, counter: 3, hlc: hlc(4, 0, nodeB), op: [4])
            #expect(
                await storageErrorCode { try await store.write { tx in _ = try tx.appendOperation(gap) } }
                    == .invalidArgument)
            #expect(try await store.read { r in try r.versionVector() } == [nodeA: 2, nodeB: 1])
            #expect(
                try await store.read { r in try r.operations(of: nodeA, after: 1, limit: 10) } == [
                    ReplicationRecord(origin: nodeA, counter: 2, hlc: hlc(2), op: [2])
                ])
        }
    }
}
