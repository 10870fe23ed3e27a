import NIOConcurrencyHelpers
import NIOCore

/// A whole HTTP/2 response (``TransportConnection/request(method:path:headers:body:timeout:maxResponseBytes:)``).
public struct HTTP2ClientResponse: Sendable {
    public var status: Int
    /// Response header fields, names lower-cased, pseudo-headers left out.
    public var headers: HeaderFields
    public var body: ByteBuffer
}

extension TransportConnection {
    /// Sends one whole request on a new stream and returns the whole response. `timeout`
    /// bounds the wait from opening the stream to the response's end (the stream is reset
    /// then, with `timeout`); a body over `maxResponseBytes` fails with `limit-exceeded`.
    public func request(
        method: String, path: String, headers: HeaderFields, body: ByteBuffer?, timeout: TimeAmount,
        maxResponseBytes: Int = 64 * 1024
    ) async throws -> HTTP2ClientResponse {
        var fields = headers
        if let body { fields.append("content-length", "\(body.readableBytes)") }
        let hasBody = (body?.readableBytes ?? 0) > 0
        let stream = try await openStream(method: method, path: path, headers: fields, endStream: !hasBody)
        let answer = stream.collect(maxBytes: maxResponseBytes)
        if let body, hasBody {
            stream.write(body, promise: nil)
            stream.finish()
        }
        let timedOut = NIOLockedValueBox(false)
        let timer = stream.eventLoop.scheduleTask(in: timeout) {
            timedOut.withLockedValue { $0 = true }
            stream.reset()
        }
        defer { timer.cancel() }
        let collected: (headers: HeaderFields?, body: ByteBuffer)
        do { collected = try await answer.get() } catch {
            if timedOut.withLockedValue({ $0 }) {
                throw TransportError(.timeout, "no complete response within \(timeout)")
            }
            throw error
        }
        guard let responseHeaders = collected.headers, let status = responseHeaders[":status"].flatMap({ Int($0) })
        else {
            throw TransportError(.badResponse, "the response has no :status")
        }
        var out = HeaderFields()
        for field in responseHeaders where !field.name.hasPrefix(":") { out.append(field.name, field.value) }
        return HTTP2ClientResponse(status: status, headers: out, body: collected.body)
    }
}
