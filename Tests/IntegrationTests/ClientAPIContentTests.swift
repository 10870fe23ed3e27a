import Foundation
import LaminaClient
import LaminaModel
import LaminaNode
import Testing

/// Rich content through the Client API, the Web SDK's way, over curl on HTTP/1.1 and HTTP/2:
/// `POST /content` declares an upload, one `PUT` of the whole file to the signed `upload_url`
/// (streamed to disk), a message part names the content; an SDK device downloads identical
/// bytes through the sync protocol, and the other way round an SDK-sent rich part shows a
/// `download_url` that curl fetches. Limits and bad input answer Layer's errors.
@Suite struct ClientAPIContentTests {
    /// curl `-T file` (a streamed PUT) to an absolute URL: status and the answer's JSON.
    static func put(
        _ url: String, file: String, http: CurlAPI.HTTP, ca: String, headers: [String: String] = [:]
    ) async throws -> (status: Int, object: [String: Any]) {
        let out = FileManager.default.temporaryDirectory.appendingPathComponent("capi-put-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: out) }
        var arguments = ["-sS", http.rawValue, "--cacert", ca, "-T", file, "-o", out, "-w", "%{http_code}"]
        for (name, value) in headers { arguments += ["-H", "\(name): \(value)"] }
        arguments.append(url)
        let result = try await ExternalCommand.run("/usr/bin/curl", arguments)
        let body = (try? Data(contentsOf: URL(fileURLWithPath: out))) ?? Data()
        let object = (try? JSONSerialization.jsonObject(with: body)) as? [String: Any] ?? [:]
        return (Int(result.stdout.suffix(3)) ?? 0, object)
    }

    /// `POST /content` for `size` bytes of `type`.
    static func declare(_ client: ClientAPICurl, size: Int, type: String = "image/png") async throws
        -> CurlAPI.Response
    {
        var headers = client.headers
        headers["Upload-Content-Type"] = type
        headers["Upload-Content-Length"] = "\(size)"
        return try await client.request("POST", "/content", headers: headers)
    }

    static func sha256(_ path: String) async throws -> String {
        let result = try await ExternalCommand.run("/usr/bin/sha256sum", [path])
        return String(result.stdout.prefix(64))
    }

    @Test(arguments: [CurlAPI.HTTP.http1, .http2])
    func aFileUploadedInOnePutReachesAnSDKDeviceAndAnSDKPartReachesCurl(http: CurlAPI.HTTP) async throws {
        let node = try await TestNode.start("capi-content-\(http == .http1 ? "h1" : "h2")")
        let ca = node.server.prepared.certificatePath
        let alice = try await ClientAPICurl.session("alice", on: node, http: http)
        let bobREST = try await ClientAPICurl.session("bob", on: node, http: http)
        let bob = try ClientHarness.device("bob", on: node)
        _ = try await ClientHarness.connectLive(bob, on: node)
        let created = try await alice.request(
            "POST", "/conversations", json: #"{"participants":["layer:///identities/bob"]}"#)
        let conversation = ClientAPIRESTTests.uuid(created.object, "layer:///conversations/")

        // 3 MiB: more than the transport's buffer and the upload's write batch.
        let bytes = RichContentTests.bytes(3 << 20, seed: 9)
        let path = try ServerAPIContentTests.file(bytes)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let declared = try await Self.declare(alice, size: bytes.count)
        #expect(declared.status == 201, "\(declared.body)")
        let contentID = try #require(declared.object["id"] as? String)
        let uuid = String(contentID.dropFirst("layer:///content/".count))
        #expect(UUID(uuidString: uuid) != nil)
        #expect(declared.object["size"] as? Int == bytes.count)
        #expect(declared.object["download_url"] is NSNull)
        #expect(declared.object["expiration"] is String)
        #expect(declared.object["refresh_url"] as? String == "\(node.server.url)/content/\(uuid)")
        let uploadURL = try #require(declared.object["upload_url"] as? String)
        #expect(uploadURL.hasPrefix("\(node.server.url)/content/\(uuid)?") && uploadURL.contains("signature="))

        // The Web SDK's PUT: no session, no Layer Accept, Upload-Content-* headers.
        let put = try await Self.put(
            uploadURL, file: path, http: http, ca: ca,
            headers: [
                "Content-Type": "image/png", "Upload-Content-Length": "\(bytes.count)",
                "Upload-Content-Type": "image/png",
            ])
        #expect(put.status == 200, "\(put.object)")
        #expect(put.object["upload_url"] is NSNull)
        let ownDownload = try #require(put.object["download_url"] as? String)
        let (ownCode, ownBytes) = try await ServerAPIContentTests.download(ownDownload, http: http, ca: ca)
        #expect(ownCode == 200 && ownBytes == bytes, "\(ownCode) \(ownBytes.count)")

        // A part names it; bob's SDK device downloads the same bytes through the sync protocol.
        let sent = try await alice.request(
            "POST", "/conversations/\(conversation)/messages",
            json: """
                {"parts":[{"mime_type":"text/plain","body":"a picture"},
                 {"mime_type":"image/png","content":{"id":"\(contentID)","size":\(bytes.count)}}]}
                """)
        #expect(sent.status == 201, "\(sent.body)")
        let sentPart = (sent.object["parts"] as? [[String: Any]])?.last?["content"] as? [String: Any]
        #expect(sentPart?["id"] as? String == contentID)
        #expect((sentPart?["download_url"] as? String)?.hasPrefix("\(node.server.url)/content/\(uuid)/data?") == true)
        let messageUUID = ClientAPIRESTTests.uuid(sent.object, "layer:///messages/")
        let messageID = MessageID(uuid: try #require(UUID(uuidString: messageUUID)))
        _ = try await bob.waitForCreation(of: messageID, timeout: .seconds(30))
        let received = try #require(try bob.message(messageID)).message
        guard case .external(let reference) = received.parts[1].content else {
            Issue.record("the device got the part inline: \(received.parts[1])")
            return
        }
        #expect(reference.size == UInt64(bytes.count))
        let file = try await bob.downloadedContent(of: received.identifier(of: received.parts[1]))
        #expect(try Data(contentsOf: file) == bytes)

        // Bob over REST: the part's download_url serves the bytes; the refresh_url answers a fresh one.
        let listed = try await bobREST.request("GET", "/conversations/\(conversation)/messages")
        let part = try #require((listed.array.first?["parts"] as? [[String: Any]])?.last?["content"] as? [String: Any])
        let bobsURL = try #require(part["download_url"] as? String)
        #expect(part["refresh_url"] as? String == "\(node.server.url)/content/\(uuid)")
        let (code, downloaded) = try await ServerAPIContentTests.download(bobsURL, http: http, ca: ca)
        #expect(code == 200 && downloaded == bytes, "\(code) \(downloaded.count)")
        let refreshed = try await bobREST.request("GET", "/content/\(uuid)")
        #expect(refreshed.status == 200, "\(refreshed.body)")
        #expect(refreshed.object["download_url"] is String && refreshed.object["upload_url"] is NSNull)

        // The other way: bob's SDK sends a rich part; alice's REST view has a download_url curl fetches.
        let other = RichContentTests.bytes(300_000, seed: 4)
        let (rich, _) = try RichContentTests.richPart("video/mp4", other, by: bob)
        let sdkMessage = try bob.send(
            bob.newMessage(parts: [rich]), in: ConversationID(uuid: try #require(UUID(uuidString: conversation))))
        try await ClientEndToEndTests.waitUntil(bob, "bob's rich message to be sent", timeout: .seconds(60)) {
            try bob.isSent(sdkMessage.id)
        }
        let fromSDK = try await alice.request("GET", "/messages/\(sdkMessage.id.uuid.uuidString.lowercased())")
        #expect(fromSDK.status == 200, "\(fromSDK.body)")
        let sdkContent = try #require(
            (fromSDK.object["parts"] as? [[String: Any]])?.first?["content"] as? [String: Any])
        #expect(sdkContent["size"] as? Int == other.count)
        let sdkURL = try #require(sdkContent["download_url"] as? String)
        let (sdkCode, sdkBytes) = try await ServerAPIContentTests.download(sdkURL, http: http, ca: ca)
        #expect(sdkCode == 200 && sdkBytes == other, "\(sdkCode) \(sdkBytes.count)")

        try await bob.close()
        await node.stop()
    }

    /// Every refusal with Layer's error object, before the body where the headers tell; the
    /// node goes on serving.
    @Test(arguments: [CurlAPI.HTTP.http1, .http2])
    func limitsAndBadInputAreLayerErrors(http: CurlAPI.HTTP) async throws {
        let node = try await TestNode.start("capi-content-errors-\(http == .http1 ? "h1" : "h2")")
        let ca = node.server.prepared.certificatePath
        let alice = try await ClientAPICurl.session("alice", on: node, http: http)
        let bob = try await ClientAPICurl.session("bob", on: node, http: http)
        let created = try await alice.request(
            "POST", "/conversations", json: #"{"participants":["layer:///identities/bob"]}"#)
        let conversation = ClientAPIRESTTests.uuid(created.object, "layer:///conversations/")

        // Declaring: a size is required, positive, at most 2 GiB; a session is required.
        var headers = alice.headers
        let missing = try await alice.request("POST", "/content", headers: headers)
        #expect(missing.status == 400 && missing.object["id"] as? String == "invalid_header", "\(missing.body)")
        headers["Upload-Content-Length"] = "-5"
        let negative = try await alice.request("POST", "/content", headers: headers)
        #expect(negative.status == 400 && negative.object["id"] as? String == "invalid_header")
        headers["Upload-Content-Length"] = "\(Limits.maxPartBytes + 1)"
        let huge = try await alice.request("POST", "/content", headers: headers)
        #expect(huge.status == 413 && huge.object["id"] as? String == "request_too_large", "\(huge.body)")
        var anonymous = ClientAPICurl(node, http: http)
        anonymous.sessionToken = nil
        var anonymousHeaders = anonymous.headers
        anonymousHeaders["Upload-Content-Length"] = "10"
        let noSession = try await anonymous.request("POST", "/content", headers: anonymousHeaders)
        #expect(noSession.status == 401 && noSession.object["id"] as? String == "authentication_required")

        let size = 100_000
        let declared = try await Self.declare(alice, size: size)
        let contentID = try #require(declared.object["id"] as? String)
        let uuid = String(contentID.dropFirst("layer:///content/".count))
        let uploadURL = try #require(declared.object["upload_url"] as? String)
        let exact = try ServerAPIContentTests.file(RichContentTests.bytes(size))
        let longer = try ServerAPIContentTests.file(RichContentTests.bytes(size + 50_000))
        let shorter = try ServerAPIContentTests.file(RichContentTests.bytes(size - 1))
        defer { for p in [exact, longer, shorter] { try? FileManager.default.removeItem(atPath: p) } }

        // A forged signature, or none: 403 before the body.
        let forged = try await Self.put(
            uploadURL.replacingOccurrences(of: "signature=", with: "signature=00"), file: exact, http: http, ca: ca)
        #expect(forged.status == 403 && forged.object["id"] as? String == "access_denied", "\(forged)")
        let unsigned = try await Self.put("\(node.server.url)/content/\(uuid)", file: exact, http: http, ca: ca)
        #expect(unsigned.status == 403)
        // A Content-Length over the declared size: 413; under it: 400 (nothing kept either way).
        let tooLong = try await Self.put(uploadURL, file: longer, http: http, ca: ca)
        #expect(tooLong.status == 413 && tooLong.object["id"] as? String == "request_too_large", "\(tooLong)")
        let tooShort = try await Self.put(uploadURL, file: shorter, http: http, ca: ca)
        #expect(tooShort.status == 400 && tooShort.object["id"] as? String == "invalid_header", "\(tooShort)")
        // No declared length (chunked on HTTP/1.1, no content-length on HTTP/2): counted as it
        // arrives, refused once it runs past the declared size.
        let counted = try await Self.put(
            uploadURL, file: longer, http: http, ca: ca,
            headers: http == .http1 ? ["Transfer-Encoding": "chunked"] : ["Content-Length": ""])
        #expect(counted.status == 413 && counted.object["id"] as? String == "request_too_large", "\(counted)")

        // A part naming content not yet uploaded: 409; unknown content: 404.
        let early = try await alice.request(
            "POST", "/conversations/\(conversation)/messages",
            json: #"{"parts":[{"mime_type":"image/png","content":{"id":"\#(contentID)","size":\#(size)}}]}"#)
        #expect(early.status == 409 && early.object["id"] as? String == "conflict", "\(early.body)")
        let unknown = try await alice.request(
            "POST", "/conversations/\(conversation)/messages",
            json:
                #"{"parts":[{"mime_type":"image/png","content":{"id":"layer:///content/\#(UUID().uuidString)","size":5}}]}"#
        )
        #expect(unknown.status == 404, "\(unknown.body)")
        // Before it is complete, no one else may refresh it, and its download is a conflict.
        let othersView = try await bob.request("GET", "/content/\(uuid)")
        #expect(othersView.status == 404)

        // After all that, the exact body is taken, and the part is accepted.
        let good = try await Self.put(uploadURL, file: exact, http: http, ca: ca)
        #expect(good.status == 200, "\(good)")
        let again = try await Self.put(uploadURL, file: exact, http: http, ca: ca)
        #expect(again.status == 200, "a repeated PUT of complete content answers it again: \(again)")
        let sent = try await alice.request(
            "POST", "/conversations/\(conversation)/messages",
            json: #"{"parts":[{"mime_type":"image/png","content":{"id":"\#(contentID)","size":\#(size)}}]}"#)
        #expect(sent.status == 201, "\(sent.body)")
        let wrongSize = try await alice.request(
            "POST", "/conversations/\(conversation)/messages",
            json: #"{"parts":[{"mime_type":"image/png","content":{"id":"\#(contentID)","size":7}}]}"#)
        #expect(wrongSize.status == 422, "\(wrongSize.body)")
        // A download URL whose signature was changed is refused.
        let url = try #require(good.object["download_url"] as? String)
        let (forgedCode, _) = try await ServerAPIContentTests.download(
            url.replacingOccurrences(of: "signature=", with: "signature=0"), http: http, ca: ca)
        #expect(forgedCode == 403)
        let still = try await bob.request("GET", "/conversations")
        #expect(still.status == 200)
        await node.stop()
    }

    /// The node as its own process: a 64 MiB file PUT over HTTP/1.1 and over HTTP/2 does not
    /// raise the node's peak resident set (VmHWM) by anything near its size, and downloads with
    /// the same digest.
    @Test func a64MiBUploadIsStreamedToDiskNotHeldInMemory() async throws {
        let node = try await NodeProcess.start(in: Fixtures.temporaryDirectory("capi-content-rss"))
        let ca = node.dataDirectory.appendingPathComponent(NodeBootstrap.Files.certificate).path
        let url = "https://127.0.0.1:\(node.syncPort)"
        let size = 64 << 20
        let path = Fixtures.temporaryDirectory("capi-content-file").appendingPathComponent("big").path
        try RichContentTests.bytes(size, seed: 17).write(to: URL(fileURLWithPath: path))
        defer { try? FileManager.default.removeItem(atPath: path) }
        let digest = try await Self.sha256(path)

        for http in [CurlAPI.HTTP.http1, .http2] {
            let client = try await Self.devSession("alice", url: url, ca: ca, http: http)
            let before = try Self.peakResident(node.pid)
            let declared = try await Self.declare(client, size: size)
            #expect(declared.status == 201, "\(declared.body)")
            let uploadURL = try #require(declared.object["upload_url"] as? String)
            let put = try await Self.put(uploadURL, file: path, http: http, ca: ca)
            #expect(put.status == 200, "\(put.object)")
            let after = try Self.peakResident(node.pid)
            let downloadURL = try #require(put.object["download_url"] as? String)
            let out = path + ".down"
            let got = try await ExternalCommand.run(
                "/usr/bin/curl",
                ["-sS", http.rawValue, "--cacert", ca, "-o", out, "-w", "%{http_code}", downloadURL])
            #expect(got.stdout == "200")
            #expect(try await Self.sha256(out) == digest)
            try? FileManager.default.removeItem(atPath: out)
            // The file is 64 MiB; the node's peak may grow by buffers, not by the file.
            #expect(after - before < 24 << 20, "\(http): peak RSS \(before >> 20) → \(after >> 20) MiB")
            print(
                "capi-content-rss \(http): VmHWM \(before >> 10) KiB -> \(after >> 10) KiB for a \(size >> 20) MiB PUT")
        }
        #expect(try await node.stop() == 0)
    }

    /// `VmHWM` (peak resident set) of process `pid`, in bytes.
    static func peakResident(_ pid: Int32) throws -> Int {
        let status = try String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)
        guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") }) else { return 0 }
        return (Int(line.split(separator: " ").dropFirst().first ?? "0") ?? 0) * 1024
    }

    /// A Client API session on a node process in dev mode: `POST /nonces`, a dev token from
    /// `POST /dev/identity_tokens`, `POST /sessions`.
    static func devSession(_ user: String, url: String, ca: String, http: CurlAPI.HTTP) async throws -> ClientAPICurl {
        var client = ClientAPICurl(CurlAPI(url: url, caFile: ca, appID: "", token: ""), http: http)
        let nonce = try await client.request("POST", "/nonces")
        let value = try #require(nonce.object["nonce"] as? String, "\(nonce.body)")
        let minted = try await client.request(
            "POST", "/dev/identity_tokens", json: #"{"user_id":"\#(user)","nonce":"\#(value)"}"#)
        let token = try #require(minted.object["identity_token"] as? String, "\(minted.body)")
        let appID = minted.object["app_id"] as? String ?? ""
        let session = try await client.request(
            "POST", "/sessions", json: #"{"identity_token":"\#(token)","app_id":"\#(appID)"}"#)
        client.sessionToken = try #require(session.object["session_token"] as? String, "\(session.body)")
        return client
    }
}

extension ClientAPICurl {
    /// A client of the Client API at `curl`'s node.
    init(_ curl: CurlAPI, http: CurlAPI.HTTP) {
        var curl = curl
        curl.http = http
        self.curl = curl
    }
}
