import Foundation
import LaminaTransport
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1

/// Kept-alive HTTP/1.1-over-TLS connections to one `https://host:port`, for requests made
/// concurrently (a connection carries one at a time). A request on a reused connection the
/// server closed while idle goes once more on a new one.
final class HTTP1Pool: Sendable {
    let host: String
    let port: Int
    private let tls: TLSContext
    private let group: EventLoopGroup
    private let connectTimeout: TimeAmount
    private let idle = NIOLockedValueBox<[HTTP1Connection]>([])
    /// Every open connection, idle or carrying a request (closed by ``close()``).
    private let open = NIOLockedValueBox<[ObjectIdentifier: HTTP1Connection]>([:])
    private let maxIdle: Int
    /// Set by ``close()``: no request starts after it.
    private let closed = NIOLockedValueBox(false)
    /// Opens a new connection (by default to `host:port`; a webhook's pool checks the
    /// addresses it connects to).
    private let opener: @Sendable () async throws -> HTTP1Connection

    convenience init(
        host: String, port: Int, tls: TLSContext, group: EventLoopGroup, connectTimeout: TimeAmount, maxIdle: Int = 16
    ) {
        self.init(host: host, port: port, tls: tls, group: group, connectTimeout: connectTimeout, maxIdle: maxIdle) {
            try await HTTP1Connection.connect(
                host: host, port: port, tls: tls, group: group, connectTimeout: connectTimeout)
        }
    }

    /// A pool whose connections `connect` opens (to `host:port`).
    init(
        host: String, port: Int, tls: TLSContext, group: EventLoopGroup, connectTimeout: TimeAmount, maxIdle: Int,
        connect: @escaping @Sendable () async throws -> HTTP1Connection
    ) {
        self.host = host
        self.port = port
        self.tls = tls
        self.group = group
        self.connectTimeout = connectTimeout
        self.maxIdle = maxIdle
        self.opener = connect
    }

    /// A pool for the authority of `url` (`https://host[:port]/…`); the path the URL names.
    static func forURL(_ url: String, tls: TLSContext, group: EventLoopGroup, connectTimeout: TimeAmount) throws -> (
        HTTP1Pool, path: String
    ) {
        guard let components = URLComponents(string: url), components.scheme?.lowercased() == "https",
            var host = components.host, !host.isEmpty
        else {
            throw NodeServerError.configuration("\(url) is not an https:// URL")
        }
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        var path = components.percentEncodedPath.isEmpty ? "/" : components.percentEncodedPath
        if let query = components.percentEncodedQuery { path += "?\(query)" }
        return (
            HTTP1Pool(host: host, port: components.port ?? 443, tls: tls, group: group, connectTimeout: connectTimeout),
            path
        )
    }

    func request(
        method: HTTPMethod, path: String, headers: HeaderFields, body: ByteBuffer?, timeout: TimeAmount,
        maxResponseBytes: Int = 64 * 1024
    ) async throws -> HTTP1ClientResponse {
        guard !closed.withLockedValue({ $0 }) else {
            throw TransportError(.connectionClosed, "the pool for \(host):\(port) closed")
        }
        for reuse in [true, false] {
            var stale: [HTTP1Connection] = []
            let reused =
                reuse
                ? idle.withLockedValue { pool -> HTTP1Connection? in
                    while let c = pool.popLast() {
                        if c.isOpen { return c }
                        stale.append(c)  // the server closed it while idle
                    }
                    return nil
                } : nil
            for c in stale { await discard(c) }
            let connection: HTTP1Connection
            if let reused {
                connection = reused
            } else {
                connection = try await opener()
                let late = closed.withLockedValue { c in
                    if !c { open.withLockedValue { $0[ObjectIdentifier(connection)] = connection } }
                    return c
                }
                if late {
                    await connection.close()
                    throw TransportError(.connectionClosed, "the pool for \(host):\(port) closed")
                }
            }
            do {
                let response = try await connection.request(
                    method: method, path: path, headers: headers, body: body, timeout: timeout,
                    maxResponseBytes: maxResponseBytes)
                let kept =
                    connection.isOpen
                    && idle.withLockedValue { pool -> Bool in
                        guard pool.count < maxIdle else { return false }
                        pool.append(connection)
                        return true
                    }
                if !kept { await discard(connection) }
                return response
            } catch let error as TransportError where reused != nil && error.code == .connectionClosed {
                await discard(connection)
            } catch {
                await discard(connection)
                throw error
            }
        }
        throw TransportError(.connectionClosed, "the connection to \(host):\(port) closed twice")
    }

    private func discard(_ connection: HTTP1Connection) async {
        _ = open.withLockedValue { $0.removeValue(forKey: ObjectIdentifier(connection)) }
        await connection.close()
    }

    /// Closes every connection; requests in flight fail at once.
    func close() async {
        closed.withLockedValue { $0 = true }
        idle.withLockedValue { $0 = [] }
        for connection in open.withLockedValue({ o -> [HTTP1Connection] in
            defer { o = [:] }
            return Array(o.values)
        }) { await connection.close() }
    }
}
