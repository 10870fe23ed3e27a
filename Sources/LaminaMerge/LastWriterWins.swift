import LaminaModel

/// A last-writer-wins register decided by HLC readings: the state about a user that peers
/// replicate (identity, each block, badge, session revocation) is one register per key, and
/// the write with the later reading wins on every node, whatever the order of arrival.
/// Readings of different nodes never tie (the node id is part of the reading); the same
/// reading twice is the same write (idempotent).
public enum LastWriterWins {
    /// Whether a write at `incoming` replaces the one at `current` (nil: none yet).
    public static func wins(_ incoming: HLCTimestamp, over current: HLCTimestamp?) -> Bool {
        guard let current else { return true }
        return current < incoming
    }
}
