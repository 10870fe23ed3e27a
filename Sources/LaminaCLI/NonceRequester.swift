import Foundation
import LaminaClient
import LaminaWire

/// Asks a node for a fresh nonce over one sync stream (HELLO, NONCE_REQUEST), for
/// `lamina token` without `--nonce`. A node accepts a nonce only on the connection that asked
/// for it (SPEC §5.2) and forgets it when that connection closes, so the token minted for it
/// shows the form and logs nobody in.
public enum NonceRequester {
    /// The nonce and when it expires; throws `.nodeUnreachable` or `.timedOut`.
    public static func nonce(settings: ConnectionSettings, timeout: Duration = .seconds(15)) async throws(CLIError)
        -> Nonce
    {
        let connector: FrameChannelConnector
        do { connector = try TransportSyncConnector.connector(for: settings.configuration) } catch {
            throw CLIError(.caFileMissing, "\(settings.caFile.path) does not load as a CA file: \(error.reason)")
        }
        let url = settings.nodeURL.absoluteString
        let (answers, answer) = AsyncStream<Result<Nonce, CLIError>>.makeStream(bufferingPolicy: .bufferingOldest(1))
        let task = Task {
            let channel: any FrameChannel
            do throws(ClientError) { channel = try await connector() } catch {
                answer.yield(
                    .failure(
                        CLIError(
                            .nodeUnreachable,
                            "cannot reach the node at \(url) (is `swift run lamina-node` running? see --node): \(SessionNotice.shortReason(error.reason))"
                        )))
                return
            }
            let result = await exchange(on: channel, url: url)
            await channel.close()
            answer.yield(result)
        }
        defer { task.cancel() }
        switch await Waiting.first(of: answers, timeout: timeout) {
        case .some(.success(let nonce)): return nonce
        case .some(.failure(let error)): throw error
        case .none: throw CLIError(.timedOut, "no nonce from the node at \(url) within \(timeout)")
        }
    }

    /// HELLO, NONCE_REQUEST, and the NONCE answering it (PINGs answered on the way).
    static func exchange(on channel: any FrameChannel, url: String) async -> Result<Nonce, CLIError> {
        do throws(ClientError) {
            try await channel.send(.hello(Hello(agent: "lamina-cli/1")))
            let id = UUID()
            try await channel.send(.nonceRequest(NonceRequest(requestID: id)))
            while let frame = try await channel.receive() {
                switch frame {
                case .nonce(let nonce) where nonce.requestID == id:
                    return .success(nonce)
                case .error(let error):
                    return .failure(
                        CLIError(
                            .authenticationFailed,
                            "the node refused the nonce request: \(error.code.name): \(error.reason)"))
                case .ping(let ping):
                    try await channel.send(.pong(ping))
                default:
                    continue  // WELCOME
                }
            }
            return .failure(CLIError(.nodeUnreachable, "the node at \(url) closed the stream before sending a nonce"))
        } catch {
            return .failure(CLIError(.nodeUnreachable, "the stream to \(url) failed: \(error.reason)"))
        }
    }
}
