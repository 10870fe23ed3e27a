import Foundation
import LaminaModel
import LaminaTransport
import LaminaWire
import NIOCore
import NIOPosix

@testable import LaminaClient

/// A small in-memory stand-in for the node's content API (Protocol/CONTENT.md §3–§6) over
/// real TLS + HTTP/2, with knobs for failures: an invalid token, a stream reset after some
/// bytes, a corrupting store. For the SDK's transfer logic without a node.
final class StubContentServer: @unchecked Sendable {
    struct Upload {
        var size: UInt64
        var sha256: String
        var bytes: [UInt8] = []
        var complete = false
    }

    let server: TransportServer
    let certificate: String
    private let lock = NSLock()
    private var uploads: [String: Upload] = [:]
    private var tokens: Set<String> = ["good"]
    private var resetAfter: UInt64?
    /// Every request as "METHOD offset-or-range", in arrival order.
    private var log: [String] = []

    var url: String { "https://127.0.0.1:\(server.port)" }

    private init(server: TransportServer, certificate: String) {
        self.server = server
        self.certificate = certificate
    }

    static func start(in dir: URL) async throws -> StubContentServer {
        let cert = dir.appendingPathComponent("stub-cert.pem").path
        let key = dir.appendingPathComponent("stub-key.pem").path
        try DevelopmentCertificate.generate(certificatePath: cert, privateKeyPath: key)
        let tls = try TLSContext(.server(certificateChainFile: cert, privateKeyFile: key))
        let box = Box()
        var router = TransportRouter()
        router.add("/v1/content/*") { stream in box.stub?.handle(stream) }
        let server = try await TransportServer.start(
            host: "127.0.0.1", port: 0, tls: tls, router: router, group: MultiThreadedEventLoopGroup.singleton)
        let stub = StubContentServer(server: server, certificate: cert)
        box.stub = stub
        return stub
    }

    private final class Box: @unchecked Sendable { weak var stub: StubContentServer? }

    func stop() async { try? await server.shutdown() }

    // MARK: knobs and inspection

    func setTokens(_ valid: Set<String>) { lock.withLock { tokens = valid } }
    /// The next PUT is reset once the upload holds at least `bytes`.
    func resetNextPut(after bytes: UInt64) { lock.withLock { resetAfter = bytes } }
    func upload(_ id: ContentID) -> Upload? { lock.withLock { uploads[id.uuid.uuidString.lowercased()] } }
    var requests: [String] { lock.withLock { log } }

    /// Stores complete content (for downloads).
    func store(_ bytes: [UInt8], as id: ContentID) throws {
        let sha = Hex.encode(try SHA256Hasher.hash(bytes))
        lock.withLock {
            uploads[id.uuid.uuidString.lowercased()] = Upload(
                size: UInt64(bytes.count), sha256: sha, bytes: bytes, complete: true)
        }
    }

    /// A client connection to the stub.
    func connect() async throws -> TransportConnection {
        try await TransportConnection.connect(
            to: url, tls: TLSContext(.client(trust: .caFile(certificate))), group: MultiThreadedEventLoopGroup.singleton
        )
    }

    // MARK: handling

    private func answer(
        _ stream: TransportStream, _ status: Int, _ name: String = "", code: Int = 0, offset: UInt64? = nil,
        body: [UInt8] = []
    ) {
        var headers: HeaderFields = [(":status", String(status))]
        if let offset { headers.append("lamina-upload-offset", String(offset)) }
        var payload = body
        if !name.isEmpty { headers.append("lamina-error", name) }
        if !name.isEmpty, stream.method != "HEAD" {  // a HEAD answer has no body (RFC 9110 §9.3.2)
            headers.append("content-type", "application/json")
            payload = Array(#"{"code": \#(code), "name": "\#(name)", "reason": "stub says \#(name)"}"#.utf8)
        }
        stream.sendHeaders(headers, endStream: payload.isEmpty)
        if !payload.isEmpty {
            stream.write(ByteBuffer(bytes: payload), promise: nil)
            stream.finish()
        }
    }

    private func handle(_ stream: TransportStream) {
        let h = stream.requestHeaders
        let id = String(stream.path.dropFirst("/v1/content/".count))
        let method = stream.method
        let token = h["authorization"].map { String($0.dropFirst("Bearer ".count)) } ?? ""
        let authorized = lock.withLock { () -> Bool in
            log.append("\(method) \(h["lamina-upload-offset"] ?? h["range"] ?? "")")
            return tokens.contains(token)
        }
        guard authorized else {
            stream.delegate = Drain()
            return answer(stream, 401, "session-expired", code: 210)
        }
        switch method {
        case "HEAD":
            guard let u = lock.withLock({ uploads[id] }) else { return answer(stream, 404) }
            stream.sendHeaders(
                [
                    (":status", "200"), ("lamina-upload-offset", String(u.bytes.count)),
                    ("lamina-upload-complete", u.complete ? "true" : "false"),
                ], endStream: true)
        case "DELETE":
            lock.withLock { _ = uploads.removeValue(forKey: id) }
            answer(stream, 204)
        case "GET":
            guard let u = lock.withLock({ uploads[id] }), u.complete else {
                return answer(stream, 404, "content-not-found", code: 601)
            }
            var start = 0
            if let range = h["range"], range.hasPrefix("bytes="), let a = Int(range.dropFirst(6).dropLast()) {
                start = a
            }
            stream.sendHeaders(
                start > 0
                    ? [(":status", "206"), ("content-range", "bytes \(start)-\(u.bytes.count - 1)/\(u.bytes.count)")]
                    : [(":status", "200")])
            stream.write(ByteBuffer(bytes: u.bytes[start...]), promise: nil)
            stream.finish()
        case "PUT":
            guard let size = UInt64(h["lamina-content-size"] ?? ""), let sha = h["lamina-content-sha256"] else {
                stream.delegate = Drain()
                return answer(stream, 400, "invalid-argument", code: 400)
            }
            let offset = UInt64(h["lamina-upload-offset"] ?? "0") ?? 0
            let held = lock.withLock { () -> UInt64 in
                if uploads[id] == nil { uploads[id] = Upload(size: size, sha256: sha) }
                return UInt64(uploads[id]!.bytes.count)
            }
            guard offset == held else {
                stream.delegate = Drain()
                return answer(stream, 409, "upload-offset-mismatch", code: 603, offset: held)
            }
            stream.delegate = PutReceiver(stub: self, id: id)
        default:
            answer(stream, 405)
        }
    }

    /// Appends a chunk; returns whether to reset the stream now.
    fileprivate func append(_ id: String, _ bytes: ByteBuffer) -> Bool {
        lock.withLock {
            uploads[id]?.bytes += bytes.readableBytesView
            if let limit = resetAfter, UInt64(uploads[id]?.bytes.count ?? 0) >= limit {
                resetAfter = nil
                return true
            }
            return false
        }
    }

    fileprivate func end(_ id: String, _ stream: TransportStream) {
        let outcome = lock.withLock { () -> (Int, UInt64) in
            guard var u = uploads[id] else { return (404, 0) }
            guard UInt64(u.bytes.count) == u.size else { return (202, UInt64(u.bytes.count)) }
            let actual = Hex.encode((try? SHA256Hasher.hash(u.bytes)) ?? [])
            guard actual == u.sha256 else {
                uploads[id] = nil
                return (422, 0)
            }
            u.complete = true
            uploads[id] = u
            return (201, u.size)
        }
        switch outcome.0 {
        case 422: answer(stream, 422, "content-digest-mismatch", code: 602, offset: 0)
        case 202: answer(stream, 202, offset: outcome.1)
        default: answer(stream, outcome.0, offset: outcome.1, body: Array(#"{"size": \#(outcome.1)}"#.utf8))
        }
    }

    final class PutReceiver: TransportStreamDelegate {
        let stub: StubContentServer
        let id: String
        init(stub: StubContentServer, id: String) {
            self.stub = stub
            self.id = id
        }
        func streamDidReceiveData(_ stream: TransportStream, data: ByteBuffer) {
            if stub.append(id, data) { stream.reset(code: 0x8) }
        }
        func streamDidReceiveEnd(_ stream: TransportStream, trailers: HeaderFields?) { stub.end(id, stream) }
    }

    final class Drain: TransportStreamDelegate {}
}
