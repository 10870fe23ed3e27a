import Foundation
import LaminaModel
import LaminaStoreTestSupport
import LaminaWire
import NIOConcurrencyHelpers
import Testing

@testable import LaminaNode
@testable import LaminaStore

/// The webhooks' outbox: rows written in the command's own commit, one per event per active
/// webhook subscribed to it, none otherwise; the target and retry rules.
@Suite struct WebhookOutboxTests {
    static func webhook(events: [String], status: StoredWebhook.Status = .active) -> StoredWebhook {
        StoredWebhook(
            id: UUID(), targetURL: "https://example.com/hook", events: events, secret: "0123456789abcdef",
            config: nil, status: status, createdAt: .now(), updatedAt: .now())
    }

    /// Stores `webhooks` and subscribes the active ones, as the management API does.
    static func install(_ webhooks: [StoredWebhook], in h: EngineHarness) async throws {
        let outbox = h.engine.webhooks
        try await h.store.write { tx in
            for w in webhooks {
                try tx.createWebhook(w, limit: WebhookLimits.maxWebhooks)
                if w.status == .active { outbox.setSubscription(w.id, events: w.events) }
            }
        }
    }

    @Test func eventsAreQueuedInTheCommandsCommitOnlyForSubscribedActiveWebhooks() async throws {
        let h = try EngineHarness()
        let alice = try await h.connect("alice")
        let conversation = ConversationID.random()
        _ = try await alice.command(
            .createConversation(CreateConversation(conversationID: conversation, participants: ["bob"])))
        // No webhook: nothing is queued.
        _ = try await alice.command(
            .sendMessage(SendMessage(messageID: .random(), conversationID: conversation, parts: [textPart("a")])))
        #expect(try await h.store.read { r in try r.webhookQueueDepths() }.isEmpty)

        let sent = Self.webhook(events: ["message.sent"])
        let other = Self.webhook(events: ["conversation.deleted"])
        let stopped = Self.webhook(events: ["message.sent"], status: .inactive)
        try await Self.install([sent, other, stopped], in: h)
        let id = MessageID.random()
        let (reply, _) = try await alice.command(
            .sendMessage(SendMessage(messageID: id, conversationID: conversation, parts: [textPart("b")])))
        #expect(reply.ack != nil)
        // Acknowledged means committed, with its event.
        #expect(try await h.store.read { r in try r.webhookQueueDepths() } == [sent.id: 1])
        let queued = try #require(try await h.store.read { r in try r.nextWebhookEvent(of: sent.id) })
        #expect(queued.eventType == "message.sent")
        #expect(queued.attempts == 0)
        // The row holds the event's facts; the lane renders its JSON.
        #expect(queued.payload.first == WebhookEvent.factsFormat)
        let payload = try #require(ServerAPIJSON.value(Data(try WebhookDelivery.body(queued, sent)))?.object)
        #expect(payload["message"]?.object?["id"] == .string("layer:///messages/\(id.uuid.uuidString.lowercased())"))
        #expect(payload["event"]?.object?["type"] == "message.sent")

        // A refused command writes no event.
        let carol = try await h.connect("carol")
        let (refused, _) = try await carol.command(
            .sendMessage(SendMessage(messageID: .random(), conversationID: conversation, parts: [textPart("c")])))
        #expect(refused.ack == nil)
        #expect(try await h.store.read { r in try r.webhookQueueDepths() } == [sent.id: 1])
        await h.close()
    }

    @Test func everyEventTypeIsQueuedByTheCommandThatCausesIt() async throws {
        let h = try EngineHarness()
        let all = Self.webhook(events: WebhookEventType.allCases.map(\.rawValue))
        try await Self.install([all], in: h)
        let alice = try await h.connect("alice")
        let conversation = ConversationID.random()
        let message = MessageID.random()
        let frames: [Frame] = [
            .createConversation(CreateConversation(conversationID: conversation, participants: ["bob"])),
            .sendMessage(SendMessage(messageID: message, conversationID: conversation, parts: [textPart("hi")])),
            .setMetadata(
                SetMetadata(
                    requestID: UUID(), conversationID: conversation, keyPath: try MetadataKeyPath(["title"]),
                    value: .string("T"))),
            .addParticipants(ParticipantsUpdate(requestID: UUID(), conversationID: conversation, users: ["carol"])),
            .deleteMessage(
                DeleteMessage(requestID: UUID(), conversationID: conversation, messageID: message, mode: .myDevices)),
            .deleteMessage(
                DeleteMessage(
                    requestID: UUID(), conversationID: conversation, messageID: message, mode: .allParticipants)),
            .deleteConversation(
                DeleteConversation(requestID: UUID(), conversationID: conversation, mode: .allParticipants)),
        ]
        for frame in frames {
            let (reply, _) = try await alice.command(frame)
            #expect(reply.ack != nil, "\(frame.type.name): \(reply)")
        }
        let queued = try await h.store.read { r in try r.queuedWebhookEvents(of: all.id, limit: 100) }
        // In commit order; deleting for one's own devices is no event.
        #expect(
            queued.map(\.eventType) == [
                "conversation.created", "message.sent", "conversation.updated", "conversation.updated",
                "message.deleted", "conversation.deleted",
            ])
        #expect(Set(queued.map(\.requestID)).count == queued.count)
        let updated = try #require(ServerAPIJSON.value(Data(try WebhookDelivery.body(queued[3], all)))?.object)
        let participants = updated["conversation"]?.object?["participants"]?.array
        #expect(participants?.compactMap { $0.object?["user_id"]?.string } == ["alice", "bob", "carol"])
        #expect(updated["actor"]?.object?["user_id"] == "alice")
        // A deletion carries the message as it was.
        let deleted = try #require(ServerAPIJSON.value(Data(try WebhookDelivery.body(queued[4], all)))?.object)
        let deletedMessage = deleted["message"]?.object
        #expect(deletedMessage?["id"] == .string("layer:///messages/\(message.uuid.uuidString.lowercased())"))
        #expect(
            deletedMessage?["conversation"]?.object?["id"]
                == .string("layer:///conversations/\(conversation.uuid.uuidString.lowercased())"))
        #expect(deletedMessage?["parts"]?.array?.first?.object?["body"] == .string("hi"))
        // The update names what changed: the title, then the participants.
        let titled = try #require(ServerAPIJSON.value(Data(try WebhookDelivery.body(queued[2], all)))?.object)
        #expect(
            titled["changes"]
                == .array([.object(["property": "metadata.title", "old_value": .null, "new_value": "T"])]))
        await h.close()
    }

    @Test func payloadDatesAreISO8601WithMillisecondsInUTC() {
        #expect(ServerAPIJSON.date(millisecondsSince1970: 0) == "1970-01-01T00:00:00.000Z")
        #expect(ServerAPIJSON.date(millisecondsSince1970: -1) == "1969-12-31T23:59:59.999Z")
        #expect(ServerAPIJSON.date(millisecondsSince1970: 1_764_143_403_123) == "2025-11-26T07:50:03.123Z")
        #expect(ServerAPIJSON.date(millisecondsSince1970: 1_709_168_523_004) == "2024-02-29T01:02:03.004Z")
        #expect(ServerAPIJSON.date(millisecondsSince1970: 951_782_400_000) == "2000-02-29T00:00:00.000Z")
        // Foundation's ISO 8601 style writes days before the Gregorian reform (1582-10-15) in
        // the Julian calendar; a node's times are never that old.
        #expect(ServerAPIJSON.date(millisecondsSince1970: -12_219_292_800_000) == "1582-10-15T00:00:00.000Z")
        #expect(ServerAPIJSON.date(millisecondsSince1970: -12_219_292_800_001) == "1582-10-04T23:59:59.999Z")
        // The same as Foundation's formatter (on instants a double holds exactly: multiples of 125 ms).
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<2_000 {
            let ms = Int64.random(in: 0...(4_102_444_800_000 / 125), using: &generator) * 125
            #expect(
                ServerAPIJSON.date(millisecondsSince1970: ms)
                    == formatter.string(from: Date(timeIntervalSince1970: Double(ms) / 1000)))
        }
    }

    /// A `message.sent` event with text and binary parts: its row's facts read back to the
    /// same event, and it renders as Layer's payload, byte for byte.
    static let sample: WebhookEvent = {
        let c = ConversationID(uuid: UUID(uuidString: "11111111-1111-4111-8111-111111111111")!)
        let m = MessageID(uuid: UUID(uuidString: "22222222-2222-4222-8222-222222222222")!)
        let parts = [
            try! MessagePart(
                id: UUID(uuidString: "33333333-3333-4333-8333-333333333333")!, text: "quote \" slash / é 😀\n"),
            try! MessagePart(
                id: UUID(uuidString: "44444444-4444-4444-8444-444444444444")!,
                mimeType: MIMEType("application/octet-stream"),
                bytes: [0, 1, 2, 255]),
        ]
        let at = Timestamp(millisecondsSince1970: 1_764_143_403_123)
        let message = Message(
            id: m, conversationID: c, sender: "alice", parts: parts, sentAt: at,
            position: HLCTimestamp(physical: 1_764_143_403_123, logical: 2, node: NodeID(7)), push: nil,
            recipientStatus: ["alice": .read, "bob": .delivered])
        return WebhookEvent(
            type: .messageSent, id: UUID(uuidString: "55555555-5555-4555-8555-555555555555")!, createdAt: at,
            actor: "alice", base: "https://node.example:7443/apps/app1", subject: .message(message))
    }()

    @Test func eventsRenderAsLayersPayloadFromTheirFacts() throws {
        let event = try WebhookEvent(facts: try Self.sample.facts())
        #expect(event == Self.sample)
        let base = "https://node.example:7443/apps/app1"
        let c = "11111111-1111-4111-8111-111111111111"
        let m = "22222222-2222-4222-8222-222222222222"
        let alice =
            #"{"avatar_url":null,"display_name":"alice","id":"layer:///identities/alice","url":"\#(base)/users/alice/identity","user_id":"alice"}"#
        let expected =
            #"{"actor":\#(alice),"config":{"a/b":[1,2.5,true,null,"x"]},"event":{"created_at":"2025-11-26T07:50:03.123Z","id":"55555555-5555-4555-8555-555555555555","type":"message.sent"},"#
            + #""message":{"conversation":{"id":"layer:///conversations/\#(c)","url":"\#(base)/conversations/\#(c)"},"id":"layer:///messages/\#(m)","#
            + #""parts":[{"body":"quote \" slash / é 😀\n","id":"layer:///messages/\#(m)/parts/33333333-3333-4333-8333-333333333333","mime_type":"text/plain"},"#
            + #"{"body":"AAEC/w==","encoding":"base64","id":"layer:///messages/\#(m)/parts/44444444-4444-4444-8444-444444444444","mime_type":"application/octet-stream"}],"#
            + #""position":115614902067068930,"recipient_status":{"layer:///identities/alice":"read","layer:///identities/bob":"delivered"},"#
            + #""sender":\#(alice),"sent_at":"2025-11-26T07:50:03.123Z","url":"\#(base)/conversations/\#(c)/messages/\#(m)"}}"#
        let config = try #require(ServerAPIJSON.value(Data(#"{"a\/b":[1,2.5,true,null,"x"]}"#.utf8)))
        #expect(String(decoding: try event.json(config: config), as: UTF8.self) == expected)
        // Damaged facts are refused, not rendered.
        var short = try Self.sample.facts()
        short.removeLast()
        #expect(throws: WebhookEventFactsError.self) { try WebhookEvent(facts: short) }
    }

    @Test func aRowQueuedAsJSONIsSentAsItWasWithTheConfigAdded() throws {
        let legacy = Data(#"{"event":{"type":"message.deleted"},"message":{"id":"layer:///messages/x"}}"#.utf8)
        let row = QueuedWebhookEvent(
            seq: 1, webhook: UUID(), requestID: UUID(), eventType: "message.deleted", payload: legacy,
            createdAt: .now(), attempts: 0,
            nextAttemptAt: .now())
        var webhook = Self.webhook(events: ["message.deleted"])
        #expect(try WebhookDelivery.body(row, webhook) == Array(legacy))
        webhook.config = Data(#"{"k":"v"}"#.utf8)
        #expect(
            String(decoding: try WebhookDelivery.body(row, webhook), as: UTF8.self)
                == #"{"config":{"k":"v"},"event":{"type":"message.deleted"},"message":{"id":"layer:///messages/x"}}"#)
    }

    @Test func internalAddressesAreRecognised() {
        for address in [
            "127.0.0.1", "10.1.2.3", "172.16.0.1", "172.31.255.255", "192.168.1.1", "169.254.169.254", "100.64.0.1",
            "0.0.0.0", "224.0.0.1", "::1", "::", "fe80::1", "fd00::1", "::ffff:10.0.0.1", "not-an-address",
        ] {
            #expect(WebhookTarget.isInternal(address), "\(address)")
        }
        for address in ["8.8.8.8", "172.32.0.1", "192.169.0.1", "2001:4860:4860::8888", "::ffff:8.8.8.8"] {
            #expect(!WebhookTarget.isInternal(address), "\(address)")
        }
    }

    @Test func targetURLsAreParsedOrRefused() async throws {
        let target = try WebhookTarget.parse("https://Example.com:8443/a/b?x=1").get()
        #expect(target == WebhookTarget(host: "example.com", port: 8443, path: "/a/b?x=1"))
        #expect(try WebhookTarget.parse("https://[::1]/").get().host == "::1")
        #expect(
            try await WebhookTarget(host: "localhost", port: 443, path: "/").addresses(allowPrivate: true).get()
                .contains("127.0.0.1"))
        await #expect(throws: WebhookTargetError.self) {
            try await WebhookTarget(host: "localhost", port: 443, path: "/").addresses(allowPrivate: false).get()
        }
        for bad in [
            "http://example.com/", "ftp://x", "https:///nohost", "https://u:p@example.com/", "https://example.com/#f",
            "https://[]/h", "https://[nothost]/", "https://[1.2.3.4]/",
            "https://example.com/" + String(repeating: "a", count: WebhookLimits.maxTargetURLBytes),
        ] {
            #expect(throws: WebhookTargetError.self, "\(bad)") { _ = try WebhookTarget.parse(bad).get() }
        }
        #expect(throws: WebhookTargetError.self) {
            _ = try WebhookTarget.check(["127.0.0.1"], host: "h", allowPrivate: false).get()
        }
        #expect(throws: WebhookTargetError.self) {
            _ = try WebhookTarget.check(["8.8.8.8", "10.0.0.1"], host: "h", allowPrivate: false).get()
        }
        #expect(try WebhookTarget.check(["127.0.0.1"], host: "h", allowPrivate: true).get() == ["127.0.0.1"])
        #expect(throws: WebhookTargetError.self) {
            _ = try WebhookTarget.check([], host: "h", allowPrivate: true).get()
        }
    }

    /// Issue 35, item 4: an address of the node's own interfaces is refused even when it is in a
    /// public range (this machine's 192.0.2.2, a documentation range the private filter passes),
    /// in any textual form; other public addresses pass.
    @Test func theNodesOwnAddressesAreRefused() throws {
        let own: Set<String> = ["203.0.113.7", "2001:db8::7"]
        for mine in ["203.0.113.7", "::ffff:203.0.113.7", "2001:DB8:0::7", "2001:db8::0:7"] {
            #expect(throws: WebhookTargetError.self, "\(mine)") {
                _ = try WebhookTarget.check([mine], host: "h", allowPrivate: false, own: own).get()
            }
        }
        #expect(try WebhookTarget.check(["203.0.113.8"], host: "h", allowPrivate: false, own: own).get().count == 1)
        #expect(try WebhookTarget.check(["203.0.113.7"], host: "h", allowPrivate: true, own: own).get().count == 1)
        // The real interfaces: every address getifaddrs reports is refused.
        let interfaces = WebhookTarget.ownAddresses()
        #expect(interfaces.contains("127.0.0.1"))
        for address in interfaces {
            #expect(throws: WebhookTargetError.self, "\(address)") {
                _ = try WebhookTarget.check([address], host: "h", allowPrivate: false).get()
            }
        }
    }

    @Test func aTargetGateLetsAtMostItsLimitThrough() async throws {
        let gate = TargetGate(limit: 2)
        await gate.acquire()
        await gate.acquire()
        let passed = NIOLockedValueBox(false)
        let waiter = Task {
            await gate.acquire()
            passed.withLockedValue { $0 = true }
        }
        while gate.counts.waiting < 1 { await Task.yield() }
        #expect(!passed.withLockedValue { $0 })  // both slots are held
        gate.release()
        await waiter.value
        #expect(passed.withLockedValue { $0 })
        #expect(gate.counts.inFlight == 2 && gate.counts.waiting == 0)  // the slot passed on
        gate.release()
        gate.release()
        #expect(gate.counts.inFlight == 0)
    }

    @Test func aLaneSignalWakesAWaitOrTheNextOneAndTimesOut() async {
        let signal = LaneSignal()
        signal.signal()
        signal.signal()
        #expect(await signal.wait(timeout: nil))  // the signals before the wait, as one
        let started = ContinuousClock.now
        #expect(await signal.wait(timeout: .milliseconds(30)))  // timed out
        #expect(ContinuousClock.now - started >= .milliseconds(30))
        // A long wait ends at the signal (given before or during the wait), not at its timeout.
        let before = ContinuousClock.now
        let waiting = Task { await signal.wait(timeout: .seconds(60)) }
        signal.signal()
        #expect(await waiting.value)
        #expect(ContinuousClock.now - before < .seconds(10))
        signal.finish()
        #expect(await signal.wait(timeout: nil) == false)
    }

    @Test func retriesFollowTheStatusAndBackOffExponentiallyWithJitter() {
        #expect(WebhookDelivery.outcome(status: 204, headers: []).isDelivered)
        for status in [408, 429, 500, 503] {
            #expect(WebhookDelivery.outcome(status: status, headers: []).isRetry, "\(status)")
        }
        for status in [400, 404, 410, 301] {
            #expect(WebhookDelivery.outcome(status: status, headers: []).isRefused, "\(status)")
        }
        if case .retry(_, let after) = WebhookDelivery.outcome(status: 429, headers: [("retry-after", "7")]) {
            #expect(after == 7)
        }
        var settings = WebhookSettings()
        settings.initialBackoffMilliseconds = 100
        settings.maxBackoffSeconds = 2
        for attempt in 1...8 {
            let full = min(2_000, 100 << (attempt - 1))
            let delay = WebhookDelivery.backoff(attempts: attempt, retryAfter: nil, settings: settings)
            #expect((Int64(full / 2)...Int64(full)).contains(delay), "attempt \(attempt): \(delay)")
        }
        #expect(WebhookDelivery.backoff(attempts: 1, retryAfter: 1, settings: settings) >= 1_000)
        #expect(WebhookDelivery.backoff(attempts: 1, retryAfter: 99, settings: settings) == 2_000)
    }
}

extension WebhookDelivery.Outcome {
    var isDelivered: Bool { if case .delivered = self { true } else { false } }
    var isRetry: Bool { if case .retry = self { true } else { false } }
    var isRefused: Bool { if case .refused = self { true } else { false } }
}

/// The outbox's wake-up counts (the queue-depth gauges grow by them): only the rows of
/// commands whose writes stand.
@Suite struct CommitWakerTests {
    struct Refused: Error {}

    @Test func rowsOfACommandThatFailsInsideACommittedGroupAreNotCounted() async throws {
        try await withTemporaryStore { store, _ in
            let waker = CommitWaker<String>()
            let woken = NIOLockedValueBox<[String: Int]>([:])
            waker.setWaker { counts in woken.withLockedValue { $0.merge(counts, uniquingKeysWith: +) } }
            // Submitted back to back, so usually one group: one command stands, the other fails.
            let kept = Task { try await store.write { tx in waker.queued(1, for: "hook", in: tx) } }
            let failed = Task {
                try await store.write { tx in
                    waker.queued(2, for: "hook", in: tx)
                    waker.queued(5, for: "other", in: tx)
                    throw Refused()
                }
            }
            try await kept.value
            await #expect(throws: Refused.self) { try await failed.value }
            #expect(woken.withLockedValue { $0 } == ["hook": 1])
            // A failing command alone in its group wakes nobody.
            await #expect(throws: Refused.self) {
                try await store.write { tx in
                    waker.queued(3, for: "hook", in: tx)
                    throw Refused()
                }
            }
            try await store.write { tx in waker.queued(1, for: "other", in: tx) }
            #expect(woken.withLockedValue { $0 } == ["hook": 1, "other": 1])
        }
    }
}
