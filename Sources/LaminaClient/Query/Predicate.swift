import LaminaModel

/// How a predicate compares a property with a value.
public enum PredicateOperator: String, Hashable, Sendable, CaseIterable {
    case equalTo = "="
    case notEqualTo = "!="
    case lessThan = "<"
    case lessThanOrEqualTo = "<="
    case greaterThan = ">"
    case greaterThanOrEqualTo = ">="
    /// The property's value is one of a list.
    case `in` = "in"
    /// The property's value is none of a list (a missing value is in none).
    case notIn = "not in"
    /// SQL LIKE on a text property: `%` any run, `_` one character, `\` escapes;
    /// case-insensitive for ASCII letters.
    case like = "like"
    /// A collection property (participants, part MIME types) holds the value.
    case contains = "contains"
}

/// A value a predicate compares a property with.
public indirect enum QueryValue: Hashable, Sendable {
    /// No value: `= .null` matches a missing value, `!= .null` a present one.
    case null
    case bool(Bool)
    case integer(Int64)
    case string(String)
    case user(UserID)
    case users(Set<UserID>)
    case conversation(ConversationID)
    case message(MessageID)
    /// A channel id (SPEC §6.8).
    case channel(ChannelID)
    case timestamp(Timestamp)
    case position(MessagePosition)
    /// The right-hand side of `in` and `not in`.
    case list([QueryValue])
}

/// A condition on the properties of conversations or messages.
public indirect enum QueryPredicate: Hashable, Sendable {
    /// `property op value`, the property named as in `ConversationProperty`/`MessageProperty`
    /// (metadata by `metadata.<key path>`).
    case compare(String, PredicateOperator, QueryValue)
    case and([QueryPredicate])
    case or([QueryPredicate])
    case not(QueryPredicate)

    /// `property op value`.
    public static func property(_ name: String, _ op: PredicateOperator, _ value: QueryValue) -> QueryPredicate {
        .compare(name, op, value)
    }

    public static func && (lhs: QueryPredicate, rhs: QueryPredicate) -> QueryPredicate { .and([lhs, rhs]) }
    public static func || (lhs: QueryPredicate, rhs: QueryPredicate) -> QueryPredicate { .or([lhs, rhs]) }
    public static prefix func ! (operand: QueryPredicate) -> QueryPredicate { .not(operand) }
}

/// One key of a query's order. A missing value sorts as the smallest (first ascending,
/// last descending), except positions: messages not yet sent sort after all sent ones.
public struct QuerySortDescriptor: Hashable, Sendable {
    public var property: String
    public var ascending: Bool

    public init(_ property: String, ascending: Bool = true) {
        self.property = property
        self.ascending = ascending
    }
}

/// The limits every query is checked against before it runs.
public enum QueryLimits {
    /// The deepest nesting of and/or/not.
    public static let maxDepth = 16
    /// The most comparisons in one predicate.
    public static let maxComparisons = 256
    /// The most values in one `in`/`not in` list or `users` set.
    public static let maxListCount = 1_000
    /// The most values bound to one statement (SQLite allows 32,766).
    public static let maxArguments = 30_000
    /// The most sort descriptors.
    public static let maxSortDescriptors = 8
    /// The largest `limit` and `offset`.
    public static let maxLimit = 1_000_000
    /// The longest string value, in UTF-8 bytes.
    public static let maxStringBytes = 4_096
}
