import Foundation
import LaminaModel
import LaminaTransport

/// How a node joins a cluster of peers (SPEC §6.5). Off unless `port` is set: a node alone
/// needs none of it.
///
/// Peers authenticate with mutual TLS on a listener of their own (the client port never asks
/// for certificates): every node presents a certificate signed by the cluster's CA whose
/// subject common name is `lamina-node-<node id in hex>` (``commonName(of:)``), and accepts only
/// such certificates.
public struct PeerSettings: Sendable, Hashable, Codable {
    /// The peer listener's address; `port` -1 turns peering off.
    public var host = "127.0.0.1"
    public var port = -1
    /// The cluster's name: nodes of different clusters refuse each other.
    public var cluster = "lamina"
    /// `https://host:port` of the peer listeners this node dials (repeatable flag `--peer`).
    public var peers: [String] = []
    /// The cluster CA (PEM) that signs every node's peer certificate.
    public var caFile: String?
    /// This node's peer certificate and key (PEM), signed by the CA.
    public var certificateFile: String?
    public var keyFile: String?
    /// Reconnect backoff after a failed or lost session: doubles from the first to the last,
    /// each wait drawn between half and all of it (jitter). A link that came up starts again
    /// from the first. The last is 1 s: with the connect timeout, a healed link is redialed
    /// within about 2 s (a dial a second costs a peer nothing worth saving during an outage).
    public var reconnectMinimumMilliseconds = 100
    public var reconnectMaximumMilliseconds = 1_000
    /// A dial whose TCP connection is not up within this long is given up (and retried after
    /// the backoff): a SYN lost to a partition is not left to the kernel's retransmissions
    /// (1 s, 3 s, 7 s, ... after the first), so a healed link is back within about this plus the
    /// backoff.
    public var connectTimeoutMilliseconds = 2_000
    /// Liveness of peer links, both dialed and accepted (SPEC §6.5): a link that received
    /// nothing for `pingAfterQuietMilliseconds` is sent an HTTP/2 PING, and closed as lost when
    /// the ACK does not arrive within `pingDeadlineMilliseconds`.
    public var pingAfterQuietMilliseconds = 1_000
    public var pingDeadlineMilliseconds = 2_000

    public init() {}

    public var enabled: Bool { port >= 0 }

    /// The HTTP/2 liveness of peer connections.
    public var liveness: HTTP2Liveness {
        HTTP2Liveness(
            pingAfterQuiet: .milliseconds(Int64(pingAfterQuietMilliseconds)),
            ackDeadline: .milliseconds(Int64(pingDeadlineMilliseconds)))
    }

    /// The common name a node's peer certificate carries.
    public static func commonName(of node: NodeID) -> String { "lamina-node-\(String(node.rawValue, radix: 16))" }

    /// The node a peer certificate's common name names, if it follows ``commonName(of:)``.
    public static func node(fromCommonName name: String) -> NodeID? {
        guard name.hasPrefix("lamina-node-"), let value = UInt64(name.dropFirst("lamina-node-".count), radix: 16),
            value != 0
        else { return nil }
        return NodeID(value)
    }

    /// Refuses a half-configured cluster, with a reason.
    public func validate() throws {
        guard enabled else { return }
        func check(_ ok: Bool, _ reason: String) throws { if !ok { throw NodeServerError.configuration(reason) } }
        try check((0...65535).contains(port), "peers.port must be -1 (off) or 0...65535, not \(port)")
        try check(!cluster.isEmpty && cluster.utf8.count <= 256, "peers.cluster must be 1...256 bytes")
        try check(
            caFile != nil && certificateFile != nil && keyFile != nil,
            "peering needs the cluster CA (--peer-ca), this node's peer certificate (--peer-certificate) and its key (--peer-key)"
        )
        try check(peers.count <= 64, "at most 64 peers")
        for url in peers {
            try check(url.hasPrefix("https://"), "a peer is an https:// URL of its peer listener, not \(url)")
        }
        try check(
            reconnectMinimumMilliseconds >= 10 && reconnectMinimumMilliseconds <= reconnectMaximumMilliseconds
                && reconnectMaximumMilliseconds <= 600_000,
            "reconnect backoff must be 10 ms or more, minimum <= maximum, at most 600000 ms")
        try check(
            (100...60_000).contains(connectTimeoutMilliseconds), "peers.connectTimeoutMilliseconds must be 100...60000")
        try check(
            (100...3_600_000).contains(pingAfterQuietMilliseconds),
            "peers.pingAfterQuietMilliseconds must be 100...3600000")
        try check(
            (100...600_000).contains(pingDeadlineMilliseconds), "peers.pingDeadlineMilliseconds must be 100...600000")
    }
}
