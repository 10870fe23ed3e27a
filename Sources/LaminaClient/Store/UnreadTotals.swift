import GRDB

extension LocalStore {
    /// The user's unread messages over all their conversations (each conversation's
    /// `totalNumberOfUnreadMessages`: the node's counts, right with partial history).
    public func totalNumberOfUnreadMessages() throws(ClientError) -> Int {
        try read { db in
            try Int.fetchOne(
                db, sql: "SELECT COALESCE(SUM(number_of_unread), 0) FROM conversation WHERE merged_into IS NULL") ?? 0
        }
    }

    /// How many of the user's conversations have unread messages.
    public func numberOfConversationsWithUnreadMessages() throws(ClientError) -> Int {
        try read { db in
            try Int.fetchOne(
                db, sql: "SELECT COUNT(*) FROM conversation WHERE merged_into IS NULL AND number_of_unread > 0") ?? 0
        }
    }
}
