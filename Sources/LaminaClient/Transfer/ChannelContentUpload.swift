import Foundation
import LaminaModel

/// The rich content of a channel message, uploaded before the message goes out (SPEC §6.8:
/// channel commands need a live session, so nothing waits in the outbox). Each staged part is
/// uploaded on the connection the sync stream runs on, resuming from what the node holds
/// (HEAD) after a dropped connection or a retryable refusal, at most `maxAttempts` times.
enum ChannelContentUpload {
    /// Tries per content before the send fails.
    static let maxAttempts = 5

    /// How one try ended.
    private enum Attempt {
        case done
        case again(ClientError)
        case failed(ClientError)
    }

    /// Uploads `reference` from `file`; returns once the node holds the whole, verified content.
    static func upload(_ reference: ContentReference, from file: URL, link: NodeLink, store: LocalStore)
        async throws(ClientError)
    {
        var last = ClientError(.contentRefused, "content \(reference.id) was not uploaded")
        for _ in 0..<maxAttempts {
            switch await attempt(reference, from: file, link: link, store: store) {
            case .done: return
            case .again(let error): last = error
            case .failed(let error): throw error
            }
        }
        throw last
    }

    private static func attempt(_ reference: ContentReference, from file: URL, link: NodeLink, store: LocalStore)
        async -> Attempt
    {
        do {
            let lease = try await link.lease()
            var offset: UInt64 = 0
            if let held = try await ContentStreams.head(reference.id, on: lease) {
                if held.isComplete { return .done }
                offset = min(held.offset, reference.size)
            }
            let answer = try await ContentStreams.put(
                reference, from: file, offset: offset, on: lease, chunkBytes: ContentUploader.chunkBytes,
                shouldStop: { false }, onSent: { _ in })
            switch answer {
            case .complete: return .done
            case .held(let held):
                return .again(ClientError(.contentRefused, "the node holds \(held) bytes of \(reference.id)"))
            case .refused(let error):
                switch error.uploadOutcome {
                case .resume, .digestMismatch: break
                case .reauthenticate: await link.reject(lease.token, store: store)
                case .retryLater: try? await Task.sleep(for: .seconds(min(error.retryAfterSeconds ?? 1, 10)))
                case .fail: return .failed(ClientError(.contentRefused, error.description))
                }
                return .again(ClientError(.contentRefused, error.description))
            }
        } catch let error as ContentHTTPError {
            let refused = ClientError(.contentRefused, error.description)
            return error.uploadOutcome == .fail ? .failed(refused) : .again(refused)
        } catch let error as ClientError {
            return error.code == .notConnected || error.code == .cancelled ? .failed(error) : .again(error)
        } catch {
            return .again(ClientError(.disconnected, "the upload of \(reference.id) failed: \(error)"))
        }
    }
}
