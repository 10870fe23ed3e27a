import Foundation
import LaminaTransport
import LaminaWire
import NIOCore

/// What an exchange hands its stream events to once the request is accepted.
protocol ContentBodyHandler: AnyObject, Sendable {
    func receive(_ data: ByteBuffer)
    func bodyEnded()
    func writable()
    func closed(error: TransportError?)
}

/// One content request's stream: its delegate from the first moment (so a refused body is
/// drained, not left in the window), the answer helpers, and the hand-over to an upload or
/// download handler. Event loop only.
final class ContentExchange: TransportStreamDelegate, @unchecked Sendable {
    let stream: TransportStream
    var eventLoop: EventLoop { stream.eventLoop }
    private(set) var requestEnded = false
    private(set) var isClosed = false
    private(set) var answered = false
    var handler: ContentBodyHandler?

    init(stream: TransportStream) {
        self.stream = stream
    }

    func start(pausingBody: Bool) {
        if pausingBody { stream.pauseInbound() }
        stream.delegate = self
    }

    // MARK: TransportStreamDelegate

    func streamDidReceiveData(_ stream: TransportStream, data: ByteBuffer) {
        handler?.receive(data)  // otherwise discarded: a refused body
    }

    func streamDidReceiveEnd(_ stream: TransportStream, trailers: HeaderFields?) {
        requestEnded = true
        handler?.bodyEnded()
    }

    func streamWritabilityDidChange(_ stream: TransportStream, isWritable: Bool) {
        if isWritable { handler?.writable() }
    }

    func streamDidClose(_ stream: TransportStream, error: TransportError?) {
        isClosed = true
        let handler = self.handler
        self.handler = nil
        handler?.closed(error: error)
    }

    // MARK: answers

    /// Sends a complete answer. When the request body is still coming, the request side is then
    /// reset with NO_ERROR (RFC 9113 §8.1) so the client stops sending.
    func respond(status: Int, headers extra: [(String, String)] = [], json: String? = nil) {
        guard !answered, !isClosed else { return }
        answered = true
        var headers: HeaderFields = [(":status", "\(status)")]
        for (name, value) in extra { headers.append(name, value) }
        guard let json else {
            // Bodiless answers go to bodiless requests (HEAD, DELETE, a PUT whose body ended).
            stream.sendHeaders(headers, endStream: true)
            return
        }
        let body = ByteBuffer(string: json)
        headers.append("content-type", "application/json")
        headers.append("content-length", "\(body.readableBytes)")
        stream.sendHeaders(headers)
        let framed = stream.write(body)
        stream.finish()
        framed.whenSuccess { [self] in
            if !requestEnded && !isClosed { stream.reset(code: 0) }
        }
    }

    /// Answers a failure (CONTENT.md §2): status, `lamina-error`, JSON body.
    func fail(_ failure: ContentFailure, headers extra: [(String, String)] = []) {
        var headers = extra
        headers.append(("lamina-error", failure.code.name))
        for (name, value) in failure.headers.sorted(by: { $0.key < $1.key })
        where !headers.contains(where: { $0.0 == name }) {
            headers.append((name, value))
        }
        guard stream.method != "HEAD" else {
            // A HEAD answer has no body (RFC 9110 §9.3.2): the error is in the headers.
            respond(status: failure.status, headers: headers)
            return
        }
        let json =
            #"{"code":\#(failure.code.wireValue),"name":\#(WireJSON.quote(failure.code.name)),"reason":\#(WireJSON.quote(failure.reason))}"#
        respond(status: failure.status, headers: headers, json: json)
    }
}
