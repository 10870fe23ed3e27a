import Foundation
import LaminaModel
import LaminaNode
import LaminaProcess
import LaminaTransport
import LaminaWire
import NIOCore
import NIOPosix

/// An answer of the content resource.
struct ContentAnswer: CustomStringConvertible {
    var status: Int
    var headers: HeaderFields
    var body: [UInt8]

    /// `lamina-error`, if the answer is a refusal.
    var errorName: String? { headers["lamina-error"] }
    var offset: UInt64? { headers["lamina-upload-offset"].flatMap { UInt64($0) } }
    var json: [String: Any] {
        (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any] ?? [:]
    }
    var description: String {
        "\(status) \(errorName ?? "") \(String(decoding: body.prefix(300), as: UTF8.self))"
    }
}

/// A client of `/v1/content/<uuid>` on its own TLS + HTTP/2 connection, with one session token.
final class ContentTestClient: Sendable {
    let connection: TransportConnection
    let token: String?

    init(connection: TransportConnection, token: String?) {
        self.connection = connection
        self.token = token
    }

    static func connect(_ node: TestNode, token: String?) async throws -> ContentTestClient {
        let tls = try TLSContext(.client(trust: .caFile(node.server.prepared.certificatePath)))
        let connection = try await TransportConnection.connect(to: node.server.url, tls: tls, group: Fixtures.group)
        return ContentTestClient(connection: connection, token: token)
    }

    func close() async { try? await connection.close() }

    static func path(_ id: ContentID) -> String { "/v1/content/\(id.uuid.uuidString)" }

    static func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }

    static func sha256(_ bytes: [UInt8]) -> [UInt8] { try! SHA256Hasher.hash(bytes) }

    /// Deterministic pseudo-random bytes.
    static func bytes(_ count: Int, seed: UInt64 = 42) -> [UInt8] {
        var state = seed &* 0x9E37_79B9_7F4A_7C15 | 1
        var out = [UInt8](repeating: 0, count: count)
        for i in 0..<count {
            state ^= state << 13
            state ^= state >> 7
            state ^= state << 17
            out[i] = UInt8(truncatingIfNeeded: state)
        }
        return out
    }

    private func headers(_ extra: [(String, String)]) -> HeaderFields {
        var headers = HeaderFields()
        if let token { headers.append("authorization", "Bearer \(token)") }
        for (name, value) in extra { headers.append(name, value) }
        return headers
    }

    /// Sends a request with an optional body (written in 64 KiB chunks, backpressured by the
    /// write futures) and collects the answer.
    func request(
        _ method: String, _ id: ContentID, headers extra: [(String, String)] = [], body: [UInt8]? = nil,
        path: String? = nil
    ) async throws -> ContentAnswer {
        let stream = try await connection.openStream(
            method: method, path: path ?? Self.path(id), headers: headers(extra), endStream: body == nil)
        let answer = stream.collect(maxBytes: 64 * 1024 * 1024)
        if let body {
            var offset = 0
            while offset < body.count {
                let end = min(body.count, offset + 64 * 1024)
                // answered early
                do { try await stream.write(ByteBuffer(bytes: body[offset..<end])).get() } catch { break }
                offset = end
            }
            stream.finish()
        }
        let (headers, received) = try await answer.get()
        return ContentAnswer(
            status: Int(headers?[":status"] ?? "") ?? 0, headers: headers ?? HeaderFields(),
            body: Array(received.readableBytesView))
    }

    func put(_ id: ContentID, size: UInt64, sha256: [UInt8], offset: UInt64? = nil, body: [UInt8]) async throws
        -> ContentAnswer
    {
        var headers = [("lamina-content-size", "\(size)"), ("lamina-content-sha256", Self.hex(sha256))]
        if let offset { headers.append(("lamina-upload-offset", "\(offset)")) }
        return try await request("PUT", id, headers: headers, body: body)
    }

    /// Uploads `content` whole.
    func upload(_ id: ContentID, _ content: [UInt8]) async throws -> ContentAnswer {
        try await put(id, size: UInt64(content.count), sha256: Self.sha256(content), body: content)
    }

    func head(_ id: ContentID) async throws -> ContentAnswer { try await request("HEAD", id) }
    func get(_ id: ContentID, range: String? = nil) async throws -> ContentAnswer {
        try await request("GET", id, headers: range.map { [("range", $0)] } ?? [])
    }
    func delete(_ id: ContentID) async throws -> ContentAnswer { try await request("DELETE", id) }

    /// Starts a PUT, writes `body` (all of it framed), then resets the stream: an upload cut off.
    func putThenReset(_ id: ContentID, size: UInt64, sha256: [UInt8], offset: UInt64 = 0, body: [UInt8]) async throws {
        let stream = try await connection.openStream(
            method: "PUT", path: Self.path(id),
            headers: headers([
                ("lamina-content-size", "\(size)"), ("lamina-content-sha256", Self.hex(sha256)),
                ("lamina-upload-offset", "\(offset)"),
            ]),
            endStream: false)
        var at = 0
        while at < body.count {
            let end = min(body.count, at + 64 * 1024)
            try await stream.write(ByteBuffer(bytes: body[at..<end])).get()
            at = end
        }
        try await awaitAdmitted(id)
        stream.reset()
    }

    /// Returns once the node knows the upload (it records one only after admitting its stream).
    func awaitAdmitted(_ id: ContentID) async throws {
        var attempts = 0
        while try await head(id).status == 404 {
            attempts += 1
            if attempts >= 1000 { throw TransportError(.invalidState, "the node never admitted the upload of \(id)") }
        }
    }
}

/// Runs an external program (curl), stdin from /dev/null, output captured in files.
enum ExternalProgram {
    struct Run {
        var status: Int32
        var stdout: String
        var stderr: String
    }

    static func run(_ executable: String, _ arguments: [String], timeout: Double = 120) async throws -> Run {
        let id = UUID().uuidString
        let outPath = FileManager.default.temporaryDirectory.appendingPathComponent("lamina-ext-\(id).out").path
        let errPath = FileManager.default.temporaryDirectory.appendingPathComponent("lamina-ext-\(id).err").path
        _ = FileManager.default.createFile(atPath: outPath, contents: nil)
        _ = FileManager.default.createFile(atPath: errPath, contents: nil)
        defer {
            try? FileManager.default.removeItem(atPath: outPath)
            try? FileManager.default.removeItem(atPath: errPath)
        }
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: outPath))
        process.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: errPath))
        let status: Int32 = try await withCheckedThrowingContinuation { continuation in
            process.terminationHandler = { continuation.resume(returning: $0.terminationStatus) }
            do { try process.run() } catch {
                process.terminationHandler = nil
                continuation.resume(throwing: error)
                return
            }
            let pid = process.processIdentifier
            DispatchQueue.global().asyncAfter(deadline: .now() + timeout) {
                if process.isRunning { kill(pid, SIGKILL) }
            }
        }
        return Run(
            status: status, stdout: (try? String(contentsOfFile: outPath, encoding: .utf8)) ?? "",
            stderr: (try? String(contentsOfFile: errPath, encoding: .utf8)) ?? "")
    }
}
