import Foundation
import LaminaTransport
import NIOConcurrencyHelpers
import NIOCore

/// HTTP/2-over-TLS connections to one `https://host:port`, shared by concurrent requests (a
/// connection carries many streams): `count` of them, each opened when first needed and again
/// after it closes or its server sends GOAWAY (its open streams finish there), requests spread
/// over them in turn so that more than one event loop does the TLS and HTTP/2 work.
final class HTTP2Pool: Sendable {
    let url: String
    private let tls: TLSContext
    private let group: EventLoopGroup
    private let connectTimeout: TimeAmount
    private let slots: NIOLockedValueBox<[Task<TransportConnection, Error>?]>
    private let turn = NIOLockedValueBox(0)

    init(url: String, count: Int, tls: TLSContext, group: EventLoopGroup, connectTimeout: TimeAmount) {
        self.url = url
        self.tls = tls
        self.group = group
        self.connectTimeout = connectTimeout
        slots = NIOLockedValueBox(Array(repeating: nil, count: max(1, count)))
    }

    /// A pool for the authority of `url` (`https://host[:port]/…`); the path the URL names.
    static func forURL(_ url: String, count: Int, tls: TLSContext, group: EventLoopGroup, connectTimeout: TimeAmount)
        throws -> (HTTP2Pool, path: String)
    {
        guard let components = URLComponents(string: url), components.scheme?.lowercased() == "https",
            let host = components.host, !host.isEmpty
        else {
            throw NodeServerError.configuration("\(url) is not an https:// URL")
        }
        var path = components.percentEncodedPath.isEmpty ? "/" : components.percentEncodedPath
        if let query = components.percentEncodedQuery { path += "?\(query)" }
        let authority = "https://\(components.percentEncodedHost ?? host)" + (components.port.map { ":\($0)" } ?? "")
        return (HTTP2Pool(url: authority, count: count, tls: tls, group: group, connectTimeout: connectTimeout), path)
    }

    /// Sends one whole request on the next connection and returns the whole response.
    func request(
        method: String, path: String, headers: HeaderFields, body: ByteBuffer, timeout: TimeAmount,
        maxResponseBytes: Int
    ) async throws -> HTTP2ClientResponse {
        let connection = try await connection()
        return try await connection.request(
            method: method, path: path, headers: headers, body: body, timeout: timeout,
            maxResponseBytes: maxResponseBytes)
    }

    /// The next connection in turn (opened if it is not).
    func connection() async throws -> TransportConnection {
        let index = turn.withLockedValue { t -> Int in
            defer { t += 1 }
            return t
        }
        let (task, fresh) = slots.withLockedValue { s -> (Task<TransportConnection, Error>, Bool) in
            let i = index % s.count
            if let existing = s[i] { return (existing, false) }
            let (url, tls, group, connectTimeout) = (self.url, self.tls, self.group, self.connectTimeout)
            let task = Task {
                try await TransportConnection.connect(to: url, tls: tls, group: group, connectTimeout: connectTimeout)
                    .get()
            }
            s[i] = task
            return (task, true)
        }
        let connection: TransportConnection
        do { connection = try await task.value } catch {
            forget(task)
            throw error
        }
        if fresh {
            // A connection that closes (the provider's idle timeout, an error) or goes away is
            // forgotten; the next request on its slot opens another.
            connection.closeFuture.whenComplete { [weak self] _ in self?.forget(task) }
            connection.goingAway.whenSuccess { [weak self] in self?.forget(task) }
        }
        return connection
    }

    private func forget(_ task: Task<TransportConnection, Error>) {
        slots.withLockedValue { s in
            for i in s.indices where s[i] == task { s[i] = nil }
        }
    }

    /// Closes every connection (gracefully: open streams finish).
    func close() async {
        let all = slots.withLockedValue { s -> [Task<TransportConnection, Error>] in
            defer { s = Array(repeating: nil, count: s.count) }
            return s.compactMap { $0 }
        }
        for task in all { try? await task.value.close() }
    }
}
