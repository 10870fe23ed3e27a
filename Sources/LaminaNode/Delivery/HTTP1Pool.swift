import Foundation
import LaminaTransport
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
    private let idle = Locked<[HTTP1Connection]>([])
    private let maxIdle: Int

    init(host: String, port: Int, tls: TLSContext, group: EventLoopGroup, connectTimeout: TimeAmount, maxIdle: Int = 16) {
        self.host = host
        self.port = port
        self.tls = tls
        self.group = group
        self.connectTimeout = connectTimeout
        self.maxIdle = maxIdle
    }

    /// A pool for the authority of `url` (`https://host[:port]/…`); the path the URL names.
    static func forURL(_ url: String, tls: TLSContext, group: EventLoopGroup, connectTimeout: TimeAmount) throws -> (HTTP1Pool, path: String) {
        guard let components = URLComponents(string: url), components.scheme?.lowercased() == "https", var host = components.host, !host.isEmpty else {
            throw NodeServerError.configuration("\(url) is not an https:// URL")
        }
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        var path = components.percentEncodedPath.isEmpty ? "/" : components.percentEncodedPath
        if let query = components.percentEncodedQuery { path += "?\(query)" }
        return (HTTP1Pool(host: host, port: components.port ?? 443, tls: tls, group: group, connectTimeout: connectTimeout), path)
    }

    func request(
        method: HTTPMethod, path: String, headers: HeaderFields, body: ByteBuffer?, timeout: TimeAmount, maxResponseBytes: Int = 64 * 1024
    ) async throws -> HTTP1ClientResponse {
        for reuse in [true, false] {
            let reused = reuse ? idle.withLock { pool -> HTTP1Connection? in
                while let c = pool.popLast() { if c.isOpen { return c } }
                return nil
            } : nil
            let connection: HTTP1Connection
            if let reused {
                connection = reused
            } else {
                connection = try await HTTP1Connection.connect(host: host, port: port, tls: tls, group: group, connectTimeout: connectTimeout)
            }
            do {
                let response = try await connection.request(
                    method: method, path: path, headers: headers, body: body, timeout: timeout, maxResponseBytes: maxResponseBytes)
                let kept = connection.isOpen && idle.withLock { pool -> Bool in
                    guard pool.count < maxIdle else { return false }
                    pool.append(connection)
                    return true
                }
                if !kept { await connection.close() }
                return response
            } catch let error as TransportError where reused != nil && error.code == .connectionClosed {
                await connection.close()
            } catch {
                await connection.close()
                throw error
            }
        }
        throw TransportError(.connectionClosed, "the connection to \(host):\(port) closed twice")
    }

    func close() async {
        for connection in idle.withLock({ pool -> [HTTP1Connection] in
            defer { pool = [] }
            return pool
        }) { await connection.close() }
    }
}
