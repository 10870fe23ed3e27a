import NIOConcurrencyHelpers
import NIOCore

/// A request body handed to a request-level handler as it arrives (a route's streamed
/// requests, ``HTTPRequestRoute/streamedBodyLimit``), over HTTP/2 or HTTP/1.1, instead of
/// collected into ``HTTPRequest/body``.
///
/// Backpressure: once ``highWater`` bytes wait unread, the transport stops reading the body
/// (HTTP/2: the stream's window stays closed; HTTP/1.1: the socket is not read) until the
/// handler has taken half of them, so memory stays at about ``highWater`` whatever the body's
/// size. The body is counted as it arrives: past ``limit`` bytes the sequence throws
/// ``HTTPRequestBodyError`` (`tooLarge`) and the transport reads no more of it. A body that
/// does not reach its end (the client went away, the stream was reset, it stalled) throws too.
public struct HTTPRequestBody: AsyncSequence, Sendable {
    public typealias Element = ByteBuffer
    let source: HTTPRequestBodySource

    /// The most bytes this body may have.
    public var limit: UInt64 { source.limit }
    /// The most bytes held unread before the transport stops reading.
    public var highWater: Int { source.highWater }

    public struct AsyncIterator: AsyncIteratorProtocol {
        let source: HTTPRequestBodySource
        public mutating func next() async throws -> ByteBuffer? { try await source.next() }
    }

    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(source: source) }
}

/// Why a streamed request body ended before its end.
public struct HTTPRequestBodyError: Error, Sendable, CustomStringConvertible {
    public enum Kind: Sendable, Equatable {
        /// More than the body's limit arrived.
        case tooLarge
        /// No byte arrived for the transport's request timeout while it was ready to read.
        case stalled
        /// The client went away, or reset the stream.
        case closed
    }

    public var kind: Kind
    public var description: String

    init(_ kind: Kind, _ description: String) {
        self.kind = kind
        self.description = description
    }
}

/// The buffer between a transport (pushing on its event loop) and the handler (pulling).
final class HTTPRequestBodySource: Sendable {
    private struct State {
        var chunks = CircularBuffer<ByteBuffer>()
        var bufferedBytes = 0
        var received: UInt64 = 0
        var paused = false
        var ended = false
        var error: HTTPRequestBodyError?
        var waiter: CheckedContinuation<ByteBuffer?, Error>?
    }

    private let state = NIOLockedValueBox(State())
    let limit: UInt64
    let highWater: Int
    private let pause: @Sendable () -> Void
    private let resume: @Sendable () -> Void

    /// `pause` and `resume` stop and restart the transport's reading (called from any thread).
    init(
        limit: UInt64, highWater: Int, pause: @escaping @Sendable () -> Void, resume: @escaping @Sendable () -> Void
    ) {
        self.limit = limit
        self.highWater = max(1, highWater)
        self.pause = pause
        self.resume = resume
    }

    /// Bytes received so far.
    var received: UInt64 { state.withLockedValue { $0.received } }
    /// Whether the body reached its end or failed.
    var isFinished: Bool { state.withLockedValue { $0.ended || $0.error != nil } }
    /// Whether the transport was asked to stop reading (the handler is behind).
    var isPaused: Bool { state.withLockedValue { $0.paused } }

    /// A chunk from the transport. Returns false once the body is over its limit (the
    /// transport then reads no more of it).
    @discardableResult
    func push(_ chunk: ByteBuffer) -> Bool {
        enum Action {
            case deliver(CheckedContinuation<ByteBuffer?, Error>)
            case fail(CheckedContinuation<ByteBuffer?, Error>?, HTTPRequestBodyError)
            case pause
            case none
            case dropped(overLimit: Bool)
        }
        let action: Action = state.withLockedValue { state in
            guard !state.ended, state.error == nil else { return .dropped(overLimit: state.error?.kind == .tooLarge) }
            state.received += UInt64(chunk.readableBytes)
            if state.received > limit {
                let error = HTTPRequestBodyError(.tooLarge, "the body is longer than \(limit) bytes")
                state.error = error
                state.chunks.removeAll()
                state.bufferedBytes = 0
                defer { state.waiter = nil }
                return .fail(state.waiter, error)
            }
            if let waiter = state.waiter {
                state.waiter = nil
                return .deliver(waiter)
            }
            state.chunks.append(chunk)
            state.bufferedBytes += chunk.readableBytes
            if state.bufferedBytes >= highWater, !state.paused {
                state.paused = true
                return .pause
            }
            return .none
        }
        switch action {
        case .deliver(let waiter): waiter.resume(returning: chunk)
        case .fail(let waiter, let error):
            waiter?.resume(throwing: error)
            return false
        case .pause: pause()
        case .none: break
        case .dropped(let overLimit): return !overLimit
        }
        return true
    }

    /// The body's end.
    func finish() {
        let waiter = state.withLockedValue { state -> CheckedContinuation<ByteBuffer?, Error>? in
            guard !state.ended, state.error == nil else { return nil }
            state.ended = true
            guard state.chunks.isEmpty else { return nil }
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume(returning: nil)
    }

    /// The body cannot end (unless it already did).
    func fail(_ error: HTTPRequestBodyError) {
        let waiter = state.withLockedValue { state -> CheckedContinuation<ByteBuffer?, Error>? in
            guard !state.ended, state.error == nil else { return nil }
            state.error = error
            state.chunks.removeAll()
            state.bufferedBytes = 0
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume(throwing: error)
    }

    func next() async throws -> ByteBuffer? {
        try await withCheckedThrowingContinuation { continuation in
            enum Outcome {
                case chunk(ByteBuffer, resume: Bool)
                case end
                case failure(Error)
                case wait
            }
            let outcome: Outcome = state.withLockedValue { state in
                if let error = state.error { return .failure(error) }
                if let chunk = state.chunks.popFirst() {
                    state.bufferedBytes -= chunk.readableBytes
                    var resume = false
                    if state.paused, state.bufferedBytes <= highWater / 2 {
                        state.paused = false
                        resume = true
                    }
                    return .chunk(chunk, resume: resume)
                }
                if state.ended { return .end }
                state.waiter = continuation
                return .wait
            }
            switch outcome {
            case .chunk(let chunk, let resume):
                if resume { self.resume() }
                continuation.resume(returning: chunk)
            case .end: continuation.resume(returning: nil)
            case .failure(let error): continuation.resume(throwing: error)
            case .wait: break
            }
        }
    }
}

/// Feeds an HTTP/2 stream's body into a ``HTTPRequestBodySource``; the stream's inbound
/// delivery is paused and resumed by the source. A body that delivers nothing for
/// `stallTimeout` while the source is ready to take it fails as `stalled` (the handler answers;
/// the answer then resets the stream). Event loop only.
final class StreamedRequestBodyDelegate: TransportStreamDelegate {
    let source: HTTPRequestBodySource
    private let stallTimeout: TimeAmount
    private var timer: Scheduled<Void>?

    init(source: HTTPRequestBodySource, stream: TransportStream, stallTimeout: TimeAmount) {
        self.source = source
        self.stallTimeout = stallTimeout
        arm(stream)
    }

    private func arm(_ stream: TransportStream) {
        timer?.cancel()
        timer = stream.eventLoop.scheduleTask(in: stallTimeout) { [self] in
            timer = nil
            guard !source.isFinished else { return }
            guard !source.isPaused else { return arm(stream) }
            source.fail(HTTPRequestBodyError(.stalled, "no body byte for \(stallTimeout)"))
        }
    }

    func streamDidReceiveData(_ stream: TransportStream, data: ByteBuffer) {
        arm(stream)
        if !source.push(data) { stream.pauseInbound() }
    }

    func streamDidReceiveEnd(_ stream: TransportStream, trailers: HeaderFields?) {
        timer?.cancel()
        timer = nil
        source.finish()
    }

    func streamDidClose(_ stream: TransportStream, error: TransportError?) {
        timer?.cancel()
        timer = nil
        source.fail(HTTPRequestBodyError(.closed, "the stream closed before the body's end"))
    }
}
