import Foundation
import LaminaClient
import LaminaModel
import LaminaNode
import Testing

/// Rich content through the Server API (Protocol/CONTENT.md §10), over curl on HTTP/1.1 and
/// HTTP/2: a backend declares an upload, sends the bytes in resumable chunks to its
/// `upload_url`, sends a message whose part references the content; a device gets the part as
/// rich content and downloads identical bytes through the SDK; the API shows the part with an
/// expiring download URL that serves the same bytes.
@Suite struct ServerAPIContentTests {
    /// The path and query of an absolute URL the node handed out, for ``CurlAPI/request`` (`//…`).
    static func relative(_ url: Any?) -> String {
        let text = url as? String ?? ""
        guard let start = text.range(of: "/apps/") ?? text.range(of: "/v1/") else { return "//" }
        return "/" + text[start.lowerBound...]
    }

    static func file(_ bytes: Data) throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("api-content-\(UUID().uuidString)")
            .path
        try bytes.write(to: URL(fileURLWithPath: path))
        return path
    }

    /// curl GET of `url` into a file (binary-safe): status and bytes.
    static func download(_ url: String, http: CurlAPI.HTTP, ca: String) async throws -> (Int, Data) {
        let out = FileManager.default.temporaryDirectory.appendingPathComponent("api-download-\(UUID().uuidString)")
            .path
        defer { try? FileManager.default.removeItem(atPath: out) }
        let result = try await ExternalCommand.run(
            "/usr/bin/curl", ["-sS", http.rawValue, "--cacert", ca, "-o", out, "-w", "%{http_code}", url])
        return (Int(result.stdout) ?? 0, (try? Data(contentsOf: URL(fileURLWithPath: out))) ?? Data())
    }

    static func declare(_ api: CurlAPI, size: Int, extra: [String: String] = [:]) async throws -> CurlAPI.Response {
        var headers = [
            "Authorization": "Bearer \(api.token)", "Accept": "application/vnd.layer+json; version=3.0",
            "Upload-Content-Type": "application/octet-stream", "Upload-Content-Length": "\(size)",
        ]
        for (k, v) in extra { headers[k] = v }
        return try await api.request("POST", "/content", headers: headers)
    }

    @Test(arguments: [CurlAPI.HTTP.http1, .http2])
    func contentUploadedInChunksReachesADeviceWithIdenticalBytes(http: CurlAPI.HTTP) async throws {
        let node = try await TestNode.start("api-content-\(http == .http1 ? "h1" : "h2")")
        let bob = try ClientHarness.device("bob", on: node)
        _ = try await ClientHarness.connectLive(bob, on: node)
        let api = CurlAPI(node.server, http: http)
        let ca = node.server.prepared.certificatePath
        let created = try await api.request("POST", "/conversations", json: #"{"participants":["alice","bob"]}"#)
        let conversation = ServerAPITests.conversationUUID(created.object)

        let bytes = Data((0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) })
        let declared = try await Self.declare(api, size: bytes.count)
        #expect(declared.status == 201, "\(declared.body)")
        let contentID = try #require(declared.object["id"] as? String)
        #expect(contentID.hasPrefix("layer:///content/"))
        #expect(declared.object["size"] as? Int == bytes.count)
        #expect(declared.object["download_url"] is NSNull)
        let upload = Self.relative(declared.object["upload_url"])
        #expect(upload.contains("signature="), "\(declared.object)")

        // First chunk to the signed upload_url, with no token and no Accept: 308 with what is held.
        let first = try Self.file(bytes.prefix(100_000))
        let chunk1 = try await api.request(
            "PUT", upload, headers: ["Content-Range": "bytes 0-99999/300000"], contentType: "application/octet-stream",
            bodyFile: first)
        #expect(chunk1.status == 308, "\(chunk1.body)")
        #expect(chunk1.headers["range"] == "bytes=0-99999")
        // A status query says the same; a chunk that does not continue there is refused.
        let status = try await api.request("PUT", upload, headers: ["Content-Range": "bytes */300000"])
        #expect(
            status.status == 308 && status.headers["range"] == "bytes=0-99999", "\(status.status) \(status.headers)")
        let gap = try await api.request(
            "PUT", upload, headers: ["Content-Range": "bytes 150000-249999/300000"],
            contentType: "application/octet-stream", bodyFile: first)
        #expect(gap.status == 409, "\(gap.body)")
        #expect(gap.object["id"] as? String == "conflict")
        // A message cannot reference it yet.
        let early = try await api.request(
            "POST", "/conversations/\(conversation)/messages",
            json: """
                {"sender_id":"layer:///identities/alice","parts":[{"mime_type":"application/octet-stream","content":{"id":"\(contentID)","size":300000}}]}
                """)
        #expect(early.status == 409, "\(early.body)")
        #expect(early.object["id"] as? String == "conflict")

        // The rest, with the bearer token on the content's own path: 201 with a download URL.
        let rest = try Self.file(bytes.suffix(200_000))
        let uuid = String(contentID.dropFirst("layer:///content/".count))
        let chunk2 = try await api.request(
            "PUT", "/content/\(uuid)",
            headers: ["Authorization": "Bearer \(api.token)", "Content-Range": "bytes 100000-299999/300000"],
            contentType: "application/octet-stream", bodyFile: rest)
        #expect(chunk2.status == 201, "\(chunk2.body)")
        #expect(chunk2.object["upload_url"] is NSNull)
        #expect((chunk2.object["download_url"] as? String)?.contains("/content/\(uuid)/data?") == true)

        let sent = try await api.request(
            "POST", "/conversations/\(conversation)/messages",
            json: """
                {"sender_id":"layer:///identities/alice","parts":[{"body":"a file","mime_type":"text/plain"},
                 {"mime_type":"application/octet-stream","content":{"id":"\(contentID)","size":300000}}]}
                """)
        #expect(sent.status == 201, "\(sent.body)")
        let messageUUID = PartUpdateTests.uuid(sent.object["id"], after: "layer:///messages/")
        let messageID = MessageID(uuid: try #require(UUID(uuidString: messageUUID)))

        // The device gets the part as rich content and downloads the same bytes.
        _ = try await bob.waitForCreation(of: messageID, timeout: .seconds(30))
        let received = try #require(try bob.message(messageID)).message
        guard case .external(let reference) = received.parts[1].content else {
            Issue.record("the device got the part inline: \(received.parts[1])")
            return
        }
        #expect(reference.size == 300_000 && reference.id.uuid.uuidString.lowercased() == uuid)
        let file = try await bob.downloadedContent(of: received.identifier(of: received.parts[1]))
        #expect(try Data(contentsOf: file) == bytes)

        // Listing the messages shows the part with a download URL that serves the same bytes
        // (no token; over this test's HTTP version), and the device's own path serves them too.
        let listed = try await api.request("GET", "/conversations/\(conversation)/messages")
        #expect(listed.status == 200)
        let part = try #require((listed.array.first?["parts"] as? [[String: Any]])?.last)
        let content = try #require(part["content"] as? [String: Any])
        #expect(content["id"] as? String == contentID && content["size"] as? Int == 300_000)
        #expect(content["expiration"] is String)
        let downloadURL = try #require(content["download_url"] as? String)
        let (code, downloaded) = try await Self.download(downloadURL, http: http, ca: ca)
        #expect(code == 200 && downloaded == bytes, "\(code) \(downloaded.count)")
        // A URL whose signature was changed is refused (it is then a request without a token).
        let forged = downloadURL.replacingOccurrences(of: "signature=", with: "signature=0")
        let (forgedCode, _) = try await Self.download(forged, http: http, ca: ca)
        #expect(forgedCode == 401)
        // GET /content/:id refreshes the URLs.
        let refreshed = try await api.request("GET", "/content/\(uuid)")
        #expect(refreshed.status == 200 && refreshed.object["download_url"] is String, "\(refreshed.body)")

        // The URL outlives a restart of the node (the key is the store's, not the process's).
        try await bob.close()
        await node.stop()
        try await node.startAgain()
        let (againCode, again) = try await Self.download(downloadURL, http: http, ca: ca)
        #expect(againCode == 200 && again == bytes, "\(againCode) \(again.count)")
        await node.stop()
    }

    /// Every refusal, each with Layer's error object and its status.
    @Test func contentErrorsAreLayerErrors() async throws {
        let node = try await TestNode.start("api-content-errors")
        let api = CurlAPI(node.server, http: .http1)
        let created = try await api.request("POST", "/conversations", json: #"{"participants":["alice","bob"]}"#)
        let conversation = ServerAPITests.conversationUUID(created.object)
        func send(_ content: String) async throws -> CurlAPI.Response {
            try await api.request(
                "POST", "/conversations/\(conversation)/messages",
                json: """
                    {"sender_id":"layer:///identities/alice","parts":[{"mime_type":"image/png","content":\(content)}]}
                    """)
        }

        // Too large (over 2 GiB), no size, a size that is not a number.
        let large = try await Self.declare(api, size: Int(Limits.maxPartBytes) + 1)
        #expect(large.status == 413 && large.object["id"] as? String == "request_too_large", "\(large.body)")
        let noSize = try await api.request(
            "POST", "/content",
            headers: ["Authorization": "Bearer \(api.token)", "Accept": "application/vnd.layer+json; version=3.0"])
        #expect(noSize.status == 400 && noSize.object["id"] as? String == "invalid_header", "\(noSize.body)")
        #expect((noSize.object["data"] as? [String: Any])?["header"] as? String == "Upload-Content-Length")

        // Unknown content id (404), size mismatch (422), not complete (409).
        let unknown = try await send(#"{"id":"layer:///content/\#(UUID().uuidString.lowercased())","size":10}"#)
        #expect(unknown.status == 404 && unknown.object["id"] as? String == "not_found", "\(unknown.body)")
        let declared = try await Self.declare(api, size: 5_000)
        let contentID = try #require(declared.object["id"] as? String)
        let incomplete = try await send(#"{"id":"\#(contentID)","size":5000}"#)
        #expect(incomplete.status == 409 && incomplete.object["id"] as? String == "conflict", "\(incomplete.body)")
        let body = try Self.file(Data(repeating: 0x41, count: 5_000))
        let uploaded = try await api.request(
            "PUT", Self.relative(declared.object["upload_url"]), headers: [:],
            contentType: "application/octet-stream", bodyFile: body)
        #expect(uploaded.status == 201, "\(uploaded.body)")
        let mismatch = try await send(#"{"id":"\#(contentID)","size":4999}"#)
        #expect(mismatch.status == 422 && mismatch.object["id"] as? String == "invalid_property", "\(mismatch.body)")
        #expect((mismatch.object["data"] as? [String: Any])?["property"] as? String == "parts[0].content.size")
        let noID = try await send(#"{"size":5000}"#)
        #expect(noID.status == 422 && noID.object["id"] as? String == "missing_property", "\(noID.body)")
        // Nothing refused reached the conversation.
        let listed = try await api.request("GET", "/conversations/\(conversation)/messages")
        #expect(listed.array.isEmpty, "\(listed.body)")
        // With all right, it goes.
        let ok = try await send(#"{"id":"\#(contentID)","size":5000}"#)
        #expect(ok.status == 201, "\(ok.body)")

        // Uploads: no token and no signature (401), a forged signature (401), a body longer than
        // the content (400), unknown content (404), a complete upload again (200).
        let uuid = String(contentID.dropFirst("layer:///content/".count))
        let bare = try await api.request(
            "PUT", "/content/\(uuid)", headers: [:], contentType: "application/octet-stream", bodyFile: body)
        #expect(bare.status == 401 && bare.object["id"] as? String == "authentication_required", "\(bare.body)")
        let forged = Self.relative(declared.object["upload_url"]).replacingOccurrences(
            of: "signature=", with: "signature=1")
        let forgedPut = try await api.request(
            "PUT", forged, headers: [:], contentType: "application/octet-stream", bodyFile: body)
        #expect(forgedPut.status == 401, "\(forgedPut.body)")
        let other = try await Self.declare(api, size: 10)
        let long = try await api.request(
            "PUT", Self.relative(other.object["upload_url"]), headers: [:],
            contentType: "application/octet-stream", bodyFile: body)
        #expect(long.status == 400 && long.object["id"] as? String == "invalid_header", "\(long.body)")
        let missing = try await api.request(
            "PUT", "/content/\(UUID().uuidString)", headers: ["Authorization": "Bearer \(api.token)"],
            contentType: "application/octet-stream", bodyFile: body)
        #expect(missing.status == 404 && missing.object["id"] as? String == "not_found", "\(missing.body)")
        let again = try await api.request(
            "PUT", Self.relative(declared.object["upload_url"]), headers: [:],
            contentType: "application/octet-stream", bodyFile: body)
        #expect(again.status == 200, "\(again.body)")
        let unknownGet = try await api.request("GET", "/content/\(UUID().uuidString)")
        #expect(unknownGet.status == 404 && unknownGet.object["id"] as? String == "not_found")
        await node.stop()
    }

    /// The quota of device uploads holds for the backend's uploads too.
    @Test func theContentQuotaHolds() async throws {
        let node = try await TestNode.start("api-content-quota") { $0.content.quotaBytes = 10_000 }
        let api = CurlAPI(node.server, http: .http2)
        let first = try await Self.declare(api, size: 8_000)
        #expect(first.status == 201)
        let body = try Self.file(Data(repeating: 1, count: 8_000))
        let put = try await api.request(
            "PUT", Self.relative(first.object["upload_url"]), headers: [:],
            contentType: "application/octet-stream", bodyFile: body)
        #expect(put.status == 201, "\(put.body)")
        let second = try await Self.declare(api, size: 3_000)
        #expect(second.status == 507 && second.object["id"] as? String == "quota_exceeded", "\(second.body)")
        await node.stop()
    }
}
