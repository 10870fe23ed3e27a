import Foundation
import Testing

@testable import LaminaModel

/// `Message` shares one box of fields between its copies and copies it on a copy's first
/// change: it must still behave as a value.
@Suite struct MessageValueSemanticsTests {
    static func sample() throws -> Message {
        Message(
            conversationID: .random(), sender: "alice", parts: [try MessagePart(text: "hi")],
            sentAt: Timestamp(millisecondsSince1970: 1_000),
            position: HLCTimestamp(physical: 5, logical: 1, node: NodeID(7)),
            push: PushConfiguration(alert: "hi", data: ["k": "v"]), recipientStatus: ["alice": .read, "bob": .sent],
            replyTo: .random(), mentions: ["bob"])
    }

    /// Each property changed on a copy: the original keeps its value, the copy has the new one.
    @Test func aChangedCopyLeavesTheOriginalAsItWas() throws {
        let original = try Self.sample()
        let before = original
        let changes: [(String, (inout Message) throws -> Void)] = [
            ("id", { $0.id = .random() }),
            ("conversationID", { $0.conversationID = .random() }),
            ("sender", { $0.sender = "carol" }),
            ("parts", { $0.parts.append(try MessagePart(text: "more")) }),
            ("sentAt", { $0.sentAt = nil }),
            ("position", { $0.position = nil }),
            ("push", { $0.push?.data["k"] = "w" }),
            ("recipientStatus", { $0.recipientStatus["bob"] = .delivered }),
            ("replyTo", { $0.replyTo = nil }),
            (
                "thread",
                {
                    $0.thread = MessageThread(
                        replyCount: 1, lastReply: .random(),
                        lastReplyAt: HLCTimestamp(physical: 9, logical: 0, node: NodeID(7)))
                }
            ),
            ("mentions", { $0.mentions.insert("carol") }),
        ]
        for (name, change) in changes {
            var copy = original
            try change(&copy)
            #expect(copy != original, "changing \(name) of a copy changed nothing")
            #expect(original == before, "changing \(name) of a copy changed the original")
            #expect(original.recipientStatus == ["alice": .read, "bob": .sent] && original.mentions == ["bob"])
        }
    }

    /// Two messages made apart with the same fields are equal and hash alike; a copy changed
    /// back to the original's value is equal to it again.
    @Test func equalityAndHashFollowTheFieldsNotTheBox() throws {
        let a = try Self.sample()
        var b = a
        b.recipientStatus["bob"] = .read
        #expect(a != b)
        b.recipientStatus["bob"] = .sent
        #expect(a == b)
        #expect(a.hashValue == b.hashValue)
        let rebuilt = Message(
            id: a.id, conversationID: a.conversationID, sender: a.sender, parts: a.parts, sentAt: a.sentAt,
            position: a.position, push: a.push, recipientStatus: a.recipientStatus, replyTo: a.replyTo,
            thread: a.thread, mentions: a.mentions)
        #expect(rebuilt == a)
        #expect(Set([a, b, rebuilt]).count == 1)
    }

    /// Copies sent to other tasks and changed there leave each other alone.
    @Test func copiesChangedConcurrentlyStayApart() async throws {
        let shared = try Self.sample()
        let results = await withTaskGroup(of: Message.self) { group in
            for i in 0..<16 {
                group.addTask {
                    var own = shared
                    for j in 0..<200 { own.recipientStatus[UserID(stringLiteral: "u\(i)-\(j)")] = .delivered }
                    return own
                }
            }
            var all: [Message] = []
            for await message in group { all.append(message) }
            return all
        }
        #expect(shared.recipientStatus.count == 2)
        #expect(results.count == 16)
        for message in results {
            #expect(message.recipientStatus.count == 202)
        }
    }
}
