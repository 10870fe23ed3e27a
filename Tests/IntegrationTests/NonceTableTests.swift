import Foundation
import LaminaLocalNode
import LaminaModel
import LaminaNode
import LaminaWire
import Testing

/// Issue 15 item 6 over TLS + HTTP/2 on loopback, each with a healthy pair talking alongside:
/// a nonce is good on the connection that asked for it only, a failed login uses its nonce up,
/// the node's nonce table is bounded per connection and per node, and expired nonces go on the
/// pruner's schedule (closed connections' at once).
@Suite struct NonceTableTests {
    typealias HealthyPair = ResourceLimitTests.HealthyPair

    /// The ERROR answering `frame`, then the unasked NONCE that follows it.
    static func refusal(_ frame: Frame, on client: SyncTestClient) async throws -> (ErrorFrame, Nonce)? {
        guard case .error(let error) = frame else {
            Issue.record("expected an ERROR, got \(frame)")
            return nil
        }
        #expect(!error.isFatal)
        guard case .nonce(let fresh) = try await client.nextFrame() else {
            Issue.record("no fresh NONCE after \(error.code.name)")
            return nil
        }
        #expect(fresh.requestID == UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)))
        return (error, fresh)
    }

    @Test func aNonceIsGoodOnTheConnectionThatAskedForItOnly() async throws {
        let node = try await TestNode.start("nonce-tie")
        let healthy = try await HealthyPair.start(node)
        let dev = node.dev
        // Connection A asks; connection B tries A's nonce.
        let a = try await node.connect()
        _ = try await a.hello()
        let nonceOfA = try await a.nonce()
        let b = try await node.connect()
        _ = try await b.hello()
        let stolen = try await b.authenticate(
            token: try dev.mintToken(user: "mallory", nonce: nonceOfA), device: UUID())
        let (error, fresh) = try #require(try await Self.refusal(stolen, on: b))
        #expect(error.code == .nonceOtherConnection, "\(error)")
        try await healthy.expectHealthy()
        // B's own fresh nonce works on B; A's nonce was left alone and works on another
        // stream of A's connection.
        guard
            case .authenticated = try await b.authenticate(
                token: try dev.mintToken(user: "bob", nonce: fresh.nonce), device: UUID())
        else {
            Issue.record("B's own nonce did not authenticate")
            return
        }
        let a2 = try await a.another()
        _ = try await a2.hello()
        guard
            case .authenticated(let carol) = try await a2.authenticate(
                token: try dev.mintToken(user: "carol", nonce: nonceOfA), device: UUID())
        else {
            Issue.record("A's nonce did not authenticate a stream of A's connection")
            return
        }
        #expect(carol.identity.userID == "carol")
        try await healthy.expectHealthy()
        for c in [a2, a, b] { await c.close() }
        await healthy.close()
        await node.stop()
    }

    @Test func aFailedLoginUsesItsNonceUp() async throws {
        let node = try await TestNode.start("nonce-spent")
        let healthy = try await HealthyPair.start(node)
        let dev = node.dev
        let stranger = try DevIdentityProvider.loadOrCreate(in: Fixtures.temporaryDirectory("stranger-key"))
        let client = try await node.connect()
        _ = try await client.hello()
        let nonce = try await client.nonce()
        // A token for the nonce signed with the wrong key: refused, and the nonce is spent...
        let forged = try await client.authenticate(
            token: try stranger.mintToken(user: "alice", nonce: nonce), device: UUID())
        let (first, fresh) = try #require(try await Self.refusal(forged, on: client))
        #expect(first.code == .badSignature)
        // ...so the right token for it no longer logs in (one try per nonce).
        let late = try await client.authenticate(token: try dev.mintToken(user: "alice", nonce: nonce), device: UUID())
        let (second, _) = try #require(try await Self.refusal(late, on: client))
        #expect(second.code == .nonceReused, "\(second)")
        try await healthy.expectHealthy()
        // The nonce sent after the first failure is still good.
        guard
            case .authenticated = try await client.authenticate(
                token: try dev.mintToken(user: "alice", nonce: fresh.nonce), device: UUID())
        else {
            Issue.record("the fresh nonce did not authenticate")
            return
        }
        await client.close()
        await healthy.close()
        await node.stop()
    }

    @Test func theNonceTableIsBoundedPerConnectionAndPerNode() async throws {
        let node = try await TestNode.start("nonce-bounds") {
            $0.resources.nonces.perStream = 2
            $0.resources.nonces.perConnection = 4
            $0.resources.nonces.perNode = 10
        }
        let healthy = try await HealthyPair.start(node)
        let table = node.server.engine.nonces
        #expect(table.snapshot.nonces == 2)  // the pair's, used, until they expire or their connections close
        // One connection: two streams of two nonces each fill its four...
        let first = try await node.connect()
        let streams = [first, try await first.another(), try await first.another()]
        for s in streams { _ = try await s.hello() }
        for s in streams.prefix(2) {
            for _ in 0..<2 { _ = try await s.nonce() }
        }
        // ...and the third stream's request is refused, not fatally, with a retry delay.
        let overConnection = NonceRequest(requestID: UUID())
        streams[2].send(.nonceRequest(overConnection))
        guard case .error(let e1) = try await streams[2].answer(to: overConnection.requestID) else {
            Issue.record("expected ERROR overloaded")
            return
        }
        #expect(e1.code == .overloaded && !e1.isFatal && e1.retryAfterMilliseconds == 1_000)
        #expect(e1.reason.contains("connection"), "\(e1.reason)")
        // Another connection takes four more: the node holds its ten.
        let second = try await node.connect()
        let secondStreams = [second, try await second.another()]
        for s in secondStreams {
            _ = try await s.hello()
            for _ in 0..<2 { _ = try await s.nonce() }
        }
        #expect(table.snapshot.nonces == 10)
        let third = try await node.connect()
        _ = try await third.hello()
        let overNode = NonceRequest(requestID: UUID())
        third.send(.nonceRequest(overNode))
        guard case .error(let e2) = try await third.answer(to: overNode.requestID) else {
            Issue.record("expected ERROR overloaded")
            return
        }
        #expect(e2.code == .overloaded && e2.reason.contains("node"), "\(e2.reason)")
        #expect(table.snapshot.refused == 2)
        // The healthy pair, authenticated, keeps talking.
        try await healthy.expectHealthy()
        // A connection that closes takes its nonces with it: room again.
        for s in streams { await s.close() }  // resets the stream and closes the shared connection
        try await ResourceLimitTests.eventually("the closed connection's nonces deleted") { table.snapshot.nonces == 6 }
        _ = try await third.nonce()
        #expect(table.snapshot.nonces == 7)
        for s in secondStreams { await s.close() }
        await third.close()
        await healthy.close()
        await node.stop()
    }

    @Test func expiredNoncesAreDeletedOnTheSchedule() async throws {
        let node = try await TestNode.start("nonce-expiry") {
            $0.resources.nonces.lifetimeSeconds = 10
            $0.resources.pruneIntervalSeconds = 1
        }
        let healthy = try await HealthyPair.start(node)
        let table = node.server.engine.nonces
        let before = table.snapshot.nonces  // the healthy pair's, which expire too
        let client = try await node.connect()
        _ = try await client.hello()
        let nonce = try await client.nonce()
        #expect(table.snapshot.nonces >= 1)
        // The connection stays open: only the schedule removes it (lifetime 10 s, a run a second).
        // (The run's totals are added once its store transaction committed, after the table's prune.)
        try await ResourceLimitTests.eventually("expired nonces pruned", timeout: .seconds(60)) {
            table.snapshot.nonces == 0 && node.server.pruner.history.pruned.nonces >= before + 1
        }
        let answer = try await client.authenticate(
            token: try node.dev.mintToken(user: "alice", nonce: nonce), device: UUID())
        let (error, _) = try #require(try await Self.refusal(answer, on: client))
        #expect(error.code == .unknownNonce)
        try await healthy.expectHealthy()
        await client.close()
        await healthy.close()
        await node.stop()
    }
}
