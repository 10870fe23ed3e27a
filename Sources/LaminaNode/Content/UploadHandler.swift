import Foundation
import LaminaModel
import LaminaStore
import LaminaTransport
import LaminaWire
import NIOCore

/// The open partial file of one upload and its running SHA-256. Touched only by that upload's
/// disk jobs, which run one at a time.
final class UploadFile: @unchecked Sendable {
    let fd: Int32
    let hasher: SHA256Hasher
    init(fd: Int32, hasher: SHA256Hasher) {
        self.fd = fd
        self.hasher = hasher
    }
}

/// One `PUT /v1/content/<uuid>` (CONTENT.md §3) after its headers and session were accepted.
///
/// The body goes to the partial file through the content threads, one write job at a time;
/// while more than ``ContentServiceSettings/uploadBufferBytes`` wait for the disk the stream stops
/// reading, so HTTP/2 flow control stalls the sender and memory stays bounded. The hash is
/// updated in the write jobs. Bytes count as held only once fsynced and recorded: at the end of
/// the body, every ``ContentServiceSettings/uploadSyncIntervalBytes``, and when the stream is reset or
/// the connection drops. Event loop only (disk work hops to the content threads).
final class UploadHandler: ContentBodyHandler, @unchecked Sendable {
    private let exchange: ContentExchange
    private let service: ContentService
    private let id: ContentID
    private let user: UserID
    private let request: UploadRequestHeaders
    private var loop: EventLoop { exchange.eventLoop }

    private var file: UploadFile?
    /// Bytes of the content taken from the stream (offset + body so far, capped at the size).
    private var accepted: UInt64
    /// Bytes written to the file.
    private var written: UInt64
    /// Bytes fsynced (and recorded, or being recorded).
    private var synced: UInt64
    private var pending: [ByteBuffer] = []
    private var pendingBytes = 0
    private var writing = false
    private var paused = true
    private var ended = false
    private var overflow = false
    private var streamGone = false
    private var concluding = false
    /// No body byte arrived for the stall timeout (answered `408 upload-stalled`).
    private var stalled = false
    /// When the stream last delivered body bytes (or the node last stopped waiting for the disk).
    private var lastProgress = NIODeadline.now()
    private var stallCheck: Scheduled<Void>?

    private init(
        exchange: ContentExchange, service: ContentService, id: ContentID, user: UserID, request: UploadRequestHeaders,
        offset: UInt64
    ) {
        self.exchange = exchange
        self.service = service
        self.id = id
        self.user = user
        self.request = request
        self.accepted = offset
        self.written = offset
        self.synced = offset
    }

    /// Admission (concurrent uploads), the record (new: offset 0 and quota; known: owner, size,
    /// digest, offset), then the file opened at the offset and the durable prefix re-hashed.
    static func start(
        exchange: ContentExchange, service: ContentService, id: ContentID, user: UserID, request: UploadRequestHeaders
    ) {
        let loop = exchange.eventLoop
        guard !exchange.isClosed else { return }  // the client went away during the session lookup
        switch service.active.begin(id, user: user, limit: service.settings.maxConcurrentUploadsPerUser) {
        case .admitted: break
        case .contentBusy:
            exchange.fail(
                ContentFailure(
                    .overloaded, "content \(id) is being uploaded on another stream; retry once it closed",
                    headers: ["retry-after": "1"]))
            return
        case .userBusy:
            exchange.fail(
                ContentFailure(
                    .overloaded, "at most \(service.settings.maxConcurrentUploadsPerUser) uploads of one user at once",
                    headers: ["retry-after": "\(service.settings.retryAfterSeconds)"]))
            return
        }
        let quota = service.settings.quotaBytes
        let now = Timestamp.now()
        service.write(on: loop) { tx -> ContentUpload in
            let existing = try tx.read.upload(id)
            if let existing {
                let held = ["lamina-upload-offset": "\(existing.receivedBytes)"]
                guard existing.owner == user else {
                    throw ContentFailure(.forbidden, "content \(id) belongs to another user")
                }
                guard existing.declaredSize == request.size, existing.sha256 == request.sha256 else {
                    throw ContentFailure(
                        .uploadMismatch,
                        "content \(id) was declared with \(existing.declaredSize) bytes and another digest",
                        headers: held)
                }
                if existing.state == .complete { return existing }
            } else if request.offset != 0 {
                throw ContentFailure(
                    .uploadOffsetMismatch, "the node holds no byte of \(id)", headers: ["lamina-upload-offset": "0"])
            }
            // CONTENT.md §7: the user's other uploads (held bytes, or the declared size of those
            // streaming now) plus this one's declared size. Writes are serial, so two
            // admissions of one user never miss each other's reservation.
            let streaming = service.active.reservations(of: user, excluding: id)
            let used = try tx.read.contentBytes(of: user, excluding: streaming.ids.union([id])) + streaming.bytes
            guard used <= quota, request.size <= quota - used else {
                throw ContentFailure(
                    .quotaExceeded,
                    "\(used) bytes stored or reserved, \(request.size) more would exceed the quota of \(quota)",
                    headers: existing.map { ["lamina-upload-offset": "\($0.receivedBytes)"] } ?? [:])
            }
            service.active.reserve(id, declaredSize: request.size)
            if let existing { return existing }
            let upload = ContentUpload(
                id: id, owner: user, declaredSize: request.size, sha256: request.sha256, state: .uploading,
                createdAt: now)
            try tx.createUpload(upload)
            return upload
        }.whenComplete { result in
            switch result {
            case .failure(let error):
                service.active.end(id)
                exchange.fail(ContentFailure.from(error))
            case .success(let upload):
                let held = ContentEndpoint.uploadHeaders(upload)
                if upload.state == .complete {
                    service.active.end(id)
                    exchange.respond(status: 200, headers: held, json: ContentEndpoint.completionJSON(upload))
                } else if upload.receivedBytes != request.offset {
                    service.active.end(id)
                    exchange.fail(
                        ContentFailure(
                            .uploadOffsetMismatch,
                            "the node holds \(upload.receivedBytes) bytes of \(id), not \(request.offset)"),
                        headers: held)
                } else {
                    UploadHandler(
                        exchange: exchange, service: service, id: id, user: user, request: request,
                        offset: request.offset
                    ).open()
                }
            }
        }
    }

    private func open() {
        let files = service.files
        let id = self.id
        let offset = accepted
        service.io(on: loop) { () -> UploadFile in
            let fd = try files.openPartial(id, at: offset)
            do {
                let hasher = try SHA256Hasher()
                try files.hashPartial(id, length: offset, into: hasher)
                return UploadFile(fd: fd, hasher: hasher)
            } catch {
                ContentFiles.closeFile(fd)
                throw error
            }
        }.whenComplete { [self] result in
            switch result {
            case .failure(let error):
                service.active.end(id)
                service.logger.error(
                    "cannot open an upload's file", metadata: ["content": "\(id)", "error": "\(error)"])
                exchange.fail(ContentFailure(.internalError, "cannot open the upload's file: \(error)"))
            case .success(let file):
                self.file = file
                guard !exchange.isClosed else {
                    // The client went away while the file was being opened.
                    concluding = true
                    let fd = file.fd
                    _ = service.io(on: loop) { ContentFiles.closeFile(fd) }
                    service.active.end(id)
                    return
                }
                exchange.handler = self
                paused = false
                exchange.stream.openReceiveWindow()
                exchange.stream.resumeInbound()
                lastProgress = .now()
                armStallCheck()
            }
        }
    }

    // MARK: ContentBodyHandler

    func receive(_ data: ByteBuffer) {
        guard !concluding, !overflow else { return }
        lastProgress = .now()
        var data = data
        let room = request.size - accepted
        if UInt64(data.readableBytes) > room {
            data = data.getSlice(at: data.readerIndex, length: Int(room))!
            overflow = true
        }
        if data.readableBytes > 0 {
            accepted += UInt64(data.readableBytes)
            pendingBytes += data.readableBytes
            pending.append(data)
        }
        if !paused, pendingBytes >= service.settings.uploadBufferBytes {
            paused = true
            exchange.stream.pauseInbound()
        }
        pump()
    }

    func bodyEnded() {
        ended = true
        service.active.settle(id)
        pump()
    }

    func writable() {}

    func closed(error: TransportError?) {
        streamGone = true
        service.active.settle(id)
        pump()
    }

    // MARK: stalls

    private var stallTimeout: TimeAmount { .seconds(Int64(service.settings.uploadStallTimeoutSeconds)) }

    private func armStallCheck() {
        stallCheck = loop.scheduleTask(deadline: lastProgress + stallTimeout) { [self] in stallCheckFired() }
    }

    /// A stream that delivers nothing while the node is ready to read ends like a body that
    /// ended, answered `408 upload-stalled`; while the node waits for the disk it is not stalled.
    private func stallCheckFired() {
        stallCheck = nil
        guard !concluding, !ended, !streamGone, !overflow else { return }
        if paused { lastProgress = .now() }
        guard NIODeadline.now() - lastProgress >= stallTimeout else {
            armStallCheck()
            return
        }
        stalled = true
        ended = true
        exchange.stream.pauseInbound()
        service.active.settle(id)
        pump()
    }

    // MARK: writing

    private func pump() {
        guard !concluding, let file else { return }
        guard !writing else { return }
        guard !pending.isEmpty else {
            if ended || overflow || streamGone { conclude() }
            return
        }
        writing = true
        let buffers = pending
        let count = UInt64(pendingBytes)
        pending.removeAll(keepingCapacity: true)
        pendingBytes = 0
        let syncNow = written + count - synced >= UInt64(service.settings.uploadSyncIntervalBytes)
        service.io(on: loop) {
            for buffer in buffers {
                try ContentFiles.writeAll(file.fd, buffer)
                try file.hasher.update(buffer)
            }
            if syncNow { try ContentFiles.syncFile(file.fd) }
        }.whenComplete { [self] result in
            writing = false
            switch result {
            case .failure(let error):
                failed(error)
                return
            case .success:
                written += count
                if syncNow {
                    synced = written
                    record(written)
                }
            }
            if paused, !streamGone, pendingBytes < service.settings.uploadBufferBytes / 2 {
                paused = false
                exchange.stream.resumeInbound()
            }
            pump()
        }
    }

    /// Records `bytes` as held (after their fsync); storage failures are logged (the record then
    /// lags the file, which the next start-up cuts back to the record).
    private func record(_ bytes: UInt64) {
        let id = self.id
        let now = Timestamp.now()
        service.write(on: loop) { tx in try Self.recordHeld(tx, id, bytes, at: now) }
            .whenFailure { [service] error in
                service.logger.warning(
                    "cannot record upload progress", metadata: ["content": "\(id)", "error": "\(error)"])
            }
    }

    /// Records `bytes` of an unfinished upload as held, unless the content is complete by now:
    /// on a shared store another node may have finished it (a resume there) before this node,
    /// draining the stream it lost, records what it had.
    private static func recordHeld(_ tx: StorageTransaction, _ id: ContentID, _ bytes: UInt64, at now: Timestamp) throws
    {
        if try tx.read.upload(id)?.state == .complete { return }
        try tx.updateUpload(id, receivedBytes: bytes, state: .uploading, at: now)
    }

    private enum Outcome: Sendable {
        case partial
        case complete
        case mismatch([UInt8])
    }

    /// The body ended (or ran past the size, or the stream went away) and every byte taken is
    /// written: fsync, then record what is held, or verify, promote and record completion.
    private func conclude() {
        guard !concluding, let file else { return }
        concluding = true
        exchange.handler = nil
        stallCheck?.cancel()
        stallCheck = nil
        let complete = written == request.size
        let expected = request.sha256
        let files = service.files
        let id = self.id
        let size = written
        let now = Timestamp.now()
        service.io(on: loop) { () -> Outcome in
            defer { ContentFiles.closeFile(file.fd) }
            try ContentFiles.syncFile(file.fd)
            guard complete else { return .partial }
            let digest = try file.hasher.finalize()
            guard digest == expected else {
                files.remove(id)
                return .mismatch(digest)
            }
            try files.promote(id)
            return .complete
        }.flatMap { [service] outcome -> EventLoopFuture<Outcome> in
            service.write(on: self.loop) { tx -> Outcome in
                switch outcome {
                case .partial: try Self.recordHeld(tx, id, size, at: now)
                case .complete: try tx.updateUpload(id, receivedBytes: size, state: .complete, at: now)
                case .mismatch: try tx.deleteUpload(id)
                }
                return outcome
            }
        }.whenComplete { [self] result in
            service.active.end(id)
            if case .failure(let error) = result {
                if let storage = error as? StorageError, storage.code == .notFound {
                    exchange.fail(ContentFailure(.contentNotFound, "content \(id) was deleted during the upload"))
                } else {
                    service.logger.error(
                        "cannot finish an upload", metadata: ["content": "\(id)", "error": "\(error)"])
                    exchange.fail(ContentFailure(.internalError, "cannot finish the upload: \(error)"))
                }
                return
            }
            guard case .success(let outcome) = result, !streamGone else { return }
            let upload = ContentUpload(
                id: id, owner: user, declaredSize: request.size, sha256: request.sha256, receivedBytes: size,
                state: complete ? .complete : .uploading, createdAt: now)
            let held = ContentEndpoint.uploadHeaders(upload)
            switch outcome {
            case .mismatch(let digest):
                exchange.fail(
                    ContentFailure(
                        .contentDigestMismatch,
                        "the bytes hash to \(Hex.encode(digest)), the upload declared \(Hex.encode(expected)); the upload is deleted",
                        headers: ["lamina-upload-offset": "0"]))
            case _ where overflow:
                exchange.fail(
                    ContentFailure(
                        .uploadTooLong,
                        "the body runs past the declared size of \(request.size) bytes; the bytes up to it are kept"),
                    headers: held)
            case .partial where stalled:
                exchange.fail(
                    ContentFailure(
                        .uploadStalled,
                        "no body byte for \(service.settings.uploadStallTimeoutSeconds) s; the \(size) bytes held are kept, resume from lamina-upload-offset"
                    ),
                    headers: held)
            case .complete:
                exchange.respond(status: 201, headers: held, json: ContentEndpoint.completionJSON(upload))
            case .partial:
                exchange.respond(status: 202, headers: held)
            }
        }
    }

    /// A disk write failed: keep what was synced, answer 500.
    private func failed(_ error: Error) {
        guard let file, !concluding else { return }
        concluding = true
        exchange.handler = nil
        stallCheck?.cancel()
        stallCheck = nil
        service.active.end(id)
        let fd = file.fd
        _ = service.io(on: loop) { ContentFiles.closeFile(fd) }
        service.logger.error("an upload's write failed", metadata: ["content": "\(id)", "error": "\(error)"])
        exchange.fail(
            ContentFailure(
                .internalError, "cannot write the upload: \(error)", headers: ["lamina-upload-offset": "\(synced)"]))
    }
}
