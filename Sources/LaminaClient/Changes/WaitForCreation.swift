import LaminaModel

extension LocalStore {
    /// The longest `waitForCreation` timeout: one hour.
    public static let maxWaitTimeout: Duration = .seconds(3_600)

    /// The conversation with this identifier: from the local store at once when it is
    /// there, otherwise as soon as it is created (or a merge gives a conversation this
    /// identifier). Throws `.timedOut` when it does not appear within `timeout`.
    public func waitForCreation(of id: ConversationID, timeout: Duration) async throws(ClientError)
        -> StoredConversation
    {
        try await waitForCreation(of: id, timeout: timeout, afterLookUp: {})
    }

    /// `afterLookUp` runs once the first look-up has missed and the wait begins (for tests).
    func waitForCreation(of id: ConversationID, timeout: Duration, afterLookUp: @escaping @Sendable () -> Void)
        async throws(ClientError) -> StoredConversation
    {
        try await waitFor(id.description, timeout: timeout, afterLookUp: afterLookUp) { () throws(ClientError) in
            try self.read { db in try StoreReader.conversation(db, id) }
        } matches: { change in
            guard case .conversation(let c) = change.object else { return false }
            switch change.type {
            case .create: return c.id == id
            case .update:
                return change.property == ConversationProperty.identifier && change.after == .conversationID(id)
            case .delete: return false
            }
        }
    }

    /// The message with this identifier: from the local store at once when it is there,
    /// otherwise as soon as it is created. Throws `.timedOut` when it does not appear in time.
    public func waitForCreation(of id: MessageID, timeout: Duration) async throws(ClientError) -> StoredMessage {
        try await waitForCreation(of: id, timeout: timeout, afterLookUp: {})
    }

    func waitForCreation(of id: MessageID, timeout: Duration, afterLookUp: @escaping @Sendable () -> Void)
        async throws(ClientError) -> StoredMessage
    {
        try await waitFor(id.description, timeout: timeout, afterLookUp: afterLookUp) { () throws(ClientError) in
            try self.message(id)
        } matches: { change in
            guard change.type == .create, case .message(let m) = change.object else { return false }
            return m.id == id
        }
    }

    /// Subscribes first, then looks in the store, then waits: an object created between the
    /// look-up and the wait is still seen (its batch is already in the subscription).
    private func waitFor<T: Sendable>(
        _ name: String,
        timeout: Duration,
        afterLookUp: @escaping @Sendable () -> Void,
        lookUp: @escaping @Sendable () throws(ClientError) -> T?,
        matches: @escaping @Sendable (ObjectChange) -> Bool
    ) async throws(ClientError) -> T {
        guard timeout >= .zero, timeout <= Self.maxWaitTimeout else {
            throw ClientError(.invalidSetting, "a wait timeout is 0...\(Self.maxWaitTimeout), not \(timeout)")
        }
        let stream = changes()
        if let found = try lookUp() { return found }
        afterLookUp()
        do {
            return try await withThrowingTaskGroup(of: T.self) { group in
                group.addTask {
                    for await batch in stream where batch.contains(where: matches) {
                        if let found = try lookUp() { return found }
                    }
                    if let found = try lookUp() { return found }
                    throw ClientError(.storage, "the store closed while waiting for \(name)")
                }
                group.addTask {
                    try await Task.sleep(for: timeout)
                    throw ClientError(.timedOut, "\(name) was not created within \(timeout)")
                }
                defer { group.cancelAll() }
                guard let first = try await group.next() else {
                    throw ClientError(.cancelled, "the wait for \(name) was cancelled")
                }
                return first
            }
        } catch let error as ClientError {
            throw error
        } catch {
            throw ClientError(.cancelled, "the wait for \(name) was cancelled")
        }
    }
}
