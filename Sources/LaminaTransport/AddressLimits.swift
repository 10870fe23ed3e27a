import NIOConcurrencyHelpers
import NIOCore

/// What one remote address may hold of a ``TransportServer``: connections open, and TLS
/// handshakes in flight (a connection that never finishes its handshake holds one until
/// ``TLSConfiguration/handshakeTimeout``). A connection over either is closed as soon as it is
/// accepted, before TLS, and counted in ``TransportServer/Counts/refusedForAddress``.
public struct AddressLimits: Sendable, Hashable {
    public var maxConnections: Int
    public var maxHandshakes: Int

    public init(maxConnections: Int, maxHandshakes: Int) {
        self.maxConnections = maxConnections
        self.maxHandshakes = maxHandshakes
    }
}

/// Connections and handshakes per remote address (entries go when both reach 0).
final class AddressTable: Sendable {
    private let entries = NIOLockedValueBox<[String: (open: Int, handshaking: Int)]>([:])

    /// Takes a connection and a handshake slot of `address`; nil when either is full.
    func admit(_ address: String, limits: AddressLimits) -> AddressTicket? {
        let admitted = entries.withLockedValue { entries -> Bool in
            let entry = entries[address] ?? (0, 0)
            guard entry.open < limits.maxConnections, entry.handshaking < limits.maxHandshakes else { return false }
            entries[address] = (entry.open + 1, entry.handshaking + 1)
            return true
        }
        return admitted ? AddressTicket(table: self, address: address) : nil
    }

    /// What `address` holds now (for tests).
    func held(_ address: String) -> (open: Int, handshaking: Int) {
        entries.withLockedValue { $0[address] ?? (0, 0) }
    }

    fileprivate func release(_ address: String, connection: Bool, handshake: Bool) {
        entries.withLockedValue { entries in
            guard var entry = entries[address] else { return }
            if connection { entry.open -= 1 }
            if handshake { entry.handshaking -= 1 }
            entries[address] = entry.open <= 0 && entry.handshaking <= 0 ? nil : entry
        }
    }
}

/// One admitted connection's slots: the handshake's goes when it completes (or the connection
/// closes first), the connection's when it closes. Used on the connection's event loop.
final class AddressTicket: @unchecked Sendable {
    private let table: AddressTable
    private let address: String
    private var handshaking = true
    private var open = true

    fileprivate init(table: AddressTable, address: String) {
        self.table = table
        self.address = address
    }

    func handshakeDone() {
        guard handshaking, open else { return }
        handshaking = false
        table.release(address, connection: false, handshake: true)
    }

    func closed() {
        guard open else { return }
        open = false
        table.release(address, connection: true, handshake: handshaking)
        handshaking = false
    }
}

/// Tells `done` when the TLS handshake completed, then leaves the pipeline.
final class HandshakeObserver: ChannelInboundHandler, RemovableChannelHandler, Sendable {
    typealias InboundIn = ByteBuffer
    private let done: @Sendable () -> Void

    init(done: @escaping @Sendable () -> Void) { self.done = done }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is TLSHandshakeCompleted {
            done()
            context.fireUserInboundEventTriggered(event)
            context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
            return
        }
        context.fireUserInboundEventTriggered(event)
    }
}
