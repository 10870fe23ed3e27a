import Foundation
import LaminaModel

/// Moves rich content between this device and the node. Implemented by the transfer code
/// (HTTP/2 streams to the node); the content manager calls it and keeps the bookkeeping.
public protocol ContentTransferring: Sendable {
    /// Downloads the content of `reference` into the file at `destination` (created or
    /// replaced), calling `progress` with bytes received so far and the total. Throws on
    /// failure; a partial file may be left for a resumable retry.
    func download(
        _ reference: ContentReference, of part: MessagePartID, to destination: URL,
        progress: @escaping @Sendable (_ received: UInt64, _ total: UInt64) -> Void) async throws
}

/// The content of a part, where it is now.
public enum LocalContent: Hashable, Sendable {
    /// Inline bytes, always present.
    case inline([UInt8])
    /// A downloaded (or local) rich-content file.
    case file(URL)
    /// Rich content not on this device; the status says why.
    case unavailable(TransferStatus)
}

/// How much disk the store uses.
public struct DiskUtilization: Hashable, Sendable {
    /// Bytes of rich-content files (what `diskCapacity` bounds).
    public var contentBytes: UInt64
    /// Bytes of the database files (database, WAL, shared memory).
    public var databaseBytes: UInt64
    public var totalBytes: UInt64 { contentBytes + databaseBytes }
}
