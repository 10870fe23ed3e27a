import Foundation
import LaminaModel
import LaminaWire
import NIOCore

@testable import LaminaClient

/// One end of an in-memory stream. Frames pass through the wire codec (encode, then decode
/// exactly), so everything the SDK sends is a valid frame. `deliver` is synchronous, so the
/// fake node's pushes keep their order.
final class FakeChannelEnd: FrameChannel, @unchecked Sendable {
    private let lock = NSLock()
    private let outgoing: AsyncStream<Frame>.Continuation
    private let incoming: AsyncStream<Frame>
    nonisolated(unsafe) private var iterator: AsyncStream<Frame>.Iterator?
    private var closed = false
    var peer: FakeChannelEnd?
    /// Frames this end sent, in order (decoded from their bytes).
    private(set) var sent: [Frame] = []
    /// The bytes handed to `send(encoded:)`, in order, as they were given.
    var sentBytes: [[UInt8]] { lock.withLock { encodedSends } }
    private var encodedSends: [[UInt8]] = []

    init(outgoing: AsyncStream<Frame>.Continuation, incoming: AsyncStream<Frame>) {
        self.outgoing = outgoing
        self.incoming = incoming
        self.iterator = incoming.makeAsyncIterator()
    }

    static func pair() -> (client: FakeChannelEnd, node: FakeChannelEnd) {
        let (toNode, toNodeC) = AsyncStream<Frame>.makeStream()
        let (toClient, toClientC) = AsyncStream<Frame>.makeStream()
        let client = FakeChannelEnd(outgoing: toNodeC, incoming: toClient)
        let node = FakeChannelEnd(outgoing: toClientC, incoming: toNode)
        client.peer = node
        node.peer = client
        return (client, node)
    }

    var isClosed: Bool { lock.withLock { closed } }

    /// Sends synchronously; false when closed.
    @discardableResult
    func deliver(_ frame: Frame) -> Bool {
        let copy: Frame
        do { copy = try Frame.decode(exactly: frame.encoded()) } catch {
            fatalError("a frame that does not round-trip through the codec: \(error)")
        }
        return lock.withLock {
            guard !closed else { return false }
            sent.append(copy)
            outgoing.yield(copy)
            return true
        }
    }

    func send(_ frame: Frame) async throws(ClientError) {
        guard deliver(frame) else { throw ClientError(.disconnected, "the fake stream is closed") }
    }

    func send(encoded bytes: ByteBuffer) async throws(ClientError) {
        let frame: Frame
        do { frame = try Frame.decode(exactly: bytes) } catch { throw ClientError(wire: error) }
        lock.withLock { encodedSends.append(Array(bytes.readableBytesView)) }
        try await send(frame)
    }

    /// One receiver only.
    func receive() async throws(ClientError) -> Frame? {
        guard var it = iterator else { return nil }
        let frame = await it.next()
        iterator = it
        return frame
    }

    func closeBoth() {
        let peer = lock.withLock { () -> FakeChannelEnd? in
            defer { closed = true }
            return closed ? nil : self.peer
        }
        outgoing.finish()
        peer?.closeBoth()
    }

    func close() async { closeBoth() }
}
