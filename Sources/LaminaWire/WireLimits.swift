import LaminaModel

/// The limits a receiver enforces while decoding (SPEC §3.15). Every count and length is
/// checked before anything is read or allocated for it; the frame size is checked on the
/// header, before any payload is buffered. `default` holds the spec's protocol maxima;
/// a receiver may lower any of them, never raise them above what its peers encode.
public struct WireLimits: Hashable, Sendable {
    /// The largest payload of any frame, in bytes (the header's length field).
    public var maxFrameSize: Int
    /// Parts in one message.
    public var maxParts: Int
    /// Bytes of one inline part.
    public var maxInlinePartBytes: Int
    /// Bytes of a user id.
    public var maxUserIDBytes: Int
    /// Bytes of a MIME type.
    public var maxMIMETypeBytes: Int
    /// Bytes of a token (identity token, session token) or nonce.
    public var maxTokenBytes: Int
    /// Bytes of a free-text string (error reason, agent, display name, push strings, ...).
    public var maxTextBytes: Int
    /// User ids in one participant list (conversation, add or remove).
    public var maxParticipants: Int
    /// Levels of metadata maps (the top-level map is level 1); also key-path components.
    public var maxMetadataDepth: Int
    /// Entries in one metadata map.
    public var maxMetadataEntries: Int
    /// Bytes of a metadata key.
    public var maxMetadataKeyBytes: Int
    /// Bytes of a metadata string value.
    public var maxMetadataValueBytes: Int
    /// Entries of push configuration data.
    public var maxPushDataEntries: Int
    /// Changes in one CHANGE_BATCH, operations in one REPLICATE.
    public var maxBatchSize: Int
    /// Entries in one version vector.
    public var maxVersionVectorEntries: Int

    public init(
        maxFrameSize: Int = WireLimits.protocolMaxFrameSize,
        maxParts: Int = Limits.maxPartsPerMessage,
        maxInlinePartBytes: Int = Limits.maxInlinePartBytes,
        maxUserIDBytes: Int = Limits.maxUserIDBytes,
        maxMIMETypeBytes: Int = Limits.maxMIMETypeBytes,
        maxTokenBytes: Int = 8_192,
        maxTextBytes: Int = 1_024,
        maxParticipants: Int = Limits.maxParticipants,
        maxMetadataDepth: Int = Limits.maxMetadataDepth,
        maxMetadataEntries: Int = 256,
        maxMetadataKeyBytes: Int = Limits.maxMetadataKeyBytes,
        maxMetadataValueBytes: Int = Limits.maxMetadataValueBytes,
        maxPushDataEntries: Int = Limits.maxPushDataEntries,
        maxBatchSize: Int = 256,
        maxVersionVectorEntries: Int = 1_024
    ) {
        self.maxFrameSize = maxFrameSize
        self.maxParts = maxParts
        self.maxInlinePartBytes = maxInlinePartBytes
        self.maxUserIDBytes = maxUserIDBytes
        self.maxMIMETypeBytes = maxMIMETypeBytes
        self.maxTokenBytes = maxTokenBytes
        self.maxTextBytes = maxTextBytes
        self.maxParticipants = maxParticipants
        self.maxMetadataDepth = maxMetadataDepth
        self.maxMetadataEntries = maxMetadataEntries
        self.maxMetadataKeyBytes = maxMetadataKeyBytes
        self.maxMetadataValueBytes = maxMetadataValueBytes
        self.maxPushDataEntries = maxPushDataEntries
        self.maxBatchSize = maxBatchSize
        self.maxVersionVectorEntries = maxVersionVectorEntries
    }

    /// The protocol's maximum payload size: 4 MiB (SPEC §2.3).
    public static let protocolMaxFrameSize = 4 * 1_024 * 1_024

    /// The spec's limits (SPEC §3.15). Encoders check what they write against these.
    public static let `default` = WireLimits()
}
