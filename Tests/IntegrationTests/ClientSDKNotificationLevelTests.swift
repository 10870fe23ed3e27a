import Foundation
import LaminaClient
import LaminaMerge
import LaminaModel
import Testing

/// The SDK's notification levels and mentions against a real node (issue 38 item 4): a level set
/// on one device shows at once there and reaches the user's other device through the node, also
/// when set offline (queued); a message's mentions reach the recipients' stores, and the
/// "mentions me" query finds exactly the messages that mention the user.
@Suite struct ClientSDKNotificationLevelTests {
    @Test func aLevelReachesTheUsersOtherDeviceAndMentionsAreQueryable() async throws {
        let node = try await TestNode.start("sdk-levels")
        let alice = try ClientHarness.device("alice", on: node)
        let phone = try ClientHarness.device("bob", on: node)
        let laptop = try ClientHarness.device("bob", on: node)
        for client in [alice, phone, laptop] { try await ClientHarness.connect(client, on: node) }

        let conversation = try alice.newConversation(
            participants: ["bob"], options: ConversationOptions(isDistinct: false)
        ).id
        let mention = try alice.send(
            alice.newMessage(parts: [MessagePart.with(text: "@bob look")], mentions: ["bob"]), in: conversation
        ).id
        let plain = try alice.send(alice.newMessage(parts: [MessagePart.with(text: "no one")]), in: conversation).id
        for bob in [phone, laptop] {
            try await ClientHarness.waitUntil(bob, "both messages") {
                try bob.message(mention) != nil && bob.message(plain) != nil
            }
        }
        #expect(try laptop.message(mention)?.message.mentions == ["bob"])
        #expect(try laptop.message(plain)?.message.mentions.isEmpty == true)
        #expect(try laptop.execute(laptop.messagesMentioningMe).map(\.message.id) == [mention])
        #expect(try alice.execute(alice.messagesMentioningMe).isEmpty)

        // Set on the phone: there at once, on the laptop through the node.
        let until = Date(timeIntervalSince1970: 4_102_444_800)
        try phone.setNotificationLevel(.none, for: conversation, until: until)
        #expect(try phone.conversation(conversation)?.notificationLevel == NotificationLevel.none)
        try await ClientHarness.waitUntil(laptop, "the level on the laptop") {
            let stored = try laptop.conversation(conversation)
            return stored?.notificationLevel == NotificationLevel.none
                && stored?.notificationLevelUntil == Timestamp(until)
        }

        // Set offline on the laptop: queued, sent once it connects again.
        await laptop.disconnect()
        try laptop.setNotificationLevel(.mentions, for: conversation)
        #expect(try laptop.conversation(conversation)?.notificationLevel == .mentions)
        try await ClientHarness.connect(laptop, on: node)
        try await ClientHarness.waitUntil(phone, "the laptop's offline level on the phone") {
            let stored = try phone.conversation(conversation)
            return stored?.notificationLevel == .mentions && stored?.notificationLevelUntil == nil
        }
        for client in [alice, phone, laptop] { try await client.close() }
        await node.stop()
    }
}
