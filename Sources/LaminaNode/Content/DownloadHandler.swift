import Foundation
import LaminaModel
import LaminaStore
import LaminaTransport
import LaminaWire
import NIOCore

/// Who downloads content: a user of this node (CONTENT.md §5) or a peer node fetching it for
/// its own users (CONTENT.md §9).
enum ContentReader: Sendable {
    case user(UserID)
    case peer(NodeID)
    /// The holder of a signed download URL the Server API handed out (CONTENT.md §10).
    case signedURL
}

/// One `GET /v1/content/<uuid>` (CONTENT.md §5): authorization, one optional byte range, then
/// the file read in chunks on the content threads, each chunk written only while the stream is
/// writable, so a download never buffers the file and never crowds out the connection's other
/// streams (HTTP/2 flow control and nghttp2's scheduling share the connection). Event loop only.
final class DownloadHandler: ContentBodyHandler, @unchecked Sendable {
    private let exchange: ContentExchange
    private let service: ContentService
    private let fd: Int32
    private var position: UInt64
    private let end: UInt64
    private var reading = false
    private var done = false
    private var fdClosed = false
    private let allocator = ByteBufferAllocator()

    private init(exchange: ContentExchange, service: ContentService, fd: Int32, lower: UInt64, end: UInt64) {
        self.exchange = exchange
        self.service = service
        self.fd = fd
        self.position = lower
        self.end = end
    }

    /// How long a download of content this node is fetching from a peer waits for it before it
    /// is answered `409 content-not-ready` with `retry-after` (CONTENT.md §9).
    static let peerFetchWait: Duration = .seconds(20)

    private enum Lookup: Sendable {
        case ready(ContentUpload)
        /// A replicated message references it and this node is still fetching it from a peer.
        case fetching
    }

    static func start(
        exchange: ContentExchange, service: ContentService, id: ContentID, reader: ContentReader, waited: Bool = false
    ) {
        let loop = exchange.eventLoop
        let rangeHeader = exchange.stream.requestHeaders["range"]
        service.read(on: loop) { r -> Lookup in
            guard let upload = try r.upload(id) else { throw ContentFailure(.contentNotFound, "no content \(id)") }
            switch reader {
            case .user(let user):
                if upload.owner != user {
                    guard try r.maySeeContent(id, user: user) else {
                        throw ContentFailure(.forbidden, "\(user) may not see a message referencing content \(id)")
                    }
                }
                if upload.state != .complete, try r.isContentReferenced(id) { return .fetching }
            case .signedURL:
                break  // the node signed the URL for this content (CONTENT.md §10)
            case .peer:
                // A peer fetches content a message references, nothing else (CONTENT.md §9).
                guard try r.isContentReferenced(id) else {
                    throw ContentFailure(.contentNotFound, "no message here references content \(id)")
                }
            }
            guard upload.state == .complete else {
                throw ContentFailure(.contentNotReady, "content \(id) is not completely uploaded")
            }
            return .ready(upload)
        }.whenComplete { result in
            switch result {
            case .failure(let error):
                exchange.fail(ContentFailure.from(error))
            case .success(.fetching):
                guard !waited else {
                    exchange.fail(
                        ContentFailure(
                            .contentNotReady, "this node is still fetching content \(id) from a peer",
                            headers: ["retry-after": "1"]))
                    return
                }
                Task {
                    await service.arrivals.wait(for: id, timeout: Self.peerFetchWait)
                    loop.execute {
                        guard !exchange.isClosed else { return }
                        start(exchange: exchange, service: service, id: id, reader: reader, waited: true)
                    }
                }
            case .success(.ready(let upload)):
                let size = upload.declaredSize
                let digest = Hex.encode(upload.sha256)
                var headers: [(String, String)] = [
                    ("content-type", "application/octet-stream"), ("accept-ranges", "bytes"), ("etag", "\"\(digest)\""),
                    ("lamina-content-sha256", digest),
                ]
                let range = ByteRangeRequest(header: rangeHeader, size: size)
                let status: Int
                let lower: UInt64
                let upper: UInt64  // exclusive
                switch range {
                case .unsatisfiable:
                    headers.append(("content-range", "bytes */\(size)"))
                    exchange.respond(status: 416, headers: headers)
                    return
                case .whole:
                    (status, lower, upper) = (200, 0, size)
                case .range(let a, let b):
                    (status, lower, upper) = (206, a, b + 1)
                    headers.append(("content-range", "bytes \(a)-\(b)/\(size)"))
                }
                headers.insert(("content-length", "\(upper - lower)"), at: 0)
                let responseHeaders = headers
                let files = service.files
                service.io(on: loop) { try files.openComplete(id) }.whenComplete { opened in
                    switch opened {
                    case .failure(let error):
                        service.logger.error(
                            "cannot open content", metadata: ["content": "\(id)", "error": "\(error)"])
                        exchange.fail(ContentFailure(.internalError, "cannot open the content's file: \(error)"))
                    case .success(let (fd, fileSize)):
                        guard fileSize == size else {
                            _ = service.io(on: loop) { ContentFiles.closeFile(fd) }
                            exchange.fail(
                                ContentFailure(
                                    .internalError, "content \(id) holds \(fileSize) bytes, \(size) recorded"))
                            return
                        }
                        guard !exchange.isClosed else {
                            _ = service.io(on: loop) { ContentFiles.closeFile(fd) }
                            return
                        }
                        var response: HeaderFields = [(":status", "\(status)")]
                        for (name, value) in responseHeaders { response.append(name, value) }
                        let handler = DownloadHandler(
                            exchange: exchange, service: service, fd: fd, lower: lower, end: upper)
                        exchange.stream.sendHeaders(response, endStream: upper == lower)
                        if upper == lower {
                            handler.finishReading()
                        } else {
                            exchange.handler = handler
                            handler.readNext()
                        }
                    }
                }
            }
        }
    }

    private func readNext() {
        guard !reading, !done, position < end, exchange.stream.isWritable else { return }
        reading = true
        let count = Int(min(UInt64(service.settings.downloadChunkBytes), end - position))
        let fd = self.fd
        let at = position
        let allocator = self.allocator
        service.io(on: exchange.eventLoop) {
            try ContentFiles.readChunk(fd, at: at, count: count, allocator: allocator)
        }
        .whenComplete { [self] result in
            reading = false
            guard !done else {
                finishReading()
                return
            }
            switch result {
            case .failure(let error):
                service.logger.error("content read failed", metadata: ["error": "\(error)"])
                exchange.stream.reset(code: 0x2)  // INTERNAL_ERROR
                finishReading()
            case .success(let chunk):
                guard chunk.readableBytes == count else {
                    service.logger.error("content file shorter than recorded")
                    exchange.stream.reset(code: 0x2)
                    finishReading()
                    return
                }
                position += UInt64(count)
                exchange.stream.write(chunk, promise: nil)
                if position == end {
                    exchange.stream.finish()
                    finishReading()
                } else {
                    readNext()
                }
            }
        }
    }

    /// Stops reading and closes the file (once no read is in flight).
    private func finishReading() {
        done = true
        guard !reading, !fdClosed else { return }
        fdClosed = true
        let fd = self.fd
        _ = service.io(on: exchange.eventLoop) { ContentFiles.closeFile(fd) }
    }

    // MARK: ContentBodyHandler

    func receive(_ data: ByteBuffer) {}
    func bodyEnded() {}
    func writable() { readNext() }
    func closed(error: TransportError?) { finishReading() }
}
