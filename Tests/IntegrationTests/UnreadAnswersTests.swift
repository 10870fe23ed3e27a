import Foundation
import LaminaModel
import LaminaNode
import LaminaTransport
import LaminaWire
import NIOCore
import Testing

/// Issue 15, the `windows` phase of `lamina-bench resources`: 800 unauthenticated streams each
/// sending 64 KiB of PINGs took the node to 506 KiB a stream although a stream may hold only
/// 16 KiB inbound. The answers were the rest: the node read PINGs as fast as they came and
/// queued a PONG for each, whether or not the client read them (up to the 4 MiB slow-consumer
/// bound, per stream). Now a stream before authentication stops reading while more than
/// `limits.unauthenticatedMaxOutboundBytes` (16 KiB) of answers wait for the client, and takes
/// at most the unanswered-frame bound (8) from a chunk at a time.
///
/// Measured with the transport's own accounting (`TransportServer.outboundHeld()`: bytes
/// queued for a stream and not yet framed, with a high-water mark kept at every write): the
/// clients announce a 16 KiB stream window, send 64 KiB of PINGs each (4,096) and read nothing until
/// the node holds answers for every stream; then they read, and every PONG arrives.
@Suite struct UnreadAnswersTests {
    static let streams = 16
    static let pingBytes = 64 * 1_024

    struct Result {
        var largestStreamEver = 0
        var pongs = 0
    }

    /// `streams` unauthenticated streams (two connections, 16 KiB windows) send HELLO and
    /// `pingBytes` of PINGs and read nothing until the node holds `holding` bytes of answers a
    /// stream (or more), then read every PONG.
    static func flood(_ node: TestNode, _ healthy: ResourceLimitTests.HealthyPair, holding: Int) async throws -> Result
    {
        var settings = HTTP2Settings()
        settings.initialStreamWindow = 16 * 1_024
        var clients: [SyncTestClient] = []
        for _ in 0..<2 {
            let first = try await SyncTestClient.connect(
                url: node.server.url, caFile: node.server.prepared.certificatePath, settings: settings)
            clients.append(first)
            for _ in 1..<(streams / 2) { clients.append(try await first.another()) }
        }
        for client in clients { _ = try await client.hello() }
        for client in clients { client.stopReading() }
        let count = pingBytes / 16
        var pings: [UInt8] = []
        pings.reserveCapacity(pingBytes)
        for i in 0..<count { pings += ResourceLimitTests.encoded(.ping(Ping(payload: UInt64(i)))) }
        for client in clients { client.sendRaw(pings) }
        // The node has filled every client's window and queued answers beyond it.
        try await ResourceLimitTests.eventuallyAsync("answers queued for every stream", timeout: .seconds(60)) {
            await node.server.transport.outboundHeld().bytes >= streams * holding
        }
        try await healthy.expectHealthy(within: .seconds(10), "a healthy pair during the flood")
        let stalled = await node.server.transport.outboundHeld()
        for client in clients { client.stream.resumeInbound() }
        var result = Result()
        for client in clients {
            for _ in 0..<count {
                guard case .pong = try await client.nextFrame(timeout: .seconds(60)) else {
                    throw SyncTestTimeout(waitingFor: "PONG")
                }
                result.pongs += 1
            }
        }
        result.largestStreamEver = max(
            stalled.largestStreamEver, await node.server.transport.outboundHeld().largestStreamEver)
        for client in clients { await client.close() }
        return result
    }

    @Test func aStreamThatReadsNoAnswersStopsBeingRead() async throws {
        let node = try await TestNode.start("unread-answers")
        let healthy = try await ResourceLimitTests.HealthyPair.start(node)
        let bounded = try await Self.flood(node, healthy, holding: 8 * 1_024)
        print("bounded: largest stream ever queued \(bounded.largestStreamEver) B, \(bounded.pongs) PONGs")
        // 16 KiB, plus the answers of the frames taken before the bound was seen (at most 256
        // PONGs of 16 B: the frames one chunk may hand the session at once), and slack.
        #expect(
            bounded.largestStreamEver <= 16 * 1_024 + 256 * 16 + 1_024, "largest stream \(bounded.largestStreamEver) B")
        #expect(bounded.pongs == Self.streams * Self.pingBytes / 16)
        try await healthy.expectHealthy()
        await healthy.close()
        await node.stop()

        // The control: with the bound as large as the slow-consumer one (what the node did
        // before), the same clients make it queue far more for each stream.
        let wide = try await TestNode.start("unread-answers-wide") {
            $0.limits.unauthenticatedMaxOutboundBytes = $0.limits.maxOutboundBytes
        }
        let pair = try await ResourceLimitTests.HealthyPair.start(wide)
        let unbounded = try await Self.flood(wide, pair, holding: 32 * 1_024)
        print("unbounded: largest stream ever queued \(unbounded.largestStreamEver) B, \(unbounded.pongs) PONGs")
        #expect(unbounded.largestStreamEver >= 32 * 1_024)
        await pair.close()
        await wide.stop()
    }
}
