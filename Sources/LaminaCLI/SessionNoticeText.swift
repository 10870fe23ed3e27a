import Foundation

extension SessionNotice {
    /// The notice as a status line: `  (offline: connection refused; retrying …)`.
    public var text: String {
        switch self {
        case .offline(let reason, let retryIn):
            let seconds = Double(retryIn.components.seconds) + Double(retryIn.components.attoseconds) / 1e18
            return
                "  (offline: \(Sanitizer.clip(Self.shortReason(reason), 100)); retrying with backoff, first in \(String(format: "%.1f", seconds)) s; what you send is queued)"
        case .online:
            return "  (back online, in sync)"
        case .commandFailed(let failure):
            return
                "  (the node refused a \(failure.kind) command: \(Sanitizer.clip(failure.reason, 160)), code \(failure.code))"
        case .stopped(let error):
            return "  (stopped: \(error))"
        }
    }

    /// The gist of a connection failure: the OS's words when SwiftNIO's wrapping has them
    /// (anything else, e.g. a TLS failure, is kept whole).
    static func shortReason(_ reason: String) -> String {
        for gist in [
            "Connection refused", "Connection reset", "No route to host", "Network is unreachable", "timed out",
        ]
        where reason.localizedCaseInsensitiveContains(gist) {
            return gist.lowercased()
        }
        return reason
    }
}
