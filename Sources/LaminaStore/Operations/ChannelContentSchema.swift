/// Rich content in channel messages (SPEC §6.8, Protocol/CONTENT.md §5, §7): one row per
/// content a channel message references, whatever the member count. Download permission
/// follows the channel's membership, and collection keeps the content while its channel lives.
/// The rows outlive their channel's deletion (the channel's row says it is deleted) until the
/// content itself is collected.
enum ChannelContentSchema {
    static let migration = "v22-channel-content"

    static let sqlite: [String] = [
        """
        CREATE TABLE channel_content (
            content_id BLOB NOT NULL CHECK (length(content_id) = 16),
            message_id BLOB NOT NULL CHECK (length(message_id) = 16),
            channel_id BLOB NOT NULL CHECK (length(channel_id) = 16),
            PRIMARY KEY (content_id, message_id)
        ) STRICT, WITHOUT ROWID
        """,
        "CREATE INDEX channel_content_channel ON channel_content(channel_id)",
    ]

    static let postgres: [String] = [
        """
        CREATE TABLE channel_content (
            content_id BYTEA NOT NULL,
            message_id BYTEA NOT NULL,
            channel_id BYTEA NOT NULL,
            PRIMARY KEY (content_id, message_id)
        )
        """,
        "CREATE INDEX channel_content_channel ON channel_content(channel_id)",
    ]
}
