import Foundation
import LaminaNode
import LaminaWire
import NIOCore
import Testing

/// The sync-stream bridge against test sessions: framing over real TLS + HTTP/2, decode
/// errors, limits, idle timeout, slow consumers and inbound backpressure.
@Suite struct SyncStreamBridgeTests {
    @Test func framesTravelBothWaysInAnySplit() async throws {
        let node = try await BridgeServer.start()
        let client = try await node.client()
        // Three frames, written one byte at a time: the bridge must reassemble them.
        var bytes = ByteBuffer()
        for i in 1...3 { try Frame.ping(Ping(payload: UInt64(i))).encode(into: &bytes) }
        for byte in bytes.readableBytesView { client.sendRaw([byte]) }
        for i in 1...3 { #expect(try await client.nextFrame() == .pong(Ping(payload: UInt64(i)))) }
        #expect(client.responseStatusOnLoop() == "200")
        await client.close()
        await node.stop()
    }

    @Test func malformedInputGetsAnErrorFrameAndEndsOnlyThatStream() async throws {
        let node = try await BridgeServer.start()
        let good = try await node.client()
        let bad = try await node.client()
        // A PING header declaring 3 payload bytes: PING's payload is a u64 -> truncated payload / malformed.
        good.send(.ping(Ping(payload: 6)))
        #expect(try await good.nextFrame() == .pong(Ping(payload: 6)))
        bad.sendRaw([0, 0, 0, 3, 0, 8, 0, 0, 1, 2, 3])
        let frames = try await bad.framesUntilEnd()
        #expect(frames.count == 1)
        guard case .error(let error) = frames.first else {
            Issue.record("expected an error frame, got \(frames)")
            return
        }
        #expect(error.isFatal)
        #expect(error.requestID == nil)
        #expect(WireError.Code.all.contains(error.code) && error.code.wireValue < 200)
        // The other session keeps working.
        good.send(.ping(Ping(payload: 7)))
        #expect(try await good.nextFrame() == .pong(Ping(payload: 7)))
        await good.close()
        await bad.close()
        await node.stop()
    }

    @Test func oversizedFrameIsRefusedOnItsHeader() async throws {
        var limits = SyncStreamLimits()
        limits.maxFrameSize = 1024
        let node = try await BridgeServer.start(limits: limits)
        let client = try await node.client()
        // SEND_MESSAGE (0x0014) header declaring 2 MiB: refused before any payload is sent.
        client.sendRaw([0x00, 0x20, 0x00, 0x00, 0x02, 0x01, 0x00, 0x00])
        let frames = try await client.framesUntilEnd()
        #expect(frames == [.error(ErrorFrame(code: .frameTooLarge, reason: errorReason(frames), isFatal: true))])
        #expect(node.opened.withLockedValue { $0.first?.failure?.code } == .frameTooLarge)
        await client.close()
        await node.stop()
    }

    @Test func idleStreamIsClosedWithoutAFrame() async throws {
        var limits = SyncStreamLimits()
        limits.idleTimeoutSeconds = 1
        let node = try await BridgeServer.start(limits: limits)
        let idle = try await node.client()
        idle.send(.ping(Ping(payload: 1)))
        #expect(try await idle.nextFrame() == .pong(Ping(payload: 1)))
        let endpoint = try #require(node.opened.withLockedValue { $0.first })
        // The idle one ends by itself, with no frame.
        #expect(try await idle.framesUntilEnd(timeout: .seconds(30)) == [])
        try await endpoint.closedPromise.futureResult.get()
        await idle.close()
        await node.stop()
    }

    @Test func clientThatStopsReadingIsDisconnected() async throws {
        var limits = SyncStreamLimits()
        limits.maxOutboundBytes = 256 * 1024
        let node = try await BridgeServer.start(limits: limits)
        let slow = try await node.client()
        slow.send(.ping(Ping(payload: 0)))
        #expect(try await slow.nextFrame() == .pong(Ping(payload: 0)))
        let other = try await node.client()
        slow.stopReading()
        let endpoint = try #require(node.opened.withLockedValue { $0.first })
        // 200,000 PONGs = 3.2 MB: far more than the windows and the 256 KiB bound.
        let flood = endpoint.flood(count: 200_000)
        try await endpoint.closedPromise.futureResult.get()
        _ = try await flood.get()  // the sending thread is done before the test ends
        // The other session is unaffected.
        other.send(.ping(Ping(payload: 1)))
        #expect(try await other.nextFrame() == .pong(Ping(payload: 1)))
        await slow.close()
        await other.close()
        await node.stop()
    }

    @Test func pausedReadingResumesAsAnswersGoOut() async throws {
        var limits = SyncStreamLimits()
        limits.maxUnansweredFrames = 8
        let node = try await BridgeServer.start(limits: limits)
        let client = try await node.client()
        // 20,000 PINGs in one write: reading pauses at 8 unanswered frames and resumes as the
        // PONGs go out; every PING is answered, in order.
        client.send((0..<20_000).map { .ping(Ping(payload: UInt64($0))) })
        for i in 0..<20_000 {
            let frame = try await client.nextFrame()
            guard frame == .pong(Ping(payload: UInt64(i))) else {
                Issue.record("frame \(i): \(frame)")
                break
            }
        }
        await client.close()
        await node.stop()
    }

    private func errorReason(_ frames: [Frame]) -> String {
        if case .error(let e) = frames.first { return e.reason }
        return ""
    }
}

extension SyncTestClient {
    func responseStatusOnLoop() -> String? {
        try? stream.eventLoop.submit { self.responseStatus }.wait()
    }
}
