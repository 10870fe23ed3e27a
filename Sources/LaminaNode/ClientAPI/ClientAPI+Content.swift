import Foundation
import LaminaModel
import LaminaStore
import LaminaTransport
import LaminaWire
import NIOCore

/// Rich content through the Client API, as Layer's Web SDK does it: `POST /content` with
/// `Upload-Content-Type` and `Upload-Content-Length` declares an upload and answers a content
/// object with a signed `upload_url`; the client PUTs the whole file there in one request (no
/// session: the signature stands for it), streamed to the node's content store on disk, never
/// held in memory; a message part then names the content (`"content": {"id", "size"}`);
/// recipients see a signed `download_url` with its `expiration`, and `GET <refresh_url>` (with
/// the session) answers fresh URLs. The content store is the sync protocol's
/// (`/v1/content/<uuid>`, Protocol/CONTENT.md): the same files, owner, quota, size limit and
/// concurrent-upload limit, so SDK clients download what the Client API uploaded and the other
/// way round.
extension ClientAPI {
    /// The content routes (served after ``table``).
    static let contentTable: [(Route, Bool, Handler)] = [
        (Route(method: "POST", template: "/content"), true, { try await $0.createContent($1) }),
        (Route(method: "GET", template: "/content/{content_id}"), true, { try await $0.getContent($1) }),
        // The upload_url and download_url are signed: no session, and no Layer Accept header
        // (the Web SDK sends them with a plain XHR; a browser fetches a download like any URL).
        (Route(method: "PUT", template: "/content/{content_id}"), false, { try await $0.uploadContent($1) }),
        (Route(method: "GET", template: "/content/{content_id}/data"), false, { try await $0.downloadContent($1) }),
    ]

    /// Whether a route answers without Layer's `Accept` header (the signed content URLs).
    static func takesAnyAccept(_ route: Route) -> Bool {
        route.template.hasPrefix("/content/{content_id}")
            && (route.method == "PUT" || route.template.hasSuffix("/data"))
    }

    /// Bytes taken by one write to disk of an upload (the body's chunks gathered up to it).
    static let uploadWriteBytes = 1 << 20

    /// The router's streamed-body rule: `PUT /content/<id>` bodies (up to `Limits.maxPartBytes`)
    /// go to ``uploadContent(_:)`` as they arrive; every other request's body is collected.
    public func streamedBodyLimit(_ request: HTTPRequest) -> UInt64? {
        guard request.method == "PUT", content != nil else { return nil }
        let bare = request.path.split(separator: "?", maxSplits: 1).first ?? ""
        let segments = bare.split(separator: "/", omittingEmptySubsequences: false)
        guard segments.count == 3, segments[1] == "content", !segments[2].isEmpty else { return nil }
        return Limits.maxPartBytes
    }

    /// A `PUT /content/<id>` whose URL is not signed for that upload, or has expired: 403 before
    /// its body is read (and before a client waiting for `100 Continue` sends it).
    func uploadRefusalBeforeBody(_ request: HTTPRequest) -> HTTPResponse? {
        guard let content, streamedBodyLimit(request) != nil else { return nil }
        let bare = request.path.split(separator: "?", maxSplits: 1).first ?? ""
        let raw = String(bare.dropFirst("/content/".count))
        let r = ClientAPIRequest(
            http: request, parameters: ["content_id": raw], query: [:], base: origin.withLockedValue { $0 })
        do throws(ServerAPIError) {
            try verifySignature(r, .upload, try r.contentID(), content: content)
            return nil
        } catch {
            return Self.answeredAsJSON(error.response(base: r.base))
        }
    }

    /// POST /content: declares an upload of `Upload-Content-Length` bytes owned by the session's
    /// user; 201 with the content object (`upload_url`, `expiration`, `refresh_url`).
    func createContent(_ r: ClientAPIRequest) async throws -> HTTPResponse {
        let user = try r.requireSession().user
        let content = try contentService()
        let size = try UploadDeclaration.size(of: r.http)
        let id = ContentID(uuid: UUID())
        let quota = content.settings.quotaBytes
        let now = Timestamp.now()
        let upload = try await engine.store.write { tx -> ContentUpload in
            // CONTENT.md §7: the user's stored content and the uploads streaming now, plus this one.
            let streaming = content.active.reservations(of: user, excluding: id)
            let used = try tx.read.contentBytes(of: user, excluding: streaming.ids) + streaming.bytes
            guard used <= quota, size <= quota - used else {
                throw ServerAPIError.quotaExceeded(used: used, size: size, quota: quota)
            }
            let upload = ContentUpload(
                id: id, owner: user, declaredSize: size, sha256: [UInt8](repeating: 0, count: 32), state: .uploading,
                createdAt: now)
            try tx.createUpload(upload)
            return upload
        }
        let object = contentObject(upload, r, owner: true)
        return ServerAPIJSON.response(201, object, extraHeaders: [("location", object.refresh_url)])
    }

    /// GET /content/:id (the `refresh_url`): the content object with fresh URLs, for its owner
    /// and, once complete, for users who see a message naming it (404 for anyone else).
    func getContent(_ r: ClientAPIRequest) async throws -> HTTPResponse {
        let user = try r.requireSession().user
        _ = try contentService()
        let id = try r.contentID()
        let upload = try await engine.store.read { reader -> ContentUpload? in
            guard let upload = try reader.upload(id) else { return nil }
            if upload.owner == user { return upload }
            guard upload.state == .complete, try reader.maySeeContent(id, user: user) else { return nil }
            return upload
        }
        guard let upload else { throw ServerAPIError.notFound("no content \(ServerAPIRepresentation.contentID(id))") }
        return ServerAPIJSON.response(200, contentObject(upload, r, owner: upload.owner == user))
    }

    /// PUT /content/:id (the signed `upload_url`): the whole content in one body of exactly the
    /// declared size, streamed to disk as it arrives and hashed on the way; 200 with the content
    /// object (`download_url`) once it is durable. A failed or cut upload keeps nothing: the
    /// client PUTs again. Content already complete answers 200 without reading the body.
    func uploadContent(_ r: ClientAPIRequest) async throws -> HTTPResponse {
        let content = try contentService()
        let id = try r.contentID()
        try verifySignature(r, .upload, id, content: content)
        if r.http.bodyTooLarge { throw ServerAPIError.contentTooLarge(Self.declaredLength(r) ?? Limits.maxPartBytes) }
        guard let upload = try await engine.store.read({ reader in try reader.upload(id) }) else {
            throw ServerAPIError.notFound("no content \(ServerAPIRepresentation.contentID(id))")
        }
        if upload.state == .complete { return ServerAPIJSON.response(200, contentObject(upload, r, owner: true)) }
        let size = upload.declaredSize
        if let length = Self.declaredLength(r), length != size {
            guard length < size else {
                throw ServerAPIError(
                    413, "request_too_large", 111,
                    "the body has \(length) bytes, the content was declared with \(size) (POST /content)",
                    data: ["header": "Content-Length", "max": .integer(Int64(size))])
            }
            throw ServerAPIError.invalidHeader(
                400, "Content-Length", "the body has \(length) bytes, the content was declared with \(size)")
        }
        if let raw = r.http.headers["upload-content-length"], UInt64(raw.trimmingCharacters(in: .whitespaces)) != size {
            throw ServerAPIError.invalidHeader(
                400, "Upload-Content-Length", "Upload-Content-Length must be \(size), as declared at POST /content")
        }
        let owner = upload.owner
        switch content.active.begin(id, user: owner, limit: content.settings.maxConcurrentUploadsPerUser) {
        case .admitted: break
        case .contentBusy, .userBusy: throw ServerAPIError.busy(content.settings.retryAfterSeconds)
        }
        do {
            let stored = try await receive(r.http.bodyStream, of: upload, content: content)
            content.active.end(id)
            content.arrivals.arrived(id)
            return ServerAPIJSON.response(200, contentObject(stored, r, owner: true))
        } catch {
            content.active.end(id)
            throw error
        }
    }

    /// Reserves the declared size against the owner's quota, then writes the body to the
    /// upload's partial file from byte 0, hashing it; at its end fsyncs, promotes and records the
    /// content complete with its digest. The body is pulled one disk write at a time, so the
    /// transport holds at most its high-water mark plus ``uploadWriteBytes``.
    private func receive(_ body: HTTPRequestBody?, of upload: ContentUpload, content: ContentService) async throws
        -> ContentUpload
    {
        let id = upload.id
        let size = upload.declaredSize
        let quota = content.settings.quotaBytes
        try await engine.store.write { tx in
            let streaming = content.active.reservations(of: upload.owner, excluding: id)
            let used =
                try tx.read.contentBytes(of: upload.owner, excluding: streaming.ids.union([id])) + streaming.bytes
            guard used <= quota, size <= quota - used else {
                throw ServerAPIError.quotaExceeded(used: used, size: size, quota: quota)
            }
            content.active.reserve(id, declaredSize: size)
        }
        let files = content.files
        let pool = content.threadPool
        let file = try await pool.runIfActive { () -> UploadFile in
            let fd = try files.openPartial(id, at: 0)
            do { return UploadFile(fd: fd, hasher: try SHA256Hasher()) } catch {
                ContentFiles.closeFile(fd)
                throw error
            }
        }
        let digest: [UInt8]
        do {
            var received: UInt64 = 0
            var batch: [ByteBuffer] = []
            var batchBytes = 0
            func flush() async throws {
                guard !batch.isEmpty else { return }
                let buffers = batch
                batch.removeAll(keepingCapacity: true)
                batchBytes = 0
                try await pool.runIfActive {
                    for buffer in buffers {
                        try ContentFiles.writeAll(file.fd, buffer)
                        try file.hasher.update(buffer)
                    }
                }
            }
            if let body {
                do {
                    for try await chunk in body {
                        received += UInt64(chunk.readableBytes)
                        guard received <= size else {
                            throw ServerAPIError(
                                413, "request_too_large", 111,
                                "the body runs past the \(size) bytes declared at POST /content",
                                data: ["max": .integer(Int64(size))])
                        }
                        batch.append(chunk)
                        batchBytes += chunk.readableBytes
                        if batchBytes >= Self.uploadWriteBytes { try await flush() }
                    }
                } catch let error as HTTPRequestBodyError {
                    switch error.kind {
                    case .tooLarge: throw ServerAPIError.contentTooLarge(received)
                    case .stalled: throw ServerAPIError(408, "request_timeout", 12, "the upload stalled: \(error)")
                    case .closed: throw error
                    }
                }
            }
            try await flush()
            guard received == size else {
                throw ServerAPIError.invalidHeader(
                    400, "Content-Length",
                    "the body has \(received) bytes, the content was declared with \(size): PUT it whole again")
            }
            digest = try await pool.runIfActive { () -> [UInt8] in
                try ContentFiles.syncFile(file.fd)
                let digest = try file.hasher.finalize()
                try files.promote(id)
                return digest
            }
            _ = try? await pool.runIfActive { ContentFiles.closeFile(file.fd) }
        } catch {
            _ = try? await pool.runIfActive { ContentFiles.closeFile(file.fd) }
            throw error
        }
        let now = Timestamp.now()
        return try await engine.store.write { tx -> ContentUpload in
            try tx.completeUpload(id, sha256: digest, at: now)
            guard let stored = try tx.read.upload(id) else {
                throw ServerAPIError.notFound("content \(id) was deleted during the upload")
            }
            return stored
        }
    }

    /// GET /content/:id/data (the signed `download_url`): the bytes of complete content, read
    /// from disk chunk by chunk as the client takes them, over HTTP/1.1 or HTTP/2.
    func downloadContent(_ r: ClientAPIRequest) async throws -> HTTPResponse {
        let content = try contentService()
        let id = try r.contentID()
        try verifySignature(r, .download, id, content: content)
        guard let upload = try await engine.store.read({ reader in try reader.upload(id) }) else {
            throw ServerAPIError.notFound("no content \(ServerAPIRepresentation.contentID(id))")
        }
        guard upload.state == .complete else {
            throw ServerAPIError.conflict(
                "content \(ServerAPIRepresentation.contentID(id)) is not uploaded yet",
                data: ["size": .integer(Int64(upload.declaredSize))])
        }
        return content.downloadResponse(upload)
    }

    /// 403 unless the request's query signs `purpose` on `id` and has not expired.
    private func verifySignature(
        _ r: ClientAPIRequest, _ purpose: ContentURLSigner.Purpose, _ id: ContentID, content: ContentService
    ) throws(ServerAPIError) {
        let path = r.http.path
        let query = path.firstIndex(of: "?").map { path[path.index(after: $0)...] } ?? ""
        guard content.urls.verify(purpose, id, query: query, now: Timestamp.now().millisecondsSince1970 / 1000) else {
            throw .accessDenied(
                "the \(purpose == .upload ? "upload" : "download") URL's signature is invalid or it has expired: ask the refresh_url for a new one"
            )
        }
    }

    /// The request's `Content-Length`, if it declares one.
    private static func declaredLength(_ r: ClientAPIRequest) -> UInt64? {
        r.http.headers["content-length"].flatMap { UInt64($0.trimmingCharacters(in: .whitespaces)) }
    }

    func contentService() throws(ServerAPIError) -> ContentService {
        guard let content else { throw .serviceUnavailable("rich content is not served by this node") }
        return content
    }

    /// Layer's content object: `id`, `size`, `upload_url` (to its owner, until complete),
    /// `download_url` (once complete), `expiration` of both, `refresh_url`.
    func contentObject(_ upload: ContentUpload, _ r: ClientAPIRequest, owner: Bool) -> ContentObject {
        let shown = contentURLs(r)
        let complete = upload.state == .complete
        return ContentObject(
            id: ServerAPIRepresentation.contentID(upload.id), size: upload.declaredSize, uploaded: upload.receivedBytes,
            upload_url: complete || !owner ? nil : shown?.contentURL(.upload, upload.id),
            download_url: complete ? shown?.contentURL(.download, upload.id) : nil,
            expiration: shown?.contentURLExpiration,
            refresh_url: "\(r.base)/content/\(upload.id.uuid.uuidString.lowercased())")
    }

    /// Signed content URLs under the node's own origin (`/content/<uuid>`, `/content/<uuid>/data`),
    /// good for ``contentURLLifetime`` seconds; nil without a content store.
    func contentURLs(_ r: ClientAPIRequest) -> ServerAPIRepresentation? {
        guard let content else { return nil }
        var urls = ServerAPIRepresentation(base: r.base, version: .v3)
        urls.contentURLs = content.urls
        urls.contentURLExpires = Timestamp.now().millisecondsSince1970 / 1000 + contentURLLifetime
        return urls
    }

    /// The uploads a message's parts name (`"content": {"id", "size"}`), read before the
    /// command; nil without a content store (content parts are then refused).
    func referencedContent(_ body: [String: JSONValue]) async throws -> [ContentID: ContentUpload]? {
        guard content != nil else { return nil }
        guard let list = body["parts"]?.array else { return [:] }
        var ids: [ContentID] = []
        for (index, raw) in list.enumerated() {
            guard let part = raw.object, let reference = part["content"], !reference.isNull else { continue }
            ids.append(try ServerAPI.contentReferenceID(reference, name: "parts[\(index)].content"))
        }
        guard !ids.isEmpty else { return [:] }
        let wanted = ids
        return try await engine.store.read { reader -> [ContentID: ContentUpload] in
            var out: [ContentID: ContentUpload] = [:]
            for id in wanted { if let upload = try reader.upload(id) { out[id] = upload } }
            return out
        }
    }
}

extension ClientAPIRequest {
    /// The `content_id` path parameter (a UUID, or `layer:///content/<uuid>` percent-encoded).
    func contentID() throws(ServerAPIError) -> ContentID {
        var raw = parameters["content_id"] ?? ""
        raw = raw.removingPercentEncoding ?? raw
        if raw.hasPrefix("layer:///content/") { raw.removeFirst("layer:///content/".count) }
        guard let uuid = UUID(uuidString: raw) else { throw .notFound("no content \(parameters["content_id"] ?? "")") }
        return ContentID(uuid: uuid)
    }
}
