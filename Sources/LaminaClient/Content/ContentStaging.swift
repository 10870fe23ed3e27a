import Foundation
import LaminaModel
import LaminaTransport

/// Where a client's rich content waits before it is sent: `MessagePart.with(mimeType:data:staging:)`
/// and `with(mimeType:fileURL:staging:)` copy the bytes into its folder while their size and
/// SHA-256 are computed (a file is streamed, never read whole), and the part carries the
/// resulting content reference. `LaminaClient.send` moves the staged file into the client's
/// content directory, from where it is uploaded. Each `LaminaClient` owns one
/// (`LaminaClient.staging`, in its data directory: same volume, so `send` moves files); a part
/// staged by one client is not sent by another.
public final class ContentStaging: @unchecked Sendable {
    /// The chunk in which staged files are copied and hashed: 1 MiB.
    public static let chunkBytes = 1 << 20

    /// Where staged files wait until sent.
    public let directory: URL
    private let lock = NSLock()
    private var files: [ContentID: URL] = [:]

    public init(directory: URL) {
        self.directory = directory
    }

    /// The staged file of a content reference made here, if it is still staged.
    public func stagedFile(for id: ContentID) -> URL? { lock.withLock { files[id] } }

    /// Deletes a staged file that will not be sent (a discarded draft). Returns false when
    /// nothing was staged under `id`.
    @discardableResult
    public func discard(_ id: ContentID) -> Bool {
        guard let url = lock.withLock({ files.removeValue(forKey: id) }) else { return false }
        try? FileManager.default.removeItem(at: url)
        return true
    }

    /// Takes the staged file of `id` out of staging (for `send`, which moves it).
    func take(_ id: ContentID) -> URL? { lock.withLock { files.removeValue(forKey: id) } }

    /// Puts a file back into staging (a `send` that failed after taking it).
    func putBack(_ id: ContentID, _ url: URL) { lock.withLock { files[id] = url } }

    /// Stages `data`, returning its content reference.
    func stage(data: Data) throws(ClientError) -> ContentReference {
        guard UInt64(data.count) <= Limits.maxPartBytes else {
            throw ClientError(
                .partTooLarge, "a part is at most \(Limits.maxPartBytes) bytes, this one has \(data.count)")
        }
        let id = ContentID.random()
        let url = try newFile(id)
        do {
            let hasher = try SHA256Hasher()
            try data.withUnsafeBytes { try hasher.update($0) }
            try data.write(to: url)
            let reference = ContentReference(id: id, size: UInt64(data.count), sha256: try hasher.finalize())
            lock.withLock { files[id] = url }
            return reference
        } catch {
            try? FileManager.default.removeItem(at: url)
            throw ClientError(.storage, "cannot stage the content: \(error)")
        }
    }

    /// Stages a copy of the file at `source` (streamed in `chunkBytes` chunks while hashing).
    func stage(file source: URL) throws(ClientError) -> ContentReference {
        let input: FileHandle
        do { input = try FileHandle(forReadingFrom: source) } catch {
            throw ClientError(.notFound, "cannot open \(source.path): \(error)")
        }
        defer { try? input.close() }
        let id = ContentID.random()
        let url = try newFile(id)
        do {
            let output = try FileHandle(forWritingTo: url)
            defer { try? output.close() }
            let hasher = try SHA256Hasher()
            var size: UInt64 = 0
            while let chunk = try input.read(upToCount: Self.chunkBytes), !chunk.isEmpty {
                size += UInt64(chunk.count)
                guard size <= Limits.maxPartBytes else {
                    throw ClientError(
                        .partTooLarge,
                        "a part is at most \(Limits.maxPartBytes) bytes, \(source.lastPathComponent) has more")
                }
                try chunk.withUnsafeBytes { try hasher.update($0) }
                try output.write(contentsOf: chunk)
            }
            let reference = ContentReference(id: id, size: size, sha256: try hasher.finalize())
            lock.withLock { files[id] = url }
            return reference
        } catch {
            try? FileManager.default.removeItem(at: url)
            if let e = error as? ClientError { throw e }
            throw ClientError(.storage, "cannot stage \(source.path): \(error)")
        }
    }

    private func newFile(_ id: ContentID) throws(ClientError) -> URL {
        let dir = directory
        let url = dir.appendingPathComponent(id.uuid.uuidString.lowercased())
        do {
            try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
            guard FileManager.default.createFile(atPath: url.path, contents: nil) else {
                throw ClientError(.storage, "cannot create \(url.path)")
            }
        } catch let e as ClientError {
            throw e
        } catch {
            throw ClientError(.storage, "cannot create the staging folder \(dir.path): \(error)")
        }
        return url
    }

    /// Moves `source` to `destination` (same volume), copying when a move is not possible.
    static func move(_ source: URL, to destination: URL) throws(ClientError) {
        let fm = FileManager.default
        try? fm.removeItem(at: destination)
        do { try fm.moveItem(at: source, to: destination) } catch {
            do {
                try fm.copyItem(at: source, to: destination)
                try? fm.removeItem(at: source)
            } catch {
                throw ClientError(.storage, "cannot move the staged content to \(destination.path): \(error)")
            }
        }
    }
}
