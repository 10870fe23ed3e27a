/// The domain's limits. Every one is enforced by validation before work is done,
/// and the wire codec checks the ones it can on lengths before it allocates.
public enum Limits {
    /// A message has at least one and at most this many parts.
    public static let maxPartsPerMessage = 1_000
    /// Parts of this many bytes or fewer travel inline; larger ones are rich content.
    public static let maxInlinePartBytes = 2_048
    /// The largest part: 2 GiB.
    public static let maxPartBytes: UInt64 = 2 * 1_024 * 1_024 * 1_024
    /// The longest user id, in UTF-8 bytes.
    public static let maxUserIDBytes = 256
    /// The longest name of a system sender (``UserID/systemSender(named:)``), in UTF-8 bytes:
    /// what a user id leaves after the reserved prefix.
    public static let maxSystemSenderNameBytes = maxUserIDBytes - UserID.systemSenderPrefix.utf8.count
    /// The longest MIME type, in UTF-8 bytes.
    public static let maxMIMETypeBytes = 255
    /// Participants (creator included) of a conversation with read receipts enabled.
    public static let maxParticipantsWithReceipts = 25
    /// Participants (creator included) of a conversation with read receipts disabled.
    public static let maxParticipants = 250
    /// The deepest metadata key path (number of components).
    public static let maxMetadataDepth = 8
    /// The longest metadata key (one component), in UTF-8 bytes.
    public static let maxMetadataKeyBytes = 128
    /// The longest metadata string value, in UTF-8 bytes.
    public static let maxMetadataValueBytes = 2_048
    /// All keys and string values of one conversation's metadata together, in UTF-8 bytes.
    public static let maxMetadataTotalBytes = 16 * 1_024
    /// The longest push configuration string (alert, sound, title, category, data key or value).
    public static let maxPushStringBytes = 1_024
    /// The most custom data entries in a push configuration.
    public static let maxPushDataEntries = 32
    /// An APNs device token, in bytes (32 today; Apple reserves the right to lengthen it).
    public static let apnsTokenBytes = 32...100
    /// An FCM registration token or a push gateway token, in bytes.
    public static let maxPushTokenBytes = 1_024
    /// An APNs topic (the app's bundle id, with a suffix for VoIP and the like), in bytes.
    public static let maxPushTopicBytes = 255
    /// The longest display name or avatar URL of an identity, in UTF-8 bytes.
    public static let maxIdentityStringBytes = 1_024
}
