import Foundation
import LaminaModel
import LaminaWire
import NIOCore
import Testing

@testable import LaminaClient

/// A byte stream whose node side is scripted: `incoming` chunks are read in order, then
/// the stream ends; everything written is kept.
actor ScriptedByteStream: SyncByteStream {
    private var incoming: [ByteBuffer]
    private(set) var written = ByteBuffer()
    private(set) var closed = false

    init(incoming: [ByteBuffer]) { self.incoming = incoming }

    func write(_ bytes: ByteBuffer) async throws(ClientError) {
        guard !closed else { throw ClientError(.disconnected, "closed") }
        var b = bytes
        written.writeBuffer(&b)
    }

    func read() async throws(ClientError) -> ByteBuffer? {
        guard !closed, !incoming.isEmpty else { return nil }
        return incoming.removeFirst()
    }

    func close() async { closed = true }
}

@Suite struct SyncFramedChannelTests {
    func frames() throws -> [Frame] {
        let c = try conversation([alice, bob])
        return [
            .welcome(
                Welcome(
                    version: 1, features: .all, nodeID: NodeID(7), serverTime: Timestamp(millisecondsSince1970: 5),
                    maxFrameSize: 1 << 20)),
            .change(Change(seq: 1, event: .conversationCreated(c))),
            .change(
                Change(
                    seq: 2,
                    event: .messageCreated(try remoteMessage(in: c.id, text: String(repeating: "x", count: 900), at: 9))
                )),
            .ack(Ack(requestID: UUID(), cursor: 2)),
        ]
    }

    func bytes(_ frames: [Frame]) throws -> [UInt8] {
        var all = ByteBuffer()
        for f in frames { try f.encode(into: &all) }
        return Array(all.readableBytesView)
    }

    @Test(arguments: [1, 3, 7, 64, 4_096])
    func framesDecodeFromAnyChunking(chunk: Int) async throws {
        let expected = try frames()
        let raw = try bytes(expected)
        let chunks = stride(from: 0, to: raw.count, by: chunk).map {
            ByteBuffer(bytes: raw[$0..<min($0 + chunk, raw.count)])
        }
        let channel = FramedChannel(ScriptedByteStream(incoming: chunks))
        var got: [Frame] = []
        while let f = try await channel.receive() { got.append(f) }
        #expect(got == expected)
    }

    @Test func sentFramesAreTheirWireEncoding() async throws {
        let stream = ScriptedByteStream(incoming: [])
        let channel = FramedChannel(stream)
        let hello = Frame.hello(Hello(agent: "test"))
        try await channel.send(hello)
        #expect(Array(await stream.written.readableBytesView) == Array(try hello.encoded().readableBytesView))
    }

    @Test func aStreamEndingInsideAFrameIsRefusedWithTruncated() async throws {
        let raw = try bytes(frames())
        let stream = ScriptedByteStream(incoming: [ByteBuffer(bytes: raw.dropLast(3))])
        let channel = FramedChannel(stream)
        for _ in 0..<3 { _ = try await channel.receive() }
        await #expect { _ = try await channel.receive() } throws: { ($0 as? ClientError)?.code == .protocolError }
        let answer = try Frame.decode(exactly: await stream.written)
        guard case .error(let e) = answer else {
            Issue.record("no ERROR sent")
            return
        }
        #expect(e.code == .truncated)
        #expect(e.isFatal)
        #expect(await stream.closed)
    }

    @Test func undecodableBytesAreAnsweredWithAFatalErrorOfTheirCode() async throws {
        // A header with a reserved flag bit set (SPEC §2.2): bad-flags.
        let bad: [UInt8] = [0, 0, 0, 8, 0, 8, 0, 2, 0, 0, 0, 0, 0, 0, 0, 1]
        let stream = ScriptedByteStream(incoming: [ByteBuffer(bytes: bad)])
        let channel = FramedChannel(stream)
        await #expect { _ = try await channel.receive() } throws: { ($0 as? ClientError)?.code == .protocolError }
        guard case .error(let e) = try Frame.decode(exactly: await stream.written) else {
            Issue.record("no ERROR sent")
            return
        }
        #expect(e.code == .badFlags)
        #expect(e.requestID == nil)
    }
}
