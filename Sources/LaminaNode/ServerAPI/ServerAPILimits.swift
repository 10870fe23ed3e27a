/// The Server API's limits, declared once (enforced where a request enters, in
/// ``ServerAPI``; participant, part and metadata limits are the model's own).
public enum ServerAPILimits {
    /// The largest JSON request body, in bytes (inline parts are at most 2 KB each, the
    /// model's limit; bigger content goes through the content store).
    public static let maxBodyBytes = 256 * 1024
    /// The largest body of one upload request to a content's `upload_url` (a chunk: bigger
    /// content goes up in several, with `Content-Range`), held in memory while it is written.
    public static let maxUploadChunkBytes = 8 * 1024 * 1024
    /// The most conversations or messages one list request returns (`page_size`).
    public static let maxPageSize = 100
    /// The page size when a list request names none.
    public static let defaultPageSize = 50
    /// An identity's string properties (display name, names, URLs, …) and metadata values, in
    /// UTF-8 bytes (the model's limit for identity strings).
    public static let maxIdentityStringBytes = 1_024
    /// Entries of an identity's metadata, and the bytes of one key.
    public static let maxIdentityMetadataEntries = 64
    public static let maxIdentityMetadataKeyBytes = 128
    /// The most recipients of one announcement (each gets a message in their announcements
    /// conversation, one command each).
    public static let maxAnnouncementRecipients = 1_000
    /// The most per-recipient push overrides (`notification.recipients`) of one message.
    public static let maxPushOverrides = 1_000
    /// The most users one user blocks.
    public static let maxBlocksPerUser = 1_000
    /// The largest external unread count of a badge.
    public static let maxExternalUnreadCount = 1_000_000
    /// The Accept versions served.
    public static let versions: Set<String> = ["1.0", "3.0"]
}
