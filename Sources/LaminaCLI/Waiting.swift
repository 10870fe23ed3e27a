import Foundation
import LaminaClient

/// Waiting on events with a time limit (never a sleep standing in for an event).
public enum Waiting {
    /// The first element of `stream`, or nil when the stream ends or `timeout` passes first.
    public static func first<Element: Sendable>(of stream: AsyncStream<Element>, timeout: Duration) async -> Element? {
        await withTaskGroup(of: Element?.self) { group in
            group.addTask {
                var iterator = stream.makeAsyncIterator()
                return await iterator.next()
            }
            group.addTask {
                try? await Task.sleep(for: timeout)
                return nil
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first
        }
    }

    /// Returns true once `condition` holds on `client`'s store, re-checking after every
    /// committed batch of changes; false when `timeout` passes first.
    public static func until(
        _ client: LaminaClient, timeout: Duration,
        _ condition: @escaping @Sendable () throws(ClientError) -> Bool
    ) async throws(CLIError) -> Bool {
        let changes = client.changes()  // subscribed before the first check: no batch is missed
        do { if try condition() { return true } } catch { throw CLIError(error) }
        let result: Result<Bool, ClientError> = await withTaskGroup(of: Result<Bool, ClientError>?.self) { group in
            group.addTask {
                for await _ in changes {
                    do throws(ClientError) { if try condition() { return .success(true) } } catch {
                        return .failure(error)
                    }
                }
                return .success(false)
            }
            group.addTask {
                try? await Task.sleep(for: timeout)
                return .success(false)
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first ?? .success(false)
        }
        switch result {
        case .success(let met): return met
        case .failure(let error): throw CLIError(error)
        }
    }
}
