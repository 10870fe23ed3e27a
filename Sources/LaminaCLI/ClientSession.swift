import Foundation
import LaminaClient
import LaminaModel
import LaminaWire

/// Something the sync engine reported after the first sync, for a long-running command
/// to show as a status line.
public enum SessionNotice: Hashable, Sendable {
    /// The stream to the node ended; the engine retries (first after `retryIn`, then with
    /// backoff) until `online`. Reported once per outage.
    case offline(reason: String, retryIn: Duration)
    /// In sync with the node again.
    case online
    /// The node refused a command for good.
    case commandFailed(OutboxFailure)
    /// The engine stopped (authentication refused, or the store failed).
    case stopped(CLIError)
}

/// A `LaminaClient` for one user, connected to the node with tokens minted from the node's
/// dev key. `connect` returns once the first sync is done, or fails with a clear error:
/// the node cannot be reached, or refused the token.
public final class ClientSession: @unchecked Sendable {
    public let settings: ConnectionSettings
    public let client: LaminaClient
    /// Engine events after the first sync. One consumer.
    public let notices: AsyncStream<SessionNotice>

    private let noticeContinuation: AsyncStream<SessionNotice>.Continuation
    private let lock = NSLock()
    private var lastConnectError: ClientError?
    private var inSync = false
    private var pump: Task<Void, Never>?
    private let frames = FrameSignal()
    private let storeLock: StoreLock

    /// The longest a command waits for its first sync by default.
    public static let defaultConnectTimeout: Duration = .seconds(20)

    /// Opens the user's local store (nothing connects yet), taking its lock: a second
    /// process for the same store fails with `.storeInUse`.
    public init(settings: ConnectionSettings) throws(CLIError) {
        self.settings = settings
        storeLock = try StoreLock(
            location: StoreLocation(dataDirectory: settings.clientDataDirectory, user: settings.user))
        do { client = try LaminaClient(configuration: settings.configuration, user: settings.user) } catch {
            throw CLIError(error)
        }
        (notices, noticeContinuation) = AsyncStream<SessionNotice>.makeStream(bufferingPolicy: .bufferingNewest(1_000))
    }

    deinit {
        pump?.cancel()
        noticeContinuation.finish()
    }

    /// Connects and waits for the first sync (the node's backlog applied to the store).
    /// `trace` gets every sync engine event, as text (for `--verbose`).
    public func connect(
        timeout: Duration = ClientSession.defaultConnectTimeout,
        trace: (@Sendable (String) -> Void)? = nil
    ) async throws(CLIError) {
        let tokens = try DevTokens(nodeDataDirectory: settings.nodeDataDirectory)
        // The trust settings are checked here for a clear error; `connect` builds the real
        // connector (whose connection also carries rich content).
        do { _ = try TransportSyncConnector.connector(for: settings.configuration) } catch {
            throw CLIError(.caFileMissing, "\(settings.caFile.path) does not load as a CA file: \(error.reason)")
        }
        let user = settings.user
        let (outcomes, outcome) = AsyncStream<Result<Void, CLIError>>.makeStream(bufferingPolicy: .bufferingOldest(1))
        let store = client.store.location.userDirectory.path
        let syncRefused: @Sendable (ErrorFrame) -> Void = { [weak self, noticeContinuation] error in
            let failure = CLIError(
                .syncRefused,
                "the node refused to sync \(user)'s device: \(error.code.name): \(error.reason). If the node's data was reset (a new ./.lamina), this client's store is stale: delete \(store) and run again"
            )
            if self?.lock.withLock({ self?.inSync }) == true {
                noticeContinuation.yield(.stopped(failure))
            } else {
                outcome.yield(.failure(failure))
            }
        }
        let observe: (@escaping FrameChannelConnector) -> FrameChannelConnector = { base in
            { [weak self] () async throws(ClientError) -> any FrameChannel in
                do throws(ClientError) {
                    let channel = try await base()
                    guard let frames = self?.frames else { return channel }
                    return ObservedChannel(inner: channel, onReceive: { frames.fire() }, onSyncRefused: syncRefused)
                } catch {
                    self?.lock.withLock { self?.lastConnectError = error }
                    throw error
                }
            }
        }
        let events = client.syncEvents
        let url = settings.nodeURL.absoluteString
        let task = Task { [weak self, noticeContinuation] in
            var inSync = false
            var online = true
            for await event in events {
                trace?("sync: \(event)")
                switch event {
                case .state(.live):
                    if !inSync { outcome.yield(.success(())) } else if !online { noticeContinuation.yield(.online) }
                    inSync = true
                    online = true
                    self?.lock.withLock { self?.inSync = true }
                case .reconnecting(_, let delay):
                    let reason =
                        self?.lock.withLock { () -> String? in
                            defer { self?.lastConnectError = nil }
                            return self?.lastConnectError?.reason
                        } ?? "the node closed the sync stream"
                    if inSync {
                        // Once per outage: the engine retries quietly until it is back.
                        if online { noticeContinuation.yield(.offline(reason: reason, retryIn: delay)) }
                        online = false
                    } else {
                        outcome.yield(
                            .failure(
                                CLIError(
                                    .nodeUnreachable,
                                    "cannot reach the node at \(url) (is `swift run lamina-node` running? see --node): \(SessionNotice.shortReason(reason))"
                                )))
                    }
                case .failed(let error):
                    let failure =
                        error.code == .authenticationFailed || error.code == .storeMismatch
                        ? CLIError(
                            .authenticationFailed,
                            "the node refused \(user)'s session: \(error.reason) (is --node-data the data directory of this node?)"
                        )
                        : CLIError(error)
                    if inSync { noticeContinuation.yield(.stopped(failure)) } else { outcome.yield(.failure(failure)) }
                case .commandFailed(let failure):
                    noticeContinuation.yield(.commandFailed(failure))
                default:
                    break
                }
            }
        }
        lock.withLock { pump = task }
        do {
            try await client.connect(
                identityToken: { nonce in try tokens.token(user: user, nonce: nonce) }, wrappingConnector: observe)
        } catch {
            throw CLIError(error)
        }
        let first = await Waiting.first(of: outcomes, timeout: timeout)
        switch first {
        case .some(.success): return
        case .some(.failure(let error)):
            await client.disconnect()
            throw error
        case .none:
            await client.disconnect()
            throw CLIError(.timedOut, "no sync with the node at \(url) within \(timeout)")
        }
    }

    /// Waits until every queued command (messages, receipts, read marks) has been
    /// acknowledged by the node, re-checking whenever a frame arrives. Returns how many are
    /// still queued when `timeout` passes (0: all out).
    public func waitForOutbox(timeout: Duration) async throws(CLIError) -> Int {
        let wakeups = frames.subscribe()  // before the first check: no ACK is missed
        let client = self.client
        let remaining: @Sendable () -> Int = { (try? client.store.outboxEntries().count) ?? 0 }
        if remaining() == 0 { return 0 }
        let drained = await withTaskGroup(of: Bool.self) { group in
            group.addTask {
                for await _ in wakeups where remaining() == 0 { return true }
                return false
            }
            group.addTask {
                try? await Task.sleep(for: timeout)
                return false
            }
            let first = await group.next() ?? false
            group.cancelAll()
            return first
        }
        return drained ? 0 : remaining()
    }

    /// Disconnects and closes the store (queued commands stay for the next run).
    public func close() async {
        lock.withLock { pump }?.cancel()
        try? await client.close()
        noticeContinuation.finish()
    }
}
