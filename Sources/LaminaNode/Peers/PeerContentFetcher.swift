import Foundation
import LaminaModel
import LaminaStore
import LaminaTransport
import Logging
import NIOConcurrencyHelpers
import NIOCore

/// Fetches the rich content of replicated messages from peers (CONTENT.md §9), eagerly: as soon
/// as a replicated message that references content this node lacks is committed, the content is
/// asked of the node that accepted the message, then of the other peers, with `GET
/// /v1/peer/content/<uuid>` on their peer listeners (mutual TLS). The bytes go to the partial
/// file of the content's upload record, synced and recorded as they come, so a fetch cut by a
/// lost connection or a restart resumes from the bytes held (`range: bytes=<held>-`); the whole
/// content is checked against the reference's SHA-256 before it becomes complete.
final class PeerContentFetcher: Sendable {
    /// Content records read per look at the store.
    static let batch = 32
    /// Bytes written between two fsyncs (and records of the bytes held).
    static let syncEveryBytes: UInt64 = 8 << 20
    /// Bytes of a peer's answer buffered unread before the stream stops reading.
    static let highWater = 1 << 20
    /// Wait before asking again for content no peer could give, doubling up to the maximum.
    static let retryMinimum: Duration = .milliseconds(500)
    static let retryMaximum: Duration = .seconds(10)

    private let engine: NodeEngine
    private let content: ContentService
    private let tls: TLSContext
    private let group: EventLoopGroup
    private let logger: Logger
    /// The peer listener URLs to try for content, those of `origin` first.
    private let candidates: @Sendable (_ origin: NodeID?) -> [String]

    private struct Retry {
        var delay: Duration
        var notBefore: ContinuousClock.Instant
    }
    private struct State {
        var retries: [ContentID: Retry] = [:]
        var stopped = false
        var tasks: [Task<Void, Never>] = []
        /// Content fetched so far (tests, logs).
        var fetched = 0
    }
    private let state = NIOLockedValueBox(State())

    /// For tests: where each fetch attempt of a content started, and a hook called after each
    /// chunk is written with the bytes held, which cuts the transfer there (as a lost connection
    /// would) when it answers false.
    struct TestHooks {
        var starts: [ContentID: [UInt64]] = [:]
        var afterChunk: (@Sendable (ContentID, UInt64) -> Bool)?
    }
    let testHooks = NIOLockedValueBox(TestHooks())

    init(
        engine: NodeEngine, content: ContentService, tls: TLSContext, group: EventLoopGroup, logger: Logger,
        candidates: @escaping @Sendable (NodeID?) -> [String]
    ) {
        self.engine = engine
        self.content = content
        self.tls = tls
        self.group = group
        self.logger = logger
        self.candidates = candidates
    }

    /// Content fetched from peers since the start.
    var fetchedCount: Int { state.withLockedValue { $0.fetched } }

    /// Starts the fetch loop (it also picks up fetches left by an earlier run).
    func start() {
        let loop = Task { await self.run() }
        // While some fetch waits to be retried, look again every so often.
        let ticker = Task {
            while !Task.isCancelled {
                try? await Task.sleep(for: Self.retryMinimum)
                if self.state.withLockedValue({ !$0.retries.isEmpty }) { self.engine.contentSignal.notify() }
            }
        }
        state.withLockedValue { $0.tasks = [loop, ticker] }
    }

    func stop() {
        let tasks = state.withLockedValue { s -> [Task<Void, Never>] in
            s.stopped = true
            return s.tasks
        }
        for task in tasks { task.cancel() }
        engine.contentSignal.notify()
    }

    private var isStopped: Bool { state.withLockedValue { $0.stopped } }

    private func run() async {
        let signal = engine.contentSignal
        while !isStopped {
            let seen = signal.generation
            let pending: [ContentFetch]
            do {
                pending = try await content.store.read { r in try r.contentToFetch(limit: Self.batch) }
            } catch {
                logger.warning("cannot read the content to fetch", metadata: ["error": "\(error)"])
                pending = []
            }
            let now = ContinuousClock.now
            let due = state.withLockedValue { s in
                // Forget retries of content no longer pending (fetched, collected).
                let ids = Set(pending.map(\.upload.id))
                s.retries = s.retries.filter { ids.contains($0.key) }
                return pending.filter { s.retries[$0.upload.id].map { $0.notBefore <= now } ?? true }
            }
            for fetch in due where !isStopped {
                let done = await self.fetch(fetch)
                state.withLockedValue { s in
                    if done {
                        s.retries[fetch.upload.id] = nil
                        s.fetched += 1
                    } else {
                        let delay =
                            s.retries[fetch.upload.id].map { min($0.delay * 2, Self.retryMaximum) } ?? Self.retryMinimum
                        s.retries[fetch.upload.id] = Retry(delay: delay, notBefore: .now + delay)
                    }
                }
            }
            await signal.wait(after: seen)
        }
    }

    /// One content from the first peer that has it. True once it is complete here.
    private func fetch(_ fetch: ContentFetch) async -> Bool {
        let id = fetch.upload.id
        // One stream at a time works on a content (CONTENT.md §3); the sweep leaves it alone.
        guard content.active.begin(id, user: fetch.upload.owner, limit: Int.max) == .admitted else { return false }
        defer { content.active.end(id) }
        for url in candidates(fetch.origin) where !isStopped {
            do {
                // The record may have moved since it was read (an earlier attempt's bytes).
                guard let upload = try await content.store.read({ r in try r.upload(id) }), upload.state != .complete
                else { return true }
                try await self.fetch(upload, from: url)
                content.arrivals.arrived(id)
                logger.debug("content fetched from a peer", metadata: ["content": "\(id)", "peer": "\(url)"])
                return true
            } catch {
                logger.debug(
                    "peer did not give content", metadata: ["content": "\(id)", "peer": "\(url)", "error": "\(error)"])
            }
        }
        return false
    }

    /// Downloads the rest of `upload` from the peer at `url` into its partial file, then checks
    /// and completes it. Throws when the peer does not give all of it (the bytes held stay).
    private func fetch(_ upload: ContentUpload, from url: String) async throws {
        let connection = try await TransportConnection.connect(to: url, tls: tls, group: group)
        defer { Task { try? await connection.close() } }
        guard let name = connection.tlsInfo.peerCommonName, PeerSettings.node(fromCommonName: name) != nil else {
            throw TransportError(
                .tlsHandshake,
                "the peer's certificate names no node (CN \(connection.tlsInfo.peerCommonName ?? "none"))")
        }
        let id = upload.id
        let files = content.files
        let pool = content.threadPool
        var headers = HeaderFields()
        if upload.receivedBytes > 0 { headers.append("range", "bytes=\(upload.receivedBytes)-") }
        let stream = try await connection.openStream(
            method: "GET", path: PeerContentEndpoint.pathPrefix + ContentFiles.name(id), headers: headers,
            endStream: true)
        let body = PeerContentBody(stream: stream, highWater: Self.highWater)
        try await stream.eventLoop.submit { stream.delegate = body }.get()

        let file = try await pool.runIfActive { try FetchFile(files, id, from: upload.receivedBytes) }
        let hook = testHooks.withLockedValue { h in
            h.starts[id, default: []].append(upload.receivedBytes)
            return h.afterChunk
        }
        defer { Task { try? await pool.runIfActive { file.close() } } }
        /// Makes the bytes written durable and records them (resumable from there).
        func record() async throws {
            let held = try await pool.runIfActive { () throws -> UInt64 in
                try ContentFiles.syncFile(file.fd)
                return file.offset
            }
            try await content.store.write { tx in
                try tx.updateUpload(id, receivedBytes: held, state: .uploading, at: .now())
            }
            file.synced = held
        }
        var finished = false
        do {
            for try await event in body.events {
                switch event {
                case .headers(let response):
                    let status = response[":status"] ?? "?"
                    switch status {
                    case "200":
                        // The peer sent everything: start the file again.
                        if file.offset > 0 { try await pool.runIfActive { try file.restart(files, id) } }
                    case "206":
                        guard let range = response["content-range"], range.hasPrefix("bytes \(file.offset)-"),
                            range.hasSuffix("/\(upload.declaredSize)")
                        else {
                            throw TransportError(
                                .badResponse,
                                "the peer answered the range \(response["content-range"] ?? "none") for bytes \(file.offset)-"
                            )
                        }
                    default:
                        throw TransportError(
                            .badResponse, "the peer answered \(status) \(response["lamina-error"] ?? "")")
                    }
                case .data(let chunk):
                    guard file.offset + UInt64(chunk.readableBytes) <= upload.declaredSize else {
                        throw TransportError(
                            .badResponse, "the peer sent more than the content's \(upload.declaredSize) bytes")
                    }
                    try await pool.runIfActive { try file.append(chunk) }
                    body.consumed(chunk.readableBytes)
                    if let hook, !hook(id, file.offset) {
                        stream.reset()
                        throw TransportError(.connectionClosed, "cut by a test after \(file.offset) bytes")
                    }
                    if file.offset - file.synced >= Self.syncEveryBytes { try await record() }
                case .end:
                    finished = true
                }
            }
        } catch {
            if file.offset > file.synced { try? await record() }
            throw error
        }
        guard finished, file.offset == upload.declaredSize else {
            if file.offset > file.synced { try? await record() }
            throw TransportError(
                .connectionClosed, "the peer's answer ended at \(file.offset) of \(upload.declaredSize) bytes")
        }
        let expected = upload.sha256
        let size = file.offset
        let matches = try await pool.runIfActive { () throws -> Bool in
            try ContentFiles.syncFile(file.fd)
            guard try file.hasher.finalize() == expected else {
                files.remove(id)
                return false
            }
            try files.promote(id)
            return true
        }
        guard matches else {
            // Start again from nothing, maybe from another peer.
            try await content.store.write { tx in
                try tx.updateUpload(id, receivedBytes: 0, state: .awaitingUpload, at: .now())
            }
            throw TransportError(
                .badResponse, "the peer's bytes of content \(id) do not hash to the reference's SHA-256")
        }
        try await content.store.write { tx in try tx.updateUpload(id, receivedBytes: size, state: .complete, at: .now())
        }
    }
}

/// The partial file a fetch writes, with the digest of its bytes so far. Used by one fetch at a
/// time, its blocking calls on the content threads.
private final class FetchFile: @unchecked Sendable {
    var fd: Int32
    var hasher: SHA256Hasher
    /// Bytes in the file, and of those the ones synced and recorded.
    var offset: UInt64
    var synced: UInt64
    private var closed = false

    /// Opens the partial file at `offset` (cutting what lies beyond) and hashes what it holds.
    init(_ files: ContentFiles, _ id: ContentID, from offset: UInt64) throws {
        hasher = try SHA256Hasher()
        try files.hashPartial(id, length: offset, into: hasher)
        fd = try files.openPartial(id, at: offset)
        self.offset = offset
        synced = offset
    }

    func append(_ chunk: ByteBuffer) throws {
        try ContentFiles.writeAll(fd, chunk)
        try hasher.update(chunk)
        offset += UInt64(chunk.readableBytes)
    }

    /// Empties the file (the peer answers the whole content).
    func restart(_ files: ContentFiles, _ id: ContentID) throws {
        ContentFiles.closeFile(fd)
        fd = try files.openPartial(id, at: 0)
        hasher = try SHA256Hasher()
        offset = 0
        synced = 0
    }

    func close() {
        guard !closed else { return }
        closed = true
        ContentFiles.closeFile(fd)
    }
}

/// A peer's answer to a content GET as an async sequence, read at most ``highWater`` bytes
/// ahead of the consumer (the stream stops reading beyond, so HTTP/2 flow control slows the peer).
final class PeerContentBody: TransportStreamDelegate, @unchecked Sendable {
    enum Event: Sendable {
        case headers(HeaderFields)
        case data(ByteBuffer)
        case end
    }

    let events: AsyncThrowingStream<Event, Error>
    private let continuation: AsyncThrowingStream<Event, Error>.Continuation
    private let stream: TransportStream
    private let highWater: Int
    private struct Flow {
        var buffered = 0
        var paused = false
    }
    private let flow = NIOLockedValueBox(Flow())

    init(stream: TransportStream, highWater: Int) {
        self.stream = stream
        self.highWater = highWater
        (events, continuation) = AsyncThrowingStream<Event, Error>.makeStream()
        let stream = stream
        continuation.onTermination = { reason in
            if case .cancelled = reason { stream.reset() }
        }
    }

    /// The consumer took `count` bytes: read on when the backlog fell to half the mark.
    func consumed(_ count: Int) {
        let resume = flow.withLockedValue { f -> Bool in
            f.buffered -= count
            guard f.paused, f.buffered <= highWater / 2 else { return false }
            f.paused = false
            return true
        }
        if resume { stream.resumeInbound() }
    }

    func streamDidReceiveHeaders(_ stream: TransportStream, headers: HeaderFields) {
        continuation.yield(.headers(headers))
    }

    func streamDidReceiveData(_ stream: TransportStream, data: ByteBuffer) {
        let pause = flow.withLockedValue { f -> Bool in
            f.buffered += data.readableBytes
            guard !f.paused, f.buffered >= highWater else { return false }
            f.paused = true
            return true
        }
        if pause { stream.pauseInbound() }
        continuation.yield(.data(data))
    }

    func streamDidReceiveEnd(_ stream: TransportStream, trailers: HeaderFields?) {
        continuation.yield(.end)
        continuation.finish()
    }

    func streamDidClose(_ stream: TransportStream, error: TransportError?) {
        continuation.finish(throwing: error)
    }
}
