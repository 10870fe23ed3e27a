import Foundation
import LaminaClient
import LaminaModel
import LaminaNode
import Testing

struct ClientWaitTimeout: Error, CustomStringConvertible {
    var waitingFor: String
    var description: String { "timed out waiting for \(waitingFor)" }
}

/// The SDK against a real node: `LaminaClient` syncing over `TransportSyncConnector`
/// (TLS + HTTP/2 on loopback), tokens minted by the node's development identity provider.
@Suite struct ClientEndToEndTests {
    static let alice: UserID = "alice"
    static let bob: UserID = "bob"

    /// A client of `user` on `node` with its own temporary data directory.
    static func client(_ user: UserID, on node: TestNode) throws -> LaminaClient {
        let configuration = LaminaConfiguration(
            nodeURL: URL(string: node.server.url)!,
            trust: .certificateAuthorities(URL(fileURLWithPath: node.server.prepared.certificatePath)),
            dataDirectory: Fixtures.temporaryDirectory("client-\(user)"))
        return try LaminaClient(configuration: configuration, user: user)
    }

    /// Connects `client` over the network, minting dev tokens for its user.
    static func connect(_ client: LaminaClient, on node: TestNode) async throws {
        let dev = node.dev
        let user = client.user
        try await client.connect { nonce in try dev.mintToken(user: user, nonce: nonce) }
    }

    /// Returns once `condition` holds on `client`'s store, re-checking after every committed
    /// batch of changes; throws after `timeout`.
    static func waitUntil(
        _ client: LaminaClient, _ what: String, timeout: Duration = .seconds(60),
        _ condition: @escaping @Sendable () throws -> Bool
    ) async throws {
        let changes = client.changes()  // subscribed before the first check: no batch is missed
        if try condition() { return }
        let met = try await withThrowingTaskGroup(of: Bool.self) { group in
            group.addTask {
                for await _ in changes { if try condition() { return true } }
                return false
            }
            group.addTask {
                try await Task.sleep(for: timeout)
                return false
            }
            let first = try await group.next() ?? false
            group.cancelAll()
            return first
        }
        if !met { throw ClientWaitTimeout(waitingFor: what) }
    }

    @Test func queuedMessagesReachTheNodeAndTheOtherUserInOrderOnce() async throws {
        let node = try await TestNode.start("client-e2e")
        let alice = try Self.client(Self.alice, on: node)
        let bob = try Self.client(Self.bob, on: node)
        try await Self.connect(bob, on: node)

        // Offline: the conversation and three messages wait in Alice's outbox.
        let conversation = try alice.newConversation(
            participants: [Self.bob], options: ConversationOptions(isDistinct: false)
        ).id
        let sent: [MessageID] = try ["one", "two", "three"].map { text in
            try alice.send(alice.newMessage(parts: [MessagePart.with(text: text)]), in: conversation).id
        }
        #expect(try sent.allSatisfy { try !alice.isSent($0) })

        try await Self.connect(alice, on: node)
        try await Self.waitUntil(alice, "alice's three messages to be sent") {
            try sent.allSatisfy { try alice.isSent($0) }
        }
        let alicesCopies = try alice.messages(in: conversation).map(\.message)
        #expect(alicesCopies.map(\.id) == sent)
        #expect(alicesCopies.allSatisfy { $0.position != nil && $0.sentAt != nil })

        try await Self.waitUntil(bob, "bob to receive the three messages") {
            try bob.messages(in: conversation).count >= sent.count
        }
        let received = try bob.messages(in: conversation).map(\.message)
        #expect(received.map(\.id) == sent)
        #expect(received.map(\.sender) == Array(repeating: Self.alice, count: 3))
        #expect(
            received.map(\.parts).map { $0.map(\.content) }
                == ["one", "two", "three"].map { [.inline(Array($0.utf8))] })
        #expect(received.map(\.position) == alicesCopies.map(\.position))
        #expect(try bob.conversation(conversation)?.conversation.participants == [Self.alice, Self.bob])

        // Bob's device sends delivery receipts: Alice's copies show him as delivered.
        try await Self.waitUntil(alice, "bob's delivery receipts at alice") {
            try alice.messages(in: conversation).allSatisfy {
                ($0.message.recipientStatus[Self.bob] ?? .pending) >= .delivered
            }
        }

        try await alice.close()
        try await bob.close()
        await node.stop()
    }

    @Test func aBadTrustFileIsASettingError() throws {
        let configuration = LaminaConfiguration(
            nodeURL: URL(string: "https://127.0.0.1:1")!,
            trust: .pinnedCertificate(URL(fileURLWithPath: "/nonexistent/lamina-node.pem")),
            dataDirectory: Fixtures.temporaryDirectory("client-badtrust"))
        let error = #expect(throws: ClientError.self) { try TransportSyncConnector.connector(for: configuration) }
        #expect(error?.code == .invalidSetting)
    }
}
