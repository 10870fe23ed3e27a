/// A participant's status for one message. Only ever moves up:
/// invalid < pending < sent < delivered < read.
public enum RecipientStatus: Int8, Hashable, Comparable, Sendable, CaseIterable, CustomStringConvertible {
    /// The status cannot be determined.
    case invalid = -1
    /// Not yet accepted by the node.
    case pending = 0
    /// Accepted by the node; waiting to reach the recipient's devices.
    case sent = 1
    /// Reached one of the recipient's devices.
    case delivered = 2
    /// Marked as read by one of the recipient's devices.
    case read = 3

    public static func < (lhs: RecipientStatus, rhs: RecipientStatus) -> Bool { lhs.rawValue < rhs.rawValue }

    public var description: String {
        switch self {
        case .invalid: "invalid"
        case .pending: "pending"
        case .sent: "sent"
        case .delivered: "delivered"
        case .read: "read"
        }
    }
}
