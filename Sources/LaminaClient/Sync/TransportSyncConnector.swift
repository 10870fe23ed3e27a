import Foundation
import LaminaTransport
import LaminaWire
import NIOCore
import NIOPosix

/// Opens sync streams to the node over the network: TLS (trusting the configuration's CA
/// file or pinned certificate) + HTTP/2 with `LaminaTransport`, one connection and one
/// `POST /v1/sync` stream per channel, framed by `FramedChannel` (SPEC §1). A client's
/// content transfers borrow that same connection (`NodeLink`, Protocol/CONTENT.md).
public enum TransportSyncConnector {
    /// The sync stream's path on the node.
    public static let syncPath = "/v1/sync"

    /// A connector for `configuration`'s node. The TLS context is built here, once, so a
    /// missing or bad trust file fails now with `.invalidSetting`. `highWater` bounds the
    /// node's bytes buffered unread before the stream's inbound side pauses.
    public static func connector(
        for configuration: LaminaConfiguration, group: EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        highWater: Int = 256 * 1024, limits: WireLimits = .default
    ) throws(ClientError) -> FrameChannelConnector {
        try connector(for: configuration, link: nil, group: group, highWater: highWater, limits: limits)
    }

    /// As above; each new connection, and the session token its sync stream authenticates,
    /// are lent to content transfers through `link`.
    static func connector(
        for configuration: LaminaConfiguration, link: NodeLink?,
        group: EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        highWater: Int = 256 * 1024, limits: WireLimits = .default
    ) throws(ClientError) -> FrameChannelConnector {
        try configuration.validate()
        guard highWater > 0 else { throw ClientError(.invalidSetting, "the inbound high-water mark must be positive") }
        let trust: TLSConfiguration.Trust =
            switch configuration.trust {
            case .certificateAuthorities(let url): .caFile(url.path)
            case .pinnedCertificate(let url): .pinnedCertificate(url.path)
            }
        let tls: TLSContext
        do { tls = try TLSContext(.client(trust: trust)) } catch {
            throw ClientError(.invalidSetting, "the TLS trust settings do not load: \(error)")
        }
        let url = configuration.nodeURL.absoluteString
        var settings = HTTP2Settings()
        settings.liveness = HTTP2Liveness(
            pingAfterQuiet: .seconds(Int64(configuration.pingAfterQuietSeconds)),
            ackDeadline: .seconds(Int64(configuration.pingDeadlineSeconds)))
        return { [settings] () throws(ClientError) -> any FrameChannel in
            let stream = try await TransportSyncStream.open(
                url: url, tls: tls, settings: settings, group: group, highWater: highWater)
            let channel = FramedChannel(stream, limits: limits)
            guard let link else { return channel }
            link.connected(stream.connection)
            return LinkedChannel(channel, link: link, connection: stream.connection)
        }
    }
}

extension LaminaClient {
    /// Starts syncing with the configured node over TLS + HTTP/2 (see `TransportSyncConnector`),
    /// and transferring rich content on the same connection (uploads of queued messages'
    /// content resume, then auto-downloads run by the content settings).
    public func connect(identityToken: @escaping IdentityTokenProvider) async throws(ClientError) {
        try await connect(identityToken: identityToken, wrappingConnector: { $0 })
    }

    /// As ``connect(identityToken:)``, with the network connector passed through `wrap`
    /// first: the engine opens its channels through what `wrap` returns, so an app (or the
    /// `lamina` CLI) can observe each channel's frames or each connection failure while
    /// rich content still shares the sync stream's connection.
    public func connect(
        identityToken: @escaping IdentityTokenProvider,
        wrappingConnector wrap: (@escaping FrameChannelConnector) -> FrameChannelConnector
    ) async throws(ClientError) {
        let connector = try TransportSyncConnector.connector(for: configuration, link: transfers.link)
        transfers.link.start()
        try await connect(using: wrap(connector), identityToken: identityToken)
        transfers.start()
    }
}

/// A sync channel that tells the `NodeLink` when its stream is authenticated, so content
/// transfers may use the connection with the session's token.
final class LinkedChannel: FrameChannel {
    private let inner: FramedChannel
    private let link: NodeLink
    private let connection: TransportConnection

    init(_ inner: FramedChannel, link: NodeLink, connection: TransportConnection) {
        self.inner = inner
        self.link = link
        self.connection = connection
    }

    nonisolated(nonsending) func send(_ frame: Frame) async throws(ClientError) { try await inner.send(frame) }

    nonisolated(nonsending) func send(encoded bytes: ByteBuffer) async throws(ClientError) {
        try await inner.send(encoded: bytes)
    }

    nonisolated(nonsending) func receive() async throws(ClientError) -> Frame? {
        let frame = try await inner.receive()
        if case .authenticated(let a)? = frame { link.authenticated(token: a.sessionToken, on: connection) }
        return frame
    }

    nonisolated(nonsending) func close() async { await inner.close() }
}

/// One `POST /v1/sync` stream on its own connection as a `SyncByteStream`. Reads come from
/// the stream's `InboundBody` (backpressure: delivery pauses at the high-water mark);
/// writes complete once HTTP/2 has taken the bytes. `close` resets the stream if still
/// open and closes the connection.
final class TransportSyncStream: SyncByteStream, @unchecked Sendable {
    let connection: TransportConnection
    private let stream: TransportStream
    private let body: InboundBody
    private let lock = NSLock()
    private var iterator: InboundBody.AsyncIterator?  // taken by the one reader while it waits
    private var checkedStatus = false
    private var closed = false

    private init(connection: TransportConnection, stream: TransportStream, body: InboundBody) {
        self.connection = connection
        self.stream = stream
        self.body = body
        self.iterator = body.makeAsyncIterator()
    }

    static func open(
        url: String, tls: TLSContext, settings: HTTP2Settings = HTTP2Settings(), group: EventLoopGroup, highWater: Int
    ) async throws(ClientError) -> TransportSyncStream {
        let connection: TransportConnection
        do {
            connection = try await TransportConnection.connect(to: url, tls: tls, settings: settings, group: group)
        } catch {
            throw ClientError(.disconnected, "cannot connect to \(url): \(error)")
        }
        do {
            let stream = try await connection.openStream(method: "POST", path: TransportSyncConnector.syncPath)
            // The body source becomes the delegate on the event loop, before any response event.
            let body = try await stream.eventLoop.submit { stream.inboundBody(highWater: highWater) }.get()
            return TransportSyncStream(connection: connection, stream: stream, body: body)
        } catch {
            try? await connection.close()
            throw ClientError(.disconnected, "cannot open the sync stream on \(url): \(error)")
        }
    }

    nonisolated(nonsending) func write(_ bytes: ByteBuffer) async throws(ClientError) {
        guard !lock.withLock({ closed }) else { throw ClientError(.disconnected, "the sync stream is closed") }
        do { try await stream.write(bytes).get() } catch {
            throw ClientError(.disconnected, "the sync stream closed while writing: \(error)")
        }
    }

    nonisolated(nonsending) func read() async throws(ClientError) -> ByteBuffer? {
        let taken: (InboundBody.AsyncIterator, Bool)? = lock.withLock {
            guard !closed, let iterator else { return nil }
            self.iterator = nil
            defer { checkedStatus = true }
            return (iterator, checkedStatus)
        }
        guard let (taken, statusChecked) = taken else {
            throw ClientError(.disconnected, "the sync stream is closed")
        }
        var reader = taken
        defer { lock.withLock { self.iterator = reader } }
        do {
            if !statusChecked {
                let headers = try await body.responseHeaders()
                guard headers[":status"] == "200" else {
                    throw ClientError(
                        .protocolError, "the node answered the sync stream with status \(headers[":status"] ?? "none")")
                }
            }
            return try await reader.next()
        } catch let error as ClientError {
            throw error
        } catch {
            throw ClientError(.disconnected, "the sync stream closed: \(error)")
        }
    }

    nonisolated(nonsending) func close() async {
        let first = lock.withLock { () -> Bool in
            defer { closed = true }
            return !closed
        }
        guard first else { return }
        stream.reset()  // a no-op once the stream has closed
        try? await connection.close()
    }
}
