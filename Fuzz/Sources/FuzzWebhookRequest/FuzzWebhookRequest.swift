import LaminaNodeFuzzChecks

/// libFuzzer entry point: the input as a `POST /webhooks` Content-Type line and JSON body;
/// traps when the registration check breaks `NodeFuzzChecks.checkWebhookRegistration`'s property.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzWebhookRequest(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    let input = Array(UnsafeBufferPointer(start: start, count: count))
    do {
        try NodeFuzzChecks.checkWebhookRegistration(input)
    } catch {
        fatalError("\(error)")
    }
    return 0
}
