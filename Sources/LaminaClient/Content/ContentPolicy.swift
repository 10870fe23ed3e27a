import LaminaModel

/// One piece of cached content, as the purge policy sees it.
public struct CachedContent: Hashable, Sendable {
    public var part: MessagePartID
    public var size: UInt64
    public var lastAccess: Timestamp

    public init(part: MessagePartID, size: UInt64, lastAccess: Timestamp) {
        self.part = part
        self.size = size
        self.lastAccess = lastAccess
    }
}

/// The content rules as pure functions.
public enum ContentPolicy {
    /// The largest disk capacity a setting may name: 1 TiB.
    public static let maxDiskCapacity: UInt64 = 1 << 40

    /// Whether a part's content downloads by itself: never once purged from this device;
    /// otherwise when its MIME type is auto-downloaded (nil = all types) or its size is at
    /// most the auto-download maximum.
    public static func shouldAutoDownload(mimeType: MIMEType, size: UInt64, wasPurged: Bool, settings: ContentSettings)
        -> Bool
    {
        if wasPurged { return false }
        guard let types = settings.autoDownloadMIMETypes else { return true }
        return types.contains(mimeType) || size <= settings.autoDownloadMaximumContentSize
    }

    /// The usage a purge brings the cache down to: 80% of the capacity.
    public static func purgeTarget(capacity: UInt64) -> UInt64 { capacity / 5 * 4 + (capacity % 5) * 4 / 5 }

    /// What to purge when `cached` exceeds `capacity` (0 = unlimited: nothing): the least
    /// recently accessed first (ties by part identifier), until usage is at most 80% of it.
    public static func purgePlan(_ cached: [CachedContent], capacity: UInt64) -> [CachedContent] {
        guard capacity > 0 else { return [] }
        var usage = cached.reduce(UInt64(0)) { $0 &+ $1.size }
        guard usage > capacity else { return [] }
        let target = purgeTarget(capacity: capacity)
        var plan: [CachedContent] = []
        let order = cached.sorted { a, b in
            if a.lastAccess != b.lastAccess { return a.lastAccess < b.lastAccess }
            return a.part.url < b.part.url
        }
        for item in order where usage > target {
            plan.append(item)
            usage -= item.size
        }
        return plan
    }
}
