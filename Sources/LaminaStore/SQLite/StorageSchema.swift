import GRDB
import LaminaModel

/// The versioned schema of the node's database. Migrations are append-only: a released
/// migration is never edited, a change is a new migration.
///
/// Every replicated row carries its origin node and HLC reading, so peer replication needs
/// no migration of its own. Identifiers are 16-byte BLOBs, user ids TEXT, times INTEGER
/// milliseconds, HLC readings three INTEGER columns (see `Columns`).
enum StorageSchema {
    /// The migrator applied when a store opens.
    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1-initial") { db in
            for statement in v1 { try db.execute(sql: statement) }
        }
        migrator.registerMigration("v2-content") { db in
            for statement in v2 { try db.execute(sql: statement) }
        }
        migrator.registerMigration("v3-write-path") { db in
            try WritePathMigration.run(db)
        }
        migrator.registerMigration("v4-derived-counters") { db in
            // A send learns "first message?" from the messages themselves (and the writer's
            // cache), and a feed's head from its entries (`FeedHead`): no counter row is
            // updated per message. `feed_heads` keeps only what pruning leaves behind.
            try db.execute(sql: "ALTER TABLE conversations DROP COLUMN messages_sent")
        }
        migrator.registerMigration("v5-conversation-aliases") { db in
            for statement in v5 { try db.execute(sql: statement) }
        }
        migrator.registerMigration("v6-identities") { db in
            for statement in identities { try db.execute(sql: statement) }
        }
        migrator.registerMigration("v7-webhooks") { db in
            for statement in webhooks { try db.execute(sql: statement) }
        }
        migrator.registerMigration("v8-blocks-and-badges") { db in
            for statement in blocksAndBadges { try db.execute(sql: statement) }
        }
        migrator.registerMigration("v9-push-notifications") { db in
            for statement in push { try db.execute(sql: statement) }
        }
        migrator.registerMigration("v10-replicated-state") { db in
            for statement in replicatedState { try db.execute(sql: statement) }
        }
        migrator.registerMigration("v11-part-updates") { db in
            for statement in partUpdates { try db.execute(sql: statement) }
        }
        migrator.registerMigration("v12-parking-bounds") { db in
            for statement in parkingBounds { try db.execute(sql: statement) }
            // Operations parked before this version count as parked now.
            try db.execute(
                sql: "UPDATE replication_parked SET parked_at = ?", arguments: [Timestamp.now().millisecondsSince1970])
        }
        migrator.registerMigration("v13-distinct-births") { db in
            for statement in distinctBirths { try db.execute(sql: statement) }
        }
        migrator.registerMigration("v14-counters") { db in
            for statement in counters + StoredCounts.fill { try db.execute(sql: statement) }
        }
        migrator.registerMigration("v15-feed-tail") { db in
            try db.execute(sql: FeedTail.createSQLite)
        }
        migrator.registerMigration(SuspensionSchema.migration) { db in
            for statement in SuspensionSchema.sqlite { try db.execute(sql: statement) }
        }
        migrator.registerMigration("v17-follows") { db in
            for statement in follows { try db.execute(sql: statement) }
        }
        migrator.registerMigration(ChannelSchema.migration) { db in
            for statement in ChannelSchema.sqlite { try db.execute(sql: statement) }
        }
        migrator.registerMigration("v19-last-seen") { db in
            for statement in lastSeen { try db.execute(sql: statement) }
        }
        migrator.registerMigration(ReceiptSwitchesSchema.migration) { db in
            for statement in ReceiptSwitchesSchema.sqlite { try db.execute(sql: statement) }
        }
        migrator.registerMigration(ChannelReplicationSchema.migration) { db in
            for statement in ChannelReplicationSchema.sqlite { try db.execute(sql: statement) }
        }
        migrator.registerMigration(ChannelContentSchema.migration) { db in
            for statement in ChannelContentSchema.sqlite { try db.execute(sql: statement) }
        }
        migrator.registerMigration(ReactionSchema.migration) { db in
            for statement in ReactionSchema.sqlite { try db.execute(sql: statement) }
        }
        migrator.registerMigration(ThreadSchema.migration) { db in
            for statement in ThreadSchema.sqlite { try db.execute(sql: statement) }
        }
        migrator.registerMigration(NotificationLevelSchema.migration) { db in
            for statement in NotificationLevelSchema.sqlite { try db.execute(sql: statement) }
        }
        migrator.registerMigration(MessageSearchSchema.migration) { db in
            for statement in MessageSearchSchema.sqlite { try db.execute(sql: statement) }
            try MessageSearchSchema.backfill(SQLiteSession(db), conversations: false)
        }
        migrator.registerMigration(MessageSearchSchema.conversationsMigration) { db in
            for statement in MessageSearchSchema.sqliteConversations { try db.execute(sql: statement) }
            try MessageSearchSchema.backfill(SQLiteSession(db))
        }
        migrator.registerMigration(PartReadingsSchema.migration) { db in
            for statement in PartReadingsSchema.sqlite { try db.execute(sql: statement) }
        }
        migrator.registerMigration(SearchBacklogSchema.migration) { db in
            for statement in SearchBacklogSchema.sqlite { try db.execute(sql: statement) }
        }
        return migrator
    }

    /// The names of the registered migrations, in order.
    static var migrationNames: [String] { migrator.migrations }

    static let v1: [String] = [
        // Node-wide settings (e.g. the node's id), key to value.
        """
        CREATE TABLE node_settings (
            key TEXT PRIMARY KEY NOT NULL,
            value BLOB NOT NULL
        ) STRICT
        """,
        """
        CREATE TABLE conversations (
            id BLOB PRIMARY KEY NOT NULL CHECK (length(id) = 16),
            creator TEXT NOT NULL,
            is_distinct INTEGER NOT NULL CHECK (is_distinct IN (0, 1)),
            participant_set_key BLOB NOT NULL,
            delivery_receipts_enabled INTEGER NOT NULL CHECK (delivery_receipts_enabled IN (0, 1)),
            created_at INTEGER NOT NULL,
            origin_node INTEGER NOT NULL,
            hlc_physical INTEGER NOT NULL,
            hlc_logical INTEGER NOT NULL,
            hlc_node INTEGER NOT NULL,
            merged_into BLOB REFERENCES conversations(id),
            deleted INTEGER NOT NULL DEFAULT 0 CHECK (deleted IN (0, 1))
        ) STRICT
        """,
        // At most one live distinct conversation per participant set.
        """
        CREATE UNIQUE INDEX conversations_distinct ON conversations(participant_set_key)
            WHERE is_distinct = 1 AND merged_into IS NULL AND deleted = 0
        """,
        // The membership operation log; replays are ignored by the unique key.
        """
        CREATE TABLE membership_ops (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            conversation_id BLOB NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
            user_id TEXT NOT NULL,
            op INTEGER NOT NULL CHECK (op IN (1, 2)),
            actor TEXT NOT NULL,
            origin_node INTEGER NOT NULL,
            hlc_physical INTEGER NOT NULL,
            hlc_logical INTEGER NOT NULL,
            hlc_node INTEGER NOT NULL,
            UNIQUE (conversation_id, user_id, hlc_physical, hlc_logical, hlc_node)
        ) STRICT
        """,
        // Current participants, maintained from the op log: the op with the greatest HLC per
        // user wins. removed_* is the HLC of the effective removal (visibility cutoff).
        """
        CREATE TABLE participants (
            conversation_id BLOB NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
            user_id TEXT NOT NULL,
            is_member INTEGER NOT NULL CHECK (is_member IN (0, 1)),
            hlc_physical INTEGER NOT NULL,
            hlc_logical INTEGER NOT NULL,
            hlc_node INTEGER NOT NULL,
            PRIMARY KEY (conversation_id, user_id)
        ) STRICT, WITHOUT ROWID
        """,
        "CREATE INDEX participants_user ON participants(user_id, is_member)",
        """
        CREATE TABLE messages (
            id BLOB PRIMARY KEY NOT NULL CHECK (length(id) = 16),
            conversation_id BLOB NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
            sender TEXT NOT NULL,
            pos_physical INTEGER NOT NULL,
            pos_logical INTEGER NOT NULL,
            pos_node INTEGER NOT NULL,
            sent_at INTEGER NOT NULL,
            push_alert TEXT,
            push_sound TEXT,
            push_title TEXT,
            push_category TEXT,
            push_data BLOB,
            has_push INTEGER NOT NULL DEFAULT 0 CHECK (has_push IN (0, 1)),
            origin_node INTEGER NOT NULL,
            hlc_physical INTEGER NOT NULL,
            hlc_logical INTEGER NOT NULL,
            hlc_node INTEGER NOT NULL,
            deleted INTEGER NOT NULL DEFAULT 0 CHECK (deleted IN (0, 1))
        ) STRICT
        """,
        "CREATE UNIQUE INDEX messages_position ON messages(conversation_id, pos_physical, pos_logical, pos_node)",
        """
        CREATE TABLE message_parts (
            message_id BLOB NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
            idx INTEGER NOT NULL,
            part_id BLOB NOT NULL CHECK (length(part_id) = 16),
            mime_type TEXT NOT NULL,
            inline_bytes BLOB,
            content_id BLOB CHECK (content_id IS NULL OR length(content_id) = 16),
            content_size INTEGER,
            content_sha256 BLOB,
            CHECK ((inline_bytes IS NULL) <> (content_id IS NULL)),
            PRIMARY KEY (message_id, idx),
            UNIQUE (message_id, part_id)
        ) STRICT, WITHOUT ROWID
        """,
        // Recipient status per message and user; the upsert takes the maximum.
        """
        CREATE TABLE recipient_status (
            message_id BLOB NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
            user_id TEXT NOT NULL,
            status INTEGER NOT NULL CHECK (status BETWEEN -1 AND 3),
            PRIMARY KEY (message_id, user_id)
        ) STRICT, WITHOUT ROWID
        """,
        // The position up to which (inclusive) a user has read a conversation.
        """
        CREATE TABLE read_markers (
            conversation_id BLOB NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
            user_id TEXT NOT NULL,
            pos_physical INTEGER NOT NULL,
            pos_logical INTEGER NOT NULL,
            pos_node INTEGER NOT NULL,
            PRIMARY KEY (conversation_id, user_id)
        ) STRICT, WITHOUT ROWID
        """,
        // Metadata, last writer (greatest HLC) wins per key path; value NULL is a tombstone.
        """
        CREATE TABLE metadata_entries (
            conversation_id BLOB NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
            key_path TEXT NOT NULL,
            value BLOB,
            origin_node INTEGER NOT NULL,
            hlc_physical INTEGER NOT NULL,
            hlc_logical INTEGER NOT NULL,
            hlc_node INTEGER NOT NULL,
            PRIMARY KEY (conversation_id, key_path)
        ) STRICT, WITHOUT ROWID
        """,
        // Per-user change feeds: seq counts up per user from 1; payload is the node's encoding.
        // (Since v4 `feed_heads` holds only the floor pruning leaves; see `FeedHead`.)
        """
        CREATE TABLE feed_heads (
            user_id TEXT PRIMARY KEY NOT NULL,
            last_seq INTEGER NOT NULL
        ) STRICT, WITHOUT ROWID
        """,
        """
        CREATE TABLE feed_entries (
            user_id TEXT NOT NULL,
            seq INTEGER NOT NULL,
            kind INTEGER NOT NULL,
            conversation_id BLOB,
            message_id BLOB,
            payload BLOB NOT NULL,
            created_at INTEGER NOT NULL,
            PRIMARY KEY (user_id, seq)
        ) STRICT, WITHOUT ROWID
        """,
        """
        CREATE TABLE device_cursors (
            user_id TEXT NOT NULL,
            device_id TEXT NOT NULL,
            acked_seq INTEGER NOT NULL,
            updated_at INTEGER NOT NULL,
            PRIMARY KEY (user_id, device_id)
        ) STRICT, WITHOUT ROWID
        """,
        // Results of client commands by client-chosen id: the first writer wins.
        """
        CREATE TABLE idempotency_records (
            user_id TEXT NOT NULL,
            request_id BLOB NOT NULL CHECK (length(request_id) = 16),
            result BLOB NOT NULL,
            created_at INTEGER NOT NULL,
            PRIMARY KEY (user_id, request_id)
        ) STRICT, WITHOUT ROWID
        """,
        "CREATE INDEX idempotency_created ON idempotency_records(created_at)",
        """
        CREATE TABLE nonces (
            nonce TEXT PRIMARY KEY NOT NULL,
            issued_at INTEGER NOT NULL,
            expires_at INTEGER NOT NULL,
            used_at INTEGER
        ) STRICT, WITHOUT ROWID
        """,
        "CREATE INDEX nonces_expiry ON nonces(expires_at)",
        """
        CREATE TABLE sessions (
            token_hash BLOB PRIMARY KEY NOT NULL CHECK (length(token_hash) = 32),
            user_id TEXT NOT NULL,
            device_id TEXT NOT NULL,
            created_at INTEGER NOT NULL,
            expires_at INTEGER NOT NULL,
            revoked_at INTEGER
        ) STRICT, WITHOUT ROWID
        """,
        "CREATE INDEX sessions_user ON sessions(user_id)",
        "CREATE INDEX sessions_expiry ON sessions(expires_at)",
        // Rich content uploads (parts over 2 KB); the bytes live in files under the data directory.
        """
        CREATE TABLE content_uploads (
            content_id BLOB PRIMARY KEY NOT NULL CHECK (length(content_id) = 16),
            owner TEXT NOT NULL,
            declared_size INTEGER NOT NULL CHECK (declared_size >= 0),
            sha256 BLOB NOT NULL CHECK (length(sha256) = 32),
            received_bytes INTEGER NOT NULL DEFAULT 0 CHECK (received_bytes >= 0 AND received_bytes <= declared_size),
            state INTEGER NOT NULL,
            created_at INTEGER NOT NULL,
            updated_at INTEGER NOT NULL
        ) STRICT, WITHOUT ROWID
        """,
        // Operations for peers, per origin node in counter order.
        """
        CREATE TABLE replication_log (
            origin_node INTEGER NOT NULL,
            counter INTEGER NOT NULL CHECK (counter > 0),
            hlc_physical INTEGER NOT NULL,
            hlc_logical INTEGER NOT NULL,
            hlc_node INTEGER NOT NULL,
            op BLOB NOT NULL,
            PRIMARY KEY (origin_node, counter)
        ) STRICT, WITHOUT ROWID
        """,
    ]

    /// Rich content transfer (Protocol/CONTENT.md): which messages reference a content (download
    /// authorization, collection) and the per-owner sums of the quota.
    static let v2: [String] = [
        "CREATE INDEX message_parts_content ON message_parts(content_id) WHERE content_id IS NOT NULL",
        "CREATE INDEX content_uploads_owner ON content_uploads(owner, state)",
        "CREATE INDEX content_uploads_state ON content_uploads(state, updated_at)",
    ]
}

extension StorageSchema {
    /// Conversation aliases (SPEC §6.1): the client-chosen id of a CREATE_CONVERSATION that
    /// resolved to an existing distinct conversation names that conversation from then on.
    /// An alias never names a row of `conversations` (the id was not inserted there).
    static let v5: [String] = [
        """
        CREATE TABLE conversation_aliases (
            alias BLOB PRIMARY KEY NOT NULL CHECK (length(alias) = 16),
            conversation_id BLOB NOT NULL REFERENCES conversations(id),
            user_id TEXT NOT NULL,
            created_at INTEGER NOT NULL
        ) STRICT
        """,
        "CREATE INDEX conversation_aliases_conversation ON conversation_aliases(conversation_id)",
    ]

    /// Identities an app backend sets through the Server API (JSON of `StoredIdentity`).
    static let identities: [String] = [
        """
        CREATE TABLE identities (
            user_id TEXT PRIMARY KEY NOT NULL,
            identity BLOB NOT NULL,
            updated_at INTEGER NOT NULL
        ) STRICT, WITHOUT ROWID
        """
    ]

    /// Webhooks (Layer's Webhooks API 3.0) and their delivery queue, the transactional
    /// outbox: one row per event per active webhook subscribed to it, written in the commit
    /// of the command that caused the event, deleted once delivered. `seq` is commit order.
    static let webhooks: [String] = [
        """
        CREATE TABLE webhooks (
            id BLOB PRIMARY KEY NOT NULL CHECK (length(id) = 16),
            target_url TEXT NOT NULL,
            events TEXT NOT NULL,
            secret TEXT NOT NULL,
            config BLOB,
            status INTEGER NOT NULL CHECK (status IN (0, 1, 2)),
            status_reason TEXT,
            created_at INTEGER NOT NULL,
            updated_at INTEGER NOT NULL
        ) STRICT
        """,
        """
        CREATE TABLE webhook_queue (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            webhook_id BLOB NOT NULL REFERENCES webhooks(id) ON DELETE CASCADE,
            request_id BLOB NOT NULL CHECK (length(request_id) = 16),
            event_type TEXT NOT NULL,
            payload BLOB NOT NULL,
            created_at INTEGER NOT NULL,
            attempts INTEGER NOT NULL DEFAULT 0,
            next_attempt_at INTEGER NOT NULL
        ) STRICT
        """,
        "CREATE INDEX webhook_queue_order ON webhook_queue(webhook_id, seq)",
    ]

    /// Explicit following (SPEC §6.7): `follower` receives `followed`'s identity and presence
    /// without sharing a conversation with them.
    static let follows: [String] = [
        """
        CREATE TABLE follows (
            follower TEXT NOT NULL,
            followed TEXT NOT NULL,
            created_at INTEGER NOT NULL,
            PRIMARY KEY (follower, followed)
        ) STRICT, WITHOUT ROWID
        """,
        "CREATE INDEX follows_followed ON follows(followed, follower)",
    ]

    /// When each user was last seen connected and visible (SPEC §6.6), written in batches as
    /// users go offline, read back after a restart.
    static let lastSeen: [String] = [
        """
        CREATE TABLE last_seen (
            user_id TEXT PRIMARY KEY NOT NULL,
            seen_at INTEGER NOT NULL
        ) STRICT, WITHOUT ROWID
        """
    ]

    /// Block lists (Server API): `blocker` does not receive `blocked`'s messages; badges: the
    /// unread count an app backend sets for a user, beside the node's own unread counts.
    static let blocksAndBadges: [String] = [
        """
        CREATE TABLE blocks (
            blocker TEXT NOT NULL,
            blocked TEXT NOT NULL,
            created_at INTEGER NOT NULL,
            PRIMARY KEY (blocker, blocked)
        ) STRICT, WITHOUT ROWID
        """,
        """
        CREATE TABLE badges (
            user_id TEXT PRIMARY KEY NOT NULL,
            external_unread_count INTEGER NOT NULL CHECK (external_unread_count >= 0),
            updated_at INTEGER NOT NULL
        ) STRICT, WITHOUT ROWID
        """,
    ]

    /// Push tokens, one per device (the user's device id as AUTHENTICATE gave it), and the
    /// push outbox: one row per message per offline device with a token, written in the commit
    /// of the message, deleted once the provider answered (or the push expired). A token is
    /// held by one device at a time (`push_tokens_token`).
    static let push: [String] = [
        """
        CREATE TABLE push_tokens (
            user_id TEXT NOT NULL,
            device TEXT NOT NULL,
            kind INTEGER NOT NULL CHECK (kind IN (1, 2, 3)),
            token TEXT NOT NULL,
            topic TEXT,
            environment INTEGER,
            updated_at INTEGER NOT NULL,
            PRIMARY KEY (user_id, device)
        ) STRICT, WITHOUT ROWID
        """,
        "CREATE UNIQUE INDEX push_tokens_token ON push_tokens(kind, token)",
        """
        CREATE TABLE push_queue (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            kind INTEGER NOT NULL CHECK (kind IN (1, 2, 3)),
            user_id TEXT NOT NULL,
            device TEXT NOT NULL,
            token TEXT NOT NULL,
            topic TEXT,
            environment INTEGER,
            message_id BLOB NOT NULL CHECK (length(message_id) = 16),
            payload BLOB NOT NULL,
            created_at INTEGER NOT NULL,
            expires_at INTEGER NOT NULL,
            attempts INTEGER NOT NULL DEFAULT 0,
            next_attempt_at INTEGER NOT NULL
        ) STRICT
        """,
        "CREATE UNIQUE INDEX push_queue_once ON push_queue(message_id, user_id, device)",
        "CREATE INDEX push_queue_due ON push_queue(kind, next_attempt_at)",
    ]

    /// Peer replication's own state (SPEC §6.5): operations parked until the conversation they
    /// name is held here (they are in `replication_log`; this names them by conversation), and
    /// the last-writer-wins registers of the state about users (identities, blocks, badges,
    /// session revocations): per kind and key, the HLC reading of the write that holds.
    static let replicatedState: [String] = [
        """
        CREATE TABLE user_state_registers (
            kind INTEGER NOT NULL,
            key TEXT NOT NULL,
            hlc_physical INTEGER NOT NULL,
            hlc_logical INTEGER NOT NULL,
            hlc_node INTEGER NOT NULL,
            PRIMARY KEY (kind, key)
        ) STRICT, WITHOUT ROWID
        """,
        """
        CREATE TABLE replication_parked (
            conversation_id BLOB NOT NULL CHECK (length(conversation_id) = 16),
            origin_node INTEGER NOT NULL,
            counter INTEGER NOT NULL CHECK (counter > 0),
            PRIMARY KEY (conversation_id, origin_node, counter)
        ) STRICT, WITHOUT ROWID
        """,
    ]

    /// Server API part updates: when a message's parts were last replaced, and by whom (the
    /// body in `messages` holds the current parts; a message never updated has no row, its
    /// parts date from its own HLC reading).
    static let partUpdates: [String] = [
        """
        CREATE TABLE message_part_updates (
            message_id BLOB PRIMARY KEY NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
            hlc_physical INTEGER NOT NULL,
            hlc_logical INTEGER NOT NULL,
            hlc_node INTEGER NOT NULL,
            origin_node INTEGER NOT NULL,
            updated_by TEXT NOT NULL
        ) STRICT, WITHOUT ROWID
        """
    ]

    /// Stored counts (`StoredCounts`): per conversation and sender the messages not deleted for
    /// everyone, per participant their unread messages; filled from the messages.
    static let counters: [String] = [
        """
        CREATE TABLE message_counts (
            conversation_id BLOB NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
            sender TEXT NOT NULL,
            messages INTEGER NOT NULL,
            PRIMARY KEY (conversation_id, sender)
        ) STRICT, WITHOUT ROWID
        """,
        "ALTER TABLE participants ADD COLUMN unread INTEGER NOT NULL DEFAULT 0",
    ]

    /// Bounds on parked operations (`ParkingLimits`): when each was parked and the bytes of its
    /// log record; an index per origin in counter order that covers the bound's totals (parking
    /// is rare: a creation that has not arrived; each park reads its origin's entries once).
    static let parkingBounds: [String] = [
        "ALTER TABLE replication_parked ADD COLUMN parked_at INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE replication_parked ADD COLUMN bytes INTEGER NOT NULL DEFAULT 0",
        "CREATE INDEX replication_parked_origin ON replication_parked(origin_node, counter, bytes)",
        "CREATE INDEX replication_parked_age ON replication_parked(parked_at)",
    ]

    /// The birth of each conversation created distinct (SPEC §6.5): the creating operation
    /// (origin, counter) and the vector its origin held then, by the participant set it was
    /// created with. Distinct conversations live before this version get a birth of unknown
    /// counter (0: treated as seen by every later creation; a live one still merges with a
    /// concurrent creation, as before).
    static let distinctBirths: [String] = [
        """
        CREATE TABLE distinct_births (
            conversation_id BLOB PRIMARY KEY,
            participant_set_key BLOB NOT NULL,
            origin_node INTEGER NOT NULL,
            origin_counter INTEGER NOT NULL,
            seen TEXT NOT NULL
        )
        """,
        "CREATE INDEX distinct_births_set ON distinct_births(participant_set_key)",
        """
        INSERT INTO distinct_births (conversation_id, participant_set_key, origin_node, origin_counter, seen)
            SELECT id, participant_set_key, origin_node, 0, '' FROM conversations WHERE is_distinct = 1 AND merged_into IS NULL
        """,
    ]
}
