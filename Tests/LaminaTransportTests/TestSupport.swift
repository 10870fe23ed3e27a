import Foundation
import LaminaProcess
import LaminaTransport
import NIOCore
import NIOPosix
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Shared fixtures: certificates made once per test process, a temp directory, helpers to
/// run real programs and to wait for a port.
enum Fixtures {
    static let group: EventLoopGroup = MultiThreadedEventLoopGroup.singleton

    static let directory: String = ScratchDirectory.make("lamina-transport-tests").path

    struct Identity: Sendable {
        var certificate: String
        var key: String
    }

    /// Self-signed server certificate for localhost / 127.0.0.1.
    static let server: Identity = {
        let id = Identity(certificate: directory + "/server.pem", key: directory + "/server.key")
        try! DevelopmentCertificate.generate(certificatePath: id.certificate, privateKeyPath: id.key)
        return id
    }()

    /// A CA and a client certificate it signed (mutual TLS).
    static let clientCA: Identity = {
        let id = Identity(certificate: directory + "/client-ca.pem", key: directory + "/client-ca.key")
        try! DevelopmentCertificate.generate(
            commonName: "Lamina Test CA", hosts: [], certificatePath: id.certificate, privateKeyPath: id.key)
        return id
    }()

    static let client: Identity = {
        let ca = clientCA
        let id = Identity(certificate: directory + "/client.pem", key: directory + "/client.key")
        try! DevelopmentCertificate.generate(
            commonName: "peer-node-1", hosts: ["peer-node-1"], certificatePath: id.certificate, privateKeyPath: id.key,
            issuer: (ca.certificate, ca.key))
        return id
    }()

    static let serverTLS: TLSContext = try! TLSContext(
        .server(certificateChainFile: server.certificate, privateKeyFile: server.key))

    static let clientTLS: TLSContext = try! TLSContext(.client(trust: .caFile(server.certificate)))

    static func file(_ name: String) -> String { directory + "/" + name }
}

/// The routes of the test server: `/hello` (GET, small body), `/echo` (body echoed back, with
/// backpressure), `/trailers` (body then trailers).
enum TestServer {
    static let helloBody = "hello, lamina\n"

    static func router() -> TransportRouter {
        var router = TransportRouter()
        router.add("/hello") { stream in
            stream.sendHeaders([(":status", "200"), ("content-type", "text/plain")])
            stream.write(ByteBuffer(string: helloBody), promise: nil)
            stream.finish()
        }
        router.add("/echo") { stream in
            stream.sendHeaders([(":status", "200"), ("content-type", "application/octet-stream")])
            stream.delegate = EchoDelegate()
        }
        router.add("/trailers") { stream in
            stream.sendHeaders([(":status", "200")])
            stream.write(ByteBuffer(string: "body"), promise: nil)
            stream.finish(trailers: [("x-checksum", "42")])
        }
        return router
    }

    static func start(tls: TLSContext = Fixtures.serverTLS, settings: HTTP2Settings = HTTP2Settings()) async throws
        -> TransportServer
    {
        try await TransportServer.start(
            host: "127.0.0.1", port: 0, tls: tls, router: router(), settings: settings, group: Fixtures.group)
    }
}

/// Echoes every chunk; pauses reading while its own output is backed up.
final class EchoDelegate: TransportStreamDelegate {
    func streamDidReceiveData(_ stream: TransportStream, data: ByteBuffer) {
        stream.write(data, promise: nil)
        if !stream.isWritable { stream.pauseInbound() }
    }

    func streamWritabilityDidChange(_ stream: TransportStream, isWritable: Bool) {
        if isWritable { stream.resumeInbound() }
    }

    func streamDidReceiveEnd(_ stream: TransportStream, trailers: HeaderFields?) {
        stream.finish()
    }
}

/// A real program run to completion (or killed), its output captured in files.
struct ExternalRun {
    var status: Int32
    var stdoutData: Data
    var stderr: String
    var stdout: String { String(decoding: stdoutData, as: UTF8.self) }
    var output: String { stdout + stderr }
}

enum External {
    static func path(_ name: String) -> String? {
        for dir in ["/usr/bin", "/usr/sbin", "/usr/local/bin", "/bin", "/sbin"] {
            let candidate = dir + "/" + name
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        }
        return nil
    }

    /// Runs `program` with `arguments`, stdin from /dev/null, killing it after `timeout` seconds.
    static func run(_ program: String, _ arguments: [String], timeout: Double = 60) async throws -> ExternalRun {
        guard let executable = path(program) else {
            throw TransportError(.io, "\(program) is not installed")
        }
        let id = UUID().uuidString
        let outPath = Fixtures.file("\(program)-\(id).out")
        let errPath = Fixtures.file("\(program)-\(id).err")
        _ = FileManager.default.createFile(atPath: outPath, contents: nil)
        _ = FileManager.default.createFile(atPath: errPath, contents: nil)
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
        let out = (try? Data(contentsOf: URL(fileURLWithPath: outPath))) ?? Data()
        let err = (try? String(contentsOfFile: errPath, encoding: .utf8)) ?? ""
        try? FileManager.default.removeItem(atPath: outPath)
        try? FileManager.default.removeItem(atPath: errPath)
        return ExternalRun(status: status, stdoutData: out, stderr: err)
    }

    /// Starts a long-running program; the caller must `stop` it.
    static func start(_ program: String, _ arguments: [String]) throws -> ChildProcess {
        guard let executable = path(program) else { throw TransportError(.io, "\(program) is not installed") }
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        return process
    }

    static func stop(_ process: ChildProcess) {
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
        }
        process.waitUntilExit()
    }

    /// A port that was free a moment ago (bind to 0, read it, close).
    static func freePort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw TransportError(.io, "socket() failed") }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0 else { throw TransportError(.io, "bind() failed") }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    /// Waits until something accepts TCP connections on 127.0.0.1:`port`, polling by connecting.
    static func waitForPort(_ port: Int, process: ChildProcess, timeout: Double = 60) async throws {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            guard process.isRunning else { throw TransportError(.io, "the process exited before listening") }
            if let channel = try? await ClientBootstrap(group: Fixtures.group).connectTimeout(.milliseconds(200))
                .connect(host: "127.0.0.1", port: port).get()
            {
                try? await channel.close()
                return
            }
            try await Task.sleep(for: .milliseconds(20))  // poll interval between connection attempts
        }
        throw TransportError(.io, "nothing listens on port \(port) after \(timeout)s")
    }
}

extension ByteBuffer {
    static func random(count: Int) -> ByteBuffer {
        var generator = SystemRandomNumberGenerator()
        var words = [UInt64](repeating: 0, count: (count + 7) / 8)
        for index in words.indices { words[index] = generator.next() }
        var buffer = ByteBuffer()
        _ = words.withUnsafeBytes { buffer.writeBytes($0.prefix(count)) }
        return buffer
    }
}
