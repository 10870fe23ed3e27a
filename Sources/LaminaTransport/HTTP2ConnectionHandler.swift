import CNghttp2
import NIOConcurrencyHelpers
import NIOCore

/// Source of ``HTTP2ConnectionHandler/connectionID``.
private let connectionIDs = NIOLockedValueBox<UInt64>(0)

/// HTTP/2 over nghttp2's memory API for one connection, server or client role. Sits above
/// ``TLSHandler``: plaintext in, frames out. Streams go to the layer above as
/// ``TransportStream``s. nghttp2 is never flushed from inside its own callbacks: events are
/// queued during `mem_recv`/`mem_send` and delivered afterwards.
///
/// Event loop only (`@unchecked Sendable` so closures scheduled on its own loop may hold it).
final class HTTP2ConnectionHandler: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    enum Role {
        case server(TransportRouter)
        case client(scheme: String, authority: String)
    }

    let role: Role
    let settings: HTTP2Settings
    let readyPromise: EventLoopPromise<Void>
    /// Unique within the process (``TransportStream/connectionID``).
    let connectionID: UInt64
    private(set) var session: NGHTTP2Session?
    private var context: ChannelHandlerContext?
    private(set) var tlsInfo: TLSConnectionInfo?
    private var streams = StreamTable()
    private var remoteAddress: SocketAddress?
    private var deliveryQueue: [TransportStream] = []
    private var delivering = false
    private var completedWrites: [EventLoopPromise<Void>] = []
    private var becameWritable: [TransportStream] = []
    private var inputBase: UnsafeRawPointer?
    private var inputCount = 0
    private var inputBuffer: ByteBuffer?
    private var processing = false
    private var flushing = false
    private var flushScheduled = false
    private var closing = false
    private var closeError: TransportError?
    private var shuttingDown = false
    private var awaitingShutdownPing = false
    private var drainTimer: Scheduled<Void>?
    private var tornDown = false
    /// Server role, ``HTTP2Settings/idleConnectionTimeout``: since when no stream is open.
    private var idleSince: NIODeadline?
    private var idleTimer: Scheduled<Void>?
    /// ``HTTP2Settings/maxUnproductiveFramesPerSecond``: the current one-second window.
    private var unproductiveWindowStart = NIODeadline.uptimeNanoseconds(0)
    private var unproductiveFrames = 0
    private var calmed = false
    /// Server role: sees DATA frames nghttp2 discards silently (``HTTP2FrameScanner``).
    private var scanner: HTTP2FrameScanner?
    /// ``HTTP2Settings/liveness``: when the peer was last heard, the PING in flight.
    private var liveness: ConnectionLiveness?
    private var livenessTimer: Scheduled<Void>?
    /// True once the peer sent GOAWAY.
    private(set) var peerWentAway = false
    /// Succeeds when the peer sends GOAWAY; fails when the connection closes without one.
    let goAwayPromise: EventLoopPromise<Void>
    private var isServer: Bool { if case .server = role { return true } else { return false } }

    init(role: Role, settings: HTTP2Settings, readyPromise: EventLoopPromise<Void>) {
        self.role = role
        self.settings = settings
        self.readyPromise = readyPromise
        self.goAwayPromise = readyPromise.futureResult.eventLoop.makePromise(of: Void.self)
        self.connectionID = connectionIDs.withLockedValue { id in
            id += 1
            return id
        }
    }

    /// Open streams (for tests and metrics).
    var openStreamCount: Int { streams.count }

    /// Inbound body bytes this connection's streams hold that the layer above has not taken
    /// (paused streams; each bounded by its receive window), and the most one stream holds.
    /// Event loop only.
    var inboundHeld: (bytes: Int, largest: Int, peak: Int) {
        streams.all.reduce(into: (0, 0, inboundPeak)) { held, stream in
            held.0 += stream.inboundBufferedBytes
            held.1 = max(held.1, stream.inboundBufferedBytes)
        }
    }

    /// The most one stream of this connection ever held (a high-water mark of `inboundHeld`).
    private var inboundPeak = 0

    /// Outbound body bytes this connection's streams have queued and nghttp2 has not yet
    /// framed (waiting for the peer's windows or the socket), the most one stream queues, and
    /// the most one stream ever queued. Event loop only.
    var outboundHeld: (bytes: Int, largest: Int, peak: Int) {
        streams.all.reduce(into: (0, 0, outboundPeak)) { held, stream in
            held.0 += stream.outboundBufferedBytes
            held.1 = max(held.1, stream.outboundBufferedBytes)
        }
    }

    /// A high-water mark of one stream's `outboundBufferedBytes`.
    private var outboundPeak = 0

    // MARK: channel events

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        teardown(error: TransportError(.connectionClosed, "the HTTP/2 handler was removed"))
        self.context = nil
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let handshake = event as? TLSHandshakeCompleted {
            tlsInfo = handshake.info
            remoteAddress = context.channel.remoteAddress
            do {
                session = try NGHTTP2Session(
                    role: isServer ? .server : .client, owner: self, settings: settings)
            } catch {
                fatal(error as? TransportError ?? TransportError(.http2Protocol, "\(error)"))
                return
            }
            readyPromise.succeed()
            if isServer, settings.maxUnproductiveFramesPerSecond > 0 { scanner = HTTP2FrameScanner(server: true) }
            if isServer, settings.idleConnectionTimeout != nil {
                idleSince = .now()
                armIdleTimer()
            }
            if let configured = settings.liveness {
                let now = NIODeadline.now()
                liveness = ConnectionLiveness(configured, now: now)
                armLivenessTimer(at: now + configured.pingAfterQuiet)
            }
            flushSession()
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let buffer = unwrapInboundIn(data)
        guard let session, !session.isClosed, !tornDown else { return }
        if liveness != nil { liveness!.received(at: .now()) }
        processing = true
        let result = buffer.withUnsafeReadableBytes { raw -> Int in
            inputBase = UnsafeRawPointer(raw.baseAddress)
            inputCount = raw.count
            inputBuffer = buffer
            if scanner != nil { scanForDiscardedData(raw, session: session) }
            return nghttp2_session_mem_recv(
                session.raw, raw.baseAddress?.assumingMemoryBound(to: UInt8.self), raw.count)
        }
        inputBase = nil
        inputBuffer = nil
        if result < 0 {
            processing = false
            fatal(TransportError(.http2Protocol, "nghttp2: \(NGHTTP2Session.describe(Int32(result)))"))
            releaseSessionIfTornDown()
            return
        }
        deliverPending()
        processing = false
        flushSession()
        releaseSessionIfTornDown()
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        lastSocketProgress = .now()
        if context.channel.isWritable {
            stalledWriteTimer?.cancel()
            stalledWriteTimer = nil
            socketProgressTimer?.cancel()
            socketProgressTimer = nil
            flushSession()
        } else {
            if socketProgressTimer == nil {
                acknowledgedBytes = nil
                pollSocketProgress()
            }
            if let timeout = settings.stalledWriteTimeout, stalledWriteTimer == nil {
                stalledWriteTimer = context.eventLoop.scheduleTask(in: timeout) { [weak self] in
                    self?.stalledWriteCheck()
                }
            }
        }
        context.fireChannelWritabilityChanged()
    }

    /// While the connection cannot write: reads how much of its output the peer has
    /// received, once every ``socketProgressInterval``, and notes when that grew.
    private func pollSocketProgress() {
        guard let context, !context.channel.isWritable, !tornDown else {
            socketProgressTimer = nil
            return
        }
        SocketAcknowledgments.bytesAcknowledged(by: context.channel).whenSuccess { [weak self] acknowledged in
            guard let self, let acknowledged else { return }
            if let before = self.acknowledgedBytes, acknowledged > before { self.lastSocketProgress = .now() }
            self.acknowledgedBytes = acknowledged
        }
        socketProgressTimer = context.eventLoop.scheduleTask(in: Self.socketProgressInterval) { [weak self] in
            self?.pollSocketProgress()
        }
    }

    static let socketProgressInterval = TimeAmount.seconds(1)

    /// The peer read nothing of the connection for ``HTTP2Settings/stalledWriteTimeout``
    /// while its output waited for the socket: close the connection (a peer that reads
    /// nothing cannot be sent GOAWAY either). A peer that reads, however slowly, moves
    /// ``lastSocketProgress`` and is given another timeout from there.
    private func stalledWriteCheck() {
        stalledWriteTimer = nil
        guard let context, !context.channel.isWritable, !tornDown, !closing, let timeout = settings.stalledWriteTimeout
        else { return }
        let deadline = lastSocketProgress + timeout
        guard NIODeadline.now() >= deadline else {
            stalledWriteTimer = context.eventLoop.scheduleTask(deadline: deadline) { [weak self] in
                self?.stalledWriteCheck()
            }
            return
        }
        stalledWriteClosures += 1
        if closeError == nil {
            closeError = TransportError(
                .connectionClosed, "the peer read nothing for \(settings.stalledWriteTimeout.map { "\($0)" } ?? "")")
        }
        closing = true
        context.close(promise: nil)
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        let transportError = error as? TransportError ?? TransportError(.connectionClosed, "\(error)")
        if closeError == nil { closeError = transportError }
        readyPromise.fail(transportError)
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        teardown(error: closeError ?? TransportError(.connectionClosed, "the connection closed"))
        context.fireChannelInactive()
    }

    private func teardown(error: TransportError) {
        stalledWriteTimer?.cancel()
        stalledWriteTimer = nil
        socketProgressTimer?.cancel()
        socketProgressTimer = nil
        drainTimer?.cancel()
        idleTimer?.cancel()
        idleTimer = nil
        livenessTimer?.cancel()
        livenessTimer = nil
        readyPromise.fail(error)
        goAwayPromise.fail(error)
        let open = streams.removeAll()
        for stream in open {
            markClosed(stream, code: UInt32(NGHTTP2_INTERNAL_ERROR.rawValue), error: error)
        }
        deliverPending()
        tornDown = true
        // Never free the nghttp2 session under a frame that is still using it (a write can
        // close the channel synchronously in the middle of a flush or a read).
        releaseSessionIfTornDown()
    }

    /// Frees the session once no caller up the stack still uses it.
    private func releaseSessionIfTornDown() {
        if tornDown && !processing && !flushing && !delivering, let session {
            session.close()
            self.session = nil  // every later operation finds no session
        }
    }

    private func fatal(_ error: TransportError) {
        if closeError == nil { closeError = error }
        flushSession()  // a GOAWAY nghttp2 may have queued
        context?.fireErrorCaught(error)
        context?.close(promise: nil)
    }

    // MARK: nghttp2 callbacks (no flushing, no user code)

    func onBeginHeaders(_ frame: UnsafePointer<nghttp2_frame>) -> Int32 {
        let hd = frame.pointee.hd
        guard hd.type == UInt8(NGHTTP2_HEADERS.rawValue) else { return 0 }
        if isServer, frame.pointee.headers.cat == NGHTTP2_HCAT_REQUEST, let context {
            let stream = TransportStream(
                id: hd.stream_id, connection: self, eventLoop: context.eventLoop, isServerSide: true,
                requestHeaders: HeaderFields(), tlsInfo: tlsInfo, remoteAddress: remoteAddress)
            stream.pendingHeaders.reserveCapacity(8)
            streams.insert(stream, id: hd.stream_id)
            idleSince = nil
        }
        return 0
    }

    func onHeader(
        _ frame: UnsafePointer<nghttp2_frame>, name: UnsafeBufferPointer<UInt8>, value: UnsafeBufferPointer<UInt8>
    ) -> Int32 {
        guard let stream = streams[frame.pointee.hd.stream_id] else { return 0 }
        stream.pendingHeaderBytes += name.count + value.count + 32
        if stream.pendingHeaderBytes > Int(settings.maxHeaderListSize) {
            // RFC 9113 §6.5.2: the stream is reset rather than the list buffered.
            return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue
        }
        // nghttp2 has validated the name (lower case, RFC 9113 §8.2.1).
        stream.pendingHeaders.appendValidated(
            String(decoding: name, as: UTF8.self), String(decoding: value, as: UTF8.self))
        return 0
    }

    func onFrameRecv(_ frame: UnsafePointer<nghttp2_frame>) -> Int32 {
        let hd = frame.pointee.hd
        let endStream = hd.flags & UInt8(NGHTTP2_FLAG_END_STREAM.rawValue) != 0
        switch UInt32(hd.type) {
        case NGHTTP2_HEADERS.rawValue:
            guard let stream = streams[hd.stream_id] else { return 0 }
            let headers = stream.pendingHeaders
            stream.pendingHeaders = HeaderFields()
            stream.pendingHeaderBytes = 0
            var trailers: HeaderFields? = nil
            if isServer && frame.pointee.headers.cat == NGHTTP2_HCAT_REQUEST {
                stream.requestHeaders = headers
                stream.inbound.append(.request)
            } else if !isServer && !stream.sawFinalResponse {
                if let status = headers[":status"], status.hasPrefix("1") { return 0 }  // informational
                stream.sawFinalResponse = true
                stream.responseHeaders = headers
                stream.inbound.append(.headers(headers))
            } else {
                trailers = headers
            }
            if endStream {
                stream.inboundEnded = true
                stream.inbound.append(.end(trailers))
            }
            enqueue(stream)
        case NGHTTP2_DATA.rawValue:
            if !endStream, hd.length <= frame.pointee.data.padlen { return unproductiveFrame() }
            // END_STREAM may come after on_stream_close: only streams still tracked.
            if endStream, let stream = streams[hd.stream_id] {
                stream.inboundEnded = true
                stream.inbound.append(.end(nil))
                enqueue(stream)
            }
        case NGHTTP2_GOAWAY.rawValue:
            peerWentAway = true
            goAwayPromise.succeed()
        case NGHTTP2_PRIORITY.rawValue:
            return unproductiveFrame()
        case NGHTTP2_WINDOW_UPDATE.rawValue:
            // A reader's updates give back what it read (nghttp2 sends one per half window:
            // 8 KiB and more); a stream of tiny increments only costs us CPU.
            if frame.pointee.window_update.window_size_increment < Self.smallestProductiveWindowUpdate {
                return unproductiveFrame()
            }
            // A stream's update: its reader took bytes. (A connection-level one is no sign of
            // reading: a client may reopen the connection window as bytes arrive, as ours does.)
            if hd.stream_id != 0 { lastWindowUpdate = .now() }
        case NGHTTP2_SETTINGS.rawValue:
            if hd.flags & UInt8(NGHTTP2_FLAG_ACK.rawValue) == 0 { return unproductiveFrame() }
        case NGHTTP2_PING.rawValue:
            if hd.flags & UInt8(NGHTTP2_FLAG_ACK.rawValue) == 0 { return unproductiveFrame() }
            if liveness != nil { liveness!.acknowledged(at: .now()) }
            if awaitingShutdownPing, hd.flags & UInt8(NGHTTP2_FLAG_ACK.rawValue) != 0, let session {
                awaitingShutdownPing = false
                _ = nghttp2_submit_goaway(
                    session.raw, UInt8(NGHTTP2_FLAG_NONE.rawValue),
                    nghttp2_session_get_last_proc_stream_id(session.raw),
                    NGHTTP2_NO_ERROR.rawValue, nil, 0)
            }
        default:
            break
        }
        return 0
    }

    /// Counts DATA frames for streams that were open once and are closed now (nghttp2 drops
    /// them without a callback): stream ids up to the last one nghttp2 processed that the node
    /// no longer tracks. Streams the same bytes open next are above that id.
    private func scanForDiscardedData(_ bytes: UnsafeRawBufferPointer, session: NGHTTP2Session) {
        let lastOpened = nghttp2_session_get_last_proc_stream_id(session.raw)
        scanner!.scan(bytes) { streamID, _ in
            if streamID != 0, streamID <= lastOpened, streams[streamID] == nil { _ = unproductiveFrame() }
        }
    }

    /// Counts a frame that makes no progress (``HTTP2Settings/maxUnproductiveFramesPerSecond``);
    /// past the limit the session is terminated with GOAWAY ENHANCE_YOUR_CALM (sent by the
    /// flush after `mem_recv`, which then closes the connection).
    private func unproductiveFrame() -> Int32 {
        let limit = settings.maxUnproductiveFramesPerSecond
        guard limit > 0, !calmed, let session else { return 0 }
        let now = NIODeadline.now()
        if now - unproductiveWindowStart >= .seconds(1) {
            unproductiveWindowStart = now
            unproductiveFrames = 0
        }
        unproductiveFrames += 1
        if unproductiveFrames > limit {
            calmed = true
            floodTerminations += 1
            _ = nghttp2_session_terminate_session(session.raw, NGHTTP2_ENHANCE_YOUR_CALM.rawValue)
        }
        return 0
    }

    /// WINDOW_UPDATE increments below this count as frames that make no progress.
    static let smallestProductiveWindowUpdate: Int32 = 1_024

    /// Connections this handler ended for a frame flood (0 or 1; summed by the server).
    private(set) var floodTerminations = 0

    func onDataChunk(streamID: Int32, _ bytes: UnsafeRawBufferPointer) -> Int32 {
        guard let stream = streams[streamID], session != nil else {
            // Nobody will take these bytes: give the window back at once.
            if let session { _ = nghttp2_session_consume(session.raw, streamID, bytes.count) }
            return 0
        }
        var chunk: ByteBuffer
        if !stream.isPaused, let base = inputBase, let input = inputBuffer, let start = bytes.baseAddress,
            start >= base,
            start + bytes.count <= base + inputCount
        {
            // Zero copy: a slice of the plaintext buffer being parsed. A paused stream gets a
            // copy: it keeps its chunks a while, and a slice keeps the whole buffer alive.
            chunk = input.getSlice(at: input.readerIndex + (start - base), length: bytes.count)!
            stream.inboundHoldsSlices = true
        } else {
            chunk = context?.channel.allocator.buffer(capacity: bytes.count) ?? ByteBuffer()
            chunk.writeBytes(bytes)
        }
        // The connection window reopens on receipt; the stream window only once the layer
        // above takes the bytes. One stalled stream therefore never starves the others, and
        // buffered memory stays bounded by the stream windows.
        _ = nghttp2_session_consume_connection(session!.raw, bytes.count)
        stream.inboundBufferedBytes += bytes.count
        inboundPeak = max(inboundPeak, stream.inboundBufferedBytes)
        stream.inbound.append(.data(chunk))
        enqueue(stream)
        return 0
    }

    func onStreamClose(streamID: Int32, errorCode: UInt32) -> Int32 {
        guard let stream = streams.remove(streamID) else { return 0 }
        if streams.count == 0, idleTimer != nil { idleSince = .now() }
        var error: TransportError? = nil
        if errorCode != NGHTTP2_NO_ERROR.rawValue {
            error = TransportError(
                .streamReset,
                "stream \(streamID) reset: \(NGHTTP2Session.describeHTTP2Error(errorCode)) (0x\(String(errorCode, radix: 16)))"
            )
        } else if !stream.outboundFinished || !stream.outbound.isEmpty {
            error = TransportError(.streamReset, "stream \(streamID) closed before our side finished")
        }
        markClosed(stream, code: errorCode, error: error)
        return 0
    }

    func readOutbound(
        streamID: Int32, into target: UnsafeMutableRawBufferPointer, flags: UnsafeMutablePointer<UInt32>
    ) -> Int {
        guard let stream = streams[streamID], let session else {
            return Int(NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue)
        }
        var written = 0
        while written < target.count, let pending = stream.outbound.first {
            var chunk = pending.data
            let count = min(chunk.readableBytes, target.count - written)
            chunk.withUnsafeReadableBytes { source in
                (target.baseAddress! + written).copyMemory(from: source.baseAddress!, byteCount: count)
            }
            chunk.moveReaderIndex(forwardBy: count)
            written += count
            if chunk.readableBytes == 0 {
                _ = stream.outbound.popFirst()
                if let promise = pending.promise { completedWrites.append(promise) }
            } else {
                stream.outbound.replaceFirst(PendingWrite(data: chunk, promise: pending.promise))
            }
        }
        stream.outboundBufferedBytes -= written
        if !stream.isWritable && stream.outboundBufferedBytes <= settings.streamOutboundHighWater / 2 {
            stream.isWritable = true
            becameWritable.append(stream)
        }
        if stream.outbound.isEmpty {
            if stream.outboundFinished {
                flags.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue
                if let trailers = stream.outboundTrailers, trailers.count > 0 {
                    flags.pointee |= NGHTTP2_DATA_FLAG_NO_END_STREAM.rawValue
                    let rv = withNameValueArray(trailers) { nva, count in
                        nghttp2_submit_trailer(session.raw, streamID, nva, count)
                    }
                    if rv != 0 { return Int(NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue) }
                }
            } else if written == 0 {
                stream.dataDeferred = true
                return Int(NGHTTP2_ERR_DEFERRED.rawValue)
            }
        }
        return written
    }

    // MARK: delivery to the layer above

    private func enqueue(_ stream: TransportStream) {
        guard !stream.queuedForDelivery else { return }
        stream.queuedForDelivery = true
        deliveryQueue.append(stream)
    }

    private func markClosed(_ stream: TransportStream, code: UInt32, error: TransportError?) {
        stream.sessionCloseCode = code
        stream.closeError = error
        enqueue(stream)
    }

    /// Called by a stream whose delegate or pause state changed.
    func scheduleDelivery(_ stream: TransportStream) {
        enqueue(stream)
        if !processing && !delivering {
            deliverPending()
            scheduleFlush()
        }
    }

    private func deliverPending() {
        guard !delivering else { return }
        delivering = true
        var index = 0
        while index < deliveryQueue.count {
            let stream = deliveryQueue[index]
            stream.queuedForDelivery = false
            deliver(stream)
            index += 1
        }
        deliveryQueue.removeAll(keepingCapacity: true)
        delivering = false
        releaseSessionIfTornDown()
    }

    private func deliver(_ stream: TransportStream) {
        if stream.sessionCloseCode != nil, stream.closeError != nil,
            !(stream.inboundEnded && stream.sessionCloseCode == NGHTTP2_NO_ERROR.rawValue)
        {
            // Reset or lost connection: what was buffered is void. Except a complete inbound
            // side followed by RST_STREAM(NO_ERROR): a server that answered before reading the
            // whole request (RFC 9113 §8.1: the response must not be discarded).
            dropInbound(stream)
        }
        events: while !stream.isPaused, let event = stream.inbound.first {
            switch event {
            case .request:
                _ = stream.inbound.popFirst()
                route(stream)
            case .headers(let headers):
                guard let delegate = stream._delegate else { break events }
                _ = stream.inbound.popFirst()
                delegate.streamDidReceiveHeaders(stream, headers: headers)
            case .data(let chunk):
                guard let delegate = stream._delegate else { break events }
                _ = stream.inbound.popFirst()
                stream.inboundBufferedBytes -= chunk.readableBytes
                consume(stream.id, chunk.readableBytes)
                delegate.streamDidReceiveData(stream, data: chunk)
            case .end(let trailers):
                guard let delegate = stream._delegate else { break events }
                _ = stream.inbound.popFirst()
                delegate.streamDidReceiveEnd(stream, trailers: trailers)
            }
        }
        if stream.inbound.isEmpty {
            stream.inboundHoldsSlices = false
        } else if stream.isPaused && stream.inboundHoldsSlices {
            compactInbound(stream)
        }
        guard stream.sessionCloseCode != nil else { return }
        if !stream.closeCompleted {
            // The stream is over on the wire: settle what waits on it, even if nobody took
            // the inbound events (they stay readable by a delegate set later).
            stream.closeCompleted = true
            let error = stream.closeError
            let failure = error ?? TransportError(.invalidState, "the stream is closed")
            while let pending = stream.outbound.popFirst() { pending.promise?.fail(failure) }
            stream.outboundBufferedBytes = 0
            if let promise = stream.closePromise {
                if let error { promise.fail(error) } else { promise.succeed() }
            }
        }
        if stream.inbound.isEmpty, !stream.closeDelivered {
            stream.closeDelivered = true
            stream.connection = nil
            let delegate = stream._delegate
            stream._delegate = nil
            delegate?.streamDidClose(stream, error: stream.closeError)
        }
    }

    /// A paused stream keeps its queued chunks until the layer above resumes it: each chunk
    /// that is a slice of a plaintext buffer would keep that whole buffer (other streams'
    /// bytes included, tens of KiB) alive meanwhile, so they are copied, consecutive ones
    /// into one buffer. At most the stream's window is copied, once per pause.
    private func compactInbound(_ stream: TransportStream) {
        var kept = StreamQueue<TransportStream.InboundEvent>()
        var run: ByteBuffer? = nil
        while let event = stream.inbound.popFirst() {
            if case .data(let chunk) = event {
                if run == nil { run = context?.channel.allocator.buffer(capacity: chunk.readableBytes) ?? ByteBuffer() }
                run!.writeImmutableBuffer(chunk)
                continue
            }
            if let data = run {
                kept.append(.data(data))
                run = nil
            }
            kept.append(event)
        }
        if let data = run { kept.append(.data(data)) }
        stream.inbound = kept
        stream.inboundHoldsSlices = false
    }

    private func dropInbound(_ stream: TransportStream) {
        var dropped = 0
        while let event = stream.inbound.popFirst() {
            if case .data(let chunk) = event { dropped += chunk.readableBytes }
        }
        stream.inboundBufferedBytes = 0
        consume(stream.id, dropped)
    }

    /// Stream-level window credit for bytes the layer above has taken (or that were dropped).
    private func consume(_ streamID: Int32, _ count: Int) {
        guard count > 0, let session, !session.isClosed, !tornDown else { return }
        _ = nghttp2_session_consume_stream(session.raw, streamID, count)
    }

    private func route(_ stream: TransportStream) {
        guard case .server(let router) = role else { return }
        if let handler = router.handler(for: stream.path) {
            handler(stream)
        } else {
            sendResponseHeaders(stream, [(":status", "404")], endStream: true)
        }
    }

    // MARK: stream operations (event loop)

    func sendResponseHeaders(_ stream: TransportStream, _ headers: HeaderFields, endStream: Bool) {
        guard let session, isServer, !stream.headersSent, stream.sessionCloseCode == nil else { return }
        stream.headersSent = true
        stream.responseHeaders = headers
        if endStream && stream.outbound.isEmpty {
            stream.outboundFinished = true
            _ = withNameValueArray(headers) { nva, count in
                nghttp2_submit_response(session.raw, stream.id, nva, count, nil)
            }
        } else {
            if endStream { stream.outboundFinished = true }
            var provider = nghttp2_data_provider(source: nghttp2_data_source(ptr: nil), read_callback: nghttp2DataRead)
            _ = withNameValueArray(headers) { nva, count in
                nghttp2_submit_response(session.raw, stream.id, nva, count, &provider)
            }
        }
        scheduleFlush()
    }

    /// Queues a body chunk. With `flushNow`, outside the connection's own reading and
    /// flushing, what the connection has queued is written at once instead of in a turn of
    /// the event loop of its own.
    func write(_ stream: TransportStream, _ data: ByteBuffer, promise: EventLoopPromise<Void>?, flushNow: Bool = false)
    {
        guard enqueueOutbound(stream, data, promise: promise) else { return }
        if flushNow && !processing && !flushing {
            resumeData(stream)
            flushSession()
        } else {
            resumeIfDeferred(stream)
        }
    }

    /// Queues a body chunk for a ``TransportWriteBatch``, which calls ``flushBatch()`` once
    /// for everything it queued on this connection. True when the connection was not yet in
    /// the batch (the batch then remembers it).
    func writeBatched(_ stream: TransportStream, _ data: ByteBuffer, promise: EventLoopPromise<Void>?) -> Bool {
        guard enqueueOutbound(stream, data, promise: promise) else { return false }
        resumeData(stream)
        if processing || flushing {
            // The read or flush under way writes it when it ends.
            return false
        }
        defer { inWriteBatch = true }
        return !inWriteBatch
    }

    /// Whether a ``TransportWriteBatch`` holds this connection for its flush.
    private var inWriteBatch = false

    /// Writes what a ``TransportWriteBatch`` queued: one nghttp2 send, one TLS write, one
    /// socket write for all of it (more only past ``HTTP2Settings/connectionFlushHighWater``).
    func flushBatch() {
        inWriteBatch = false
        if processing || flushing {
            scheduleFlush()
        } else {
            flushSession()
        }
    }

    /// Appends a chunk to the stream's queue; false (the promise failed) when its outbound
    /// side is over.
    private func enqueueOutbound(_ stream: TransportStream, _ data: ByteBuffer, promise: EventLoopPromise<Void>?)
        -> Bool
    {
        guard stream.sessionCloseCode == nil, !stream.outboundFinished, !stream.resetSubmitted else {
            promise?.fail(stream.closeError ?? TransportError(.invalidState, "the stream's outbound side is finished"))
            return false
        }
        stream.outbound.append(PendingWrite(data: data, promise: promise))
        stream.outboundBufferedBytes += data.readableBytes
        outboundPeak = max(outboundPeak, stream.outboundBufferedBytes)
        if stream.outboundBufferedBytes >= settings.streamOutboundHighWater { stream.isWritable = false }
        return true
    }

    func finish(_ stream: TransportStream, trailers: HeaderFields?) {
        guard stream.sessionCloseCode == nil, !stream.outboundFinished else { return }
        if isServer && !stream.headersSent {
            sendResponseHeaders(stream, [(":status", "200")], endStream: false)
        }
        stream.outboundFinished = true
        stream.outboundTrailers = trailers
        resumeIfDeferred(stream)
    }

    func openReceiveWindow(_ stream: TransportStream) {
        guard let session, !session.isClosed, stream.sessionCloseCode == nil, !stream.receiveWindowOpened,
            settings.openedStreamWindow > settings.initialStreamWindow
        else { return }
        stream.receiveWindowOpened = true
        _ = nghttp2_session_set_local_window_size(
            session.raw, UInt8(NGHTTP2_FLAG_NONE.rawValue), stream.id, settings.openedStreamWindow)
        scheduleFlush()
    }

    func reset(_ stream: TransportStream, code: UInt32) {
        guard let session, stream.sessionCloseCode == nil else { return }
        _ = nghttp2_submit_rst_stream(session.raw, UInt8(NGHTTP2_FLAG_NONE.rawValue), stream.id, code)
        // What was queued for the stream is never sent now: release it at once, not when the
        // RST_STREAM gets out (a peer that reads nothing would keep it for the connection's life).
        let failure = TransportError(.streamReset, "the stream was reset (code \(code))")
        while let pending = stream.outbound.popFirst() { pending.promise?.fail(failure) }
        stream.outboundBufferedBytes = 0
        stream.resetSubmitted = true
        scheduleFlush()
    }

    private func resumeIfDeferred(_ stream: TransportStream) {
        resumeData(stream)
        scheduleFlush()
    }

    /// Tells nghttp2 the stream has data again, if it was waiting for some.
    private func resumeData(_ stream: TransportStream) {
        if stream.dataDeferred, let session {
            stream.dataDeferred = false
            _ = nghttp2_session_resume_data(session.raw, stream.id)
        }
    }

    /// Client role: submits a request and returns its stream.
    func openStream(method: String, path: String, headers: HeaderFields, endStream: Bool) throws -> TransportStream {
        guard case .client(let scheme, let authority) = role else {
            throw TransportError(.invalidState, "only a client opens streams")
        }
        guard let session, !session.isClosed, let context, !closing else {
            throw closeError ?? TransportError(.connectionClosed, "the connection is closed")
        }
        guard !peerWentAway, !shuttingDown else {
            throw TransportError(.goingAway, "the connection is going away")
        }
        var all = HeaderFields([(":method", method), (":scheme", scheme), (":authority", authority), (":path", path)])
        for field in headers where !field.name.hasPrefix(":") { all.append(field.name, field.value) }
        let stream = TransportStream(
            id: 0, connection: self, eventLoop: context.eventLoop, isServerSide: false, requestHeaders: all,
            tlsInfo: tlsInfo, remoteAddress: remoteAddress)
        var provider = nghttp2_data_provider(source: nghttp2_data_source(ptr: nil), read_callback: nghttp2DataRead)
        let id = withNameValueArray(all) { nva, count in
            endStream
                ? nghttp2_submit_request(session.raw, nil, nva, count, nil, nil)
                : nghttp2_submit_request(session.raw, nil, nva, count, &provider, nil)
        }
        guard id > 0 else {
            throw TransportError(
                id == NGHTTP2_ERR_STREAM_ID_NOT_AVAILABLE.rawValue ? .goingAway : .http2Protocol,
                "cannot open a stream: \(NGHTTP2Session.describe(id))")
        }
        stream.id = id
        stream.outboundFinished = endStream
        streams.insert(stream, id: id)
        scheduleFlush()
        return stream
    }

    // MARK: idle connections (server role)

    private func armIdleTimer() {
        guard let timeout = settings.idleConnectionTimeout, let context else { return }
        let deadline = (idleSince ?? .now()) + timeout
        idleTimer = context.eventLoop.scheduleTask(deadline: deadline) { [weak self] in self?.idleCheck() }
    }

    private func idleCheck() {
        guard let timeout = settings.idleConnectionTimeout, !tornDown, let session, !session.isClosed else { return }
        if let since = idleSince, streams.count == 0, NIODeadline.now() >= since + timeout {
            idleTimer = nil
            idleClosures += 1
            // GOAWAY NO_ERROR naming the last stream; nghttp2 wants neither read nor write once
            // it is sent, and the flush closes the connection.
            _ = nghttp2_session_terminate_session(session.raw, NGHTTP2_NO_ERROR.rawValue)
            flushSession()
            if let context, !closing {
                closing = true
                context.close(promise: nil)
            }
        } else {
            armIdleTimer()
        }
    }

    // MARK: liveness (both roles)

    private func armLivenessTimer(at deadline: NIODeadline) {
        guard let context else { return }
        livenessTimer = context.eventLoop.scheduleTask(deadline: deadline) { [weak self] in self?.livenessCheck() }
    }

    /// ``HTTP2Settings/liveness``: PINGs a quiet connection, closes one whose PING went
    /// unanswered past the deadline.
    private func livenessCheck() {
        livenessTimer = nil
        guard !tornDown, !closing, let session, !session.isClosed, let context, liveness != nil else { return }
        switch liveness!.step(now: .now(), outputMovedAt: lastSocketProgress) {
        case .wait(let until):
            armLivenessTimer(at: until)
        case .ping(let checkAt):
            _ = nghttp2_submit_ping(session.raw, UInt8(NGHTTP2_FLAG_NONE.rawValue), nil)
            armLivenessTimer(at: checkAt)
            flushSession()
        case .close:
            livenessClosures += 1
            let error = TransportError(
                .timeout, "no PING ACK in \(HTTP2Liveness.format(liveness!.settings.ackDeadline))")
            if closeError == nil { closeError = error }
            closing = true
            // The streams learn it now, not once a close_notify the dead peer never takes has
            // waited for the socket.
            teardown(error: closeError ?? error)
            context.close(promise: nil)
        }
    }

    /// Whether this connection was closed because its PING went unanswered (0 or 1).
    private(set) var livenessClosures = 0
    /// PINGs of ``HTTP2Settings/liveness`` the peer answered.
    var livenessPingsAnswered: Int { liveness?.pingsAnswered ?? 0 }

    /// Whether this connection was closed as idle (0 or 1).
    private(set) var idleClosures = 0
    /// Whether this connection was closed because its peer read nothing (0 or 1).
    private(set) var stalledWriteClosures = 0
    private var stalledWriteTimer: Scheduled<Void>?
    /// The last time the connection's output was seen moving: it became writable or not, or
    /// (while it cannot write) the peer's TCP acknowledged more bytes. A slow reader keeps
    /// this moving even while the socket's buffer drains in the kernel's large steps (a
    /// socket becomes writable again only once a third of its send buffer is free).
    private(set) var lastSocketProgress = NIODeadline.now()
    private var socketProgressTimer: Scheduled<Void>?
    private var acknowledgedBytes: UInt64?
    /// Whether the connection's output waits for its socket (the peer reads slower than we write).
    var waitsForSocket: Bool { context.map { !$0.channel.isWritable } ?? false }
    /// The last WINDOW_UPDATE of at least ``smallestProductiveWindowUpdate`` from the peer for
    /// a stream: the peer's reader took that much of what it was sent.
    private(set) var lastWindowUpdate = NIODeadline.now()
    /// Whether the connection holds output that waits for the peer: body bytes its streams
    /// queued that HTTP/2 has not framed (the peer's windows are used up), or framed bytes
    /// waiting for the socket.
    var holdsOutputForPeer: Bool { waitsForSocket || streams.all.contains { $0.outboundBufferedBytes > 0 } }

    // MARK: shutdown

    /// GOAWAY and a graceful drain: no new streams; open ones finish; then the connection
    /// closes (forcibly after ``HTTP2Settings/drainTimeout``).
    func initiateGracefulShutdown() {
        guard let session, !shuttingDown, let context else {
            if session == nil { context?.close(promise: nil) }
            return
        }
        shuttingDown = true
        if isServer {
            // Shutdown notice, then a PING: once it is answered, the final GOAWAY names the last stream.
            _ = nghttp2_submit_shutdown_notice(session.raw)
            _ = nghttp2_submit_ping(session.raw, UInt8(NGHTTP2_FLAG_NONE.rawValue), nil)
            awaitingShutdownPing = true
        } else {
            _ = nghttp2_submit_goaway(
                session.raw, UInt8(NGHTTP2_FLAG_NONE.rawValue), 0, NGHTTP2_NO_ERROR.rawValue, nil, 0)
        }
        let channel = context.channel
        drainTimer = context.eventLoop.scheduleTask(in: settings.drainTimeout) {
            channel.close(promise: nil)
        }
        scheduleFlush()
    }

    // MARK: flushing

    func scheduleFlush() {
        guard !processing, !flushing, !flushScheduled, let context else { return }
        flushScheduled = true
        context.eventLoop.execute {
            self.flushScheduled = false
            self.flushSession()
        }
    }

    /// Serialises what nghttp2 has queued, writes it in batches, then runs what the
    /// callbacks deferred (write promises, writability, deliveries) and repeats while that
    /// produced more to send.
    private func flushSession() {
        guard let session, !session.isClosed, !tornDown, let context, !flushing else { return }
        flushing = true
        var rounds = 0
        while true {
            rounds += 1
            var out: ByteBuffer? = nil
            var frames = 0
            var blocked = false
            while true {
                if tornDown { break }
                if !context.channel.isWritable {
                    blocked = true
                    break
                }
                var pointer: UnsafePointer<UInt8>? = nil
                let count = nghttp2_session_mem_send(session.raw, &pointer)
                if count < 0 {
                    flushing = false
                    fatal(TransportError(.http2Protocol, "nghttp2: \(NGHTTP2Session.describe(Int32(count)))"))
                    return
                }
                if count == 0 { break }
                frames += 1
                if out == nil { out = context.channel.allocator.buffer(capacity: max(count, 4096)) }
                out!.writeBytes(UnsafeRawBufferPointer(start: pointer, count: count))
                if out!.readableBytes >= settings.connectionFlushHighWater {
                    writeOutput(out!, frames: frames, context: context)
                    out = nil
                    frames = 0
                }
            }
            if let out { writeOutput(out, frames: frames, context: context) }
            let hadCallbacks = !completedWrites.isEmpty || !becameWritable.isEmpty || !deliveryQueue.isEmpty
            runDeferredCallbacks()
            if tornDown || blocked || !hadCallbacks || nghttp2_session_want_write(session.raw) == 0 || rounds > 64 {
                break
            }
        }
        flushing = false
        if tornDown {
            releaseSessionIfTornDown()
            return
        }
        if nghttp2_session_want_read(session.raw) == 0 && nghttp2_session_want_write(session.raw) == 0 && !closing {
            closing = true
            context.close(promise: nil)
        }
    }

    /// Hands one buffer of serialized frames to TLS (one `SSL_write`, one socket write).
    private func writeOutput(_ out: ByteBuffer, frames: Int, context: ChannelHandlerContext) {
        outputWrites += 1
        TransportOutputCounters.countFlush(frames: frames)
        context.writeAndFlush(wrapOutboundOut(out), promise: nil)
    }

    /// Buffers of frames this connection handed to TLS so far: each is one TLS write and one
    /// socket write (for tests and measurements).
    private(set) var outputWrites = 0

    private func runDeferredCallbacks() {
        if !completedWrites.isEmpty {
            let promises = completedWrites
            completedWrites.removeAll(keepingCapacity: true)
            for promise in promises { promise.succeed() }
        }
        if !becameWritable.isEmpty {
            let streams = becameWritable
            becameWritable.removeAll(keepingCapacity: true)
            for stream in streams where stream.isWritable && !stream.closeDelivered {
                stream._delegate?.streamWritabilityDidChange(stream, isWritable: true)
            }
        }
        deliverPending()
    }
}
