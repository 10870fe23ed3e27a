import Foundation
import LaminaModel
import LaminaNode
import LaminaTransport
import LaminaWire
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// What a test client sees on its sync stream.
enum SyncEvent: Sendable, Equatable {
    case frame(Frame)
    /// The node ended its side (END_STREAM).
    case end
    /// The stream closed (nil: cleanly); terminal and repeated for every later wait.
    case closed(String?)
    /// The node sent bytes that do not decode (a node bug); terminal.
    case undecodable(String)
}

struct SyncTestTimeout: Error, CustomStringConvertible {
    var waitingFor: String
    var description: String { "timed out waiting for \(waitingFor)" }
}

struct UnexpectedEvent: Error, CustomStringConvertible {
    var expected: String
    var got: SyncEvent
    var description: String { "expected \(expected), got \(got)" }
}

/// A minimal sync client for integration tests: one TLS + HTTP/2 connection trusting the
/// node's dev CA, one sync stream; sends frames or raw bytes; awaits frames with timeouts.
final class SyncTestClient: TransportStreamDelegate, @unchecked Sendable {
    let connection: TransportConnection
    let stream: TransportStream
    private let lock = NIOLock()
    private var events: [SyncEvent] = []
    private var terminal: SyncEvent?
    private var waiter: (id: Int, continuation: CheckedContinuation<SyncEvent, Error>)?
    private var nextWaiterID = 0
    private var decoder = FrameDecoder()  // event loop only
    private(set) var responseStatus: String?  // event loop only
    private let kept = NIOLockedValueBox<[Change]>([])
    private let received = NIOLockedValueBox(0)

    /// Payload bytes received on the stream so far.
    var bytesReceived: Int { received.withLockedValue { $0 } }

    /// Changes met while waiting for something else (see ``answer(to:timeout:)``).
    var seenChanges: [Change] { kept.withLockedValue { $0 } }
    var seenChangeCount: Int { kept.withLockedValue { $0.count } }

    /// The changes a CHANGE or CHANGE_BATCH frame carries.
    static func changes(in frame: Frame) -> [Change] {
        switch frame {
        case .change(let change): [change]
        case .changeBatch(let batch): batch.changes
        default: []
        }
    }

    func keep(_ frame: Frame) {
        let changes = Self.changes(in: frame)
        if !changes.isEmpty { kept.withLockedValue { $0.append(contentsOf: changes) } }
    }

    private init(connection: TransportConnection, stream: TransportStream) {
        self.connection = connection
        self.stream = stream
    }

    /// Connects to `url` trusting `caFile` and opens the sync stream (`POST /v1/sync`).
    static func connect(
        url: String, caFile: String, group: EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        path: String = NodeServer.syncPath, settings: HTTP2Settings = HTTP2Settings(), tls: TLSContext? = nil
    ) async throws -> SyncTestClient {
        let tls = try tls ?? TLSContext(.client(trust: .caFile(caFile)))
        let connection = try await TransportConnection.connect(to: url, tls: tls, settings: settings, group: group)
        let stream = try await connection.openStream(method: "POST", path: path)
        let client = SyncTestClient(connection: connection, stream: stream)
        try await stream.eventLoop.submit { stream.delegate = client }.get()
        return client
    }

    // MARK: sending

    func send(_ frames: Frame...) { send(frames) }

    func send(_ frames: [Frame]) {
        var buffer = ByteBuffer()
        for frame in frames { try! frame.encode(into: &buffer) }
        stream.write(buffer, promise: nil)
    }

    func sendRaw(_ bytes: [UInt8]) { stream.write(ByteBuffer(bytes: bytes), promise: nil) }

    /// Ends our side of the stream.
    func finish() { stream.finish() }

    /// Drops the connection without a goodbye (a lost network).
    func drop() async {
        stream.reset()
        try? await connection.close()
    }

    /// Stops reading (the node's outbound queue then fills).
    func stopReading() { stream.pauseInbound() }

    // MARK: receiving

    /// The next event, failing after `timeout`.
    func nextEvent(timeout: TimeAmount = .seconds(30), waitingFor: String = "an event") async throws -> SyncEvent {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<SyncEvent, Error>) in
            let id: Int? = lock.withLock {
                if !events.isEmpty {
                    continuation.resume(returning: events.removeFirst())
                    return nil
                }
                if let terminal {
                    continuation.resume(returning: terminal)
                    return nil
                }
                nextWaiterID += 1
                waiter = (nextWaiterID, continuation)
                return nextWaiterID
            }
            guard let id else { return }
            stream.eventLoop.scheduleTask(in: timeout) {
                let expired: CheckedContinuation<SyncEvent, Error>? = self.lock.withLock {
                    guard let waiter = self.waiter, waiter.id == id else { return nil }
                    self.waiter = nil
                    return waiter.continuation
                }
                expired?.resume(throwing: SyncTestTimeout(waitingFor: waitingFor))
            }
        }
    }

    /// The next frame; anything else is an error.
    func nextFrame(timeout: TimeAmount = .seconds(30)) async throws -> Frame {
        let event = try await nextEvent(timeout: timeout, waitingFor: "a frame")
        guard case .frame(let frame) = event else { throw UnexpectedEvent(expected: "a frame", got: event) }
        return frame
    }

    /// Frames until one matches `predicate` (others are returned too, in order).
    func frames(until predicate: (Frame) -> Bool, timeout: TimeAmount = .seconds(30)) async throws -> [Frame] {
        var seen: [Frame] = []
        while true {
            let frame = try await nextFrame(timeout: timeout)
            seen.append(frame)
            if predicate(frame) { return seen }
        }
    }

    /// Waits until the node has ended the stream (END_STREAM or close), returning the frames
    /// that came before.
    func framesUntilEnd(timeout: TimeAmount = .seconds(30)) async throws -> [Frame] {
        var seen: [Frame] = []
        while true {
            switch try await nextEvent(timeout: timeout, waitingFor: "the end of the stream") {
            case .frame(let frame): seen.append(frame)
            case .end, .closed: return seen
            case .undecodable(let reason): throw UnexpectedEvent(expected: "frames", got: .undecodable(reason))
            }
        }
    }

    private func push(_ event: SyncEvent, terminal isTerminal: Bool = false) {
        let resume: CheckedContinuation<SyncEvent, Error>? = lock.withLock {
            if isTerminal, terminal == nil { terminal = event }
            if let waiter {
                self.waiter = nil
                return waiter.continuation
            }
            events.append(event)
            return nil
        }
        resume?.resume(returning: event)
    }

    // MARK: TransportStreamDelegate (event loop)

    func streamDidReceiveHeaders(_ stream: TransportStream, headers: HeaderFields) {
        responseStatus = headers[":status"]
    }

    func streamDidReceiveData(_ stream: TransportStream, data: ByteBuffer) {
        received.withLockedValue { $0 += data.readableBytes }
        decoder.feed(data)
        do {
            while let frame = try decoder.next() { push(.frame(frame)) }
        } catch {
            push(.undecodable("\(error)"), terminal: true)
        }
    }

    func streamDidReceiveEnd(_ stream: TransportStream, trailers: HeaderFields?) {
        push(.end)
    }

    func streamDidClose(_ stream: TransportStream, error: TransportError?) {
        push(.closed(error.map { "\($0)" }), terminal: true)
    }

    /// Resets the stream if still open and closes the connection (ignoring errors).
    func close() async {
        stream.reset()
        try? await connection.close()
    }
}

extension SyncTestClient {
    /// Another sync stream on this client's connection (several sessions on one connection).
    func another(path: String = NodeServer.syncPath) async throws -> SyncTestClient {
        let stream = try await connection.openStream(method: "POST", path: path)
        let client = SyncTestClient(connection: connection, stream: stream)
        try await stream.eventLoop.submit { stream.delegate = client }.get()
        return client
    }

    /// Resets only this stream (the connection stays).
    func resetStream() { stream.reset() }
}
