import LaminaModel

/// The content rules an app sets: what downloads by itself, and how much disk the
/// cached rich content may use.
public struct ContentSettings: Hashable, Sendable {
    /// Rich content of at most this many bytes downloads by itself. Default 2 KB (2,048).
    public var autoDownloadMaximumContentSize: UInt64
    /// Content of these MIME types downloads by itself whatever its size.
    /// Default `{text/plain}`; nil = every type; empty = none by type.
    public var autoDownloadMIMETypes: Set<MIMEType>?
    /// The most bytes of cached content; 0 = unlimited (the default). Over it, the least
    /// recently accessed content is purged until usage is at most 80% of it.
    public var diskCapacity: UInt64

    public init(
        autoDownloadMaximumContentSize: UInt64 = UInt64(Limits.maxInlinePartBytes),
        autoDownloadMIMETypes: Set<MIMEType>? = [.textPlain],
        diskCapacity: UInt64 = 0
    ) {
        self.autoDownloadMaximumContentSize = autoDownloadMaximumContentSize
        self.autoDownloadMIMETypes = autoDownloadMIMETypes
        self.diskCapacity = diskCapacity
    }

    /// Checks the settings' ranges (sizes at most the largest part, 2 GiB, or 1 TiB of capacity).
    public func validate() throws(ClientError) {
        guard autoDownloadMaximumContentSize <= Limits.maxPartBytes else {
            throw ClientError(.invalidSetting, "autoDownloadMaximumContentSize is at most \(Limits.maxPartBytes) bytes")
        }
        guard diskCapacity <= ContentPolicy.maxDiskCapacity else {
            throw ClientError(.invalidSetting, "diskCapacity is at most \(ContentPolicy.maxDiskCapacity) bytes")
        }
    }
}
