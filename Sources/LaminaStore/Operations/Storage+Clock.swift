import LaminaModel

extension StorageReader {
    /// The latest HLC reading `node` has stored: message positions and the times of
    /// conversations, membership and metadata operations. A restarted node's clock continues
    /// after it, so positions never go back even when the wall clock was set back.
    package func latestHLC(of node: NodeID) throws(StorageError) -> HLCTimestamp? {
        let n = Columns.node(node)
        guard
            let row = try db.row(
                """
                SELECT physical AS hlc_physical, logical AS hlc_logical, ? AS hlc_node FROM (
                    SELECT pos_physical AS physical, pos_logical AS logical FROM messages WHERE pos_node = ?
                    UNION ALL SELECT hlc_physical, hlc_logical FROM conversations WHERE hlc_node = ?
                    UNION ALL SELECT hlc_physical, hlc_logical FROM membership_ops WHERE hlc_node = ?
                    UNION ALL SELECT hlc_physical, hlc_logical FROM metadata_entries WHERE hlc_node = ?
                ) AS readings ORDER BY physical DESC, logical DESC LIMIT 1
                """,
                [n, n, n, n, n]
            )
        else { return nil }
        return try Columns.hlc(row, "hlc")
    }
}
