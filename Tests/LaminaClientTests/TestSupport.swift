import Foundation
import LaminaModel
import Testing

@testable import LaminaClient

/// A fresh data directory, removed when the body returns.
func withTemporaryDirectory<T>(_ body: (URL) async throws -> T) async throws -> T {
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent(
        "lamina-client-tests-\(UUID().uuidString)", isDirectory: true)
    try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: dir) }
    return try await body(dir)
}

/// A fresh store of `user` in a temporary directory.
func withStore<T>(user: UserID = "alice", _ body: (LocalStore) async throws -> T) async throws -> T {
    try await withTemporaryDirectory { dir in
        let store = try LocalStore(location: StoreLocation(dataDirectory: dir, user: user))
        defer { try? store.close() }
        return try await body(store)
    }
}

let alice: UserID = "alice"
let bob: UserID = "bob"
let carol: UserID = "carol"

func conversation(
    _ participants: Set<UserID>, creator: UserID = "bob", distinct: Bool = true, metadata: Metadata = [:],
    createdAt: Int64 = 1_000
) throws -> Conversation {
    try Conversation(
        creator: creator, participants: participants,
        options: ConversationOptions(isDistinct: distinct, metadata: metadata),
        createdAt: Timestamp(millisecondsSince1970: createdAt))
}

func position(_ physical: UInt64, _ logical: UInt32 = 0, node: UInt64 = 1) -> MessagePosition {
    MessagePosition(physical: physical, logical: logical, node: NodeID(node))
}

/// A sent message (with a position) from `sender`.
func remoteMessage(
    in conversation: ConversationID, from sender: UserID = "bob", text: String = "hi", at physical: UInt64,
    logical: UInt32 = 0, statuses: [UserID: RecipientStatus] = [:]
) throws -> Message {
    Message(
        conversationID: conversation, sender: sender, parts: [try MessagePart(text: text)],
        sentAt: Timestamp(millisecondsSince1970: Int64(physical)), position: position(physical, logical),
        recipientStatus: statuses)
}

/// A rich-content part of `size` bytes.
func richPart(_ mime: MIMEType, size: UInt64) -> MessagePart {
    MessagePart(
        mimeType: mime,
        content: .external(ContentReference(id: .random(), size: size, sha256: [UInt8](repeating: 7, count: 32))))
}

let received = Timestamp(millisecondsSince1970: 5_000)

/// Collects change batches from a subscription until `predicate` holds for everything
/// collected, or fails after `timeout`.
func collectChanges(
    _ stream: AsyncStream<[ObjectChange]>, timeout: Duration = .seconds(5),
    until predicate: @escaping @Sendable ([ObjectChange]) -> Bool
) async throws -> [ObjectChange] {
    try await withThrowingTaskGroup(of: [ObjectChange].self) { group in
        group.addTask {
            var all: [ObjectChange] = []
            for await batch in stream {
                all += batch
                if predicate(all) { return all }
            }
            return all
        }
        group.addTask {
            try await Task.sleep(for: timeout)
            throw ClientError(.timedOut, "changes did not arrive")
        }
        defer { group.cancelAll() }
        return try await group.next()!
    }
}

extension ObjectChange {
    var conversationID: ConversationID? { if case .conversation(let c) = object { c.id } else { nil } }
    var messageID: MessageID? { if case .message(let m) = object { m.id } else { nil } }
}
