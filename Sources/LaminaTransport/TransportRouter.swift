/// Called on the stream's event loop once a request's headers have arrived. Set the
/// stream's delegate (now or later: inbound data waits, counted against the window) and
/// answer with ``TransportStream/sendHeaders(_:endStream:)``, writes and ``TransportStream/finish(trailers:)``.
public typealias TransportStreamHandler = @Sendable (TransportStream) -> Void

/// Maps request paths to handlers. A path matches an exact route, else the longest
/// registered prefix route (registered with a trailing `*`, e.g. `/content/*`). The query
/// string is ignored. Unmatched requests get `404`.
public struct TransportRouter: Sendable {
    private var exact: [String: TransportStreamHandler] = [:]
    private var prefixes: [(String, TransportStreamHandler)] = []
    /// Request-level routes (served over HTTP/2 and HTTP/1.1), by pattern as registered.
    private var requestRoutes: [String: HTTPRequestRoute] = [:]
    /// WebSocket routes (HTTP/1.1 Upgrade), by exact path.
    var webSocketRoutes: [String: WebSocketRoute] = [:]

    public init() {}

    /// Registers `handler` for `path` (`/sync`) or for a prefix (`/content/*`).
    public mutating func add(_ path: String, _ handler: @escaping TransportStreamHandler) {
        if path.hasSuffix("*") {
            prefixes.append((String(path.dropLast()), handler))
            prefixes.sort { $0.0.count > $1.0.count }
        } else {
            exact[path] = handler
        }
    }

    /// Registers a request-level route for `path` or a prefix (`/apps/*`): served over HTTP/2
    /// and, on a server that offers it, over HTTP/1.1. Stream routes (``add(_:_:)``) are
    /// HTTP/2 only. `headerCheck` refuses requests from their headers, before any body byte is
    /// read, and `awaitedHeaderCheck` (one that may wait, e.g. for a store read) requests that
    /// announce a body, before it is read (``HTTPRequestRoute``); `streamedBodyLimit` picks the
    /// requests whose body the handler reads as it arrives (``HTTPRequestRoute/streamedBodyLimit``).
    public mutating func add(
        _ path: String, maxBodyBytes: Int, headerCheck: HTTPHeaderCheck? = nil,
        awaitedHeaderCheck: HTTPAwaitedHeaderCheck? = nil, streamedBodyLimit: HTTPStreamedBodyRule? = nil,
        _ handler: @escaping HTTPRequestHandler
    ) {
        var route = HTTPRequestRoute(maxBodyBytes: maxBodyBytes, headerCheck: headerCheck, handler: handler)
        route.awaitedHeaderCheck = awaitedHeaderCheck
        route.streamedBodyLimit = streamedBodyLimit
        requestRoutes[path] = route
        add(path, route.streamHandler())
    }

    /// The request-level route a path matches, if the route it matches is one.
    public func requestRoute(for path: String) -> HTTPRequestRoute? {
        match(path).flatMap { requestRoutes[$0] }
    }

    /// The patterns of every registered route (stream, request-level and WebSocket).
    public var patterns: [String] {
        Array(exact.keys) + prefixes.map { $0.0 + "*" } + webSocketRoutes.keys.filter { exact[$0] == nil }
    }

    /// The handler for a request `:path`, if any.
    public func handler(for path: String) -> TransportStreamHandler? {
        if let handler = exact[path] { return handler }
        let bare = path.firstIndex(of: "?").map { String(path[..<$0]) } ?? path
        if bare != path, let handler = exact[bare] { return handler }
        return prefixes.first(where: { bare.hasPrefix($0.0) })?.1
    }

    /// The registered route (as given to ``add(_:_:)``) that `path` matches, if any.
    public func match(_ path: String) -> String? {
        let bare = path.firstIndex(of: "?").map { String(path[..<$0]) } ?? path
        if exact[bare] != nil { return bare }
        return prefixes.first(where: { bare.hasPrefix($0.0) }).map { $0.0 + "*" }
    }
}
