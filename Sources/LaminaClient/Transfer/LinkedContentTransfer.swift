import Foundation
import LaminaModel
import LaminaTransport
import LaminaWire

/// Downloads rich content over the client's connection (`NodeLink`) with `GET
/// /v1/content/<uuid>` (CONTENT.md §5). A partial file continues from its length with a
/// range; the SHA-256 of the whole file is checked at the end (a mismatch deletes the file
/// and fails). A dropped connection is retried on the next one; 401 re-authenticates.
struct LinkedContentTransfer: ContentTransferring {
    /// Bytes of the node's answer buffered unread before the stream's window closes: 1 MiB.
    static let highWater = 1 << 20
    /// Downloaded bytes written between two fsyncs of the file (the node syncs uploads likewise).
    static let syncEveryBytes = 8 << 20
    /// Attempts over dropped connections before the download fails (it stays resumable).
    static let maxAttempts = 5

    let link: NodeLink
    let store: LocalStore

    func download(
        _ reference: ContentReference, of part: MessagePartID, to destination: URL,
        progress: @escaping @Sendable (UInt64, UInt64) -> Void
    ) async throws {
        var attempt = 0
        while true {
            attempt += 1
            let lease = try await link.lease()
            do {
                try await once(reference, to: destination, lease: lease, progress: progress)
                return
            } catch let error as ContentHTTPError {
                if error.isUnauthorized, attempt < Self.maxAttempts {
                    await link.reject(lease.token, store: store)
                    continue
                }
                if error.isTransient, attempt < Self.maxAttempts {
                    try await Task.sleep(for: .seconds(Int64(min(error.retryAfterSeconds ?? 1, 60))))
                    continue
                }
                throw ClientError(error.status == 403 ? .notAllowed : .contentRefused, error.description)
            } catch let error as ClientError where error.code == .disconnected || error.code == .timedOut {
                if attempt >= Self.maxAttempts || Task.isCancelled { throw error }
                try await Task.sleep(for: .milliseconds(100 << attempt))
            }
        }
    }

    private func once(
        _ reference: ContentReference, to destination: URL, lease: NodeLease,
        progress: @escaping @Sendable (UInt64, UInt64) -> Void
    ) async throws {
        let fm = FileManager.default
        var have = ((try? fm.attributesOfItem(atPath: destination.path)[.size] as? NSNumber)?.uint64Value) ?? 0
        if have > reference.size { have = 0 }
        if !fm.fileExists(atPath: destination.path) || have == 0 {
            guard fm.createFile(atPath: destination.path, contents: nil) else {
                throw ClientError(.storage, "cannot create \(destination.path)")
            }
        }
        let output = try FileHandle(forUpdating: destination)
        defer { try? output.close() }
        try output.truncate(atOffset: have)
        // The bytes already here count towards the digest.
        var hasher = try SHA256Hasher()
        try output.seek(toOffset: 0)
        var hashed: UInt64 = 0
        while hashed < have, let chunk = try output.read(upToCount: ContentStaging.chunkBytes), !chunk.isEmpty {
            try chunk.withUnsafeBytes { try hasher.update($0) }
            hashed += UInt64(chunk.count)
        }
        var offset = have
        progress(offset, reference.size)
        if offset < reference.size {
            let (stream, status, headers, body) = try await ContentStreams.get(
                reference.id, from: offset, on: lease, highWater: Self.highWater)
            switch status {
            case 200:
                if offset > 0 {  // the node sent everything: start the file again
                    try output.truncate(atOffset: 0)
                    hasher = try SHA256Hasher()
                    offset = 0
                }
            case 206:
                guard let range = ContentHTTP.contentRange(headers["content-range"]), range.start == offset,
                    range.size == reference.size
                else {
                    stream.reset()
                    throw ClientError(
                        .protocolError,
                        "the node answered a range from \(offset) with content-range '\(headers["content-range"] ?? "")'"
                    )
                }
            default:
                throw ContentHTTPError(status: status, headers: headers, body: await ContentStreams.errorBody(body))
            }
            try output.seek(toOffset: offset)
            var unsynced = 0
            try await withTaskCancellationHandler {
                for try await chunk in body {
                    guard offset + UInt64(chunk.readableBytes) <= reference.size else {
                        stream.reset()
                        throw ClientError(
                            .protocolError, "the node sent more than the content's \(reference.size) bytes")
                    }
                    try chunk.withUnsafeReadableBytes { bytes in
                        try hasher.update(bytes)
                        try output.write(contentsOf: bytes)
                    }
                    offset += UInt64(chunk.readableBytes)
                    // Synced as it goes: on ext4 the store's commit fsync would otherwise wait
                    // for every unsynced downloaded byte, stalling messages behind the file.
                    unsynced += chunk.readableBytes
                    if unsynced >= Self.syncEveryBytes {
                        try output.synchronize()
                        unsynced = 0
                    }
                    progress(offset, reference.size)
                }
            } onCancel: {
                stream.reset()
            }
            try Task.checkCancellation()
        }
        guard offset == reference.size else {
            throw ClientError(.disconnected, "the download ended at \(offset) of \(reference.size) bytes")
        }
        try output.synchronize()
        let digest = try hasher.finalize()
        guard digest == reference.sha256 else {
            try? output.close()
            try? fm.removeItem(at: destination)
            throw ClientError(
                .contentRefused,
                "content-digest-mismatch: the downloaded bytes hash to \(Hex.encode(digest)), the reference says \(Hex.encode(reference.sha256))"
            )
        }
    }
}
