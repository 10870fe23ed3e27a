import Foundation
import LaminaModel
import LaminaWire
import Testing

@testable import LaminaClient

@Suite struct SyncSessionTests {
    @Test func offlineSendsAreQueuedThenSentOnceAndInOrder() async throws {
        try await withDevices { root in
            let node = FakeNode()
            await node.setReachable(false)
            let a = try TestDevice(user: alice, node: node, directory: try deviceDirectory(root, "a"))
            try await a.connect()
            let withBob = try a.client.newConversation(participants: [bob])
            let withCarol = try a.client.newConversation(
                participants: [carol], options: ConversationOptions(isDistinct: false))
            var sent: [MessageID] = []
            for i in 0..<6 {
                let m = try a.client.send(try a.text("m\(i)"), in: i.isMultiple(of: 2) ? withBob.id : withCarol.id)
                sent.append(m.id)
                #expect(m.message.isSent == false)
            }
            // Two creations and six sends wait in the outbox, in order.
            let kinds = try a.client.store.outboxEntries().map(\.kind)
            #expect(
                kinds == ["conversation.create", "message.send", "conversation.create"]
                    + Array(repeating: "message.send", count: 5))
            #expect(try a.client.conversation(withBob.id)?.isSynced == false)
            // The engine finds the node down and backs off (it reports reconnecting, then asks
            // for the delay: wait for both, in a loaded run the second comes later).
            try await a.events.waitFor("a reconnect event") {
                $0.contains { if case .reconnecting = $0 { true } else { false } }
            }
            try await a.delays.waitFor("a reconnect delay") { !$0.isEmpty }
            #expect(await node.snapshot.sendAttempts.isEmpty)
            await node.setReachable(true)
            try await node.waitFor("six messages") { $0.appliedMessages.count == 6 }
            let ids = sent
            try await eventually(a.client, "all sent") { try ids.allSatisfy { try a.client.isSent($0) } }
            let snapshot = await node.snapshot
            #expect(snapshot.appliedMessages == sent)
            #expect(snapshot.sendAttempts == sent)
            #expect(try a.client.conversation(withBob.id)?.isSynced == true)
            await a.client.disconnect()
        }
    }

    @Test func anAckSetsIsSentWithTheNodesPositionAndSentAt() async throws {
        try await withDevices { root in
            let node = FakeNode()
            let a = try TestDevice(user: alice, node: node, directory: try deviceDirectory(root, "a"))
            try await a.connect()
            try await node.waitFor("live") { $0.liveSessions == 1 }
            let c = try a.client.newConversation(participants: [bob])
            let m = try a.client.send(try a.text("hello"), in: c.id)
            try await eventually(a.client, "sent") { try a.client.isSent(m.id) }
            let stored = try #require(try a.client.message(m.id))
            #expect(stored.message.position != nil)
            #expect(stored.message.sentAt != nil)
            #expect(stored.message.recipientStatus[bob] == .sent)
            #expect(try a.client.store.outboxEntries().filter { $0.kind == "message.send" }.isEmpty)
            await a.client.disconnect()
        }
    }

    @Test func aStreamDroppedBeforeTheAckLeavesEachMessageSentOnceUnderItsID() async throws {
        try await withDevices { root in
            let node = FakeNode()
            let a = try TestDevice(user: alice, node: node, directory: try deviceDirectory(root, "a"))
            let c = try a.client.newConversation(participants: [bob])
            let drafts = try (0..<3).map { try a.text("m\($0)") }
            await node.setDropBeforeAck(drafts[1].id)
            for d in drafts { try a.client.send(d, in: c.id) }
            try await a.connect()
            try await eventually(a.client, "all sent") { try drafts.allSatisfy { try a.client.isSent($0.id) } }
            #expect(try a.client.store.outboxEntries().filter { $0.kind == "message.send" }.isEmpty)
            try await node.waitFor("a second session") { $0.connections >= 2 }
            let snapshot = await node.snapshot
            #expect(snapshot.appliedMessages == drafts.map(\.id))  // each applied once, in order
            // The node applied the dropped one: the catch-up after the reconnect (SYNC comes
            // before the outbox is sent again) tells the client so, and it is not sent again.
            #expect(snapshot.sendAttempts.filter { $0 == drafts[1].id }.count == 1)
            #expect(try a.client.messages(in: c.id).count == 3)
            await a.client.disconnect()
        }
    }

    @Test func twoDevicesOfOneUserStayInStep() async throws {
        try await withDevices { root in
            let node = FakeNode()
            let a1 = try TestDevice(user: alice, node: node, directory: try deviceDirectory(root, "a1"))
            let a2 = try TestDevice(user: alice, node: node, directory: try deviceDirectory(root, "a2"))
            let b = try TestDevice(user: bob, node: node, directory: try deviceDirectory(root, "b"))
            for d in [a1, a2, b] { try await d.connect() }
            try await node.waitFor("three live sessions") { $0.liveSessions == 3 }
            let c = try a1.client.newConversation(participants: [bob])
            let mine = try a1.client.send(try a1.text("from device 1"), in: c.id)
            // The other device of alice gets the conversation and alice's message, as sent and read.
            try await eventually(a2.client, "a2 has the message") {
                try a2.client.message(mine.id)?.message.isSent == true
            }
            #expect(try a2.client.conversation(c.id)?.conversation.participants == [alice, bob])
            #expect(try a2.client.message(mine.id)?.isUnread == false)
            // Bob answers; both of alice's devices get it unread, one reads it, the other follows.
            try await eventually(b.client, "bob has it") { try b.client.message(mine.id) != nil }
            let reply = try b.client.send(try b.text("hi alice"), in: c.id)
            try await eventually(a1.client, "a1 has the reply") { try a1.client.message(reply.id) != nil }
            try await eventually(a2.client, "a2 has the reply") { try a2.client.message(reply.id)?.isUnread == true }
            try a1.client.markAsRead(reply.id)
            try await eventually(a2.client, "a2 sees it read") { try a2.client.message(reply.id)?.isUnread == false }
            try await eventually(b.client, "bob sees alice read it") {
                try b.client.message(reply.id)?.message.recipientStatus[alice] == .read
            }
            #expect(try a1.client.conversation(c.id)?.unreadMessageCount == 0)
            #expect(try a2.client.conversation(c.id)?.unreadMessageCount == 0)
            for d in [a1, a2, b] { await d.client.disconnect() }
        }
    }

    @Test func deliveryReceiptsReachTheSender() async throws {
        try await withDevices { root in
            let node = FakeNode()
            let a = try TestDevice(user: alice, node: node, directory: try deviceDirectory(root, "a"))
            let b = try TestDevice(user: bob, node: node, directory: try deviceDirectory(root, "b"))
            for d in [a, b] { try await d.connect() }
            // First a conversation without receipts, then one with: receipts go out (in
            // stream order) for the second only.
            let quiet = try a.client.newConversation(
                participants: [bob], options: ConversationOptions(isDistinct: false, deliveryReceiptsEnabled: false))
            let q = try a.client.send(try a.text("no receipt"), in: quiet.id)
            try await eventually(b.client, "bob has the quiet one") { try b.client.message(q.id) != nil }
            let c = try a.client.newConversation(participants: [bob])
            let m = try a.client.send(try a.text("receipt please"), in: c.id)
            try await eventually(a.client, "bob's status delivered") {
                try a.client.message(m.id)?.message.recipientStatus[bob] == .delivered
            }
            let receipts = await node.snapshot.receipts
            #expect(receipts.map(\.conversationID) == [c.id])
            // Delivery receipts off (SPEC §6.2, Layer): another participant stays sent until read.
            #expect(try a.client.message(q.id)?.message.recipientStatus[bob] == .sent)
            #expect(try a.client.message(q.id)?.message.recipientStatus[alice] == .read)
            for d in [a, b] { await d.client.disconnect() }
        }
    }

    @Test func authenticationAsksForATokenOnceThenResumesAndAsksAgainWhenTheSessionExpires() async throws {
        try await withDevices { root in
            let node = FakeNode()
            let a = try TestDevice(user: alice, node: node, directory: try deviceDirectory(root, "a"))
            try await a.connect()
            try await node.waitFor("live") { $0.liveSessions == 1 }
            #expect(a.tokenRequests.all == ["nonce-1"])
            #expect(a.client.authenticatedUser?.userID == alice)
            #expect(try a.client.store.sessionToken() != nil)
            // A dropped stream resumes with the session token: no new identity token.
            await node.dropAll()
            try await node.waitFor("resumed") { $0.resumes == 1 && $0.liveSessions == 1 }
            #expect(a.tokenRequests.count == 1)
            // The node ends the session: the app is asked for a new identity token.
            await node.expireSessions()
            try await node.waitFor("re-authenticated") { $0.tokensAccepted == 2 && $0.liveSessions == 1 }
            #expect(a.tokenRequests.count == 2)
            // And the session works.
            let c = try a.client.newConversation(participants: [bob])
            let m = try a.client.send(try a.text("after expiry"), in: c.id)
            try await eventually(a.client, "sent") { try a.client.isSent(m.id) }
            await a.client.disconnect()
        }
    }

    @Test func aRefusedIdentityTokenStopsTheEngineWithAnAuthenticationError() async throws {
        try await withDevices { root in
            let node = FakeNode()
            let a = try TestDevice(user: alice, node: node, directory: try deviceDirectory(root, "a"), badTokens: true)
            try await a.connect()
            try await a.events.waitFor("the engine fails") {
                $0.contains { if case .failed = $0 { true } else { false } }
            }
            let failure = a.events.all.compactMap { e -> ClientError? in
                if case .failed(let error) = e { error } else { nil }
            }.first
            #expect(failure?.code == .authenticationFailed)
            #expect(failure?.reason.hasPrefix("bad-signature") == true)
            #expect(a.client.authenticatedUser == nil)
        }
    }

    @Test func aRefusedSyncStopsTheEngineWithSyncRefused() async throws {
        try await withDevices { root in
            let node = FakeNode()
            let a = try TestDevice(user: alice, node: node, directory: try deviceDirectory(root, "a"))
            // the fake node's feed is shorter (its data was reset)
            try a.client.store.setSyncCursor(1_000, on: NodeID(1))
            try await a.connect()
            try await a.events.waitFor("the engine fails") {
                $0.contains { if case .failed = $0 { true } else { false } }
            }
            let failure = a.events.all.compactMap { e -> ClientError? in
                if case .failed(let error) = e { error } else { nil }
            }.first
            #expect(failure?.code == .syncRefused)
            #expect(failure?.reason.hasPrefix("invalid-argument") == true)
            // It stops instead of retrying a refusal that cannot change.
            #expect(!a.events.all.contains { if case .reconnecting = $0 { true } else { false } })
        }
    }

    @Test func aRefusedCommandFailsWithTheNodesCodeAndATransientOneIsRetried() async throws {
        try await withDevices { root in
            let node = FakeNode()
            let a = try TestDevice(user: alice, node: node, directory: try deviceDirectory(root, "a"))
            let delegate = FailureRecordingDelegate()
            a.client.addDelegate(delegate)
            try await a.connect()
            try await node.waitFor("live") { $0.liveSessions == 1 }
            let c = try a.client.newConversation(participants: [bob])
            await node.setRejectNextSend(.overloaded, retryAfter: 50)
            let retried = try a.client.send(try a.text("retry me"), in: c.id)
            try await eventually(a.client, "sent after retry") { try a.client.isSent(retried.id) }
            #expect(a.delays.all.contains(.milliseconds(50)))
            #expect(await node.snapshot.sendAttempts.filter { $0 == retried.id }.count == 2)
            await node.setRejectNextSend(.notAParticipant)
            let refused = try a.client.send(try a.text("refused"), in: c.id)
            try await node.waitFor("refused send seen") { $0.sendAttempts.contains(refused.id) }
            try await a.events.waitFor("the failure") {
                $0.contains { if case .commandFailed(let f) = $0 { f.id == refused.id.uuid } else { false } }
            }
            let failure = try #require(try a.client.sendFailure(of: refused.id))
            #expect(failure.kind == OutboxCommandKind.sendMessage.rawValue)
            #expect(failure.code == WireError.Code.notAParticipant.wireValue)
            #expect(failure.reason == "rejected by the test")
            #expect(try a.client.isSent(refused.id) == false)
            // The delegate hears of the failure for good, not of the retried one.
            try await delegate.failures.waitFor("the failure at the delegate") { !$0.isEmpty }
            #expect(delegate.failures.all == [failure])
            #expect(failure.error.code == ClientError.Code(rawValue: WireError.Code.notAParticipant.name))
            #expect(failure.error.reason == "rejected by the test")
            await a.client.disconnect()
        }
    }

    @Test func typingIndicatorsReachOtherParticipants() async throws {
        try await withDevices { root in
            let node = FakeNode()
            let a = try TestDevice(user: alice, node: node, directory: try deviceDirectory(root, "a"))
            let b = try TestDevice(user: bob, node: node, directory: try deviceDirectory(root, "b"))
            for d in [a, b] { try await d.connect() }
            let c = try a.client.newConversation(participants: [bob])
            let m = try a.client.send(try a.text("hi"), in: c.id)
            try await eventually(b.client, "bob has it") { try b.client.message(m.id) != nil }
            try await a.client.typing(.started, in: c.id)
            try await a.client.typing(.finished, in: c.id)
            try await node.waitFor("two indicators") { $0.typing.count >= 2 }
            let typingOf = { @Sendable (events: [SyncEvent]) -> [TypingChanged] in
                events.compactMap { e in if case .typing(let t) = e { t } else { nil } }
            }
            try await b.events.waitFor("bob sees alice typing") { typingOf($0).count >= 2 }
            let seen = typingOf(b.events.all)
            #expect(seen.map(\.state) == [.started, .finished])
            #expect(seen.allSatisfy { $0.user == alice && $0.conversationID == c.id })
            for d in [a, b] { await d.client.disconnect() }
        }
    }

    @Test func anIndicatorNotRefreshedEndsInTheSDKSixSecondsAfterItArrived() async throws {
        try await withDevices { root in
            let node = FakeNode()  // relays indicators, never ends them itself
            let clock = VirtualClock()
            let a = try TestDevice(user: alice, node: node, directory: try deviceDirectory(root, "a"))
            let b = try TestDevice(user: bob, node: node, directory: try deviceDirectory(root, "b"), clock: clock)
            for d in [a, b] { try await d.connect() }
            let c = try a.client.newConversation(participants: [bob])
            let m = try a.client.send(try a.text("hi"), in: c.id)
            try await eventually(b.client, "bob has it") { try b.client.message(m.id) != nil }
            let sentAt = clock.now
            try await a.client.typing(.started, in: c.id)
            try await a.client.typing(.paused, in: c.id)  // paused is never refreshed
            let typingOf = { @Sendable (events: [SyncEvent]) -> [TypingChanged] in
                events.compactMap { e in if case .typing(let t) = e { t } else { nil } }
            }
            try await b.events.waitFor("bob sees alice pause") { typingOf($0).contains { $0.state == .paused } }
            // Bob's own timer (virtual time) ends it.
            try await b.events.waitFor("alice's indicator ends at bob") {
                typingOf($0).contains { $0.state == .finished }
            }
            #expect(clock.now.millisecondsSince1970 - sentAt.millisecondsSince1970 >= Typing.expiryMilliseconds)
            // Virtual time passes at the first yield, so on a loaded machine bob's timer may end
            // `started` before `paused` arrives ([started, finished, paused, finished]): what
            // must hold is that the unrefreshed `paused` is ended, last.
            let states = typingOf(b.events.all).map(\.state)
            #expect(states.first == .started && Array(states.suffix(2)) == [.paused, .finished], "\(states)")
            #expect(b.client.typingParticipants(in: c.id).isEmpty)
            #expect(await node.snapshot.typing.map(\.state) == [.started, .paused])
            for d in [a, b] { await d.client.disconnect() }
        }
    }
}

@Suite struct SyncClientFlowTests {
    @Test func startedIsResentEvery2500msWhileTypingThenStops() async throws {
        try await withDevices { root in
            let node = FakeNode()
            let clock = VirtualClock()
            let a = try TestDevice(user: alice, node: node, directory: try deviceDirectory(root, "a"), clock: clock)
            let c = try a.client.newConversation(participants: [bob])
            try a.client.send(try a.text("hi"), in: c.id)
            try await a.connect()
            try await node.waitFor("the conversation exists") { $0.appliedMessages.count == 1 }
            let start = clock.now
            try await a.client.typing(.started, in: c.id)
            try await node.waitFor("three refreshes") { $0.typing.count >= 4 }
            try await a.client.typing(.finished, in: c.id)
            try await node.waitFor("finished") { $0.typing.last?.state == .finished }
            let typing = await node.snapshot.typing
            #expect(typing.dropLast().allSatisfy { $0.state == .started && $0.conversationID == c.id })
            #expect(a.delays.all.contains(.milliseconds(2_500)))
            #expect(a.delays.all.allSatisfy { $0 <= .milliseconds(2_500) })
            // Virtual time moved by whole refresh intervals only.
            #expect((clock.now.millisecondsSince1970 - start.millisecondsSince1970) % 2_500 == 0)
            await a.client.disconnect()
        }
    }

    @Test func aDistinctConversationResolvedByTheNodeFollowsToTheExistingOne() async throws {
        try await withDevices { root in
            let node = FakeNode()
            let a = try TestDevice(user: alice, node: node, directory: try deviceDirectory(root, "a"))
            let b = try TestDevice(user: bob, node: node, directory: try deviceDirectory(root, "b"))
            // Bob's distinct conversation with alice reaches the node first.
            try await b.connect()
            let bobs = try b.client.newConversation(participants: [alice])
            let first = try b.client.send(try b.text("from bob"), in: bobs.id)
            try await node.waitFor("bob's message") { $0.appliedMessages == [first.id] }
            // Alice, offline, made her own distinct conversation with bob and wrote in it.
            let alices = try a.client.newConversation(participants: [bob])
            let reply = try a.client.send(try a.text("from alice"), in: alices.id)
            try await a.connect()
            try await eventually(a.client, "alice's message sent") { try a.client.isSent(reply.id) }
            // Alice's conversation follows to bob's identifier, with both messages in it.
            #expect(try a.client.store.currentIdentifier(of: alices.id) == bobs.id)
            #expect(try a.client.conversation(alices.id)?.id == bobs.id)
            #expect(Set(try a.client.messages(in: bobs.id).map(\.id)) == [first.id, reply.id])
            try await eventually(b.client, "bob has alice's message") {
                try b.client.message(reply.id)?.message.conversationID == bobs.id
            }
            for d in [a, b] { await d.client.disconnect() }
        }
    }

    @Test func aNewConversationsFirstMessageIsPipelinedBehindItsCreation() async throws {
        try await withDevices { root in
            let node = FakeNode()
            let a = try TestDevice(user: alice, node: node, directory: try deviceDirectory(root, "a"))
            let b = try TestDevice(user: bob, node: node, directory: try deviceDirectory(root, "b"))
            try await b.connect()
            let bobs = try b.client.newConversation(participants: [alice])
            let first = try b.client.send(try b.text("from bob"), in: bobs.id)
            try await node.waitFor("bob's message") { $0.appliedMessages == [first.id] }
            // Alice's creation resolves to bob's conversation; the node answers nothing until
            // it has her first message too: no round trip between the two.
            await node.setHoldAtNextCreation()
            try await a.connect()
            let alices = try a.client.newConversation(participants: [bob])
            let reply = try a.client.send(try a.text("from alice"), in: alices.id)
            try await node.waitFor("creation and message sent before any answer") {
                $0.held == [.createConversation, .sendMessage]
            }
            #expect(try !a.client.isSent(reply.id))
            await node.release()
            try await eventually(a.client, "alice's message sent") { try a.client.isSent(reply.id) }
            #expect(try a.client.store.currentIdentifier(of: alices.id) == bobs.id)
            #expect(Set(try a.client.messages(in: bobs.id).map(\.id)) == [first.id, reply.id])
            try await eventually(b.client, "bob has alice's message") {
                try b.client.message(reply.id)?.message.conversationID == bobs.id
            }
            #expect(await node.snapshot.appliedMessages == [first.id, reply.id])
            for d in [a, b] { await d.client.disconnect() }
        }
    }

    @Test func aMessageBehindACreationThatIsRetriedIsRetriedAfterItNotLost() async throws {
        try await withDevices { root in
            let node = FakeNode()
            let a = try TestDevice(user: alice, node: node, directory: try deviceDirectory(root, "a"))
            await node.setRejectNextCreation(.overloaded, retryAfter: 10)
            try await a.connect()
            let c = try a.client.newConversation(participants: [bob])
            let m = try a.client.send(try a.text("hi"), in: c.id)
            try await eventually(a.client, "the message sent") { try a.client.isSent(m.id) }
            #expect(try a.client.store.outboxFailures().isEmpty)
            #expect(await node.snapshot.appliedMessages == [m.id])
            await a.client.disconnect()
        }
    }

    @Test func queuedCommandsSurviveARestartAndGoOutOnce() async throws {
        try await withDevices { root in
            let node = FakeNode()
            let dir = try deviceDirectory(root, "a")
            let before = try TestDevice(user: alice, node: node, directory: dir)
            let c = try before.client.newConversation(participants: [bob])
            let ids = try (0..<3).map { try before.client.send(try before.text("m\($0)"), in: c.id).id }
            try await before.client.close()
            let after = try TestDevice(user: alice, node: node, directory: dir)
            #expect(try after.client.store.outboxEntries().count == 4)
            try await after.connect()
            try await eventually(after.client, "all sent") { try ids.allSatisfy { try after.client.isSent($0) } }
            #expect(await node.snapshot.appliedMessages == ids)
            #expect(await node.snapshot.sendAttempts == ids)
            await after.client.disconnect()
        }
    }

    @Test func deauthenticateWipesTheUsersLocalData() async throws {
        try await withDevices { root in
            let node = FakeNode()
            let a = try TestDevice(user: alice, node: node, directory: try deviceDirectory(root, "a"))
            try await a.connect()
            let c = try a.client.newConversation(participants: [bob])
            let m = try a.client.send(try a.text("bye"), in: c.id)
            try await eventually(a.client, "sent") { try a.client.isSent(m.id) }
            let folder = a.client.store.location.userDirectory
            #expect(FileManager.default.fileExists(atPath: folder.path))
            try await a.client.deauthenticate()
            #expect(!FileManager.default.fileExists(atPath: folder.path))
            #expect(a.client.authenticatedUser == nil)
            #expect(await node.snapshot.endedSessions == 1)
            #expect(await node.snapshot.connections == 1)  // signed out: no reconnect
            // A new client of the same user starts empty and authenticates anew.
            let again = try TestDevice(user: alice, node: node, directory: try deviceDirectory(root, "a"))
            #expect(try again.client.conversation(c.id) == nil)
            #expect(try again.client.store.sessionToken() == nil)
        }
    }

    @Test func deauthenticateNeedsALiveSessionAndKeepsTheDataWithout() async throws {
        try await withDevices { root in
            let node = FakeNode()
            let a = try TestDevice(user: alice, node: node, directory: try deviceDirectory(root, "a"))
            let c = try a.client.newConversation(participants: [bob])
            await #expect { try await a.client.deauthenticate() } throws: {
                ($0 as? ClientError)?.code == .notConnected
            }
            #expect(try a.client.conversation(c.id) != nil)
            #expect(await node.snapshot.endedSessions == 0)
        }
    }

    @Test func authenticationRequiredRequeuesTheCommandAndAuthenticatesAgain() async throws {
        try await withDevices { root in
            let node = FakeNode()
            let a = try TestDevice(user: alice, node: node, directory: try deviceDirectory(root, "a"))
            try await a.connect()
            try await node.waitFor("live") { $0.liveSessions == 1 }
            await node.forgetSessions()
            let c = try a.client.newConversation(participants: [bob])
            let m = try a.client.send(try a.text("after a node restart"), in: c.id)
            try await eventually(a.client, "sent") { try a.client.isSent(m.id) }
            #expect(a.tokenRequests.count == 2)
            #expect(await node.snapshot.appliedMessages == [m.id])
            #expect(try a.client.store.outboxFailures().isEmpty)
            await a.client.disconnect()
        }
    }
}

@Suite struct PendingRequestTests {
    /// The session's one table of requests awaiting an answer: when the stream ends, every
    /// caller still waiting fails together, each told which request went unanswered.
    @Test func requestsWaitingWhenTheStreamEndsFailTogetherNamingTheirFrame() async throws {
        try await withDevices { root in
            let node = FakeNode()
            await node.setUnanswered([.blockUser, .registerPushToken])
            let a = try TestDevice(user: alice, node: node, directory: try deviceDirectory(root, "a"))
            try await a.connect()
            try await node.waitFor("live") { $0.liveSessions == 1 }
            let client = a.client
            let block = Task { () -> ClientError? in
                do throws(ClientError) { try await client.block(carol) } catch { return error }
                return nil
            }
            let push = Task { () -> ClientError? in
                do throws(ClientError) { try await client.setPushToken(.gateway(token: "device-token")) } catch {
                    return error
                }
                return nil
            }
            try await node.waitFor("both sent") {
                $0.commands.contains(.blockUser) && $0.commands.contains(.registerPushToken)
            }
            await node.setReachable(false)
            await node.dropAll()
            let blockError = try #require(await block.value)
            let pushError = try #require(await push.value)
            #expect(blockError.code == .disconnected)
            #expect(blockError.reason.contains("block-user"), "\(blockError.reason)")
            #expect(pushError.code == .disconnected)
            #expect(pushError.reason.contains("register-push-token"), "\(pushError.reason)")
            await node.setReachable(true)  // the engine's backoff waits for the node
            await a.client.disconnect()
        }
    }
}
