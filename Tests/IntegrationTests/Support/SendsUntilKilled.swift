import LaminaModel
import NIOConcurrencyHelpers

/// A client sending into a conversation, one message after another, until a send fails (its
/// node was killed): the kill tests' traffic. Keeps the acknowledged ids in ACK order.
final class SendsUntilKilled: Sendable {
    private let acknowledged: NIOLockedValueBox<[MessageID]>
    private let task: Task<Void, Never>

    /// Starts sending from `client` into `conversation`; `earlier` were acknowledged before.
    init(_ client: SyncTestClient, into conversation: ConversationID, after earlier: [MessageID]) {
        let acknowledged = NIOLockedValueBox(earlier)
        self.acknowledged = acknowledged
        task = Task {
            for i in 0..<10_000 {
                guard let (id, _) = try? await MessagingTests.send(client, conversation, "m\(i)") else { return }
                acknowledged.withLockedValue { $0.append(id) }
            }
        }
    }

    /// Waits (up to 60 s) until at least `count` sends were acknowledged in all.
    func waitForAcknowledged(_ count: Int) async throws {
        let deadline = ContinuousClock.now + .seconds(60)
        while ids.count < count {
            guard ContinuousClock.now < deadline else {
                throw SyncTestTimeout(waitingFor: "\(count) acknowledged sends")
            }
            try await Task.sleep(for: .milliseconds(5))
        }
    }

    /// Waits for the sender to stop (its node died).
    func stopped() async { await task.value }

    /// Records a send acknowledged elsewhere (after the move to another node).
    func append(_ id: MessageID) { acknowledged.withLockedValue { $0.append(id) } }

    /// The acknowledged ids, in ACK order.
    var ids: [MessageID] { acknowledged.withLockedValue { $0 } }
}
