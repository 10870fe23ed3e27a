import Foundation
import LaminaModel
import LaminaNode
import LaminaWire
import Testing

/// Channels (SPEC §6.8) on a real node, over TLS and HTTP/2, on SQLite and PostgreSQL: joining
/// and leaving, history on join, live delivery to members online only, the member limit, no
/// receipts and no feed entry per message, deletion, and bad input refused with a code.
@Suite struct ChannelTests {
    static let alice: UserID = "alice"
    static let bob: UserID = "bob"
    static let carol: UserID = "carol"

    @Test(arguments: StoreBackend.allCases)
    func joinHistoryLiveDeliveryAndLeave(_ backend: StoreBackend) async throws {
        let node = try await TestNode.start("channels-join-\(backend)", backend: backend)
        let alice = try await node.session(Self.alice, device: UUID())
        let bob = try await node.session(Self.bob, device: UUID())
        let carol = try await node.session(Self.carol, device: UUID())
        let channel = try await Self.create(alice, "general")
        // The creator's feed: the channel, then their membership.
        let created = try await alice.change { $0.event.kind == 16 }
        #expect(created.seq > 0)
        guard case .channelCreated(let c) = created.event else { return }
        #expect(c.name.rawValue == "general" && c.creator == Self.alice)
        _ = try await alice.change {
            if case .channelMembershipChanged(let m) = $0.event { return m.user == Self.alice && m.joined }
            return false
        }

        // Three messages before bob joins: the log numbers them 1, 2, 3.
        var seqs: [UInt64] = []
        for i in 1...3 { seqs.append(try await Self.send(alice, channel, "before \(i)").ack.cursor ?? 0) }
        #expect(seqs == [1, 2, 3])

        // Bob joins: his feed gets the channel and his membership; the ACK names the log head.
        let joined = try await Self.join(bob, channel)
        #expect(joined.cursor == 3)
        let bobsChannel = try await bob.change { $0.event.kind == 16 }
        let bobsJoin = try await bob.change { $0.event.kind == 17 }
        #expect(bobsChannel.seq > 0 && bobsJoin.seq > bobsChannel.seq)

        // History on join: the whole shared log, in order.
        let history = try await Self.fetch(bob, channel, after: 0, count: 100)
        #expect(history.messages.map(\.logSeq) == [1, 2, 3])
        #expect(history.messages.map(Self.text) == ["before 1", "before 2", "before 3"])
        #expect(history.cursor == 3)
        let page = try await Self.fetch(bob, channel, after: 1, count: 1)
        #expect(page.messages.map(\.logSeq) == [2] && page.cursor == 2)

        // Live: bob (a member online) gets the next message with seq 0, the sending session
        // too (after its ACK); carol (not a member) gets nothing.
        let (liveID, ack) = try await Self.send(alice, channel, "live")
        #expect(ack.cursor == 4 && ack.position != nil && ack.timestamp != nil)
        let live = try await bob.change {
            if case .channelMessage(let m) = $0.event { return m.id == liveID }
            return false
        }
        #expect(live.seq == 0)
        guard case .channelMessage(let m) = live.event else { return }
        #expect(m.logSeq == 4 && m.sender == Self.alice && Self.text(m) == "live")
        #expect(try await Self.channelMessagesThroughBarrier(carol).isEmpty)
        #expect(try await Self.channelMessagesThroughBarrier(alice).map(\.id).contains(liveID))

        // Bob leaves: told in his feed; then no live message and no reading.
        _ = try await Self.leave(bob, channel)
        _ = try await bob.change {
            if case .channelMembershipChanged(let m) = $0.event { return m.user == Self.bob && !m.joined }
            return false
        }
        _ = try await Self.send(alice, channel, "after bob left")
        #expect(try await Self.channelMessagesThroughBarrier(bob).isEmpty)
        await Self.expectRefused(.notAParticipant) { try await Self.fetch(bob, channel, after: 0, count: 10) }
        await Self.expectRefused(.notAParticipant) { try await Self.send(bob, channel, "not a member") }
        // Carol joins late and reads all five.
        _ = try await Self.join(carol, channel)
        #expect(try await Self.fetch(carol, channel, after: 0, count: 10).messages.count == 5)
        for client in [alice, bob, carol] { await client.close() }
        await node.stop()
    }

    @Test func theMemberLimitIsEnforcedWhereTheJoinEnters() async throws {
        let node = try await TestNode.start("channels-limit") { $0.resources.maxChannelMembers = 2 }
        let alice = try await node.session(Self.alice, device: UUID())
        let bob = try await node.session(Self.bob, device: UUID())
        let carol = try await node.session(Self.carol, device: UUID())
        let channel = try await Self.create(alice, "small")
        _ = try await Self.join(bob, channel)
        await Self.expectRefused(.tooManyParticipants) { try await Self.join(carol, channel) }
        // Joining again as a member changes nothing and is acknowledged; the node serves on.
        _ = try await Self.join(bob, channel)
        _ = try await Self.leave(bob, channel)
        _ = try await Self.join(carol, channel)
        _ = try await Self.send(carol, channel, "in")
        for client in [alice, bob, carol] { await client.close() }
        await node.stop()
    }

    @Test func aMessageWritesNoFeedEntryAndHasNoReceipts() async throws {
        let node = try await TestNode.start("channels-no-receipts")
        let alice = try await node.session(Self.alice, device: UUID())
        let bob = try await node.session(Self.bob, device: UUID())
        let channel = try await Self.create(alice, "quiet")
        _ = try await Self.join(bob, channel)
        let cursor = try await bob.change { $0.event.kind == 17 }.seq
        for i in 1...5 { _ = try await Self.send(alice, channel, "m\(i)") }
        // A new device of bob's syncing from his cursor finds no entry: messages are not in feeds.
        let other = try await node.session(Self.bob, device: UUID(), cursor: cursor)
        #expect(other.seenChanges.filter { $0.seq > cursor }.isEmpty)
        // There is nothing to mark read or deliver: receipts name conversations only.
        let id = UUID()
        await Self.expectRefused(.notFound) {
            try await bob.command(
                .markRead(
                    MarkRead(
                        requestID: id, conversationID: ConversationID(uuid: channel.uuid),
                        messageID: MessageID.random())), id: id)
        }
        await alice.close()
        await bob.close()
        await other.close()
        await node.stop()
    }

    @Test(arguments: StoreBackend.allCases) func deletionTellsEveryMemberAndFreesTheName(_ backend: StoreBackend)
        async throws
    {
        let node = try await TestNode.start("channels-delete-\(backend)", backend: backend)
        let alice = try await node.session(Self.alice, device: UUID())
        let bob = try await node.session(Self.bob, device: UUID())
        let channel = try await Self.create(alice, "doomed")
        _ = try await Self.join(bob, channel)
        _ = try await Self.send(bob, channel, "hello")
        await Self.expectRefused(.forbidden) { try await Self.delete(bob, channel) }
        _ = try await Self.delete(alice, channel)
        for client in [alice, bob] {
            let deleted = try await client.change { $0.event.kind == 19 }
            #expect(deleted.seq > 0)
        }
        await Self.expectRefused(.notFound) { try await Self.send(alice, channel, "gone") }
        await Self.expectRefused(.notFound) { try await Self.fetch(bob, channel, after: 0, count: 10) }
        await Self.expectRefused(.notFound) { try await Self.join(bob, channel) }
        // The name is free again; the old id is not.
        _ = try await Self.create(bob, "doomed")
        await Self.expectRefused(.idInUse) {
            try await alice.command(
                .createChannel(CreateChannel(channelID: channel, name: try ChannelName("doomed-2"))), id: channel.uuid)
        }
        await alice.close()
        await bob.close()
        await node.stop()
    }

    @Test func namesAreUniqueRetriesAnswerAgainAndBadInputIsRefusedWithACode() async throws {
        let node = try await TestNode.start("channels-input")
        let alice = try await node.session(Self.alice, device: UUID())
        let bob = try await node.session(Self.bob, device: UUID())
        let channel = try await Self.create(alice, "lobby")
        // A retry of the creation is answered again; the name is taken for anyone else.
        _ = try await alice.command(
            .createChannel(CreateChannel(channelID: channel, name: try ChannelName("lobby"))), id: channel.uuid)
        await Self.expectRefused(.idInUse) { try await Self.create(bob, "lobby") }
        // A retried send is answered with the same place in the log, stored once.
        let id = MessageID.random()
        let parts = [try MessagePart(text: "once")]
        let first = try await Self.send(alice, channel, "", id: id, parts: parts).ack
        let again = try await Self.send(alice, channel, "", id: id, parts: parts).ack
        #expect(first.cursor == again.cursor && first.position == again.position)
        #expect(try await Self.fetch(alice, channel, after: 0, count: 10).messages.count == 1)
        // FETCH_CHANNEL counts 1 to 10,000.
        await Self.expectRefused(.invalidArgument) { try await Self.fetch(alice, channel, after: 0, count: 0) }
        await Self.expectRefused(.invalidArgument) { try await Self.fetch(alice, channel, after: 0, count: 10_001) }
        // A content reference names uploaded content (ChannelContentTests): unknown content is not ready.
        let reference = MessagePart(
            id: UUID(), mimeType: .textPlain,
            content: .external(ContentReference(id: .random(), size: 10, sha256: Array(repeating: 0, count: 32))))
        await Self.expectRefused(.contentNotReady) {
            try await Self.send(alice, channel, "", parts: [reference])
        }
        // Unknown channels.
        await Self.expectRefused(.notFound) { try await Self.join(bob, ChannelID.random()) }
        // A session without the channels bit is refused, and the stream goes on.
        let old = try await node.session(Self.bob, device: UUID(), features: FeatureSet.all.subtracting(.channels))
        await Self.expectRefused(.forbidden) { try await Self.join(old, channel) }
        #expect(try await Self.channelMessagesThroughBarrier(old).isEmpty)
        await alice.close()
        await bob.close()
        await old.close()
        await node.stop()
    }

    @Test func theServerAPICreatesChannelsManagesMembersSendsAndDeletes() async throws {
        let node = try await TestNode.start("channels-server-api")
        let api = CurlAPI(node.server, http: .http2)
        let bob = try await node.session(Self.bob, device: UUID())
        let created = try await api.request("POST", "/channels", json: #"{"name":"api-room","members":["bob"]}"#)
        #expect(created.status == 201, "\(created.body)")
        #expect(created.body.contains("\"api-room\"") && created.body.contains("\"member_count\":1"), "\(created.body)")
        guard let range = created.body.range(of: #"layer:///channels/"#) else { return }
        let uuid = String(created.body[range.upperBound...].prefix(36))
        let channel = ChannelID(uuid: try #require(UUID(uuidString: uuid)))
        // Bob's feed: the channel, then his membership by the Server API's system sender.
        _ = try await bob.change { $0.event.kind == 16 }
        let joined = try await bob.change { $0.event.kind == 17 }
        guard case .channelMembershipChanged(let m) = joined.event else { return }
        #expect(m.user == Self.bob && m.joined && m.by.isSystemSender)

        // A system sender's message reaches bob live; it is in the log.
        let sent = try await api.request(
            "POST", "/channels/\(uuid)/messages",
            json: #"{"sender":{"name":"Bot"},"parts":[{"mime_type":"text/plain","body":"hello room"}]}"#)
        #expect(sent.status == 201 && sent.body.contains("\"position\":1"), "\(sent.body)")
        let live = try await bob.change { $0.event.kind == 18 }
        guard case .channelMessage(let message) = live.event else { return }
        #expect(Self.text(message) == "hello room" && message.sender.isSystemSender)

        // Members: added, listed, removed; a taken name is refused.
        #expect(try await api.request("PUT", "/channels/\(uuid)/members/carol").status == 204)
        let members = try await api.request("GET", "/channels/\(uuid)/members")
        #expect(members.status == 200 && members.body.contains("\"carol\"") && members.headers["layer-count"] == "2")
        #expect(try await api.request("DELETE", "/channels/\(uuid)/members/carol").status == 204)
        #expect(try await api.request("POST", "/channels", json: #"{"name":"api-room"}"#).status == 409)
        #expect(try await api.request("POST", "/channels", json: #"{"name":""}"#).status == 422)

        // Deleted: bob is told, and the channel is gone.
        #expect(try await api.request("DELETE", "/channels/\(uuid)").status == 204)
        _ = try await bob.change {
            if case .channelDeleted(let d) = $0.event { return d.channelID == channel && d.by.isSystemSender }
            return false
        }
        #expect(try await api.request("GET", "/channels/\(uuid)").status == 404)
        await bob.close()
        await node.stop()
    }

    // MARK: - Helpers

    static func create(_ client: SyncTestClient, _ name: String) async throws -> ChannelID {
        let id = ChannelID.random()
        try await client.command(.createChannel(CreateChannel(channelID: id, name: try ChannelName(name))), id: id.uuid)
        return id
    }

    @discardableResult
    static func join(_ client: SyncTestClient, _ channel: ChannelID) async throws -> Ack {
        let id = UUID()
        return try await client.command(.joinChannel(ChannelRequest(requestID: id, channelID: channel)), id: id)
    }

    @discardableResult
    static func leave(_ client: SyncTestClient, _ channel: ChannelID) async throws -> Ack {
        let id = UUID()
        return try await client.command(.leaveChannel(ChannelRequest(requestID: id, channelID: channel)), id: id)
    }

    @discardableResult
    static func delete(_ client: SyncTestClient, _ channel: ChannelID) async throws -> Ack {
        let id = UUID()
        return try await client.command(.deleteChannel(ChannelRequest(requestID: id, channelID: channel)), id: id)
    }

    @discardableResult
    static func send(
        _ client: SyncTestClient, _ channel: ChannelID, _ text: String, id: MessageID = .random(),
        parts: [MessagePart]? = nil
    ) async throws -> (id: MessageID, ack: Ack) {
        let ack = try await client.command(
            .sendChannelMessage(
                SendChannelMessage(messageID: id, channelID: channel, parts: parts ?? [try MessagePart(text: text)])),
            id: id.uuid)
        return (id, ack)
    }

    /// FETCH_CHANNEL: the messages answered (seq 0, in order) and the ACK's cursor.
    static func fetch(_ client: SyncTestClient, _ channel: ChannelID, after: UInt64, count: UInt32) async throws
        -> (messages: [ChannelMessage], cursor: UInt64?)
    {
        let id = UUID()
        client.send(.fetchChannel(FetchChannel(requestID: id, channelID: channel, after: after, count: count)))
        let frames = try await client.frames(until: {
            switch $0 {
            case .ack(let a): a.requestID == id
            case .error(let e): e.requestID == id || e.isFatal
            default: false
            }
        })
        guard let last = frames.last else { return ([], nil) }
        if case .error(let error) = last { throw CommandFailed(error: error) }
        guard case .ack(let ack) = last else { return ([], nil) }
        var messages: [ChannelMessage] = []
        for frame in frames.dropLast() {
            for change in SyncTestClient.changes(in: frame) {
                if case .channelMessage(let m) = change.event, m.channelID == channel, change.seq == 0 {
                    messages.append(m)
                } else {
                    client.keep(.change(change))
                }
            }
        }
        return (messages, ack.cursor)
    }

    /// The channel messages that reach `client` before the answer to a PING sent now (every
    /// delivery enqueued before it comes first: the session's inbox is in order).
    static func channelMessagesThroughBarrier(_ client: SyncTestClient) async throws -> [ChannelMessage] {
        let payload = UInt64.random(in: 1...UInt64.max)
        client.send(.ping(Ping(payload: payload)))
        let frames = try await client.frames(until: {
            if case .pong(let p) = $0 { p.payload == payload } else { false }
        })
        for frame in frames { client.keep(frame) }
        return frames.flatMap(SyncTestClient.changes(in:)).compactMap {
            if case .channelMessage(let m) = $0.event { m } else { nil }
        }
    }

    static func text(_ m: ChannelMessage) -> String {
        guard case .inline(let bytes) = m.parts.first?.content else { return "" }
        return String(decoding: bytes, as: UTF8.self)
    }

    static func expectRefused(
        _ code: WireError.Code, sourceLocation: SourceLocation = #_sourceLocation, _ body: () async throws -> some Any
    ) async {
        do {
            _ = try await body()
            Issue.record("accepted, expected \(code.name)", sourceLocation: sourceLocation)
        } catch let failed as CommandFailed {
            #expect(failed.error.code == code, "\(failed)", sourceLocation: sourceLocation)
            #expect(!failed.error.isFatal, sourceLocation: sourceLocation)
        } catch {
            Issue.record("failed with \(error), expected \(code.name)", sourceLocation: sourceLocation)
        }
    }
}
