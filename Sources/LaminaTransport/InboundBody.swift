import NIOConcurrencyHelpers
import NIOCore

extension TransportStream {
    /// The inbound side as an async sequence of body chunks, for async/await edges (uploads,
    /// downloads, the client SDK). Replaces the delegate. Backpressure: once `highWater` bytes
    /// wait unread, delivery pauses (so the HTTP/2 window closes) until the reader drains half.
    public func inboundBody(highWater: Int = 256 * 1024) -> InboundBody {
        let source = InboundBody.Source(stream: self, highWater: highWater)
        if eventLoop.inEventLoop {
            delegate = source
        } else {
            eventLoop.execute { self.delegate = source }
        }
        return InboundBody(source: source)
    }
}

/// Body chunks of one stream, in order; ends at END_STREAM, throws if the stream is reset.
public struct InboundBody: AsyncSequence, Sendable {
    public typealias Element = ByteBuffer
    let source: Source

    public struct AsyncIterator: AsyncIteratorProtocol {
        let source: Source
        public mutating func next() async throws -> ByteBuffer? { try await source.next() }
    }

    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(source: source) }

    /// Client role: the final response headers (waits for them).
    public func responseHeaders() async throws -> HeaderFields { try await source.headersPromise.futureResult.get() }

    /// Trailers, once the sequence has ended (nil if none were sent).
    public var trailers: HeaderFields? { source.state.withLockedValue { $0.trailers } }

    final class Source: TransportStreamDelegate, @unchecked Sendable {
        struct State {
            var chunks = CircularBuffer<ByteBuffer>()
            var bufferedBytes = 0
            var paused = false
            var ended = false
            var error: Error?
            var trailers: HeaderFields?
            var waiter: CheckedContinuation<ByteBuffer?, Error>?
        }

        let state = NIOLockedValueBox(State())
        let stream: TransportStream
        let highWater: Int
        let headersPromise: EventLoopPromise<HeaderFields>

        init(stream: TransportStream, highWater: Int) {
            self.stream = stream
            self.highWater = Swift.max(1, highWater)
            self.headersPromise = stream.eventLoop.makePromise(of: HeaderFields.self)
        }

        func streamDidReceiveHeaders(_ stream: TransportStream, headers: HeaderFields) {
            headersPromise.succeed(headers)
        }

        func streamDidReceiveData(_ stream: TransportStream, data: ByteBuffer) {
            let (waiter, pause): (CheckedContinuation<ByteBuffer?, Error>?, Bool) = state.withLockedValue { state in
                if let waiter = state.waiter {
                    state.waiter = nil
                    return (waiter, false)
                }
                state.chunks.append(data)
                state.bufferedBytes += data.readableBytes
                if state.bufferedBytes >= highWater && !state.paused {
                    state.paused = true
                    return (nil, true)
                }
                return (nil, false)
            }
            waiter?.resume(returning: data)
            if pause { stream.pauseInbound() }
        }

        func streamDidReceiveEnd(_ stream: TransportStream, trailers: HeaderFields?) {
            let waiter = state.withLockedValue { state -> CheckedContinuation<ByteBuffer?, Error>? in
                state.ended = true
                state.trailers = trailers
                defer { state.waiter = nil }
                return state.chunks.isEmpty ? state.waiter : nil
            }
            waiter?.resume(returning: nil)
        }

        func streamDidClose(_ stream: TransportStream, error: TransportError?) {
            let failure: Error = error ?? TransportError(.connectionClosed, "the stream closed before its end")
            headersPromise.fail(failure)
            let waiter = state.withLockedValue { state -> CheckedContinuation<ByteBuffer?, Error>? in
                if !state.ended { state.error = failure }
                defer { state.waiter = nil }
                return state.waiter
            }
            if let waiter {
                if let error = state.withLockedValue({ $0.error }) {
                    waiter.resume(throwing: error)
                } else {
                    waiter.resume(returning: nil)
                }
            }
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
                    if let chunk = state.chunks.popFirst() {
                        state.bufferedBytes -= chunk.readableBytes
                        var resume = false
                        if state.paused && state.bufferedBytes <= highWater / 2 {
                            state.paused = false
                            resume = true
                        }
                        return .chunk(chunk, resume: resume)
                    }
                    if let error = state.error { return .failure(error) }
                    if state.ended { return .end }
                    state.waiter = continuation
                    return .wait
                }
                switch outcome {
                case .chunk(let chunk, let resume):
                    if resume { stream.resumeInbound() }
                    continuation.resume(returning: chunk)
                case .end: continuation.resume(returning: nil)
                case .failure(let error): continuation.resume(throwing: error)
                case .wait: break
                }
            }
        }
    }
}
