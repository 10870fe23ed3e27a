import Foundation
import LaminaModel
import LaminaStore
import LaminaTransport
import NIOCore

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A file operation that failed, with the path and `errno`'s text.
public struct ContentFileError: Error, CustomStringConvertible {
    public var reason: String
    init(_ what: String, _ path: String, errno code: Int32 = errno) {
        reason = "\(what) \(path): \(String(cString: strerror(code)))"
    }
    init(reason: String) { self.reason = reason }
    public var description: String { reason }
}

/// The content files under the content root (`<data-dir>/content` or `--content-dir`; Protocol/CONTENT.md §8):
/// `content/partial/<uuid>` while uploading, `content/complete/<uuid>` once verified.
///
/// Every method blocks on the disk: call them on ``ContentIO``'s threads, never on an event loop.
public struct ContentFiles: Sendable {
    public let root: URL
    public var partialDirectory: String { root.appendingPathComponent("partial").path }
    public var completeDirectory: String { root.appendingPathComponent("complete").path }

    /// `<dataDirectory>/content`, created if needed.
    public init(dataDirectory: URL) throws {
        try self.init(root: dataDirectory.appendingPathComponent("content"))
    }

    /// The files under `root` (`--content-dir`): `partial/` and `complete/` are created if
    /// needed, and must be writable (a file is created and removed in each).
    public init(root: URL) throws {
        self.root = root
        for dir in [root.appendingPathComponent("partial"), root.appendingPathComponent("complete")] {
            if let code = Self.makeDirectories(dir.path) {
                throw ContentFileError(
                    reason: "cannot create the content directory \(dir.path): \(String(cString: strerror(code)))")
            }
            let probe = dir.appendingPathComponent(".write-probe-\(UUID().uuidString.lowercased())").path
            let fd = open(probe, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
            guard fd >= 0 else {
                throw ContentFileError(
                    reason: "the content directory \(dir.path) is not writable: \(String(cString: strerror(errno)))")
            }
            close(fd)
            unlink(probe)
        }
    }

    /// `mkdir -p path` (new directories 0777 less the umask, as before); the `errno` of the first failure.
    static func makeDirectories(_ path: String) -> Int32? {
        var info = stat()
        if stat(path, &info) == 0 { return (info.st_mode & S_IFMT) == S_IFDIR ? nil : ENOTDIR }
        let parent = (path as NSString).deletingLastPathComponent
        if !parent.isEmpty, parent != path, let code = makeDirectories(parent) { return code }
        if mkdir(path, 0o777) == 0 || errno == EEXIST { return nil }
        return errno
    }

    static func name(_ id: ContentID) -> String { id.uuid.uuidString.lowercased() }
    public func partialPath(_ id: ContentID) -> String { partialDirectory + "/" + Self.name(id) }
    public func completePath(_ id: ContentID) -> String { completeDirectory + "/" + Self.name(id) }

    // MARK: uploads

    /// Opens the partial file for writing at `offset`: bytes past `offset` (written after the
    /// last recorded fsync) are cut off. A missing file is created (then `offset` must be 0).
    public func openPartial(_ id: ContentID, at offset: UInt64) throws -> Int32 {
        let path = partialPath(id)
        let fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw ContentFileError("cannot open", path) }
        var info = stat()
        guard fstat(fd, &info) == 0 else {
            let e = ContentFileError("cannot stat", path)
            close(fd)
            throw e
        }
        guard UInt64(info.st_size) >= offset else {
            close(fd)
            throw ContentFileError(reason: "\(path) holds \(info.st_size) bytes, the record says \(offset) are durable")
        }
        guard ftruncate(fd, off_t(offset)) == 0, lseek(fd, off_t(offset), SEEK_SET) == off_t(offset) else {
            let e = ContentFileError("cannot truncate", path)
            close(fd)
            throw e
        }
        return fd
    }

    /// Feeds bytes `[0, length)` of the partial file to `hasher` (an upload resumed at `length`).
    public func hashPartial(_ id: ContentID, length: UInt64, into hasher: SHA256Hasher) throws {
        guard length > 0 else { return }
        let path = partialPath(id)
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw ContentFileError("cannot open", path) }
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        var offset: UInt64 = 0
        while offset < length {
            let want = Int(min(UInt64(buffer.count), length - offset))
            let n = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress, want, off_t(offset)) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { throw ContentFileError("cannot read", path) }
            try buffer.withUnsafeBytes { try hasher.update(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
            offset += UInt64(n)
        }
    }

    /// Writes all of `buffer` at the file's position.
    public static func writeAll(_ fd: Int32, _ buffer: ByteBuffer) throws {
        try buffer.withUnsafeReadableBytes { bytes in
            var done = 0
            while done < bytes.count {
                let n = write(fd, bytes.baseAddress! + done, bytes.count - done)
                if n < 0 {
                    if errno == EINTR { continue }
                    throw ContentFileError("cannot write", "fd \(fd)")
                }
                done += n
            }
        }
    }

    public static func syncFile(_ fd: Int32) throws {
        guard fsync(fd) == 0 else { throw ContentFileError("cannot fsync", "fd \(fd)") }
    }

    public static func closeFile(_ fd: Int32) { _ = close(fd) }

    /// Moves a verified, synced partial file to its final name and syncs both directories.
    public func promote(_ id: ContentID) throws {
        let from = partialPath(id)
        let to = completePath(id)
        guard rename(from, to) == 0 else { throw ContentFileError("cannot rename", from) }
        try Self.syncDirectory(completeDirectory)
        try Self.syncDirectory(partialDirectory)
    }

    static func syncDirectory(_ path: String) throws {
        let fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { throw ContentFileError("cannot open directory", path) }
        defer { close(fd) }
        guard fsync(fd) == 0 else { throw ContentFileError("cannot fsync directory", path) }
    }

    /// Deletes both files of a content, if present.
    public func remove(_ id: ContentID) {
        unlink(partialPath(id))
        unlink(completePath(id))
    }

    // MARK: downloads

    /// Opens complete content for reading; its size.
    public func openComplete(_ id: ContentID) throws -> (fd: Int32, size: UInt64) {
        let path = completePath(id)
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw ContentFileError("cannot open", path) }
        var info = stat()
        guard fstat(fd, &info) == 0 else {
            let e = ContentFileError("cannot stat", path)
            close(fd)
            throw e
        }
        return (fd, UInt64(info.st_size))
    }

    /// Reads up to `count` bytes at `offset` into a new buffer (fewer only at the file's end).
    public static func readChunk(_ fd: Int32, at offset: UInt64, count: Int, allocator: ByteBufferAllocator) throws
        -> ByteBuffer
    {
        var buffer = allocator.buffer(capacity: count)
        var done = 0
        while done < count {
            var failure: Int32 = 0
            let n = buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: count - done) { target -> Int in
                let r = pread(fd, target.baseAddress, count - done, off_t(offset) + off_t(done))
                if r < 0 { failure = errno }
                return max(r, 0)
            }
            if failure == EINTR { continue }
            if failure != 0 { throw ContentFileError("cannot read", "fd \(fd)", errno: failure) }
            if n == 0 { break }
            done += n
        }
        return buffer
    }

    // MARK: start-up

    /// What ``recover(_:)`` did.
    public struct Recovery: Sendable, Hashable {
        /// Partial files cut back to their recorded durable length.
        public var truncated = 0
        /// Files without a record, deleted.
        public var orphansDeleted = 0
        /// Records whose file is missing or shorter than recorded: their corrected received bytes
        /// (0 for a missing partial file), or nil for complete content whose file is gone.
        public var damaged: [ContentID: UInt64?] = [:]
    }

    /// Brings the files in line with the records (CONTENT.md §8): each partial file cut to the
    /// recorded durable length, files without a record deleted; records whose bytes are missing
    /// are reported for the caller to correct.
    package func recover(_ uploads: [ContentUpload]) throws -> Recovery {
        try recover(shared: false) { uploads }
    }

    /// ``recover(_:)`` with the records read by `records` after the directories are listed.
    ///
    /// `shared`: other nodes may be working in this directory now (one PostgreSQL store), so
    /// only what cannot belong to a live upload is touched. The directories are listed before
    /// the records are read: a record is committed before its file is created and deleted before
    /// its files are removed, so a listed file without a record is an orphan. A partial file is
    /// not cut (another node may be writing past the recorded length; a resumed upload cuts it
    /// at the recorded offset when it opens it), a complete file whose record still says
    /// uploading is kept (another node is between the rename and the record), and records
    /// whose bytes look missing are reported in ``Recovery/damaged`` but only with `shared`
    /// false are they meant to be corrected (a node started with another content directory
    /// would otherwise wipe the other nodes' records).
    package func recover(shared: Bool, records: () throws -> [ContentUpload]) throws -> Recovery {
        var report = Recovery()
        let fm = FileManager.default
        var listed: [(directory: String, complete: Bool, files: [String])] = []
        for (directory, complete) in [(partialDirectory, false), (completeDirectory, true)] {
            listed.append((directory, complete, try fm.contentsOfDirectory(atPath: directory)))
        }
        let uploads = try records()
        var byName: [String: ContentUpload] = [:]
        for upload in uploads { byName[Self.name(upload.id)] = upload }
        for (directory, complete, files) in listed {
            for file in files {
                let path = directory + "/" + file
                guard let upload = byName[file] else {
                    if file.hasPrefix(".write-probe-") { continue }
                    unlink(path)
                    report.orphansDeleted += 1
                    continue
                }
                guard (upload.state == .complete) == complete else {
                    if shared { continue }
                    unlink(path)
                    report.orphansDeleted += 1
                    continue
                }
                if complete || shared { continue }
                var info = stat()
                guard stat(path, &info) == 0 else { throw ContentFileError("cannot stat", path) }
                let size = UInt64(info.st_size)
                if size > upload.receivedBytes {
                    guard truncate(path, off_t(upload.receivedBytes)) == 0 else {
                        throw ContentFileError("cannot truncate", path)
                    }
                    report.truncated += 1
                } else if size < upload.receivedBytes {
                    report.damaged[upload.id] = .some(size)
                }
            }
        }
        for upload in uploads {
            let name = Self.name(upload.id)
            if upload.state == .complete {
                if !fm.fileExists(atPath: completeDirectory + "/" + name) { report.damaged[upload.id] = .some(nil) }
            } else if upload.receivedBytes > 0, !fm.fileExists(atPath: partialDirectory + "/" + name),
                !(shared && fm.fileExists(atPath: completeDirectory + "/" + name))
            {
                report.damaged[upload.id] = .some(0)
            }
        }
        return report
    }
}
