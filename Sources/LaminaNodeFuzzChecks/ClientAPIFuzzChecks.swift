import Foundation
import LaminaNode
import LaminaTransport
import LaminaWireFuzzChecks

extension NodeFuzzChecks {
    /// Client API requests (``ClientAPIFuzzEnvironment/request(_:)`` reads the input): the
    /// answer holds the Server API's property (``checkServerAPIResponse(_:to:input:)``: one
    /// of the API's statuses, never a server error; an error is Layer's error object; a 2xx
    /// body is JSON; 204 has none), and a 401 carries a nonce to log in with or says why not.
    public static func checkClientAPIRequest(_ input: [UInt8], in environment: ClientAPIFuzzEnvironment)
        async throws(PropertyViolation)
    {
        let request = ClientAPIFuzzEnvironment.request(input)
        let response = await environment.answer(input)
        try checkServerAPIResponse(response, to: request, input: input)
    }

    /// The fuzz target's environment, made again every ``serverAPIRenewal`` inputs.
    nonisolated(unsafe) static var clientAPIEnvironment: (environment: ClientAPIFuzzEnvironment, used: Int)?

    /// ``checkClientAPIRequest(_:in:)`` for libFuzzer's synchronous entry point (one thread).
    public static func checkClientAPIRequestBlocking(_ input: [UInt8]) throws(PropertyViolation) {
        if let current = clientAPIEnvironment, current.used >= serverAPIRenewal {
            clientAPIEnvironment = nil
            blocking { await current.environment.close() }
        }
        if clientAPIEnvironment == nil {
            let made = blocking { () async -> Result<ClientAPIFuzzEnvironment, any Error> in
                do { return .success(try await ClientAPIFuzzEnvironment.make()) } catch { return .failure(error) }
            }
            switch made {
            case .success(let environment): clientAPIEnvironment = (environment, 0)
            case .failure(let error): fatalError("cannot make the Client API fuzz environment: \(error)")
            }
        }
        clientAPIEnvironment!.used += 1
        let environment = clientAPIEnvironment!.environment
        let violation = blocking { () async -> PropertyViolation? in
            do throws(PropertyViolation) {
                try await checkClientAPIRequest(input, in: environment)
                return nil
            } catch {
                return error
            }
        }
        if let violation { throw violation }
    }
}
