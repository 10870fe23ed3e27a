/// Layer's two receipt switches (SPEC §3.16): `delivery_receipts_enabled` keeps the delivery
/// switch and `read_receipts_enabled` is the read switch. A conversation stored before the
/// switches had one flag meaning both, so the read switch starts as that flag.
enum ReceiptSwitchesSchema {
    static let migration = "v20-receipt-switches"

    static let sqlite: [String] = [
        """
        ALTER TABLE conversations ADD COLUMN read_receipts_enabled INTEGER NOT NULL DEFAULT 1
            CHECK (read_receipts_enabled IN (0, 1))
        """,
        "UPDATE conversations SET read_receipts_enabled = delivery_receipts_enabled",
    ]

    static let postgres: [String] = [
        """
        ALTER TABLE conversations ADD COLUMN read_receipts_enabled BIGINT NOT NULL DEFAULT 1
            CHECK (read_receipts_enabled IN (0, 1))
        """,
        "UPDATE conversations SET read_receipts_enabled = delivery_receipts_enabled",
    ]
}
