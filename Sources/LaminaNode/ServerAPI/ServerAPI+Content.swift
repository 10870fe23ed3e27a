import Foundation
import LaminaModel
import LaminaStore
import LaminaTransport
import LaminaWire
import NIOCore

/// Rich content through the Server API (Protocol/CONTENT.md §10), in the shape of Layer's
/// Platform API: `POST /content` with `Upload-Content-Type` and `Upload-Content-Length` answers a
/// content id and an `upload_url`; the backend PUTs the bytes there (resumable, in chunks with
/// `Content-Range`, as Layer's upload URLs took them); a message part then references the
/// content (`"content": {"id": …, "size": …}`). Content lives in the node's content store, owned
/// by ``ServerAPI/contentOwner``, under the same size limit, quota and concurrent-upload limit as
/// a device's uploads.
extension ServerAPI {
    /// The owner of content uploaded through the Server API (a reserved system id: no user has it).
    static let contentOwner = UserID(stringLiteral: UserID.systemSenderPrefix + "server-api")

    /// POST /content: declares an upload; 201 with the content object (`upload_url`).
    func createContent(_ r: ServerAPIRequest) async throws -> HTTPResponse {
        let content = try contentService()
        let size = try UploadDeclaration.size(of: r.http)
        let id = ContentID(uuid: try r.requestID() ?? UUID())
        let owner = Self.contentOwner
        let quota = content.settings.quotaBytes
        let now = Timestamp.now()
        let upload = try await engine.store.write { tx -> ContentUpload in
            if let existing = try tx.read.upload(id) {
                // A repeated request (same If-None-Match) finds the upload it declared.
                guard existing.owner == owner, existing.declaredSize == size else {
                    throw ServerAPIError.idInUse("content id \(id.uuid.uuidString.lowercased()) is in use")
                }
                return existing
            }
            let streaming = content.active.reservations(of: owner, excluding: id)
            let used = try tx.read.contentBytes(of: owner, excluding: streaming.ids) + streaming.bytes
            guard used <= quota, size <= quota - used else {
                throw ServerAPIError.quotaExceeded(used: used, size: size, quota: quota)
            }
            let upload = ContentUpload(
                id: id, owner: owner, declaredSize: size, sha256: [UInt8](repeating: 0, count: 32), state: .uploading,
                createdAt: now)
            try tx.createUpload(upload)
            return upload
        }
        let object = contentObject(upload, r)
        return ServerAPIJSON.response(201, object, extraHeaders: [("location", object.refresh_url)])
    }

    /// GET /content/:content_id: the content object with fresh URLs (Layer's `refresh_url`).
    func getContent(_ r: ServerAPIRequest) async throws -> HTTPResponse {
        _ = try contentService()
        let upload = try await apiUpload(try r.contentID())
        return ServerAPIJSON.response(200, contentObject(upload, r))
    }

    /// PUT /content/:content_id (the `upload_url`): bytes of the content. `Content-Range: bytes
    /// a-b/size` places a chunk (absent: the body starts at 0); `bytes */size` with no body asks
    /// what the node holds. A chunk must start at the bytes held. 308 with `Range: bytes=0-<held−1>`
    /// while incomplete, 201 once the last byte is in (200 for an upload complete before).
    func uploadContent(_ r: ServerAPIRequest) async throws -> HTTPResponse {
        let content = try contentService()
        let id = try r.contentID()
        if r.http.bodyTooLarge { throw ServerAPIError.requestTooLarge(ServerAPILimits.maxUploadChunkBytes) }
        var upload = try await apiUpload(id)
        let chunk = r.http.body
        let range = try Self.contentRange(
            r.http.headers["content-range"], bodyBytes: chunk.readableBytes, size: upload.declaredSize)
        if upload.state == .complete { return ServerAPIJSON.response(200, contentObject(upload, r)) }
        guard let start = range else { return incomplete(upload, r) }
        guard start == upload.receivedBytes else {
            var error = ServerAPIError.conflict(
                "the chunk starts at byte \(start); the node holds \(upload.receivedBytes) bytes of this content: continue from there",
                data: ["uploaded": .integer(Int64(upload.receivedBytes)), "size": .integer(Int64(upload.declaredSize))])
            error.headers = Self.rangeHeader(upload.receivedBytes)
            throw error
        }
        guard chunk.readableBytes > 0 else { return incomplete(upload, r) }

        // One request at a time works on a content; the owner's uploads count as a user's do.
        let owner = Self.contentOwner
        switch content.active.begin(id, user: owner, limit: content.settings.maxConcurrentUploadsPerUser) {
        case .admitted: break
        case .contentBusy, .userBusy: throw ServerAPIError.busy(content.settings.retryAfterSeconds)
        }
        do {
            upload = try await writeChunk(chunk, at: start, of: id, content: content)
            content.active.end(id)
        } catch {
            content.active.end(id)
            throw error
        }
        guard upload.state == .complete else { return incomplete(upload, r) }
        return ServerAPIJSON.response(201, contentObject(upload, r))
    }

    /// Appends `chunk` at `start` (the bytes held): quota checked and the declared size reserved
    /// as for a device's upload; the bytes written, synced and recorded; on the last byte the
    /// whole content hashed, promoted and recorded complete with its digest.
    private func writeChunk(_ chunk: ByteBuffer, at start: UInt64, of id: ContentID, content: ContentService)
        async throws -> ContentUpload
    {
        let owner = Self.contentOwner
        let quota = content.settings.quotaBytes
        let upload = try await engine.store.write { tx -> ContentUpload in
            guard let upload = try tx.read.upload(id), upload.owner == owner else {
                throw ServerAPIError.notFound("no content \(id.uuid.uuidString.lowercased())")
            }
            guard upload.receivedBytes == start else {
                throw ServerAPIError.conflict(
                    "the node holds \(upload.receivedBytes) bytes of this content",
                    data: ["uploaded": .integer(Int64(upload.receivedBytes))])
            }
            let streaming = content.active.reservations(of: owner, excluding: id)
            let used = try tx.read.contentBytes(of: owner, excluding: streaming.ids.union([id])) + streaming.bytes
            guard used <= quota, upload.declaredSize <= quota - used else {
                throw ServerAPIError.quotaExceeded(used: used, size: upload.declaredSize, quota: quota)
            }
            content.active.reserve(id, declaredSize: upload.declaredSize)
            return upload
        }
        let held = start + UInt64(chunk.readableBytes)
        let complete = held == upload.declaredSize
        let files = content.files
        let digest = try await content.threadPool.runIfActive { () -> [UInt8]? in
            let fd = try files.openPartial(id, at: start)
            do {
                try ContentFiles.writeAll(fd, chunk)
                try ContentFiles.syncFile(fd)
                ContentFiles.closeFile(fd)
            } catch {
                ContentFiles.closeFile(fd)
                throw error
            }
            guard complete else { return nil }
            let hasher = try SHA256Hasher()
            try files.hashPartial(id, length: held, into: hasher)
            let digest = try hasher.finalize()
            try files.promote(id)
            return digest
        }
        let now = Timestamp.now()
        return try await engine.store.write { tx -> ContentUpload in
            if let digest {
                try tx.completeUpload(id, sha256: digest, at: now)
            } else {
                try tx.updateUpload(id, receivedBytes: held, state: .uploading, at: now)
            }
            guard let stored = try tx.read.upload(id) else {
                throw ServerAPIError.notFound("content \(id) was deleted during the upload")
            }
            return stored
        }
    }

    /// GET /content/:content_id/data (the `download_url`, signed, or with the bearer token): the
    /// bytes of complete content, over HTTP/1.1 or HTTP/2, read from the file chunk by chunk as
    /// the client takes them. Incomplete content is 409 conflict.
    func downloadContent(_ r: ServerAPIRequest) async throws -> HTTPResponse {
        let content = try contentService()
        let id = try r.contentID()
        guard let upload = try await engine.store.read({ reader in try reader.upload(id) }) else {
            throw ServerAPIError.notFound("no content \(id.uuid.uuidString.lowercased())")
        }
        guard upload.state == .complete else {
            throw ServerAPIError.conflict(
                "content \(id.uuid.uuidString.lowercased()) is not completely uploaded (\(upload.receivedBytes) of \(upload.declaredSize) bytes)",
                data: ["uploaded": .integer(Int64(upload.receivedBytes)), "size": .integer(Int64(upload.declaredSize))])
        }
        return content.downloadResponse(upload)
    }

    private func incomplete(_ upload: ContentUpload, _ r: ServerAPIRequest) -> HTTPResponse {
        ServerAPIJSON.response(308, contentObject(upload, r), extraHeaders: Self.rangeHeader(upload.receivedBytes))
    }

    /// `Range: bytes=0-<held − 1>` (none while nothing is held), as resumable uploads answer.
    static func rangeHeader(_ held: UInt64) -> [(String, String)] {
        held > 0 ? [("range", "bytes=0-\(held - 1)")] : []
    }

    /// The chunk's first byte from `Content-Range` (`bytes a-b/size`, or `bytes */size` for a
    /// status query: nil); absent, the body starts at 0.
    static func contentRange(_ header: String?, bodyBytes: Int, size: UInt64) throws(ServerAPIError) -> UInt64? {
        guard let header else {
            guard UInt64(bodyBytes) <= size else {
                throw .invalidHeader(
                    400, "Content-Length", "the body is longer than the content's size (\(size) bytes)")
            }
            return 0
        }
        let bad = ServerAPIError.invalidHeader(
            400, "Content-Range", "Content-Range must be `bytes <first>-<last>/<size>` or `bytes */<size>`")
        let text = header.trimmingCharacters(in: .whitespaces)
        guard text.hasPrefix("bytes ") else { throw bad }
        let spec = text.dropFirst("bytes ".count).split(separator: "/", omittingEmptySubsequences: false)
        guard spec.count == 2 else { throw bad }
        if spec[1] != "*" {
            guard let total = UInt64(spec[1]) else { throw bad }
            guard total == size else {
                throw .invalidHeader(
                    400, "Content-Range", "the content was declared with \(size) bytes, Content-Range says \(total)")
            }
        }
        if spec[0] == "*" {
            guard bodyBytes == 0 else { throw bad }
            return nil
        }
        let bounds = spec[0].split(separator: "-", omittingEmptySubsequences: false)
        guard bounds.count == 2, let first = UInt64(bounds[0]), let last = UInt64(bounds[1]), first <= last,
            last < size,
            last - first + 1 == UInt64(bodyBytes)
        else { throw bad }
        return first
    }

    /// The content's upload record, if the Server API uploaded it (404 otherwise).
    private func apiUpload(_ id: ContentID) async throws -> ContentUpload {
        guard let upload = try await engine.store.read({ r in try r.upload(id) }), upload.owner == Self.contentOwner
        else {
            throw ServerAPIError.notFound("no content \(id.uuid.uuidString.lowercased())")
        }
        return upload
    }

    func contentService() throws(ServerAPIError) -> ContentService {
        guard let content else { throw .serviceUnavailable("rich content is not served by this node") }
        return content
    }

    /// Layer's content object: `id`, `size`, `upload_url` (until complete), `download_url`
    /// (once complete), `expiration` of both, `refresh_url`; and what the node holds (`uploaded`).
    func contentObject(_ upload: ContentUpload, _ r: ServerAPIRequest) -> ContentObject {
        let uuid = upload.id.uuid.uuidString.lowercased()
        let shown = r.representation
        let complete = upload.state == .complete
        return ContentObject(
            id: ServerAPIRepresentation.contentID(upload.id),
            size: upload.declaredSize,
            uploaded: upload.receivedBytes,
            upload_url: complete ? nil : shown.contentURL(.upload, upload.id),
            download_url: complete ? shown.contentURL(.download, upload.id) : nil,
            expiration: shown.contentURLExpiration,
            refresh_url: "\(shown.base)/content/\(uuid)")
    }

    /// The content a message's parts reference (`"content": {"id": …, "size": …}`), read before
    /// the command: each must be known, complete and of the size the part says.
    func referencedContent(_ body: [String: JSONValue]) async throws -> [ContentID: ContentUpload] {
        guard let list = body["parts"]?.array else { return [:] }
        var ids: [ContentID] = []
        for (index, raw) in list.enumerated() {
            guard let part = raw.object, let reference = part["content"], !reference.isNull else { continue }
            ids.append(try Self.contentReferenceID(reference, name: "parts[\(index)].content"))
        }
        guard !ids.isEmpty else { return [:] }
        _ = try contentService()
        let wanted = ids
        let found = try await engine.store.read { r -> [ContentID: ContentUpload] in
            var out: [ContentID: ContentUpload] = [:]
            for id in wanted { if let upload = try r.upload(id) { out[id] = upload } }
            return out
        }
        return found
    }

    /// The content id of a part's `content` object (`layer:///content/<uuid>`, `lamina:///…` or the UUID).
    static func contentReferenceID(_ reference: JSONValue, name: String) throws(ServerAPIError) -> ContentID {
        guard let object = reference.object else {
            throw .invalidProperty(name, "\(name) must be an object with id and size")
        }
        guard let raw = object["id"] else { throw .missingProperty("\(name).id") }
        guard var text = raw.string else { throw .invalidProperty("\(name).id", "\(name).id must be a string") }
        for prefix in ["layer:///content/", "lamina:///content/"] where text.hasPrefix(prefix) {
            text.removeFirst(prefix.count)
        }
        guard let uuid = UUID(uuidString: text) else {
            throw .invalidProperty("\(name).id", "\(name).id must be layer:///content/<uuid>")
        }
        return ContentID(uuid: uuid)
    }

    /// A part's content reference, checked against its upload: unknown (404), not complete (409),
    /// another size than uploaded (422), uploaded by a device user other than the sender (403 at the command).
    static func contentPart(
        _ reference: JSONValue, id: UUID, mime: MIMEType, name: String, uploads: [ContentID: ContentUpload]
    ) throws(ServerAPIError) -> MessagePart {
        let contentID = try contentReferenceID(reference, name: name)
        guard let object = reference.object, let rawSize = object["size"] else {
            throw .missingProperty("\(name).size")
        }
        guard let number = rawSize.exactInteger, let size = UInt64(exactly: number) else {
            throw .invalidProperty("\(name).size", "\(name).size must be a whole number of bytes")
        }
        guard let upload = uploads[contentID] else {
            var error = ServerAPIError.notFound("no content \(contentID.uuid.uuidString.lowercased())")
            error.data = ["property": .string("\(name).id")]
            throw error
        }
        guard upload.declaredSize == size else {
            throw .invalidProperty(
                "\(name).size",
                "content \(contentID.uuid.uuidString.lowercased()) has \(upload.declaredSize) bytes, the part says \(size)"
            )
        }
        guard upload.state == .complete else {
            throw .conflict(
                "content \(contentID.uuid.uuidString.lowercased()) is not completely uploaded (\(upload.receivedBytes) of \(upload.declaredSize) bytes)",
                data: [
                    "property": .string("\(name).id"), "uploaded": .integer(Int64(upload.receivedBytes)),
                    "size": .integer(Int64(upload.declaredSize)),
                ])
        }
        return MessagePart(
            id: id, mimeType: mime,
            content: .external(ContentReference(id: contentID, size: size, sha256: upload.sha256)))
    }
}

extension ServerAPIRequest {
    /// The `content_id` path parameter (a UUID, or `layer:///content/<uuid>` percent-encoded).
    func contentID() throws(ServerAPIError) -> ContentID {
        var raw = parameters["content_id"] ?? ""
        if raw.hasPrefix("layer:///content/") { raw.removeFirst("layer:///content/".count) }
        guard let uuid = UUID(uuidString: raw) else { throw .notFound("no content \(parameters["content_id"] ?? "")") }
        return ContentID(uuid: uuid)
    }
}
