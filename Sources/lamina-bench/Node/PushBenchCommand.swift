import ArgumentParser
import Foundation
import LaminaModel
import LaminaTransport
import LaminaWire
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// `lamina-bench push`: pushes through a `lamina-node` child process to a fake APNs (HTTP/2 over
/// TLS on the project's transport, in this process, answering 200).
struct PushBenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "push",
        abstract:
            "Messages at a fixed rate to offline devices with APNs tokens: pushes delivered per second to a local fake APNs, and the lag from commit to delivery.",
        discussion: """
            P receivers (users r<i>) each register an APNs token on one device and disconnect; P senders (users s<i>), \
            one conversation each with its receiver, send R messages per second in total for S seconds (pipelined, on an \
            absolute schedule). Every message is one push. The fake APNs records when each push (apns-collapse-id = the \
            message id) arrives. Lag: ACK (sent after the commit) → arrival at the fake APNs, and send → arrival; one \
            monotonic clock, one process. pushes_per_second: pushes over the time from the first to the last arrival.
            """)

    @Option(help: "The lamina-node binary (default: lamina-node next to lamina-bench).") var nodeBinary: String?
    @Option(help: "Sender/receiver pairs.") var pairs = 20
    @Option(help: "Messages per second in total.") var rate: Double = 1_000
    @Option(help: "Seconds of sending.") var seconds: Double = 10
    @Option(help: "Pushes in flight to the provider at once (the node's push.maxInFlightPerProvider).") var inFlight =
        64
    @Option(help: "HTTP/2 connections to the provider (the node's push.connectionsPerProvider).") var connections = 2
    @Option(help: "Seconds to wait for the last pushes after the load ends.") var drainTimeout: Double = 60

    func validate() throws {
        guard pairs >= 1, rate > 0, seconds > 0, inFlight >= 1 else {
            throw ValidationError("pairs, rate, seconds, in-flight must be positive")
        }
    }

    func run() async throws {
        BenchSupport.raiseFileLimit()
        let binary = try NodeProcess.binary(nodeBinary)
        let directory = try BenchSupport.temporaryDirectory() + "/push-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let group = MultiThreadedEventLoopGroup.singleton

        // The fake APNs.
        let arrivals = NIOLockedValueBox([UUID: UInt64]())
        let cert = directory + "/apns-cert.pem"
        let certKey = directory + "/apns-key.pem"
        try DevelopmentCertificate.generate(commonName: "fake apns", certificatePath: cert, privateKeyPath: certKey)
        var router = TransportRouter()
        router.add("/*", maxBodyBytes: 8 * 1024) { request in
            let now = monotonicNanos()
            if let id = request.headers["apns-collapse-id"].flatMap(UUID.init(uuidString:)) {
                arrivals.withLockedValue { if $0[id] == nil { $0[id] = now } }
            }
            return HTTPResponse(status: 200)
        }
        let apns = try await TransportServer.start(
            host: "127.0.0.1", port: 0,
            tls: try TLSContext(.server(certificateChainFile: cert, privateKeyFile: certKey)), router: router,
            group: group)
        defer { Task { try? await apns.shutdown() } }

        // The node, configured for it.
        let keys = try ECKeyPair.generateP256()
        let p8 = directory + "/AuthKey.p8"
        try keys.privateKeyPEM.write(toFile: p8, atomically: true, encoding: .utf8)
        let url = "https://127.0.0.1:\(apns.port)"
        let config = directory + "/node.json"
        try """
        {"push": {"apns": {"teamID": "TEAM123456", "keyID": "KEY1234567", "keyFile": "\(p8)", "productionURL": "\(url)", "sandboxURL": "\(url)"},
                  "caFile": "\(cert)", "maxInFlightPerProvider": \(inFlight), "connectionsPerProvider": \(connections)}}
        """.write(toFile: config, atomically: true, encoding: .utf8)
        let node = try await NodeProcess.start(binary: binary, label: "push", extraArguments: ["--config", config])
        defer { node.stop() }

        // Receivers register a token each and go offline; senders open a conversation each.
        for i in 0..<pairs {
            let receiver = try await LoadPeer.connect(node, user: try UserID("r\(i)"), sync: false, group: group)
            let id = UUID()
            let token = PushToken.apns(
                token: (0..<32).map { UInt8(($0 &* 31 &+ i) & 0xFF) }, topic: "com.example.bench", environment: .sandbox
            )
            guard
                case .ack = try await receiver.client.request(
                    .registerPushToken(RegisterPushToken(requestID: id, token: token)), id: id
                ).get()
            else {
                throw BenchFailure("r\(i) could not register its push token")
            }
            await receiver.close()
        }
        var senders: [(LoadPeer, ConversationID)] = []
        for i in 0..<pairs {
            let sender = try await LoadPeer.connect(node, user: try UserID("s\(i)"), sync: false, group: group)
            senders.append((sender, try await sender.createConversation(with: [try UserID("r\(i)")])))
        }
        try await Task.sleep(for: .seconds(1))  // the receivers' sessions are gone on the node

        let total = Int(rate * seconds)
        let schedule = senders
        let sent = NIOLockedValueBox([UUID: UInt64]())
        let acked = NIOLockedValueBox([UUID: UInt64]())
        let errors = LoadCounter()
        progress("push", "\(total) messages at \(Int(rate))/s to \(pairs) offline devices")
        let t0 = monotonicNanos()
        let interval = 1e9 / rate
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            Thread.detachNewThread {
                for j in 0..<total {
                    sleepUntil(t0 + UInt64(Double(j) * interval))
                    let (peer, conversation) = schedule[j % schedule.count]
                    let id = MessageID.timeOrdered()
                    let part = try! MessagePart(text: "bench message \(j)")
                    sent.withLockedValue { $0[id.uuid] = monotonicNanos() }
                    peer.client.request(
                        .sendMessage(
                            SendMessage(
                                messageID: id, conversationID: conversation, parts: [part],
                                push: PushConfiguration(alert: "m\(j)"))),
                        id: id.uuid
                    ).whenComplete { result in
                        if case .success(.ack) = result {
                            acked.withLockedValue { $0[id.uuid] = monotonicNanos() }
                        } else {
                            errors.add()
                        }
                    }
                }
                continuation.resume()
            }
        }
        let deadline = monotonicNanos() + UInt64(drainTimeout * 1e9)
        while arrivals.withLockedValue({ $0.count }) < total - errors.current, monotonicNanos() < deadline {
            try await Task.sleep(for: .milliseconds(10))
        }
        for (peer, _) in senders { await peer.close() }

        let (sentAt, ackAt, arrived) = (
            sent.withLockedValue { $0 }, acked.withLockedValue { $0 }, arrivals.withLockedValue { $0 }
        )
        let fromAck = Percentiles(
            arrived.compactMap { id, at in ackAt[id].map { Double(Int64(bitPattern: at &- $0)) / 1e6 } })
        let fromSend = Percentiles(arrived.compactMap { id, at in sentAt[id].map { Double(at &- $0) / 1e6 } })
        let times = arrived.values.sorted()
        let span = Double((times.last ?? 0) &- (times.first ?? 0)) / 1e9
        let perSecond = span > 0 ? Double(times.count - 1) / span : 0
        emit(
            String(
                format:
                    "push messages=%d acked=%d errors=%d pushes=%d pushes_per_second=%.0f ack_to_push_ms %@ send_to_push_ms %@",
                total, ackAt.count, errors.current, arrived.count, perSecond, fromAck.shortFields, fromSend.shortFields)
        )
    }
}
