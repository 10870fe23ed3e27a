import NIOConcurrencyHelpers
import NIOCore

/// A WebSocket upgrade request as the route's handler sees it.
public struct WebSocketUpgradeRequest: Sendable {
    /// The request path without its query (`/websocket`).
    public var path: String
    /// The query's parameters, percent-decoded (the first value of a repeated name).
    public var query: [String: String]
    /// The request's header fields.
    public var headers: HeaderFields
    /// What the client offered in `Sec-WebSocket-Protocol`, in its order.
    public var offeredSubprotocols: [String]
    /// The first offered subprotocol the route supports (nil: none offered or none supported).
    public var subprotocol: String?
    /// The client's address.
    public var remoteAddress: SocketAddress?
}

/// What a WebSocket route answers an upgrade request with.
public enum WebSocketUpgradeDecision: Sendable {
    /// 101 with `subprotocol` (nil: no `Sec-WebSocket-Protocol` header); `opened` is called on
    /// the connection's event loop before any frame is read: set the delegate there.
    case accept(subprotocol: String?, opened: @Sendable (WebSocketConnection) -> Void)
    /// An ordinary HTTP response instead of the upgrade (e.g. 401); the connection stays usable.
    case refuse(HTTPResponse)
}

/// Decides an upgrade request (may read the store: it is awaited off the event loop).
public typealias WebSocketUpgradeHandler = @Sendable (WebSocketUpgradeRequest) async -> WebSocketUpgradeDecision

/// One registered WebSocket path: its settings, its handler and its count of open sockets.
final class WebSocketRoute: Sendable {
    let path: String
    let subprotocols: [String]
    let settings: WebSocketSettings
    let decide: WebSocketUpgradeHandler
    private let open = NIOLockedValueBox(0)

    init(path: String, subprotocols: [String], settings: WebSocketSettings, decide: @escaping WebSocketUpgradeHandler) {
        self.path = path
        self.subprotocols = subprotocols
        self.settings = settings
        self.decide = decide
    }

    /// Sockets open now on this route.
    var openCount: Int { open.withLockedValue { $0 } }

    /// Takes a slot under ``WebSocketSettings/maxConnections``; false when none is free.
    func reserve() -> Bool {
        open.withLockedValue { count in
            guard count < settings.maxConnections else { return false }
            count += 1
            return true
        }
    }

    func release() { open.withLockedValue { $0 -= 1 } }
}

extension TransportRouter {
    /// Registers a WebSocket route at `path` (exact; `path/` matches too, as the Layer Web SDK
    /// appends a slash). Served on HTTP/1.1 connections through `Upgrade: websocket` (RFC 6455
    /// over NIOWebSocket); HTTP/2 connections never carry it. A request without the upgrade
    /// gets 426. `subprotocols` are the `Sec-WebSocket-Protocol` values the route speaks, in
    /// preference order; `decide` accepts or refuses each upgrade.
    public mutating func addWebSocket(
        _ path: String, subprotocols: [String] = [], settings: WebSocketSettings = WebSocketSettings(),
        _ decide: @escaping WebSocketUpgradeHandler
    ) {
        webSocketRoutes[path] = WebSocketRoute(
            path: path, subprotocols: subprotocols, settings: settings, decide: decide)
    }

    /// Whether any WebSocket route is registered (the HTTP/1.1 pipeline then offers upgrades).
    var hasWebSocketRoutes: Bool { !webSocketRoutes.isEmpty }

    /// The WebSocket route a request URI names, if any.
    func webSocketRoute(for uri: String) -> WebSocketRoute? {
        var bare = uri.firstIndex(of: "?").map { String(uri[..<$0]) } ?? uri
        if let route = webSocketRoutes[bare] { return route }
        if bare.count > 1, bare.hasSuffix("/") { bare.removeLast() }
        return webSocketRoutes[bare]
    }
}

extension WebSocketUpgradeRequest {
    /// The parameters of `uri`'s query, percent-decoded (`+` is a space).
    static func queryParameters(of uri: String) -> [String: String] {
        guard let mark = uri.firstIndex(of: "?") else { return [:] }
        var result: [String: String] = [:]
        for pair in uri[uri.index(after: mark)...].split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard let name = percentDecoded(parts[0]) else { continue }
            let value = parts.count > 1 ? percentDecoded(parts[1]) : ""
            if result[name] == nil, let value { result[name] = value }
        }
        return result
    }

    private static func percentDecoded(_ text: Substring) -> String? {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(text.utf8.count)
        var iterator = text.utf8.makeIterator()
        while let byte = iterator.next() {
            switch byte {
            case UInt8(ascii: "+"): bytes.append(UInt8(ascii: " "))
            case UInt8(ascii: "%"):
                guard let high = iterator.next().flatMap(hexValue), let low = iterator.next().flatMap(hexValue) else {
                    return nil
                }
                bytes.append(high << 4 | low)
            default: bytes.append(byte)
            }
        }
        return String(validating: bytes, as: UTF8.self)
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
