import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// An HTTP/2-over-TLS client connection: open streams on it. Thread-safe.
public final class TransportConnection: Sendable {
    /// The event loop all of this connection's streams run on.
    public let eventLoop: EventLoop
    /// What the TLS handshake agreed on.
    public let tlsInfo: TLSConnectionInfo
    private let channel: Channel
    private let handler: HTTP2ConnectionHandler

    fileprivate init(channel: Channel, handler: HTTP2ConnectionHandler, tlsInfo: TLSConnectionInfo) {
        self.channel = channel
        self.handler = handler
        self.eventLoop = channel.eventLoop
        self.tlsInfo = tlsInfo
    }

    /// Connects to `url` (`https://host:port`) and completes once TLS and HTTP/2 are up.
    public static func connect(
        to url: String, tls: TLSContext, settings: HTTP2Settings = HTTP2Settings(), group: EventLoopGroup,
        connectTimeout: TimeAmount = .seconds(10)
    ) -> EventLoopFuture<TransportConnection> {
        let eventLoop = group.next()
        let target: HTTPSURL
        do {
            target = try HTTPSURL(url)
            guard tls.configuration.role == .client else {
                throw TransportError(.tlsConfiguration, "connecting needs a client TLS context")
            }
        } catch {
            return eventLoop.makeFailedFuture(error)
        }
        let ready = eventLoop.makePromise(of: Void.self)
        let handlerBox = NIOLockedValueBox<HTTP2ConnectionHandler?>(nil)
        return ClientBootstrap(group: eventLoop)
            .connectTimeout(connectTimeout)
            .channelOption(ChannelOptions.tcpOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let handler = HTTP2ConnectionHandler(
                        role: .client(scheme: "https", authority: target.authority), settings: settings,
                        readyPromise: ready)
                    handlerBox.withLockedValue { $0 = handler }
                    try channel.pipeline.syncOperations.addHandler(
                        TLSHandler(context: tls, serverHostname: target.host))
                    try channel.pipeline.syncOperations.addHandler(handler)
                }
            }
            .connect(host: target.host, port: target.port)
            .flatMap { channel in
                ready.futureResult.map {
                    let handler = handlerBox.withLockedValue { $0 }!
                    return TransportConnection(channel: channel, handler: handler, tlsInfo: handler.tlsInfo!)
                }.flatMapErrorThrowing { error in
                    channel.close(promise: nil)
                    throw error
                }
            }
    }

    /// Async form of ``connect(to:tls:settings:group:connectTimeout:)``.
    public static func connect(
        to url: String, tls: TLSContext, settings: HTTP2Settings = HTTP2Settings(), group: EventLoopGroup
    ) async throws -> TransportConnection {
        try await connect(to: url, tls: tls, settings: settings, group: group, connectTimeout: .seconds(10)).get()
    }

    /// Opens a stream: sends the request headers (`:scheme`/`:authority` are filled in).
    /// With `endStream` the request has no body; otherwise write it and ``TransportStream/finish(trailers:)``.
    /// Set the returned stream's delegate to receive the response.
    public func openStream(
        method: String = "POST", path: String, headers: HeaderFields = HeaderFields(), endStream: Bool = false
    ) -> EventLoopFuture<TransportStream> {
        let handler = self.handler
        return eventLoop.submit {
            try handler.openStream(method: method, path: path, headers: headers, endStream: endStream)
        }
    }

    /// Async form of ``openStream(method:path:headers:endStream:)``.
    public func openStream(
        method: String = "POST", path: String, headers: HeaderFields = HeaderFields(), endStream: Bool = false
    ) async throws -> TransportStream {
        try await openStream(method: method, path: path, headers: headers, endStream: endStream).get()
    }

    /// Sends GOAWAY, lets open streams finish, then closes. Completes when closed.
    public func close() -> EventLoopFuture<Void> {
        let handler = self.handler
        eventLoop.execute { handler.initiateGracefulShutdown() }
        return channel.closeFuture
    }

    /// Async form of ``close()``.
    public func close() async throws { try await close().get() }

    /// Stops (or resumes) reading from the socket, as a peer that takes nothing would: the
    /// other side's writes then fill the socket buffers. For tests of slow and stalled peers.
    public func setReading(_ reading: Bool) async throws {
        try await channel.setOption(ChannelOptions.autoRead, value: reading).get()
    }

    /// PINGs of ``HTTP2Settings/liveness`` the server answered so far.
    public func livenessPingsAnswered() async throws -> Int {
        let handler = self.handler
        return try await eventLoop.submit { handler.livenessPingsAnswered }.get()
    }

    /// Completes when the connection has closed, for any reason.
    public var closeFuture: EventLoopFuture<Void> { channel.closeFuture }

    /// Succeeds when the server sends GOAWAY (it is shutting down: finish open streams, open
    /// new ones on a new connection); fails if the connection closes without one.
    public var goingAway: EventLoopFuture<Void> { handler.goAwayPromise.futureResult }

    /// Whether the server has sent GOAWAY (open a new connection for new streams).
    public var isGoingAway: EventLoopFuture<Bool> {
        let handler = self.handler
        return eventLoop.submit { handler.peerWentAway }
    }
}

/// `https://host[:port][/…]`; IPv6 hosts in brackets.
struct HTTPSURL {
    var host: String
    var port: Int
    var authority: String

    init(_ string: String) throws {
        guard string.hasPrefix("https://") else {
            throw TransportError(.invalidURL, "only https:// URLs are supported: \(string)")
        }
        var rest = Substring(string.dropFirst("https://".count))
        if let slash = rest.firstIndex(of: "/") { rest = rest[..<slash] }
        guard !rest.isEmpty else { throw TransportError(.invalidURL, "no host in \(string)") }
        var portText: Substring? = nil
        if rest.hasPrefix("[") {
            guard let close = rest.firstIndex(of: "]") else {
                throw TransportError(.invalidURL, "bad IPv6 host in \(string)")
            }
            host = String(rest[rest.index(after: rest.startIndex)..<close])
            let after = rest[rest.index(after: close)...]
            if after.hasPrefix(":") {
                portText = after.dropFirst()
            } else if !after.isEmpty {
                throw TransportError(.invalidURL, "bad authority in \(string)")
            }
        } else if let colon = rest.lastIndex(of: ":") {
            host = String(rest[..<colon])
            portText = rest[rest.index(after: colon)...]
        } else {
            host = String(rest)
        }
        if let portText {
            guard let value = Int(portText), (1...65535).contains(value) else {
                throw TransportError(.invalidURL, "bad port in \(string)")
            }
            port = value
        } else {
            port = 443
        }
        guard !host.isEmpty else { throw TransportError(.invalidURL, "no host in \(string)") }
        authority = host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
    }
}
