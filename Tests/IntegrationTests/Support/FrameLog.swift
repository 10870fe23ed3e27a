import LaminaClient
import LaminaWire
import NIOConcurrencyHelpers
import NIOCore

/// The frames a client's channels carried, in order, one line each (feed entries with their
/// seq and event): a test prints it when a device misses something.
final class FrameLog: Sendable {
    private let lines = NIOLockedValueBox<[String]>([])

    var text: String { lines.withLockedValue { $0.joined(separator: "\n") } }

    /// `connector` with every frame of its channels logged.
    func wrap(_ connector: @escaping FrameChannelConnector) -> FrameChannelConnector {
        { () throws(ClientError) -> any FrameChannel in
            LoggedChannel(inner: try await connector(), log: self)
        }
    }

    func note(_ direction: String, _ frame: Frame) {
        var line = "\(direction) \(frame.type.name)"
        let changes: [Change]
        switch frame {
        case .change(let c): changes = [c]
        case .changeBatch(let b): changes = b.changes
        case .ack(let a):
            line += " cursor=\(a.cursor.map(String.init) ?? "-")"
            changes = []
        default: changes = []
        }
        for c in changes { line += " [\(c.seq) \(String(describing: c.event).prefix(60))]" }
        lines.withLockedValue { $0.append(line) }
    }
}

private struct LoggedChannel: FrameChannel {
    let inner: any FrameChannel
    let log: FrameLog

    nonisolated(nonsending) func send(_ frame: Frame) async throws(ClientError) {
        log.note(">", frame)
        try await inner.send(frame)
    }

    nonisolated(nonsending) func receive() async throws(ClientError) -> Frame? {
        let frame = try await inner.receive()
        if let frame { log.note("<", frame) }
        return frame
    }

    nonisolated(nonsending) func close() async { await inner.close() }
}
