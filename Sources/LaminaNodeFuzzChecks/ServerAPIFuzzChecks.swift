import Dispatch
import Foundation
import LaminaNode
import LaminaTransport
import LaminaWireFuzzChecks
import NIOCore

extension NodeFuzzChecks {
    /// The statuses the Server API may answer (Protocol/SERVER-API.yaml); 503 only on the
    /// webhooks paths (no delivery in the fuzz environment).
    static let serverAPIStatuses: Set<Int> = [
        200, 201, 202, 204, 400, 401, 403, 404, 405, 406, 409, 410, 413, 415, 422, 429,
    ]

    /// Server API requests (``ServerAPIFuzzEnvironment/request(_:)`` reads the input): the
    /// answer is one of the API's statuses, never a server error (a 5xx means a client's
    /// mistake reached code that did not expect it); an error is Layer's JSON error object
    /// (`id`, `code`, `message`, `url`) with a content type; a 2xx body is JSON; 204 has none.
    /// A trap anywhere on the way (index out of range, a failed force-unwrap) is a crash the
    /// fuzz target reports.
    public static func checkServerAPIRequest(_ input: [UInt8], in environment: ServerAPIFuzzEnvironment)
        async throws(PropertyViolation)
    {
        let request = ServerAPIFuzzEnvironment.request(input)
        let response = await environment.answer(input)
        try checkServerAPIResponse(response, to: request, input: input)
    }

    /// The property of ``checkServerAPIRequest(_:in:)`` on one answer to `request`.
    public static func checkServerAPIResponse(_ response: HTTPResponse, to request: HTTPRequest, input: [UInt8])
        throws(PropertyViolation)
    {
        func violation(_ detail: String) -> PropertyViolation {
            let body = String(decoding: response.body.readableBytesView.prefix(400), as: UTF8.self)
            return PropertyViolation(
                property: "server-api",
                detail: "\(request.method) \(request.path.prefix(200)) -> \(response.status): \(detail); body \(body)",
                input: input)
        }
        let webhooks = request.path.contains("/webhooks")
        guard serverAPIStatuses.contains(response.status) || (webhooks && response.status == 503) else {
            throw violation("not a status the Server API answers")
        }
        let body = Data(response.body.readableBytesView)
        let hasContentType = response.headers.contains { $0.0 == "content-type" && !$0.1.isEmpty }
        if response.status == 204 {
            guard body.isEmpty else { throw violation("204 with a body") }
            return
        }
        guard !body.isEmpty, hasContentType else { throw violation("no body or no content type") }
        guard let json = try? JSONDecoder().decode(JSONValue.self, from: Data(body)) else {
            throw violation("the body is not JSON")
        }
        if response.status >= 400 {
            guard let error = json.object, error["id"]?.string != nil, case .integer = error["code"],
                error["message"]?.string != nil, error["url"]?.string != nil
            else { throw violation("not a Layer error object") }
            if response.status == 503, error["id"]?.string != "service_unavailable" {
                throw violation("503 other than webhooks not enabled")
            }
        } else {
            guard json.object != nil || json.array != nil else {
                throw violation("a 2xx body that is neither object nor array")
            }
        }
    }

    /// The fuzz target's environment: made on first use, and made again every
    /// ``serverAPIRenewal`` inputs (the store starts from the fixtures again and stays small).
    nonisolated(unsafe) static var serverAPIEnvironment: (environment: ServerAPIFuzzEnvironment, used: Int)?
    static let serverAPIRenewal = 2_000

    /// ``checkServerAPIRequest(_:in:)`` for libFuzzer's synchronous entry point (one thread):
    /// blocks the calling thread, which must not be one of Swift's cooperative pool.
    public static func checkServerAPIRequestBlocking(_ input: [UInt8]) throws(PropertyViolation) {
        if let current = serverAPIEnvironment, current.used >= serverAPIRenewal {
            serverAPIEnvironment = nil
            blocking { await current.environment.close() }
        }
        if serverAPIEnvironment == nil {
            let made = blocking { () async -> Result<ServerAPIFuzzEnvironment, any Error> in
                do { return .success(try await ServerAPIFuzzEnvironment.make()) } catch { return .failure(error) }
            }
            switch made {
            case .success(let environment): serverAPIEnvironment = (environment, 0)
            case .failure(let error): fatalError("cannot make the Server API fuzz environment: \(error)")
            }
        }
        serverAPIEnvironment!.used += 1
        let environment = serverAPIEnvironment!.environment
        let violation = blocking { () async -> PropertyViolation? in
            do throws(PropertyViolation) {
                try await checkServerAPIRequest(input, in: environment)
                return nil
            } catch {
                return error
            }
        }
        if let violation { throw violation }
    }

    /// Runs `body` on a task and waits for it on the calling thread.
    static func blocking<T: Sendable>(_ body: @escaping @Sendable () async -> T) -> T {
        let box = BlockingResult<T>()
        let done = DispatchSemaphore(value: 0)
        Task.detached {
            box.value = await body()
            done.signal()
        }
        done.wait()
        return box.value!
    }
}

/// Where ``NodeFuzzChecks/blocking(_:)``'s task leaves its result (read after the semaphore).
final class BlockingResult<T>: @unchecked Sendable {
    var value: T?
}
