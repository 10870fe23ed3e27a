import Foundation
import LaminaModel
import LaminaNode
import NIOCore

#if canImport(Glibc)
    import Glibc
#endif

/// Two `lamina-node` child processes peered over mutual TLS (SPEC §6.5): A listens for peers,
/// B dials A (so a restarted B reconnects at once, with no backoff of A's in the way). Peer
/// certificates come from a `DevelopmentCluster` CA in the run's temp folder; each node has an
/// admin listener for `/metrics` (the version vector) and `/replication` (the digest).
final class PeeredNodes {
    static let idA = NodeID(0xA)
    static let idB = NodeID(0xB)

    private(set) var a: NodeProcess
    private(set) var b: NodeProcess
    let adminA: Int
    let adminB: Int
    private let binary: String
    private let root: String
    private let argumentsB: [String]

    private init(
        a: NodeProcess, b: NodeProcess, adminA: Int, adminB: Int, binary: String, root: String, argumentsB: [String]
    ) {
        self.a = a
        self.b = b
        self.adminA = adminA
        self.adminB = adminB
        self.binary = binary
        self.root = root
        self.argumentsB = argumentsB
    }

    static func start(binary: String) async throws -> PeeredNodes {
        let root = try BenchSupport.temporaryDirectory() + "/replication-\(UUID().uuidString.prefix(8))"
        let certificates = URL(fileURLWithPath: root + "/certificates")
        let ca = try DevelopmentCluster.certificateAuthority(in: certificates).certificate
        func peering(_ node: NodeID, listen: Int, dial: [Int]) throws -> [String] {
            let files = try DevelopmentCluster.nodeCertificate(for: node, in: certificates)
            return [
                "--node-id", String(node.rawValue, radix: 16), "--peer-listen", "127.0.0.1:\(listen)", "--cluster",
                "lamina-bench",
                "--peer-ca", ca, "--peer-certificate", files.certificate, "--peer-key", files.key,
            ]
                + dial.flatMap { ["--peer", "https://127.0.0.1:\($0)"] }
        }
        let ports = distinctFreePorts(6)
        let argumentsA = try peering(idA, listen: ports[2], dial: [])
        let argumentsB = try peering(idB, listen: ports[5], dial: [ports[2]])
        let a = try await NodeProcess.start(
            binary: binary, data: root + "/a", port: ports[0], adminPort: ports[1], extraArguments: argumentsA)
        let b: NodeProcess
        do {
            b = try await NodeProcess.start(
                binary: binary, data: root + "/b", port: ports[3], adminPort: ports[4], extraArguments: argumentsB)
        } catch {
            a.stop()
            throw error
        }
        return PeeredNodes(
            a: a, b: b, adminA: ports[1], adminB: ports[4], binary: binary, root: root, argumentsB: argumentsB)
    }

    /// Stops B gracefully, keeping its data.
    func stopB() { b.stop(keepData: true) }

    /// Starts B again on its data and ports; returns once it serves.
    func restartB() async throws {
        b = try await NodeProcess.start(
            binary: binary, data: b.dataDirectory, port: b.port, adminPort: adminB, extraArguments: argumentsB)
    }

    func stop() {
        b.stop()
        a.stop()
        try? FileManager.default.removeItem(atPath: root)
    }

    /// A node's version vector (origin in hex → counter), from its `/metrics`.
    static func vector(admin port: Int) throws -> [String: UInt64] {
        var vector: [String: UInt64] = [:]
        let prefix = "lamina_replication_counter{origin=\""
        for line in try AdminGet.body(port: port, path: "/metrics").split(separator: "\n") where line.hasPrefix(prefix)
        {
            let rest = line.dropFirst(prefix.count)
            guard let quote = rest.firstIndex(of: "\""), let space = rest.lastIndex(of: " "),
                let value = Double(rest[rest.index(after: space)...])
            else { continue }
            vector[String(rest[..<quote])] = UInt64(value)
        }
        return vector
    }

    /// A node's convergence digest and its peer links, from `/replication` (reads the whole store).
    static func replication(admin port: Int) throws -> (digest: String, peers: [String]) {
        let body = try AdminGet.body(port: port, path: "/replication")
        guard let object = try? JSONDecoder().decode(ReplicationAnswer.self, from: Data(body.utf8)) else {
            throw BenchFailure("unexpected /replication answer: \(body.prefix(200))")
        }
        return (object.digest, object.peers.keys.sorted())
    }

    /// `count` ports free now, all different.
    private static func distinctFreePorts(_ count: Int) -> [Int] {
        var ports: [Int] = []
        while ports.count < count {
            let port = BenchSupport.freePort()
            if !ports.contains(port) { ports.append(port) }
        }
        return ports
    }
}

/// A plain HTTP/1.1 GET to the admin listener on 127.0.0.1 (blocking; `Connection: close`,
/// the body read to the end).
enum AdminGet {
    /// The value of an unlabelled counter in a `/metrics` body.
    static func counter(_ name: String, in body: String) -> Int? {
        body.split(separator: "\n").first { $0.hasPrefix(name + " ") }.flatMap { Int($0.split(separator: " ")[1]) }
    }

    static func body(port: Int, path: String, timeoutSeconds: Int = 120) throws -> String {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw BenchFailure("socket: errno \(errno)") }
        defer { close(fd) }
        var timeout = timeval(tv_sec: timeoutSeconds, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else { throw BenchFailure("cannot connect to the admin port \(port): errno \(errno)") }
        let request = Array("GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".utf8)
        guard request.withUnsafeBytes({ send(fd, $0.baseAddress, $0.count, 0) }) == request.count else {
            throw BenchFailure("cannot send to the admin port \(port)")
        }
        var response: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n == 0 { break }
            guard n > 0 else {
                throw BenchFailure("reading \(path) from the admin port \(port) failed: errno \(errno)")
            }
            response += chunk[0..<n]
        }
        let text = String(decoding: response, as: UTF8.self)
        guard text.hasPrefix("HTTP/1.1 200"), let end = text.range(of: "\r\n\r\n") else {
            throw BenchFailure("GET \(path) on the admin port \(port): \(text.prefix(100))")
        }
        return String(text[end.upperBound...])
    }
}

/// The fields of the admin `/replication` answer the bench reads (each peer's details stay opaque).
struct ReplicationAnswer: Decodable {
    var digest: String
    var peers: [String: JSONValue]
}
