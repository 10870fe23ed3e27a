import ArgumentParser
import Foundation
import LaminaProcess
import LaminaTransport
import NIOCore
import NIOPosix

/// `lamina-bench idle-connections`: memory per idle TLS + HTTP/2 connection.
///
/// Two processes: this one runs the LaminaTransport server (one event loop) and measures its
/// resident set before and after; a child (`idle-clients`, the same executable) opens the
/// connections, makes one request on each (so TLS and HTTP/2 are fully set up), reports its
/// own per-connection figure and then holds the connections idle.
struct IdleConnectionsCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "idle-connections", abstract: "Memory per idle TLS + HTTP/2 connection (server and client side).")

    @Option(help: "Idle connections to hold.") var count = 5000

    func run() throws {
        BenchSupport.raiseFileLimit()
        let directory = try BenchSupport.temporaryDirectory()
        let (cert, key) = try BenchSupport.certificate(in: directory)
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let tls = try TLSContext(.server(certificateChainFile: cert, privateKeyFile: key))
        var router = TransportRouter()
        router.add("/hello") { stream in
            stream.sendHeaders([(":status", "200")])
            stream.write(ByteBuffer(string: "hello"), promise: nil)
            stream.finish()
        }
        let server = try TransportServer.start(host: "127.0.0.1", port: 0, tls: tls, router: router, group: group)
            .wait()

        // Warm up (lazy OpenSSL/nghttp2/NIO state), then take the baseline with no connections.
        let warmup = try Child(port: server.port, ca: cert, count: 50)
        _ = try warmup.waitReady()
        warmup.stop()
        try waitFor { server.connectionCount == 0 }
        let baseline = BenchSupport.residentBytes()

        let child = try Child(port: server.port, ca: cert, count: count)
        let clientPerConnection = try child.waitReady()
        try waitFor { server.connectionCount == count }
        Thread.sleep(forTimeInterval: 1)  // let the last handshakes' transient buffers go
        let loaded = BenchSupport.residentBytes()
        let perConnection = Double(loaded - baseline) / Double(count)
        print(String(format: "idle connections: %d", count))
        print(
            String(
                format: "server RSS: baseline %.1f MB, with connections %.1f MB", Double(baseline) / 1e6,
                Double(loaded) / 1e6))
        print(
            String(
                format: "server bytes per idle connection (RSS delta): %.0f (%.1f KB)", perConnection,
                perConnection / 1024))
        print(
            String(
                format: "client bytes per idle connection (RSS delta, child process): %.0f (%.1f KB)",
                clientPerConnection, clientPerConnection / 1024))
        child.stop()
        try? server.shutdown().wait()
        try? group.syncShutdownGracefully()
    }

    private func waitFor(timeout: Double = 120, _ condition: () -> Bool) throws {
        let deadline = Date().addingTimeInterval(timeout)
        while !condition() {
            guard Date() < deadline else { throw ValidationError("timed out waiting for connections") }
            usleep(10_000)
        }
    }

    /// The child process holding the client ends.
    final class Child {
        let process = ChildProcess()
        let output = Pipe()

        init(port: Int, ca: String, count: Int) throws {
            process.executableURL = URL(fileURLWithPath: CommandLine.arguments[0])
            process.arguments = ["idle-clients", "--port", String(port), "--ca", ca, "--count", String(count)]
            process.standardOutput = output
            process.standardInput = Pipe()
            try process.run()
        }

        /// Waits for "READY <bytes per connection>" and returns that figure.
        func waitReady() throws -> Double {
            var line = ""
            while !line.contains("\n") {
                let data = PipeReading.next(output.fileHandleForReading)
                if data.isEmpty { throw ValidationError("idle-clients exited: \(line)") }
                line += String(decoding: data, as: UTF8.self)
            }
            let fields = line.split(whereSeparator: { $0 == " " || $0 == "\n" })
            guard fields.count >= 2, fields[0] == "READY", let value = Double(fields[1]) else {
                throw ValidationError("unexpected idle-clients output: \(line)")
            }
            return value
        }

        func stop() {
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
            process.waitUntilExit()
        }
    }
}

/// `lamina-bench idle-clients` (used by `idle-connections`): opens connections, one request
/// each, prints `READY <client bytes per connection>`, then holds them until killed.
struct IdleClientsCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "idle-clients", abstract: "Helper process of idle-connections.", shouldDisplay: false)

    @Option var port: Int
    @Option var ca: String
    @Option var count: Int
    @Option(help: "Connections set up concurrently.") var batch = 100

    func run() throws {
        BenchSupport.raiseFileLimit()
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let tls = try TLSContext(.client(trust: .caFile(ca)))
        let baseline = BenchSupport.residentBytes()
        var connections: [TransportConnection] = []
        connections.reserveCapacity(count)
        var opened = 0
        while opened < count {
            let n = min(batch, count - opened)
            let futures = (0..<n).map { _ -> EventLoopFuture<TransportConnection> in
                TransportConnection.connect(to: "https://localhost:\(port)", tls: tls, group: group).flatMap {
                    connection in
                    connection.openStream(method: "GET", path: "/hello", endStream: true)
                        .flatMap { $0.collect(maxBytes: 1024) }
                        .map { _ in connection }
                }
            }
            for future in futures { connections.append(try future.wait()) }
            opened += n
        }
        Thread.sleep(forTimeInterval: 1)
        let loaded = BenchSupport.residentBytes()
        print("READY \(Double(loaded - baseline) / Double(count))")
        fflush(nil)
        while true { Thread.sleep(forTimeInterval: 3600) }
    }
}
