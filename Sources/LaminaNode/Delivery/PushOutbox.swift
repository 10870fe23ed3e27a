import Foundation
import LaminaMerge
import LaminaModel
import LaminaStore
import NIOConcurrencyHelpers

/// The write side of the push outbox. A send calls ``record(_:to:in:at:)`` inside its
/// transaction: for each recipient (not the sender) each device with a token of a configured
/// provider and no live session on this node (nor, on a shared PostgreSQL store, on another node:
/// `live_devices`) gets one queue row, built from the message's push
/// configuration, in the same commit (the recipient's badge is counted when the push is sent,
/// on a reader: a send's commit never scans the recipients' unread messages). After the commit the delivery
/// is woken for the providers that got rows.
final class PushOutbox: Sendable {
    private struct Configuration {
        var kinds: Set<PushToken.Kind> = []
        var expirationMilliseconds: Int64 = 86_400_000
    }
    private let configuration = NIOLockedValueBox(Configuration())
    /// Whether a user's device has a live session on this node (no push then).
    private let isLive = NIOLockedValueBox<LiveCheck?>(nil)
    /// A function kept in a struct: a bare function value passed `inout` through the generic
    /// `Locked.withLock` is wrapped in two more reabstraction thunks on every access, so each
    /// call would grow slower (a send's commit took time proportional to all sends before it).
    private struct LiveCheck {
        let check: @Sendable (UserID, String) -> Bool
    }
    private let wake = CommitWaker<PushToken.Kind>()

    /// The providers the node delivers to, how long a push lives, and whom to wake after commits.
    func configure(
        kinds: Set<PushToken.Kind>, expirationSeconds: Int, waker: @escaping @Sendable ([PushToken.Kind: Int]) -> Void
    ) {
        configuration.withLockedValue {
            $0.kinds = kinds
            $0.expirationMilliseconds = Int64(expirationSeconds) * 1_000
        }
        wake.setWaker(waker)
    }

    /// How the engine tells a device with a live session.
    func setLiveCheck(_ check: @escaping @Sendable (UserID, String) -> Bool) {
        isLive.withLockedValue { $0 = LiveCheck(check: check) }
    }

    /// How long a push lives (`push.expirationSeconds`), in milliseconds.
    var lifetimeMilliseconds: Int64 { configuration.withLockedValue { $0.expirationMilliseconds } }

    /// Whether tokens of `kind` are taken (a provider for it is configured).
    func delivers(_ kind: PushToken.Kind) -> Bool { configuration.withLockedValue { $0.kinds.contains(kind) } }

    /// Queues the pushes of `message` for the offline devices of `recipients`, in `tx`; a
    /// recipient in `overrides` gets that configuration's fields instead of the message's.
    func record(
        _ message: Message, to recipients: Set<UserID>, overrides: [UserID: PushConfiguration] = [:],
        in tx: StorageTransaction, at now: Timestamp
    ) throws {
        let (kinds, lifetime) = configuration.withLockedValue { ($0.kinds, $0.expirationMilliseconds) }
        guard !kinds.isEmpty else { return }
        // A push expires a lifetime after its message was sent: a message that reaches this node
        // late (replication after a partition) is not pushed once that has passed.
        let expiresAt = Timestamp(millisecondsSince1970: (message.sentAt ?? now).millisecondsSince1970 + lifetime)
        guard expiresAt > now else { return }
        // Each recipient's notification level of the conversation, in force now (SPEC §6.10): read
        // only when some recipient has a device to push to (most sends reach everyone online).
        try queue(
            id: message.id, to: recipients.filter { $0 != message.sender }, kinds: kinds, expiresAt: expiresAt,
            in: tx, at: now, keep: { users in try Self.notified(users, by: message, in: tx, at: now) }
        ) { user in
            var notification = PushNotification(message: message, badge: 0)
            if let override = overrides[user] { notification.apply(override) }
            return notification
        }
    }

    /// Queues a push-only notification (the Server API's `POST /notifications`) for the offline
    /// devices of `recipients`, in `tx`: `push` with each recipient's override applied. `id`
    /// names it: queued twice, a device still gets it once.
    func record(
        notification id: UUID, _ push: PushConfiguration, to recipients: Set<UserID>,
        overrides: [UserID: PushConfiguration] = [:], in tx: StorageTransaction, at now: Timestamp
    ) throws {
        let (kinds, lifetime) = configuration.withLockedValue { ($0.kinds, $0.expirationMilliseconds) }
        guard !kinds.isEmpty else { return }
        let expiresAt = Timestamp(millisecondsSince1970: now.millisecondsSince1970 + lifetime)
        try queue(id: MessageID(uuid: id), to: recipients, kinds: kinds, expiresAt: expiresAt, in: tx, at: now) {
            user in
            var notification = PushNotification(notification: id, push: push, badge: 0)
            if let override = overrides[user] { notification.apply(override) }
            return notification
        }
    }

    /// One queue row per offline device of `recipients` with a token of a configured provider.
    /// `keep`: of the users with a device to push to, those to push to (nil: all of them).
    private func queue(
        id: MessageID, to recipients: Set<UserID>, kinds: Set<PushToken.Kind>, expiresAt: Timestamp,
        in tx: StorageTransaction, at now: Timestamp, keep: ((Set<UserID>) throws -> Set<UserID>)? = nil,
        notification: (UserID) -> PushNotification
    ) throws {
        let live = isLive.withLockedValue { $0 }?.check
        let tokens = try tx.read.pushTokens(of: recipients.sorted())
        var offline = tokens.filter { kinds.contains($0.token.kind) && !(live?($0.user, $0.device) ?? false) }
        if tx.sharedWriters, !offline.isEmpty {
            // Several nodes: a device with a live session on another node gets no push either.
            let elsewhere = try tx.read.devicesLiveOnAnyNode(of: Set(offline.map(\.user)).sorted())
            offline.removeAll { elsewhere[$0.user]?.contains($0.device) == true }
        }
        if let keep, !offline.isEmpty {
            let kept = try keep(Set(offline.map(\.user)))
            offline.removeAll { !kept.contains($0.user) }
        }
        let byUser = Dictionary(grouping: offline, by: \.user)
        for (user, devices) in byUser.sorted(by: { $0.key < $1.key }) {
            let payload = try notification(user).encoded()
            for device in devices {
                let queued = try tx.enqueuePush(
                    QueuedPush(
                        seq: 0, user: user, device: device.device, token: device.token, message: id,
                        payload: payload, createdAt: now,
                        expiresAt: expiresAt, attempts: 0, nextAttemptAt: now))
                if queued { wake.queued(1, for: device.token.kind, in: tx) }
            }
        }
    }

    /// The user's badge: unread messages over their live conversations plus the app backend's
    /// external unread count (Server API badges). Counted by the delivery as it sends. A
    /// conversation whose notification level is `none` at `now` does not count (SPEC §6.10).
    static func badge(of user: UserID, _ reader: StorageReader, at now: Timestamp = .now()) throws(StorageError)
        -> Int
    {
        var unread = try reader.externalUnreadCount(of: user)
        let levels = try reader.notificationSettings(of: user)
        let ms = UInt64(clamping: now.millisecondsSince1970)
        for c in try reader.conversations(of: user) where c.isLive {
            if levels[c.conversation.id]?.level(now: ms) == NotificationLevel.none { continue }
            // The stored count (`StoredCounts`): exact, one row, however long the backlog.
            unread += try reader.unreadCount(of: c.conversation.id, for: user)
        }
        return unread
    }
}
