import LaminaModel

/// A sent message's parts as a last-writer-wins register (Server API part updates): the
/// original send holds them at the message's HLC reading, each update at its own, and the
/// latest reading wins on every node whatever order the updates arrive in (readings are
/// unique across nodes, so there are no ties).
public enum MessagePartsRegister {
    /// Whether parts written at `incoming` replace the parts written at `current`.
    public static func wins(_ incoming: HLCTimestamp, over current: HLCTimestamp) -> Bool {
        incoming > current
    }
}
