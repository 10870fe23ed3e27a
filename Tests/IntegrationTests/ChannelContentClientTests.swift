import Foundation
import LaminaClient
import LaminaModel
import LaminaNode
import Testing

/// Rich content in channel messages through the Client API, the Server API and the SDK
/// (SPEC §6.8, Protocol/CONTENT.md §5, §10), on a real node over TLS + HTTP/2: the Web SDK's
/// upload then a channel message naming it, the backend's upload then a message to a channel;
/// an SDK member gets the part as rich content, auto-downloads it by the content settings,
/// finds it with a query on the parts' MIME types, and downloads identical bytes; a non-member
/// is refused.
@Suite struct ChannelContentClientTests {
    /// The Web SDK's upload (`POST /content`, one PUT to `upload_url`) of `bytes`: the content id.
    static func clientAPIUpload(_ client: ClientAPICurl, _ bytes: Data, type: String, on node: TestNode)
        async throws -> String
    {
        let path = try ServerAPIContentTests.file(bytes)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let declared = try await ClientAPIContentTests.declare(client, size: bytes.count, type: type)
        #expect(declared.status == 201, "\(declared.body)")
        let uploadURL = try #require(declared.object["upload_url"] as? String)
        let put = try await ClientAPIContentTests.put(
            uploadURL, file: path, http: .http2, ca: node.server.prepared.certificatePath,
            headers: ["Content-Type": type, "Upload-Content-Length": "\(bytes.count)", "Upload-Content-Type": type])
        #expect(put.status == 200, "\(put.object)")
        return try #require(declared.object["id"] as? String)
    }

    @Test func aClientAPIMembersContentReachesAnSDKMemberAndNotAnOutsider() async throws {
        let node = try await TestNode.start("channel-content-capi")
        let alice = try await ClientAPICurl.session("alice", on: node, http: .http2)
        let carol = try await ClientAPICurl.session("carol", on: node, http: .http2)
        let bob = try ClientHarness.device("bob", on: node)
        _ = try await ClientHarness.connectLive(bob, on: node)
        // Bob auto-downloads PNG images whatever their size.
        try bob.updateContentSettings(ContentSettings(autoDownloadMIMETypes: ["image/png"]))

        let created = try await alice.request("POST", "/channels", json: #"{"name":"pictures"}"#)
        #expect(created.status == 201, "\(created.body)")
        let uuid = ClientAPIChannelTests.uuid(created.object["id"])
        let channel = ChannelID(uuid: try #require(UUID(uuidString: uuid)))
        try await bob.joinChannel(channel)
        let pictures = try bob.queryController(
            for: Query<StoredChannelMessage>(
                predicate: .and([
                    .property(ChannelMessageProperty.channel, .equalTo, .channel(channel)),
                    .property("parts.mimeType", .contains, .string("image/png")),
                ])))
        #expect(try pictures.start().isEmpty)
        let updates = Recorder(pictures.updates)

        // 1 MiB PNG through the Web SDK's path, then a channel message naming it.
        let bytes = RichContentTests.bytes(1 << 20, seed: 17)
        let contentID = try await Self.clientAPIUpload(alice, bytes, type: "image/png", on: node)
        let sent = try await alice.request(
            "POST", "/channels/\(uuid)/messages",
            json: """
                {"parts":[{"mime_type":"text/plain","body":"a picture"},
                 {"mime_type":"image/png","content":{"id":"\(contentID)","size":\(bytes.count)}}]}
                """)
        #expect(sent.status == 201, "\(sent.body)")
        let shown = (sent.object["parts"] as? [[String: Any]])?.last?["content"] as? [String: Any]
        #expect(shown?["id"] as? String == contentID && shown?["size"] as? Int == bytes.count, "\(sent.body)")
        let downloadURL = try #require(shown?["download_url"] as? String)
        let messageID = MessageID(
            uuid: try #require(UUID(uuidString: ClientAPIChannelTests.uuid(sent.object["id"]))))

        // Bob's query finds it by its part's type; its part is rich content that auto-downloads.
        try await updates.wait("the picture in bob's query") { $0.contains { $0.objects.map(\.id) == [messageID] } }
        // (A finished download changes no object: polled, with a deadline.)
        try await ResourceLimitTests.eventuallyAsync("bob's device to auto-download the picture", timeout: .seconds(60))
        {
            (try? bob.channelMessages(of: channel).first { $0.id == messageID }?.partStates.last?.transferStatus)
                == .complete
        }
        let stored = try #require(try bob.channelMessages(of: channel).first { $0.id == messageID })
        guard case .external(let reference) = stored.message.parts[1].content else {
            Issue.record("bob's device got the part inline: \(stored.message.parts[1])")
            return
        }
        #expect(reference.size == UInt64(bytes.count))
        #expect(stored.partStates.map(\.transferStatus) == [.complete, .complete])
        #expect(stored.partStates[1].autoDownloaded)
        let part = MessagePartID(message: messageID, part: stored.message.parts[1].id)
        guard case .file(let file) = try bob.content(of: part) else {
            Issue.record("no file for the downloaded part")
            return
        }
        #expect(try Data(contentsOf: file) == bytes)
        // No query names a type the message does not have.
        let gifs = try bob.queryController(
            for: Query<StoredChannelMessage>(predicate: .property("parts.mimeType", .contains, .string("image/gif"))))
        #expect(try gifs.start().isEmpty)

        // The member's download URL serves the bytes; the outsider cannot see the content.
        let (code, downloaded) = try await ServerAPIContentTests.download(
            downloadURL, http: .http2, ca: node.server.prepared.certificatePath)
        #expect(code == 200 && downloaded == bytes, "\(code) \(downloaded.count)")
        let contentUUID = String(contentID.dropFirst("layer:///content/".count))
        #expect(try await carol.request("GET", "/content/\(contentUUID)").status == 404)
        let outsider = try await carol.request("GET", "/channels/\(uuid)/messages")
        #expect(outsider.status == 403, "\(outsider.body)")

        // Purged from bob's device, it downloads again on request.
        #expect(try bob.purgeContent(of: part))
        let again = try await bob.downloadedContent(of: part)
        #expect(try Data(contentsOf: again) == bytes)

        pictures.stop()
        gifs.stop()
        try await bob.close()
        await node.stop()
    }

    @Test func anSDKMemberSendsStagedContentToAChannelAndAnotherDownloadsIt() async throws {
        let node = try await TestNode.start("channel-content-sdk")
        let alice = try ClientHarness.device("alice", on: node)
        let bob = try ClientHarness.device("bob", on: node)
        _ = try await ClientHarness.connectLive(alice, on: node)
        _ = try await ClientHarness.connectLive(bob, on: node)
        let channel = try await alice.createChannel(named: "sdk-media")
        try await bob.joinChannel(channel)

        // 2 MiB staged on alice's device: uploaded before the send, then hers without a download.
        let bytes = RichContentTests.bytes(2 << 20, seed: 29)
        let (part, reference) = try RichContentTests.richPart("application/octet-stream", bytes, by: alice)
        let sent = try await alice.sendChannelMessage([part], to: channel)
        #expect(try await node.server.store.read { r in try r.upload(reference.id)?.state } == .complete)
        try await ClientHarness.waitUntil(alice, "alice's own message, complete on her device") {
            try alice.channelMessages(of: channel).first { $0.id == sent }?.partStates.map(\.transferStatus)
                == [.complete]
        }
        let partID = MessagePartID(message: sent, part: part.id)
        guard case .file(let own) = try alice.content(of: partID) else {
            Issue.record("alice's device holds no file for her part")
            return
        }
        #expect(try Data(contentsOf: own) == bytes)

        // Bob's device: over the auto-download maximum, so it waits for a request.
        try await ClientHarness.waitUntil(bob, "alice's message on bob's device") {
            try bob.channelMessages(of: channel).contains { $0.id == sent }
        }
        #expect(
            try bob.channelMessages(of: channel).first { $0.id == sent }?.partStates.map(\.transferStatus)
                == [.readyForDownload])
        let file = try await bob.downloadedContent(of: partID)
        #expect(try Data(contentsOf: file) == bytes)
        #expect(
            try bob.channelMessages(of: channel).first { $0.id == sent }?.partStates.map(\.transferStatus)
                == [.complete])

        // Deleting the channel removes the messages and their files from the devices.
        try await alice.deleteChannel(channel)
        try await ClientHarness.waitUntil(bob, "the channel gone from bob's device") { try bob.channel(channel) == nil }
        try await ResourceLimitTests.eventuallyAsync("bob's content file removed") {
            !FileManager.default.fileExists(atPath: file.path)
        }

        try await alice.close()
        try await bob.close()
        await node.stop()
    }

    @Test func theBackendsContentGoesToAChannelThroughTheServerAPI() async throws {
        let node = try await TestNode.start("channel-content-sapi")
        let bob = try ClientHarness.device("bob", on: node)
        _ = try await ClientHarness.connectLive(bob, on: node)
        let api = CurlAPI(node.server, http: .http2)
        let created = try await api.request("POST", "/channels", json: #"{"name":"announcements","members":["bob"]}"#)
        #expect(created.status == 201, "\(created.body)")
        let uuid = ClientAPIChannelTests.uuid(created.object["id"])
        let channel = ChannelID(uuid: try #require(UUID(uuidString: uuid)))

        let bytes = Data((0..<200_000).map { UInt8(truncatingIfNeeded: $0 &* 13 &+ 5) })
        let declared = try await ServerAPIContentTests.declare(api, size: bytes.count)
        #expect(declared.status == 201, "\(declared.body)")
        let contentID = try #require(declared.object["id"] as? String)
        let contentUUID = String(contentID.dropFirst("layer:///content/".count))
        let whole = try ServerAPIContentTests.file(bytes)
        defer { try? FileManager.default.removeItem(atPath: whole) }
        let put = try await api.request(
            "PUT", "/content/\(contentUUID)",
            headers: ["Authorization": "Bearer \(api.token)", "Content-Range": "bytes 0-199999/200000"],
            contentType: "application/octet-stream", bodyFile: whole)
        #expect(put.status == 201, "\(put.body)")

        // A named system sender posts it to the channel; a wrong size is Layer's 422.
        let wrong = try await api.request(
            "POST", "/channels/\(uuid)/messages",
            json: """
                {"sender":{"name":"Announcer"},"parts":[{"mime_type":"application/octet-stream","content":{"id":"\(contentID)","size":5}}]}
                """)
        #expect(wrong.status == 422, "\(wrong.body)")
        let sent = try await api.request(
            "POST", "/channels/\(uuid)/messages",
            json: """
                {"sender":{"name":"Announcer"},"parts":[{"mime_type":"application/octet-stream","content":{"id":"\(contentID)","size":200000}}]}
                """)
        #expect(sent.status == 201, "\(sent.body)")
        let shown = (sent.object["parts"] as? [[String: Any]])?.first?["content"] as? [String: Any]
        #expect(shown?["id"] as? String == contentID && shown?["download_url"] is String, "\(sent.body)")
        let messageID = MessageID(
            uuid: try #require(UUID(uuidString: ClientAPIChannelTests.uuid(sent.object["id"]))))

        // Bob, a member, downloads the same bytes through the SDK.
        try await ClientHarness.waitUntil(bob, "the backend's message on bob's device", timeout: .seconds(30)) {
            try bob.channelMessages(of: channel).contains { $0.id == messageID }
        }
        let stored = try #require(try bob.channelMessages(of: channel).first { $0.id == messageID })
        #expect(stored.partStates.map(\.transferStatus) == [.readyForDownload])
        let file = try await bob.downloadedContent(
            of: MessagePartID(message: messageID, part: stored.message.parts[0].id))
        #expect(try Data(contentsOf: file) == bytes)

        try await bob.close()
        await node.stop()
    }
}
