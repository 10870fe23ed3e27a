import Foundation
import LaminaCLI
import LaminaClient
import LaminaModel
import Testing

@Suite struct FormattingTests {
    static let utc = TimeZone(identifier: "UTC")!

    @Test func terminalControlCharactersFromTheNetworkAreMadeVisible() {
        #expect(Sanitizer.printable("hi\u{1B}[2Jthere\r\u{7}") == "hi\u{FFFD}[2Jthere\u{FFFD}\u{FFFD}")
        #expect(Sanitizer.printable("a\nb\tc") == "a⏎b\tc")
        #expect(Sanitizer.printable("abc\u{202E}def") == "abc\u{FFFD}def")
        #expect(Sanitizer.clip("abcdef", 4) == "abc…")
        #expect(Sanitizer.clip("abc", 4) == "abc")
    }

    @Test func timelineLinesShowTimeSenderTextAndOwnMarks() throws {
        let format = MessageFormat(localUser: "alice", timeZone: Self.utc)
        var m = Message(
            conversationID: .random(), sender: "alice",
            parts: [
                try MessagePart(text: "hello"), try MessagePart(mimeType: MIMEType("image/png"), bytes: [1, 2, 3]),
            ],
            sentAt: Timestamp(millisecondsSince1970: 3_723_000), recipientStatus: ["alice": .read, "bob": .delivered])
        #expect(
            format.line(m, participants: ["alice", "bob"]) == "[01:02:03] alice: hello [image/png, 3 bytes]  · queued")
        m.position = HLCTimestamp(physical: 1, logical: 0, node: NodeID(1))
        #expect(
            format.line(m, participants: ["alice", "bob"])
                == "[01:02:03] alice: hello [image/png, 3 bytes]  ✓✓ delivered")
        m.sender = "bob"
        #expect(format.line(m, participants: ["alice", "bob"]) == "[01:02:03] bob: hello [image/png, 3 bytes]")
        m.sender = try UserID.systemSender(named: "Admin")
        #expect(format.line(m, participants: ["alice", "bob"]) == "[01:02:03] [Admin]: hello [image/png, 3 bytes]")
        #expect(format.others(["alice", "carol", "bob"]) == "bob, carol")
        #expect(format.others(["alice"]) == "just you")
    }

    @Test func conversationSummariesNameOthersTheLastMessageAndUnread() throws {
        let format = MessageFormat(localUser: "bob", timeZone: Self.utc)
        let conversation = try Conversation(
            creator: "alice", participants: ["bob"], createdAt: Timestamp(millisecondsSince1970: 0))
        let last = Message(
            conversationID: conversation.id, sender: "alice", parts: [try MessagePart(text: "hi bob")],
            sentAt: Timestamp(millisecondsSince1970: 60_000))
        let stored = StoredConversation(
            conversation: conversation, isSynced: true, lastMessageID: last.id, totalMessageCount: 1,
            unreadMessageCount: 1)
        #expect(
            format.summary(stored, lastMessage: last) == "with alice — last: alice: \"hi bob\" at 00:01:00 — 1 unread")
        let listing = format.listing(ConversationList.Entry(conversation: stored, lastMessage: last), number: 2)
        #expect(
            listing.hasPrefix(
                "2. \(conversation.id)\n   participants: alice, bob   unread: 1   messages: 1\n   last: [00:01:00] alice: hi bob"
            ))
    }

    @Test func sessionNoticesAreShortLines() {
        let nio =
            "cannot connect to https://127.0.0.1:7443: Connection errors: SingleConnectionFailure(target: [IPv4]127.0.0.1/127.0.0.1:7443, error: connection reset (error set): Connection refused) (errno: 111))"
        #expect(
            SessionNotice.offline(reason: nio, retryIn: .milliseconds(2_100)).text
                == "  (offline: connection refused; retrying with backoff, first in 2.1 s; what you send is queued)")
        #expect(SessionNotice.online.text == "  (back online, in sync)")
        #expect(
            SessionNotice.offline(reason: "the node closed the sync stream", retryIn: .seconds(1)).text.hasPrefix(
                "  (offline: the node closed the sync stream; "))
    }
}

@Suite struct FilePartTests {
    @Test func mimeTypesComeFromTheExtensionElseOctetStream() {
        #expect(FilePart.mimeType(forPath: "/tmp/Holiday.JPG") == "image/jpeg")
        #expect(FilePart.mimeType(forPath: "clip.mp4") == "video/mp4")
        #expect(FilePart.mimeType(forPath: "notes") == "application/octet-stream")
        #expect(FilePart.mimeType(forPath: "archive.tar.xz") == "application/octet-stream")
    }
}
