import Foundation

/// The schema of the PostgreSQL backend, as a list of migrations like SQLite's
/// (`StorageSchema.migrator`): applied in order, each once, recorded in `lamina_migrations`.
/// The first one is the SQLite schema after `v11-part-updates` in PostgreSQL's types: BLOB is
/// BYTEA, INTEGER is BIGINT (positions, HLCs, flags 0/1), TEXT sorts bytewise (`COLLATE "C"`,
/// as SQLite's BINARY), `INTEGER PRIMARY KEY AUTOINCREMENT` is an identity column. A later
/// migration is one more entry here and one more `registerMigration` there.
enum PostgresSchema {
    /// Migrations in order: (identifier, statements).
    static let migrations: [(id: String, statements: [String])] = [
        ("v11-baseline", baseline),
        (
            "v12-parking-bounds",
            [
                "ALTER TABLE replication_parked ADD COLUMN parked_at BIGINT NOT NULL DEFAULT 0",
                "ALTER TABLE replication_parked ADD COLUMN bytes BIGINT NOT NULL DEFAULT 0",
                "CREATE INDEX replication_parked_origin ON replication_parked(origin_node, counter, bytes)",
                "CREATE INDEX replication_parked_age ON replication_parked(parked_at)",
                // Operations parked before this version count as parked now.
                "UPDATE replication_parked SET parked_at = CAST(EXTRACT(EPOCH FROM now()) * 1000 AS BIGINT)",
            ]
        ),
        (
            "v13-distinct-births",
            [
                """
                CREATE TABLE distinct_births (
                    conversation_id BYTEA PRIMARY KEY,
                    participant_set_key BYTEA NOT NULL,
                    origin_node BIGINT NOT NULL,
                    origin_counter BIGINT NOT NULL,
                    seen TEXT COLLATE "C" NOT NULL
                )
                """,
                "CREATE INDEX distinct_births_set ON distinct_births(participant_set_key)",
                """
                INSERT INTO distinct_births (conversation_id, participant_set_key, origin_node, origin_counter, seen)
                    SELECT id, participant_set_key, origin_node, 0, '' FROM conversations WHERE is_distinct = 1 AND merged_into IS NULL
                """,
            ]
        ),
        (
            "v14-counters",
            [
                """
                CREATE TABLE message_counts (
                    conversation_id BYTEA NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
                    sender TEXT COLLATE "C" NOT NULL,
                    messages BIGINT NOT NULL,
                    PRIMARY KEY (conversation_id, sender)
                )
                """,
                "ALTER TABLE participants ADD COLUMN unread BIGINT NOT NULL DEFAULT 0",
            ] + StoredCounts.fill
        ),
        ("v15-live-devices", liveDevices),
        // Empty here: PostgreSQL's writers append to `feed_entries` (see `FeedTail`); the table
        // exists so that the feed's reads are one text on both backends.
        ("v16-feed-tail", [FeedTail.createPostgres]),
        (SuspensionSchema.migration, SuspensionSchema.postgres),
        (
            "v17-follows",
            [
                """
                CREATE TABLE follows (
                    follower TEXT COLLATE "C" NOT NULL,
                    followed TEXT COLLATE "C" NOT NULL,
                    created_at BIGINT NOT NULL,
                    PRIMARY KEY (follower, followed)
                )
                """,
                "CREATE INDEX follows_followed ON follows(followed, follower)",
            ]
        ),
        (ChannelSchema.migration, ChannelSchema.postgres),
        (
            "v19-last-seen",
            [
                """
                CREATE TABLE last_seen (
                    user_id TEXT COLLATE "C" PRIMARY KEY,
                    seen_at BIGINT NOT NULL
                )
                """
            ]
        ),
        (ReceiptSwitchesSchema.migration, ReceiptSwitchesSchema.postgres),
        (ChannelReplicationSchema.migration, ChannelReplicationSchema.postgres),
        (ChannelContentSchema.migration, ChannelContentSchema.postgres),
        (ReactionSchema.migration, ReactionSchema.postgres),
        (ThreadSchema.migration, ThreadSchema.postgres),
        (NotificationLevelSchema.migration, NotificationLevelSchema.postgres),
        (MessageSearchSchema.migration, MessageSearchSchema.postgres),
        (PartReadingsSchema.migration, PartReadingsSchema.postgres),
    ]

    /// PostgreSQL only (SQLite has one node, whose sessions it knows): the devices with a live
    /// session on some node, each row kept by that node's listening connection (its server
    /// process and start time: the row counts only while that connection lives, so a node killed
    /// with SIGKILL leaves rows nobody counts). UNLOGGED: presence is not worth a WAL write, and
    /// a database crash empties it (every node then registers its sessions again on reconnect).
    static let liveDevices: [String] = [
        """
        CREATE UNLOGGED TABLE live_devices (
            user_id TEXT COLLATE "C" NOT NULL,
            device_id TEXT COLLATE "C" NOT NULL,
            backend_pid INTEGER NOT NULL,
            backend_start TIMESTAMPTZ NOT NULL,
            PRIMARY KEY (user_id, device_id, backend_pid, backend_start)
        )
        """
    ]

    /// Serializes migrations of several nodes starting on one database at once.
    static let migrationLock: Int64 = 0x4C_414D_494E_41  // "LAMINA"

    /// Brings the database to the current schema in one transaction. Refuses a database that
    /// records a migration this node does not know (made by a newer node): `.schemaTooNew`.
    static func migrate(_ db: PostgresSession) throws(StorageError) {
        try db.begin()
        do throws(StorageError) {
            try db.run("SELECT pg_advisory_xact_lock(?)", [migrationLock])
            try db.run(
                "CREATE TABLE IF NOT EXISTS lamina_migrations (identifier TEXT COLLATE \"C\" PRIMARY KEY, applied_at BIGINT NOT NULL)"
            )
            let applied = Set(try db.rows("SELECT identifier FROM lamina_migrations").map { $0[0] as String })
            let known = Set(migrations.map(\.id))
            let unknown = applied.subtracting(known)
            guard unknown.isEmpty else {
                throw StorageError(
                    .schemaTooNew,
                    "the database's schema is newer than this node knows (migrations \(unknown.sorted().joined(separator: ", "))); run a newer node"
                )
            }
            for migration in migrations where !applied.contains(migration.id) {
                for statement in migration.statements { try db.run(statement) }
                if migration.id == MessageSearchSchema.migration { try MessageSearchSchema.backfill(db) }
                try db.run(
                    "INSERT INTO lamina_migrations (identifier, applied_at) VALUES (?, ?)",
                    [migration.id, Int64(Date().timeIntervalSince1970 * 1_000)])
            }
            try db.commit()
        } catch {
            db.rollback()
            throw error
        }
    }

    /// The applied migrations' identifiers, in the order they were applied.
    static func appliedMigrations(_ db: PostgresSession) throws(StorageError) -> [String] {
        try db.rows("SELECT identifier FROM lamina_migrations ORDER BY applied_at, identifier").map { $0[0] as String }
    }

    static let baseline: [String] = [
        """
        CREATE TABLE node_settings (
            key TEXT COLLATE "C" PRIMARY KEY NOT NULL,
            value BYTEA NOT NULL
        )
        """,
        """
        CREATE TABLE conversations (
            id BYTEA PRIMARY KEY NOT NULL CHECK (length(id) = 16),
            creator TEXT COLLATE "C" NOT NULL,
            is_distinct BIGINT NOT NULL CHECK (is_distinct IN (0, 1)),
            participant_set_key BYTEA NOT NULL,
            delivery_receipts_enabled BIGINT NOT NULL CHECK (delivery_receipts_enabled IN (0, 1)),
            created_at BIGINT NOT NULL,
            origin_node BIGINT NOT NULL,
            hlc_physical BIGINT NOT NULL,
            hlc_logical BIGINT NOT NULL,
            hlc_node BIGINT NOT NULL,
            merged_into BYTEA REFERENCES conversations(id),
            deleted BIGINT NOT NULL DEFAULT 0 CHECK (deleted IN (0, 1))
        )
        """,
        """
        CREATE UNIQUE INDEX conversations_distinct ON conversations(participant_set_key)
            WHERE is_distinct = 1 AND merged_into IS NULL AND deleted = 0
        """,
        """
        CREATE TABLE membership_ops (
            seq BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
            conversation_id BYTEA NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
            user_id TEXT COLLATE "C" NOT NULL,
            op BIGINT NOT NULL CHECK (op IN (1, 2)),
            actor TEXT COLLATE "C" NOT NULL,
            origin_node BIGINT NOT NULL,
            hlc_physical BIGINT NOT NULL,
            hlc_logical BIGINT NOT NULL,
            hlc_node BIGINT NOT NULL,
            UNIQUE (conversation_id, user_id, hlc_physical, hlc_logical, hlc_node)
        )
        """,
        """
        CREATE TABLE participants (
            conversation_id BYTEA NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
            user_id TEXT COLLATE "C" NOT NULL,
            is_member BIGINT NOT NULL CHECK (is_member IN (0, 1)),
            hlc_physical BIGINT NOT NULL,
            hlc_logical BIGINT NOT NULL,
            hlc_node BIGINT NOT NULL,
            PRIMARY KEY (conversation_id, user_id)
        )
        """,
        """
        CREATE INDEX participants_user ON participants(user_id, is_member)
        """,
        """
        CREATE TABLE messages (
            id BYTEA NOT NULL UNIQUE CHECK (length(id) = 16),
            conversation_id BYTEA NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
            sender TEXT COLLATE "C" NOT NULL,
            pos_physical BIGINT NOT NULL,
            pos_logical BIGINT NOT NULL,
            pos_node BIGINT NOT NULL,
            sent_at BIGINT NOT NULL,
            body BYTEA NOT NULL,
            request_digest BYTEA CHECK (request_digest IS NULL OR length(request_digest) = 32),
            origin_node BIGINT NOT NULL,
            hlc_physical BIGINT NOT NULL,
            hlc_logical BIGINT NOT NULL,
            hlc_node BIGINT NOT NULL,
            deleted BIGINT NOT NULL DEFAULT 0 CHECK (deleted IN (0, 1))
        )
        """,
        """
        CREATE UNIQUE INDEX messages_position ON messages(conversation_id, pos_physical, pos_logical, pos_node)
        """,
        """
        CREATE TABLE message_parts (
            message_id BYTEA NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
            idx BIGINT NOT NULL,
            part_id BYTEA NOT NULL CHECK (length(part_id) = 16),
            mime_type TEXT COLLATE "C" NOT NULL,
            inline_bytes BYTEA,
            content_id BYTEA CHECK (content_id IS NULL OR length(content_id) = 16),
            content_size BIGINT,
            content_sha256 BYTEA,
            CHECK ((inline_bytes IS NULL) <> (content_id IS NULL)),
            PRIMARY KEY (message_id, idx),
            UNIQUE (message_id, part_id)
        )
        """,
        """
        CREATE TABLE recipient_status (
            message_id BYTEA NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
            user_id TEXT COLLATE "C" NOT NULL,
            status BIGINT NOT NULL CHECK (status BETWEEN -1 AND 3),
            PRIMARY KEY (message_id, user_id)
        )
        """,
        """
        CREATE TABLE read_markers (
            conversation_id BYTEA NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
            user_id TEXT COLLATE "C" NOT NULL,
            pos_physical BIGINT NOT NULL,
            pos_logical BIGINT NOT NULL,
            pos_node BIGINT NOT NULL,
            PRIMARY KEY (conversation_id, user_id)
        )
        """,
        """
        CREATE TABLE metadata_entries (
            conversation_id BYTEA NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
            key_path TEXT COLLATE "C" NOT NULL,
            value BYTEA,
            origin_node BIGINT NOT NULL,
            hlc_physical BIGINT NOT NULL,
            hlc_logical BIGINT NOT NULL,
            hlc_node BIGINT NOT NULL,
            PRIMARY KEY (conversation_id, key_path)
        )
        """,
        """
        CREATE TABLE feed_heads (
            user_id TEXT COLLATE "C" PRIMARY KEY NOT NULL,
            last_seq BIGINT NOT NULL
        )
        """,
        """
        CREATE TABLE device_cursors (
            user_id TEXT COLLATE "C" NOT NULL,
            device_id TEXT COLLATE "C" NOT NULL,
            acked_seq BIGINT NOT NULL,
            updated_at BIGINT NOT NULL,
            PRIMARY KEY (user_id, device_id)
        )
        """,
        """
        CREATE TABLE idempotency_records (
            user_id TEXT COLLATE "C" NOT NULL,
            request_id BYTEA NOT NULL CHECK (length(request_id) = 16),
            result BYTEA NOT NULL,
            created_at BIGINT NOT NULL,
            PRIMARY KEY (user_id, request_id)
        )
        """,
        """
        CREATE INDEX idempotency_created ON idempotency_records(created_at)
        """,
        """
        CREATE TABLE nonces (
            nonce TEXT COLLATE "C" PRIMARY KEY NOT NULL,
            issued_at BIGINT NOT NULL,
            expires_at BIGINT NOT NULL,
            used_at BIGINT
        )
        """,
        """
        CREATE INDEX nonces_expiry ON nonces(expires_at)
        """,
        """
        CREATE TABLE sessions (
            token_hash BYTEA PRIMARY KEY NOT NULL CHECK (length(token_hash) = 32),
            user_id TEXT COLLATE "C" NOT NULL,
            device_id TEXT COLLATE "C" NOT NULL,
            created_at BIGINT NOT NULL,
            expires_at BIGINT NOT NULL,
            revoked_at BIGINT
        )
        """,
        """
        CREATE INDEX sessions_user ON sessions(user_id)
        """,
        """
        CREATE INDEX sessions_expiry ON sessions(expires_at)
        """,
        """
        CREATE TABLE content_uploads (
            content_id BYTEA PRIMARY KEY NOT NULL CHECK (length(content_id) = 16),
            owner TEXT COLLATE "C" NOT NULL,
            declared_size BIGINT NOT NULL CHECK (declared_size >= 0),
            sha256 BYTEA NOT NULL CHECK (length(sha256) = 32),
            received_bytes BIGINT NOT NULL DEFAULT 0 CHECK (received_bytes >= 0 AND received_bytes <= declared_size),
            state BIGINT NOT NULL,
            created_at BIGINT NOT NULL,
            updated_at BIGINT NOT NULL
        )
        """,
        """
        CREATE TABLE replication_log (
            origin_node BIGINT NOT NULL,
            counter BIGINT NOT NULL CHECK (counter > 0),
            hlc_physical BIGINT NOT NULL,
            hlc_logical BIGINT NOT NULL,
            hlc_node BIGINT NOT NULL,
            op BYTEA NOT NULL,
            PRIMARY KEY (origin_node, counter)
        )
        """,
        """
        CREATE INDEX message_parts_content ON message_parts(content_id) WHERE content_id IS NOT NULL
        """,
        """
        CREATE INDEX content_uploads_owner ON content_uploads(owner, state)
        """,
        """
        CREATE INDEX content_uploads_state ON content_uploads(state, updated_at)
        """,
        """
        CREATE TABLE feed_entries (
            user_id TEXT COLLATE "C" NOT NULL,
            seq BIGINT NOT NULL,
            kind BIGINT NOT NULL,
            conversation_id BYTEA,
            message_id BYTEA,
            payload BYTEA,
            created_at BIGINT NOT NULL,
            CHECK (payload IS NOT NULL OR message_id IS NOT NULL),
            PRIMARY KEY (user_id, seq)
        )
        """,
        """
        CREATE TABLE delivered_markers (
            conversation_id BYTEA NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
            user_id TEXT COLLATE "C" NOT NULL,
            pos_physical BIGINT NOT NULL,
            pos_logical BIGINT NOT NULL,
            pos_node BIGINT NOT NULL,
            PRIMARY KEY (conversation_id, user_id)
        )
        """,
        """
        CREATE TABLE conversation_aliases (
            alias BYTEA PRIMARY KEY NOT NULL CHECK (length(alias) = 16),
            conversation_id BYTEA NOT NULL REFERENCES conversations(id),
            user_id TEXT COLLATE "C" NOT NULL,
            created_at BIGINT NOT NULL
        )
        """,
        """
        CREATE INDEX conversation_aliases_conversation ON conversation_aliases(conversation_id)
        """,
        """
        CREATE TABLE identities (
            user_id TEXT COLLATE "C" PRIMARY KEY NOT NULL,
            identity BYTEA NOT NULL,
            updated_at BIGINT NOT NULL
        )
        """,
        """
        CREATE TABLE webhooks (
            id BYTEA PRIMARY KEY NOT NULL CHECK (length(id) = 16),
            target_url TEXT COLLATE "C" NOT NULL,
            events TEXT COLLATE "C" NOT NULL,
            secret TEXT COLLATE "C" NOT NULL,
            config BYTEA,
            status BIGINT NOT NULL CHECK (status IN (0, 1, 2)),
            status_reason TEXT COLLATE "C",
            created_at BIGINT NOT NULL,
            updated_at BIGINT NOT NULL
        )
        """,
        """
        CREATE TABLE webhook_queue (
            seq BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
            webhook_id BYTEA NOT NULL REFERENCES webhooks(id) ON DELETE CASCADE,
            request_id BYTEA NOT NULL CHECK (length(request_id) = 16),
            event_type TEXT COLLATE "C" NOT NULL,
            payload BYTEA NOT NULL,
            created_at BIGINT NOT NULL,
            attempts BIGINT NOT NULL DEFAULT 0,
            next_attempt_at BIGINT NOT NULL
        )
        """,
        """
        CREATE INDEX webhook_queue_order ON webhook_queue(webhook_id, seq)
        """,
        """
        CREATE TABLE blocks (
            blocker TEXT COLLATE "C" NOT NULL,
            blocked TEXT COLLATE "C" NOT NULL,
            created_at BIGINT NOT NULL,
            PRIMARY KEY (blocker, blocked)
        )
        """,
        """
        CREATE TABLE badges (
            user_id TEXT COLLATE "C" PRIMARY KEY NOT NULL,
            external_unread_count BIGINT NOT NULL CHECK (external_unread_count >= 0),
            updated_at BIGINT NOT NULL
        )
        """,
        """
        CREATE TABLE push_tokens (
            user_id TEXT COLLATE "C" NOT NULL,
            device TEXT COLLATE "C" NOT NULL,
            kind BIGINT NOT NULL CHECK (kind IN (1, 2, 3)),
            token TEXT COLLATE "C" NOT NULL,
            topic TEXT COLLATE "C",
            environment BIGINT,
            updated_at BIGINT NOT NULL,
            PRIMARY KEY (user_id, device)
        )
        """,
        """
        CREATE UNIQUE INDEX push_tokens_token ON push_tokens(kind, token)
        """,
        """
        CREATE TABLE push_queue (
            seq BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
            kind BIGINT NOT NULL CHECK (kind IN (1, 2, 3)),
            user_id TEXT COLLATE "C" NOT NULL,
            device TEXT COLLATE "C" NOT NULL,
            token TEXT COLLATE "C" NOT NULL,
            topic TEXT COLLATE "C",
            environment BIGINT,
            message_id BYTEA NOT NULL CHECK (length(message_id) = 16),
            payload BYTEA NOT NULL,
            created_at BIGINT NOT NULL,
            expires_at BIGINT NOT NULL,
            attempts BIGINT NOT NULL DEFAULT 0,
            next_attempt_at BIGINT NOT NULL
        )
        """,
        """
        CREATE UNIQUE INDEX push_queue_once ON push_queue(message_id, user_id, device)
        """,
        """
        CREATE INDEX push_queue_due ON push_queue(kind, next_attempt_at)
        """,
        """
        CREATE TABLE user_state_registers (
            kind BIGINT NOT NULL,
            key TEXT COLLATE "C" NOT NULL,
            hlc_physical BIGINT NOT NULL,
            hlc_logical BIGINT NOT NULL,
            hlc_node BIGINT NOT NULL,
            PRIMARY KEY (kind, key)
        )
        """,
        """
        CREATE TABLE replication_parked (
            conversation_id BYTEA NOT NULL CHECK (length(conversation_id) = 16),
            origin_node BIGINT NOT NULL,
            counter BIGINT NOT NULL CHECK (counter > 0),
            PRIMARY KEY (conversation_id, origin_node, counter)
        )
        """,
        """
        CREATE TABLE message_part_updates (
            message_id BYTEA PRIMARY KEY NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
            hlc_physical BIGINT NOT NULL,
            hlc_logical BIGINT NOT NULL,
            hlc_node BIGINT NOT NULL,
            origin_node BIGINT NOT NULL,
            updated_by TEXT COLLATE "C" NOT NULL
        )
        """,
    ]
}
