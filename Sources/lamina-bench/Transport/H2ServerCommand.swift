import ArgumentParser
import Foundation
import LaminaTransport
import NIOCore
import NIOPosix

/// `lamina-bench h2-server`: a LaminaTransport server answering every path with a small
/// fixed body (what `nghttpd` serves from a file in `transport-compare`). Runs until killed.
struct H2ServerCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "h2-server", abstract: "Serve a small fixed body over TLS + HTTP/2 (LaminaTransport).")

    @Option(help: "Listen address.") var host = "127.0.0.1"
    @Option(help: "Listen port.") var port: Int
    @Option(help: "PEM certificate chain.") var cert: String
    @Option(help: "PEM private key.") var key: String
    @Option(help: "Response body size in bytes.") var bodySize = 6
    @Option(help: "Event loop threads.") var threads = 1

    func run() throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: threads)
        let tls = try TLSContext(.server(certificateChainFile: cert, privateKeyFile: key))
        let body = ByteBuffer(repeating: UInt8(ascii: "x"), count: bodySize)
        let length = String(bodySize)
        let headers: HeaderFields = [(":status", "200"), ("content-length", length), ("content-type", "text/plain")]
        var router = TransportRouter()
        router.add("/*") { stream in
            stream.sendHeaders(headers)
            stream.write(body, promise: nil)
            stream.finish()
        }
        let server = try TransportServer.start(host: host, port: port, tls: tls, router: router, group: group).wait()
        print("listening on \(server.localAddress)")
        fflush(nil)
        // Runs until killed (SIGTERM's default action ends the process).
        while true { sleep(3600) }
    }
}
