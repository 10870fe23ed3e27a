import Foundation

extension SessionNotice {
    /// The notice as a status line: `  (offline: … — retrying in 2s)`.
    public var text: String {
        switch self {
        case .offline(let reason, let retryIn):
            let seconds = Double(retryIn.components.seconds) + Double(retryIn.components.attoseconds) / 1e18
            return "  (offline: \(Sanitizer.clip(reason, 160)) — retrying in \(String(format: "%.1f", seconds)) s)"
        case .online:
            return "  (back online, in sync)"
        case .commandFailed(let failure):
            return "  (the node refused a \(failure.kind) command: \(Sanitizer.clip(failure.reason, 160)), code \(failure.code))"
        case .stopped(let error):
            return "  (stopped: \(error))"
        }
    }
}
