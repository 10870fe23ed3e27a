import Foundation
import LaminaModel
import LaminaNode
import NIOCore
import NIOPosix
import Testing

/// The built `lamina` binary against a real node on loopback: every wait is on the
/// processes' output (or exit), with a time limit.
@Suite struct CLIBinaryTests {
    @Test func tokenOutputVerifiesWithTheNodesDevProvider() async throws {
        try await CLITestNode.with("token") { node in
            let verifier = IdentityTokenVerifier(providers: [node.dev.provider], maxClockSkew: .seconds(60))

            // With a nonce: offline signing with the node's key.
            let given = try await CLIProcess.run(
                "token",
                [
                    "token", "--user", "alice", "--nonce", "n-123",
                    "--node-data", node.server.prepared.dataDirectory.path,
                ], in: node.workDirectory)
            #expect(given.status == 0, "\(given.stderr)")
            let claims = try verifier.verify(given.stdout.trimmingCharacters(in: .whitespacesAndNewlines), now: .now())
            #expect(claims.identity.userID == "alice")
            #expect(claims.nonce == "n-123")

            // Without: the CLI asks the node for a nonce and prints it on standard error.
            let asked = try await node.run("token", "bob")
            #expect(asked.status == 0, "\(asked.stderr)")
            let fresh = try verifier.verify(asked.stdout.trimmingCharacters(in: .whitespacesAndNewlines), now: .now())
            #expect(fresh.identity.userID == "bob")
            #expect(asked.stderr.contains("nonce: \(fresh.nonce) "))
        }
    }

    @Test func aFileSentWithLaminaSendIsUploadedAsRichContent() async throws {
        try await CLITestNode.with("send-file") { node in
            let bytes = Data((0..<100_000).map { UInt8(truncatingIfNeeded: $0 &* 7) })
            let path = node.workDirectory.appendingPathComponent("photo.png")
            try bytes.write(to: path)
            let sent = try await node.run("send", "alice", ["--to", "bob", "--file", path.path, "a", "photo"])
            #expect(sent.status == 0, "\(sent.stderr)")

            // The node holds exactly those bytes, complete, and Bob's list shows the part.
            let complete = node.server.prepared.dataDirectory.appendingPathComponent("content/complete")
            let stored = try FileManager.default.contentsOfDirectory(atPath: complete.path)
            #expect(stored.count == 1)
            #expect(try stored.first.map { try Data(contentsOf: complete.appendingPathComponent($0)) } == bytes)
            let listed = try await node.run("conversations", "bob")
            #expect(listed.stdout.contains("alice: a photo [image/png, 100000 bytes]"), "\(listed.stdout)")

            let missing = try await node.run("send", "alice", ["--to", "bob", "--file", "/nonexistent/file.bin"])
            #expect(missing.status != 0)
            #expect(missing.stderr.contains("no file at /nonexistent/file.bin"), "\(missing.stderr)")
        }
    }

    @Test func aMessageSentByAliceIsListedInBobsConversations() async throws {
        try await CLITestNode.with("send") { node in
            let sent = try await node.run("send", "alice", ["--to", "bob", "hello", "from", "alice"])
            #expect(sent.status == 0, "\(sent.stderr)")
            let id = sent.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
            #expect((try? MessageID(parsing: id)) != nil, "not a message id: \(id)")
            #expect(sent.stderr.contains("sent to bob"))

            let listed = try await node.run("conversations", "bob")
            #expect(listed.status == 0, "\(listed.stderr)")
            #expect(listed.stdout.contains("participants: alice, bob   unread: 1   messages: 1"), "\(listed.stdout)")
            #expect(listed.stdout.contains("] alice: hello from alice"), "\(listed.stdout)")

            // Sending again with --conversation lands in the same conversation.
            let conversation = try #require(
                listed.stdout.split(separator: "\n").first?.split(separator: " ").last.map(String.init))
            let again = try await node.run("send", "alice", ["--conversation", conversation, "second"])
            #expect(again.status == 0, "\(again.stdout) \(again.stderr)")
            let relisted = try await node.run("conversations", "bob")
            #expect(
                relisted.stdout.contains("\(conversation)\n   participants: alice, bob   unread: 2   messages: 2"),
                "\(relisted.stdout)")
            #expect(relisted.stdout.contains("] alice: second"))
        }
    }

    @Test func twoInteractiveChatsExchangeMessagesWithDeliveryAndReadMarks() async throws {
        try await CLITestNode.with("chat") { node in
            let bob = try node.start("chat", "bob")
            defer { bob.stop() }
            try await bob.waitFor("No conversations yet")

            let alice = try node.start("chat", "alice", ["--with", "bob"])
            defer { alice.stop() }
            try await alice.waitFor("── conversation with bob ──")
            alice.write("hello bob\n")
            try await alice.waitFor("alice: hello bob  · queued")
            try await alice.waitFor("[✓ sent] hello bob")
            try await alice.waitFor("[✓✓ delivered to bob] hello bob")

            // Bob has no conversation open: a notice, then /open shows it and marks it read.
            try await bob.waitFor("(new message from alice in the conversation with alice: \"hello bob\" — /open 1)")
            bob.write("/open 1\n")
            try await bob.waitFor("── conversation with alice ──")
            try await bob.waitFor("] alice: hello bob")
            try await alice.waitFor("[✓✓ read by bob] hello bob")

            // Now both are open: a reply appears live and is read at once.
            bob.write("hi alice\n")
            try await alice.waitFor("] bob: hi alice")
            try await bob.waitFor("[✓✓ read by alice] hi alice")

            // Unknown commands are answered, not fatal.
            bob.write("/bogus\n")
            try await bob.waitFor("! unknown command /bogus")

            // A third user pipes a line into a group chat and leaves at the end of input.
            let carol = try await node.run("chat", "carol", ["--with", "alice,bob"], stdin: "group hello\n")
            #expect(carol.status == 0, "\(carol.stdout)\(carol.stderr)")
            #expect(carol.stdout.contains("carol: group hello  · queued"))
            #expect(carol.stdout.hasSuffix("bye\n"))
            try await alice.waitFor(
                "(new message from carol in the conversation with bob, carol: \"group hello\" — /open 1)")

            bob.write("/quit\n")
            #expect(try await bob.exit() == 0)
            alice.closeInput()
            #expect(try await alice.exit() == 0)
            #expect(alice.stdout.hasSuffix("bye\n"))
        }
    }

    @Test func pipedLinesFromBothSidesOfADistinctConversationEndInOne() async throws {
        try await CLITestNode.with("distinct") { node in
            // Bob opens the conversation with alice before it exists anywhere.
            let bob = try node.start("chat", "bob", ["--with", "alice"])
            defer { bob.stop() }
            try await bob.waitFor("(new: it reaches the others with your first message)")

            let alice = try await node.run(
                "chat", "alice", ["--with", "bob"], stdin: "first from alice\nsecond from alice\n")
            #expect(alice.status == 0, "\(alice.stdout)\(alice.stderr)")

            try await bob.waitFor("(alice started this conversation first; continuing in it)")
            try await bob.waitFor("] alice: first from alice")
            try await bob.waitFor("] alice: second from alice")
            bob.write("reply\n")
            try await bob.waitFor("[✓ sent] reply")
            bob.closeInput()
            #expect(try await bob.exit() == 0)

            // One conversation on both sides, holding all three messages.
            let listed = try await node.run("conversations", "alice")
            #expect(listed.stdout.components(separatedBy: "participants:").count == 2, "\(listed.stdout)")
            #expect(listed.stdout.contains("participants: alice, bob   unread: 1   messages: 3"), "\(listed.stdout)")
        }
    }

    @Test func tailPrintsIncomingMessagesUntilInterrupted() async throws {
        try await CLITestNode.with("tail") { node in
            let tail = try node.start("tail", "bob", ["--mark-read"])
            defer { tail.stop() }
            try await tail.waitUntilStderr("tailing bob's incoming messages")
            let sent = try await node.run("send", "alice", ["--to", "bob", "tail me"])
            #expect(sent.status == 0, "\(sent.stderr)")
            try await tail.waitFor("(alice) [")
            try await tail.waitFor("] alice: tail me")
            tail.interrupt()
            #expect(try await tail.exit() == 0)

            let listed = try await node.run("conversations", "bob")
            #expect(listed.stdout.contains("unread: 0   messages: 1"), "\(listed.stdout)")  // --mark-read
        }
    }

    @Test func errorsHaveACodeAndAReason() async throws {
        try await CLITestNode.with("errors") { node in

            let noCA = try await CLIProcess.run("no-ca", ["conversations", "--user", "alice"], in: node.workDirectory)
            #expect(noCA.status == 1)
            #expect(noCA.stderr.hasPrefix("lamina: error [ca-file-missing]: no CA file at "), "\(noCA.stderr)")

            let badUser = try await node.run("conversations", "")
            #expect(badUser.status == 1)
            #expect(badUser.stderr.hasPrefix("lamina: error [invalid-user-id]: "), "\(badUser.stderr)")

            // Nothing listens on a port just closed.
            let closed = try await Self.closedPort()
            let unreachable = try await CLIProcess.run(
                "unreachable",
                [
                    "conversations", "--user", "alice", "--node", "https://127.0.0.1:\(closed)",
                    "--node-data", node.server.prepared.dataDirectory.path,
                ], in: node.workDirectory)
            #expect(unreachable.status == 1)
            #expect(
                unreachable.stderr.hasPrefix(
                    "lamina: error [node-unreachable]: cannot reach the node at https://127.0.0.1:\(closed)"),
                "\(unreachable.stderr)")

            let tooLong = try await node.run("send", "alice", ["--to", "bob", String(repeating: "x", count: 2_049)])
            #expect(tooLong.status == 1)
            #expect(tooLong.stderr.hasPrefix("lamina: error [inline-too-large]: "), "\(tooLong.stderr)")

            let noKey = try await CLIProcess.run(
                "no-key", ["token", "--user", "alice", "--nonce", "x", "--node-data", node.workDirectory.path],
                in: node.workDirectory)
            #expect(noKey.status == 1)
            #expect(noKey.stderr.hasPrefix("lamina: error [dev-key-missing]: "), "\(noKey.stderr)")
        }
    }

    /// A cursor counts in one node's feed (SPEC §6.5: a device may move between the nodes of a
    /// cluster): a client store that synced with a node whose data was since reset (a new node
    /// id) syncs the new node's feed from its start instead of failing. What it held from the
    /// old node stays in the store, and a send into such a conversation is refused with the
    /// node's not-found naming it. (A device cannot tell a reset node from another node of its
    /// cluster until WELCOME names the cluster: issue 14.)
    @Test func aStoreFromANodeWhoseDataWasResetSyncsTheNewNodesFeed() async throws {
        let first = try await CLITestNode.start("reset-1")
        let sent = try await first.run("send", "alice", ["--to", "bob", "before the reset"])
        await first.stop()
        #expect(sent.status == 0, "\(sent.stderr)")

        // A new node (new data directory), the same client stores.
        try await CLITestNode.with("reset-2", workDirectory: first.workDirectory) { node in
            let listed = try await node.run("conversations", "alice")
            #expect(listed.status == 0, "\(listed.stderr)")
            let again = try await node.run("send", "alice", ["--to", "bob", "after the reset"])
            #expect(again.status == 1)
            #expect(
                again.stderr.contains("the node refused the message: no conversation lamina:///conversations/"),
                "\(again.stderr)")
        }
    }

    @Test func tokensSignedWithAnotherNodesKeyAreRefusedClearly() async throws {
        try await CLITestNode.with("auth-a") { node in
            try await CLITestNode.with("auth-b") { other in
                // Node A's URL and certificate, node B's dev key.
                let refused = try await CLIProcess.run(
                    "wrong-key",
                    [
                        "conversations", "--user", "alice", "--node", node.server.url, "--ca",
                        node.server.prepared.certificatePath,
                        "--node-data", other.server.prepared.dataDirectory.path,
                    ] + CLITestNode.timeout("conversations"), in: node.workDirectory)
                #expect(refused.status == 1)
                #expect(
                    refused.stderr.hasPrefix(
                        "lamina: error [authentication-failed]: the node refused alice's session: "),
                    "\(refused.stderr)")
                #expect(refused.stderr.contains("--node-data"))
            }
        }
    }

    @Test func oneProcessPerStoreAndASecondDeviceWithItsOwnData() async throws {
        try await CLITestNode.with("lock") { node in
            let sent = try await node.run("send", "alice", ["--to", "bob", "for both devices"])
            #expect(sent.status == 0, "\(sent.stderr)")
            let chat = try node.start("chat", "bob")
            defer { chat.stop() }
            try await chat.waitFor("1. with alice")

            let second = try await node.run("conversations", "bob")
            #expect(second.status == 1)
            #expect(
                second.stderr.hasPrefix(
                    "lamina: error [store-in-use]: bob's local store is in use by another lamina process (pid \(chat.process.processIdentifier))"
                ), "\(second.stderr)")

            // Another data directory is another device of bob's: it syncs on its own.
            let device = try await node.run("conversations", "bob", ["--data", "./second-device"])
            #expect(device.status == 0, "\(device.stderr)")
            #expect(device.stdout.contains("] alice: for both devices"), "\(device.stdout)")

            chat.closeInput()
            #expect(try await chat.exit() == 0)
        }
    }

    @Test func linesTypedWhileTheNodeIsDownGoOutWhenItIsBack() async throws {
        try await CLITestNode.with("offline") { node in
            let alice = try node.start("chat", "alice", ["--with", "bob"])
            defer { alice.stop() }
            try await alice.waitFor("── conversation with bob ──")
            await node.stop()
            try await alice.waitFor("(offline: ")
            alice.write("typed while the node is down\n")
            try await alice.waitFor("alice: typed while the node is down  · queued")

            try await node.restart()
            try await alice.waitFor("(back online, in sync)")
            try await alice.waitFor("[✓ sent] typed while the node is down")
            #expect(
                alice.stdout.components(separatedBy: "(offline: ").count == 2,
                "one offline line per outage\n\(alice.stdout)")
            alice.closeInput()
            #expect(try await alice.exit() == 0)

            let bob = try await node.run("conversations", "bob")
            #expect(bob.stdout.contains("] alice: typed while the node is down"), "\(bob.stdout)")
        }
    }

    /// A loopback port with nothing listening (bound, then closed).
    static func closedPort() async throws -> Int {
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton).bind(
            host: "127.0.0.1", port: 0
        ).get()
        let port = channel.localAddress!.port!
        try await channel.close()
        return port
    }
}
