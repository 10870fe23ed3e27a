import Foundation
import LaminaModel
import LaminaTransport
import NIOCore

/// What the node holds of an upload (HEAD, CONTENT.md §4).
struct UploadState: Hashable, Sendable {
    /// Durable bytes held.
    var offset: UInt64
    var isComplete: Bool
}

/// How one PUT ended (CONTENT.md §3).
enum PutAnswer: Hashable, Sendable {
    /// 200 or 201: the node holds the whole, verified content.
    case complete
    /// 202: the body ended short of the size; the node holds this many bytes.
    case held(UInt64)
    /// Any other answer.
    case refused(ContentHTTPError)
}

/// One request/response exchange of the content API over a borrowed HTTP/2 connection.
enum ContentStreams {
    /// The most bytes of an answer's body kept (errors are small JSON documents).
    static let maxAnswerBytes = 64 * 1_024
    /// Writes kept queued on an upload stream before waiting for HTTP/2 to take the oldest.
    static let writesInFlight = 4
    /// How long an answer may take once the request is complete.
    static let answerTimeout: TimeAmount = .seconds(60)

    static func disconnected(_ what: String, _ error: any Error) -> ClientError {
        if let e = error as? ClientError { return e }
        return ClientError(.disconnected, "\(what): \(error)")
    }

    /// HEAD: what the node holds; nil when it has nothing under this id (404).
    static func head(_ id: ContentID, on lease: NodeLease) async throws -> UploadState? {
        let (status, headers, body) = try await exchange(
            "HEAD", id, headers: [ContentHTTP.authorization(lease.token)], on: lease)
        switch status {
        case 200:
            return UploadState(
                offset: ContentHTTP.number(headers["lamina-upload-offset"]) ?? 0,
                isComplete: headers["lamina-upload-complete"] == "true")
        case 404: return nil
        default: throw ContentHTTPError(status: status, headers: headers, body: body)
        }
    }

    /// DELETE: abandons an upload (204; 404 is fine too: nothing left to delete).
    static func delete(_ id: ContentID, on lease: NodeLease) async throws {
        let (status, headers, body) = try await exchange(
            "DELETE", id, headers: [ContentHTTP.authorization(lease.token)], on: lease)
        guard status == 204 || status == 404 || status == 200 else {
            throw ContentHTTPError(status: status, headers: headers, body: body)
        }
    }

    private static func exchange(_ method: String, _ id: ContentID, headers: HeaderFields, on lease: NodeLease)
        async throws -> (Int, HeaderFields, [UInt8])
    {
        let stream: TransportStream
        do {
            stream = try await lease.connection.openStream(
                method: method, path: ContentHTTP.path(id), headers: headers, endStream: true)
        } catch {
            throw disconnected("cannot open a \(method) stream", error)
        }
        let answer = ContentStreamAnswer.attach(to: stream)
        do { return try await answer.result() } catch { throw disconnected("the \(method) stream closed", error) }
    }

    /// PUT bytes `[offset, size)` of `file` in `chunkBytes` chunks, each written once HTTP/2
    /// can take it (flow control). Before each chunk `shouldStop` is asked: a pause ends the
    /// body there (the node keeps what it got and answers 202). `onSent` sees the bytes handed
    /// to HTTP/2 so far. Task cancellation resets the stream and throws `.cancelled`.
    static func put(
        _ reference: ContentReference, from file: URL, offset: UInt64, on lease: NodeLease, chunkBytes: Int,
        shouldStop: @escaping @Sendable () -> Bool,
        onSent: @escaping @Sendable (UInt64) async -> Void
    ) async throws -> PutAnswer {
        let input: FileHandle
        do {
            input = try FileHandle(forReadingFrom: file)
            try input.seek(toOffset: offset)
        } catch {
            throw ClientError(.contentUnavailable, "cannot read the staged content at \(file.path): \(error)")
        }
        defer { try? input.close() }
        let stream: TransportStream
        do {
            stream = try await lease.connection.openStream(
                method: "PUT", path: ContentHTTP.path(reference.id),
                headers: ContentHTTP.putHeaders(reference, offset: offset, token: lease.token),
                endStream: offset >= reference.size)
        } catch {
            throw disconnected("cannot open the upload stream", error)
        }
        let answer = ContentStreamAnswer.attach(to: stream)
        var sent = offset
        var pending: [EventLoopFuture<Void>] = []
        var writeFailed = false
        do {
            while sent < reference.size, !answer.isAnswered, !writeFailed {
                if Task.isCancelled {
                    stream.reset()
                    throw ClientError(.cancelled, "the upload was cancelled")
                }
                if shouldStop() { break }
                let want = Int(min(UInt64(chunkBytes), reference.size - sent))
                let chunk: Data
                do { chunk = try input.read(upToCount: want) ?? Data() } catch {
                    stream.reset()
                    throw ClientError(.contentUnavailable, "cannot read the staged content at \(file.path): \(error)")
                }
                guard chunk.count == want else {
                    stream.reset()
                    throw ClientError(
                        .contentUnavailable,
                        "the staged content at \(file.path) is shorter than its \(reference.size) bytes")
                }
                pending.append(stream.write(ByteBuffer(bytes: chunk)))
                sent += UInt64(want)
                if pending.count >= writesInFlight {
                    do { try await pending.removeFirst().get() } catch { writeFailed = true }
                }
                await onSent(sent)
            }
            if offset < reference.size { stream.finish() }
            for write in pending { _ = try? await write.get() }
            let (status, headers, body) = try await answer.result()
            switch status {
            case 200, 201: return .complete
            case 202: return .held(ContentHTTP.number(headers["lamina-upload-offset"]) ?? 0)
            default: return .refused(ContentHTTPError(status: status, headers: headers, body: body))
            }
        } catch let error as ClientError {
            throw error
        } catch {
            throw disconnected("the upload stream closed", error)
        }
    }

    /// GET from `offset` (a range when resuming): the answer's status and headers, and its
    /// body as an async sequence (backpressure through the HTTP/2 window).
    static func get(_ id: ContentID, from offset: UInt64, on lease: NodeLease, highWater: Int) async throws -> (
        stream: TransportStream, status: Int, headers: HeaderFields, body: InboundBody
    ) {
        do {
            let stream = try await lease.connection.openStream(
                method: "GET", path: ContentHTTP.path(id),
                headers: ContentHTTP.getHeaders(from: offset, token: lease.token), endStream: true)
            let body = try await stream.eventLoop.submit { stream.inboundBody(highWater: highWater) }.get()
            let headers = try await body.responseHeaders()
            return (stream, Int(headers[":status"] ?? "") ?? 0, headers, body)
        } catch {
            throw disconnected("the download stream closed", error)
        }
    }

    /// The JSON error body of a refused GET (at most `maxAnswerBytes` read).
    static func errorBody(_ body: InboundBody) async -> [UInt8] {
        var out: [UInt8] = []
        do {
            for try await chunk in body {
                out += chunk.readableBytesView.prefix(maxAnswerBytes - out.count)
                if out.count >= maxAnswerBytes { break }
            }
        } catch {}
        return out
    }
}

/// Collects one stream's answer: status, headers and a small body. Delegate calls come on
/// the stream's event loop; `isAnswered` may be read from anywhere.
final class ContentStreamAnswer: TransportStreamDelegate, @unchecked Sendable {
    private let promise: EventLoopPromise<(Int, HeaderFields, [UInt8])>
    private let lock = NSLock()
    private var answered = false
    private var headers: HeaderFields?
    private var body: [UInt8] = []
    private var done = false

    private init(promise: EventLoopPromise<(Int, HeaderFields, [UInt8])>) { self.promise = promise }

    /// Makes the collector the stream's delegate (events already buffered are delivered then).
    static func attach(to stream: TransportStream) -> ContentStreamAnswer {
        let answer = ContentStreamAnswer(promise: stream.eventLoop.makePromise())
        stream.eventLoop.execute { stream.delegate = answer }
        return answer
    }

    /// Whether the response headers have arrived (the node may answer before the body ends).
    var isAnswered: Bool { lock.withLock { answered } }

    /// The answer, failing when the stream closes first or no answer comes in time.
    func result(timeout: TimeAmount = ContentStreams.answerTimeout) async throws -> (Int, HeaderFields, [UInt8]) {
        let loop = promise.futureResult.eventLoop
        let timer = loop.scheduleTask(in: timeout) { [self] in
            finish(
                .failure(
                    ClientError(.timedOut, "the node did not answer within \(timeout.nanoseconds / 1_000_000_000) s")))
        }
        defer { timer.cancel() }
        return try await promise.futureResult.get()
    }

    private func finish(_ result: Result<(Int, HeaderFields, [UInt8]), any Error>) {
        let first = lock.withLock { () -> Bool in
            defer { done = true }
            return !done
        }
        guard first else { return }
        promise.completeWith(result)
    }

    func streamDidReceiveHeaders(_ stream: TransportStream, headers: HeaderFields) {
        lock.withLock {
            self.headers = headers
            answered = true
        }
    }

    func streamDidReceiveData(_ stream: TransportStream, data: ByteBuffer) {
        lock.withLock {
            let room = ContentStreams.maxAnswerBytes - body.count
            if room > 0 { body += data.readableBytesView.prefix(room) }
        }
    }

    func streamDidReceiveEnd(_ stream: TransportStream, trailers: HeaderFields?) {
        let (headers, body) = lock.withLock { (self.headers ?? stream.responseHeaders ?? HeaderFields(), self.body) }
        finish(.success((Int(headers[":status"] ?? "") ?? 0, headers, body)))
    }

    func streamDidClose(_ stream: TransportStream, error: TransportError?) {
        finish(.failure(error ?? TransportError(.connectionClosed, "the stream closed before its answer")))
    }
}
