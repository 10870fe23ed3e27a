import Foundation
import LaminaModel
import LaminaTransport
import LaminaWire
import Logging
import NIOConcurrencyHelpers
import NIOCore

/// A node's peering: the peer listener (mutual TLS, `POST /v1/peer`), a dialer per configured
/// peer (reconnecting with backoff and jitter), and the live links, one per pair of nodes.
///
/// When both nodes of a pair dial each other, both keep the link the node with the smaller
/// id dialed (each side decides alone and the same way), and the other dialer waits until
/// that link ends before it tries again.
public final class PeerService: Sendable {
    /// The request path of a peer session.
    public static let path = "/v1/peer"
    /// Request headers of a peer session naming the dialer's own peer listener (port, and
    /// host unless it listens on every address), so that the accepting node can fetch content
    /// from it too (CONTENT.md §9): an HTTP/2 server opens no streams to its client.
    static let listenerPortHeader = "lamina-peer-port"
    static let listenerHostHeader = "lamina-peer-host"

    private let engine: NodeEngine
    private let settings: PeerSettings
    private let hello: PeerHello
    private let clientTLS: TLSContext
    private let group: EventLoopGroup
    private let logger: Logger
    /// The peer listener.
    public let transport: TransportServer

    private struct Link {
        var link: PeerLink
        var dialer: NodeID
    }
    private struct State {
        var links: [NodeID: Link] = [:]
        var dialers: [Task<Void, Never>] = []
        var stopped = false
        /// The node each dialed URL turned out to be (its certificate's).
        var nodes: [String: NodeID] = [:]
        /// The peer listener of each node that dialed this one, as it named it.
        var listeners: [NodeID: String] = [:]
        /// Since when each peer whose link was lost has had none (logged when it is back).
        var lostSince: [NodeID: ContinuousClock.Instant] = [:]
    }
    private let state = NIOLockedValueBox(State())
    /// Fetches the rich content of replicated messages from peers (nil without a content service).
    private let fetcher = NIOLockedValueBox<PeerContentFetcher?>(nil)

    private init(
        engine: NodeEngine, settings: PeerSettings, hello: PeerHello, clientTLS: TLSContext, group: EventLoopGroup,
        logger: Logger, transport: TransportServer
    ) {
        self.engine = engine
        self.settings = settings
        self.hello = hello
        self.clientTLS = clientTLS
        self.group = group
        self.logger = logger
        self.transport = transport
    }

    /// Starts the peer listener and the dialers.
    /// `content` (when given) is served to peers and the content of replicated messages fetched
    /// into it (CONTENT.md §9).
    public static func start(
        engine: NodeEngine, content: ContentService? = nil, settings: PeerSettings, group: EventLoopGroup,
        logger: Logger
    ) async throws -> PeerService {
        try settings.validate()
        guard let ca = settings.caFile, let certificate = settings.certificateFile, let key = settings.keyFile else {
            throw NodeServerError.configuration("peering needs a CA, a certificate and a key")
        }
        let hello = PeerHello(
            nodeID: engine.configuration.nodeID, features: FeatureSet.all.union(.perPartEdits),
            cluster: settings.cluster)
        let serverTLS = try TLSContext(
            .server(certificateChainFile: certificate, privateKeyFile: key, clientCAFile: ca))
        let clientTLS = try TLSContext(
            .client(trust: .caFile(ca), certificateChainFile: certificate, privateKeyFile: key))
        let box = NIOLockedValueBox<PeerService?>(nil)
        var router = TransportRouter()
        router.add(path) { stream in
            guard let service = box.withLockedValue({ $0 }) else {
                stream.sendHeaders(HeaderFields([(":status", "503")]), endStream: true)
                return
            }
            service.accept(stream)
        }
        if let content { router.add(PeerContentEndpoint.routePattern, PeerContentEndpoint.handler(service: content)) }
        var http2 = HTTP2Settings()
        http2.initialStreamWindow = 1 << 20
        http2.openedStreamWindow = 1 << 20
        http2.liveness = settings.liveness
        let transport = try await TransportServer.start(
            host: settings.host, port: settings.port, tls: serverTLS, router: router, settings: http2, group: group
        ).get()
        let service = PeerService(
            engine: engine, settings: settings, hello: hello, clientTLS: clientTLS, group: group, logger: logger,
            transport: transport)
        box.withLockedValue { $0 = service }
        if let content {
            let fetcher = PeerContentFetcher(
                engine: engine, content: content, tls: clientTLS, group: group, logger: logger,
                candidates: { [weak service] origin in service?.contentSources(origin: origin) ?? [] })
            service.fetcher.withLockedValue { $0 = fetcher }
            fetcher.start()
        }
        for url in settings.peers {
            let task = Task { await service.dial(url) }
            service.state.withLockedValue { $0.dialers.append(task) }
        }
        logger.info(
            "peering",
            metadata: [
                "listen": "\(settings.host):\(transport.port)", "cluster": "\(settings.cluster)",
                "peers": "\(settings.peers)",
                "liveness": "\(settings.liveness)",
            ])
        return service
    }

    /// The peers this node has a live link to, by node id, with the operations applied from
    /// and sent over each.
    public var links: [NodeID: (received: Int, sent: Int)] {
        state.withLockedValue { s in s.links.mapValues { $0.link.counts } }
    }

    /// The fetcher of replicated messages' content (nil without a content service).
    var contentFetcher: PeerContentFetcher? { fetcher.withLockedValue { $0 } }

    /// Content fetched from peers since the start (CONTENT.md §9).
    public var contentFetched: Int { fetcher.withLockedValue { $0 }?.fetchedCount ?? 0 }

    /// The peer listeners to ask for content: `origin`'s first, then every other peer this node
    /// knows a listener of (those it dials, and those that dialed it and named theirs).
    func contentSources(origin: NodeID?) -> [String] {
        let (known, listeners) = state.withLockedValue { ($0.nodes, $0.listeners) }
        var urls = settings.peers
        for (_, url) in listeners.sorted(by: { $0.key < $1.key }) where !urls.contains(url) { urls.append(url) }
        if let origin {
            let first = urls.firstIndex { known[$0] == origin || listeners[origin] == $0 }
            if let first { urls.insert(urls.remove(at: first), at: 0) }
        }
        return urls
    }

    /// The peer listener a dialing node named in its request (its host, else the address it
    /// connected from), nil when it named no port.
    static func listener(of stream: TransportStream) -> String? {
        guard let text = stream.requestHeaders[listenerPortHeader], let port = Int(text), (1...65535).contains(port)
        else { return nil }
        var host = stream.requestHeaders[listenerHostHeader] ?? stream.remoteAddress?.ipAddress
        if let named = host,
            named.isEmpty || named.utf8.count > 255
                || named.contains(where: { $0 == "/" || $0 == "@" || $0 == "[" || $0 == "]" || $0 == " " })
        {
            host = stream.remoteAddress?.ipAddress
        }
        guard let host else { return nil }
        return host.contains(":") ? "https://[\(host)]:\(port)" : "https://\(host):\(port)"
    }

    /// The headers naming this node's peer listener, for the peers it dials.
    private var listenerHeaders: [(String, String)] {
        var headers = [(Self.listenerPortHeader, String(transport.port))]
        if !["", "0.0.0.0", "::", "[::]", "*"].contains(settings.host) {
            headers.append((Self.listenerHostHeader, settings.host))
        }
        return headers
    }

    /// Each live link's lag: operations the peer has not acknowledged and for how long.
    public var lags: [NodeID: (operations: UInt64, seconds: Double)] {
        state.withLockedValue { s in s.links.mapValues { $0.link.lag } }
    }

    /// Closes every link and stops dialing.
    public func shutdown() async {
        let (links, dialers) = state.withLockedValue { s -> ([PeerLink], [Task<Void, Never>]) in
            s.stopped = true
            return (s.links.values.map(\.link), s.dialers)
        }
        for dialer in dialers { dialer.cancel() }
        fetcher.withLockedValue { $0 }?.stop()
        for link in links { link.stream.eventLoop.execute { link.stream.reset() } }
        try? await transport.shutdown()
    }

    // MARK: accepting (event loop)

    private func accept(_ stream: TransportStream) {
        guard let name = stream.tlsInfo?.peerCommonName, let node = PeerSettings.node(fromCommonName: name) else {
            logger.warning(
                "peer certificate names no node", metadata: ["cn": "\(stream.tlsInfo?.peerCommonName ?? "none")"])
            stream.sendHeaders(HeaderFields([(":status", "403")]), endStream: true)
            return
        }
        let link = PeerLink(
            stream: stream, engine: engine, local: hello, certified: node, logger: logger,
            onUp: { [weak self] in self?.up($0, node: node, direction: "accepted") },
            onClose: { [weak self] in self?.remove($0) })
        if let url = Self.listener(of: stream) { state.withLockedValue { $0.listeners[node] = url } }
        guard register(link, node: node, dialer: node) else {
            link.discard()
            stream.sendHeaders(HeaderFields([(":status", "409")]), endStream: true)
            return
        }
        stream.sendHeaders(HeaderFields([(":status", "200"), ("content-type", "application/vnd.lamina.sync")]))
        stream.openReceiveWindow()
        stream.delegate = link
        Task { await link.start() }
    }

    /// Keeps one link per pair: the one the smaller node id dialed.
    private func register(_ link: PeerLink, node: NodeID, dialer: NodeID) -> Bool {
        let (keep, replaced) = state.withLockedValue { s -> (Bool, PeerLink?) in
            guard !s.stopped else { return (false, nil) }
            if let existing = s.links[node], !existing.link.isClosed {
                let preferred = min(engine.configuration.nodeID, node)
                guard dialer == preferred, existing.dialer != preferred else { return (false, nil) }
                s.links[node] = Link(link: link, dialer: dialer)
                return (true, existing.link)
            }
            s.links[node] = Link(link: link, dialer: dialer)
            return (true, nil)
        }
        if let replaced { replaced.stream.eventLoop.execute { replaced.stream.reset() } }
        return keep
    }

    /// A kept link's session came up: logged, as the return of a lost one when it is.
    private func up(_ link: PeerLink, node: NodeID, direction: String) {
        let down: Duration?? = state.withLockedValue { s in
            guard s.links[node]?.link === link else { return nil }  // replaced meanwhile
            return .some(s.lostSince.removeValue(forKey: node).map { ContinuousClock.now - $0 })
        }
        guard let down else { return }
        if let down {
            logger.notice("peer link to \(Self.name(node)) restored after \(Self.seconds(down)) down (\(direction))")
        } else {
            logger.notice("peer link to \(Self.name(node)) up (\(direction))")
        }
    }

    /// Forgets a link that ended; one whose session had come up and that was the pair's link
    /// is logged as lost (the dialers redial it, ``dial(_:)``).
    private func remove(_ link: PeerLink) {
        let lost: NodeID? = state.withLockedValue { s in
            guard let node = s.links.first(where: { $0.value.link === link })?.key else { return nil }
            s.links[node] = nil
            guard !s.stopped, link.cameUp else { return nil }
            if s.lostSince[node] == nil { s.lostSince[node] = .now }
            return node
        }
        if let lost {
            logger.warning("peer link to \(Self.name(lost)) lost: \(link.endReason ?? "closed")")
        }
    }

    /// A node id as the logs, metrics and certificates write it (hex).
    static func name(_ node: NodeID) -> String { String(node.rawValue, radix: 16) }

    static func seconds(_ duration: Duration) -> String {
        let ms = duration.components.seconds * 1_000 + duration.components.attoseconds / 1_000_000_000_000_000
        return "\(Double(ms) / 1_000) s"
    }

    // MARK: dialing

    /// Dials `url` until the service stops: after a link ends, again from the backoff's
    /// minimum; after a failed attempt, after twice the last wait (up to the maximum), each
    /// wait jittered between half and all of it.
    private func dial(_ url: String) async {
        var delay = settings.reconnectMinimumMilliseconds
        while !Task.isCancelled, !state.withLockedValue({ $0.stopped }) {
            var linked = false
            do {
                linked = try await session(with: url)
            } catch {
                logger.info(
                    "peer dial failed",
                    metadata: ["peer": "\(url)", "error": "\(error)", "next_attempt_ms": "\(delay)"])
            }
            if linked {
                delay = settings.reconnectMinimumMilliseconds
                if !state.withLockedValue({ $0.stopped }) {
                    logger.notice(
                        "redialing peer \(url) (backoff \(settings.reconnectMinimumMilliseconds) ms doubling to \(settings.reconnectMaximumMilliseconds) ms)"
                    )
                }
            }
            try? await Task.sleep(for: .milliseconds(Int.random(in: delay / 2...delay)))
            if !linked { delay = min(delay * 2, settings.reconnectMaximumMilliseconds) }
        }
    }

    /// One connection to `url` and its peer session, until it ends. True when a session had
    /// come up (this one, or the other node's that it waited for).
    private func session(with url: String) async throws -> Bool {
        var http2 = HTTP2Settings()
        http2.liveness = settings.liveness
        let connection = try await TransportConnection.connect(
            to: url, tls: clientTLS, settings: http2, group: group,
            connectTimeout: .milliseconds(Int64(settings.connectTimeoutMilliseconds))
        ).get()
        defer { Task { try? await connection.close() } }
        guard let name = connection.tlsInfo.peerCommonName, let node = PeerSettings.node(fromCommonName: name) else {
            throw TransportError(
                .tlsHandshake,
                "the peer's certificate names no node (CN \(connection.tlsInfo.peerCommonName ?? "none"))")
        }
        state.withLockedValue { $0.nodes[url] = node }
        // The other node dialed us and that link is the one kept: wait for it to end.
        if let kept = state.withLockedValue({ s in
            s.links[node].flatMap { $0.link.isClosed || $0.dialer == engine.configuration.nodeID ? nil : $0.link }
        }) {
            try? await kept.closed.futureResult.get()
            return kept.cameUp
        }
        let stream = try await connection.openStream(
            method: "POST", path: Self.path,
            headers: HeaderFields([("content-type", "application/vnd.lamina.sync")] + listenerHeaders))
        let link = PeerLink(
            stream: stream, engine: engine, local: hello, certified: node, logger: logger,
            onUp: { [weak self] in self?.up($0, node: node, direction: "dialed") },
            onClose: { [weak self] in self?.remove($0) })
        guard register(link, node: node, dialer: engine.configuration.nodeID) else {
            link.discard()
            stream.eventLoop.execute { stream.reset() }
            return false
        }
        try await stream.eventLoop.submit { stream.delegate = link }.get()
        await link.start()
        try? await link.closed.futureResult.get()
        return link.cameUp
    }
}
