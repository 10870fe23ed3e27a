import Foundation
import LaminaMerge
import LaminaModel
import LaminaWire
import Testing

@testable import LaminaClient

/// A notification level the node refuses (SPEC §6.10: `forbidden` from a node without feature
/// bit 18) does not stay set on the device that queued it: the level goes back to what it was,
/// the app is told by an update of the conversation, and the refusal is reported like every
/// refused command.
@Suite struct NotificationLevelRefusalTests {
    /// Records the conversations' notification level changes.
    final class LevelChanges: LaminaClientDelegate {
        let changes = Recorder<ObjectChange>()
        let failures = Recorder<OutboxFailure>()
        func objectsDidChange(_ changes: [ObjectChange]) {
            for change in changes where change.property == NotificationLevelProperty.notificationLevel {
                self.changes.append(change)
            }
        }
        func didFailOperation(_ failure: OutboxFailure) { failures.append(failure) }
    }

    @Test func levelsQueuedOfflineAndRefusedGoBackToTheLevelBeforeThem() async throws {
        try await withDevices { root in
            let node = FakeNode(features: FeatureSet.all.subtracting(.notificationLevels))
            await node.setReachable(false)
            let a = try TestDevice(user: alice, node: node, directory: try deviceDirectory(root, "a"))
            let delegate = LevelChanges()
            a.client.addDelegate(delegate)
            try await a.connect()
            let conversation = try a.client.newConversation(
                participants: [bob], options: ConversationOptions(isDistinct: false)
            ).id
            _ = try a.client.send(try a.text("first"), in: conversation)

            // Two levels set offline: both queued, the later one shows.
            try a.client.setNotificationLevel(
                .mentions, for: conversation, until: Date(timeIntervalSince1970: 4_102_444_800))
            try a.client.setNotificationLevel(.none, for: conversation)
            #expect(try a.client.conversation(conversation)?.notificationLevel == NotificationLevel.none)
            try await delegate.changes.waitFor("the two local changes") { $0.count == 2 }

            // The node has no notification levels: both refused, the level is `all` again.
            await node.setReachable(true)
            let kind = OutboxCommandKind.setNotificationLevel.rawValue
            try await delegate.failures.waitFor("both refusals") { $0.filter { $0.kind == kind }.count == 2 }
            let stored = try #require(try a.client.conversation(conversation))
            #expect(stored.notificationLevel == .all)
            #expect(stored.notificationLevelUntil == nil)
            #expect(delegate.failures.all.allSatisfy { $0.code == WireError.Code.forbidden.wireValue })
            try await a.events.waitFor("the refusals as sync events") {
                $0.filter { if case .commandFailed(let f) = $0 { f.kind == kind } else { false } }.count == 2
            }
            // The app saw the level go back: none -> all, once.
            try await delegate.changes.waitFor("the level put back") { $0.count == 3 }
            let back = delegate.changes.all[2]
            #expect(back.before == .integer(Int64(NotificationLevel.none.rawValue)))
            #expect(back.after == .integer(Int64(NotificationLevel.all.rawValue)))
            #expect(try a.client.store.outboxEntries().allSatisfy { $0.kind != kind })
            await a.client.disconnect()
        }
    }
}
