import Foundation
import LaminaModel
import LaminaTransport

/// Rich content made by `MessagePart.with(mimeType:data:)` or `with(mimeType:fileURL:)`
/// before it is sent: the bytes are copied into a staging folder while their size and
/// SHA-256 are computed (a file is streamed, never read whole), and the part carries the
/// resulting content reference. `LaminaClient.send` moves the staged file into the client's
/// content directory, from where it is uploaded.
public enum ContentStaging {
    /// The chunk in which staged files are copied and hashed: 1 MiB.
    public static let chunkBytes = 1 << 20

    private static let lock = NSLock()
    nonisolated(unsafe) private static var files: [ContentID: URL] = [:]
    nonisolated(unsafe) private static var folder = FileManager.default.temporaryDirectory
        .appendingPathComponent("lamina-staging-\(ProcessInfo.processInfo.processIdentifier)", isDirectory: true)

    /// Where staged files wait until sent (default: a folder of this process under the
    /// temporary directory). Put it on the data directory's volume so `send` moves files
    /// instead of copying them.
    public static var directory: URL {
        get { lock.withLock { folder } }
        set { lock.withLock { folder = newValue } }
    }

    /// The staged file of a content reference made in this process, if it is still staged.
    public static func stagedFile(for id: ContentID) -> URL? { lock.withLock { files[id] } }

    /// Deletes a staged file that will not be sent (a discarded draft). Returns false when
    /// nothing was staged under `id`.
    @discardableResult
    public static func discard(_ id: ContentID) -> Bool {
        guard let url = lock.withLock({ files.removeValue(forKey: id) }) else { return false }
        try? FileManager.default.removeItem(at: url)
        return true
    }

    /// Takes the staged file of `id` out of staging (for `send`, which moves it).
    static func take(_ id: ContentID) -> URL? { lock.withLock { files.removeValue(forKey: id) } }

    /// Puts a file back into staging (a `send` that failed after taking it).
    static func putBack(_ id: ContentID, _ url: URL) { lock.withLock { files[id] = url } }

    /// Stages `data`, returning its content reference.
    static func stage(data: Data) throws(ClientError) -> ContentReference {
        guard UInt64(data.count) <= Limits.maxPartBytes else {
            throw ClientError(.partTooLarge, "a part is at most \(Limits.maxPartBytes) bytes, this one has \(data.count)")
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
    static func stage(file source: URL) throws(ClientError) -> ContentReference {
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
            while let chunk = try input.read(upToCount: chunkBytes), !chunk.isEmpty {
                size += UInt64(chunk.count)
                guard size <= Limits.maxPartBytes else {
                    throw ClientError(.partTooLarge, "a part is at most \(Limits.maxPartBytes) bytes, \(source.lastPathComponent) has more")
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

    private static func newFile(_ id: ContentID) throws(ClientError) -> URL {
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
