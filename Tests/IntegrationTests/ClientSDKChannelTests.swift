import Foundation
import LaminaClient
import LaminaModel
import LaminaWire
import Testing

/// The SDK's channels (SPEC §6.8) against a real node: create, join (reading the whole
/// history), live messages, leave, and live queries over channels and over a channel's messages.
@Suite struct ClientSDKChannelTests {
    @Test func joinReadsTheHistoryAndLiveQueriesFollowChannelsAndMessages() async throws {
        let node = try await TestNode.start("sdk-channels")
        let alice = try ClientHarness.device("alice", on: node)
        let bob = try ClientHarness.device("bob", on: node)
        _ = try await ClientHarness.connectLive(alice, on: node)
        _ = try await ClientHarness.connectLive(bob, on: node)

        let channel = try await alice.createChannel(named: "sdk-room")
        for i in 1...3 { try await alice.sendChannelMessage(text: "before \(i)", to: channel) }
        try await ClientHarness.waitUntil(alice, "alice holds her channel and its three messages") {
            try alice.channels().map(\.id) == [channel] && alice.channelMessages(of: channel).count == 3
        }

        // Bob's live queries: the channels he is a member of, and the channel's messages.
        let channels = try bob.queryController(
            for: Query<StoredChannel>(predicate: .property(ChannelProperty.isMember, .equalTo, .bool(true))))
        #expect(try channels.start().isEmpty)
        let channelUpdates = Recorder(channels.updates)
        let messages = try bob.queryController(
            for: Query<StoredChannelMessage>(
                predicate: .property(ChannelMessageProperty.channel, .equalTo, .channel(channel)),
                sortDescriptors: [QuerySortDescriptor(ChannelMessageProperty.logSeq)]))
        #expect(try messages.start().isEmpty)
        let messageUpdates = Recorder(messages.updates)

        // Joining brings the channel (feed) and its whole history (the channel's log).
        try await bob.joinChannel(channel)
        try await channelUpdates.wait("the channel in bob's live query") {
            $0.contains { $0.objects.map(\.id) == [channel] && $0.changes.inserts == [0] }
        }
        try await messageUpdates.wait("the history in bob's live query") {
            $0.contains { $0.objects.map(\.message.logSeq) == [1, 2, 3] }
        }
        #expect(try bob.channel(channel)?.cursor == 3)

        // A new message arrives live and moves the cursor.
        let live = try await alice.sendChannelMessage(text: "live", to: channel)
        try await messageUpdates.wait("the live message in bob's query") {
            $0.contains { $0.objects.last?.id == live && $0.objects.count == 4 }
        }
        try await ClientHarness.waitUntil(bob, "bob's cursor at 4") { try bob.channel(channel)?.cursor == 4 }

        // Leaving: the channel leaves the members' query.
        try await bob.leaveChannel(channel)
        try await channelUpdates.wait("the channel left bob's live query") {
            $0.contains { $0.objects.isEmpty && $0.changes.deletes == [0] }
        }
        // The node refuses what a non-member asks, with its code.
        do {
            try await bob.sendChannelMessage(text: "not a member", to: channel)
            Issue.record("a non-member's send was accepted")
        } catch {
            #expect(error.code.rawValue == "not-a-participant")
        }

        channels.stop()
        messages.stop()
        try await alice.close()
        try await bob.close()
        await node.stop()
    }
}
